//! Cambricon MLU (vendors.md §3): devices synthesised from node capacity, requests in 256 MiB
//! memory units with 100 cores by default, the generic walk with the namespace quota check, the
//! `CAMBRICON_DSMLU_*` pod annotations and Cambricon's own node lock.

use std::sync::Arc;

use crate::config::device::CambriconConfig;
use crate::model::annotations::cambricon as keys;
use crate::model::codec::{self, Selection, UuidList};
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, DeviceInfo, DeviceUsage, MemMiB, PodView, VendorId};
use crate::sched::reason::Rejection;

use super::walk::{self, Rules};
use super::{Discovery, FitCx, LockKind, Pick, QuotaNames, Vendor, WriteCx, quantities};

pub const WORD: &str = "MLU";

/// Memory requests and quota limits are in units of 256 MiB (scheduling.md §4.2, §9).
pub const MEMORY_UNIT: u64 = 256;

/// One synthesised device per 100 units of the core capacity (protocol.md §3.4).
const CORES_PER_DEVICE: i64 = 100;

pub struct Cambricon {
    cfg: CambriconConfig,
    word: Arc<str>,
}

/// What the pod's annotations select (parsed once per pod).
///
/// The type selection keys ([`keys::USE_TYPE`], [`keys::NOUSE_TYPE`]) are deliberately not read.
/// HAMi declares them but never checks them, and every Cambricon device is synthesised from
/// capacity with the type `MLU`: enforcing could only reject every device for a value naming a
/// model (`MLU370`), so pods HAMi places today would stop scheduling, with nothing gained.
#[derive(Debug, Default)]
pub struct Params {
    pub uuids: Selection<UuidList>,
}

impl Cambricon {
    pub fn new(cfg: &CambriconConfig) -> Cambricon {
        Cambricon { cfg: cfg.clone(), word: Arc::from(WORD) }
    }
}

fn params<'a>(cx: &'a FitCx<'_>) -> Option<&'a Params> {
    cx.params.and_then(|p| p.downcast_ref::<Params>())
}

/// More devices than any node carries: a capacity this large is a broken node status, and
/// synthesising it would flood the device list (whose positions are 16-bit).
const MAX_DEVICES: i128 = 4096;

fn too_many(key: &str, cores: i64) -> Discovery {
    Discovery::Malformed {
        key: key.to_owned(),
        error: codec::Error::Field {
            device: 0,
            field: "count",
            why: format!("capacity {cores} means more than {MAX_DEVICES} devices"),
        },
    }
}

impl Vendor for Cambricon {
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
        QuotaNames {
            memory: Some(self.cfg.resource_memory_name.clone()).filter(|n| !n.is_empty()),
            cores: Some(self.cfg.resource_core_name.clone()).filter(|n| !n.is_empty()),
            memory_factor: MEMORY_UNIT,
        }
    }

    /// scheduling.md §4.2, Cambricon: memory × 256 MiB; cores default 100, so a bare
    /// `cambricon.com/vmlu: 1` is a whole, exclusive card; percentage 100 only without memory.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, String> {
        let cfg = &self.cfg;
        let Some(nums) = quantities::count(c, &cfg.resource_count_name)? else { return Ok(None) };
        let memreq = quantities::memory(c, &cfg.resource_memory_name, MEMORY_UNIT)?;
        let cores = quantities::cores(c, &cfg.resource_core_name, 100)?;
        let mempct = if memreq == 0 { 100 } else { 0 };
        Ok(Some(ContainerRequest { vendor: id, nums, memreq: MemMiB(memreq), mempct, cores, mode: 0 }))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        let a = |k: &str| pod.annotation(k);
        Some(Arc::new(Params { uuids: Selection::uuids(a(keys::USE_UUID), a(keys::NOUSE_UUID)) }))
    }

    /// protocol.md §6: recognised iff the count is in limits; nothing is changed.
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, String> {
        let n = &self.cfg.resource_count_name;
        Ok(!n.is_empty() && c.has_limit(n))
    }

    /// protocol.md §3.4: `ceil(C / 100)` devices `<node>-cambricon-mlu-<i>`, each 100 slots,
    /// `M × 256 × 100 / C` MiB and 100 cores, type `MLU`, healthy.
    fn discover(&self, node: &NodeView) -> Discovery {
        let cfg = &self.cfg;
        if cfg.resource_core_name.is_empty() {
            return Discovery::Absent;
        }
        let cores = node.capacity(&cfg.resource_core_name);
        if cores <= 0 {
            return Discovery::Absent;
        }
        let mem = if cfg.resource_memory_name.is_empty() { 0 } else { node.capacity(&cfg.resource_memory_name) };
        let devmem = i128::from(mem.max(0)) * i128::from(MEMORY_UNIT) * 100 / i128::from(cores);
        // HAMi stores this in an int32; a capacity that overflows it is not a real node.
        let Ok(devmem) = i32::try_from(devmem) else {
            return Discovery::Malformed {
                key: cfg.resource_memory_name.clone(),
                error: codec::Error::Field {
                    device: 0,
                    field: "devmem",
                    why: format!("capacity {mem} gives {devmem} MiB per device, beyond int32"),
                },
            };
        };
        // In i128: a capacity near i64::MAX must not overflow the rounding up.
        let n = (i128::from(cores) + i128::from(CORES_PER_DEVICE) - 1) / i128::from(CORES_PER_DEVICE);
        if n > MAX_DEVICES {
            return too_many(&cfg.resource_core_name, cores);
        }
        let devices = (0..n)
            .map(|i| {
                let id = format!("{}-cambricon-mlu-{i}", node.name());
                DeviceInfo::new(&id, i as u32, 100, devmem as u64, 100, WORD)
            })
            .collect();
        Discovery::Devices { devices, extra: None }
    }

    /// scheduling.md §5.8, Cambricon: the generic walk with the quota check (HAMi checks quota
    /// during Filter only for NVIDIA and Cambricon); the type always passes.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = params(cx);
        let uuid_ok = |d: &DeviceUsage| p.is_none_or(|p| p.uuids.allows(d.info.id.as_str()));
        let rules = Rules { uuid_ok: &uuid_ok, quota: true, ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::TO_ALLOCATE, keys::ALLOCATED, keys::DSMLU_ASSIGNED, keys::DSMLU_PROFILE].map(String::from).to_vec()
    }

    /// protocol.md §4.1, Cambricon: both device keys, `CAMBRICON_DSMLU_ASSIGNED: "false"` and the
    /// profile `<index>_<cores>_<memory / 256>` of the first device of the first container
    /// holding one (§12.1: index 2, 50 cores, 4096 MiB → `2_50_16`).
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(cx.devices);
        out.push((keys::TO_ALLOCATE.into(), v.clone()));
        out.push((keys::ALLOCATED.into(), v));
        out.push((keys::DSMLU_ASSIGNED.into(), "false".into()));
        if let Some(d) = cx.devices.iter().find_map(|c| c.first()) {
            let index = cx.devs.iter().find(|u| u.info.id == d.uuid).map_or(d.idx, |u| u.info.index);
            let units = d.usedmem.get() / MEMORY_UNIT;
            out.push((keys::DSMLU_PROFILE.into(), format!("{index}_{}_{units}", d.usedcores)));
        }
    }

    /// protocol.md §3.8: `cambricon.com/dsmlu.lock`, a bare time with a 2-minute expiry. HAMi
    /// releases it for every pod whose bind fails (scheduling.md §14 row 9); the engine releases
    /// only the kinds it took, so a failed NVIDIA bind leaves an MLU pod's lock alone.
    fn lock(&self) -> LockKind {
        LockKind::Cambricon
    }
}

#[cfg(test)]
mod tests;
