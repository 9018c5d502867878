//! AMD: JSON registration `hami.io/node-amd-register` whose `devcore` is the number of compute
//! units (CUs), requests whose cores are a percentage converted to CUs, type and UUID selection,
//! allocation entries carrying the device's product name, the shared node lock, and a clean-up that
//! removes the register annotation.

use super::Unusable;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::annotations::amd as keys;
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::quantity::Quantity;
use crate::model::reason::{Need, Reason, Rejection};
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, DeviceUsage, MemMiB, PodView, VendorId};

use super::common::{self, Selections};
use super::quantities::{self, I32_MAX};
use super::walk::{self, Rules};
use super::{Cleanup, DeviceKeys, Discovery, FitCx, HealthRule, Names, Pick, Vendor};

// The tests read these through `use super::*`.
#[cfg(test)]
use {super::WriteCx, crate::model::codec};

pub const WORD: &str = "AMD";

/// The device config's `amd` section.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct AmdConfig {
    pub resource_count_name: String,
    pub resource_core_name: String,
    pub resource_memory_name: String,
}

impl AmdConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        AmdConfig {
            resource_count_name: "amd.com/gpu".into(),
            resource_core_name: "amd.com/gpucores".into(),
            resource_memory_name: "amd.com/gpumem".into(),
        }
    }
}

pub struct Amd {
    cfg: AmdConfig,
    /// The walk's entry word, which AMD's entries replace with the device's product name.
    word: Arc<str>,
}

impl Amd {
    pub fn new(cfg: &AmdConfig) -> Amd {
        Amd { cfg: cfg.clone(), word: Arc::from(WORD) }
    }
}

/// What the pod's annotations select, parsed once per pod.
pub type Params = Selections;

/// The memory and CUs a request takes on `d`, as HAMi converts them: memory 0 means the whole card;
/// a core percentage becomes `floor(CUs × % ÷ 100)` clamped to [1, CUs]; without a percentage a
/// whole-memory request takes every CU. `None` when a percentage meets a device without CUs.
pub fn demand(memreq: MemMiB, pct: u32, d: &DeviceUsage) -> (MemMiB, Option<u32>) {
    let total_mem = d.info.devmem;
    let mem = if memreq.get() == 0 && total_mem.get() > 0 { total_mem } else { memreq };
    let cus = d.info.devcore;
    let cores = if pct > 0 {
        (cus > 0).then(|| (u64::from(cus) * u64::from(pct) / 100).clamp(1, u64::from(cus)) as u32)
    } else if total_mem.get() > 0 && mem >= total_mem {
        Some(cus)
    } else {
        Some(0)
    };
    (mem, cores)
}

impl Vendor for Amd {
    fn names(&self) -> Names<'_> {
        let c = &self.cfg;
        Names::new(WORD, &c.resource_count_name, &c.resource_memory_name, &c.resource_core_name, 1)
    }

    /// As HAMi derives it: everything from limits only. A count of 0 is no request; memory must be
    /// an int32 of MiB and cores an integer percentage 1–100 (default 100). HAMi drops requests
    /// with a bad count, memory or core value; hami-rs refuses them.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        let cfg = &self.cfg;
        let limit = |name: &str| quantities::given_limit(c, name);
        let Some(nums) = quantities::count_of(limit(&cfg.resource_count_name), &cfg.resource_count_name)? else {
            return Ok(None);
        };
        let mem_name = &cfg.resource_memory_name;
        let mem = quantities::int_in(limit(mem_name), mem_name, 0..=I32_MAX)?.map_or(0, i64::unsigned_abs);
        let core_name = &cfg.resource_core_name;
        let cores = quantities::int_in(limit(core_name), core_name, 1..=100)?.map_or(100, |p| p as u32);
        Ok(Some(ContainerRequest::new(id, nums, mem, 0, cores)))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        let uuids = [keys::USE_UUID, keys::NOUSE_UUID];
        Some(Arc::new(Params::from_pod(pod, [keys::USE_TYPE, keys::NOUSE_TYPE], uuids)))
    }

    /// HAMi's webhook rules: recognised if the count, memory or cores is in limits; with the count,
    /// cores must be an integer percentage 1–100. A pod with only memory or cores is recognised but
    /// requests nothing, so Filter passes it through (as in HAMi).
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, Unusable> {
        let cfg = &self.cfg;
        let in_limits = |n: &String| !n.is_empty() && c.has_limit(n);
        if in_limits(&cfg.resource_count_name)
            && let Some(core) = Some(&cfg.resource_core_name).filter(|n| !n.is_empty()).and_then(|n| c.limit(n))
        {
            let ok = Quantity::parse(&core).ok().and_then(|q| q.as_i64_exact()).is_some_and(|p| (1..=100).contains(&p));
            if !ok {
                return Err(
                    format!("{} must be an integer percentage between 1 and 100", cfg.resource_core_name).into()
                );
            }
        }
        Ok(in_limits(&cfg.resource_count_name)
            || in_limits(&cfg.resource_memory_name)
            || in_limits(&cfg.resource_core_name))
    }

    fn discover(&self, node: &NodeView) -> Discovery {
        common::registered(node, keys::REGISTER, Discovery::devices)
    }

    /// Healthy while the node reports the count resource (always, when no count name is
    /// configured).
    fn health_rule(&self) -> HealthRule {
        if self.cfg.resource_count_name.is_empty() {
            HealthRule::AlwaysHealthy
        } else {
            HealthRule::CapacityPositive { resource: self.cfg.resource_count_name.clone() }
        }
    }

    /// AMD's clean-up in HAMi removes its register annotation, not a handshake.
    fn cleanup(&self) -> Cleanup {
        Cleanup::RemoveAnnotation(keys::REGISTER.into())
    }

    /// As HAMi fits: healthy, type, UUID, a free slot, mutex, then the memory and CUs of [`demand`]
    /// must be free. Each entry carries the device's product name as its type.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = cx.params_as::<Params>();
        let (type_ok, uuid_ok) = (Params::type_check(p), Params::uuid_check(p));
        let take = |d: &DeviceUsage| {
            let (mem, cores) = demand(cx.req.memreq, cx.req.cores, d);
            let free_mem = d.free_mem();
            if free_mem < mem {
                let need = Need::Memory { requested: mem.get(), free: free_mem.get() };
                return Err((Reason::CardInsufficientMemory, need));
            }
            let free = d.free_cores();
            match cores.filter(|c| *c <= free) {
                Some(cores) => Ok((mem, cores)),
                None => {
                    let requested = cores.unwrap_or(cx.req.cores);
                    Err((Reason::CardInsufficientCore, Need::Cores { requested, free }))
                }
            }
        };
        let rules = Rules {
            entry_uses_device_type: true,
            type_ok: &type_ok,
            uuid_ok: &uuid_ok,
            take: Some(&take),
            ..Rules::basic(&self.word)
        };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    /// To-allocate and allocated, identical; the type field is the device's product name.
    fn device_keys(&self) -> Option<DeviceKeys<'_>> {
        Some(DeviceKeys { to_allocate: keys::TO_ALLOCATE, allocated: keys::ALLOCATED })
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
