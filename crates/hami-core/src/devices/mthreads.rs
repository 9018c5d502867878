//! Mthreads: devices synthesised from node capacity (16 cores per GPU), requests split evenly over
//! the requested GPUs, the webhook's whole-GPU and memory-size rules, the generic walk plus the
//! rule that a pod's containers share one device, and the `mthreads.com/*` pod annotations. No node
//! lock.

use super::Unusable;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::annotations::mthreads as keys;
use crate::model::codec;
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::quantity::Quantity;
use crate::model::reason::{Reason, Rejection};
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, DeviceUsage, MemMiB, PodView, VendorId};

use super::common::{FromCapacity, Selections};
use super::walk::{self, Rules};
// The tests read this through `use super::*`.
#[cfg(test)]
use crate::model::DeviceInfo;

use super::{Discovery, FitCx, LockKind, Names, Pick, Vendor, WriteCx, quantities};

pub const WORD: &str = "Mthreads";

/// Memory requests and quota limits are in units of 512 MiB, as in HAMi.
pub const MEMORY_UNIT: u64 = 512;

/// Cores of one GPU: the node's core capacity counts 16 per GPU.
pub const CORES_PER_GPU: u32 = 16;

/// Memory of one whole GPU in request units (96 × 512 MiB), what the webhook gives whole GPUs.
pub const MEMORY_PER_GPU: u32 = 96;

/// The only memory sizes a single-GPU container may ask for, in request units: the sizes the driver
/// can carve, which HAMi's webhook enforces.
pub const VALID_MEMORY: [i64; 7] = [2, 4, 8, 16, 32, 64, 96];

/// The device config's `mthreads` section.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MthreadsConfig {
    pub resource_count_name: String,
    pub resource_memory_name: String,
    pub resource_core_name: String,
}

impl MthreadsConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        MthreadsConfig {
            resource_count_name: "mthreads.com/vgpu".into(),
            resource_memory_name: "mthreads.com/sgpu-memory".into(),
            resource_core_name: "mthreads.com/sgpu-core".into(),
        }
    }
}

pub struct Mthreads {
    cfg: MthreadsConfig,
    word: Arc<str>,
}

/// What the pod's annotations select (parsed once per pod).
pub type Params = Selections;

impl Mthreads {
    pub fn new(cfg: &MthreadsConfig) -> Mthreads {
        Mthreads { cfg: cfg.clone(), word: Arc::from(WORD) }
    }
}

/// A quantity as Go's `Value()` reads it (rounded up); `Err` names the resource.
fn value(name: &str, text: &str) -> Result<i64, Unusable> {
    Quantity::parse(text).map(|q| q.value_ceil()).map_err(|_| Unusable::Unparsable {
        resource: name.to_owned(),
        detail: format!("{text:?} is not a valid quantity"),
    })
}

impl Vendor for Mthreads {
    fn names(&self) -> Names<'_> {
        let c = &self.cfg;
        Names::new(WORD, &c.resource_count_name, &c.resource_memory_name, &c.resource_core_name, MEMORY_UNIT)
    }

    /// As HAMi derives it: memory × 512 MiB and cores (default 0) are the container's totals, so
    /// each of the `nums` devices takes its share (integer division, as HAMi); percentage 100 only
    /// when no memory was asked for.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        let Some(total) = quantities::count_memory_cores(id, c, self.names(), 0)? else { return Ok(None) };
        let (nums, memreq) = (total.nums, MemMiB(total.memreq.get() / u64::from(total.nums)));
        Ok(Some(ContainerRequest { memreq, cores: total.cores / nums, ..total }))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        Some(Arc::new(Params::uuids_only(pod, [keys::USE_UUID, keys::NOUSE_UUID])))
    }

    /// HAMi's webhook rules. The count (limits, else requests) must be positive. More than one GPU
    /// means whole GPUs: cores 16 × count, memory 96 × count and the pod annotation
    /// `mthreads.com/request-gpu-num`. One GPU without memory is a whole GPU too; with memory, it
    /// must be one of the sizes the driver can carve.
    fn mutate(&self, c: &mut ContainerEdit<'_>, pod: &mut PodContext<'_>) -> Result<bool, Unusable> {
        let cfg = &self.cfg;
        if cfg.resource_count_name.is_empty() {
            return Ok(false);
        }
        let Some(text) = c.quantity(&cfg.resource_count_name) else { return Ok(false) };
        let count = value(&cfg.resource_count_name, &text)?;
        if count <= 0 {
            return Err(format!("{} must be greater than 0", cfg.resource_count_name).into());
        }
        let set = |c: &mut ContainerEdit<'_>, name: &str, v: i64| {
            if !name.is_empty() {
                c.set_limit(name, &v.to_string());
            }
        };
        if count > 1 {
            set(c, &cfg.resource_core_name, count.saturating_mul(CORES_PER_GPU.into()));
            set(c, &cfg.resource_memory_name, count.saturating_mul(MEMORY_PER_GPU.into()));
            pod.set_annotation(keys::REQUEST_GPU_NUM, &count.to_string());
            return Ok(true);
        }
        let memory = Some(&cfg.resource_memory_name).filter(|n| !n.is_empty()).and_then(|n| c.quantity(n));
        match memory {
            None => {
                set(c, &cfg.resource_core_name, CORES_PER_GPU.into());
                set(c, &cfg.resource_memory_name, MEMORY_PER_GPU.into());
            }
            Some(m) => {
                let v = value(&cfg.resource_memory_name, &m)?;
                if !VALID_MEMORY.contains(&v) {
                    return Err(format!(
                        "sGPU memory request value is invalid, valid values are [{}]",
                        VALID_MEMORY.map(|v| v.to_string()).join(", ")
                    )
                    .into());
                }
            }
        }
        Ok(true)
    }

    /// `ceil(C / 16)` devices `<node>-mthreads-<i>`, each 100 slots, `M × 512 × 16 / C` MiB and 16
    /// cores, type `Mthreads`, healthy: HAMi's ids, so pods HAMi placed are counted.
    fn discover(&self, node: &NodeView) -> Discovery {
        let cfg = &self.cfg;
        let capacity = FromCapacity {
            core_name: &cfg.resource_core_name,
            memory_name: &cfg.resource_memory_name,
            cores_per_device: CORES_PER_GPU,
            memory_unit: MEMORY_UNIT,
            id_word: "mthreads",
            word: WORD,
        };
        capacity.discover(node)
    }

    /// The generic walk, with the device type required to contain `Mthreads` and every device the
    /// pod's earlier containers got required to be this one (HAMi's custom filter rule: a pod lives
    /// on one GPU).
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let type_ok = |d: &DeviceUsage| d.info.ty.contains(WORD);
        let uuid_ok = Params::uuid_check(cx.params_as::<Params>());
        let same_device = |d: &DeviceUsage| {
            let elsewhere = cx.earlier.iter().flatten().any(|e| e.uuid != d.info.id);
            elsewhere.then_some(Reason::CardNotFoundCustomFilterRule)
        };
        let rules =
            Rules { type_ok: &type_ok, uuid_ok: &uuid_ok, custom: Some(&same_device), ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn decision_keys(&self) -> Vec<String> {
        [keys::TO_ALLOCATE, keys::ALLOCATED].map(String::from).to_vec()
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::ALLOCATED, keys::GPU_INDEX, keys::PREDICATE_TIME, keys::PREDICATE_NODE].map(String::from).to_vec()
    }

    /// The allocated key only (the plugin reads no to-allocate list), the device indexes of the
    /// last container holding devices, the decision time in unix-ns and the node.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        out.push((keys::ALLOCATED.into(), codec::encode_pod_devices(cx.devices)));
        if let Some(last) = cx.devices.iter().rev().find(|c| !c.is_empty()) {
            let index = |d: &crate::model::ContainerDevice| cx.device(d).map_or(d.idx, |u| u.info.index);
            let list: Vec<String> = last.iter().map(|d| index(d).to_string()).collect();
            out.push((keys::GPU_INDEX.into(), list.join(",")));
        }
        out.push((keys::PREDICATE_TIME.into(), cx.unix_ns.to_string()));
        out.push((keys::PREDICATE_NODE.into(), cx.node.to_string()));
    }

    /// Mthreads takes no node lock, as in HAMi.
    fn lock(&self) -> LockKind {
        LockKind::None
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
