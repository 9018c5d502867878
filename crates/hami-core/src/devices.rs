//! The `Vendor` trait (one accelerator family) and the registry of configured vendors. Everything
//! vendor-specific lives behind the trait; the engine, the webhook and the backends never branch
//! on a vendor. Vendors are pure: no client, no clock, no logging on the success path.

use std::any::Any;
use std::sync::Arc;

use crate::model::codec;
use crate::model::device::MigSlot;
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::reason::Rejection;
pub use crate::model::request::Unusable;
use crate::model::request::{self, ContainerRequest, ContainerRequests, PolicyDefaults};
use crate::model::{
    ContainerDevice, ContainerDevices, DeviceInfo, DeviceUsage, DeviceUuid, MemMiB, NodeName, PodDevices, PodRequest,
    PodView, VendorId,
};

mod discovery;
pub use discovery::{Discovery, NodeExtra};

pub mod amd;
pub mod ascend;
pub mod awsneuron;
pub mod biren;
pub mod cambricon;
pub mod enflame;
pub mod enflame_drs;
pub mod hygon;
pub mod iluvatar;
pub mod kunlun;
pub mod kunlun_vxpu;
pub mod metax;
pub mod metax_sgpu;
pub mod mthreads;
pub mod nvidia;
pub mod vastai;

/// Which node lock a vendor's bind takes; HAMi's device plugins release the one their vendor uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockKind {
    /// `hami.io/mutex.lock`, owner-checked, shared by most vendors.
    Shared,
    /// `cambricon.com/dsmlu.lock`, a bare time, 2-minute expiry.
    Cambricon,
    None,
}

/// How a vendor decides whether its devices on a node are alive, HAMi's rule for each vendor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthRule {
    /// The `Requesting_…` handshake on `key`, with the allocatable fallback on `count_resource`.
    Handshake {
        key: String,
        count_resource: String,
    },
    AlwaysHealthy,
    /// Healthy iff `status.capacity[resource] > 0`.
    CapacityPositive {
        resource: String,
    },
    /// Healthy iff discovery found at least one device.
    DevicesListed,
}

/// What a vendor removes from the node when its devices there are found dead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cleanup {
    Nothing,
    RemoveAnnotation(String),
}

/// Memory and core resource names for quota, with the memory factor. As in HAMi, only
/// `limits.<memory>` and `limits.<cores>` quota keys count; count resources are never limited.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuotaNames {
    pub memory: Option<String>,
    pub cores: Option<String>,
    /// Quota limits are in request units; scheduler usage is MiB, so limits scale by this.
    pub memory_factor: u64,
}

/// A vendor's word and the container resources it reads. An empty resource name is one the vendor
/// does not have or the device config switched off.
#[derive(Clone, Copy, Debug, Default)]
pub struct Names<'a> {
    /// The common word, as written in annotations (`NVIDIA`, `MLU`, `Ascend910B3`).
    pub word: &'a str,
    pub count: &'a str,
    pub memory: &'a str,
    pub cores: &'a str,
    /// Quota memory limits are in request units; scheduler usage is MiB, so limits scale by this.
    pub memory_factor: u64,
}

impl<'a> Names<'a> {
    pub fn new(word: &'a str, count: &'a str, memory: &'a str, cores: &'a str, memory_factor: u64) -> Names<'a> {
        Names { word, count, memory, cores, memory_factor }
    }

    /// A vendor whose containers give a device count and nothing else (so no quota applies).
    pub fn count_only(word: &'a str, count: &'a str) -> Names<'a> {
        Names { word, count, ..Names::default() }
    }
}

impl QuotaNames {
    /// The memory and core resources quota counts; an empty name is a resource the device config
    /// switched off.
    pub fn of(memory: &str, cores: &str, memory_factor: u64) -> QuotaNames {
        let named = |n: &str| Some(n.to_owned()).filter(|n| !n.is_empty());
        QuotaNames { memory: named(memory), cores: named(cores), memory_factor }
    }
}

/// The pod keys most vendors' Filter writes the device list under, identical: to-allocate (read
/// by the device plugin) and allocated (read back when usage is rebuilt).
#[derive(Clone, Copy, Debug)]
pub struct DeviceKeys<'a> {
    pub to_allocate: &'a str,
    pub allocated: &'a str,
}

impl DeviceKeys<'_> {
    pub fn names(&self) -> Vec<String> {
        vec![self.to_allocate.to_owned(), self.allocated.to_owned()]
    }

    /// Writes the encoded device list under both keys.
    pub fn write(&self, devices: &[ContainerDevices], out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(devices);
        out.push((self.to_allocate.to_owned(), v.clone()));
        out.push((self.allocated.to_owned(), v));
    }
}

/// Namespace quota as fit sees it.
pub trait QuotaCheck: Sync {
    /// Whether `namespace` may take `mem` more memory and `cores` more cores of `vendor`.
    fn fits(&self, namespace: &str, vendor: VendorId, mem: MemMiB, cores: u32) -> bool;

    /// True when nothing is limited, so fits need not work out the pod's usage at all.
    fn unlimited(&self) -> bool {
        false
    }
}

/// No quota at all.
pub struct NoQuota;
impl QuotaCheck for NoQuota {
    fn fits(&self, _: &str, _: VendorId, _: MemMiB, _: u32) -> bool {
        true
    }
    fn unlimited(&self) -> bool {
        true
    }
}

/// A device chosen by a vendor's fit: its position in the node's list and the annotation entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Pick {
    pub pos: u16,
    pub dev: ContainerDevice,
}

/// What a vendor's fit sees for one container's request.
pub struct FitCx<'a> {
    pub node: &'a NodeName,
    /// Every device of the node with the usage so far (this pod's earlier containers included).
    pub devs: &'a [DeviceUsage],
    /// Positions of this vendor's devices in policy order; the walk tries them from the end.
    pub order: &'a [u16],
    pub req: ContainerRequest,
    pub pod: &'a PodRequest,
    pub params: Option<&'a (dyn Any + Send + Sync)>,
    pub extra: Option<&'a (dyn Any + Send + Sync)>,
    /// Position of the container in the combined list (init containers first).
    pub container: usize,
    /// This vendor's entries for the pod's earlier containers.
    pub earlier: &'a [ContainerDevices],
    pub quota: &'a dyn QuotaCheck,
    /// Memory and cores of this vendor the pod already holds in this evaluation (for quota).
    pub pod_mem: MemMiB,
    pub pod_cores: u32,
}

impl FitCx<'_> {
    /// What the vendor's `pod_params` parsed from the pod, as the vendor's own type.
    pub fn params_as<T: 'static>(&self) -> Option<&T> {
        self.params.and_then(|p| p.downcast_ref::<T>())
    }
}

/// What a vendor's node score sees; HAMi adds it to the node's default score.
pub struct ScoreCx<'a> {
    pub node: &'a NodeName,
    pub extra: Option<&'a (dyn Any + Send + Sync)>,
    /// The node's devices before this pod.
    pub before: &'a [DeviceUsage],
    /// This vendor's per-container entries for the pod.
    pub devices: &'a [ContainerDevices],
    pub pod: &'a PodRequest,
    pub policy: request::NodePolicy,
}

/// What a vendor's annotation writer sees.
pub struct WriteCx<'a> {
    pub node: &'a NodeName,
    /// The node's devices (to look up indexes and custom info of chosen devices).
    pub devs: &'a [DeviceUsage],
    pub devices: &'a [ContainerDevices],
    pub pod: &'a PodRequest,
    /// Decision time, unix seconds and nanoseconds.
    pub unix_s: i64,
    pub unix_ns: i128,
}

impl WriteCx<'_> {
    /// The node's device an entry names.
    pub fn device(&self, entry: &ContainerDevice) -> Option<&DeviceUsage> {
        self.devs.iter().find(|d| d.info.id == entry.uuid)
    }

    /// The vendor this part of the decision belongs to, found through its first chosen device.
    pub fn vendor(&self) -> Option<VendorId> {
        self.devices.iter().flatten().next().and_then(|e| self.device(e)).map(|d| d.vendor)
    }
}

/// One accelerator family.
pub trait Vendor: Send + Sync + 'static {
    /// The vendor's word and resources; the defaults of `name`, `resource_names`, `quota_names`
    /// and `mutate` follow from it.
    fn names(&self) -> Names<'_> {
        Names::default()
    }

    /// The common word, as written in annotations (`NVIDIA`, `MLU`, `Ascend910B3`).
    fn name(&self) -> &str {
        self.names().word
    }

    /// Every resource name the vendor owns (count first), for `managedResources`.
    fn resource_names(&self) -> Vec<String> {
        let n = self.names();
        [n.count, n.memory, n.cores].into_iter().filter(|r| !r.is_empty()).map(str::to_owned).collect()
    }

    /// The memory and core resources namespace quota counts for this vendor.
    fn quota_names(&self) -> QuotaNames {
        let n = self.names();
        QuotaNames::of(n.memory, n.cores, n.memory_factor)
    }

    /// The container's request, `Ok(None)` when it requests nothing of this vendor, `Err` with a
    /// reason when a quantity is unusable (hami-rs refuses such pods instead of dropping them).
    fn request(
        &self,
        id: VendorId,
        c: &crate::model::ContainerView,
        pod: &PodView,
    ) -> Result<Option<ContainerRequest>, Unusable>;

    /// Parses the pod annotations this vendor reads, once per pod.
    fn pod_params(&self, _pod: &PodView) -> Option<request::VendorParams> {
        None
    }

    /// Whether the pod's parameters (from `pod_params`) let it use a device of type `ty` and id
    /// `uuid`: what the console asks when it measures which free memory pending pods could use.
    /// Vendors whose parameters are the common type and UUID selections need not override it.
    fn selects(&self, params: Option<&request::VendorParams>, ty: &str, uuid: &str) -> bool {
        params_allow(params, |s: &common::Selections| s.types.allows(ty) && s.uuids.allows(uuid))
    }

    /// The webhook's mutation of one container; `Ok(true)` when it recognised a request. The
    /// default is HAMi's rule for the vendors whose mutation changes nothing: the container is
    /// recognised iff its count is in limits.
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, Unusable> {
        Ok(common::count_in_limits(c, self.names().count))
    }

    /// Devices and node extras from the node's annotations or capacity.
    fn discover(&self, node: &NodeView) -> Discovery;

    fn health_rule(&self) -> HealthRule {
        HealthRule::AlwaysHealthy
    }

    fn cleanup(&self) -> Cleanup {
        Cleanup::Nothing
    }

    /// Whether the device-count pre-check (`NodeInsufficientDevice`) is skipped (NVIDIA MIG).
    fn count_check_exempt(&self, _cx: &FitCx<'_>) -> bool {
        false
    }

    /// Chooses devices for one container's request, appending them to `out`.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection>;

    /// The IDs of this vendor's devices on a node that take no new allocations, read from the
    /// node's extras: reports show them apart from idle ones.
    fn cordoned<'a>(&self, _extra: Option<&'a (dyn Any + Send + Sync)>) -> &'a [String] {
        &[]
    }

    /// Applies one chosen entry to a device in the evaluation's working usage. May rewrite the
    /// entry (NVIDIA MIG takes the profile's memory and cores).
    fn charge(&self, dev: &mut DeviceUsage, entry: &mut ContainerDevice, _pod: &PodRequest) {
        dev.used = dev.used.saturating_add(1);
        dev.used_mem += entry.usedmem;
        dev.used_cores = dev.used_cores.saturating_add(entry.usedcores);
    }

    /// The task class and QoS a pod's allocation carries on this vendor's devices (Metax sGPU
    /// co-locates online/offline pods by them); `None` for plain pods.
    fn task_tag(
        &self,
        _annotations: &crate::model::pod::Annotations,
    ) -> Option<(crate::model::device::TaskClass, Option<Arc<str>>)> {
        None
    }

    /// Slots one stored entry occupies when usage is rebuilt from pods (Enflame DRS: slices).
    fn entry_slots(&self, _entry: &ContainerDevice, _dev: Option<&DeviceInfo>) -> u32 {
        1
    }

    /// The vendor's addition to the node score (0 for most vendors).
    fn node_score(&self, _cx: &ScoreCx<'_>) -> f32 {
        0.0
    }

    /// The two keys Filter writes the device list under, for vendors that write HAMi's usual
    /// pair; the defaults below then need no overriding.
    fn device_keys(&self) -> Option<DeviceKeys<'_>> {
        None
    }

    /// The key usage is rebuilt from, if the vendor writes one.
    fn allocated_key(&self) -> Option<&str> {
        self.device_keys().map(|k| k.allocated)
    }

    /// Every pod key this vendor may write (cleared when a later decision does not use it).
    fn pod_keys(&self) -> Vec<String> {
        self.device_keys().map(|k| k.names()).unwrap_or_default()
    }

    /// The keys that carry this vendor's decision to its device plugin (the pending and the
    /// allocated list). Only the scheduler writes them: a pod created with one is refused, or it
    /// could pick its own card and hold usage no one counts.
    fn decision_keys(&self) -> Vec<String> {
        match self.device_keys() {
            Some(k) => k.names(),
            None => self.allocated_key().map(|k| vec![k.to_owned()]).unwrap_or_default(),
        }
    }

    /// The annotations Filter writes for this vendor's part of the decision.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        if let Some(k) = self.device_keys() {
            k.write(cx.devices, out);
        }
    }

    /// Reads back what this vendor allocated to a pod (restart rebuild, pods seen by the watcher).
    fn decode_allocation(&self, pod: &PodView) -> Result<Option<Vec<ContainerDevices>>, codec::Error> {
        match self.allocated_key().and_then(|k| pod.annotation(k)) {
            None => Ok(None),
            Some(v) => codec::decode_pod_devices(v).map(Some),
        }
    }

    /// Placements a pod still holds beyond the entries `decode_allocation` gives (NVIDIA's MIG
    /// reservations that no entry consumed).
    fn decode_held(&self, _pod: &PodView) -> Vec<(DeviceUuid, MigSlot)> {
        Vec::new()
    }

    fn lock(&self) -> LockKind {
        LockKind::Shared
    }
}

/// What a vendor's `selects` answers from its own parameters of type `P`: `allows` of them, or
/// every device for a pod without them.
pub(crate) fn params_allow<P: std::any::Any>(
    params: Option<&request::VendorParams>,
    allows: impl FnOnce(&P) -> bool,
) -> bool {
    params.and_then(|p| p.downcast_ref::<P>()).is_none_or(allows)
}

/// The configured vendors, in HAMi's registration order (NVIDIA first, then the others, Ascend and
/// Iluvatar chips last). `VendorId` is the position in this list. `Vendors::from_config`, beside
/// the device config in `config/device.rs`, builds it from that file.
pub struct Vendors {
    list: Vec<Box<dyn Vendor>>,
    /// Every vendor's pod annotation keys in registry order, as `Vendor::pod_keys` gives them:
    /// Filter's patch clears the ones a pod carries on every decision.
    pod_keys: Vec<String>,
    /// See [`Vendors::scheduler_keys`].
    scheduler_keys: Vec<String>,
}

/// A node's devices from every vendor, as one list (vendors in registry order).
pub struct NodeDevices {
    pub devices: Vec<DeviceUsage>,
    /// Indexed by `VendorId`.
    pub extras: Vec<Option<NodeExtra>>,
    /// Vendors whose annotation could not be decoded.
    pub malformed: Vec<(VendorId, String, codec::Error)>,
}

/// Flags that switch vendors on (HAMi's `--enable-ascend`, `--enable-iluvatar`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Enable {
    pub ascend: bool,
    pub iluvatar: bool,
}

impl Vendors {
    pub fn new(list: Vec<Box<dyn Vendor>>) -> Vendors {
        assert!(list.len() < usize::from(u8::MAX), "too many vendors");
        let pod_keys = list.iter().flat_map(|v| v.pod_keys()).collect();
        use crate::model::annotations as keys;
        let bind = [keys::ASSIGNED_NODE, keys::BIND_TIME, keys::BIND_PHASE].map(String::from);
        let mut scheduler_keys: Vec<String> =
            bind.into_iter().chain(list.iter().flat_map(|v| v.decision_keys())).collect();
        let mut seen = std::collections::HashSet::new();
        scheduler_keys.retain(|k| seen.insert(k.clone()));
        Vendors { list, pod_keys, scheduler_keys }
    }

    /// The pod annotations only the scheduler writes: the node and bind phase of a decision, then
    /// every vendor's decision keys, in registry order, each once.
    pub fn scheduler_keys(&self) -> &[String] {
        &self.scheduler_keys
    }

    /// Every vendor's pod annotation keys, in registry order (a key two vendors share, twice).
    pub fn pod_keys(&self) -> &[String] {
        &self.pod_keys
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
    pub fn get(&self, id: VendorId) -> &dyn Vendor {
        &*self.list[usize::from(id.0)]
    }
    pub fn iter(&self) -> impl Iterator<Item = (VendorId, &dyn Vendor)> {
        self.list.iter().enumerate().map(|(i, v)| (VendorId(i as u8), &**v))
    }
    pub fn by_name(&self, name: &str) -> Option<VendorId> {
        self.iter().find(|(_, v)| v.name() == name).map(|(id, _)| id)
    }

    /// Every managed resource name of every vendor.
    pub fn resource_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.list.iter().flat_map(|x| x.resource_names()).filter(|n| !n.is_empty()).collect();
        v.dedup();
        v
    }

    /// Derives the pod's request as HAMi does: per container, init containers first, the request of
    /// every vendor whose count is positive.
    pub fn pod_request(&self, pod: &PodView, defaults: &PolicyDefaults) -> Result<PodRequest, request::Error> {
        let mut pr = PodRequest::skeleton(pod, defaults);
        for c in pod.all_containers() {
            let mut reqs = ContainerRequests::new();
            for (id, v) in self.iter() {
                match v.request(id, c, pod) {
                    Ok(Some(r)) if r.nums > 0 => reqs.push(r),
                    Ok(_) => {}
                    Err(why) => {
                        return Err(request::Error::Quantity {
                            container: c.name.clone(),
                            vendor: v.name().to_owned(),
                            why,
                        });
                    }
                }
            }
            pr.containers.push(reqs);
        }
        if pr.requests_devices() {
            // As in HAMi, the weights are read only for a pod that asks for a device: a pod that
            // asks for none passes through Filter whatever its annotation says.
            if let Some(v) = pod.annotation(crate::model::annotations::DEVICE_SCORING_WEIGHTS) {
                pr.weights = codec::parse_weights(v)?;
            }
            // Only a requested vendor's fit reads its parameters.
            let requested = pr.vendors();
            pr.vendor_params =
                self.iter().map(|(id, v)| if requested.contains(&id) { v.pod_params(pod) } else { None }).collect();
        }
        Ok(pr)
    }

    /// Reads every vendor's devices from the node. A malformed annotation is reported and that
    /// vendor contributes no devices; the caller decides what that means for the node.
    pub fn discover(&self, node: &NodeView) -> NodeDevices {
        let mut out =
            NodeDevices { devices: Vec::new(), extras: Vec::with_capacity(self.len()), malformed: Vec::new() };
        for (id, v) in self.iter() {
            match v.discover(node) {
                Discovery::Absent => out.extras.push(None),
                // Positions are u16: a node past that is malformed, not silently truncated.
                Discovery::Devices { devices, .. } if out.devices.len() + devices.len() > codec::MAX_NODE_DEVICES => {
                    let total = out.devices.len() + devices.len();
                    let key = v.resource_names().into_iter().next().unwrap_or_default();
                    out.malformed.push((id, key, codec::Error::TooManyDevices(total)));
                    out.extras.push(None);
                }
                Discovery::Devices { devices, extra } => {
                    out.devices.extend(devices.into_iter().map(|d| DeviceUsage::idle(Arc::new(d), id)));
                    out.extras.push(extra);
                }
                Discovery::Malformed { key, error } => {
                    out.malformed.push((id, key, error));
                    out.extras.push(None);
                }
            }
        }
        out
    }

    /// Reads back every vendor's allocation of a pod. Any malformed value rejects the pod's
    /// device annotations as a whole, as HAMi does.
    pub fn decode_allocation(&self, pod: &PodView) -> Result<PodDevices, codec::Error> {
        let mut pd = PodDevices::default();
        for (id, v) in self.iter() {
            if let Some(c) = v.decode_allocation(pod)? {
                pd.0.push((id, c));
            }
        }
        Ok(pd)
    }

    /// Every vendor's placements the pod holds beyond its decoded entries.
    pub fn decode_held(&self, pod: &PodView) -> Vec<(VendorId, DeviceUuid, MigSlot)> {
        self.iter().flat_map(|(id, v)| v.decode_held(pod).into_iter().map(move |(u, s)| (id, u, s))).collect()
    }
}

/// How vendors read a container's quantities; a given quantity must be usable.
pub mod quantities;

/// Pieces of the `Vendor` impls that several vendors share.
pub mod common;

/// The `Vendor` impl the count-only vendors (Biren, Vastai) share.
pub mod count_only;

/// The generic device walk most vendors share.
pub mod walk;
