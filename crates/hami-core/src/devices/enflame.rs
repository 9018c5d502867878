//! Enflame GCU (HAMi's "GCU"): whole devices synthesised from node capacity, as HAMi does; a device
//! serves one container at most. No lock, healthy while the node still reports capacity.

use super::Unusable;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::annotations::enflame as keys;
use crate::model::pod::NodeView;
use crate::model::reason::{Reason, Rejection};
use crate::model::request::ContainerRequest;
use crate::model::{ContainerView, DeviceInfo, DeviceUsage, PodView, VendorId};

use super::common;
use super::walk::{self, Rules};
use super::{DeviceKeys, Discovery, FitCx, HealthRule, LockKind, Names, Pick, Vendor, quantities};

// The tests read these through `use super::*`.
#[cfg(test)]
use {
    super::WriteCx,
    crate::model::codec,
    crate::model::edit::{ContainerEdit, PodContext},
};

pub const WORD: &str = "GCU";

/// What one GCU request reserves: the whole device, in HAMi's units (a synthesised device has
/// 100 "MiB" and 100 cores, so the entry reads `…,GCU,100,100`).
const WHOLE: u64 = 100;

/// The device config's `enflame` section, read by Enflame GCU and Enflame DRS.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct EnflameConfig {
    #[serde(rename = "resourceNameGCU")]
    pub resource_name_gcu: String,
    #[serde(rename = "resourceNameDRSGCU")]
    pub resource_name_drs_gcu: String,
    #[serde(rename = "resourceNameGCUMemory")]
    pub resource_name_gcu_memory: String,
    #[serde(rename = "resourceNameGCUCore")]
    pub resource_name_gcu_core: String,
    #[serde(rename = "resourceNameVGCU")]
    pub resource_name_vgcu: String,
    #[serde(rename = "resourceNameVGCUPercentage")]
    pub resource_name_vgcu_percentage: String,
}

impl EnflameConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        EnflameConfig {
            resource_name_gcu: "enflame.com/gcu".into(),
            resource_name_drs_gcu: "enflame.com/drs-gcu".into(),
            resource_name_gcu_memory: "enflame.com/gcu-memory".into(),
            resource_name_gcu_core: "enflame.com/gcu-core".into(),
            resource_name_vgcu: String::new(),
            resource_name_vgcu_percentage: String::new(),
        }
    }
}

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
    fn names(&self) -> Names<'_> {
        Names::count_only(WORD, &self.count_name)
    }

    /// As HAMi derives it: the count (limits, else requests) as an exact integer; every device is
    /// reserved whole (memory 100, percentage 100, cores 100).
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        let Some(nums) = quantities::count(c, &self.count_name)? else { return Ok(None) };
        Ok(Some(ContainerRequest::new(id, nums, WHOLE, 100, 100)))
    }

    /// One device per unit of capacity, id `<node>-GCU-<i>`: HAMi's ids, so pods HAMi placed are
    /// counted.
    fn discover(&self, node: &NodeView) -> Discovery {
        let Some(n) = common::positive_capacity(node, &self.count_name) else { return Discovery::Absent };
        // Devices are addressed by u16 positions; an absurd capacity is capped, not wrapped.
        let devices = (0..n.min(i64::from(u16::MAX)) as u32)
            .map(|i| DeviceInfo::new(&format!("{}-{WORD}-{i}", node.name()), i, 1, WHOLE, 100, WORD))
            .collect();
        Discovery::devices(devices)
    }

    fn health_rule(&self) -> HealthRule {
        HealthRule::CapacityPositive { resource: self.count_name.clone() }
    }

    /// Healthy and unused only, as in HAMi; the entry takes the request's 100/100.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let rules = Rules { custom: Some(&busy), capacity: false, ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    /// To-allocate and allocated, identical, as the device plugin reads them.
    fn device_keys(&self) -> Option<DeviceKeys<'_>> {
        Some(DeviceKeys { to_allocate: keys::TO_ALLOCATE, allocated: keys::ALLOCATED })
    }

    fn lock(&self) -> LockKind {
        LockKind::None
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
