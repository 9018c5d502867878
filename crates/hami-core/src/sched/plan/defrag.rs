//! Defragmentation plans: a pod that fits no node as the cluster is, placed by moving running
//! pods to other devices (on the same node or another). On each allowed node, the fewest
//! movable holders whose departure lets the pod fit there (`victims::fewest`), the pod placed on
//! what they free, then every moved pod placed on the view as that leaves it, the pod's own
//! devices taken first, so a moved pod never lands where the pod goes. The cheapest plan wins:
//! the fewest moves, then the least device memory moved, then the tightest packing, then the
//! earlier node, among the `MAX_CANDIDATES` nodes with the most free device memory (a plan of one
//! move ends the search); moved pods go to their own node or one of the `MAX_DESTINATIONS` nodes
//! with the most free memory, so a plan's cost does not grow with the cluster.

use crate::model::{DeviceUsage, PodRequest};
use crate::sched::victims::{self, Holder};
use crate::sched::{NodeSnapshot, fit};

use super::{Ask, Node, Placement, PlanCost, View, With, charges_of, place};

/// One pod moved: its place in its node's holders, and where it goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Move {
    pub holder: usize,
    pub to: Placement,
}

/// A plan: the node the pod goes to, its devices there, the pods moved off that node and where
/// each goes, and what that costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Defrag {
    pub node: usize,
    pub placement: Placement,
    pub moves: Vec<Move>,
    pub cost: PlanCost,
}

/// At most this many moves in one plan.
pub const MAX_MOVES: usize = 4;
/// Nodes a plan is looked for on (those with the most free device memory first).
pub const MAX_CANDIDATES: usize = 32;
/// Nodes a moved pod may go to besides its own (those with the most free device memory).
pub const MAX_DESTINATIONS: usize = 64;

/// The cheapest plan that places `ask` by moving pods, or `None`. `movable[n][h]`: the request
/// of holder `h` of node `n` when it may move (its controller makes a replacement, and every
/// other rule lets it), else `None`; a holder without an entry stays.
pub fn defrag(
    view: &View<'_>,
    ask: &Ask<'_>,
    movable: &[Vec<Option<&PodRequest>>],
    max_moves: usize,
    w: &mut With<'_>,
) -> Option<Defrag> {
    let all: Vec<usize>;
    let within = match ask.within {
        Some(x) => x,
        None => {
            all = (0..view.nodes.len()).collect();
            &all
        }
    };
    // Nodes with the most free device memory first; at most `MAX_CANDIDATES` are planned on, so
    // a plan costs a bounded number of fits however large the cluster.
    let free = |n: usize| -> u64 {
        view.nodes[n].snapshot.devices.iter().map(|d| d.info.devmem.get().saturating_sub(d.used_mem.get())).sum()
    };
    let mut order: Vec<usize> = within.iter().copied().filter(|&n| n < view.nodes.len()).collect();
    order.sort_by_key(|&n| (std::cmp::Reverse(free(n)), n));
    // Where moved pods may go: their own node and the nodes with the most free memory.
    let roomy: Vec<usize> = {
        let mut all: Vec<usize> = (0..view.nodes.len()).collect();
        all.sort_by_key(|&n| (std::cmp::Reverse(free(n)), n));
        all.truncate(MAX_DESTINATIONS);
        all
    };
    let mut planned = 0;
    let mut best: Option<Defrag> = None;
    for n in order {
        if planned >= MAX_CANDIDATES || best.as_ref().is_some_and(|b| b.moves.len() <= 1) {
            break;
        }
        let node = &view.nodes[n];
        let reqs = movable.get(n).map_or(&[][..], Vec::as_slice);
        let hs: Vec<Holder<'_>> = node
            .holders
            .iter()
            .enumerate()
            .map(|(h, x)| Holder { evictable: reqs.get(h).is_some_and(Option::is_some), ..x.clone() })
            .collect();
        let snap = node.snapshot;
        let mut fits = |devs: &[DeviceUsage]| {
            let on = NodeSnapshot::new(snap.name.clone(), devs.to_vec(), snap.extras.clone());
            fit::fit_pod(&on, ask.req, w.vendors, w.quota, w.scratch).is_ok()
        };
        if !hs.iter().any(|h| h.evictable) {
            continue;
        }
        planned += 1;
        let Some(set) = victims::fewest(&snap.devices, &hs, &mut fits) else { continue };
        if set.is_empty() || set.len() > max_moves {
            continue;
        }
        if best.as_ref().is_some_and(|b| b.moves.len() < set.len()) {
            continue;
        }
        // The pod on what the moved pods free.
        let freed = victims::usage_without(&snap.devices, &hs, &set);
        let mut on = NodeSnapshot::new(snap.name.clone(), freed, snap.extras.clone());
        let Ok(score) = fit::fit_pod(&on, ask.req, w.vendors, w.quota, w.scratch) else { continue };
        let devices = w.scratch.result.clone();
        let charges = charges_of(&on.devices, ask.req, &devices, w.vendors);
        crate::sched::accounting::apply(&mut on.devices, &charges);
        let placement = Placement { node: n, devices, charges, score };
        // Every moved pod placed on the view as the move leaves it, this node included.
        let places: Vec<usize> = std::iter::once(n).chain(roomy.iter().copied().filter(|&i| i != n)).collect();
        let after = View {
            nodes: places
                .iter()
                .map(|&i| Node { snapshot: if i == n { &on } else { view.nodes[i].snapshot }, holders: Vec::new() })
                .collect(),
        };
        let asks: Vec<Ask<'_>> = set.iter().filter_map(|&h| reqs[h]).map(|req| Ask { req, within: None }).collect();
        if asks.len() != set.len() {
            continue;
        }
        let Ok(mut dests) = place(&after, &asks, w) else { continue };
        for d in &mut dests {
            d.node = places[d.node];
        }
        let moved_mem: u64 = set.iter().flat_map(|&h| hs[h].charges).map(|c| c.mem.get()).sum();
        let cost = PlanCost {
            evicted: victims::cost(&[], &[]),
            moved: set.len(),
            moved_mem,
            packing: -(placement.score + dests.iter().map(|d| d.score).sum::<f32>()),
        };
        let moves = set.into_iter().zip(dests).map(|(holder, to)| Move { holder, to }).collect();
        if best.as_ref().is_none_or(|b| cost < b.cost) {
            best = Some(Defrag { node: n, placement, moves, cost });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::NoQuota;
    use crate::sched::accounting::Charge;
    use crate::sched::fit::Scratch;
    use crate::testing::{charge, gpu, node, pod, vendors};

    /// Two nodes x 2 GPUs x 24000 MiB, each GPU holding one 12000 MiB pod.
    fn fragmented() -> (Vec<NodeSnapshot>, Vec<Vec<Charge>>) {
        let v = vendors();
        let snaps = ["fa", "fb"]
            .iter()
            .map(|n| {
                node(n)
                    .gpu(gpu(&format!("{n}-0"), 24000).used(1, 12000, 0))
                    .gpu(gpu(&format!("{n}-1"), 24000).used(1, 12000, 0))
                    .snapshot(&v)
            })
            .collect();
        let charges = ["fa-0", "fa-1", "fb-0", "fb-1"].iter().map(|u| vec![charge(u, 1, 12000, 0)]).collect();
        (snaps, charges)
    }

    #[test]
    fn one_move_frees_a_whole_gpu_and_the_moved_pod_lands_elsewhere() {
        let v = vendors();
        let (snaps, charges) = fragmented();
        let holder = |c| Holder { priority: 0, started: 0, evictable: false, charges: c };
        let view = View {
            nodes: vec![
                Node { snapshot: &snaps[0], holders: vec![holder(&charges[0]), holder(&charges[1])] },
                Node { snapshot: &snaps[1], holders: vec![holder(&charges[2]), holder(&charges[3])] },
            ],
        };
        let whole = pod().name("big").gpu(1).mem_mib(24000).request_with(&v);
        let small = pod().name("a1").gpu(1).mem_mib(12000).request_with(&v);
        let mut s = Scratch::default();
        let mut w = With { vendors: &v, quota: &NoQuota, scratch: &mut s };
        let ask = Ask { req: &whole, within: None };
        // Nothing may move: no plan.
        assert_eq!(defrag(&view, &ask, &[vec![None, None], vec![None, None]], MAX_MOVES, &mut w), None);
        // Only fa's second pod may move: the pod takes fa-1, the moved pod another GPU.
        let movable = [vec![None, Some(&small)], vec![None, None]];
        let plan = defrag(&view, &ask, &movable, MAX_MOVES, &mut w).expect("a plan");
        assert_eq!((plan.node, plan.moves.len(), plan.cost.moved, plan.cost.moved_mem), (0, 1, 1, 12000));
        let taken = plan.placement.devices.0[0].1[0][0].uuid.to_string();
        assert_eq!(taken, "fa-1");
        let dest = &plan.moves[0].to;
        let dest_uuid = dest.devices.0[0].1[0][0].uuid.to_string();
        assert_ne!(dest_uuid, taken, "the moved pod never lands where the pod goes");
        // A budget of no moves allows none.
        assert_eq!(defrag(&view, &ask, &movable, 0, &mut w), None);
        // A pod no move can place (bigger than any GPU) has no plan.
        let huge = pod().name("huge").gpu(1).mem_mib(30000).request_with(&v);
        assert_eq!(defrag(&view, &Ask { req: &huge, within: None }, &movable, MAX_MOVES, &mut w), None);
    }

    #[test]
    fn the_plan_with_the_fewest_moves_wins() {
        let v = vendors();
        // fa: one GPU with two 8000 MiB pods; fb: one GPU with one 12000 MiB pod; a third node
        // with room for the moved pods.
        let snaps = [
            node("fa").gpu(gpu("fa-0", 24000).used(2, 16000, 0)).snapshot(&v),
            node("fb").gpu(gpu("fb-0", 24000).used(1, 12000, 0)).snapshot(&v),
            node("fc").gpu(gpu("fc-0", 24000).used(0, 0, 0)).snapshot(&v),
        ];
        let (a1, a2, b1) =
            (vec![charge("fa-0", 1, 8000, 0)], vec![charge("fa-0", 1, 8000, 0)], vec![charge("fb-0", 1, 12000, 0)]);
        let h = |c| Holder { priority: 0, started: 0, evictable: false, charges: c };
        let view = View {
            nodes: vec![
                Node { snapshot: &snaps[0], holders: vec![h(&a1), h(&a2)] },
                Node { snapshot: &snaps[1], holders: vec![h(&b1)] },
                Node { snapshot: &snaps[2], holders: vec![] },
            ],
        };
        let p8 = pod().name("p8").gpu(1).mem_mib(8000).request_with(&v);
        let p12 = pod().name("p12").gpu(1).mem_mib(12000).request_with(&v);
        // Wants 20000 MiB on one GPU, but fc is kept out of its candidates.
        let want = pod().name("want").gpu(1).mem_mib(20000).request_with(&v);
        let within = [0, 1];
        let movable = [vec![Some(&p8), Some(&p8)], vec![Some(&p12)], vec![]];
        let mut s = Scratch::default();
        let mut w = With { vendors: &v, quota: &NoQuota, scratch: &mut s };
        let plan =
            defrag(&view, &Ask { req: &want, within: Some(&within) }, &movable, MAX_MOVES, &mut w).expect("a plan");
        // fb needs one move, fa two: fb wins, and its pod goes to fc.
        assert_eq!((plan.node, plan.moves.len()), (1, 1));
        assert_eq!(plan.moves[0].to.node, 2);
    }
}
