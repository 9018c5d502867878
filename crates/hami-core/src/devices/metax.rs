//! Metax GPU: whole devices synthesised from node capacity, the generic walk with HAMi's
//! same-device rule, and the node score from the topology losses/scores annotations.

use super::Unusable;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::annotations::metax as keys;
use crate::model::pod::NodeView;
use crate::model::reason::{Reason, Rejection};
use crate::model::request::{ContainerRequest, NodePolicy};
use crate::model::{ContainerView, DeviceInfo, DeviceUsage, PodView, VendorId};

use super::walk::{self, Rules};
use super::{DeviceKeys, Discovery, FitCx, HealthRule, LockKind, Names, Pick, ScoreCx, Vendor, quantities};

// The tests read these through `use super::*`.
#[cfg(test)]
use {
    super::WriteCx,
    crate::model::codec,
    crate::model::edit::{ContainerEdit, PodContext},
};

pub const WORD: &str = "Metax-GPU";

/// What HAMi synthesises per device.
const DEVMEM: u64 = 65536;
const DEVCORE: u32 = 100;

/// The base of the node score: HAMi scores `2000 − loss` (binpack) or `2000 − score` (spread).
const SCORE_BASE: f32 = 2000.0;

/// The device config's `metax` section, read by Metax GPU and Metax sGPU.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MetaxConfig {
    pub resource_count_name: String,
    pub resource_v_count_name: String,
    pub resource_v_memory_name: String,
    pub resource_v_core_name: String,
    pub sgpu_topology_aware: bool,
}

impl MetaxConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        MetaxConfig {
            resource_count_name: "metax-tech.com/gpu".into(),
            resource_v_count_name: "metax-tech.com/sgpu".into(),
            resource_v_memory_name: "metax-tech.com/vmemory".into(),
            resource_v_core_name: "metax-tech.com/vcore".into(),
            sgpu_topology_aware: false,
        }
    }
}

pub struct MetaxGpu {
    count_name: String,
    word: Arc<str>,
}

impl MetaxGpu {
    pub fn new(cfg: &MetaxConfig) -> MetaxGpu {
        MetaxGpu { count_name: cfg.resource_count_name.clone(), word: Arc::from(WORD) }
    }
}

/// One of the node's topology maps ("number of devices" → value).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TopologyMap {
    /// The annotation is not on the node: the score is 0.
    #[default]
    Absent,
    /// The annotation is present; a value HAMi cannot parse reads as an empty map.
    Present(BTreeMap<i64, i64>),
}

impl TopologyMap {
    /// Parses as Go's `json.Unmarshal` into `map[int]int`: decimal keys, integer values; any
    /// error leaves nothing to look up (HAMi then counts the value as 0).
    pub fn parse(value: Option<&str>) -> TopologyMap {
        let Some(v) = value else { return TopologyMap::Absent };
        let parsed = || -> Option<BTreeMap<i64, i64>> {
            match serde_json::from_str::<serde_json::Value>(v).ok()? {
                serde_json::Value::Null => Some(BTreeMap::new()),
                serde_json::Value::Object(m) => {
                    m.iter().map(|(k, v)| Some((k.parse::<i64>().ok()?, v.as_i64()?))).collect()
                }
                _ => None,
            }
        };
        TopologyMap::Present(parsed().unwrap_or_default())
    }

    /// The node score for a pod that got `n` devices: absent → 0, else 2000 − value (missing → 0).
    fn score(&self, n: i64) -> f32 {
        match self {
            TopologyMap::Absent => 0.0,
            TopologyMap::Present(m) => SCORE_BASE - m.get(&n).copied().unwrap_or(0) as f32,
        }
    }
}

/// The node's topology annotations, read at discovery.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extra {
    pub losses: TopologyMap,
    pub scores: TopologyMap,
}

impl Vendor for MetaxGpu {
    fn names(&self) -> Names<'_> {
        Names::count_only(WORD, &self.count_name)
    }

    /// As HAMi derives it: the count (limits, else requests) asks for whole devices: all memory
    /// (percentage 100) and 100 cores.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        let Some(nums) = quantities::count(c, &self.count_name)? else { return Ok(None) };
        Ok(Some(ContainerRequest::new(id, nums, 0, 100, 100)))
    }

    /// One device per unit of `status.capacity[count]`, as HAMi synthesises them.
    fn discover(&self, node: &NodeView) -> Discovery {
        if self.count_name.is_empty() {
            return Discovery::Absent;
        }
        // HAMi reads the capacity with AsInt64: absent, zero or non-integer means no devices.
        let n = node
            .status
            .capacity
            .get(&self.count_name)
            .and_then(|q| q.parse().ok())
            .and_then(|q| q.as_i64_exact())
            .unwrap_or(0);
        if n <= 0 {
            return Discovery::Absent;
        }
        // Capacity is bounded by what a node can report; cap the loop so a bogus value cannot
        // allocate without bound.
        let n = n.min(i64::from(u16::MAX)) as u32;
        let devices = (0..n)
            .map(|i| DeviceInfo::new(&format!("{}-metax-{i}", node.name()), i, 1, DEVMEM, DEVCORE, WORD))
            .collect();
        let extra = Extra {
            losses: TopologyMap::parse(node.annotation(keys::TOPOLOGY_LOSSES)),
            scores: TopologyMap::parse(node.annotation(keys::TOPOLOGY_SCORES)),
        };
        Discovery::Devices { devices, extra: Some(Arc::new(extra)) }
    }

    /// Healthy iff the count capacity is positive, HAMi's rule for Metax GPU.
    fn health_rule(&self) -> HealthRule {
        HealthRule::CapacityPositive { resource: self.count_name.clone() }
    }

    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        // HAMi's type check compares the request's word with its own: it always passes, and UUID
        // selection is not supported (HAMi accepts any value and ignores it).
        let same_device = |d: &DeviceUsage| same_device_rule(cx, d);
        let rules = Rules { custom: Some(&same_device), custom_after_capacity: true, ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    /// As HAMi scores it: the node policy picks the map, the number of devices the pod got is the
    /// key.
    fn node_score(&self, cx: &ScoreCx<'_>) -> f32 {
        let n = cx.devices.iter().map(Vec::len).sum::<usize>() as i64;
        let extra = cx.extra.and_then(|e| e.downcast_ref::<Extra>());
        let Some(extra) = extra else { return 0.0 };
        match cx.policy {
            NodePolicy::Binpack => extra.losses.score(n),
            NodePolicy::Spread => extra.scores.score(n),
            NodePolicy::Other => 0.0,
        }
    }

    /// To-allocate and allocated, identical, as the device plugin reads them.
    fn device_keys(&self) -> Option<DeviceKeys<'_>> {
        Some(DeviceKeys { to_allocate: keys::TO_ALLOCATE, allocated: keys::ALLOCATED })
    }

    fn lock(&self) -> LockKind {
        LockKind::None
    }
}

/// HAMi's Metax rule "all devices on one device": every device earlier containers of the pod got
/// from this vendor must be `d`. HAMi evaluates init containers against each other and regular
/// containers against each other, so only earlier containers of the same kind count.
fn same_device_rule(cx: &FitCx<'_>, d: &DeviceUsage) -> Option<Reason> {
    let init = cx.pod.is_plain_init(cx.container);
    let others = cx
        .earlier
        .iter()
        .enumerate()
        .filter(|(i, _)| cx.pod.is_plain_init(*i) == init)
        .flat_map(|(_, c)| c.iter())
        .any(|e| e.uuid != d.info.id);
    others.then_some(Reason::CardNotFoundCustomFilterRule)
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
