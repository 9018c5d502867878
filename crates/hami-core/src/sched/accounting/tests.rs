use super::*;
use crate::config::device::DeviceConfig;
use crate::devices::nvidia::Nvidia;
use crate::devices::{Discovery, FitCx, Pick, Vendor, WriteCx};
use crate::model::codec::decode_pod_devices;
use crate::model::device::MigSlot;
use crate::model::pod::NodeView;
use crate::model::{ContainerDevice, ContainerRequest, ContainerView, MigPlacement, PodView};
use crate::sched::reason::Rejection;
use crate::testing::{charge, vendors};

const NVIDIA: VendorId = VendorId(0);
const SLICED: VendorId = VendorId(1);

/// An NVIDIA entry `uuid,NVIDIA,mem,cores`.
fn e(uuid: &str, mem: u64, cores: u32) -> ContainerDevice {
    ContainerDevice::new(uuid, "NVIDIA", mem, cores)
}

fn no_info(_: &DeviceUuid) -> Option<Arc<DeviceInfo>> {
    None
}

fn nvidia_only(containers: Vec<ContainerDevices>) -> PodDevices {
    PodDevices(vec![(NVIDIA, containers)])
}

/// Layout with `n_init` leading init containers, the listed ones being sidecars.
fn layout(n_init: usize, sidecar_at: &[usize]) -> Layout {
    Layout { n_init, sidecars: (0..n_init).map(|i| sidecar_at.contains(&i)).collect(), init_released: false }
}

/// (uuid, slots, mem, cores) of each charge, for compact expectations.
fn brief(c: &[Charge]) -> Vec<(&str, u32, u64, u32)> {
    c.iter().map(|c| (c.uuid.as_str(), c.slots, c.mem.get(), c.cores)).collect()
}

fn collapse_nvidia(containers: Vec<ContainerDevices>, l: &Layout) -> Vec<Charge> {
    collapse(&nvidia_only(containers), l, &vendors(), &no_info)
}

#[test]
fn init_peak_and_app_sum_are_compared_field_by_field() {
    // As HAMi collapses a pod: effective = max(init peak, app sum) per field. Init: 8000 MiB, 10
    // cores; apps: 3000 + 2000 MiB, 30 + 30 cores, 2 entries → 8000 MiB, 60 cores, 2 slots.
    let got = collapse_nvidia(
        vec![vec![e("GPU-0", 8000, 10)], vec![e("GPU-0", 3000, 30)], vec![e("GPU-0", 2000, 30)]],
        &layout(1, &[]),
    );
    assert_eq!(brief(&got), [("GPU-0", 2, 8000, 60)]);
    assert_eq!(got[0].vendor, NVIDIA);
    assert_eq!(got[0].class, TaskClass::Plain);
    assert_eq!(got[0].qos, None);
}

#[test]
fn init_containers_count_as_a_peak_not_a_sum() {
    // Init peak = max mem, max cores, slots 1, over init containers (they run one at a time).
    let got = collapse_nvidia(vec![vec![e("GPU-0", 4000, 20)], vec![e("GPU-0", 6000, 10)], vec![]], &layout(2, &[]));
    assert_eq!(brief(&got), [("GPU-0", 1, 6000, 20)]);
}

#[test]
fn app_containers_are_summed_with_one_slot_per_entry() {
    // App sum = Σ mem, Σ cores, slots = number of entries.
    let got = collapse_nvidia(
        vec![vec![e("GPU-0", 1000, 10)], vec![e("GPU-0", 2000, 20), e("GPU-1", 500, 5)], vec![e("GPU-0", 3000, 30)]],
        &layout(0, &[]),
    );
    assert_eq!(brief(&got), [("GPU-0", 3, 6000, 60), ("GPU-1", 1, 500, 5)]);
}

#[test]
fn charges_are_sorted_by_uuid_and_cover_init_only_devices() {
    // One device entry per UUID, sorted by UUID; a device used only by an init container is charged
    // its init peak.
    let got =
        collapse_nvidia(vec![vec![e("GPU-c", 700, 7)], vec![e("GPU-b", 100, 1), e("GPU-a", 200, 2)]], &layout(1, &[]));
    assert_eq!(brief(&got), [("GPU-a", 1, 200, 2), ("GPU-b", 1, 100, 1), ("GPU-c", 1, 700, 7)]);
}

#[test]
fn several_entries_on_one_uuid_in_one_container_add_up() {
    // One MIG GPU may host several instances for the same container; each entry is a slot and every
    // instance is kept for the device's occupancy.
    let slot = |start| MigSlot { profile: Arc::from("1g.5gb"), placement: MigPlacement { start, size: 1 } };
    let mut a = e("GPU-0", 4864, 15);
    a.mig = Some(slot(6));
    let mut b = e("GPU-0", 4864, 15);
    b.mig = Some(slot(5));
    let got = collapse_nvidia(vec![vec![a, b]], &layout(0, &[]));
    assert_eq!(brief(&got), [("GPU-0", 2, 9728, 30)]);
    assert_eq!(got[0].mig, [slot(6), slot(5)]);
}

#[test]
fn several_entries_on_one_uuid_in_an_init_container_count_once() {
    // HAMi takes init containers' entries on one device entry by entry: the largest memory, the
    // largest cores, one slot. Two MIG instances of one init container count as one (their
    // placements stay taken); the larger of that and the regular containers' sum is held.
    let got = collapse_nvidia(
        vec![vec![e("GPU-0", 1000, 10), e("GPU-0", 1000, 10)], vec![e("GPU-0", 500, 5)], vec![]],
        &layout(2, &[]),
    );
    assert_eq!(brief(&got), [("GPU-0", 1, 1000, 10)]);
    // Regular containers still add up entry by entry.
    let got = collapse_nvidia(vec![vec![e("GPU-0", 1000, 10), e("GPU-0", 1000, 10)]], &layout(0, &[]));
    assert_eq!(brief(&got), [("GPU-0", 2, 2000, 20)]);
}

#[test]
fn empty_vendor_lists_collapse_to_no_charges() {
    // A vendor key without devices holds nothing.
    assert!(collapse_nvidia(vec![vec![], vec![]], &layout(1, &[])).is_empty());
    assert!(collapse(&PodDevices::default(), &Layout::default(), &vendors(), &no_info).is_empty());
}

#[test]
fn init_release_keeps_only_regular_containers() {
    // As in HAMi, once every init container succeeded, usage shrinks to the regular containers: the
    // init-only device disappears and the shared one drops to the app sum.
    let mut l = layout(1, &[]);
    l.init_released = true;
    let got = collapse_nvidia(
        vec![vec![e("GPU-0", 8000, 50), e("GPU-1", 8000, 50)], vec![e("GPU-0", 3000, 30)], vec![e("GPU-0", 2000, 30)]],
        &l,
    );
    assert_eq!(brief(&got), [("GPU-0", 2, 5000, 60)]);
}

#[test]
fn sidecars_add_to_the_app_sum() {
    // A native sidecar runs beside the app containers, so it is summed with them.
    let got = collapse_nvidia(vec![vec![e("GPU-0", 2000, 10)], vec![e("GPU-0", 3000, 20)]], &layout(1, &[0]));
    assert_eq!(brief(&got), [("GPU-0", 2, 5000, 30)]);
}

#[test]
fn sidecars_survive_init_release() {
    // Releasing init containers drops plain ones only; the sidecar keeps running.
    let mut l = layout(2, &[0]);
    l.init_released = true;
    let got =
        collapse_nvidia(vec![vec![e("GPU-0", 2000, 10)], vec![e("GPU-0", 9000, 90)], vec![e("GPU-0", 3000, 20)]], &l);
    assert_eq!(brief(&got), [("GPU-0", 2, 5000, 30)]);
}

#[test]
fn a_plain_init_peak_includes_the_sidecars_started_before_it() {
    // A plain init container runs beside the sidecars declared before it.
    // Sidecar 2000/10, init 7000/50, app 1000/10: peak = 9000/60 over 2 slots; app sum 3000/20.
    let got = collapse_nvidia(
        vec![vec![e("GPU-0", 2000, 10)], vec![e("GPU-0", 7000, 50)], vec![e("GPU-0", 1000, 10)]],
        &layout(2, &[0]),
    );
    assert_eq!(brief(&got), [("GPU-0", 2, 9000, 60)]);
}

#[test]
fn a_plain_init_peak_excludes_sidecars_started_after_it() {
    // A sidecar declared after the init container starts only once the init container is done. Init
    // 7000/50 alone; sidecar + app = 3000/20 over 2 slots.
    let got = collapse_nvidia(
        vec![vec![e("GPU-0", 7000, 50)], vec![e("GPU-0", 2000, 10)], vec![e("GPU-0", 1000, 10)]],
        &layout(2, &[1]),
    );
    assert_eq!(brief(&got), [("GPU-0", 2, 7000, 50)]);
}

#[test]
fn native_sidecar_usage_is_the_larger_of_the_init_peak_and_sidecars_plus_apps() {
    // HAMi's collapse of a pod with native sidecars: walking the init containers in order, a
    // sidecar adds to a running sum, a plain init container peaks at that sum plus its own use;
    // the pod holds max(peak, sidecars + apps) per field, and once its plain init containers have
    // succeeded, sidecars + apps (the steady state).
    // (what, init containers in order as (sidecar, uuid, MiB, cores), app containers' entries,
    //  charges while init containers may run, charges in the steady state)
    type Entry = (&'static str, u64, u32);
    type Brief = &'static [(&'static str, u32, u64, u32)];
    type Case = (&'static str, &'static [(bool, Entry)], &'static [Option<Entry>], Brief, Brief);
    let cases: &[Case] = &[
        (
            "a sidecar adds to the app",
            &[(true, ("GPU-0", 4000, 40))],
            &[Some(("GPU-0", 4000, 40))],
            &[("GPU-0", 2, 8000, 80)],
            &[("GPU-0", 2, 8000, 80)],
        ),
        (
            "a sidecar, then a plain init container",
            &[(true, ("GPU-0", 2000, 10)), (false, ("GPU-0", 20000, 60))],
            &[Some(("GPU-0", 10000, 30))],
            &[("GPU-0", 2, 22000, 70)],
            &[("GPU-0", 2, 12000, 40)],
        ),
        (
            "a later sidecar does not raise an earlier init container's peak",
            &[(false, ("GPU-0", 20000, 60)), (true, ("GPU-0", 2000, 10))],
            &[Some(("GPU-0", 10000, 30))],
            &[("GPU-0", 2, 20000, 60)],
            &[("GPU-0", 2, 12000, 40)],
        ),
        (
            "a plain init container, then a sidecar, an app without a GPU",
            &[(false, ("GPU-0", 5000, 50)), (true, ("GPU-0", 8000, 80))],
            &[None],
            &[("GPU-0", 1, 8000, 80)],
            &[("GPU-0", 1, 8000, 80)],
        ),
        (
            "a sidecar, then a plain init container, an app without a GPU",
            &[(true, ("GPU-0", 8000, 80)), (false, ("GPU-0", 5000, 50))],
            &[None],
            &[("GPU-0", 2, 13000, 130)],
            &[("GPU-0", 1, 8000, 80)],
        ),
        (
            "interleaved: the running sum, not every sidecar",
            &[(false, ("GPU-0", 5000, 10)), (true, ("GPU-0", 3000, 30)), (false, ("GPU-0", 4000, 20))],
            &[Some(("GPU-0", 1000, 5))],
            &[("GPU-0", 2, 7000, 50)],
            &[("GPU-0", 2, 4000, 35)],
        ),
        (
            "only sidecars",
            &[(true, ("GPU-0", 3000, 10)), (true, ("GPU-0", 5000, 20))],
            &[Some(("GPU-0", 1000, 5))],
            &[("GPU-0", 3, 9000, 35)],
            &[("GPU-0", 3, 9000, 35)],
        ),
        (
            "per device",
            &[(true, ("GPU-0", 2000, 10)), (false, ("GPU-1", 7000, 70))],
            &[Some(("GPU-0", 3000, 30))],
            &[("GPU-0", 2, 5000, 40), ("GPU-1", 1, 7000, 70)],
            &[("GPU-0", 2, 5000, 40)],
        ),
        (
            "no sidecar: the larger of the init container and the app",
            &[(false, ("GPU-0", 4000, 40))],
            &[Some(("GPU-0", 4000, 40))],
            &[("GPU-0", 1, 4000, 40)],
            &[("GPU-0", 1, 4000, 40)],
        ),
    ];
    for (what, inits, apps, running, steady) in cases {
        let sidecar_at: Vec<usize> = inits.iter().enumerate().filter(|(_, (s, _))| *s).map(|(i, _)| i).collect();
        let entry = |(u, m, c): &Entry| vec![e(u, *m, *c)];
        let containers: Vec<ContainerDevices> =
            inits.iter().map(|(_, x)| entry(x)).chain(apps.iter().map(|a| a.as_ref().map_or(vec![], entry))).collect();
        let mut l = layout(inits.len(), &sidecar_at);
        assert_eq!(brief(&collapse_nvidia(containers.clone(), &l)), *running, "{what}");
        l.init_released = true;
        assert_eq!(brief(&collapse_nvidia(containers, &l)), *steady, "{what}: steady state");
    }
}

/// A vendor whose entries occupy slices in proportion to their cores (as Enflame DRS slices do),
/// to exercise `entry_slots` and the at-least-one-slot rule.
struct Sliced;

impl Vendor for Sliced {
    fn name(&self) -> &str {
        "SLICED"
    }
    fn resource_names(&self) -> Vec<String> {
        Vec::new()
    }
    fn request(
        &self,
        _: VendorId,
        _: &ContainerView,
        _: &PodView,
    ) -> Result<Option<ContainerRequest>, crate::devices::Unusable> {
        Ok(None)
    }
    fn discover(&self, _: &NodeView) -> Discovery {
        Discovery::Absent
    }
    fn fit(&self, _: &FitCx<'_>, _: &mut Vec<Pick>) -> Result<(), Rejection> {
        Err(Rejection::NodeUnregistered)
    }
    fn entry_slots(&self, entry: &ContainerDevice, dev: Option<&DeviceInfo>) -> u32 {
        dev.map_or(1, |d| entry.usedcores * d.count / d.devcore.max(1))
    }
    fn allocated_key(&self) -> Option<&str> {
        None
    }
    fn pod_keys(&self) -> Vec<String> {
        Vec::new()
    }
    fn annotations(&self, _: &WriteCx<'_>, _: &mut Vec<(String, String)>) {}
}

fn two_vendors() -> Vendors {
    Vendors::new(vec![Box::new(Nvidia::new(&DeviceConfig::chart().nvidia)), Box::new(Sliced)])
}

/// The sliced vendor's device: 4 slices over 100 cores.
fn sliced_info(u: &DeviceUuid) -> Option<Arc<DeviceInfo>> {
    (u.as_str() == "S-0").then(|| Arc::new(DeviceInfo::new("S-0", 0, 4, 1000, 100, "SLICED")))
}

#[test]
fn each_vendor_collapses_on_its_own() {
    // Usage is kept per device, per vendor; the same id under two vendors is two charges.
    // Vendor-specific slot counts come from the vendor (50 of 100 cores = 2 of 4 slices).
    let s = |uuid: &str, mem, cores| ContainerDevice::new(uuid, "SLICED", mem, cores);
    let pd = PodDevices(vec![
        (NVIDIA, vec![vec![e("GPU-0", 1000, 10)], vec![e("S-0", 2000, 20)]]),
        (SLICED, vec![vec![], vec![s("S-0", 300, 50)]]),
    ]);
    let got = collapse(&pd, &layout(0, &[]), &two_vendors(), &sliced_info);
    assert_eq!(brief(&got), [("GPU-0", 1, 1000, 10), ("S-0", 1, 2000, 20), ("S-0", 2, 300, 50)]);
    assert_eq!(got.iter().map(|c| c.vendor).collect::<Vec<_>>(), [NVIDIA, NVIDIA, SLICED]);
}

#[test]
fn slots_are_at_least_one() {
    // Slots = max(init slots, app slots, 1): an entry occupying no slice still holds the device.
    let s = ContainerDevice::new("S-0", "SLICED", 100, 0);
    let pd = PodDevices(vec![(SLICED, vec![vec![s]])]);
    let got = collapse(&pd, &layout(0, &[]), &two_vendors(), &sliced_info);
    assert_eq!(brief(&got), [("S-0", 1, 100, 0)]);
}

fn usage(id: &str, mode: &str) -> DeviceUsage {
    let mut info = DeviceInfo::new(id, 0, 10, 16384, 100, "NVIDIA-A100");
    info.mode = Arc::from(mode);
    DeviceUsage::idle(Arc::new(info), NVIDIA)
}

#[test]
fn apply_charges_every_device_with_the_id() {
    // As in HAMi, no early exit: every device whose id equals the UUID is charged,
    // Used += max(slots, 1), Usedmem += mem, Usedcores += cores.
    let mut devs = vec![usage("GPU-0", "hami-core"), usage("GPU-1", "hami-core"), usage("GPU-0", "hami-core")];
    let un = apply(&mut devs, &[charge("GPU-0", 2, 3000, 30), charge("GPU-1", 0, 1000, 10)]);
    assert_eq!(un, Unmatched::default());
    let got: Vec<_> = devs.iter().map(|d| (d.used, d.used_mem.get(), d.used_cores)).collect();
    assert_eq!(got, [(2, 3000, 30), (1, 1000, 10), (2, 3000, 30)]);
    assert!(devs.iter().all(|d| d.health && d.class_count(TaskClass::Plain) == 1));
}

#[test]
fn apply_adds_to_existing_usage() {
    // Usage accumulates over every stored pod.
    let mut devs = vec![usage("GPU-0", "hami-core")];
    apply(&mut devs, &[charge("GPU-0", 1, 3000, 30)]);
    apply(&mut devs, &[charge("GPU-0", 1, 2000, 20)]);
    assert_eq!((devs[0].used, devs[0].used_mem, devs[0].used_cores), (2, MemMiB(5000), 50));
    assert_eq!(devs[0].class_count(TaskClass::Plain), 2);
}

#[test]
fn apply_reports_unmatched_uuids() {
    // Entries matching no device are ignored (and logged).
    let mut devs = vec![usage("GPU-0", "hami-core")];
    let before = devs.clone();
    let un = apply(&mut devs, &[charge("GPU-9", 1, 3000, 30), charge("GPU-8", 1, 1, 1)]);
    assert_eq!(un, Unmatched(vec![DeviceUuid::new("GPU-9"), DeviceUuid::new("GPU-8")]));
    assert_eq!(devs, before);
}

#[test]
fn a_mig_instance_on_a_non_mig_device_marks_it_unhealthy() {
    // As in HAMi, a MIG pod on a hami-core GPU marks it unhealthy in this view; the entry is still
    // charged and no instance is recorded.
    let mut devs = vec![usage("GPU-0", "hami-core")];
    let mut c = charge("GPU-0", 1, 4864, 15);
    c.mig = vec![MigSlot { profile: Arc::from("1g.5gb"), placement: MigPlacement { start: 6, size: 1 } }];
    apply(&mut devs, &[c]);
    assert!(!devs[0].health);
    assert!(devs[0].mig_used.is_empty());
    assert_eq!((devs[0].used, devs[0].used_mem), (1, MemMiB(4864)));
}

#[test]
fn a_mig_device_charged_without_an_instance_is_marked_unhealthy() {
    // As in HAMi, a matched entry on a mig-mode device with no reservation marks it unhealthy.
    let mut devs = vec![usage("GPU-0", "mig")];
    apply(&mut devs, &[charge("GPU-0", 1, 4864, 15)]);
    assert!(!devs[0].health);
}

#[test]
fn a_mig_instance_for_an_unknown_gpu_marks_no_device_unhealthy() {
    // HAMi marks every mig-mode device of the node unhealthy for a reservation on a GPU the node
    // lacks; hami-rs only reports that reservation.
    let mut devs = vec![usage("GPU-0", "mig"), usage("GPU-1", "mig")];
    let mut c = charge("GPU-9", 1, 4864, 15);
    c.mig = vec![MigSlot { profile: Arc::from("1g.5gb"), placement: MigPlacement { start: 6, size: 1 } }];
    let un = apply(&mut devs, &[c]);
    assert_eq!(un, Unmatched(vec![DeviceUuid::new("GPU-9")]));
    assert!(devs.iter().all(|d| d.health && d.used == 0 && d.mig_used.is_empty()));
}

#[test]
fn a_mig_device_records_the_instances_it_is_charged_with() {
    // Reservations on a mig-mode GPU join its occupied list.
    let slot = |start| MigSlot { profile: Arc::from("1g.5gb"), placement: MigPlacement { start, size: 1 } };
    let mut devs = vec![usage("GPU-0", "mig")];
    let mut c = charge("GPU-0", 2, 9728, 30);
    c.mig = vec![slot(6), slot(5)];
    apply(&mut devs, &[c]);
    assert!(devs[0].health);
    assert_eq!(devs[0].mig_used, [slot(6), slot(5)]);
    assert_eq!(devs[0].used, 2);
}

#[test]
fn mig_reservations_beyond_the_entries_keep_their_placements_taken() {
    // As in HAMi, reservations no device entry consumed are still restored into the GPU's occupied
    // placements, with no slot, memory or cores; on a GPU the pod has an entry on, they join that
    // entry's instances.
    let slot = |start| MigSlot { profile: Arc::from("1g.5gb"), placement: MigPlacement { start, size: 1 } };
    let mut charges = vec![{
        let mut c = charge("GPU-0", 1, 4864, 15);
        c.mig = vec![slot(6)];
        c
    }];
    let held = [(NVIDIA, DeviceUuid::new("GPU-0"), slot(5)), (NVIDIA, DeviceUuid::new("GPU-1"), slot(4))];
    add_held(&mut charges, &held);
    assert_eq!(charges.len(), 2);
    assert_eq!(charges[0].mig, [slot(6), slot(5)]);
    assert!(charges[1].placements_only);

    let mut devs = vec![usage("GPU-0", "mig"), usage("GPU-1", "mig"), usage("GPU-2", "hami-core")];
    apply(&mut devs, &charges);
    assert_eq!(devs[0].mig_used, [slot(6), slot(5)]);
    assert_eq!((devs[0].used, devs[0].used_mem), (1, MemMiB(4864)));
    assert_eq!(devs[1].mig_used, [slot(4)]);
    assert_eq!((devs[1].used, devs[1].used_mem, devs[1].used_cores), (0, MemMiB::ZERO, 0));
    assert!(devs[1].health && devs[1].class_count(TaskClass::Plain) == 0);

    // HAMi marks a non-MIG GPU named by such a reservation unhealthy in its view.
    let mut only = Vec::new();
    add_held(&mut only, &[(NVIDIA, DeviceUuid::new("GPU-2"), slot(1))]);
    apply(&mut devs, &only);
    assert!(!devs[2].health && devs[2].used == 0);
}

#[test]
fn apply_sets_the_qos_a_charge_carries() {
    // A charge with a QoS policy sets the device's current policy; one without leaves it.
    let mut devs = vec![usage("GPU-0", "")];
    let mut c = charge("GPU-0", 1, 0, 0);
    c.qos = Some(Arc::from("fixed-share"));
    apply(&mut devs, &[c, charge("GPU-0", 1, 0, 0)]);
    assert_eq!(devs[0].qos.as_deref(), Some("fixed-share"));
}

fn decoded(s: &str) -> Vec<ContainerDevices> {
    decode_pod_devices(s).unwrap()
}

/// An encoded list, which containers request the vendor, and the UUIDs each container should get.
type AlignRow = (&'static str, &'static [bool], Vec<Vec<&'static str>>);

fn shape(list: &[ContainerDevices]) -> Vec<Vec<&str>> {
    list.iter().map(|c| c.iter().map(|d| d.uuid.as_str()).collect()).collect()
}

#[test]
fn padded_lists_are_taken_positionally() {
    // The i-th entry belongs to container i; the empty piece after the final ';' (and any added by
    // plugin rewrites) is dropped.
    let rows: [AlignRow; 4] = [
        ("GPU-1,NVIDIA,3000,30:;", &[true], vec![vec!["GPU-1"]]),
        (";GPU-1,NVIDIA,3000,30:;", &[false, true], vec![vec![], vec!["GPU-1"]]),
        (
            "GPU-1,NVIDIA,2000,30:;;GPU-1,NVIDIA,4000,50:GPU-2,NVIDIA,4000,50:;",
            &[true, false, true],
            vec![vec!["GPU-1"], vec![], vec!["GPU-1", "GPU-2"]],
        ),
        // Each plugin rewrite adds one ';', readers tolerate any number.
        (";;GPU-1,NVIDIA,4000,50:;;;", &[true, false, true], vec![vec![], vec![], vec!["GPU-1"]]),
    ];
    for (s, requesting, want) in rows {
        assert_eq!(shape(&align(decoded(s), requesting)), want, "{s}");
    }
}

#[test]
fn hamis_unpadded_nvidia_list_is_mapped_onto_the_requesting_container() {
    // HAMi pads by device model, not vendor word, so for NVIDIA it writes `GPU-…,NVIDIA,3000,30:;`
    // for a device-less init container followed by a GPU app container; the device belongs to the
    // app container.
    let got = align(decoded("GPU-1,NVIDIA,3000,30:;"), &[false, true]);
    assert_eq!(shape(&got), [vec![], vec!["GPU-1"]]);
    assert_eq!((got[1][0].usedmem, got[1][0].usedcores), (MemMiB(3000), 30));
    // HAMi's unpadded list for init with GPU, app without, app with 2 GPUs.
    let got = align(decoded("GPU-1,NVIDIA,2000,30:;GPU-1,NVIDIA,4000,50:GPU-2,NVIDIA,4000,50:;"), &[true, false, true]);
    assert_eq!(shape(&got), [vec!["GPU-1"], vec![], vec!["GPU-1", "GPU-2"]]);
}

#[test]
fn the_aligned_unpadded_list_is_not_released_with_the_init_container() {
    // With HAMi's unpadded list read positionally, the app container's GPU would count as init
    // usage and be dropped at init release, over-committing the GPU. Aligned, it stays.
    let list = align(decoded("GPU-1,NVIDIA,3000,30:;"), &[false, true]);
    let l = Layout { n_init: 1, sidecars: vec![false], init_released: true };
    assert_eq!(brief(&collapse_nvidia(list, &l)), [("GPU-1", 1, 3000, 30)]);
}

#[test]
fn lists_that_do_not_match_the_requesting_containers_stay_positional() {
    // Only a list whose non-empty entries match the requesting containers one-to-one is re-placed;
    // anything else is taken as written.
    let rows: [AlignRow; 3] = [
        // two non-empty entries, one requesting container
        ("GPU-1,NVIDIA,1,1:;GPU-2,NVIDIA,1,1:;", &[false, true, false], vec![vec!["GPU-1"], vec!["GPU-2"]]),
        // one non-empty entry, two requesting containers
        ("GPU-1,NVIDIA,1,1:;", &[true, false, true], vec![vec!["GPU-1"]]),
        // nothing requested, nothing written
        ("", &[false, false], vec![]),
    ];
    for (s, requesting, want) in rows {
        assert_eq!(shape(&align(decoded(s), requesting)), want, "{s:?}");
    }
}

#[test]
fn a_resolved_position_is_used_only_when_it_still_names_the_device() {
    // The position is a hint: a stale one (devices re-registered in another order) falls back to
    // the scan by id, so usage never lands on the wrong device.
    use crate::model::{DeviceInfo, DeviceUsage};
    use std::sync::Arc;
    let dev = |id: &str| DeviceUsage::idle(Arc::new(DeviceInfo::new(id, 0, 10, 1000, 100, "NVIDIA-T4")), NVIDIA);
    let mut devs = vec![dev("GPU-a"), dev("GPU-b")];
    let mut c = charge("GPU-b", 1, 100, 10);
    c.pos = Some(1);
    let mut stale = charge("GPU-a", 1, 200, 20);
    stale.pos = Some(1);
    assert!(apply(&mut devs, &[c, stale]).0.is_empty());
    assert_eq!((devs[0].used_mem.get(), devs[1].used_mem.get()), (200, 100));
}

#[test]
fn tags_are_kept_only_for_the_vendors_a_pod_holds() {
    use crate::model::annotations::metax_sgpu as mkeys;
    let v = vendors();
    let metax = v.by_name(crate::devices::metax_sgpu::WORD).unwrap();
    let mut annotations = crate::model::pod::Annotations::new();
    annotations.insert(mkeys::APP_CLASS.into(), mkeys::APP_CLASS_OFFLINE.into());
    annotations.insert(mkeys::QOS_POLICY.into(), "best-effort".into());
    let held = tags_of(&v, &annotations, |id| id == metax);
    assert_eq!(held.len(), 1);
    assert_eq!((held[0].0, held[0].1, held[0].2.as_deref()), (metax, TaskClass::Offline, Some("best-effort")));
    // A pod with NVIDIA devices only keeps no tag, whatever its annotations say.
    let nvidia = v.by_name("NVIDIA").unwrap();
    assert!(tags_of(&v, &annotations, |id| id == nvidia).is_empty());
}
