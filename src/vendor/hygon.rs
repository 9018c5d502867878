//! Hygon DCU (vendors.md §4): the device plugin's colon-list registration with its handshake,
//! requests with a configurable memory factor and 100 cores by default, and the generic walk
//! with `hygon.com/use-dcutype` type selection.

use std::sync::Arc;

use crate::config::device::HygonConfig;
use crate::model::annotations::hygon as keys;
use crate::model::codec::{self, Selection, TypeList, UuidList};
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, DeviceUsage, MemMiB, PodView, VendorId};
use crate::sched::reason::Rejection;

use super::walk::{self, Rules};
use super::{Cleanup, Discovery, FitCx, HealthRule, Pick, QuotaNames, Vendor, WriteCx, quantities};

pub const WORD: &str = "DCU";

pub struct Hygon {
    cfg: HygonConfig,
    /// `memoryFactor`, at least 1.
    factor: u64,
    word: Arc<str>,
}

/// What the pod's annotations select (parsed once per pod).
#[derive(Debug, Default)]
pub struct Params {
    pub types: Selection<TypeList>,
    pub uuids: Selection<UuidList>,
}

impl Hygon {
    pub fn new(cfg: &HygonConfig) -> Hygon {
        Hygon { cfg: cfg.clone(), factor: cfg.memory_factor.max(1), word: Arc::from(WORD) }
    }
}

fn params<'a>(cx: &'a FitCx<'_>) -> Option<&'a Params> {
    cx.params.and_then(|p| p.downcast_ref::<Params>())
}

impl Vendor for Hygon {
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
            memory_factor: self.factor,
        }
    }

    /// scheduling.md §4.2, Hygon: count 1..2³¹−1; memory × `memoryFactor`; cores default 100;
    /// percentage 100 only without memory.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, String> {
        let cfg = &self.cfg;
        let Some(nums) = quantities::count(c, &cfg.resource_count_name)? else { return Ok(None) };
        let memreq = quantities::memory(c, &cfg.resource_memory_name, self.factor)?;
        let cores = quantities::cores(c, &cfg.resource_core_name, 100)?;
        let mempct = if memreq == 0 { 100 } else { 0 };
        Ok(Some(ContainerRequest { vendor: id, nums, memreq: MemMiB(memreq), mempct, cores, mode: 0 }))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        let a = |k: &str| pod.annotation(k);
        Some(Arc::new(Params {
            types: Selection::types(a(keys::USE_TYPE), a(keys::NOUSE_TYPE)),
            uuids: Selection::uuids(a(keys::USE_UUID), a(keys::NOUSE_UUID)),
        }))
    }

    /// protocol.md §6: recognised iff the count is in limits; nothing is changed.
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, String> {
        let n = &self.cfg.resource_count_name;
        Ok(!n.is_empty() && c.has_limit(n))
    }

    /// protocol.md §3.1: `hami.io/node-dcu-register`. HAMi reads only the colon form; both
    /// forms are accepted here (a superset).
    fn discover(&self, node: &NodeView) -> Discovery {
        let Some(reg) = node.annotation(keys::REGISTER) else {
            return Discovery::Absent;
        };
        match codec::decode_node_devices(reg) {
            Ok(devices) if devices.is_empty() => Discovery::Absent,
            Ok(devices) => Discovery::Devices { devices, extra: None },
            Err(codec::Error::NoDevices) => Discovery::Absent,
            Err(error) => Discovery::Malformed { key: keys::REGISTER.into(), error },
        }
    }

    fn health_rule(&self) -> HealthRule {
        HealthRule::Handshake { key: keys::HANDSHAKE.into(), count_resource: self.cfg.resource_count_name.clone() }
    }

    /// protocol.md §3.7 step 4: dead Hygon devices lose their handshake annotation.
    fn cleanup(&self) -> Cleanup {
        Cleanup::RemoveAnnotation(keys::HANDSHAKE.into())
    }

    /// scheduling.md §5.8, Hygon: the generic walk with type selection; no quota check in fit
    /// (HAMi checks Hygon quota only at admission).
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = params(cx);
        let type_ok = |d: &DeviceUsage| p.is_none_or(|p| p.types.allows(&d.info.ty));
        let uuid_ok = |d: &DeviceUsage| p.is_none_or(|p| p.uuids.allows(d.info.id.as_str()));
        let rules = Rules { type_ok: &type_ok, uuid_ok: &uuid_ok, ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::TO_ALLOCATE, keys::ALLOCATED].map(String::from).to_vec()
    }

    /// protocol.md §4.1, Hygon: the two device keys, identical.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(cx.devices);
        out.push((keys::TO_ALLOCATE.into(), v.clone()));
        out.push((keys::ALLOCATED.into(), v));
    }
}

#[cfg(test)]
mod tests;
