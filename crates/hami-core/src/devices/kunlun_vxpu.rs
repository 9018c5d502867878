//! Kunlun vXPU (HAMi's "XPU"): shared XPUs from the JSON registration `hami.io/node-register-xpu`,
//! memory templates of a quarter, half or whole device, equal-size sharing, the same two-wing
//! topology selector as Kunlun XPU, the shared node lock and the `hami.io/node-handshake-xpu`
//! handshake.

use super::Unusable;
use std::sync::Arc;

use crate::model::annotations::kunlun_vxpu as keys;
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::quantity::Quantity;
use crate::model::reason::{Reason, Rejection, Tally};
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, DeviceUsage, PodView, VendorId};

use super::common;
use super::kunlun::{self, DEVICE_MEM, KunlunConfig, Params};
use super::walk;
use super::{Cleanup, DeviceKeys, Discovery, FitCx, HealthRule, Names, Pick, Vendor, quantities};

// The tests read these through `use super::*`.
#[cfg(test)]
use {super::WriteCx, crate::model::codec};

pub const WORD: &str = "XPU";

pub struct KunlunVxpu {
    count_name: String,
    mem_name: String,
    word: Arc<str>,
}

impl KunlunVxpu {
    pub fn new(cfg: &KunlunConfig) -> KunlunVxpu {
        KunlunVxpu {
            count_name: cfg.resource_v_count_name.clone(),
            mem_name: cfg.resource_v_memory_name.clone(),
            word: Arc::from(WORD),
        }
    }
}

/// The memory a vXPU gets: a quarter (24576 MiB), a half (49152) or the whole device (98304),
/// the smallest that holds the request (HAMi's `trimMemory`; zero and negative values take a
/// quarter).
pub fn template(mem: i64) -> u64 {
    [24576, 49152].into_iter().find(|&t| mem <= t as i64).unwrap_or(DEVICE_MEM)
}

/// A device a vXPU of `mem` MiB may join (HAMi's `FitVXPU`): healthy, the memory still free, and
/// unused or running only slices of exactly this size. hami-rs also requires a free slot, which
/// HAMi does not check (the memory rule bounds it only when the registered count matches).
fn fits_vxpu(d: &DeviceUsage, mem: u64) -> bool {
    if !d.health || d.used >= d.info.count {
        return false;
    }
    if d.used_mem.get().saturating_add(mem) > d.info.devmem.get() {
        return false;
    }
    d.used == 0 || d.used_mem.get() / u64::from(d.used) == mem
}

impl Vendor for KunlunVxpu {
    fn names(&self) -> Names<'_> {
        Names::new(WORD, &self.count_name, &self.mem_name, "", 1)
    }

    /// As HAMi derives it: memory rounded up to a template, cores = memory × 100 ÷ 98304; an absent
    /// memory asks for the whole device (98304 MiB, 100 %, percentage 100), as HAMi does. HAMi also
    /// reads a memory that is not an integer as absent; hami-rs refuses it, and a negative one.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        let Some(nums) = quantities::count(c, &self.count_name)? else { return Ok(None) };
        let mem = quantities::int_in(quantities::given(c, &self.mem_name), &self.mem_name, 0..=i64::MAX)?.map(template);
        Ok(Some(match mem {
            Some(m) => ContainerRequest::new(id, nums, m, 0, (m * 100 / DEVICE_MEM) as u32),
            None => ContainerRequest::new(id, nums, DEVICE_MEM, 100, 100),
        }))
    }

    fn selects(&self, params: Option<&VendorParams>, _ty: &str, uuid: &str) -> bool {
        super::params_allow(params, |p: &Params| p.allows(uuid))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        Some(Arc::new(Params::from_pod(pod)))
    }

    /// HAMi's webhook rule: recognised iff the count is in limits; a memory limit is rounded up
    /// (Go's `Value`) to its template and written to limits and requests.
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, Unusable> {
        if self.count_name.is_empty() || !c.has_limit(&self.count_name) {
            return Ok(false);
        }
        if !self.mem_name.is_empty()
            && let Some(text) = c.limit(&self.mem_name)
        {
            let q = Quantity::parse(&text).map_err(|e| format!("{}: {e}", self.mem_name))?;
            let t = template(q.value_ceil()).to_string();
            c.set_limit(&self.mem_name, &t);
            c.set_request(&self.mem_name, &t);
        }
        Ok(true)
    }

    fn discover(&self, node: &NodeView) -> Discovery {
        common::registered(node, keys::REGISTER, Discovery::devices)
    }

    fn health_rule(&self) -> HealthRule {
        HealthRule::Handshake { key: keys::HANDSHAKE.into(), count_resource: self.count_name.clone() }
    }

    fn cleanup(&self) -> Cleanup {
        Cleanup::RemoveAnnotation(keys::HANDSHAKE.into())
    }

    /// The topology selector over devices that pass both UUID selections and [`fits_vxpu`] (and,
    /// under mutex, are unused). On failure under mutex, the busy devices that would otherwise have
    /// fitted count as `ExclusiveDeviceAllocateConflict`.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let mem = cx.req.memreq.get();
        let mutex = cx.pod.gpu_policy.mutex;
        let fits = |d: &DeviceUsage| (!mutex || d.used == 0) && fits_vxpu(d, mem);
        let chosen = match kunlun::select(cx, cx.params_as::<Params>(), &fits) {
            Ok(c) => c,
            Err(mismatched) => {
                let mut tally = Tally::new(cx.order.len());
                if mutex {
                    let busy = cx
                        .order
                        .iter()
                        .filter(|&&p| {
                            let d = &cx.devs[usize::from(p)];
                            d.used > 0 && fits_vxpu(d, mem)
                        })
                        .count();
                    if busy > 0 {
                        tally.add(Reason::ExclusiveDeviceAllocateConflict, busy);
                    }
                }
                return Err(kunlun::selector_failure(tally, mismatched));
            }
        };
        for pos in chosen {
            out.push(walk::pick(pos, &cx.devs[usize::from(pos)], &self.word, cx.req.memreq, cx.req.cores));
        }
        Ok(())
    }

    /// To-allocate and allocated, identical, as the device plugin reads them.
    fn device_keys(&self) -> Option<DeviceKeys<'_>> {
        Some(DeviceKeys { to_allocate: keys::TO_ALLOCATE, allocated: keys::ALLOCATED })
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
