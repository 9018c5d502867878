//! Vastai (vendors.md §13, "Vastai"): JSON registration `hami.io/node-va-register`, count-only
//! requests, die mode (a card, "AIC", carries several dies registered as devices) with its card
//! grouping and node score, the shared node lock and the `hami.io/node-handshake-va` handshake.

use std::sync::Arc;

use serde_json::Value;

use crate::config::device::CountOnlyConfig;
use crate::model::annotations::vastai as keys;
use crate::model::codec::{self, Selection, TypeList, UuidList};
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerDevice, ContainerView, DeviceInfo, MemMiB, PodView, VendorId};
use crate::sched::reason::{Need, Reason, Rejection, Tally};

use super::{Cleanup, Discovery, FitCx, HealthRule, Pick, ScoreCx, Vendor, WriteCx, quantities};

pub const WORD: &str = "Vastai";

pub struct Vastai {
    count_name: String,
    word: Arc<str>,
}

impl Vastai {
    pub fn new(cfg: &CountOnlyConfig) -> Vastai {
        Vastai { count_name: cfg.resource_count_name.clone(), word: Arc::from(WORD) }
    }
}

/// What the pod's annotations select, parsed once per pod.
///
/// HAMi declares `vastaitech.com/use-va` / `nouse-va` but never reads them. hami-rs enforces them
/// as type lists with the rule every other vendor's type keys follow (protocol.md §4.5): a pod
/// that names them means to restrict its devices, and a blank or absent value changes nothing.
#[derive(Debug, Default)]
pub struct Params {
    pub types: Selection<TypeList>,
    pub uuids: Selection<UuidList>,
}

fn params<'a>(cx: &'a FitCx<'_>) -> Option<&'a Params> {
    cx.params.and_then(|p| p.downcast_ref::<Params>())
}

/// Whether a device is a die of a card in die mode (custom info `DeviceStrategy: "die"`).
pub fn is_die(d: &DeviceInfo) -> bool {
    d.custom_str("DeviceStrategy") == Some("die")
}

/// The card (`AIC`) a die sits on.
pub fn aic(d: &DeviceInfo) -> Option<&str> {
    d.custom_str("AIC")
}

/// Die mode, for more than one die: whole cards first. Dies are grouped by card, the largest
/// groups first (ties in the order the cards were first met), and taken in that order. HAMi
/// drops dies without a card id here and can then answer fewer dies than requested; hami-rs
/// keeps them as one-die groups after the cards.
fn best_combination<'a>(picks: Vec<Pick>, n: usize, aic_of: impl Fn(&Pick) -> Option<&'a str>) -> Vec<Pick> {
    let mut groups: Vec<(Option<&'a str>, Vec<Pick>)> = Vec::new();
    for p in picks {
        let card = aic_of(&p);
        match groups.iter_mut().find(|(c, _)| card.is_some() && *c == card) {
            Some((_, g)) => g.push(p),
            None => groups.push((card, vec![p])),
        }
    }
    // Stable: equal sizes keep the order in which their cards were met; card-less dies last.
    groups.sort_by_key(|(c, g)| (c.is_none(), std::cmp::Reverse(g.len())));
    groups.into_iter().flat_map(|(_, g)| g).take(n).collect()
}

impl Vendor for Vastai {
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

    /// vendors.md §13: healthy, type, UUID, a free slot, mutex (in die mode an idle die on a card
    /// with a busy die conflicts too); no memory or core checks. Die mode, decided by the first
    /// candidate, collects every fitting die and then takes the first (one die) or whole cards
    /// first (more).
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = params(cx);
        let die = cx.order.first().is_some_and(|&pos| is_die(&cx.devs[usize::from(pos)].info));
        let mutex = cx.pod.gpu_policy.mutex;
        let occupied: Vec<&str> = if mutex && die {
            cx.order
                .iter()
                .map(|&pos| &cx.devs[usize::from(pos)])
                .filter(|d| d.used > 0)
                .filter_map(|d| aic(&d.info))
                .collect()
        } else {
            Vec::new()
        };
        let mut tally = Tally::new(cx.order.len());
        let start = out.len();
        let mut nums = cx.req.nums;
        for &pos in cx.order.iter().rev() {
            let d = &cx.devs[usize::from(pos)];
            let at = usize::from(pos);
            if !d.health {
                tally.reject(Reason::CardNotHealth, at, Need::None);
                continue;
            }
            if p.is_some_and(|p| !p.types.allows(&d.info.ty)) {
                tally.reject(Reason::CardTypeMismatch, at, Need::None);
                continue;
            }
            if p.is_some_and(|p| !p.uuids.allows(d.info.id.as_str())) {
                tally.reject(Reason::CardUuidMismatch, at, Need::None);
                continue;
            }
            if d.used >= d.info.count {
                tally.reject(Reason::CardTimeSlicingExhausted, at, Need::Slots { used: d.used, count: d.info.count });
                continue;
            }
            if mutex && (d.used > 0 || (die && aic(&d.info).is_some_and(|a| occupied.contains(&a)))) {
                tally.reject(Reason::ExclusiveDeviceAllocateConflict, at, Need::Busy { used: d.used });
                continue;
            }
            out.push(Pick {
                pos,
                dev: ContainerDevice {
                    uuid: d.info.id.clone(),
                    ty: self.word.clone(),
                    usedmem: MemMiB::ZERO,
                    usedcores: cx.req.cores,
                    idx: d.info.index,
                    mig: None,
                },
            });
            if !die {
                nums = nums.saturating_sub(1);
                if nums == 0 {
                    return Ok(());
                }
            }
        }
        let found = out.len() - start;
        let n = cx.req.nums as usize;
        if die && found >= n && n > 0 {
            if found > n {
                let collected = out.split_off(start);
                let card = |p: &Pick| aic(&cx.devs[usize::from(p.pos)].info);
                let chosen =
                    if n == 1 { collected.into_iter().take(1).collect() } else { best_combination(collected, n, card) };
                out.extend(chosen);
            }
            return Ok(());
        }
        if found > 0 {
            tally.add(Reason::AllocatedCardsInsufficientRequest, found);
        }
        out.truncate(start);
        Err(Rejection::Devices(tally))
    }

    /// vendors.md §13: per container, the share of its dies on its best-represented card, summed.
    /// 0 when a chosen device has no custom info, is not in die mode or has no card id (HAMi).
    fn node_score(&self, cx: &ScoreCx<'_>) -> f32 {
        let mut score = 0.0f32;
        for c in cx.devices.iter().filter(|c| !c.is_empty()) {
            let mut cards: Vec<(&str, u32)> = Vec::new();
            for e in c {
                let Some(custom) =
                    cx.before.iter().find(|d| d.info.id == e.uuid).and_then(|d| d.info.custom.as_deref())
                else {
                    return 0.0;
                };
                if let Some(Value::String(s)) = custom.get("DeviceStrategy")
                    && s != "die"
                {
                    return 0.0;
                }
                match custom.get("AIC") {
                    None => return 0.0,
                    Some(Value::String(id)) => match cards.iter_mut().find(|(c, _)| c == id) {
                        Some((_, n)) => *n += 1,
                        None => cards.push((id, 1)),
                    },
                    // HAMi skips an id that is not a string.
                    Some(_) => {}
                }
            }
            let total: u32 = cards.iter().map(|(_, n)| n).sum();
            let max = cards.iter().map(|(_, n)| *n).max().unwrap_or(0);
            if total > 0 {
                score += max as f32 / total as f32;
            }
        }
        score
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::TO_ALLOCATE, keys::ALLOCATED].map(String::from).to_vec()
    }

    /// protocol.md §4.1: to-allocate and allocated (capital V), identical.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(cx.devices);
        out.push((keys::TO_ALLOCATE.into(), v.clone()));
        out.push((keys::ALLOCATED.into(), v));
    }
}

#[cfg(test)]
mod tests;
