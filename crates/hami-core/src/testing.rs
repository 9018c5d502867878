//! Fixture builders for tests, benches and the load generator (the scheduler crate re-exports them): nodes with NVIDIA GPUs, pods with
//! device requests. `node("a").gpu(gpu("GPU-a", 16384).used(1, 12288, 30))`, `pod().gpu(1).mem_mib(4096)`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::device::DeviceConfig;
use crate::devices::{Enable, Vendors};
use crate::model::annotations as keys;
use crate::model::codec;
use crate::model::pod::{ContainerView, NodeView, QuantityText};
use crate::model::request::PolicyDefaults;
use crate::model::{DeviceInfo, MemMiB, MigPlacement, MigProfile, NodeName, PodRequest, PodView};
use crate::sched::NodeSnapshot;

/// The chart's vendors with Ascend and Iluvatar enabled.
pub fn vendors() -> Vendors {
    Vendors::from_config(&DeviceConfig::chart(), Enable { ascend: true, iluvatar: true })
}

/// What a pod holds on one NVIDIA device (vendor 0): `slots`, `mem` MiB and `cores`, no MIG, QoS
/// or position.
pub fn charge(uuid: &str, slots: u32, mem: u64, cores: u32) -> crate::sched::accounting::Charge {
    crate::sched::accounting::Charge {
        uuid: crate::model::DeviceUuid::new(uuid),
        vendor: crate::model::VendorId(0),
        slots,
        mem: MemMiB(mem),
        cores,
        mig: Vec::new(),
        class: crate::model::device::TaskClass::Plain,
        qos: None,
        pos: None,
        placements_only: false,
    }
}

pub fn defaults() -> PolicyDefaults {
    PolicyDefaults { gpu: "spread".into(), node: "binpack".into() }
}

/// One GPU and the usage it starts with.
#[derive(Clone, Debug)]
pub struct Gpu {
    pub info: DeviceInfo,
    pub used: (u32, u64, u32),
}

/// A healthy 10-slot, 100-core NVIDIA GPU in `hami-core` mode.
pub fn gpu(id: &str, mem: u64) -> Gpu {
    let mut info = DeviceInfo::new(id, 0, 10, mem, 100, "NVIDIA-Tesla V100-PCIE-32GB");
    info.mode = Arc::from("hami-core");
    Gpu { info, used: (0, 0, 0) }
}

impl Gpu {
    pub fn used(mut self, slots: u32, mem: u64, cores: u32) -> Self {
        self.used = (slots, mem, cores);
        self
    }
    pub fn numa(mut self, n: i32) -> Self {
        self.info.numa = n;
        self
    }
    pub fn ty(mut self, t: &str) -> Self {
        self.info.ty = Arc::from(t);
        self
    }
    pub fn count(mut self, c: u32) -> Self {
        self.info.count = c;
        self
    }
    pub fn cores(mut self, c: u32) -> Self {
        self.info.devcore = c;
        self
    }
    pub fn index(mut self, i: u32) -> Self {
        self.info.index = i;
        self
    }
    pub fn unhealthy(mut self) -> Self {
        self.info.health = false;
        self
    }
    pub fn mode(mut self, m: &str) -> Self {
        self.info.mode = Arc::from(m);
        self
    }
    /// MIG mode with the given profiles; count becomes the largest instance count.
    pub fn mig(mut self, profiles: Vec<MigProfile>) -> Self {
        self.info.mode = Arc::from("mig");
        self.info.count = profiles.iter().map(|p| p.placements.len() as u32).max().unwrap_or(1);
        self.info.mig_profiles = Arc::from(profiles);
        self
    }
}

/// A MIG profile with placements at the given starts, each `size` slices.
pub fn mig_profile(name: &str, memory_mb: u32, core: u32, slices: u32, starts: &[u32], size: u32) -> MigProfile {
    MigProfile {
        name: Arc::from(name),
        memory_mb,
        core,
        slice_count: slices,
        placements: starts.iter().map(|&s| MigPlacement { start: s, size }).collect(),
    }
}

/// The A100-40GB profiles the NVIDIA plugin publishes (a subset).
pub fn a100_profiles() -> Vec<MigProfile> {
    vec![
        mig_profile("1g.5gb", 4864, 15, 1, &[0, 1, 2, 3, 4, 5, 6], 1),
        mig_profile("2g.10gb", 9984, 29, 2, &[0, 2, 4], 2),
        mig_profile("3g.20gb", 19968, 43, 3, &[0, 4], 4),
        mig_profile("7g.40gb", 40192, 100, 7, &[0], 8),
    ]
}

/// The A100-80GB profiles HAMi's chart allows, with the device plugin's rounded-up cores
/// (1/7 of the SMs is 14.3 %, published as 15).
pub fn a100_80gb_profiles() -> Vec<MigProfile> {
    vec![
        mig_profile("1g.10gb", 9984, 15, 1, &[0, 1, 2, 3, 4, 5, 6], 1),
        mig_profile("2g.20gb", 20096, 29, 2, &[0, 2, 4], 2),
        mig_profile("3g.40gb", 40320, 43, 3, &[0, 4], 4),
        mig_profile("7g.79gb", 80896, 100, 7, &[0], 8),
    ]
}

#[derive(Clone, Debug)]
pub struct NodeBuilder {
    pub name: String,
    pub gpus: Vec<Gpu>,
    pub annotations: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    pub capacity: BTreeMap<String, String>,
}

pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder {
        name: name.to_owned(),
        gpus: Vec::new(),
        annotations: BTreeMap::new(),
        labels: BTreeMap::new(),
        capacity: BTreeMap::new(),
    }
}

impl NodeBuilder {
    /// Adds a GPU; its index is its position unless set.
    pub fn gpu(mut self, mut g: Gpu) -> Self {
        if g.info.index == 0 {
            g.info.index = self.gpus.len() as u32;
        }
        self.gpus.push(g);
        self
    }
    /// `n` idle GPUs of `mem` MiB named `<node>-gpu-<i>`.
    pub fn gpus(mut self, n: usize, mem: u64) -> Self {
        for _ in 0..n {
            let id = format!("GPU-{}-{}", self.name, self.gpus.len());
            self = self.gpu(gpu(&id, mem));
        }
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.annotations.insert(k.to_owned(), v.to_owned());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.to_owned(), v.to_owned());
        self
    }
    pub fn capacity(mut self, k: &str, v: &str) -> Self {
        self.capacity.insert(k.to_owned(), v.to_owned());
        self
    }

    /// The Node as the API server would show it, NVIDIA devices in the register annotation.
    pub fn view(&self) -> NodeView {
        let mut v = NodeView::default();
        v.metadata.name = self.name.clone();
        v.metadata.annotations = self.annotations.clone().into();
        v.metadata.labels = self.labels.clone().into();
        if !self.gpus.is_empty() {
            let infos: Vec<DeviceInfo> = self.gpus.iter().map(|g| g.info.clone()).collect();
            v.metadata.annotations.insert(keys::NVIDIA_REGISTER.into(), codec::encode_node_devices_json(&infos));
        }
        for (k, q) in &self.capacity {
            v.status.capacity.insert(k.clone(), QuantityText(q.clone()));
            v.status.allocatable.insert(k.clone(), QuantityText(q.clone()));
        }
        if !self.gpus.is_empty() {
            let n = QuantityText(self.gpus.len().to_string());
            v.status.capacity.get_or_insert_with("nvidia.com/gpu", || n.clone());
            v.status.allocatable.get_or_insert_with("nvidia.com/gpu", || n);
        }
        v
    }

    /// A snapshot as the engine would see it, with each GPU's starting usage applied.
    pub fn snapshot(&self, vendors: &Vendors) -> NodeSnapshot {
        let nd = vendors.discover(&self.view());
        let mut s = NodeSnapshot::new(NodeName::new(&self.name), nd.devices, nd.extras);
        for (d, g) in s.devices.iter_mut().zip(self.gpus.iter()) {
            d.used = g.used.0;
            d.used_mem = MemMiB(g.used.1);
            d.used_cores = g.used.2;
        }
        s
    }
}

#[derive(Clone, Debug)]
pub struct PodBuilder {
    pub view: PodView,
    /// Which list the builder's container methods edit: false = regular, true = init.
    current_init: bool,
}

/// A pod `default/p` (uid `uid-p`) with one container `c` requesting nothing.
pub fn pod() -> PodBuilder {
    let mut view = PodView::default();
    view.metadata.name = "p".into();
    view.metadata.namespace = "default".into();
    view.metadata.uid = "uid-p".into();
    view.spec.containers.push(ContainerView { name: "c".into(), ..Default::default() });
    PodBuilder { view, current_init: false }
}

impl PodBuilder {
    fn cur(&mut self) -> &mut ContainerView {
        let list = if self.current_init { &mut self.view.spec.init_containers } else { &mut self.view.spec.containers };
        if list.is_empty() {
            list.push(ContainerView { name: "c".into(), ..Default::default() });
        }
        let n = list.len() - 1;
        &mut list[n]
    }
    /// Sets a limit on the current container.
    pub fn limit(mut self, k: &str, v: &str) -> Self {
        self.cur().resources.limits.insert(k.to_owned(), QuantityText(v.to_owned()));
        self
    }
    /// Sets a request (not a limit) on the current container.
    pub fn request(mut self, k: &str, v: &str) -> Self {
        self.cur().resources.requests.insert(k.to_owned(), QuantityText(v.to_owned()));
        self
    }
    pub fn gpu(self, n: u32) -> Self {
        self.limit("nvidia.com/gpu", &n.to_string())
    }
    pub fn mem_mib(self, m: u64) -> Self {
        self.limit("nvidia.com/gpumem", &m.to_string())
    }
    pub fn mem_pct(self, p: u32) -> Self {
        self.limit("nvidia.com/gpumem-percentage", &p.to_string())
    }
    pub fn cores(self, c: u32) -> Self {
        self.limit("nvidia.com/gpucores", &c.to_string())
    }
    /// Adds a regular container and makes it current.
    pub fn container(mut self, name: &str) -> Self {
        self.view.spec.containers.push(ContainerView { name: name.to_owned(), ..Default::default() });
        self.current_init = false;
        self
    }
    /// Adds an init container and makes it current.
    pub fn init(mut self, name: &str) -> Self {
        self.view.spec.init_containers.push(ContainerView { name: name.to_owned(), ..Default::default() });
        self.current_init = true;
        self
    }
    /// Adds a native sidecar (init container with restartPolicy Always) and makes it current.
    pub fn sidecar(mut self, name: &str) -> Self {
        self.view.spec.init_containers.push(ContainerView {
            name: name.to_owned(),
            restart_policy: Some("Always".into()),
            ..Default::default()
        });
        self.current_init = true;
        self
    }
    /// Back to editing the last regular container.
    pub fn main(mut self) -> Self {
        self.current_init = false;
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.view.metadata.annotations.insert(k.to_owned(), v.to_owned());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.view.metadata.labels.insert(k.to_owned(), v.to_owned());
        self
    }
    pub fn name(mut self, n: &str) -> Self {
        self.view.metadata.name = n.to_owned();
        self.view.metadata.uid = format!("uid-{n}");
        self
    }
    /// `spec.priority`, as admission resolves it from the pod's PriorityClass.
    pub fn priority(mut self, p: i32) -> Self {
        self.view.spec.priority = Some(p);
        self
    }
    pub fn preemption_policy(mut self, p: &str) -> Self {
        self.view.spec.preemption_policy = Some(p.to_owned());
        self
    }
    pub fn started(mut self, rfc3339: &str) -> Self {
        self.view.status.start_time = Some(rfc3339.to_owned());
        self
    }
    pub fn namespace(mut self, ns: &str) -> Self {
        self.view.metadata.namespace = ns.to_owned();
        self
    }
    pub fn uid(mut self, u: &str) -> Self {
        self.view.metadata.uid = u.to_owned();
        self
    }
    /// The pod as Filter leaves it: `hami.io/vgpu-node` and NVIDIA's allocated and to-allocate
    /// annotations set to `allocated` (HAMi's encoding, e.g. `GPU-0,NVIDIA,4096,30:;`).
    pub fn placed(self, node: &str, allocated: &str) -> Self {
        self.annotation(keys::ASSIGNED_NODE, node)
            .annotation(keys::NVIDIA_ALLOCATED, allocated)
            .annotation(keys::NVIDIA_TO_ALLOCATE, allocated)
    }
    /// `spec.nodeName` set: the pod is bound.
    pub fn bound_to(mut self, node: &str) -> Self {
        self.view.spec.node_name = Some(node.to_owned());
        self
    }
    /// `status.phase`, e.g. `Running`, `Succeeded`.
    pub fn phase(mut self, p: &str) -> Self {
        self.view.status.phase = Some(p.to_owned());
        self
    }
    /// A deletion timestamp is set: the pod is terminating.
    pub fn terminating(mut self) -> Self {
        self.view.metadata.deletion_timestamp = Some("2026-12-01T08:00:00Z".into());
        self
    }
    pub fn view(&self) -> PodView {
        self.view.clone()
    }
    /// The parsed request with the chart's defaults (spread GPU policy, binpack node policy).
    pub fn request_with(&self, vendors: &Vendors) -> PodRequest {
        vendors.pod_request(&self.view, &defaults()).expect("fixture pods are valid")
    }
}

/// Sets starting usage `(device position, slots, MiB, cores)` on a snapshot, for devices that
/// come from capacity or a register annotation rather than the GPU builder.
pub fn with_usage(mut s: NodeSnapshot, usage: &[(usize, u32, u64, u32)]) -> NodeSnapshot {
    for &(i, slots, mem, cores) in usage {
        if let Some(d) = s.devices.get_mut(i) {
            d.used = slots;
            d.used_mem = MemMiB(mem);
            d.used_cores = cores;
        }
    }
    s
}

/// The allocation invariant: `devices`, collapsed into per-device charges as accounting stores them
/// (init containers as a peak) and applied to the snapshot's usage, keep every device within its
/// slot count, memory and cores, both while init containers may run and after they are released.
/// `Err` names the first device over capacity.
pub fn check_within_capacity(
    snap: &NodeSnapshot,
    req: &PodRequest,
    devices: &crate::model::PodDevices,
    vendors: &Vendors,
) -> Result<(), String> {
    use crate::sched::accounting::{Layout, apply, collapse};
    let info = |u: &crate::model::DeviceUuid| snap.devices.iter().find(|d| &d.info.id == u).map(|d| d.info.clone());
    for init_released in [false, true] {
        let layout = Layout { n_init: req.n_init, sidecars: req.sidecars.clone(), init_released };
        let charges = collapse(devices, &layout, vendors, &info);
        let mut devs = snap.devices.clone();
        let unmatched = apply(&mut devs, &charges);
        if !unmatched.0.is_empty() {
            return Err(format!("charges for unknown devices {:?}", unmatched.0));
        }
        if let Some(d) = devs.iter().find(|d| !d.within_capacity()) {
            return Err(format!(
                "{} over capacity (init released {init_released}): used {}/{}, mem {}/{}, cores {}/{}",
                d.info.id,
                d.used,
                d.info.count,
                d.used_mem.get(),
                d.info.devmem.get(),
                d.used_cores,
                d.info.devcore
            ));
        }
    }
    Ok(())
}

/// Sets one device's starting usage in a snapshot (vendors whose devices the builder does not
/// describe as GPUs). Panics when the id is unknown: a fixture mistake.
pub fn set_usage(snap: &mut NodeSnapshot, id: &str, used: u32, mem: u64, cores: u32) {
    let d = snap.devices.iter_mut().find(|d| d.info.id.as_str() == id).unwrap_or_else(|| panic!("no device {id}"));
    d.used = used;
    d.used_mem = MemMiB(mem);
    d.used_cores = cores;
}

/// Fits `pod` on `snap` and checks the allocation invariant: the placement, collapsed as accounting
/// stores it, keeps every device within its slots, memory and cores, while init containers may run
/// and after they are released. When the pod fits, the snapshot's usage becomes what the
/// reservation holds, so the next pod sees it. `Ok(None)` when the pod does not fit; `Err` names
/// the broken device.
pub fn place(
    snap: &mut NodeSnapshot,
    pod: &PodRequest,
    vendors: &Vendors,
) -> Result<Option<crate::model::PodDevices>, String> {
    use crate::sched::accounting::{Layout, apply, collapse};
    let mut s = crate::sched::Scratch::default();
    let Ok(fit) = crate::sched::fit::fit_pod_devices(snap, pod, vendors, &crate::devices::NoQuota, &mut s) else {
        return Ok(None);
    };
    let before = snap.devices.clone();
    let info = |u: &crate::model::DeviceUuid| before.iter().find(|d| &d.info.id == u).map(|d| d.info.clone());
    let mut held = None;
    for init_released in [true, false] {
        let layout = Layout { n_init: pod.n_init, sidecars: pod.sidecars.clone(), init_released };
        let charges = collapse(&fit.devices, &layout, vendors, &info);
        let mut devs = before.clone();
        let unmatched = apply(&mut devs, &charges);
        if !unmatched.0.is_empty() {
            return Err(format!("charges for unknown devices {unmatched:?}"));
        }
        if let Some(d) = devs.iter().find(|d| !d.within_capacity()) {
            return Err(format!(
                "{} over capacity (init released {init_released}): used {}/{}, mem {}/{}, cores {}/{}; charges {charges:?}",
                d.info.id,
                d.used,
                d.info.count,
                d.used_mem.get(),
                d.info.devmem.get(),
                d.used_cores,
                d.info.devcore
            ));
        }
        held = Some(devs);
    }
    if let Some(devs) = held {
        snap.devices = devs;
    }
    Ok(Some(fit.devices))
}

/// The per-device JSON shapes of a node, for the console's and fragmentation's tests.
pub mod report_json {
    use crate::sched::report::{DeviceJson, NodeJson};

    /// A healthy 10-slot NVIDIA device of 16384 MiB and 100 cores with this much in use.
    pub fn device(ty: &str, uuid: String, index: u32, mem_used: u64, cores_used: u32, used: u32) -> DeviceJson {
        DeviceJson {
            vendor: "NVIDIA".into(),
            uuid,
            ty: ty.into(),
            index,
            numa: 0,
            healthy: true,
            cordoned: false,
            count: 10,
            used,
            mem_total: 16384,
            mem_used,
            cores_total: 100,
            cores_used,
        }
    }

    pub fn node(name: &str, devices: Vec<DeviceJson>) -> NodeJson {
        NodeJson { name: name.into(), devices, annotations: None, unusable: None, held_for: None }
    }
}
