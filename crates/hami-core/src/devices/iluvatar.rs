//! Iluvatar: one backend per configured chip (`iluvatars` entries, keyed by the chip's common
//! word), colon-list registration with a handshake, memory in 256 MiB units, the generic walk with
//! UUID selection, and the webhook's `vCore = 100 × count` and `SOL_CONTINER_NAME` rules.

use super::Unusable;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::annotations::iluvatar as keys;
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::quantity::Quantity;
use crate::model::reason::Rejection;
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, PodView, VendorId};

use super::common::{self, Selections};
use super::walk::{self, Rules};
use super::{DeviceKeys, Discovery, FitCx, HealthRule, Names, Pick, Vendor, quantities};

// The tests read this through `use super::*`.
#[cfg(test)]
use super::WriteCx;

/// Memory requests and quota limits are in units of 256 MiB, as in HAMi.
pub const MEMORY_UNIT: u64 = 256;

/// The container env the webhook sets to the container's name (HAMi's spelling, sic).
pub const CONTAINER_NAME_ENV: &str = "SOL_CONTINER_NAME";

/// One entry of the device config's `iluvatars` list: one chip.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct IluvatarConfig {
    pub chip_name: String,
    pub common_word: String,
    pub resource_count_name: String,
    pub resource_memory_name: String,
    pub resource_core_name: String,
}

impl IluvatarConfig {
    /// The chips of the Helm chart.
    pub fn chart_defaults() -> Vec<IluvatarConfig> {
        ["MR-V100", "MR-V50", "BI-V150", "BI-V100"]
            .into_iter()
            .map(|c| IluvatarConfig {
                chip_name: c.into(),
                common_word: c.into(),
                resource_count_name: format!("iluvatar.ai/{c}-vgpu"),
                resource_memory_name: format!("iluvatar.ai/{c}.vMem"),
                resource_core_name: format!("iluvatar.ai/{c}.vCore"),
            })
            .collect()
    }
}

/// One Iluvatar chip. Its keys embed the common word, so they are built once here.
pub struct Iluvatar {
    cfg: IluvatarConfig,
    word: Arc<str>,
    register: String,
    handshake: String,
    to_allocate: String,
    allocated: String,
    use_uuid: String,
    nouse_uuid: String,
}

/// What the pod's annotations select (parsed once per pod).
pub type Params = Selections;

impl Iluvatar {
    pub fn new(cfg: &IluvatarConfig) -> Iluvatar {
        let cw = cfg.common_word.as_str();
        Iluvatar {
            cfg: cfg.clone(),
            word: Arc::from(cw),
            register: keys::register(cw),
            handshake: keys::handshake(cw),
            to_allocate: keys::to_allocate(cw),
            allocated: keys::allocated(cw),
            use_uuid: keys::use_uuid(cw),
            nouse_uuid: keys::nouse_uuid(cw),
        }
    }
}

impl Vendor for Iluvatar {
    fn names(&self) -> Names<'_> {
        let c = &self.cfg;
        Names::new(&self.word, &c.resource_count_name, &c.resource_memory_name, &c.resource_core_name, MEMORY_UNIT)
    }

    /// As HAMi derives it: memory × 256 MiB, cores default 0, percentage 100 only without memory.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        quantities::count_memory_cores(id, c, self.names(), 0)
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        Some(Arc::new(Params::uuids_only(pod, [&self.use_uuid, &self.nouse_uuid])))
    }

    /// HAMi's webhook rule: recognised iff the count is in limits; a count above 1 (Go's `Value`,
    /// rounded up) takes whole devices, so `limits[vCore] = 100 × count`; the container gets
    /// `SOL_CONTINER_NAME=<name>` unless it has that env or no name.
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, Unusable> {
        let cfg = &self.cfg;
        if cfg.resource_count_name.is_empty() {
            return Ok(false);
        }
        let Some(text) = c.limit(&cfg.resource_count_name) else { return Ok(false) };
        let count = Quantity::parse(&text)
            .map_err(|_| format!("{}: {text:?} is not a valid quantity", cfg.resource_count_name))?
            .value_ceil();
        if count > 1 && !cfg.resource_core_name.is_empty() {
            c.set_limit(&cfg.resource_core_name, &count.saturating_mul(100).to_string());
        }
        let name = c.name().to_owned();
        if !name.is_empty() && !c.has_env(CONTAINER_NAME_ENV) {
            c.push_env(CONTAINER_NAME_ENV, &name);
        }
        Ok(true)
    }

    /// `hami.io/node-<cw>-register`. HAMi reads only the colon form; both forms are accepted here
    /// (a superset).
    fn discover(&self, node: &NodeView) -> Discovery {
        common::registered(node, &self.register, Discovery::devices)
    }

    /// The handshake on `hami.io/node-handshake-<cw>`. Unlike the other handshake vendors,
    /// Iluvatar's clean-up in HAMi removes nothing, so `cleanup` keeps the trait's default.
    fn health_rule(&self) -> HealthRule {
        HealthRule::Handshake { key: self.handshake.clone(), count_resource: self.cfg.resource_count_name.clone() }
    }

    /// The generic walk; the type always passes, UUIDs are selected with `hami.io/use-<cw>-uuid` /
    /// `hami.io/no-use-<cw>-uuid`.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let uuid_ok = Params::uuid_check(cx.params_as::<Params>());
        let rules = Rules { uuid_ok: &uuid_ok, ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    /// The two device keys, identical, type field `<cw>`, as the device plugin reads them.
    fn device_keys(&self) -> Option<DeviceKeys<'_>> {
        Some(DeviceKeys { to_allocate: &self.to_allocate, allocated: &self.allocated })
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
