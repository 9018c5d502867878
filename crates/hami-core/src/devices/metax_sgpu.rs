//! Metax sGPU: shared devices from `metax-tech.com/node-gpu-devices`, the filter-then-pick fit with
//! QoS and online/offline co-location, MetaLink zone choice for exclusive pods, the policy-neutral
//! node score, and Metax's own allocation annotation.

use crate::model::request::Unusable;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::model::annotations::metax_sgpu as keys;
use crate::model::codec::{self, Selection, UuidList};
use crate::model::device::TaskClass;
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::{Annotations, NodeView};
use crate::model::reason::{Need, Reason, Rejection, Tally};
use crate::model::request::{ContainerRequest, NodePolicy, VendorParams};
use crate::model::{
    ContainerDevice, ContainerDevices, ContainerView, DeviceInfo, DeviceUsage, DeviceUuid, PodRequest, PodView,
    VendorId,
};

use super::common;
use super::metax::MetaxConfig;
use super::walk::memory_for;
use super::{Discovery, FitCx, HealthRule, Names, Pick, ScoreCx, Vendor, WriteCx, quantities};

pub const WORD: &str = "Metax-SGPU";

/// Memory quantities without a unit are GiB; HAMi accounts MiB (also the quota factor: vmemory
/// limits are GiB).
const GIB_IN_MIB: i64 = 1024;

/// HAMi scales the policy-neutral score by this, negated under `spread`.
const NEUTRAL_WEIGHT: f32 = 10000.0;

/// Score of two exclusive devices in the same MetaLink zone.
const DIRECT_LINK_SCORE: i64 = 10;

pub struct MetaxSgpu {
    count_name: String,
    memory_name: String,
    core_name: String,
    topology_aware: bool,
    word: Arc<str>,
}

impl MetaxSgpu {
    pub fn new(cfg: &MetaxConfig) -> MetaxSgpu {
        MetaxSgpu {
            count_name: cfg.resource_v_count_name.clone(),
            memory_name: cfg.resource_v_memory_name.clone(),
            core_name: cfg.resource_v_core_name.clone(),
            topology_aware: cfg.sgpu_topology_aware,
            word: Arc::from(WORD),
        }
    }
}

/// The pod's co-location class and QoS as its annotations state them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodClass {
    /// Whether `metax-tech.com/sgpu-app-class` is present at all (HAMi branches on presence).
    pub has_class: bool,
    pub class: TaskClass,
    /// `metax-tech.com/sgpu-qos-policy`, empty when absent.
    pub qos: Arc<str>,
    /// `metax-tech.com/sgpu-topology-aware` as a Go boolean; `None` when absent or unparsable.
    pub topology_aware: Option<bool>,
}

impl PodClass {
    pub fn of(annotations: &Annotations) -> PodClass {
        let class_text = annotations.get(keys::APP_CLASS);
        PodClass {
            has_class: class_text.is_some(),
            class: match class_text.map(String::as_str) {
                Some(keys::APP_CLASS_ONLINE) => TaskClass::Online,
                Some(keys::APP_CLASS_OFFLINE) => TaskClass::Offline,
                _ => TaskClass::Plain,
            },
            qos: Arc::from(annotations.get(keys::QOS_POLICY).map_or("", String::as_str)),
            topology_aware: annotations.get(keys::TOPOLOGY_AWARE).and_then(|v| codec::parse_go_bool(v).ok()),
        }
    }
    fn online(&self) -> bool {
        self.class == TaskClass::Online
    }
}

/// What the pod's annotations select (parsed once per pod).
#[derive(Debug, Default)]
pub struct Params {
    pub uuids: Selection<UuidList>,
    pub class: PodClass,
}

fn link_zone(d: &DeviceInfo) -> i64 {
    d.custom.as_ref().and_then(|c| c.get(keys::CUSTOM_LINK_ZONE)).and_then(Value::as_i64).unwrap_or(0)
}

/// The device's QoS: what the pods on it (or earlier containers of this pod) expect, else what
/// the plugin registered. HAMi keeps the expected value in a cache until the plugin reports it.
fn device_qos(d: &DeviceUsage) -> &str {
    match &d.qos {
        Some(q) => q,
        None => d.info.custom_str(keys::CUSTOM_QOS_POLICY).unwrap_or(""),
    }
}

/// HAMi's `CardAppClassMismatch` rule: an unused device takes anything; a device running
/// online/offline pods takes only such pods, but no offline pod where an online one runs; a device
/// with plain pods takes only plain pods.
fn app_class_fits(pod: TaskClass, d: &DeviceUsage) -> bool {
    if d.used == 0 {
        return true;
    }
    let dev_online = d.class_count(TaskClass::Online) > 0;
    let dev_classed = dev_online || d.class_count(TaskClass::Offline) > 0;
    if dev_classed != (pod != TaskClass::Plain) {
        return false;
    }
    !(dev_online && pod == TaskClass::Offline)
}

/// HAMi's `CardQosPolicyMismatch` rule: an unused device switches to any QoS, an exclusive request
/// does not care, otherwise the device's QoS must be unset or the pod's.
fn qos_fits(pod_qos: &str, d: &DeviceUsage, cores: u32) -> bool {
    if d.used == 0 || cores == 100 {
        return true;
    }
    let dev = device_qos(d);
    dev.is_empty() || dev == pod_qos
}

/// Online pods prefer devices with the fewest online tasks and take devices running only offline
/// tasks last (those offline tasks get suspended). Sorted with Go's algorithm, as HAMi's
/// `sort.Slice` sorts the candidates in walk order: among up to 12 candidates equal devices keep
/// the walk order, among more they land where Go's pattern-defeating quicksort leaves them.
fn prioritize_online(cands: &mut [usize], devs: &[DeviceUsage]) {
    let key = |p: usize| {
        let d = &devs[p];
        let (on, off) = (d.class_count(TaskClass::Online), d.class_count(TaskClass::Offline));
        (on == 0 && off > 0, on, off)
    };
    crate::gosort::sort(cands, |&a, &b| key(a) < key(b));
}

/// Exclusive pods without an app class pick by MetaLink zone: a zone that alone holds the request
/// (smallest such zone first), else zones filled smallest first, then devices without a zone.
/// Zones of equal size keep the order in which the policy walk met them (HAMi: map order).
fn prioritize_exclusive(cands: &[usize], devs: &[DeviceUsage], nums: usize) -> Vec<usize> {
    let mut zones: Vec<(i64, Vec<usize>)> = Vec::new();
    let mut unlinked: Vec<usize> = Vec::new();
    for &p in cands {
        let z = link_zone(&devs[p].info);
        if z <= 0 {
            unlinked.push(p);
        } else if let Some((_, g)) = zones.iter_mut().find(|(k, _)| *k == z) {
            g.push(p);
        } else {
            zones.push((z, vec![p]));
        }
    }
    zones.sort_by_key(|(_, g)| g.len());
    if let Some((_, g)) = zones.iter().find(|(_, g)| g.len() >= nums) {
        return g[..nums].to_vec();
    }
    zones.into_iter().flat_map(|(_, g)| g).chain(unlinked).take(nums).collect()
}

/// Sum over unordered pairs: 10 for two different devices in the same non-zero zone.
fn link_score(zones: &[(&DeviceUuid, i64)]) -> i64 {
    let mut s = 0;
    for (i, (a, za)) in zones.iter().enumerate() {
        for (b, zb) in &zones[i + 1..] {
            if a != b && *za != 0 && za == zb {
                s += DIRECT_LINK_SCORE;
            }
        }
    }
    s
}

/// Online pods: Σ over their devices of −100 × offline tasks on a device running only offline
/// tasks, else −20 × online − 2 × offline (scored on the usage before the pod).
fn score_online(cx: &ScoreCx<'_>) -> i64 {
    let mine = |d: &DeviceUsage| cx.devices.iter().flatten().any(|e| e.uuid == d.info.id);
    cx.before
        .iter()
        .filter(|d| &*d.info.ty == WORD && mine(d))
        .map(|d| {
            let (on, off) = (i64::from(d.class_count(TaskClass::Online)), i64::from(d.class_count(TaskClass::Offline)));
            if off > 0 && on == 0 { -100 * off } else { -20 * on - 2 * off }
        })
        .sum()
}

/// Exclusive pods: 10 × the chosen set's link score, less the link score lost from the idle
/// devices (idle − chosen − idle-not-chosen).
fn score_exclusive(cx: &ScoreCx<'_>) -> i64 {
    let zone_of = |u: &DeviceUuid| cx.before.iter().find(|d| &d.info.id == u).map_or(0, |d| link_zone(&d.info));
    let allocated: Vec<(&DeviceUuid, i64)> =
        cx.devices.iter().flatten().filter(|e| e.usedcores == 100).map(|e| (&e.uuid, zone_of(&e.uuid))).collect();
    let available: Vec<(&DeviceUuid, i64)> = cx
        .before
        .iter()
        .filter(|d| &*d.info.ty == WORD && d.used == 0)
        .map(|d| (&d.info.id, link_zone(&d.info)))
        .collect();
    let rest: Vec<(&DeviceUuid, i64)> =
        available.iter().filter(|(u, _)| !allocated.iter().any(|(a, _)| a == u)).copied().collect();
    let allocated_score = link_score(&allocated);
    let loss = link_score(&available) - allocated_score - link_score(&rest);
    10 * allocated_score - loss
}

/// Metax's allocation entry: zero compute and vRam are omitted.
#[derive(Serialize)]
struct MetaxDevice<'a> {
    uuid: &'a str,
    #[serde(skip_serializing_if = "is_zero_u32")]
    compute: u32,
    #[serde(rename = "vRam", skip_serializing_if = "is_zero_u64")]
    vram: u64,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}
fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// `metax-tech.com/gpu-devices-allocated`: one array per container (empty where it has none).
pub fn encode_metax_allocation(containers: &[ContainerDevices]) -> String {
    let wire: Vec<Vec<MetaxDevice<'_>>> = containers
        .iter()
        .map(|c| {
            c.iter()
                .map(|d| MetaxDevice { uuid: d.uuid.as_str(), compute: d.usedcores, vram: d.usedmem.get() })
                .collect()
        })
        .collect();
    serde_json::to_string(&wire).unwrap_or_else(|_| "[]".to_owned())
}

/// Decodes `metax-tech.com/node-gpu-devices` as Go decodes it into its struct: keys
/// case-insensitive, missing keys zero, a wrongly typed value fails the whole list. `null` or `[]`
/// is "no devices".
pub fn decode_node_devices(s: &str) -> Result<Vec<DeviceInfo>, codec::Error> {
    let v: Value = serde_json::from_str(s).map_err(|e| codec::Error::Json(e.to_string()))?;
    let items = match v {
        Value::Null => return Err(codec::Error::NoDevices),
        Value::Array(a) if a.is_empty() => return Err(codec::Error::NoDevices),
        Value::Array(a) => a,
        _ => return Err(codec::Error::Json("expected an array of devices".into())),
    };
    items.iter().enumerate().map(|(i, item)| decode_device(i, item)).collect()
}

fn decode_device(device: usize, item: &Value) -> Result<DeviceInfo, codec::Error> {
    let err = |field: &'static str, why: &str| codec::Error::Field { device, field, why: why.to_owned() };
    let obj = item.as_object().ok_or_else(|| err("", "expected an object"))?;
    let get = |key: &str| {
        obj.get(key)
            .or_else(|| obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
            .filter(|v| !v.is_null())
    };
    let string = |key: &'static str| match get(key) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(err(key, "expected a string")),
    };
    let int32 = |key: &'static str| match get(key) {
        None => Ok(0),
        Some(Value::Number(n)) => {
            n.as_i64().and_then(|v| i32::try_from(v).ok()).ok_or_else(|| err(key, &format!("{n} is not an int32")))
        }
        Some(_) => Err(err(key, "expected a number")),
    };
    let healthy = match get("healthy") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(err("healthy", "expected a boolean")),
    };
    // Fields HAMi decodes but does not use still have to carry the right type.
    string("bdf")?;
    for k in ["availableDevCount", "availableCompute", "availableVRam"] {
        int32(k)?;
    }
    let nonneg = |v: i32| u32::try_from(v).unwrap_or(0);
    let mut custom = serde_json::Map::new();
    custom.insert(keys::CUSTOM_QOS_POLICY.into(), Value::String(string("qosPolicy")?));
    custom.insert(keys::CUSTOM_MODEL.into(), Value::String(string("model")?));
    custom.insert(keys::CUSTOM_LINK_ZONE.into(), Value::from(int32("linkZone")?));
    let mut d = DeviceInfo::new(
        &string("uuid")?,
        device as u32,
        nonneg(int32("totalDevCount")?),
        u64::from(nonneg(int32("totalVRam")?)),
        nonneg(int32("totalCompute")?),
        WORD,
    );
    d.numa = int32("numa")?;
    d.health = healthy;
    d.custom = Some(Arc::new(custom));
    Ok(d)
}

/// Whether a quantity's text names a unit (then it is bytes, else GiB). HAMi tests the canonical
/// form Kubernetes stores, which is what the API server hands out.
fn has_unit(text: &str) -> bool {
    text.chars().any(|c| c.is_ascii_alphabetic())
}

impl Vendor for MetaxSgpu {
    /// Quota: vmemory limits are GiB, so they scale by 1024 against MiB usage.
    fn names(&self) -> Names<'_> {
        Names::new(WORD, &self.count_name, &self.memory_name, &self.core_name, GIB_IN_MIB as u64)
    }

    /// As HAMi derives it: every quantity from limits only; each one given must be usable.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        if self.count_name.is_empty() {
            return Ok(None);
        }
        let int = |name: &str| c.limit(name).filter(|_| !name.is_empty()).map(|q| (q, q.parse().ok()));
        let Some(nums) = quantities::count_of(quantities::given_limit(c, &self.count_name), &self.count_name)? else {
            return Ok(None);
        };
        // Cores default to 100. HAMi keeps the default for a value that is not an integer and
        // drops the request for one out of range; hami-rs refuses both.
        let cores = quantities::cores_of(quantities::given_limit(c, &self.core_name), &self.core_name, 100)?;
        let memreq = match int(&self.memory_name) {
            None => 0,
            Some((text, q)) => {
                // HAMi ignores a non-integer memory and so gives the whole device; hami-rs refuses.
                let v = q
                    .and_then(|q| q.as_i64_exact())
                    .ok_or_else(|| format!("{}: {:?} is not an integer quantity", self.memory_name, text.0))?;
                let mib = if has_unit(&text.0) {
                    v / (1 << 20)
                } else {
                    if !(0..=i64::from(i32::MAX) / GIB_IN_MIB).contains(&v) {
                        return Err(format!("{}: {v} GiB is out of range", self.memory_name).into());
                    }
                    v * GIB_IN_MIB
                };
                if !(0..=i64::from(i32::MAX)).contains(&mib) {
                    return Err(format!("{}: {mib} MiB is out of range", self.memory_name).into());
                }
                mib as u64
            }
        };
        let mempct = if memreq == 0 { 100 } else { 0 };
        Ok(Some(ContainerRequest::new(id, nums, memreq, mempct, cores)))
    }

    fn selects(&self, params: Option<&VendorParams>, _ty: &str, uuid: &str) -> bool {
        super::params_allow(params, |p: &Params| p.uuids.allows(uuid))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        let a = |k: &str| pod.annotation(k);
        Some(Arc::new(Params {
            uuids: Selection::uuids(a(keys::USE_UUID), a(keys::NOUSE_UUID)),
            class: PodClass::of(&pod.metadata.annotations),
        }))
    }

    /// HAMi's webhook rules: app-class pods take exactly one device; pods that are not online get
    /// the `best-effort` QoS unless they name one of the three policies.
    fn mutate(&self, c: &mut ContainerEdit<'_>, pod: &mut PodContext<'_>) -> Result<bool, Unusable> {
        if self.count_name.is_empty() {
            return Ok(false);
        }
        let Some(count) = c.limit(&self.count_name) else { return Ok(false) };
        let class = pod.annotation(keys::APP_CLASS).map(str::to_owned);
        if let Some(class) = &class {
            if class != keys::APP_CLASS_ONLINE && class != keys::APP_CLASS_OFFLINE {
                return Err(format!(
                    "{} must be set one of [{}, {}]",
                    keys::APP_CLASS,
                    keys::APP_CLASS_ONLINE,
                    keys::APP_CLASS_OFFLINE
                )
                .into());
            }
            let n = crate::model::quantity::Quantity::parse(&count)
                .map_err(|_| format!("{}: {count:?} is not a quantity", self.count_name))?
                .value_ceil();
            if n != 1 {
                return Err("app-class pod must request single device".into());
            }
        }
        if class.as_deref() != Some(keys::APP_CLASS_ONLINE) {
            match pod.annotation(keys::QOS_POLICY) {
                None => pod.set_annotation(keys::QOS_POLICY, keys::QOS_BEST_EFFORT),
                Some(keys::QOS_BEST_EFFORT | keys::QOS_FIXED_SHARE | keys::QOS_BURST_SHARE) => {}
                Some(_) => {
                    return Err(format!(
                        "{} must be set one of [{}, {}, {}]",
                        keys::QOS_POLICY,
                        keys::QOS_BEST_EFFORT,
                        keys::QOS_FIXED_SHARE,
                        keys::QOS_BURST_SHARE
                    )
                    .into());
                }
            }
        }
        Ok(true)
    }

    fn discover(&self, node: &NodeView) -> Discovery {
        common::listed(node, keys::NODE_DEVICES, decode_node_devices, Discovery::devices)
    }

    /// Healthy iff the annotation lists at least one device, HAMi's rule for Metax sGPU.
    fn health_rule(&self) -> HealthRule {
        HealthRule::DevicesListed
    }

    /// As HAMi fits it: filter every candidate (walking from the end), then pick.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let empty = Params::default();
        let p = cx.params_as::<Params>().unwrap_or(&empty);
        let req = &cx.req;
        let online = p.class.online();
        let mut tally = Tally::new(cx.order.len());
        let mut cands: Vec<usize> = Vec::with_capacity(cx.order.len());
        for &pos in cx.order.iter().rev() {
            let pos = usize::from(pos);
            let d = &cx.devs[pos];
            let mut reject = |reason, need| tally.reject(reason, pos, need);
            if &*d.info.ty != WORD {
                reject(Reason::CardTypeMismatch, Need::None);
                continue;
            }
            if !d.health {
                reject(Reason::CardUnhealthy, Need::None);
                continue;
            }
            if !app_class_fits(p.class.class, d) {
                reject(Reason::CardAppClassMismatch, Need::None);
                continue;
            }
            if !online && !qos_fits(&p.class.qos, d, req.cores) {
                reject(Reason::CardQosPolicyMismatch, Need::None);
                continue;
            }
            if !p.uuids.allows(d.info.id.as_str()) {
                reject(Reason::CardUuidMismatch, Need::None);
                continue;
            }
            if d.used >= d.info.count {
                reject(Reason::CardTimeSlicingExhausted, Need::Slots { used: d.used, count: d.info.count });
                continue;
            }
            if cx.pod.gpu_policy.mutex && d.used > 0 {
                reject(Reason::ExclusiveDeviceAllocateConflict, Need::Busy { used: d.used });
                continue;
            }
            let m = memory_for(req.memreq, req.mempct, d);
            if d.free_mem() < m {
                reject(Reason::CardInsufficientMemory, Need::Memory { requested: m.get(), free: d.free_mem().get() });
                continue;
            }
            // Online pods run without a compute share, so the core rules do not apply to them.
            if !online {
                let total = d.info.devcore;
                if d.free_cores() < req.cores {
                    reject(Reason::CardInsufficientCore, Need::Cores { requested: req.cores, free: d.free_cores() });
                    continue;
                }
                if total == 100 && req.cores == 100 && d.used > 0 {
                    reject(Reason::ExclusiveDeviceAllocateConflict, Need::Busy { used: d.used });
                    continue;
                }
                if total != 0 && d.used_cores >= total && req.cores == 0 {
                    reject(Reason::CardComputeUnitsExhausted, Need::None);
                    continue;
                }
            }
            cands.push(pos);
        }
        let nums = req.nums as usize;
        if cands.len() < nums {
            if !cands.is_empty() {
                tally.add(Reason::AllocatedCardsInsufficientRequest, cands.len());
            }
            return Err(Rejection::Devices(tally));
        }
        let best: Vec<usize> = if cands.len() == nums {
            cands
        } else if p.class.has_class {
            // Offline pods follow the GPU policy; online pods avoid busy online devices.
            if online {
                prioritize_online(&mut cands, cx.devs);
            }
            cands.truncate(nums);
            cands
        } else if req.cores == 100 {
            prioritize_exclusive(&cands, cx.devs, nums)
        } else {
            cands.truncate(nums);
            cands
        };
        let cores = if online { 0 } else { req.cores };
        for pos in best {
            let d = &cx.devs[pos];
            out.push(Pick {
                pos: pos as u16,
                dev: ContainerDevice {
                    uuid: d.info.id.clone(),
                    ty: self.word.clone(),
                    usedmem: memory_for(req.memreq, req.mempct, d),
                    usedcores: cores,
                    idx: d.info.index,
                    mig: None,
                },
            });
        }
        Ok(())
    }

    /// Counts the task's class, and for pods that are not online switches the device's QoS to
    /// the pod's (none for an exclusive entry) for the rest of this evaluation, as HAMi does.
    /// HAMi writes that QoS into the cached node's device info, which leaks into other
    /// evaluations; here it stays in the evaluation's working copy.
    fn charge(&self, dev: &mut DeviceUsage, entry: &mut ContainerDevice, pod: &PodRequest) {
        dev.used = dev.used.saturating_add(1);
        dev.used_mem += entry.usedmem;
        dev.used_cores = dev.used_cores.saturating_add(entry.usedcores);
        let class = PodClass::of(&pod.annotations);
        let k = &mut dev.classes[class.class as usize];
        *k = k.saturating_add(1);
        if !class.online() {
            dev.qos = Some(if entry.usedcores == 100 { Arc::from("") } else { class.qos });
        }
    }

    /// Every pod is tagged with its class; pods that are not online also carry the QoS they
    /// switch their devices to (empty when they name none, as HAMi expects). HAMi expects no QoS
    /// for exclusive entries; the tag sees only annotations, so an exclusive pod carries its own,
    /// which matters only for the reason word: a device it holds takes no other task anyway.
    fn task_tag(&self, annotations: &Annotations) -> Option<(TaskClass, Option<Arc<str>>)> {
        let c = PodClass::of(annotations);
        let qos = (!c.online()).then(|| c.qos.clone());
        Some((c.class, qos))
    }

    /// As HAMi scores it: online pods score by the tasks already on their devices; exclusive pods
    /// with topology awareness by MetaLink pairs. The score is policy-neutral ("higher is better"),
    /// so it is scaled by −10000 under `spread` and +10000 otherwise.
    fn node_score(&self, cx: &ScoreCx<'_>) -> f32 {
        let class = PodClass::of(&cx.pod.annotations);
        let any = cx.devices.iter().any(|c| !c.is_empty());
        let raw = if class.online() && any {
            score_online(cx)
        } else if cx.devices.iter().flatten().any(|e| e.usedcores == 100)
            && class.topology_aware.unwrap_or(self.topology_aware)
        {
            score_exclusive(cx)
        } else {
            0
        };
        let weight = if cx.policy == NodePolicy::Spread { -NEUTRAL_WEIGHT } else { NEUTRAL_WEIGHT };
        raw as f32 * weight
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn decision_keys(&self) -> Vec<String> {
        [keys::TO_ALLOCATE, keys::ALLOCATED].map(String::from).to_vec()
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::TO_ALLOCATE, keys::ALLOCATED, keys::GPU_DEVICES_ALLOCATED, keys::PREDICATE_TIME]
            .map(String::from)
            .to_vec()
    }

    /// What the sGPU device plugin reads: the two device keys, identical;
    /// `metax-tech.com/gpu-devices-allocated`, per container the `{"uuid","compute","vRam"}` of
    /// each device (zeros omitted); and the decision time in unix-ns.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(cx.devices);
        out.push((keys::TO_ALLOCATE.into(), v.clone()));
        out.push((keys::ALLOCATED.into(), v));
        out.push((keys::GPU_DEVICES_ALLOCATED.into(), encode_metax_allocation(cx.devices)));
        out.push((keys::PREDICATE_TIME.into(), cx.unix_ns.to_string()));
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
