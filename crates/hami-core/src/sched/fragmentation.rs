//! Fragmentation as the console reports it, per device type: the memory free on shared devices
//! (devices with a pod on them and room left) that no pending pod's container could use, beside
//! the whole devices free. A container could use a shared device when the device has the memory
//! and cores it asks of each device, the pod's type and UUID selection lets it, and the device's
//! node has as many devices the container could use as it asks for.

use std::collections::{BTreeMap, HashSet};

use crate::devices::Vendors;
use crate::model::VendorId;
use crate::model::request::{FitKey, VendorParams};

use super::report::{DeviceJson, DeviceState, NodeJson};

/// What one container asks of each of its devices, with the pod's device selection: what the
/// console measures the free memory of shared devices against.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DeviceNeed {
    /// The vendor's name, as devices report it.
    pub vendor: String,
    #[serde(skip)]
    pub vendor_id: VendorId,
    /// Devices the container asks for, each with what follows.
    pub nums: u32,
    /// MiB per device; 0 when the request is a share of the device's memory.
    pub mem: u64,
    /// Percent of the device's memory, when `mem` is 0.
    pub mem_pct: u32,
    pub cores: u32,
    /// The pod's type and UUID selections as its vendor parsed them.
    #[serde(skip)]
    pub params: Option<VendorParams>,
    /// Everything the pod's fit reads, hashed: needs with the same key select alike.
    #[serde(skip)]
    pub shape: Option<FitKey>,
}

impl PartialEq for DeviceNeed {
    fn eq(&self, o: &Self) -> bool {
        (&self.vendor, self.nums, self.mem, self.mem_pct, self.cores) == (&o.vendor, o.nums, o.mem, o.mem_pct, o.cores)
    }
}

impl DeviceNeed {
    /// One device of `nums`, asking `mem` MiB (or `mem_pct` percent when `mem` is 0) and `cores`.
    pub fn new(vendor: &str, nums: u32, mem: u64, mem_pct: u32, cores: u32) -> DeviceNeed {
        DeviceNeed { vendor: vendor.into(), nums, mem, mem_pct, cores, ..DeviceNeed::default() }
    }

    /// Whether a device with this much memory (`total`) and this much free could take one of the
    /// container's devices, its selection aside.
    pub fn fits(&self, vendor: &str, total: u64, free_mem: u64, free_cores: u32) -> bool {
        let mem = if self.mem > 0 { self.mem } else { total * u64::from(self.mem_pct.min(100)) / 100 };
        vendor == self.vendor && free_mem >= mem && free_cores >= self.cores
    }

    /// Whether the pod's selection lets the container use a device of type `ty` and id `uuid`.
    pub fn selects(&self, vendors: &Vendors, ty: &str, uuid: &str) -> bool {
        vendors.get(self.vendor_id).selects(self.params.as_ref(), ty, uuid)
    }
}

/// One device type's line.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TypeRow {
    pub devices: usize,
    /// Devices no pod uses, and their memory.
    pub idle: usize,
    pub idle_mib: u64,
    /// Memory free on shared devices.
    pub shared_free_mib: u64,
    /// The part of it no pending container could use, and on how many devices.
    pub fragmented_mib: u64,
    pub fragmented: usize,
}

/// The rows by (vendor, type), and which shared devices are fragmented, by (node, device) index.
#[derive(Debug, Default)]
pub struct Fragmentation {
    pub by_type: BTreeMap<(String, String), TypeRow>,
    pub fragmented: HashSet<(usize, usize)>,
}

impl Fragmentation {
    pub fn total(&self) -> TypeRow {
        let mut t = TypeRow::default();
        for r in self.by_type.values() {
            t.devices += r.devices;
            t.idle += r.idle;
            t.idle_mib += r.idle_mib;
            t.shared_free_mib += r.shared_free_mib;
            t.fragmented_mib += r.fragmented_mib;
            t.fragmented += r.fragmented;
        }
        t
    }
}

/// Takes new pods: healthy, not cordoned, a slot left, on a usable node not held for a preemptor.
pub fn open(n: &NodeJson, d: &DeviceJson) -> bool {
    n.unusable.is_none() && n.held_for.is_none() && d.healthy && !d.cordoned && d.used < d.count
}

/// Has a pod on it and room for another.
pub fn shared(n: &NodeJson, d: &DeviceJson) -> bool {
    DeviceState::of(n, d) == DeviceState::Shared
}

/// Measures `nodes` against the needs of the pending pods' containers.
pub fn measure(nodes: &[NodeJson], needs: &[&DeviceNeed], vendors: &Vendors) -> Fragmentation {
    // Pods of one shape ask alike: one need stands for them all.
    let mut seen = HashSet::new();
    let needs: Vec<&DeviceNeed> = needs
        .iter()
        .copied()
        .filter(|n| n.nums > 0)
        .filter(|n| n.shape.is_none() || seen.insert((n.shape, &n.vendor, n.nums, n.mem, n.mem_pct, n.cores)))
        .collect();
    let mut f = Fragmentation::default();
    let mut usable = Vec::new();
    for (k, n) in nodes.iter().enumerate() {
        // Which shared devices of this node some pending container could use.
        usable.clear();
        usable.resize(n.devices.len(), false);
        for need in &needs {
            let could = |d: &DeviceJson| {
                open(n, d)
                    && need.fits(&d.vendor, d.mem_total, d.mem_total.saturating_sub(d.mem_used), free_cores(d))
                    && need.selects(vendors, &d.ty, &d.uuid)
            };
            if n.devices.iter().filter(|d| could(d)).count() >= need.nums as usize {
                for (u, d) in usable.iter_mut().zip(&n.devices) {
                    *u = *u || could(d);
                }
            }
        }
        for (i, d) in n.devices.iter().enumerate() {
            let row = f.by_type.entry((d.vendor.clone(), d.ty.clone())).or_default();
            row.devices += 1;
            if open(n, d) && d.used == 0 {
                row.idle += 1;
                row.idle_mib += d.mem_total;
            } else if shared(n, d) {
                let free = d.mem_total.saturating_sub(d.mem_used);
                row.shared_free_mib += free;
                if !usable[i] {
                    row.fragmented_mib += free;
                    row.fragmented += 1;
                    f.fragmented.insert((k, i));
                }
            }
        }
    }
    f
}

fn free_cores(d: &DeviceJson) -> u32 {
    d.cores_total.saturating_sub(d.cores_used)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PodView;

    use crate::testing::report_json::{device, node};

    fn dev(ty: &str, index: u32, mem_used: u64, cores_used: u32, used: u32) -> DeviceJson {
        device(ty, format!("GPU-{ty}-{index}"), index, mem_used, cores_used, used)
    }

    /// A need with the NVIDIA selection the pod's annotations make.
    fn need(vendors: &Vendors, nums: u32, mem: u64, cores: u32, annotations: &[(&str, &str)]) -> DeviceNeed {
        let id = vendors.by_name("NVIDIA").expect("NVIDIA is a vendor");
        let mut pod = PodView::default();
        for (k, v) in annotations {
            pod.metadata.annotations.insert((*k).into(), (*v).into());
        }
        DeviceNeed {
            vendor_id: id,
            params: vendors.get(id).pod_params(&pod),
            ..DeviceNeed::new("NVIDIA", nums, mem, 0, cores)
        }
    }

    fn frag(nodes: &[NodeJson], needs: &[DeviceNeed], vendors: &Vendors) -> BTreeMap<String, (u64, u64, usize)> {
        let refs: Vec<&DeviceNeed> = needs.iter().collect();
        let f = measure(nodes, &refs, vendors);
        f.by_type.into_iter().map(|((_, ty), r)| (ty, (r.shared_free_mib, r.fragmented_mib, r.idle))).collect()
    }

    #[test]
    fn free_memory_on_shared_devices_is_fragmented_per_type_unless_a_pending_container_could_use_it() {
        let v = crate::testing::vendors();
        // a: T4 shared with 12288 free; b: T4 shared with 2384 free; c: A100 shared with 8192 free;
        // d: T4 full (10 of 10 slots); e: A100 idle.
        let nodes = vec![node(
            "n",
            vec![
                dev("T4", 0, 4096, 10, 1),
                dev("T4", 1, 14000, 10, 1),
                dev("A100", 2, 8192, 10, 1),
                dev("T4", 3, 8192, 10, 10),
                dev("A100", 4, 0, 0, 0),
            ],
        )];
        let t = |free, frag, idle| (free, frag, idle);
        let f = frag(&nodes, &[], &v);
        assert_eq!(f["T4"], t(14672, 14672, 0), "nothing pending: all of it");
        assert_eq!(f["A100"], t(8192, 8192, 1), "the idle device is whole, not fragmented");
        let f = frag(&nodes, &[need(&v, 1, 4000, 0, &[])], &v);
        assert_eq!((f["T4"], f["A100"]), (t(14672, 2384, 0), t(8192, 0, 1)), "a and c could take it");
        let f = frag(&nodes, &[need(&v, 1, 2000, 95, &[])], &v);
        assert_eq!(f["T4"], t(14672, 14672, 0), "no shared device has the cores");
        let f = frag(&nodes, &[need(&v, 1, 2000, 0, &[("nvidia.com/use-gputype", "A100")])], &v);
        assert_eq!((f["T4"].1, f["A100"].1), (14672, 0), "the pod selects A100 only");
        let f = frag(&nodes, &[need(&v, 1, 2000, 0, &[("nvidia.com/nouse-gputype", "a100")])], &v);
        assert_eq!((f["T4"].1, f["A100"].1), (0, 8192), "the pod refuses A100 (case-insensitive)");
        let f = frag(&nodes, &[need(&v, 1, 2000, 0, &[("nvidia.com/use-gpuuuid", "GPU-T4-1")])], &v);
        assert_eq!((f["T4"].1, f["A100"].1), (12288, 8192), "the pod names device b only");
    }

    #[test]
    fn a_container_asking_several_devices_uses_a_node_only_where_that_many_could_take_it() {
        let v = crate::testing::vendors();
        let two_shared = node("two", vec![dev("T4", 0, 4096, 10, 1), dev("T4", 1, 4096, 10, 1)]);
        let one_shared = node("one", vec![dev("T4", 0, 4096, 10, 1), dev("T4", 1, 16384, 100, 1)]);
        let shared_and_idle = node("mix", vec![dev("T4", 0, 4096, 10, 1), dev("T4", 1, 0, 0, 0)]);
        let nodes = [two_shared, one_shared, shared_and_idle];
        let pair = [need(&v, 2, 8000, 0, &[])];
        let refs: Vec<&DeviceNeed> = pair.iter().collect();
        let f = measure(&nodes, &refs, &v);
        let fragmented: Vec<(usize, usize)> = {
            let mut x: Vec<_> = f.fragmented.iter().copied().collect();
            x.sort();
            x
        };
        assert_eq!(fragmented, [(1, 0)], "only the node with one device that could take it strands memory");
        assert_eq!(f.total().fragmented_mib, 12288);
        let three = [need(&v, 3, 8000, 0, &[])];
        let refs: Vec<&DeviceNeed> = three.iter().collect();
        assert_eq!(measure(&nodes, &refs, &v).total().fragmented, 4, "no node has three: every shared device");
    }

    #[test]
    fn cordoned_unhealthy_held_and_unusable_devices_are_neither_shared_nor_idle() {
        let v = crate::testing::vendors();
        let mut c = dev("T4", 0, 4096, 10, 1);
        c.cordoned = true;
        let mut sick = dev("T4", 1, 0, 0, 0);
        sick.healthy = false;
        let mut held = node("held", vec![dev("T4", 0, 4096, 10, 1), dev("T4", 1, 0, 0, 0)]);
        held.held_for = Some("uid".into());
        let nodes = [node("n", vec![c, sick]), held];
        let f = measure(&nodes, &[], &v);
        assert_eq!(f.total(), TypeRow { devices: 4, ..TypeRow::default() });
    }

    #[test]
    fn pods_of_one_shape_are_measured_once() {
        let v = crate::testing::vendors();
        let mut a = need(&v, 1, 4000, 0, &[]);
        a.shape = Some(crate::model::request::FitKey::of(&PodView::default(), false));
        let needs: Vec<DeviceNeed> = std::iter::repeat_n(a, 1000).collect();
        let refs: Vec<&DeviceNeed> = needs.iter().collect();
        let nodes = [node("n", vec![dev("T4", 0, 4096, 10, 1)])];
        assert_eq!(measure(&nodes, &refs, &v).total().fragmented_mib, 0);
    }
}

#[cfg(test)]
mod selection_tests {
    use crate::model::PodView;
    use crate::model::annotations as keys;

    #[test]
    fn each_vendor_that_selects_devices_by_uuid_says_so_for_fragmentation() {
        let v = crate::testing::vendors();
        let mut pod = PodView::default();
        for k in [
            keys::NVIDIA_USE_UUID,
            keys::cambricon::USE_UUID,
            keys::enflame_drs::USE_UUID,
            keys::metax_sgpu::USE_UUID,
            keys::kunlun::BAIDU_USE_UUID,
            keys::kunlun_vxpu::USE_UUID,
            keys::mthreads::USE_UUID,
        ] {
            pod.metadata.annotations.insert(k.into(), "DEV-A".into());
        }
        let mut refusing: Vec<&str> = v
            .iter()
            .filter(|(_, vendor)| {
                let params = vendor.pod_params(&pod);
                vendor.selects(params.as_ref(), "any", "DEV-A") && !vendor.selects(params.as_ref(), "any", "DEV-B")
            })
            .map(|(_, vendor)| vendor.name())
            .collect();
        refusing.sort_unstable();
        // Each reads its own key: the pod's DEV-A selection keeps DEV-B out on every one.
        assert_eq!(refusing, ["Enflame", "MLU", "Metax-SGPU", "Mthreads", "NVIDIA", "XPU", "kunlun"]);
    }
}
