//! Hygon DCU: the device plugin's colon-list registration with its handshake, requests with a
//! configurable memory factor and 100 cores by default, and the generic walk with
//! `hygon.com/use-dcutype` type selection.

use super::Unusable;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::annotations::hygon as keys;
use crate::model::pod::NodeView;
use crate::model::reason::Rejection;
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, PodView, VendorId};

use super::common::{self, Selections};
use super::walk::{self, Rules};
use super::{Cleanup, DeviceKeys, Discovery, FitCx, HealthRule, Names, Pick, Vendor, quantities};

// The tests read these through `use super::*`.
#[cfg(test)]
use {
    super::WriteCx,
    crate::model::edit::{ContainerEdit, PodContext},
};

pub const WORD: &str = "DCU";

/// The device config's `hygon` section.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct HygonConfig {
    pub resource_count_name: String,
    pub resource_memory_name: String,
    pub resource_core_name: String,
    pub memory_factor: u64,
}

impl HygonConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        HygonConfig {
            resource_count_name: "hygon.com/dcunum".into(),
            resource_memory_name: "hygon.com/dcumem".into(),
            resource_core_name: "hygon.com/dcucores".into(),
            memory_factor: 1,
        }
    }
}

pub struct Hygon {
    cfg: HygonConfig,
    /// `memoryFactor`, at least 1.
    factor: u64,
    word: Arc<str>,
}

/// What the pod's annotations select (parsed once per pod).
pub type Params = Selections;

impl Hygon {
    pub fn new(cfg: &HygonConfig) -> Hygon {
        Hygon { cfg: cfg.clone(), factor: cfg.memory_factor.max(1), word: Arc::from(WORD) }
    }
}

impl Vendor for Hygon {
    fn names(&self) -> Names<'_> {
        let c = &self.cfg;
        Names::new(WORD, &c.resource_count_name, &c.resource_memory_name, &c.resource_core_name, self.factor)
    }

    /// As HAMi derives it: count 1..2³¹−1; memory × `memoryFactor`; cores default 100; percentage
    /// 100 only without memory.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        quantities::count_memory_cores(id, c, self.names(), 100)
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        let uuids = [keys::USE_UUID, keys::NOUSE_UUID];
        Some(Arc::new(Params::from_pod(pod, [keys::USE_TYPE, keys::NOUSE_TYPE], uuids)))
    }

    /// `hami.io/node-dcu-register`. HAMi reads only the colon form; both forms are accepted here (a
    /// superset).
    fn discover(&self, node: &NodeView) -> Discovery {
        common::registered(node, keys::REGISTER, Discovery::devices)
    }

    fn health_rule(&self) -> HealthRule {
        HealthRule::Handshake { key: keys::HANDSHAKE.into(), count_resource: self.cfg.resource_count_name.clone() }
    }

    /// Dead Hygon devices lose their handshake annotation, as in HAMi.
    fn cleanup(&self) -> Cleanup {
        Cleanup::RemoveAnnotation(keys::HANDSHAKE.into())
    }

    /// The generic walk with type selection; no quota check in fit (HAMi checks Hygon quota only at
    /// admission).
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = cx.params_as::<Params>();
        let (type_ok, uuid_ok) = (Params::type_check(p), Params::uuid_check(p));
        let rules = Rules { type_ok: &type_ok, uuid_ok: &uuid_ok, ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    /// The two device keys, identical, as the DCU device plugin reads them.
    fn device_keys(&self) -> Option<DeviceKeys<'_>> {
        Some(DeviceKeys { to_allocate: keys::TO_ALLOCATE, allocated: keys::ALLOCATED })
    }
}

#[cfg(test)]
mod tests;
