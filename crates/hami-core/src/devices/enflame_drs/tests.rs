use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::*;
use crate::devices::{Cleanup, HealthRule, NoQuota};
use crate::model::PodDevices;
use crate::model::annotations::GPU_SCHEDULER_POLICY;
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::sched::NodeSnapshot;
use crate::sched::accounting::{Layout, apply, collapse};
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

const MEM: &str = "enflame.com/gcu-memory";
const CORE: &str = "enflame.com/gcu-core";

/// Two 4-slice devices with the 1/2/4-slice profiles of a 48 GB card.
const CAPACITY: &str = r#"{"devices":[{"index":"0","minor":"0","capacity":4},{"index":"1","minor":"1","capacity":"4"}],
    "profiles":{"1g.12gb":"p1","2g.24gb":"p2","4g.48gb":"p4"}}"#;

fn id() -> VendorId {
    vendors().by_name(WORD).unwrap()
}

/// Resource quantities of a container: `(name, value)` pairs.
type Quantities = &'static [(&'static str, &'static str)];

fn container(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> ContainerView {
    let mut c = ContainerView { name: "c".into(), ..Default::default() };
    for (k, v) in limits {
        c.resources.limits.insert((*k).to_owned(), QuantityText((*v).to_owned()));
    }
    for (k, v) in requests {
        c.resources.requests.insert((*k).to_owned(), QuantityText((*v).to_owned()));
    }
    c
}

fn try_fit(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    let v = vendors();
    let req = p.request_with(&v);
    match fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()) {
        Ok(fit) => Ok(codec::encode_pod_devices(fit.devices.vendor(id()).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

// ---------------------------------------------------------------------------------------------
// Request derivation

#[test]
fn requests_are_one_device_by_slices_or_by_memory_and_cores() {
    // HAMi's Enflame DRS request is always one device; direct form: memreq = slices, mode 0; spec
    // form: memreq = gcu-memory, cores = gcu-core, mode -1. Quantities are rounded up (Go's
    // `Value`) in the spec form.
    type Want = Option<(u64, u32, i32)>;
    let rows: [(&str, Quantities, Quantities, Want); 12] = [
        ("slices", &[(DRS, "2")], &[], Some((2, 0, MODE_DIRECT))),
        ("slices from requests", &[], &[(DRS, "3")], Some((3, 0, MODE_DIRECT))),
        ("the slice limit wins", &[(DRS, "1")], &[(DRS, "3")], Some((1, 0, MODE_DIRECT))),
        ("slices win over memory", &[(DRS, "2"), (MEM, "40")], &[], Some((2, 0, MODE_DIRECT))),
        // HAMi: a slice count that is not a positive integer falls through to the spec form.
        ("zero slices fall through", &[(DRS, "0"), (MEM, "20")], &[], Some((20, 0, MODE_SPEC))),
        ("memory", &[(MEM, "20")], &[], Some((20, 0, MODE_SPEC))),
        ("memory and cores", &[(MEM, "20"), (CORE, "30")], &[], Some((20, 30, MODE_SPEC))),
        ("cores only", &[], &[(CORE, "60")], Some((0, 60, MODE_SPEC))),
        ("memory rounds up", &[(MEM, "1.5")], &[], Some((2, 0, MODE_SPEC))),
        ("memory in MiB stays as given", &[(MEM, "20000")], &[], Some((20000, 0, MODE_SPEC))),
        ("zero memory is no constraint", &[(MEM, "0")], &[], Some((0, 0, MODE_SPEC))),
        ("nothing", &[], &[], None),
    ];
    for (what, limits, requests, want) in rows {
        let got = drs().request(VendorId(4), &container(limits, requests), &PodView::default()).unwrap();
        let want = want.map(|(m, c, mode)| ContainerRequest { mode, ..ContainerRequest::new(VendorId(4), 1, m, 0, c) });
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn values_the_request_cannot_hold_are_refused() {
    // HAMi drops these requests (slices or memory past int32, negative values); hami-rs refuses the
    // pod instead of placing it without a reservation.
    for (limits, name) in [
        (&[(DRS, "3000000000")][..], DRS),
        // HAMi falls through to the memory and core form for these; hami-rs refuses them.
        (&[(DRS, "1.5")][..], DRS),
        (&[(DRS, "-1"), (MEM, "20")][..], DRS),
        (&[(MEM, "3000000000")][..], MEM),
        (&[(MEM, "-5")][..], MEM),
        (&[(CORE, "-1")][..], CORE),
    ] {
        let err = drs().request(VendorId(4), &container(limits, &[]), &PodView::default()).unwrap_err();
        assert!(err.to_string().contains(name), "{err}");
    }
}

#[test]
fn empty_names_fall_back_to_the_built_in_ones() {
    // As in HAMi, an empty Enflame DRS name falls back to built-in names (HAMi also tries the
    // legacy vGCU name for the count).
    assert_eq!(EnflameDrs::new(&EnflameConfig::default()).resource_names(), [DRS, MEM, CORE]);
    let legacy = EnflameConfig { resource_name_vgcu: "enflame.com/vgcu".into(), ..Default::default() };
    assert_eq!(EnflameDrs::new(&legacy).resource_names(), ["enflame.com/vgcu", MEM, CORE]);
    let q = drs().quota_names();
    assert_eq!((q.memory.as_deref(), q.cores.as_deref()), (Some(MEM), Some(CORE)));
}

// ---------------------------------------------------------------------------------------------
// Webhook

fn mutate(c: Value) -> (Result<bool, String>, Value) {
    let mut c = c;
    let annotations = Map::new();
    let mut edits = PodEdits::default();
    let r = {
        let mut e = ContainerEdit { container: &mut c, index: 0, is_init: false };
        let mut p = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        drs().mutate(&mut e, &mut p).map_err(|e| e.to_string())
    };
    (r, c)
}

#[test]
fn webhook_validates_and_mirrors_either_form() {
    // HAMi: drs-gcu > 0, mirrored into limits and requests.
    let (r, c) = mutate(json!({"name": "c", "resources": {"limits": {DRS: "2"}}}));
    assert_eq!(r, Ok(true));
    assert_eq!(c["resources"], json!({"limits": {DRS: "2"}, "requests": {DRS: "2"}}));
    let (r, c) = mutate(json!({"name": "c", "resources": {"requests": {DRS: "1"}}}));
    assert_eq!(r, Ok(true));
    assert_eq!(c["resources"], json!({"limits": {DRS: "1"}, "requests": {DRS: "1"}}));
    for bad in ["0", "-1"] {
        let (r, _) = mutate(json!({"name": "c", "resources": {"limits": {DRS: bad}}}));
        assert_eq!(r, Err("enflame.com/drs-gcu must be greater than 0".into()), "{bad}");
    }
    // Memory/core form: memory > 0, cores in (0, 100], both mirrored.
    let (r, c) = mutate(json!({"name": "c", "resources": {"limits": {MEM: "20"}, "requests": {CORE: "50"}}}));
    assert_eq!(r, Ok(true));
    assert_eq!(c["resources"], json!({"limits": {MEM: "20", CORE: "50"}, "requests": {MEM: "20", CORE: "50"}}));
    assert_eq!(
        mutate(json!({"resources": {"limits": {MEM: "0"}}})).0,
        Err("enflame.com/gcu-memory must be greater than 0".into())
    );
    for bad in ["0", "101", "-3"] {
        assert_eq!(
            mutate(json!({"resources": {"limits": {CORE: bad}}})).0,
            Err("enflame.com/gcu-core must be in range (0,100]".into()),
            "{bad}"
        );
    }
    assert_eq!(mutate(json!({"resources": {"limits": {CORE: "100"}}})).0, Ok(true));
    // Neither form: not recognised, unchanged.
    let c = json!({"name": "c", "resources": {"limits": {"cpu": "1"}}});
    assert_eq!(mutate(c.clone()), (Ok(false), c));
}

// ---------------------------------------------------------------------------------------------
// Discovery (`enflame.com/gcu-drs-capacity`)

#[test]
fn capacity_json_becomes_one_device_per_entry() {
    // As HAMi reads it: id `<node>-enflame-drs-<index>`, count = capacity (slices), devmem =
    // largest profile GB × 1024, devcore 100, type Enflame, custominfo {minor, index, profiles,
    // maxSlice}. Capacity may be a number or a string.
    let d = devices(&drs_node(CAPACITY));
    assert_eq!(d.len(), 2);
    assert_eq!((d[0].id.as_str(), d[1].id.as_str()), ("n1-enflame-drs-0", "n1-enflame-drs-1"));
    for (i, dev) in d.iter().enumerate() {
        assert_eq!(
            (dev.index, dev.count, dev.devmem.get(), dev.devcore, &*dev.ty, dev.health),
            (i as u32, 4, 49152, 100, "Enflame", true)
        );
    }
    let custom = Value::Object((*d[1].custom.clone().unwrap()).clone());
    assert_eq!(
        custom,
        json!({"minor": "1", "index": "1", "maxSlice": 4, "profiles": {"1g.12gb": "p1", "2g.24gb": "p2", "4g.48gb": "p4"}})
    );
}

#[test]
fn capacity_entries_tolerate_what_hami_tolerates() {
    // Go decodes keys case-insensitively; an index that is not a number is the entry's position;
    // an empty minor is the index; a fractional capacity is truncated; without GB figures the
    // memory is one GB per slice.
    let v = r#"{"Devices":[{"Index":"x","Capacity":2.9},{"index":"5","minor":" ","capacity":" 3 "}],"Profiles":{"2g":"a","1G.x":"b"}}"#;
    let d = devices(&drs_node(v));
    assert_eq!((d[0].id.as_str(), d[0].index, d[0].count), ("n1-enflame-drs-0", 0, 2));
    assert_eq!((d[1].id.as_str(), d[1].index, d[1].count), ("n1-enflame-drs-5", 5, 3));
    assert_eq!(d[1].custom_str("minor"), Some("5"));
    // Slices parse from "2g" only when a second part exists: "1G.x" gives 1 slice, 0 GB.
    assert_eq!(d[0].devmem.get(), 1024);
}

#[test]
fn unusable_capacity_annotations_are_malformed_and_empty_ones_absent() {
    // As in HAMi's reader, a parse error or an invalid capacity fails the read.
    for bad in [
        "not json",
        "[]",
        r#"{"devices":{},"profiles":{}}"#,
        r#"{"devices":[{"index":"0","capacity":0}],"profiles":{"1g.12gb":"p"}}"#,
        r#"{"devices":[{"index":"0","capacity":"four"}],"profiles":{"1g.12gb":"p"}}"#,
        r#"{"devices":[{"index":"0","capacity":null}],"profiles":{"1g.12gb":"p"}}"#,
        r#"{"devices":[{"index":0,"capacity":1}],"profiles":{"1g.12gb":"p"}}"#,
        r#"{"devices":[{"index":"0","capacity":1}],"profiles":{"big":"p"}}"#,
        r#"{"devices":[{"index":"0","capacity":1}],"profiles":{"1g.12gb":7}}"#,
        r#"{"devices":[{"index":"0","capacity":1}]}"#,
    ] {
        match drs().discover(&drs_node(bad).view()) {
            Discovery::Malformed { key, .. } => assert_eq!(key, keys::DRS_CAPACITY),
            _ => panic!("{bad} should be malformed"),
        }
    }
    for none in [r#"{"devices":[],"profiles":{"1g.12gb":"p"}}"#, "null", "{}"] {
        assert!(matches!(drs().discover(&drs_node(none).view()), Discovery::Absent), "{none}");
    }
    assert!(matches!(drs().discover(&node("n1").view()), Discovery::Absent));
}

#[test]
fn profile_names_parse_as_hami_parses_them() {
    // `<slices>g.<GB>gb`, case-insensitive, spaces around the parts ignored.
    for (name, want) in [
        ("2g.24gb", (2, 24)),
        ("4G.48GB", (4, 48)),
        (" 1g . 12gb ", (1, 12)),
        ("2.24", (2, 24)),
        ("2g.24gb.extra", (2, 24)),
        ("2g.big", (2, 0)),
        ("xg.12gb", (0, 0)),
        ("2g", (0, 0)),
        ("", (0, 0)),
    ] {
        assert_eq!(parse_profile(name), want, "{name:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Profile choice (from the union of the node's `<slices>g.<GB>gb` profiles)

#[test]
fn the_profile_is_chosen_before_any_device() {
    let snap = drs_node(CAPACITY).snapshot(&vendors());
    let profiles = node_profiles(snap.devices.iter().map(|d| &*d.info));
    // Discovery keeps the same list for fit.
    let extra = snap.extra(id()).and_then(|e| e.downcast_ref::<Extra>()).unwrap();
    assert_eq!(extra.profiles, profiles);
    let names: Vec<(&str, u32)> = profiles.iter().map(|p| (p.name.as_str(), p.core_pct)).collect();
    // Sorted by slices then GB; core % = ceil(slices × 100 / max slices).
    assert_eq!(names, [("1g.12gb", 25), ("2g.24gb", 50), ("4g.48gb", 100)]);
    let direct = |n: u64| ContainerRequest { mode: MODE_DIRECT, ..ContainerRequest::new(VendorId(4), 1, n, 0, 0) };
    let spec = |m: u64, c: u32| ContainerRequest { mode: MODE_SPEC, ..ContainerRequest::new(VendorId(4), 1, m, 0, c) };
    let rows = [
        // Direct form: exactly that many slices.
        ("2 slices", direct(2), Some("2g.24gb")),
        ("3 slices: no such profile", direct(3), None),
        // Spec form: the first profile with enough GB and core %.
        ("20 GB", spec(20, 0), Some("2g.24gb")),
        ("24 GB", spec(24, 0), Some("2g.24gb")),
        ("25 GB", spec(25, 0), Some("4g.48gb")),
        ("49 GB: more than any profile", spec(49, 0), None),
        // More than twice the largest profile's GB is MiB, rounded up to GB.
        ("96 is still GB", spec(96, 0), None),
        ("97 is MiB, so 1 GB", spec(97, 0), Some("1g.12gb")),
        ("20000 MiB is 20 GB", spec(20000, 0), Some("2g.24gb")),
        ("30 % cores", spec(0, 30), Some("2g.24gb")),
        ("10 GB and 60 %", spec(10, 60), Some("4g.48gb")),
        ("no constraint", spec(0, 0), Some("1g.12gb")),
    ];
    for (what, req, want) in rows {
        assert_eq!(choose_profile(&profiles, &req).map(|p| p.name.clone()), want.map(str::to_owned), "{what}");
    }
    // No profile → ModeNotFit, counted once over the vendor's devices, as in HAMi.
    assert_eq!(try_fit(&snap, &slices(3)), Err("1/2 ModeNotFit".into()));
    assert_eq!(try_fit(&snap, &pod().limit(MEM, "49")), Err("1/2 ModeNotFit".into()));
}

// ---------------------------------------------------------------------------------------------
// Fit

#[test]
fn the_walk_checks_health_uuid_slots_mutex_memory_and_cores_in_hamis_order() {
    let v = vendors();
    let snap = drs_node(CAPACITY).snapshot(&v);
    // Spread: among equals the device registered last first; the entry takes the profile's memory
    // and cores.
    assert_eq!(try_fit(&snap, &slices(2)), Ok("n1-enflame-drs-1,Enflame,24576,50:;".into()));
    assert_eq!(
        try_fit(&snap, &pod().limit(MEM, "20").limit(CORE, "60")),
        Ok("n1-enflame-drs-1,Enflame,49152,100:;".into())
    );

    let mut s = drs_node(CAPACITY).snapshot(&v);
    s.devices[0].health = false;
    set_usage(&mut s, "n1-enflame-drs-1", 4, 49152, 100);
    assert_eq!(try_fit(&s, &slices(1)), Err("1/2 CardNotHealth, 1/2 CardTimeSlicingExhausted".into()));

    // UUID selection with enflame.com/use-gpuuuid / nouse-gpuuuid.
    let p = slices(1).annotation(keys::USE_UUID, "n1-enflame-drs-0");
    assert_eq!(try_fit(&snap, &p), Ok("n1-enflame-drs-0,Enflame,12288,25:;".into()));
    let p = slices(1).annotation(keys::NOUSE_UUID, "n1-enflame-drs-0, n1-enflame-drs-1");
    assert_eq!(try_fit(&snap, &p), Err("2/2 CardUuidMismatch".into()));

    let mut s = drs_node(CAPACITY).snapshot(&v);
    set_usage(&mut s, "n1-enflame-drs-0", 1, 12288, 25);
    set_usage(&mut s, "n1-enflame-drs-1", 2, 40000, 50);
    // Mutex: busy devices conflict.
    assert_eq!(
        try_fit(&s, &slices(1).annotation(GPU_SCHEDULER_POLICY, "mutex")),
        Err("2/2 ExclusiveDeviceAllocateConflict".into())
    );
    // Memory: 2 slices need 24576 MiB; device 1 has 9152 free. Device 0 has room.
    assert_eq!(try_fit(&s, &slices(2)), Ok("n1-enflame-drs-0,Enflame,24576,50:;".into()));
    assert_eq!(try_fit(&s, &slices(4)), Err("2/2 CardInsufficientMemory".into()));
    // Cores: the 4-slice profile needs all 100 % of a device.
    let mut s = drs_node(CAPACITY).snapshot(&v);
    set_usage(&mut s, "n1-enflame-drs-0", 1, 0, 30);
    set_usage(&mut s, "n1-enflame-drs-1", 2, 40000, 50);
    assert_eq!(try_fit(&s, &slices(4)), Err("1/2 CardInsufficientCore, 1/2 CardInsufficientMemory".into()));
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and the
    // DRS Fit walks the list from the end after choosing the profile, so n1-enflame-drs-1 is
    // tried first, under every policy and request form.
    let snap = drs_node(CAPACITY).snapshot(&vendors());
    let policy = |p: &str| slices(1).annotation(GPU_SCHEDULER_POLICY, p);
    let rows = [
        ("default policy", slices(1), "n1-enflame-drs-1,Enflame,12288,25:;"),
        ("binpack", policy("binpack"), "n1-enflame-drs-1,Enflame,12288,25:;"),
        ("mutex", policy("mutex"), "n1-enflame-drs-1,Enflame,12288,25:;"),
        ("memory and cores", pod().limit(MEM, "24").limit(CORE, "50"), "n1-enflame-drs-1,Enflame,24576,50:;"),
    ];
    for (what, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), Ok(want.into()), "{what}");
    }
}

#[test]
fn a_profile_larger_than_the_free_slices_is_refused() {
    // hami-rs's last check: on a 2-slice device the 4-slice profile passes HAMi's checks (a free
    // slot, memory, cores) and would over-commit the slices; hami-rs refuses it.
    let snap = one_device(2).snapshot(&vendors());
    assert_eq!(try_fit(&snap, &slices(4)), Err("1/1 CardTimeSlicingExhausted".into()));
    assert_eq!(try_fit(&snap, &slices(2)), Ok("n1-enflame-drs-0,Enflame,24576,50:;".into()));
}

#[test]
fn slices_accumulate_over_the_pods_containers() {
    // The usage update is Used += slices, not 1. Two 2-slice containers fill a 4-slice device;
    // a third container finds no slot.
    let snap = one_device(4).snapshot(&vendors());
    let two = slices(2).container("b").limit(DRS, "2");
    assert_eq!(
        try_fit(&snap, &two),
        Ok("n1-enflame-drs-0,Enflame,24576,50:;n1-enflame-drs-0,Enflame,24576,50:;".into())
    );
    let three = two.container("c").limit(DRS, "1");
    assert_eq!(try_fit(&snap, &three), Err("1/1 CardTimeSlicingExhausted".into()));
}

// ---------------------------------------------------------------------------------------------
// Slice accounting when usage is rebuilt (HAMi counts one slot per entry, under-counting slices)

#[test]
fn stored_entries_count_their_profiles_slices() {
    let v = vendors();
    let snap = one_device(4).snapshot(&v);
    let info = snap.devices[0].info.clone();
    let entry = |mem, cores| ContainerDevice::new("n1-enflame-drs-0", WORD, mem, cores);
    // The profile is recognised by its memory and cores; an unknown one counts 1, as in HAMi.
    assert_eq!(drs().entry_slots(&entry(24576, 50), Some(&info)), 2);
    assert_eq!(drs().entry_slots(&entry(49152, 100), Some(&info)), 4);
    assert_eq!(drs().entry_slots(&entry(12288, 25), Some(&info)), 1);
    assert_eq!(drs().entry_slots(&entry(5000, 10), Some(&info)), 1);
    assert_eq!(drs().entry_slots(&entry(24576, 50), None), 1);

    // A stored 2-slice pod holds two slices of the device after the rebuild; HAMi counted one.
    let stored = pod().annotation(keys::ALLOCATED, "n1-enflame-drs-0,Enflame,24576,50:;").view();
    let devices = PodDevices(vec![(id(), v.get(id()).decode_allocation(&stored).unwrap().unwrap())]);
    let lookup = |u: &crate::model::DeviceUuid| snap.devices.iter().find(|d| &d.info.id == u).map(|d| d.info.clone());
    let charges = collapse(&devices, &Layout::default(), &v, &lookup);
    let mut devs = snap.devices.clone();
    apply(&mut devs, &charges);
    assert_eq!((devs[0].used, devs[0].used_mem.get(), devs[0].used_cores), (2, 24576, 50));
}

// ---------------------------------------------------------------------------------------------
// Annotations

#[test]
fn filter_writes_the_allocated_key_and_the_gcu_set() {
    // As HAMi writes them: allocated key only; gcu-assigned "false"; assigned time
    // (unix-ns); assigned-containers per container holding a slice (keys sorted, as Go marshals a
    // map); index, id and minor of the first such container's device; its slice count.
    let v = vendors();
    let snap = one_device(4).snapshot(&v);
    let p = pod().init("setup").main().container("main").limit(DRS, "2").container("side").limit(MEM, "10");
    let req = p.request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(id()).unwrap();
    let cx = WriteCx {
        node: &snap.name,
        devs: &snap.devices,
        devices: cs,
        pod: &req,
        unix_s: 1787293239,
        unix_ns: 1787293239000000001,
    };
    let mut out = Vec::new();
    drs().annotations(&cx, &mut out);
    out.sort();
    let kv = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    assert_eq!(
        out,
        [
            kv(
                "assigned-containers",
                r#"{"main":{"allocated":false,"request":2,"profileID":"p2","profileName":"2g.24gb"},"side":{"allocated":false,"request":1,"profileID":"p1","profileName":"1g.12gb"}}"#
            ),
            kv("enflame.com/gcu-assigned", "false"),
            kv("enflame.com/gcu-assigned-id", "0"),
            kv("enflame.com/gcu-assigned-index", "0"),
            kv("enflame.com/gcu-assigned-minor", "7"),
            kv("enflame.com/gcu-assigned-time", "1787293239000000001"),
            kv("enflame.com/gcu-request-size", "2"),
            // One entry per container (the device-less ones empty): init, the default `c`, main, side.
            kv(
                "hami.io/enflame-vgpu-devices-allocated",
                ";;n1-enflame-drs-0,Enflame,24576,50:;n1-enflame-drs-0,Enflame,12288,25:;"
            ),
        ]
    );
    let mut keys_written: Vec<String> = out.into_iter().map(|(k, _)| k).collect();
    let mut declared = drs().pod_keys();
    keys_written.sort();
    declared.sort();
    assert_eq!(keys_written, declared, "every key written is declared for clearing");
}

#[test]
fn no_lock_always_healthy_nothing_to_clean() {
    // As in HAMi, Enflame DRS is always healthy and never locks the node.
    assert_eq!(
        (drs().lock(), drs().health_rule(), drs().cleanup()),
        (LockKind::None, HealthRule::AlwaysHealthy, Cleanup::Nothing)
    );
    assert_eq!(drs().allocated_key(), Some("hami.io/enflame-vgpu-devices-allocated"));
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant, as a property

#[derive(Clone, Debug)]
enum Ask {
    Slices(u32),
    Spec(u32, u32),
}

fn any_ask() -> impl Strategy<Value = Option<Ask>> {
    prop_oneof![
        1 => Just(None),
        3 => (1u32..=5).prop_map(|n| Some(Ask::Slices(n))),
        2 => (0u32..=60, prop_oneof![Just(0u32), 1u32..=100]).prop_map(|(m, c)| Some(Ask::Spec(m, c))),
    ]
}

fn with_ask(p: PodBuilder, a: &Option<Ask>) -> PodBuilder {
    match a {
        None => p,
        Some(Ask::Slices(n)) => p.limit(DRS, &n.to_string()),
        Some(Ask::Spec(0, 0)) => p.limit(CORE, "100"),
        Some(Ask::Spec(m, 0)) => p.limit(MEM, &m.to_string()),
        Some(Ask::Spec(0, c)) => p.limit(CORE, &c.to_string()),
        Some(Ask::Spec(m, c)) => p.limit(MEM, &m.to_string()).limit(CORE, &c.to_string()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn accepted_placements_never_overcommit_slices_memory_or_cores(
        caps in prop::collection::vec(1u32..=8, 1..=3),
        profiles in prop::sample::subsequence(vec!["1g.12gb", "2g.24gb", "3g.30gb", "4g.48gb", "8g.64gb"], 1..=5),
        pods in prop::collection::vec((prop::collection::vec(any_ask(), 1..=3), any_ask(), any::<bool>()), 1..=8),
    ) {
        let devs: Vec<String> = caps.iter().enumerate().map(|(i, c)| format!(r#"{{"index":"{i}","capacity":{c}}}"#)).collect();
        let profs: Vec<String> = profiles.iter().enumerate().map(|(i, p)| format!(r#""{p}":"id{i}""#)).collect();
        let capacity = format!(r#"{{"devices":[{}],"profiles":{{{}}}}}"#, devs.join(","), profs.join(","));
        let v = vendors();
        let mut snap = drs_node(&capacity).snapshot(&v);
        for (i, (apps, init, mutex)) in pods.iter().enumerate() {
            let mut p = with_ask(pod().name(&format!("p{i}")), &apps[0]);
            for (j, a) in apps.iter().enumerate().skip(1) {
                p = with_ask(p.container(&format!("c{j}")), a);
            }
            p = with_ask(p.init("i"), init);
            if *mutex {
                p = p.annotation(GPU_SCHEDULER_POLICY, "mutex");
            }
            let req = p.request_with(&v);
            place(&mut snap, &req, &v).map_err(TestCaseError::fail)?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine
