//! Ascend vNPU: one backend per `vnpus.configs` chip. JSON registration with the `NetworkID` custom
//! info, the webhook's vNPU template rounding and 910C super-pod counts, the hami-core soft-split
//! gate, 910 network-topology grouping, 910C module pairs, the runtime-info annotation and the 910
//! node score.

use crate::model::request::Unusable;
use std::sync::Arc;

use serde::Serialize;

use crate::model::annotations::ascend as keys;
use crate::model::codec::{self, Selection, UuidList};
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::quantity::Quantity;
use crate::model::reason::{Reason, Rejection, Tally};
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, DeviceInfo, DeviceUsage, PodView, VendorId};

use super::common;
use super::walk::{self, Rules};
use super::{Cleanup, Discovery, FitCx, HealthRule, Names, Pick, ScoreCx, Vendor, WriteCx, quantities};

mod config;
pub use config::{VnpuChipConfig, VnpuConfig, VnpuTemplate};

/// Chips whose common word starts with this get network-topology grouping and the node score.
const ASCEND910_PREFIX: &str = "Ascend910";
/// The chip whose allocation unit is a physical module of two NPUs.
const ASCEND910C: &str = "Ascend910C";
const NPUS_PER_MODULE: u32 = 2;
/// hami-core cores are percent of one NPU.
const HAMI_CORE_TOTAL: u32 = 100;
/// HAMi's weight of the 910 network score.
const NETWORK_WEIGHT: f32 = 10.0;
/// The env var hiding NPUs from containers that request none (`overwriteEnv`).
const VISIBLE_DEVICES_ENV: &str = "ASCEND_VISIBLE_DEVICES";

const I32_MAX: i64 = i32::MAX as i64;

/// The keys of one chip (they all carry its common word).
struct Keys {
    register: String,
    handshake: String,
    use_uuid: String,
    nouse_uuid: String,
    to_allocate: String,
    allocated: String,
    runtime_info: String,
}

pub struct Ascend {
    cfg: VnpuChipConfig,
    hami_vnpu_core: bool,
    factor: u64,
    word: Arc<str>,
    keys: Keys,
}

impl Ascend {
    /// One chip of `vnpus.configs`; `hami_vnpu_core` is the config-wide default for nodes that do
    /// not say (their `hami-vnpu-core` annotation wins).
    pub fn new(cfg: &VnpuChipConfig, hami_vnpu_core: bool) -> Ascend {
        let mut cfg = cfg.clone();
        // HAMi sorts the templates by memory at start-up (the old list shape arrives unsorted).
        cfg.templates.sort_by_key(|t| t.memory);
        let cw = cfg.common_word.as_str();
        let keys = Keys {
            register: keys::register(cw),
            handshake: keys::handshake(cw),
            use_uuid: keys::use_uuid(cw),
            nouse_uuid: keys::nouse_uuid(cw),
            to_allocate: keys::to_allocate(cw),
            allocated: keys::allocated(cw),
            runtime_info: keys::runtime_info(cw),
        };
        Ascend { factor: cfg.memory_factor.max(1), word: Arc::from(cw), hami_vnpu_core, keys, cfg }
    }

    /// The memory a request of `m` MiB is rounded up to, and its template's name: the smallest
    /// template holding it, else the chip's allocatable memory (no template) while `m` fits the
    /// capacity; `None` beyond (HAMi's `trimMemory` answers 0).
    fn trim_memory(&self, m: i64) -> Option<(u64, &str)> {
        if let Some(t) = self.cfg.templates.iter().find(|t| m <= t.memory as i64) {
            return Some((t.memory, &t.name));
        }
        (m <= self.cfg.memory_capacity as i64).then_some((self.cfg.memory_allocatable, ""))
    }

    fn is_910(&self) -> bool {
        self.word.starts_with(ASCEND910_PREFIX)
    }
}

/// What the pod's annotations select (parsed once per pod).
#[derive(Debug, Default)]
pub struct Params {
    pub uuids: Selection<UuidList>,
    /// `huawei.com/vnpu-mode: hami-core`: the soft split.
    pub hami_core: bool,
}

/// What the node says beyond its devices.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Extra {
    /// The node's `hami-vnpu-core` annotation: `Some(value == "true")`, `None` when absent.
    pub hami_vnpu_core: Option<bool>,
}

fn is_hami_core(annotations: &crate::model::pod::Annotations) -> bool {
    annotations.get(keys::VNPU_MODE).is_some_and(|m| m == keys::VNPU_MODE_HAMI_CORE)
}

/// The device's `NetworkID`: `None` when the key is absent; `Some(None)` when present but not a
/// number (HAMi then leaves the device out of its groups).
fn network_id(d: &DeviceInfo) -> Option<Option<i64>> {
    let v = d.custom.as_ref()?.get(keys::CUSTOM_NETWORK_ID)?;
    // HAMi reads the JSON number as float64 and groups by its integer part.
    Some(v.as_f64().map(|f| f.trunc() as i64))
}

/// 910 topology: the fitting devices grouped by `NetworkID`, largest groups first, filled in
/// order until `n` are chosen. Groups of equal size keep the order the policy walk met them
/// (HAMi: map order). HAMi drops devices whose `NetworkID` is not a number and can then answer
/// fewer devices than requested; here they form a last group, so the request is always met.
fn network_groups(found: Vec<Pick>, n: usize, devs: &[DeviceUsage]) -> Vec<Pick> {
    let mut groups: Vec<(Option<i64>, Vec<Pick>)> = Vec::new();
    for p in found {
        let id = network_id(&devs[usize::from(p.pos)].info).flatten();
        match groups.iter_mut().find(|(g, _)| *g == id) {
            Some((_, g)) => g.push(p),
            None => groups.push((id, vec![p])),
        }
    }
    groups.sort_by_key(|(id, g)| (id.is_none(), std::cmp::Reverse(g.len())));
    groups.into_iter().flat_map(|(_, g)| g).take(n).collect()
}

/// 910C: only complete modules (device index ÷ 2) are taken, until `n` devices are chosen.
/// Modules keep the order the policy walk met them (HAMi: map order, unstable sort).
fn module_pairs(found: Vec<Pick>, n: usize) -> Vec<Pick> {
    let mut modules: Vec<(u32, Vec<Pick>)> = Vec::new();
    for p in found {
        let m = p.dev.idx / NPUS_PER_MODULE;
        match modules.iter_mut().find(|(k, _)| *k == m) {
            Some((_, g)) => g.push(p),
            None => modules.push((m, vec![p])),
        }
    }
    let mut out = Vec::with_capacity(n);
    for (_, g) in modules {
        if out.len() >= n {
            break;
        }
        if g.len() == NPUS_PER_MODULE as usize {
            out.extend(g);
        }
    }
    out
}

/// One entry of `huawei.com/<cw>` (empty fields omitted, HAMi's key order).
#[derive(Serialize)]
struct RuntimeInfo<'a> {
    #[serde(rename = "UUID", skip_serializing_if = "str::is_empty")]
    uuid: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    temp: &'a str,
    #[serde(skip_serializing_if = "is_zero_u64")]
    memory: u64,
    #[serde(skip_serializing_if = "is_zero_u32")]
    core: u32,
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// Go's `Quantity.Value()` of a limit or request the webhook reads; a text Kubernetes would not
/// have decoded is an error.
fn value(name: &str, text: &str) -> Result<i64, Unusable> {
    Quantity::parse(text)
        .map(|q| q.value_ceil())
        .map_err(|_| Unusable::Unparsable { resource: name.to_owned(), detail: format!("{text:?} is not a quantity") })
}

impl Vendor for Ascend {
    fn names(&self) -> Names<'_> {
        let c = &self.cfg;
        Names::new(&self.word, &c.resource_name, &c.resource_memory_name, &c.resource_core_name, self.factor)
    }

    /// As HAMi derives it: the count, memory × `memoryFactor` (percentage 100 without memory),
    /// cores default 0. HAMi drops the request for out-of-range quantities; hami-rs refuses the pod
    /// instead (docs/compat.md, "Unusable quantities").
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        let cfg = &self.cfg;
        let Some(nums) = quantities::count(c, &cfg.resource_name)? else { return Ok(None) };
        let mem_name = &cfg.resource_memory_name;
        let memreq = match c.quantity(mem_name).filter(|_| !mem_name.is_empty()) {
            None => 0,
            Some(t) => {
                let q = t.parse().map_err(|_| format!("{mem_name}: {:?} is not a quantity", t.0))?;
                if q.is_negative() {
                    return Err(format!("{mem_name}: {:?} is negative", t.0).into());
                }
                // HAMi ignores a non-integer memory (the whole device); hami-rs refuses it.
                let m = q.as_i64_exact().ok_or_else(|| format!("{mem_name}: {:?} is not an integer", t.0))?;
                // Ascend memory is MiB; a byte quantity such as 16Gi lands past int32.
                if m > I32_MAX {
                    return Err(format!("{mem_name}: {m} is out of range (memory is MiB, not bytes)").into());
                }
                // An absurd factor from the config file must not overflow (m is 0..=I32_MAX).
                let scaled = i64::try_from(self.factor).ok().and_then(|f| m.checked_mul(f)).unwrap_or(i64::MAX);
                if scaled > I32_MAX {
                    return Err(format!("{mem_name}: {m} × memoryFactor {} is out of range", self.factor).into());
                }
                scaled as u64
            }
        };
        let core_name = &cfg.resource_core_name;
        let cores = match c.quantity(core_name).filter(|_| !core_name.is_empty()) {
            None => 0,
            Some(t) => {
                // HAMi reads cores with Value(), so fractions round up.
                let v = t.parse().map_err(|_| format!("{core_name}: {:?} is not a quantity", t.0))?.value_ceil();
                if !(0..=I32_MAX).contains(&v) {
                    return Err(format!("{core_name}: {v} is out of range").into());
                }
                v as u32
            }
        };
        let mempct = if memreq == 0 { 100 } else { 0 };
        Ok(Some(ContainerRequest::new(id, nums, memreq, mempct, cores)))
    }

    fn selects(&self, params: Option<&VendorParams>, _ty: &str, uuid: &str) -> bool {
        super::params_allow(params, |p: &Params| p.uuids.allows(uuid))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        Some(Arc::new(Params {
            uuids: Selection::uuids(pod.annotation(&self.keys.use_uuid), pod.annotation(&self.keys.nouse_uuid)),
            hami_core: is_hami_core(&pod.metadata.annotations),
        }))
    }

    /// HAMi's webhook rules: 910C super-pod counts, the hami-core core rule, template rounding of
    /// memory (limits only), single-template multi-device rule, runtime class.
    fn mutate(&self, c: &mut ContainerEdit<'_>, pod: &mut PodContext<'_>) -> Result<bool, Unusable> {
        let cfg = &self.cfg;
        if cfg.resource_name.is_empty() {
            return Ok(false);
        }
        let Some(count_text) = c.limit(&cfg.resource_name) else {
            if cfg.overwrite_env {
                c.push_env(VISIBLE_DEVICES_ENV, "");
            }
            return Ok(false);
        };
        let count = value(&cfg.resource_name, &count_text)?;
        if &*self.word == ASCEND910C && cfg.super_pod {
            if count == 1 {
                // The allocation unit is one module of two NPUs.
                c.set_limit(&cfg.resource_name, "2");
                if c.request(&cfg.resource_name).is_some() {
                    c.set_request(&cfg.resource_name, "2");
                }
            } else if count % 2 != 0 {
                return Err(format!("Ascend910C device request must be 1 or 2*n, got {count}").into());
            }
        }
        let hami_core = pod.annotation(keys::VNPU_MODE) == Some(keys::VNPU_MODE_HAMI_CORE);
        let core_name = &cfg.resource_core_name;
        if !hami_core
            && !core_name.is_empty()
            && let Some(t) = c.quantity(core_name)
            && value(core_name, &t)? > 0
        {
            // On the hard split the template fixes compute.
            return Err(format!("{core_name} is only supported in hami-core (soft split) mode").into());
        }
        let mem_name = &cfg.resource_memory_name;
        let mut mem = cfg.memory_allocatable;
        if !mem_name.is_empty()
            && let Some(t) = c.limit(mem_name)
        {
            let v = value(mem_name, &t)?;
            let invalid = || format!("{mem_name} {v} is invalid");
            mem = if hami_core {
                // HAMi passes a negative value through, and then drops the request; refuse it here.
                u64::try_from(v).map_err(|_| invalid())?
            } else {
                match self.trim_memory(v) {
                    Some((m, _)) if m > 0 => m,
                    _ => return Err(invalid().into()),
                }
            };
        }
        // The original count (before the 910C rounding), as HAMi checks it.
        if count > 1 && !hami_core && mem != cfg.memory_allocatable {
            return Err("vNPU not supported for multiple devices".into());
        }
        if !mem_name.is_empty() {
            c.set_limit(mem_name, &mem.to_string());
            c.set_request(mem_name, &mem.to_string());
        }
        pod.default_runtime_class(&cfg.runtime_class_name);
        Ok(true)
    }

    fn discover(&self, node: &NodeView) -> Discovery {
        common::registered(node, &self.keys.register, |mut devices| {
            let extra = Extra { hami_vnpu_core: node.annotation(keys::NODE_HAMI_VNPU_CORE).map(|v| v == "true") };
            // hami-core requests cores in percent of an NPU, and HAMi fits them against a total
            // of 100 whatever AI-core count the plugin registered. On a node that takes such pods
            // the NPU's core capacity is therefore 100, so usage and its bounds share one unit
            // (HAMi compares the percentages with the AI-core count in the core-0 rule of
            // hard-split pods).
            if extra.hami_vnpu_core.unwrap_or(self.hami_vnpu_core) {
                for d in &mut devices {
                    d.devcore = HAMI_CORE_TOTAL;
                }
            }
            Discovery::Devices { devices, extra: Some(Arc::new(extra)) }
        })
    }

    fn health_rule(&self) -> HealthRule {
        HealthRule::Handshake { key: self.keys.handshake.clone(), count_resource: self.cfg.resource_name.clone() }
    }

    fn cleanup(&self) -> Cleanup {
        Cleanup::RemoveAnnotation(self.keys.handshake.clone())
    }

    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let empty = Params::default();
        let p = cx.params_as::<Params>().unwrap_or(&empty);
        let node_core = cx.extra.and_then(|e| e.downcast_ref::<Extra>()).and_then(|e| e.hami_vnpu_core);
        if p.hami_core && !node_core.unwrap_or(self.hami_vnpu_core) {
            let mut t = Tally::new(cx.order.len());
            t.add(Reason::ModeNotFit, 1);
            return Err(Rejection::Devices(t));
        }
        let nums = cx.req.nums as usize;
        let topology =
            self.is_910() && cx.order.iter().all(|&pos| network_id(&cx.devs[usize::from(pos)].info).is_some());
        let pairs = &*self.word == ASCEND910C && nums > 1;
        let uuid_ok = |d: &DeviceUsage| p.uuids.allows(d.info.id.as_str());
        let rules = Rules {
            uuid_ok: &uuid_ok,
            // The soft split shares a device by percent, whatever cores it registered.
            core_total: p.hami_core.then_some(HAMI_CORE_TOTAL),
            collect_all: topology || pairs,
            ..Rules::basic(&self.word)
        };
        let start = out.len();
        if pairs {
            let mut tally = walk::collect(cx, &rules, out);
            let chosen = module_pairs(out.split_off(start), nums);
            if chosen.len() != nums {
                // HAMi words this failure against the requested count.
                tally.total = cx.req.nums.min(u32::from(u16::MAX)) as u16;
                tally.set(Reason::AllocatedCardsInsufficientRequest, chosen.len());
                return Err(Rejection::Devices(tally));
            }
            out.extend(chosen);
            return Ok(());
        }
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)?;
        if topology && out.len() - start > nums {
            let found = out.split_off(start);
            let chosen =
                if nums == 1 { found.into_iter().take(1).collect() } else { network_groups(found, nums, cx.devs) };
            out.extend(chosen);
        }
        Ok(())
    }

    /// As HAMi scores it: 910 chips score Σ over containers of (largest same-`NetworkID` share of
    /// its devices) × 10; any device without a `NetworkID` makes the score 0.
    fn node_score(&self, cx: &ScoreCx<'_>) -> f32 {
        if !self.is_910() {
            return 0.0;
        }
        let mut score = 0.0f32;
        for c in cx.devices.iter().filter(|c| !c.is_empty()) {
            let mut counts: Vec<(i64, u32)> = Vec::new();
            for e in c {
                let id = cx.before.iter().find(|d| d.info.id == e.uuid).and_then(|d| network_id(&d.info));
                let Some(id) = id else { return 0.0 };
                // A NetworkID that is not a number is not counted (HAMi).
                if let Some(id) = id {
                    match counts.iter_mut().find(|(k, _)| *k == id) {
                        Some((_, n)) => *n += 1,
                        None => counts.push((id, 1)),
                    }
                }
            }
            let total: u32 = counts.iter().map(|(_, n)| n).sum();
            if total > 0 {
                let max = counts.iter().map(|(_, n)| *n).max().unwrap_or(0);
                score += max as f32 / total as f32;
            }
        }
        score * NETWORK_WEIGHT
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(&self.keys.allocated)
    }

    fn decision_keys(&self) -> Vec<String> {
        vec![self.keys.to_allocate.clone(), self.keys.allocated.clone()]
    }

    fn pod_keys(&self) -> Vec<String> {
        vec![
            self.keys.to_allocate.clone(),
            self.keys.allocated.clone(),
            keys::PREDICATE_TIME.to_owned(),
            self.keys.runtime_info.clone(),
        ]
    }

    /// What the Ascend device plugin reads: the two HAMi keys, `predicate-time` (unix-s) and the
    /// runtime info list, whose `temp` names the template the memory came from (not in hami-core).
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(cx.devices);
        out.push((self.keys.to_allocate.clone(), v.clone()));
        out.push((self.keys.allocated.clone(), v));
        out.push((keys::PREDICATE_TIME.to_owned(), cx.unix_s.to_string()));
        let hami_core = is_hami_core(&cx.pod.annotations);
        let info: Vec<RuntimeInfo<'_>> = cx
            .devices
            .iter()
            .flatten()
            .map(|d| RuntimeInfo {
                uuid: d.uuid.as_str(),
                temp: if hami_core {
                    ""
                } else {
                    i64::try_from(d.usedmem.get()).ok().and_then(|m| self.trim_memory(m)).map_or("", |(_, n)| n)
                },
                memory: d.usedmem.get(),
                core: d.usedcores,
            })
            .collect();
        out.push((self.keys.runtime_info.clone(), serde_json::to_string(&info).unwrap_or_else(|_| "[]".into())));
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
