//! Scores and orders: the device score of one container's
//! request, the device order each GPU policy implies, the node's default score, and the choice
//! among fitting nodes. Device ties fall where HAMi's sort leaves them; node ties are broken
//! deterministically (HAMi leaves them to chance).

use std::cmp::Ordering;

use crate::model::codec::Weights;
use crate::model::request::{ChainKey, GpuPolicy, GpuSort, MEMPCT_UNSET, NodePolicy, SingleSort};
use crate::model::{ContainerRequest, DeviceUsage, NodeName, VendorId};

/// Device score for one container: `10 × (slot × slots + core × cores + memory × memory)`, each
/// term the device's use over its capacity. A request adds to the use only where its type word
/// (`word_of`, the vendor's word such as `NVIDIA` or `MLU`) equals the device's type string
/// exactly, as in HAMi; so for vendors whose devices carry a model name (`NVIDIA-Tesla T4`) the
/// score is the device's current use alone. Which card a pod gets follows HAMi's choice.
pub fn device_score<'w>(
    d: &DeviceUsage,
    reqs: &[ContainerRequest],
    w: &Weights,
    word_of: impl Fn(VendorId) -> &'w str,
) -> f32 {
    let i = &d.cap;
    if i.count == 0 || i.devcore == 0 || i.devmem.get() == 0 {
        return 0.0;
    }
    let (mut n, mut core, mut mem) = (0u64, 0u64, 0u64);
    for r in reqs.iter().filter(|r| word_of(r.vendor) == &*d.info.ty) {
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

/// The node's default score from its usage before the pod, all vendors' devices summed: HAMi leaves
/// the request out.
pub fn node_default_score(devs: &[DeviceUsage]) -> f32 {
    let (mut used, mut count, mut uc, mut tc, mut um, mut tm) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for d in devs {
        used += u64::from(d.used);
        count += u64::from(d.cap.count);
        uc += u64::from(d.used_cores);
        tc += u64::from(d.cap.devcore);
        um += d.used_mem.get();
        tm += d.cap.devmem.get();
    }
    if count == 0 || tc == 0 || tm == 0 {
        return 0.0;
    }
    10.0 * (used as f32 / count as f32 + uc as f32 / tc as f32 + um as f32 / tm as f32)
}

/// Puts `order` (positions into `devs`) in an identity order: the node's registration order,
/// which is where HAMi's device list starts for every evaluation of a pod on a node.
pub fn reset_order(n: usize, order: &mut Vec<u16>) {
    order.clear();
    order.extend(0..n as u16);
}

/// Sorts `order` ascending by the GPU policy, in place and starting from its current arrangement,
/// with Go's `sort.Sort` and HAMi's comparison: HAMi re-sorts one list for each request of a pod,
/// so the order one request leaves decides where ties land for the next. Fits walk the result from
/// the end; among equal devices of a node of up to 12 devices, the one registered last is tried
/// first.
pub fn order_devices(devs: &[DeviceUsage], scores: &[f32], policy: &GpuPolicy, order: &mut Vec<u16>) {
    if order.len() != devs.len() {
        reset_order(devs.len(), order);
    }
    let score = |p: u16| scores[usize::from(p)];
    let d = |p: u16| &devs[usize::from(p)];
    let numa = |p: u16| d(p).cap.numa;
    match &policy.sort {
        GpuSort::Single(s) => {
            let (s, bind) = (*s, policy.numa);
            // Keys are read once per device, not once per comparison.
            let keys: smallvec::SmallVec<[SortKey; 16]> =
                (0..devs.len() as u16).map(|p| SortKey { score: score(p), numa: numa(p), used: d(p).used }).collect();
            let key = |p: u16| keys[usize::from(p)];
            crate::gosort::sort(order, |&a, &b| single_less(s, bind, key(a), key(b)));
        }
        GpuSort::Chain(keys) => crate::gosort::sort(order, |&a, &b| {
            for k in keys.iter() {
                let o = match k {
                    ChainKey::Binpack => score(a).partial_cmp(&score(b)),
                    ChainKey::Spread => score(b).partial_cmp(&score(a)),
                    ChainKey::Numa => Some(numa(a).cmp(&numa(b))),
                };
                match o {
                    Some(Ordering::Less) => return true,
                    Some(Ordering::Greater) => return false,
                    _ => {}
                }
            }
            d(a).cap.index < d(b).cap.index
        }),
    }
}

#[derive(Clone, Copy)]
struct SortKey {
    score: f32,
    numa: i32,
    used: u32,
}

/// HAMi's comparison for a single-value policy: `mutex` first, then the NUMA-bind grouping,
/// then the score with NUMA breaking ties. Exact float comparisons, as in HAMi.
#[allow(clippy::float_cmp)]
fn single_less(s: SingleSort, numa_bind: bool, a: SortKey, b: SortKey) -> bool {
    match s {
        SingleSort::Mutex if a.used != b.used => a.used > b.used,
        SingleSort::Mutex => a.numa < b.numa,
        SingleSort::Binpack if numa_bind && a.numa == b.numa => a.score < b.score,
        _ if numa_bind && a.numa == b.numa => a.score > b.score,
        SingleSort::Binpack if numa_bind => a.numa > b.numa,
        _ if numa_bind => a.numa < b.numa,
        _ if a.score == b.score => a.numa < b.numa,
        SingleSort::Binpack => a.score < b.score,
        SingleSort::Spread => a.score > b.score,
    }
}

/// Orders fitting nodes best first: `spread` prefers the lowest score, `binpack` and any other
/// policy the highest. Equal scores go to the node whose name sorts first.
pub fn rank_nodes<T>(fits: &mut [(NodeName, f32, T)], policy: NodePolicy) {
    fits.sort_by(|a, b| node_order(policy, a.1, b.1).then_with(|| a.0.cmp(&b.0)));
}

/// The order of two node scores under `policy`, the better first.
pub fn node_order(policy: NodePolicy, a: f32, b: f32) -> std::cmp::Ordering {
    match policy {
        NodePolicy::Spread => a.total_cmp(&b),
        _ => b.total_cmp(&a),
    }
}

/// One integer that orders candidates as [`rank_nodes`] does: the score under `policy` (the
/// better the smaller, in `f32::total_cmp`'s order) above the candidate's place in name order.
/// Ranking a thousand candidates compares integers instead of calling back into the policy.
pub fn rank_key(policy: NodePolicy, score: f32, name_rank: u32) -> u64 {
    // `total_cmp`'s own mapping to a signed integer, then shifted to unsigned order.
    let bits = score.to_bits() as i32;
    let ordered = ((bits ^ ((((bits >> 31) as u32) >> 1) as i32)) as u32) ^ 0x8000_0000;
    let better_smaller = match policy {
        NodePolicy::Spread => ordered,
        _ => !ordered,
    };
    (u64::from(better_smaller) << 32) | u64::from(name_rank)
}

#[cfg(test)]
mod tests;
