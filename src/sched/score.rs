//! Scores and orders (scheduling.md §5.5, §5.6, §5.12, §5.13): the device score of one container's
//! request, the device order each GPU policy implies, the node's default score, and the choice
//! among fitting nodes. Ties are broken deterministically (HAMi leaves them to chance).

use std::cmp::Ordering;

use crate::model::codec::Weights;
use crate::model::request::{ChainKey, GpuPolicy, GpuSort, MEMPCT_UNSET, NodePolicy, SingleSort};
use crate::model::{ContainerRequest, DeviceUsage, NodeName};

/// Device score for one container (§5.5). Unlike HAMi, the request counts for every device of the
/// requested vendor (HAMi compares the vendor word with the model string, so it never counts).
pub fn device_score(d: &DeviceUsage, reqs: &[ContainerRequest], w: &Weights) -> f32 {
    let i = &d.info;
    if i.count == 0 || i.devcore == 0 || i.devmem.get() == 0 {
        return 0.0;
    }
    let (mut n, mut core, mut mem) = (0u64, 0u64, 0u64);
    for r in reqs.iter().filter(|r| r.vendor == d.vendor) {
        n += 1;
        core += u64::from(r.cores);
        mem += if r.mempct != 0 && r.mempct != MEMPCT_UNSET {
            i.devmem.get() * u64::from(r.mempct) / 100
        } else {
            r.memreq.get()
        };
    }
    let slot = (n + u64::from(d.used)) as f32 / i.count as f32;
    let cores = (core + u64::from(d.used_cores)) as f32 / i.devcore as f32;
    let memory = (mem + d.used_mem.get()) as f32 / i.devmem.get() as f32;
    10.0 * (w.slot * slot + w.core * cores + w.memory * memory)
}

/// The node's default score from its usage before the pod (§5.12): all vendors' devices summed.
pub fn node_default_score(devs: &[DeviceUsage]) -> f32 {
    let (mut used, mut count, mut uc, mut tc, mut um, mut tm) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for d in devs {
        used += u64::from(d.used);
        count += u64::from(d.info.count);
        uc += u64::from(d.used_cores);
        tc += u64::from(d.info.devcore);
        um += d.used_mem.get();
        tm += d.info.devmem.get();
    }
    if count == 0 || tc == 0 || tm == 0 {
        return 0.0;
    }
    10.0 * (used as f32 / count as f32 + uc as f32 / tc as f32 + um as f32 / tm as f32)
}

/// Sorts device positions ascending by the GPU policy (§5.6); fits walk the result from the end.
/// Single-value policies break remaining ties so that the lowest device index is tried first;
/// key chains end with the device index ascending, as HAMi's chain comparator does.
pub fn order_devices(devs: &[DeviceUsage], scores: &[f32], policy: &GpuPolicy, out: &mut Vec<u16>) {
    out.clear();
    out.extend(0..devs.len() as u16);
    let score = |p: u16| scores[usize::from(p)];
    let d = |p: u16| &devs[usize::from(p)];
    let numa = |p: u16| d(p).info.numa;
    let index_desc = |a: u16, b: u16| d(b).info.index.cmp(&d(a).info.index).then(b.cmp(&a));
    match &policy.sort {
        GpuSort::Single(SingleSort::Mutex) => {
            out.sort_by(|&a, &b| d(b).used.cmp(&d(a).used).then(numa(a).cmp(&numa(b))).then_with(|| index_desc(a, b)))
        }
        GpuSort::Single(s) if policy.numa => {
            if *s == SingleSort::Binpack {
                out.sort_by(|&a, &b| {
                    numa(b).cmp(&numa(a)).then(score(a).total_cmp(&score(b))).then_with(|| index_desc(a, b))
                })
            } else {
                out.sort_by(|&a, &b| {
                    numa(a).cmp(&numa(b)).then(score(b).total_cmp(&score(a))).then_with(|| index_desc(a, b))
                })
            }
        }
        GpuSort::Single(SingleSort::Binpack) => out
            .sort_by(|&a, &b| score(a).total_cmp(&score(b)).then(numa(a).cmp(&numa(b))).then_with(|| index_desc(a, b))),
        GpuSort::Single(SingleSort::Spread) => out
            .sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(numa(a).cmp(&numa(b))).then_with(|| index_desc(a, b))),
        GpuSort::Chain(keys) => out.sort_by(|&a, &b| {
            for k in keys {
                let o = match k {
                    ChainKey::Binpack => score(a).total_cmp(&score(b)),
                    ChainKey::Spread => score(b).total_cmp(&score(a)),
                    ChainKey::Numa => numa(a).cmp(&numa(b)),
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
            d(a).info.index.cmp(&d(b).info.index).then(a.cmp(&b))
        }),
    }
}

/// Orders fitting nodes best first (§5.13): `spread` prefers the lowest score, `binpack` and any
/// other policy the highest. Equal scores go to the node whose name sorts first.
pub fn rank_nodes<T>(fits: &mut [(NodeName, f32, T)], policy: NodePolicy) {
    fits.sort_by(|a, b| {
        let by_score = match policy {
            NodePolicy::Spread => a.1.total_cmp(&b.1),
            _ => b.1.total_cmp(&a.1),
        };
        by_score.then_with(|| a.0.cmp(&b.0))
    });
}

#[cfg(test)]
mod tests;
