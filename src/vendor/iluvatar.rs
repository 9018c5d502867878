//! Iluvatar (vendors.md §5): one backend per configured chip (`iluvatars` entries, keyed by the
//! chip's common word), colon-list registration with a handshake, memory in 256 MiB units, the
//! generic walk with UUID selection, and the webhook's `vCore = 100 × count` and
//! `SOL_CONTINER_NAME` rules.

use std::sync::Arc;

use crate::config::device::IluvatarConfig;
use crate::model::annotations::iluvatar as keys;
use crate::model::codec::{self, Selection, UuidList};
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::quantity::Quantity;
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, DeviceUsage, MemMiB, PodView, VendorId};
use crate::sched::reason::Rejection;

use super::walk::{self, Rules};
use super::{Discovery, FitCx, HealthRule, Pick, QuotaNames, Vendor, WriteCx, quantities};

/// Memory requests and quota limits are in units of 256 MiB (scheduling.md §4.2, §9).
pub const MEMORY_UNIT: u64 = 256;

/// The container env the webhook sets to the container's name (HAMi's spelling, sic).
pub const CONTAINER_NAME_ENV: &str = "SOL_CONTINER_NAME";

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
#[derive(Debug, Default)]
pub struct Params {
    pub uuids: Selection<UuidList>,
}

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

fn params<'a>(cx: &'a FitCx<'_>) -> Option<&'a Params> {
    cx.params.and_then(|p| p.downcast_ref::<Params>())
}

impl Vendor for Iluvatar {
    fn name(&self) -> &str {
        &self.word
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

    /// scheduling.md §4.2, Iluvatar: memory × 256 MiB, cores default 0, percentage 100 only
    /// without memory.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, String> {
        let cfg = &self.cfg;
        let Some(nums) = quantities::count(c, &cfg.resource_count_name)? else { return Ok(None) };
        let memreq = quantities::memory(c, &cfg.resource_memory_name, MEMORY_UNIT)?;
        let cores = quantities::cores(c, &cfg.resource_core_name, 0)?;
        let mempct = if memreq == 0 { 100 } else { 0 };
        Ok(Some(ContainerRequest { vendor: id, nums, memreq: MemMiB(memreq), mempct, cores, mode: 0 }))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        let a = |k: &str| pod.annotation(k);
        Some(Arc::new(Params { uuids: Selection::uuids(a(&self.use_uuid), a(&self.nouse_uuid)) }))
    }

    /// protocol.md §6, Iluvatar: recognised iff the count is in limits; a count above 1 (Go's
    /// `Value`, rounded up) takes whole devices, so `limits[vCore] = 100 × count`; the container
    /// gets `SOL_CONTINER_NAME=<name>` unless it has that env or no name.
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, String> {
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

    /// protocol.md §3.1: `hami.io/node-<cw>-register`. HAMi reads only the colon form; both
    /// forms are accepted here (a superset).
    fn discover(&self, node: &NodeView) -> Discovery {
        let Some(reg) = node.annotation(&self.register) else {
            return Discovery::Absent;
        };
        match codec::decode_node_devices(reg) {
            Ok(devices) if devices.is_empty() => Discovery::Absent,
            Ok(devices) => Discovery::Devices { devices, extra: None },
            Err(codec::Error::NoDevices) => Discovery::Absent,
            Err(error) => Discovery::Malformed { key: self.register.clone(), error },
        }
    }

    /// protocol.md §3.7: the handshake on `hami.io/node-handshake-<cw>`. Unlike the other
    /// handshake vendors, Iluvatar's clean-up removes nothing (vendors.md §1), so `cleanup` keeps
    /// the trait's default.
    fn health_rule(&self) -> HealthRule {
        HealthRule::Handshake { key: self.handshake.clone(), count_resource: self.cfg.resource_count_name.clone() }
    }

    /// scheduling.md §5.8: the generic walk; the type always passes, UUIDs are selected with
    /// `hami.io/use-<cw>-uuid` / `hami.io/no-use-<cw>-uuid`.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = params(cx);
        let uuid_ok = |d: &DeviceUsage| p.is_none_or(|p| p.uuids.allows(d.info.id.as_str()));
        let rules = Rules { uuid_ok: &uuid_ok, ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(&self.allocated)
    }

    fn pod_keys(&self) -> Vec<String> {
        vec![self.to_allocate.clone(), self.allocated.clone()]
    }

    /// protocol.md §4.1, Iluvatar: the two device keys, identical, type field `<cw>`.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(cx.devices);
        out.push((self.to_allocate.clone(), v.clone()));
        out.push((self.allocated.clone(), v));
    }
}

#[cfg(test)]
mod tests;
