//! AMD (vendors.md §12, "AMD"): JSON registration `hami.io/node-amd-register` whose `devcore` is
//! the number of compute units (CUs), requests whose cores are a percentage converted to CUs,
//! type and UUID selection, allocation entries carrying the device's product name, the shared
//! node lock, and a clean-up that removes the register annotation.

use std::sync::Arc;

use crate::config::device::AmdConfig;
use crate::model::annotations::amd as keys;
use crate::model::codec::{self, Selection, TypeList, UuidList};
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::quantity::Quantity;
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerDevice, ContainerView, DeviceUsage, MemMiB, PodView, VendorId};
use crate::sched::reason::{Need, Reason, Rejection, Tally};

use super::{Cleanup, Discovery, FitCx, HealthRule, Pick, QuotaNames, Vendor, WriteCx, quantities};

pub const WORD: &str = "AMD";

const I32_MAX: i64 = i32::MAX as i64;

pub struct Amd {
    cfg: AmdConfig,
}

impl Amd {
    pub fn new(cfg: &AmdConfig) -> Amd {
        Amd { cfg: cfg.clone() }
    }
}

/// What the pod's annotations select, parsed once per pod.
#[derive(Debug, Default)]
pub struct Params {
    pub types: Selection<TypeList>,
    pub uuids: Selection<UuidList>,
}

fn params<'a>(cx: &'a FitCx<'_>) -> Option<&'a Params> {
    cx.params.and_then(|p| p.downcast_ref::<Params>())
}

/// The memory and CUs a request takes on `d` (vendors.md §12): memory 0 means the whole card;
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
    fn name(&self) -> &str {
        WORD
    }

    fn resource_names(&self) -> Vec<String> {
        let c = &self.cfg;
        [&c.resource_count_name, &c.resource_memory_name, &c.resource_core_name]
            .into_iter()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect()
    }

    fn quota_names(&self) -> QuotaNames {
        let named = |n: &String| Some(n.clone()).filter(|n| !n.is_empty());
        QuotaNames {
            memory: named(&self.cfg.resource_memory_name),
            cores: named(&self.cfg.resource_core_name),
            memory_factor: 1,
        }
    }

    /// scheduling.md §4.2, AMD: everything from limits only. A count of 0 is no request; memory
    /// must be an int32 of MiB and cores an integer percentage 1–100 (default 100). HAMi drops
    /// requests with a bad count, memory or core value; hami-rs refuses them.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, String> {
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
        let a = |k: &str| pod.annotation(k);
        Some(Arc::new(Params {
            types: Selection::types(a(keys::USE_TYPE), a(keys::NOUSE_TYPE)),
            uuids: Selection::uuids(a(keys::USE_UUID), a(keys::NOUSE_UUID)),
        }))
    }

    /// protocol.md §6, AMD: recognised if the count, memory or cores is in limits; with the count,
    /// cores must be an integer percentage 1–100. A pod with only memory or cores is recognised
    /// but requests nothing, so Filter passes it through (as in HAMi).
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, String> {
        let cfg = &self.cfg;
        let in_limits = |n: &String| !n.is_empty() && c.has_limit(n);
        if in_limits(&cfg.resource_count_name)
            && let Some(core) = Some(&cfg.resource_core_name).filter(|n| !n.is_empty()).and_then(|n| c.limit(n))
        {
            let ok = Quantity::parse(&core).ok().and_then(|q| q.as_i64_exact()).is_some_and(|p| (1..=100).contains(&p));
            if !ok {
                return Err(format!("{} must be an integer percentage between 1 and 100", cfg.resource_core_name));
            }
        }
        Ok(in_limits(&cfg.resource_count_name)
            || in_limits(&cfg.resource_memory_name)
            || in_limits(&cfg.resource_core_name))
    }

    fn discover(&self, node: &NodeView) -> Discovery {
        let Some(reg) = node.annotation(keys::REGISTER) else { return Discovery::Absent };
        match codec::decode_node_devices(reg) {
            Ok(devices) => Discovery::Devices { devices, extra: None },
            Err(codec::Error::NoDevices) => Discovery::Absent,
            Err(error) => Discovery::Malformed { key: keys::REGISTER.into(), error },
        }
    }

    /// protocol.md §3.7: healthy while the node reports the count resource (always, when no count
    /// name is configured).
    fn health_rule(&self) -> HealthRule {
        if self.cfg.resource_count_name.is_empty() {
            HealthRule::AlwaysHealthy
        } else {
            HealthRule::CapacityPositive { resource: self.cfg.resource_count_name.clone() }
        }
    }

    /// vendors.md §1: AMD's clean-up removes its register annotation, not a handshake.
    fn cleanup(&self) -> Cleanup {
        Cleanup::RemoveAnnotation(keys::REGISTER.into())
    }

    /// vendors.md §12: healthy, type, UUID, a free slot, mutex, then the memory and CUs of
    /// [`demand`] must be free. Each entry carries the device's product name as its type.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = params(cx);
        let mut tally = Tally::new(cx.order.len());
        let start = out.len();
        let mut nums = cx.req.nums;
        for &pos in cx.order.iter().rev() {
            let d = &cx.devs[usize::from(pos)];
            let at = usize::from(pos);
            if !d.health {
                tally.reject(Reason::CardNotHealth, at, Need::None);
                continue;
            }
            if p.is_some_and(|p| !p.types.allows(&d.info.ty)) {
                tally.reject(Reason::CardTypeMismatch, at, Need::None);
                continue;
            }
            if p.is_some_and(|p| !p.uuids.allows(d.info.id.as_str())) {
                tally.reject(Reason::CardUuidMismatch, at, Need::None);
                continue;
            }
            if d.used >= d.info.count {
                tally.reject(Reason::CardTimeSlicingExhausted, at, Need::Slots { used: d.used, count: d.info.count });
                continue;
            }
            if cx.pod.gpu_policy.mutex && d.used > 0 {
                tally.reject(Reason::ExclusiveDeviceAllocateConflict, at, Need::Busy { used: d.used });
                continue;
            }
            let (mem, cores) = demand(cx.req.memreq, cx.req.cores, d);
            let free_mem = d.free_mem();
            if free_mem < mem {
                tally.reject(
                    Reason::CardInsufficientMemory,
                    at,
                    Need::Memory { requested: mem.get(), free: free_mem.get() },
                );
                continue;
            }
            let free = d.free_cores();
            let Some(cores) = cores.filter(|c| *c <= free) else {
                let requested = cores.unwrap_or(cx.req.cores);
                tally.reject(Reason::CardInsufficientCore, at, Need::Cores { requested, free });
                continue;
            };
            out.push(Pick {
                pos,
                dev: ContainerDevice {
                    uuid: d.info.id.clone(),
                    ty: d.info.ty.clone(),
                    usedmem: mem,
                    usedcores: cores,
                    idx: d.info.index,
                    mig: None,
                },
            });
            nums = nums.saturating_sub(1);
            if nums == 0 {
                return Ok(());
            }
        }
        let picked = out.len() - start;
        if picked > 0 {
            tally.add(Reason::AllocatedCardsInsufficientRequest, picked);
        }
        out.truncate(start);
        Err(Rejection::Devices(tally))
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::TO_ALLOCATE, keys::ALLOCATED].map(String::from).to_vec()
    }

    /// protocol.md §4.1, §4.2: to-allocate and allocated, identical; the type field is the
    /// device's product name.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(cx.devices);
        out.push((keys::TO_ALLOCATE.into(), v.clone()));
        out.push((keys::ALLOCATED.into(), v));
    }
}

#[cfg(test)]
mod tests;
