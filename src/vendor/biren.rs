//! Biren (vendors.md §14, "Biren"): JSON registration `hami.io/node-biren-register`, count-only
//! requests and fit (health, type, UUID, slots, mutex), the shared node lock and the
//! `hami.io/node-handshake-biren` handshake.

use std::sync::Arc;

use crate::config::device::CountOnlyConfig;
use crate::model::annotations::biren as keys;
use crate::model::codec::{self, Selection, TypeList, UuidList};
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, DeviceUsage, MemMiB, PodView, VendorId};
use crate::sched::reason::Rejection;

use super::walk::{self, Rules};
use super::{Cleanup, Discovery, FitCx, HealthRule, Pick, Vendor, WriteCx, quantities};

pub const WORD: &str = "Biren";

pub struct Biren {
    count_name: String,
    word: Arc<str>,
}

impl Biren {
    pub fn new(cfg: &CountOnlyConfig) -> Biren {
        Biren { count_name: cfg.resource_count_name.clone(), word: Arc::from(WORD) }
    }
}

/// What the pod's annotations select, parsed once per pod.
///
/// HAMi declares `birentech.com/use-biren` / `nouse-biren` but never reads them. hami-rs enforces
/// them as type lists with the rule every other vendor's type keys follow (protocol.md §4.5): a
/// pod that names them means to restrict its devices, and a blank or absent value changes nothing.
#[derive(Debug, Default)]
pub struct Params {
    pub types: Selection<TypeList>,
    pub uuids: Selection<UuidList>,
}

fn params<'a>(cx: &'a FitCx<'_>) -> Option<&'a Params> {
    cx.params.and_then(|p| p.downcast_ref::<Params>())
}

impl Vendor for Biren {
    fn name(&self) -> &str {
        WORD
    }

    fn resource_names(&self) -> Vec<String> {
        Some(self.count_name.clone()).filter(|n| !n.is_empty()).into_iter().collect()
    }

    /// scheduling.md §4.2: the count (limits, else requests); percentage 100, no cores.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, String> {
        let Some(nums) = quantities::count(c, &self.count_name)? else { return Ok(None) };
        Ok(Some(ContainerRequest::new(id, nums, 0, 100, 0)))
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
        Ok(!self.count_name.is_empty() && c.has_limit(&self.count_name))
    }

    /// protocol.md §3.1: the JSON list (the colon form is accepted too); `devcore` is forced to 100.
    fn discover(&self, node: &NodeView) -> Discovery {
        let Some(reg) = node.annotation(keys::REGISTER) else { return Discovery::Absent };
        match codec::decode_node_devices(reg) {
            Ok(mut devices) => {
                for d in &mut devices {
                    d.devcore = 100;
                }
                Discovery::Devices { devices, extra: None }
            }
            Err(codec::Error::NoDevices) => Discovery::Absent,
            Err(error) => Discovery::Malformed { key: keys::REGISTER.into(), error },
        }
    }

    fn health_rule(&self) -> HealthRule {
        HealthRule::Handshake { key: keys::HANDSHAKE.into(), count_resource: self.count_name.clone() }
    }

    fn cleanup(&self) -> Cleanup {
        Cleanup::RemoveAnnotation(keys::HANDSHAKE.into())
    }

    /// vendors.md §14: the generic walk with only health, type, UUID, slot and mutex checks.
    /// HAMi's entries reserve no memory (and the request's cores, 0).
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = params(cx);
        let type_ok = |d: &DeviceUsage| p.is_none_or(|p| p.types.allows(&d.info.ty));
        let uuid_ok = |d: &DeviceUsage| p.is_none_or(|p| p.uuids.allows(d.info.id.as_str()));
        let rules = Rules { type_ok: &type_ok, uuid_ok: &uuid_ok, capacity: false, ..Rules::basic(&self.word) };
        let start = out.len();
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)?;
        for pick in &mut out[start..] {
            pick.dev.usedmem = MemMiB::ZERO;
        }
        Ok(())
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::TO_ALLOCATE, keys::ALLOCATED].map(String::from).to_vec()
    }

    /// protocol.md §4.1: to-allocate and allocated (capital B), identical.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(cx.devices);
        out.push((keys::TO_ALLOCATE.into(), v.clone()));
        out.push((keys::ALLOCATED.into(), v));
    }
}

#[cfg(test)]
mod tests;
