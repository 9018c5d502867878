//! Enflame GCU (vendors.md §9, "GCU"): whole devices synthesised from node capacity
//! (protocol.md §3.4); a device serves one container at most. No lock, healthy while the node
//! still reports capacity.

use std::sync::Arc;

use crate::config::device::EnflameConfig;
use crate::model::annotations::enflame as keys;
use crate::model::codec;
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::request::ContainerRequest;
use crate::model::{ContainerView, DeviceInfo, DeviceUsage, PodView, VendorId};
use crate::sched::reason::{Reason, Rejection};

use super::walk::{self, Rules};
use super::{Discovery, FitCx, HealthRule, LockKind, Pick, Vendor, WriteCx, quantities};

pub const WORD: &str = "GCU";

/// What one GCU request reserves: the whole device, in HAMi's units (a synthesised device has
/// 100 "MiB" and 100 cores, so the entry reads `…,GCU,100,100`).
const WHOLE: u64 = 100;

pub struct EnflameGcu {
    count_name: String,
    word: Arc<str>,
}

impl EnflameGcu {
    pub fn new(cfg: &EnflameConfig) -> EnflameGcu {
        EnflameGcu { count_name: cfg.resource_name_gcu.clone(), word: Arc::from(WORD) }
    }
}

/// A device already serving a task takes no other (HAMi's GCU fit has no other capacity rule).
fn busy(d: &DeviceUsage) -> Option<Reason> {
    (d.used > 0).then_some(Reason::ExclusiveDeviceAllocateConflict)
}

impl Vendor for EnflameGcu {
    fn name(&self) -> &str {
        WORD
    }

    fn resource_names(&self) -> Vec<String> {
        Some(self.count_name.clone()).filter(|n| !n.is_empty()).into_iter().collect()
    }

    /// scheduling.md §4.2: the count (limits, else requests) as an exact integer; every device is
    /// reserved whole (memory 100, percentage 100, cores 100).
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, String> {
        let Some(nums) = quantities::count(c, &self.count_name)? else { return Ok(None) };
        Ok(Some(ContainerRequest::new(id, nums, WHOLE, 100, 100)))
    }

    /// protocol.md §6: recognised iff the count is in limits; nothing is changed.
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, String> {
        Ok(!self.count_name.is_empty() && c.has_limit(&self.count_name))
    }

    /// protocol.md §3.4: one device per unit of capacity, id `<node>-GCU-<i>`.
    fn discover(&self, node: &NodeView) -> Discovery {
        if self.count_name.is_empty() {
            return Discovery::Absent;
        }
        let n = node.capacity(&self.count_name);
        if n <= 0 {
            return Discovery::Absent;
        }
        // Devices are addressed by u16 positions; an absurd capacity is capped, not wrapped.
        let devices = (0..n.min(i64::from(u16::MAX)) as u32)
            .map(|i| DeviceInfo::new(&format!("{}-{WORD}-{i}", node.name()), i, 1, WHOLE, 100, WORD))
            .collect();
        Discovery::Devices { devices, extra: None }
    }

    fn health_rule(&self) -> HealthRule {
        HealthRule::CapacityPositive { resource: self.count_name.clone() }
    }

    /// vendors.md §9: healthy and unused only; the entry takes the request's 100/100.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let rules = Rules { custom: Some(&busy), capacity: false, ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::TO_ALLOCATE, keys::ALLOCATED].map(String::from).to_vec()
    }

    /// protocol.md §4.1: to-allocate and allocated, identical.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(cx.devices);
        out.push((keys::TO_ALLOCATE.into(), v.clone()));
        out.push((keys::ALLOCATED.into(), v));
    }

    fn lock(&self) -> LockKind {
        LockKind::None
    }
}

#[cfg(test)]
mod tests;
