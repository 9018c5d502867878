//! Hygon: the device plugin's colon-list registration with its handshake, requests with a
//! configurable memory factor and 100 cores by default, and the generic walk with type selection.
//! Two families share it: DCU, as HAMi's basis names it, and HCU, the same devices after HAMi's
//! rename (PR 2969: other annotations, type word and resources). Each node is read in the family
//! it registered, so nodes of both kinds can run side by side while their plugins are upgraded.

use super::Unusable;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::annotations::{hcu, hygon};
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
/// The type word of the renamed family.
pub const HCU_WORD: &str = "HCU";

/// One family's names on the wire.
#[derive(Debug)]
pub struct Family {
    pub word: &'static str,
    pub register: &'static str,
    pub handshake: &'static str,
    pub to_allocate: &'static str,
    pub allocated: &'static str,
    pub use_type: &'static str,
    pub nouse_type: &'static str,
    pub use_uuid: &'static str,
    pub nouse_uuid: &'static str,
}

/// Hygon DCU, as HAMi's basis names it.
pub static DCU: Family = Family {
    word: WORD,
    register: hygon::REGISTER,
    handshake: hygon::HANDSHAKE,
    to_allocate: hygon::TO_ALLOCATE,
    allocated: hygon::ALLOCATED,
    use_type: hygon::USE_TYPE,
    nouse_type: hygon::NOUSE_TYPE,
    use_uuid: hygon::USE_UUID,
    nouse_uuid: hygon::NOUSE_UUID,
};

/// Hygon HCU, the DCU family renamed (HAMi PR 2969).
pub static HCU: Family = Family {
    word: HCU_WORD,
    register: hcu::REGISTER,
    handshake: hcu::HANDSHAKE,
    to_allocate: hcu::TO_ALLOCATE,
    allocated: hcu::ALLOCATED,
    use_type: hcu::USE_TYPE,
    nouse_type: hcu::NOUSE_TYPE,
    use_uuid: hcu::USE_UUID,
    nouse_uuid: hcu::NOUSE_UUID,
};

/// The device config's `hygon` section (and hami-rs's `hcu` section, of the same shape).
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

    /// The HCU family's names, HAMi's since PR 2969.
    pub fn hcu_chart() -> Self {
        HygonConfig {
            resource_count_name: "hygon.com/hcunum".into(),
            resource_memory_name: "hygon.com/hcumem".into(),
            resource_core_name: "hygon.com/hcucores".into(),
            memory_factor: 1,
        }
    }

    /// Whether the section names the HCU family's resources (a HAMi device config since PR 2969
    /// keeps the `hygon` section and puts `hcu` names in it).
    fn names_hcu(&self) -> bool {
        self.resource_count_name.contains("hcu")
    }

    /// Each family's section from a device config's `hygon` and `hcu` sections: an `hcu` section
    /// configures HCU; a `hygon` section configures the family its resource names belong to; the
    /// family no section configures takes its chart values.
    pub fn families(hygon: &HygonConfig, hcu: &HygonConfig) -> (HygonConfig, HygonConfig) {
        let dcu = if hygon.names_hcu() { HygonConfig::chart() } else { hygon.clone() };
        let hcu = if !hcu.resource_count_name.is_empty() {
            hcu.clone()
        } else if hygon.names_hcu() {
            hygon.clone()
        } else {
            HygonConfig::hcu_chart()
        };
        (dcu, hcu)
    }
}

pub struct Hygon {
    cfg: HygonConfig,
    /// `memoryFactor`, at least 1.
    factor: u64,
    word: Arc<str>,
    family: &'static Family,
}

/// What the pod's annotations select (parsed once per pod).
pub type Params = Selections;

impl Hygon {
    /// The DCU family.
    pub fn new(cfg: &HygonConfig) -> Hygon {
        Hygon::of(&DCU, cfg)
    }

    /// The HCU family.
    pub fn hcu(cfg: &HygonConfig) -> Hygon {
        Hygon::of(&HCU, cfg)
    }

    fn of(family: &'static Family, cfg: &HygonConfig) -> Hygon {
        Hygon { cfg: cfg.clone(), factor: cfg.memory_factor.max(1), word: Arc::from(family.word), family }
    }
}

impl Vendor for Hygon {
    fn names(&self) -> Names<'_> {
        let c = &self.cfg;
        Names::new(
            self.family.word,
            &c.resource_count_name,
            &c.resource_memory_name,
            &c.resource_core_name,
            self.factor,
        )
    }

    /// As HAMi derives it: count 1..2³¹−1; memory × `memoryFactor`; cores default 100; percentage
    /// 100 only without memory.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        quantities::count_memory_cores(id, c, self.names(), 100)
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        let f = self.family;
        Some(Arc::new(Params::from_pod(pod, [f.use_type, f.nouse_type], [f.use_uuid, f.nouse_uuid])))
    }

    /// `hami.io/node-dcu-register` (HCU: `hami.io/node-hcu-register`). HAMi reads only the colon
    /// form; both forms are accepted here (a superset).
    fn discover(&self, node: &NodeView) -> Discovery {
        common::registered(node, self.family.register, Discovery::devices)
    }

    fn health_rule(&self) -> HealthRule {
        HealthRule::Handshake {
            key: self.family.handshake.into(),
            count_resource: self.cfg.resource_count_name.clone(),
        }
    }

    /// Dead Hygon devices lose their handshake annotation, as in HAMi.
    fn cleanup(&self) -> Cleanup {
        Cleanup::RemoveAnnotation(self.family.handshake.into())
    }

    /// The generic walk with type selection; no quota check in fit (HAMi checks Hygon quota only at
    /// admission).
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = cx.params_as::<Params>();
        let (type_ok, uuid_ok) = (Params::type_check(p), Params::uuid_check(p));
        let rules = Rules { type_ok: &type_ok, uuid_ok: &uuid_ok, ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    /// The two device keys, identical, as the DCU (HCU) device plugin reads them.
    fn device_keys(&self) -> Option<DeviceKeys<'_>> {
        Some(DeviceKeys { to_allocate: self.family.to_allocate, allocated: self.family.allocated })
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
