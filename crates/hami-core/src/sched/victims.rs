//! Which pods a preemption would evict from one node: the fewest pods of lower priority whose
//! release lets a pod fit, by the same fit a filter runs. Pure: the caller supplies the fit and
//! says which holders may be evicted.

use std::cmp::Reverse;

use super::accounting::{self, Charge};
use crate::model::DeviceUsage;

/// A pod holding devices on the node.
#[derive(Clone, Debug)]
pub struct Holder<'a> {
    pub priority: i32,
    /// When it started (Unix seconds): among equals, the most recently started is evicted first,
    /// having lost the least work.
    pub started: i64,
    /// Whether it may be evicted at all (bound, of lower priority than the preemptor, allowed by
    /// its disruption budget). The others keep what they hold.
    pub evictable: bool,
    pub charges: &'a [Charge],
}

/// How a set of victims ranks against another, the smaller the better: fewer pods, then the
/// lowest highest priority, then the lowest priorities in sum, then the most recently started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cost {
    pub victims: usize,
    pub highest: i32,
    pub sum: i64,
    pub earliest_start: Reverse<i64>,
}

/// Sets of up to this many victims are searched exhaustively, when at most `EXACT_POOL` pods
/// may be evicted; beyond that a greedy pass decides, which may evict more than the fewest.
const EXACT_SIZE: usize = 2;
const EXACT_POOL: usize = 24;

pub fn cost(holders: &[Holder<'_>], set: &[usize]) -> Cost {
    let hs = || set.iter().map(|&i| &holders[i]);
    Cost {
        victims: set.len(),
        highest: hs().map(|h| h.priority).max().unwrap_or(i32::MIN),
        sum: hs().map(|h| i64::from(h.priority)).sum(),
        earliest_start: Reverse(hs().map(|h| h.started).min().unwrap_or(i64::MAX)),
    }
}

/// The node's usage with every holder but those in `gone`: each device as registered (with the
/// health the node reports), charged with what the others hold.
pub fn usage_without(devices: &[DeviceUsage], holders: &[Holder<'_>], gone: &[usize]) -> Vec<DeviceUsage> {
    let mut devs: Vec<DeviceUsage> = devices
        .iter()
        .map(|d| {
            let mut idle = DeviceUsage::idle(d.info.clone(), d.vendor);
            idle.health = d.health;
            idle
        })
        .collect();
    for (i, h) in holders.iter().enumerate() {
        if !gone.contains(&i) {
            accounting::apply(&mut devs, h.charges);
        }
    }
    devs
}

/// The victims (indexes into `holders`, ascending) whose release lets `fits` accept the node's
/// usage, or `None` when even evicting every evictable holder would not. The fewest victims
/// win, then the lowest priorities, then the most recently started (see [`Cost`]).
pub fn fewest(
    devices: &[DeviceUsage],
    holders: &[Holder<'_>],
    fits: &mut dyn FnMut(&[DeviceUsage]) -> bool,
) -> Option<Vec<usize>> {
    let pool: Vec<usize> = (0..holders.len()).filter(|&i| holders[i].evictable).collect();
    if pool.is_empty() || !fits(&usage_without(devices, holders, &pool)) {
        return None;
    }
    if pool.len() <= EXACT_POOL {
        for k in 1..=EXACT_SIZE.min(pool.len()) {
            let mut best: Option<(Cost, Vec<usize>)> = None;
            for set in subsets(&pool, k) {
                if fits(&usage_without(devices, holders, &set)) {
                    let c = cost(holders, &set);
                    if best.as_ref().is_none_or(|(b, _)| c < *b) {
                        best = Some((c, set));
                    }
                }
            }
            if let Some((_, set)) = best {
                return Some(set);
            }
        }
    }
    // Every evictable pod released, then given back one by one, the costliest to evict first
    // (highest priority, then the longest running): each stays when the pod still fits.
    let mut order = pool.clone();
    order.sort_by_key(|&i| (Reverse(holders[i].priority), holders[i].started, i));
    let mut gone = pool;
    for i in order {
        gone.retain(|&g| g != i);
        if !fits(&usage_without(devices, holders, &gone)) {
            gone.push(i);
        }
    }
    gone.sort_unstable();
    Some(gone)
}

/// Every set of `k` (1 or 2) members of `pool`, in order.
fn subsets(pool: &[usize], k: usize) -> Vec<Vec<usize>> {
    match k {
        1 => pool.iter().map(|&i| vec![i]).collect(),
        _ => pool.iter().enumerate().flat_map(|(a, &i)| pool[a + 1..].iter().map(move |&j| vec![i, j])).collect(),
    }
}

#[cfg(test)]
mod tests;
