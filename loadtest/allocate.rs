//! The device plugin's Allocate as HAMi's plugins do it (HAMi 4707fb02), without the API calls:
//! which calls kubelet makes for a pod, what one call takes from the pod's to-allocate list, the
//! checks that fail it, and when the pod is done.
//!
//! kubelet calls Allocate once per container that asks for the plugin's resource: init
//! containers first, then app containers, each in spec order. HAMi's plugin does not look at
//! which container kubelet names. It takes the first entry of the decoded to-allocate list that
//! still holds devices, empties it, and works out the container from the entry's position: below
//! the number of init containers it is that init container, else app container
//! `position - #init`. It then compares the entry's device count with the number of ids kubelet
//! sent and writes the whole list back, encoded again. The encoding ends every entry with `;`
//! and the decoding keeps the empty piece after the last `;`, so each rewrite is one `;` longer:
//! `A:;B:;` → `;B:;;` → `;;;;`. The pod is done for a vendor once its value no longer holds any
//! vendor's word (`NVIDIA`, `DCU`, …); only then does the plugin write `bind-phase: success` and
//! release the node lock. Any failed check writes `bind-phase: failed`, releases the lock and
//! leaves the to-allocate value as it was.

use hami_rs::devices::{Enable, Vendors};
use hami_rs::model::annotations as keys;
use hami_rs::model::codec;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde::Serialize;

/// A test may set this on a pod to make the simulated kubelet send that many device ids at the
/// pod's first Allocate call (a count mismatch, as when kubelet and the scheduler disagree).
pub const KUBELET_IDS: &str = "loadtest.hami-rs.io/kubelet-device-ids";

/// One vendor's plugin: its word, the pod keys it reads and the container resource kubelet
/// calls it for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VendorKeys {
    pub word: String,
    pub to_allocate: String,
    pub allocated: Option<String>,
    pub count: String,
}

/// Every vendor the fake plugin plays, and every vendor word (HAMi's plugin tests a value for
/// any of them before it calls the pod done).
#[derive(Clone, Debug)]
pub struct Table {
    pub vendors: Vec<VendorKeys>,
    pub words: Vec<String>,
    /// The memory (MiB) every NVIDIA GPU registers, which a memory percentage is of; 0: unknown
    /// (no percentage is checked).
    pub gpu_mem: u64,
}

impl Table {
    /// The vendors of the chart's device config, Ascend and Iluvatar included.
    pub fn chart() -> Table {
        let cfg = hami_rs::config::device::DeviceConfig::chart();
        let all = Vendors::from_config(&cfg, Enable { ascend: true, iluvatar: true });
        let mut vendors: Vec<VendorKeys> = Vec::new();
        let mut words: Vec<String> = Vec::new();
        for (_, v) in all.iter() {
            let word = v.name().to_owned();
            if !word.is_empty() && !words.contains(&word) {
                words.push(word.clone());
            }
            let count = v.names().count.to_owned();
            let to_allocate = v.pod_keys().into_iter().find(|k| k.ends_with("-devices-to-allocate"));
            let (Some(to_allocate), false) = (to_allocate, count.is_empty()) else { continue };
            if vendors.iter().any(|o| o.to_allocate == to_allocate) {
                continue;
            }
            vendors.push(VendorKeys { word, to_allocate, allocated: v.allocated_key().map(str::to_owned), count });
        }
        Table { vendors, words, gpu_mem: 0 }
    }

    /// Whether HAMi's plugin would call the pod done for this value: no vendor word left in it.
    pub fn finished(&self, value: &str) -> bool {
        !self.words.iter().any(|w| value.contains(w.as_str()))
    }
}

/// One Allocate call kubelet makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// Index into [`Table::vendors`].
    pub vendor: usize,
    /// The container kubelet is starting.
    pub container: String,
    /// How many device ids kubelet sends (the container's count resource).
    pub ids: u32,
}

/// The pod's containers in kubelet's order: init containers, then app containers.
pub fn containers(p: &Pod) -> (Vec<&Container>, usize) {
    let Some(spec) = p.spec.as_ref() else { return (Vec::new(), 0) };
    let init: Vec<&Container> = spec.init_containers.iter().flatten().collect();
    let n = init.len();
    (init.into_iter().chain(spec.containers.iter()).collect(), n)
}

/// The container's amount of `resource` (limits, else requests), 0 when absent or not a whole
/// number.
pub fn count_of(c: &Container, resource: &str) -> u32 {
    let r = c.resources.as_ref();
    let q = r.and_then(|r| r.limits.as_ref()).and_then(|l| l.get(resource));
    let q = q.or_else(|| r.and_then(|r| r.requests.as_ref()).and_then(|l| l.get(resource)));
    q.and_then(|q| q.0.parse().ok()).unwrap_or(0)
}

/// kubelet's Allocate calls for the pod: per container (init first), one per vendor whose count
/// resource it asks for, in table order. [`KUBELET_IDS`] replaces the first call's id count.
pub fn kubelet_calls(t: &Table, p: &Pod) -> Vec<Call> {
    let (all, _) = containers(p);
    let mut calls: Vec<Call> = Vec::new();
    for c in all {
        for (vendor, v) in t.vendors.iter().enumerate() {
            let ids = count_of(c, &v.count);
            if ids > 0 {
                calls.push(Call { vendor, container: c.name.clone(), ids });
            }
        }
    }
    let skew = p.metadata.annotations.as_ref().and_then(|a| a.get(KUBELET_IDS)).and_then(|v| v.parse().ok());
    if let (Some(ids), Some(first)) = (skew, calls.first_mut()) {
        first.ids = ids;
    }
    calls
}

/// The container entries of a to-allocate value as written, one piece per `;` plus the piece
/// after the last one.
fn pieces(value: &str) -> Vec<&str> {
    if value.is_empty() { Vec::new() } else { value.split(';').collect() }
}

/// How many container entries of the value still hold devices.
pub fn pending_entries(value: &str) -> usize {
    pieces(value).iter().filter(|p| p.contains(',')).count()
}

/// Checks the value is written the way HAMi's encoder writes it: every device
/// `uuid,type,mem,cores:` with int32 memory and cores, every container entry ended by `;`.
pub fn check_wire(value: &str) -> Result<(), String> {
    if !value.is_empty() && !value.ends_with(';') {
        return Err(format!("{value:?} does not end with ';'"));
    }
    for piece in pieces(value) {
        if piece.is_empty() {
            continue;
        }
        let Some(devices) = piece.strip_suffix(':') else {
            return Err(format!("entry {piece:?} does not end with ':'"));
        };
        for d in devices.split(':') {
            let f: Vec<&str> = d.split(',').collect();
            if f.len() != 4 || f[0].is_empty() || f[1].is_empty() {
                return Err(format!("device {d:?} is not uuid,type,mem,cores"));
            }
            if f[2].parse::<i32>().is_err() || f[3].parse::<i32>().is_err() {
                return Err(format!("device {d:?}: memory and cores must be int32"));
            }
        }
    }
    codec::decode_pod_devices(value).map(|_| ()).map_err(|e| e.to_string())
}

/// What one successful Allocate did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    pub vendor: String,
    /// The container kubelet called for.
    pub kubelet: String,
    /// The position of the entry taken.
    pub index: usize,
    /// The container that position names.
    pub container: String,
    pub devices: Vec<String>,
    /// The to-allocate value written back.
    pub after: String,
    /// Whether the value left holds no vendor word (the pod is done for this vendor).
    pub last: bool,
}

/// The reasons HAMi's plugin fails an Allocate, and the fake plugin's own checks on hami-rs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fail {
    /// The pod has no to-allocate value for the vendor ("device request not found").
    Missing,
    Decode(String),
    /// At the first call, the allocated value differs from the to-allocate one.
    AllocatedDiffers {
        allocated: Option<String>,
        to_allocate: String,
    },
    /// No entry holds devices ("no pending device allocation found").
    NoEntry,
    /// The entry's position names no container.
    OutOfRange(usize),
    /// The entry's container does not ask for the vendor's count resource.
    NotRequesting {
        index: usize,
        container: String,
    },
    /// The entry's container is not the one kubelet is starting (entries out of position).
    OtherContainer {
        index: usize,
        container: String,
    },
    /// The entry's device count is not the number of ids kubelet sent ("device number not matched").
    Count {
        index: usize,
        devices: usize,
        ids: u32,
    },
    /// The MIG reservations do not match the entry.
    Mig(String),
    /// More memory allocated on a device than the container asks (HAMi's plugin since PR 3075).
    OverRequest {
        container: String,
        device: String,
        allocated: u64,
        requested: u64,
    },
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Missing => write!(f, "device request not found"),
            Fail::Decode(e) => write!(f, "to-allocate value not decodable: {e}"),
            Fail::AllocatedDiffers { allocated, to_allocate } => {
                write!(f, "allocated {allocated:?} differs from to-allocate {to_allocate:?}")
            }
            Fail::NoEntry => write!(f, "no pending device allocation found"),
            Fail::OutOfRange(i) => write!(f, "container index {i} out of range"),
            Fail::NotRequesting { index, container } => {
                write!(f, "entry {index} names container {container}, which asks for no such device")
            }
            Fail::OtherContainer { index, container } => {
                write!(f, "entry {index} names container {container}, not the one kubelet is starting")
            }
            Fail::Count { index, devices, ids } => {
                write!(f, "device number not matched: entry {index} has {devices}, kubelet sent {ids}")
            }
            Fail::Mig(e) => write!(f, "MIG reservations: {e}"),
            Fail::OverRequest { container, device, allocated, requested } => {
                write!(
                    f,
                    "container {container} is allocated {allocated} MB on device {device} but requests {requested} MB"
                )
            }
        }
    }
}

/// One Allocate call on the pod as it is now: the entry it takes and the value it writes back,
/// or why it fails. `first` is whether no call for this vendor has changed the value yet.
pub fn allocate(t: &Table, p: &Pod, call: &Call, first: bool) -> Result<Step, Fail> {
    let v = &t.vendors[call.vendor];
    let annos = p.metadata.annotations.clone().unwrap_or_default();
    let value = annos.get(&v.to_allocate).ok_or(Fail::Missing)?;
    check_wire(value).map_err(Fail::Decode)?;
    if first && let Some(k) = &v.allocated {
        let allocated = annos.get(k);
        if allocated != Some(value) {
            return Err(Fail::AllocatedDiffers { allocated: allocated.cloned(), to_allocate: value.clone() });
        }
    }
    let decoded = codec::decode_pod_devices(value).map_err(|e| Fail::Decode(e.to_string()))?;
    let index = decoded.iter().position(|c| !c.is_empty()).ok_or(Fail::NoEntry)?;
    let (all, _) = containers(p);
    let ctr = all.get(index).ok_or(Fail::OutOfRange(index))?;
    if count_of(ctr, &v.count) == 0 {
        return Err(Fail::NotRequesting { index, container: ctr.name.clone() });
    }
    if ctr.name != call.container {
        return Err(Fail::OtherContainer { index, container: ctr.name.clone() });
    }
    let entry = &decoded[index];
    if entry.len() != call.ids as usize {
        return Err(Fail::Count { index, devices: entry.len(), ids: call.ids });
    }
    let devices: Vec<String> = entry.iter().map(|d| d.uuid.to_string()).collect();
    let mig = annos.get(keys::NVIDIA_MIG_ALLOCATIONS).filter(|_| v.to_allocate == keys::NVIDIA_TO_ALLOCATE);
    if let Some(mig) = mig {
        check_mig(mig, index, &devices).map_err(Fail::Mig)?;
    } else if v.to_allocate == keys::NVIDIA_TO_ALLOCATE
        && let Some(requested) = memory_limit(t, ctr)
    {
        // HAMi's NVIDIA plugin since PR 3075 (MIG instances are not checked).
        if let Some(d) = entry.iter().find(|d| d.usedmem.get() > requested) {
            let (device, allocated) = (d.uuid.to_string(), d.usedmem.get());
            return Err(Fail::OverRequest { container: ctr.name.clone(), device, allocated, requested });
        }
    }
    let mut ps = pieces(value);
    ps[index] = "";
    let after: String = ps.iter().map(|p| format!("{p};")).collect();
    let last = t.finished(&after);
    Ok(Step {
        vendor: v.word.clone(),
        kubelet: call.container.clone(),
        index,
        container: ctr.name.clone(),
        devices,
        after,
        last,
    })
}

/// The most memory (MiB) HAMi's NVIDIA plugin lets a container be allocated on one device: its
/// memory percentage of the card when it asks one (1–100), else the memory it asks, else no bound.
/// The percentage is looked at first, as PR 3075 does.
fn memory_limit(t: &Table, c: &Container) -> Option<u64> {
    let pct = count_of(c, "nvidia.com/gpumem-percentage");
    if (1..=100).contains(&pct) && t.gpu_mem > 0 {
        return Some(t.gpu_mem * u64::from(pct) / 100);
    }
    Some(u64::from(count_of(c, "nvidia.com/gpumem"))).filter(|m| *m > 0)
}

/// HAMi's MIG path: the reservations whose containerIndex is the entry's position, ordered by
/// deviceIndex, one per device of the entry and each on that device's GPU. An entry none of whose
/// GPUs has a reservation and with no reservation at its position is not a MIG entry.
pub fn check_mig(value: &str, index: usize, devices: &[String]) -> Result<(), String> {
    let all = codec::decode_mig_allocations(value).map_err(|e| e.to_string())?;
    let mut mine: Vec<_> = all.iter().filter(|a| a.container_index as usize == index).collect();
    if mine.is_empty() && !all.iter().any(|a| devices.contains(&a.gpu_uuid)) {
        return Ok(());
    }
    if mine.len() != devices.len() {
        return Err(format!(
            "container {index} has {} MIG reservations, requested {} devices",
            mine.len(),
            devices.len()
        ));
    }
    mine.sort_by_key(|a| a.device_index);
    for (i, (a, d)) in mine.iter().zip(devices).enumerate() {
        if a.device_index as usize != i {
            return Err(format!("container {index}: deviceIndex {} where {i} was due", a.device_index));
        }
        if &a.gpu_uuid != d {
            return Err(format!("container {index} device {i}: reservation on {} but the entry has {d}", a.gpu_uuid));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(init: &[(&str, u32)], app: &[(&str, u32)], annos: &[(&str, &str)]) -> Pod {
        let ctr = |(n, g): &(&str, u32)| {
            let limits = if *g > 0 { json!({"nvidia.com/gpu": g.to_string()}) } else { json!({}) };
            json!({"name": n, "image": "x", "resources": {"limits": limits}})
        };
        let annos: serde_json::Map<String, serde_json::Value> =
            annos.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "annotations": annos},
            "spec": {"initContainers": init.iter().map(ctr).collect::<Vec<_>>(), "containers": app.iter().map(ctr).collect::<Vec<_>>()}
        }))
        .unwrap()
    }

    fn dev(u: &str, mem: u32) -> String {
        format!("{u},NVIDIA,{mem},30:")
    }

    /// Runs every kubelet call, feeding each step's value to the next; the steps or the first failure.
    fn run(p: &mut Pod) -> Result<Vec<Step>, (Vec<Step>, Fail)> {
        let t = Table::chart();
        let mut steps = Vec::new();
        for (i, call) in kubelet_calls(&t, p).iter().enumerate() {
            match allocate(&t, p, call, i == 0) {
                Ok(s) => {
                    p.metadata
                        .annotations
                        .get_or_insert_default()
                        .insert(keys::NVIDIA_TO_ALLOCATE.into(), s.after.clone());
                    steps.push(s);
                }
                Err(f) => return Err((steps, f)),
            }
        }
        Ok(steps)
    }

    fn both(v: &str) -> Vec<(&'static str, &str)> {
        vec![(keys::NVIDIA_TO_ALLOCATE, v), (keys::NVIDIA_ALLOCATED, v)]
    }

    fn view(s: &[Step]) -> Vec<(String, usize, String, bool)> {
        s.iter().map(|s| (s.container.clone(), s.index, s.after.clone(), s.last)).collect()
    }

    #[test]
    fn the_table_knows_nvidia_and_every_vendor_word() {
        let t = Table::chart();
        let n = t.vendors.iter().find(|v| v.word == "NVIDIA").unwrap();
        assert_eq!(n.to_allocate, keys::NVIDIA_TO_ALLOCATE);
        assert_eq!(n.allocated.as_deref(), Some(keys::NVIDIA_ALLOCATED));
        assert_eq!(n.count, "nvidia.com/gpu");
        for w in ["NVIDIA", "DCU", "MLU"] {
            assert!(t.words.iter().any(|x| x == w), "{w} in {:?}", t.words);
        }
        assert!(t.finished(";;;;") && !t.finished(";GPU-x,NVIDIA,1,1:;;"));
    }

    #[test]
    fn two_gpu_containers_take_one_entry_each_and_the_value_grows_by_one_semicolon_per_call() {
        let v = format!("{};{};", dev("A", 2000), dev("B", 3000));
        let mut p = pod(&[], &[("c0", 1), ("c1", 1)], &both(&v));
        let s = run(&mut p).unwrap();
        assert_eq!(
            view(&s),
            vec![("c0".into(), 0, format!(";{};;", dev("B", 3000)), false), ("c1".into(), 1, ";;;;".into(), true)]
        );
        assert_eq!(s[0].devices, vec!["A"]);
        assert_eq!(s[1].devices, vec!["B"]);
    }

    #[test]
    fn gpu_then_gpu_less_and_gpu_less_then_gpu() {
        let v = format!("{};;", dev("X", 1));
        let s = run(&mut pod(&[], &[("c0", 1), ("c1", 0)], &both(&v))).unwrap();
        assert_eq!(view(&s), vec![("c0".into(), 0, ";;;".into(), true)]);
        let v = format!(";{};", dev("X", 1));
        let s = run(&mut pod(&[], &[("c0", 0), ("c1", 1)], &both(&v))).unwrap();
        assert_eq!(view(&s), vec![("c1".into(), 1, ";;;".into(), true)]);
    }

    #[test]
    fn an_init_container_goes_first() {
        let v = format!("{};{};", dev("A", 2000), dev("A", 3000));
        let s = run(&mut pod(&[("init0", 1)], &[("app0", 1)], &both(&v))).unwrap();
        assert_eq!(
            view(&s),
            vec![("init0".into(), 0, format!(";{};;", dev("A", 3000)), false), ("app0".into(), 1, ";;;;".into(), true)]
        );
        // A GPU-less init container before a GPU app container.
        let v = format!(";{};", dev("A", 1));
        let s = run(&mut pod(&[("init0", 0)], &[("app0", 1)], &both(&v))).unwrap();
        assert_eq!(view(&s), vec![("app0".into(), 1, ";;;".into(), true)]);
    }

    #[test]
    fn two_devices_in_one_entry() {
        let v = format!("{}{};;", dev("B", 1000), dev("A", 1000));
        let s = run(&mut pod(&[], &[("c0", 2), ("c1", 0)], &both(&v))).unwrap();
        assert_eq!(s[0].devices, vec!["B", "A"]);
        assert_eq!(s[0].after, ";;;");
    }

    #[test]
    fn a_count_mismatch_fails_the_first_call() {
        let v = format!("{};{};", dev("B", 2000), dev("A", 3000));
        let mut annos = both(&v);
        annos.push((KUBELET_IDS, "2"));
        let mut p = pod(&[], &[("c0", 1), ("c1", 1)], &annos);
        let (steps, f) = run(&mut p).unwrap_err();
        assert!(steps.is_empty());
        assert_eq!(f, Fail::Count { index: 0, devices: 1, ids: 2 });
        assert!(f.to_string().starts_with("device number not matched"), "{f}");
    }

    #[test]
    fn positions_that_name_the_wrong_container_fail() {
        // HAMi's own compact form for [GPU-less, GPU]: position 0 names c0, which asks for nothing.
        let v = format!("{};", dev("X", 1));
        let (_, f) = run(&mut pod(&[], &[("c0", 0), ("c1", 1)], &both(&v))).unwrap_err();
        assert_eq!(f, Fail::NotRequesting { index: 0, container: "c0".into() });
        // Beyond the containers.
        let v = format!(";;{};", dev("X", 1));
        let (_, f) = run(&mut pod(&[], &[("c0", 1)], &both(&v))).unwrap_err();
        assert_eq!(f, Fail::OutOfRange(2));
        // Both ask for a GPU, but the entries are swapped with an empty one in front of c0's.
        let v = format!(";{};", dev("X", 1));
        let (_, f) = run(&mut pod(&[], &[("c0", 1), ("c1", 1)], &both(&v))).unwrap_err();
        assert_eq!(f, Fail::OtherContainer { index: 1, container: "c1".into() });
    }

    #[test]
    fn undecodable_missing_or_unequal_values_fail() {
        let t = Table::chart();
        let call = Call { vendor: 0, container: "c0".into(), ids: 1 };
        assert_eq!(t.vendors[0].word, "NVIDIA");
        let p = pod(&[], &[("c0", 1)], &[]);
        assert_eq!(allocate(&t, &p, &call, true), Err(Fail::Missing));
        for bad in [
            "A,NVIDIA,1,1;",
            "A,NVIDIA,1:;",
            "A,NVIDIA,1,1,9:;",
            "A,NVIDIA,x,1:;",
            "A,NVIDIA,1,99999999999:;",
            "A,NVIDIA,1,1:",
        ] {
            let p = pod(&[], &[("c0", 1)], &both(bad));
            assert!(matches!(allocate(&t, &p, &call, true), Err(Fail::Decode(_))), "{bad}");
        }
        let v = format!("{};", dev("A", 1));
        let p = pod(&[], &[("c0", 1)], &[(keys::NVIDIA_TO_ALLOCATE, &v), (keys::NVIDIA_ALLOCATED, ";")]);
        assert!(matches!(allocate(&t, &p, &call, true), Err(Fail::AllocatedDiffers { .. })));
        // Only the first call compares: later ones see the value already rewritten.
        assert!(allocate(&t, &p, &call, false).is_ok());
        let p = pod(&[], &[("c0", 1)], &both(";;"));
        assert_eq!(allocate(&t, &p, &call, true), Err(Fail::NoEntry));
    }

    #[test]
    fn an_allocation_above_what_the_container_asks_fails_as_hamis_plugin_fails_it() {
        // HAMi's NVIDIA plugin since PR 3075: the percentage of the card when one is asked, else
        // the memory asked, bounds what a device may be allocated.
        let t = Table { gpu_mem: 16384, ..Table::chart() };
        let with = |limits: &[(&str, &str)], allocated: &str| {
            let mut p = pod(&[], &[("app", 1)], &both(allocated));
            let c = &mut p.spec.as_mut().unwrap().containers[0];
            let l = c.resources.get_or_insert_default().limits.get_or_insert_default();
            for (k, v) in limits {
                l.insert((*k).to_owned(), k8s_openapi::apimachinery::pkg::api::resource::Quantity((*v).to_owned()));
            }
            let call = kubelet_calls(&t, &p).remove(0);
            allocate(&t, &p, &call, true)
        };
        let mem = [("nvidia.com/gpumem", "4000")];
        assert!(with(&mem, &format!("{};", dev("GPU-0", 4000))).is_ok());
        let over = with(&mem, &format!("{};", dev("GPU-0", 4001))).unwrap_err();
        assert_eq!(over.to_string(), "container app is allocated 4001 MB on device GPU-0 but requests 4000 MB");
        // Both asked: the percentage (25 % of 16384 = 4096) is the bound, whatever the memory says.
        let both_asked = [("nvidia.com/gpumem", "12000"), ("nvidia.com/gpumem-percentage", "25")];
        assert!(with(&both_asked, &format!("{};", dev("GPU-0", 4096))).is_ok());
        assert!(matches!(with(&both_asked, &format!("{};", dev("GPU-0", 12000))), Err(Fail::OverRequest { .. })));
        // Nothing asked: no bound.
        assert!(with(&[], &format!("{};", dev("GPU-0", 16384))).is_ok());
    }

    #[test]
    fn mig_reservations_must_match_the_entry() {
        let mig = |ci: u32, di: u32, g: &str| json!({"containerIndex": ci, "deviceIndex": di, "gpuUUID": g, "profile": "1g.5gb", "placement": {"start": 0, "size": 1}});
        let v = format!(";{}{};", dev("G0", 4864), dev("G1", 4864));
        let ok = json!([mig(1, 1, "G1"), mig(1, 0, "G0")]).to_string();
        let mut annos = both(&v);
        annos.push((keys::NVIDIA_MIG_ALLOCATIONS, &ok));
        let s = run(&mut pod(&[], &[("c0", 0), ("c1", 2)], &annos)).unwrap();
        assert_eq!(s[0].devices, vec!["G0", "G1"]);
        for (bad, why) in [
            (json!([mig(1, 0, "G0")]), "has 1 MIG reservations, requested 2"),
            (json!([mig(0, 0, "G0"), mig(0, 1, "G1")]), "has 0 MIG reservations"),
            (json!([mig(1, 0, "G1"), mig(1, 1, "G0")]), "reservation on G1"),
            (json!([mig(1, 0, "G0"), mig(1, 2, "G1")]), "deviceIndex 2"),
        ] {
            let bad = bad.to_string();
            let mut annos = both(&v);
            annos.push((keys::NVIDIA_MIG_ALLOCATIONS, &bad));
            let (_, f) = run(&mut pod(&[], &[("c0", 0), ("c1", 2)], &annos)).unwrap_err();
            assert!(matches!(&f, Fail::Mig(e) if e.contains(why)), "{bad}: {f}");
        }
        // Reservations of other GPUs at other positions leave a hami-core entry alone.
        assert_eq!(check_mig(&json!([mig(0, 0, "Z")]).to_string(), 1, &["A".into()]), Ok(()));
    }
}
