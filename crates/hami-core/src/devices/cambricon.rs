//! Cambricon MLU: devices synthesised from node capacity, requests in 256 MiB memory units with 100
//! cores by default, the generic walk with the namespace quota check, the `CAMBRICON_DSMLU_*` pod
//! annotations and Cambricon's own node lock.

use super::Unusable;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::annotations::cambricon as keys;
use crate::model::pod::NodeView;
use crate::model::reason::Rejection;
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, PodView, VendorId};

use super::common::{FromCapacity, Selections};
use super::walk::{self, Rules};
// The tests read these through `use super::*`.
#[cfg(test)]
use {
    crate::model::DeviceInfo,
    crate::model::edit::{ContainerEdit, PodContext},
};

use super::{DeviceKeys, Discovery, FitCx, LockKind, Names, Pick, Vendor, WriteCx, quantities};

pub const WORD: &str = "MLU";

/// Memory requests and quota limits are in units of 256 MiB, as in HAMi.
pub const MEMORY_UNIT: u64 = 256;

/// One synthesised device per 100 units of the core capacity, as HAMi synthesises them.
const CORES_PER_DEVICE: u32 = 100;

const DEVICE_KEYS: DeviceKeys<'static> = DeviceKeys { to_allocate: keys::TO_ALLOCATE, allocated: keys::ALLOCATED };

/// The device config's `cambricon` section.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct CambriconConfig {
    pub resource_count_name: String,
    pub resource_memory_name: String,
    pub resource_core_name: String,
}

impl CambriconConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        CambriconConfig {
            resource_count_name: "cambricon.com/vmlu".into(),
            resource_memory_name: "cambricon.com/mlu.smlu.vmemory".into(),
            resource_core_name: "cambricon.com/mlu.smlu.vcore".into(),
        }
    }
}

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
pub type Params = Selections;

impl Cambricon {
    pub fn new(cfg: &CambriconConfig) -> Cambricon {
        Cambricon { cfg: cfg.clone(), word: Arc::from(WORD) }
    }
}

impl Vendor for Cambricon {
    fn names(&self) -> Names<'_> {
        let c = &self.cfg;
        Names::new(WORD, &c.resource_count_name, &c.resource_memory_name, &c.resource_core_name, MEMORY_UNIT)
    }

    /// As HAMi derives it: memory × 256 MiB; cores default 100, so a bare `cambricon.com/vmlu: 1`
    /// is a whole, exclusive card; percentage 100 only without memory.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        quantities::count_memory_cores(id, c, self.names(), 100)
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        Some(Arc::new(Params::uuids_only(pod, [keys::USE_UUID, keys::NOUSE_UUID])))
    }

    /// `ceil(C / 100)` devices `<node>-cambricon-mlu-<i>`, each 100 slots, `M × 256 × 100 / C` MiB
    /// and 100 cores, type `MLU`, healthy: HAMi's ids, so pods HAMi placed are counted.
    fn discover(&self, node: &NodeView) -> Discovery {
        let cfg = &self.cfg;
        let capacity = FromCapacity {
            core_name: &cfg.resource_core_name,
            memory_name: &cfg.resource_memory_name,
            cores_per_device: CORES_PER_DEVICE,
            memory_unit: MEMORY_UNIT,
            id_word: "cambricon-mlu",
            word: WORD,
        };
        capacity.discover(node)
    }

    /// The generic walk with the quota check (HAMi checks quota during Filter only for NVIDIA and
    /// Cambricon); the type always passes.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let uuid_ok = Params::uuid_check(cx.params_as::<Params>());
        let rules = Rules { uuid_ok: &uuid_ok, quota: true, ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    fn device_keys(&self) -> Option<DeviceKeys<'_>> {
        Some(DEVICE_KEYS)
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::TO_ALLOCATE, keys::ALLOCATED, keys::DSMLU_ASSIGNED, keys::DSMLU_PROFILE].map(String::from).to_vec()
    }

    /// What the MLU device plugin reads: both device keys, `CAMBRICON_DSMLU_ASSIGNED: "false"` and
    /// the profile `<index>_<cores>_<memory / 256>` of the first device of the first container
    /// holding one (index 2, 50 cores, 4096 MiB → `2_50_16`).
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        DEVICE_KEYS.write(cx.devices, out);
        out.push((keys::DSMLU_ASSIGNED.into(), "false".into()));
        if let Some(d) = cx.devices.iter().find_map(|c| c.first()) {
            let index = cx.device(d).map_or(d.idx, |u| u.info.index);
            let units = d.usedmem.get() / MEMORY_UNIT;
            out.push((keys::DSMLU_PROFILE.into(), format!("{index}_{}_{units}", d.usedcores)));
        }
    }

    /// `cambricon.com/dsmlu.lock`, a bare time with a 2-minute expiry. HAMi releases it for every
    /// pod whose bind fails; the engine releases only the kinds it took, so a failed NVIDIA bind
    /// leaves an MLU pod's lock alone (docs/compat.md, "Cambricon lock").
    fn lock(&self) -> LockKind {
        LockKind::Cambricon
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
