//! Vastai: JSON registration `hami.io/node-va-register`, count-only requests, die mode (a card,
//! "AIC", carries several dies registered as devices) with its card grouping and node score, the
//! shared node lock and the `hami.io/node-handshake-va` handshake. All but the fit and the node
//! score is shared with Biren (`count_only.rs`).

use std::sync::Arc;

use serde_json::Value;

use crate::model::annotations::vastai as keys;
use crate::model::reason::Rejection;
use crate::model::{DeviceInfo, DeviceUsage, MemMiB};

use super::count_only::{self, CountOnly, CountOnlyConfig, Keys, Kind, Params};
use super::walk::{self, Rules};
use super::{FitCx, Pick, ScoreCx};

// The tests read these through `use super::*`.
#[cfg(test)]
use {
    super::{Cleanup, Discovery, HealthRule, Vendor, WriteCx},
    crate::model::edit::{ContainerEdit, PodContext},
    crate::model::request::ContainerRequest,
    crate::model::{ContainerDevice, ContainerView, PodView, VendorId, codec},
};

pub const WORD: &str = "Vastai";

/// The Helm chart's values for the device config's `vastai` section.
pub fn chart() -> CountOnlyConfig {
    CountOnlyConfig { resource_count_name: "vastaitech.com/va".into() }
}

/// The Vastai vendor.
pub type Vastai = CountOnly<VastaiKind>;

/// What is Vastai's own: its word, its keys, die mode in the fit and the node score.
pub struct VastaiKind;

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

impl Kind for VastaiKind {
    const WORD: &'static str = WORD;
    const KEYS: Keys = count_only::keys_of!(keys);

    /// As HAMi fits: healthy, type, UUID, a free slot, mutex (in die mode an idle die on a card
    /// with a busy die conflicts too); no memory or core checks. Die mode, decided by the first
    /// candidate, collects every fitting die and then takes the first (one die) or whole cards
    /// first (more).
    fn fit(cx: &FitCx<'_>, word: &Arc<str>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = cx.params_as::<Params>();
        let die = cx.order.first().is_some_and(|&pos| is_die(&cx.devs[usize::from(pos)].info));
        let occupied: Vec<&str> = if cx.pod.gpu_policy.mutex && die {
            let busy = cx.order.iter().map(|&pos| &cx.devs[usize::from(pos)]).filter(|d| d.used > 0);
            busy.filter_map(|d| aic(&d.info)).collect()
        } else {
            Vec::new()
        };
        let on_busy_card = |d: &DeviceUsage| die && aic(&d.info).is_some_and(|a| occupied.contains(&a));
        let (type_ok, uuid_ok) = (Params::type_check(p), Params::uuid_check(p));
        let entry = |_: &_| Ok((MemMiB::ZERO, cx.req.cores));
        let rules = Rules {
            type_ok: &type_ok,
            uuid_ok: &uuid_ok,
            also_busy: Some(&on_busy_card),
            take: Some(&entry),
            collect_all: die,
            ..Rules::basic(word)
        };
        let start = out.len();
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)?;
        let n = cx.req.nums as usize;
        if die && out.len() - start > n {
            let collected = out.split_off(start);
            let card = |p: &Pick| aic(&cx.devs[usize::from(p.pos)].info);
            let chosen =
                if n == 1 { collected.into_iter().take(1).collect() } else { best_combination(collected, n, card) };
            out.extend(chosen);
        }
        Ok(())
    }

    /// As HAMi scores it: per container, the share of its dies on its best-represented card,
    /// summed. 0 when a chosen device has no custom info, is not in die mode or has no card id
    /// (HAMi).
    fn node_score(cx: &ScoreCx<'_>) -> f32 {
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
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
