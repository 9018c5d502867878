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
        // A pod that fits a candidate as it is needs no move at all.
        if fits(&snap.devices) {
            return None;
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
        // A pod put back on the devices it holds would be evicted for nothing.
        let back = |(&h, d): (&usize, &Placement)| {
            d.node == n && d.charges.iter().map(|c| &c.uuid).eq(hs[h].charges.iter().map(|c| &c.uuid))
        };
        if set.iter().zip(&dests).any(back) {
            continue;
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

/// Whole devices that moving pods could free now, by (vendor, device type): the console's
/// estimate, not a plan. A device counts when every pod on it may move and holds that device
/// alone (no MIG instance), and each of them fits (slot, memory, cores) on another shared device of
/// the same vendor and type, on its own node or one of the `MAX_DESTINATIONS` devices of that
/// type with the most free memory. Devices are emptied least used first; a device that takes
/// moved pods is not emptied after, and an idle device never takes one (that would use up the
/// whole device the move frees). Pods' device selections are not read.
pub fn freeable(
    view: &View<'_>,
    may_move: &[Vec<bool>],
) -> std::collections::BTreeMap<(crate::model::VendorId, std::sync::Arc<str>), usize> {
    use std::collections::BTreeMap;
    type Key = (crate::model::VendorId, std::sync::Arc<str>);
    // Slots, MiB and cores; a device by node and place in it.
    type Use = (u32, u64, u32);
    type At = (usize, usize);
    // Each device's use as the estimate moves pods: slots, memory, cores; and its state.
    #[derive(Clone, Copy, PartialEq)]
    enum St {
        Open,
        Emptied,
        Took,
    }
    let mut used: Vec<Vec<(u32, u64, u32, St)>> = view
        .nodes
        .iter()
        .map(|n| n.snapshot.devices.iter().map(|d| (d.used, d.used_mem.get(), d.used_cores, St::Open)).collect())
        .collect();
    let usable = |d: &DeviceUsage| d.health && !d.info.is_mig();
    let key = |d: &DeviceUsage| -> Key { (d.vendor, d.info.ty.clone()) };
    // Per type, the roomiest shared devices: where pods of other nodes may go.
    let mut roomy: BTreeMap<Key, Vec<(usize, usize)>> = BTreeMap::new();
    for (n, node) in view.nodes.iter().enumerate() {
        for (i, d) in node.snapshot.devices.iter().enumerate() {
            if usable(d) && d.used > 0 {
                roomy.entry(key(d)).or_default().push((n, i));
            }
        }
    }
    let free_of = |&(n, i): &(usize, usize)| {
        let d = &view.nodes[n].snapshot.devices[i];
        d.info.devmem.get().saturating_sub(d.used_mem.get())
    };
    for list in roomy.values_mut() {
        list.sort_by_key(|x| (std::cmp::Reverse(free_of(x)), *x));
        list.truncate(MAX_DESTINATIONS);
    }
    // Every shared device whose pods all may move, least used first.
    let mut sources: Vec<(u64, usize, usize, Vec<Use>)> = Vec::new();
    for (n, node) in view.nodes.iter().enumerate() {
        let moves = may_move.get(n).map_or(&[][..], Vec::as_slice);
        for (i, d) in node.snapshot.devices.iter().enumerate() {
            if !usable(d) || d.used == 0 {
                continue;
            }
            let mut pods = Vec::new();
            let mut all_move = true;
            for (h, x) in node.holders.iter().enumerate() {
                if !x.charges.iter().any(|c| c.uuid == d.info.id) {
                    continue;
                }
                let alone = x.charges.len() == 1 && x.charges[0].mig.is_empty();
                if !alone || !moves.get(h).copied().unwrap_or(false) {
                    all_move = false;
                    break;
                }
                let c = &x.charges[0];
                pods.push((c.slots, c.mem.get(), c.cores));
            }
            // What the pods found hold must be all the device holds (nothing claimed or reserved).
            let held = pods.iter().fold((0, 0, 0), |a, p| (a.0 + p.0, a.1 + p.1, a.2 + p.2));
            if all_move && held == (d.used, d.used_mem.get(), d.used_cores) {
                pods.sort_by_key(|p| std::cmp::Reverse(p.1));
                sources.push((d.used_mem.get(), n, i, pods));
            }
        }
    }
    sources.sort_by_key(|s| (s.0, s.1, s.2));
    let mut out: BTreeMap<Key, usize> = BTreeMap::new();
    for (_, n, i, pods) in sources {
        if used[n][i].3 != St::Open {
            continue;
        }
        let d = &view.nodes[n].snapshot.devices[i];
        let k = key(d);
        let own = (0..view.nodes[n].snapshot.devices.len()).map(|j| (n, j));
        let targets: Vec<(usize, usize)> =
            own.chain(roomy.get(&k).into_iter().flatten().copied().filter(|&(m, _)| m != n)).collect();
        let mut trial: Vec<(At, Use)> = Vec::new();
        let mut placed_all = true;
        for p in &pods {
            // The fullest device the pod still fits (its use counting what this trial put there).
            let fits = |&(m, j): &(usize, usize)| -> Option<u64> {
                let t = &view.nodes[m].snapshot.devices[j];
                let u = used[m][j];
                if (m, j) == (n, i) || u.3 == St::Emptied || u.0 == 0 || !usable(t) || key(t) != k {
                    return None;
                }
                let extra = trial
                    .iter()
                    .filter(|(x, _)| *x == (m, j))
                    .fold((0, 0, 0), |a, (_, q)| (a.0 + q.0, a.1 + q.1, a.2 + q.2));
                let (slots, mem, cores) = (u.0 + extra.0 + p.0, u.1 + extra.1 + p.1, u.2 + extra.2 + p.2);
                (slots <= t.info.count && mem <= t.info.devmem.get() && cores <= t.info.devcore)
                    .then(|| t.info.devmem.get() - mem)
            };
            match targets.iter().filter_map(|t| fits(t).map(|left| (left, *t))).min() {
                Some((_, t)) => trial.push((t, *p)),
                None => {
                    placed_all = false;
                    break;
                }
            }
        }
        if !placed_all {
            continue;
        }
        for ((m, j), q) in trial {
            let u = &mut used[m][j];
            *u = (u.0 + q.0, u.1 + q.1, u.2 + q.2, St::Took);
        }
        used[n][i] = (0, 0, 0, St::Emptied);
        *out.entry(k).or_default() += 1;
    }
    out
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

    /// One GPU of a table test: its UUID, type, NUMA node and the pods on it (MiB each).
    type GpuSpec<'a> = (&'a str, &'a str, i32, &'a [u64]);

    /// Nodes of 24000 MiB GPUs, each pod on them one movable holder of one device.
    struct Cluster {
        snaps: Vec<NodeSnapshot>,
        charges: Vec<Vec<Vec<Charge>>>,
        reqs: Vec<Vec<PodRequest>>,
    }

    impl Cluster {
        fn new(v: &crate::devices::Vendors, nodes: &[(&str, &[GpuSpec<'_>])]) -> Cluster {
            let mut c = Cluster { snaps: Vec::new(), charges: Vec::new(), reqs: Vec::new() };
            for (name, gpus) in nodes {
                let mut b = node(name);
                let (mut ch, mut rq) = (Vec::new(), Vec::new());
                for (uuid, ty, numa, pods) in *gpus {
                    b = b.gpu(gpu(uuid, 24000).ty(ty).numa(*numa).used(pods.len() as u32, pods.iter().sum(), 0));
                    for m in *pods {
                        ch.push(vec![charge(uuid, 1, *m, 0)]);
                        rq.push(pod().gpu(1).mem_mib(*m).request_with(v));
                    }
                }
                c.snaps.push(b.snapshot(v));
                c.charges.push(ch);
                c.reqs.push(rq);
            }
            c
        }

        fn view(&self) -> View<'_> {
            View {
                nodes: self
                    .snaps
                    .iter()
                    .zip(&self.charges)
                    .map(|(s, cs)| Node {
                        snapshot: s,
                        holders: cs
                            .iter()
                            .map(|c| Holder { priority: 0, started: 0, evictable: false, charges: c })
                            .collect(),
                    })
                    .collect(),
            }
        }

        fn all_movable(&self) -> Vec<Vec<Option<&PodRequest>>> {
            self.reqs.iter().map(|rs| rs.iter().map(Some).collect()).collect()
        }

        /// The plan for `asked` when every pod may move.
        fn plan(&self, v: &crate::devices::Vendors, asked: &PodRequest) -> Option<Defrag> {
            let mut s = Scratch::default();
            let mut w = With { vendors: v, quota: &NoQuota, scratch: &mut s };
            defrag(&self.view(), &Ask { req: asked, within: None }, &self.all_movable(), MAX_MOVES, &mut w)
        }
    }

    /// The UUIDs a placement takes, in order.
    fn uuids(p: &Placement) -> Vec<String> {
        p.devices.0.iter().flat_map(|(_, cs)| cs.iter().flatten()).map(|d| d.uuid.to_string()).collect()
    }

    #[test]
    fn a_move_within_the_node_frees_a_whole_gpu_when_no_other_node_exists() {
        let v = vendors();
        const V100: &str = "NVIDIA-Tesla V100-PCIE-32GB";
        let c = Cluster::new(&v, &[("fa", &[("fa-0", V100, 0, &[12000]), ("fa-1", V100, 0, &[12000])])]);
        let plan = c.plan(&v, &pod().gpu(1).mem_mib(24000).request_with(&v)).expect("a plan");
        assert_eq!(plan.moves.len(), 1);
        let (to, taken) = (&plan.moves[0].to, uuids(&plan.placement));
        assert_eq!(to.node, 0, "the moved pod stays on its node");
        assert_ne!(uuids(to), taken, "and leaves the GPU the pod takes");
    }

    #[test]
    fn a_pod_of_several_containers_and_devices_gets_every_device_it_asks_for() {
        let v = vendors();
        const V100: &str = "NVIDIA-Tesla V100-PCIE-32GB";
        // fa's two GPUs each hold a 12000 MiB pod; fb has room for both on one GPU.
        let c = Cluster::new(
            &v,
            &[
                ("fa", &[("fa-0", V100, 0, &[12000]), ("fa-1", V100, 0, &[12000])]),
                ("fb", &[("fb-0", V100, 0, &[]), ("fb-1", V100, 0, &[20000])]),
            ],
        );
        // Two containers of one whole GPU each: only fa (freed) has two.
        let asked = pod().gpu(1).mem_mib(24000).container("second").gpu(1).mem_mib(24000).request_with(&v);
        let plan = c.plan(&v, &asked).expect("a plan");
        assert_eq!(plan.node, 0);
        let mut taken = uuids(&plan.placement);
        taken.sort();
        assert_eq!(taken, ["fa-0", "fa-1"]);
        assert_eq!(plan.moves.len(), 2);
        assert!(plan.moves.iter().all(|m| m.to.node == 1 && uuids(&m.to) == ["fb-0"]), "{:?}", plan.moves);
    }

    #[test]
    fn a_type_selection_frees_a_gpu_of_that_type() {
        let v = vendors();
        const V100: &str = "NVIDIA-Tesla V100-PCIE-32GB";
        const A100: &str = "NVIDIA-A100-SXM4-40GB";
        // The free GPU is a V100; the A100 holds a pod that fits on the V100.
        let c = Cluster::new(&v, &[("fa", &[("fa-0", A100, 0, &[12000]), ("fa-1", V100, 0, &[])])]);
        let asked = pod().gpu(1).mem_mib(24000).annotation("nvidia.com/use-gputype", "A100").request_with(&v);
        let plan = c.plan(&v, &asked).expect("a plan");
        assert_eq!(uuids(&plan.placement), ["fa-0"]);
        assert_eq!(uuids(&plan.moves[0].to), ["fa-1"]);
        // A UUID selection of the free GPU needs no move, so none is planned.
        let on_free = pod().gpu(1).mem_mib(24000).annotation("nvidia.com/use-gpuuuid", "fa-1").request_with(&v);
        assert_eq!(c.plan(&v, &on_free), None);
    }

    #[test]
    fn numa_binding_frees_two_gpus_on_one_numa_node() {
        let v = vendors();
        const V100: &str = "NVIDIA-Tesla V100-PCIE-32GB";
        // NUMA 0: fa-0 free, fa-1 with a 12000 MiB pod; NUMA 1: fa-2 free, fa-3 half full. Two
        // whole GPUs bound to one NUMA node: the pod on fa-1 moves (to fa-3), not across NUMA.
        let c = Cluster::new(
            &v,
            &[(
                "fa",
                &[
                    ("fa-0", V100, 0, &[]),
                    ("fa-1", V100, 0, &[12000]),
                    ("fa-2", V100, 1, &[]),
                    ("fa-3", V100, 1, &[12000]),
                ],
            )],
        );
        let asked = pod().gpu(2).mem_mib(24000).annotation("nvidia.com/numa-bind", "true").request_with(&v);
        let plan = c.plan(&v, &asked).expect("a plan");
        let mut taken = uuids(&plan.placement);
        taken.sort();
        assert!(taken == ["fa-0", "fa-1"] || taken == ["fa-2", "fa-3"], "two GPUs of one NUMA node: {taken:?}");
        assert_eq!(plan.moves.len(), 1);
    }

    /// `freeable` by type name, for the table tests.
    fn freed(c: &Cluster, movable: &[Vec<Option<&PodRequest>>]) -> Vec<(String, usize)> {
        let may: Vec<Vec<bool>> = movable.iter().map(|m| m.iter().map(Option::is_some).collect()).collect();
        freeable(&c.view(), &may).into_iter().map(|((_, ty), n)| (ty.to_string(), n)).collect()
    }

    #[test]
    fn freeable_counts_the_devices_whose_pods_all_fit_elsewhere() {
        let v = vendors();
        const V100: &str = "NVIDIA-Tesla V100-PCIE-32GB";
        const A100: &str = "NVIDIA-A100-SXM4-40GB";
        let half = &[12000u64][..];
        let four = |ty: &'static str| -> Vec<GpuSpec<'static>> {
            vec![
                ("fa-0", ty, 0, &[12000]),
                ("fa-1", ty, 0, &[12000]),
                ("fb-0", ty, 0, &[12000]),
                ("fb-1", ty, 0, &[12000]),
            ]
        };
        let g = four(V100);
        let c = Cluster::new(&v, &[("fa", &g[..2]), ("fb", &g[2..])]);
        // Every pod may move: each node's two halves pack onto one GPU.
        assert_eq!(freed(&c, &c.all_movable()), [(V100.to_owned(), 2)]);
        // Only fa-1's pod may move: one GPU.
        let only = vec![vec![None, Some(&c.reqs[0][1])], vec![None, None]];
        assert_eq!(freed(&c, &only), [(V100.to_owned(), 1)]);
        // Nothing may move: nothing.
        assert_eq!(freed(&c, &[vec![None, None], vec![None, None]]), []);
        // Types do not mix: an A100's pod does not go to a V100.
        let mixed = Cluster::new(&v, &[("fa", &[("fa-0", A100, 0, half), ("fa-1", V100, 0, half)])]);
        assert_eq!(freed(&mixed, &mixed.all_movable()), []);
        // A pod bigger than any other GPU's room stays: 20000 MiB next to 12000 MiB of 24000.
        let big = Cluster::new(&v, &[("fa", &[("fa-0", V100, 0, &[20000]), ("fa-1", V100, 0, half)])]);
        assert_eq!(freed(&big, &big.all_movable()), []);
        // An idle GPU takes no moved pod (that would cost the whole device the move frees).
        let idle = Cluster::new(&v, &[("fa", &[("fa-0", V100, 0, half), ("fa-1", V100, 0, &[])])]);
        assert_eq!(freed(&idle, &idle.all_movable()), []);
        // Across nodes: fb's pod goes to fa's GPU with room.
        let across = Cluster::new(&v, &[("fa", &[("fa-0", V100, 0, half)]), ("fb", &[("fb-0", V100, 0, &[8000])])]);
        assert_eq!(freed(&across, &across.all_movable()), [(V100.to_owned(), 1)]);
    }

    #[test]
    fn freeable_leaves_a_device_with_a_pod_of_several_devices_or_use_no_pod_accounts_for() {
        let v = vendors();
        let snaps = [node("fa")
            .gpu(gpu("fa-0", 24000).used(1, 12000, 0))
            .gpu(gpu("fa-1", 24000).used(2, 18000, 0))
            .gpu(gpu("fa-2", 24000).used(1, 4000, 0))
            .snapshot(&v)];
        // fa-0 and fa-1 hold one two-device pod (12000 + 6000); fa-1 also a 6000 MiB pod; fa-2's
        // 4000 MiB are claimed with no pod on record.
        let two = vec![charge("fa-0", 1, 12000, 0), charge("fa-1", 1, 6000, 0)];
        let one = vec![charge("fa-1", 1, 6000, 0)];
        let h = |c| Holder { priority: 0, started: 0, evictable: false, charges: c };
        let view = View { nodes: vec![Node { snapshot: &snaps[0], holders: vec![h(&two), h(&one)] }] };
        assert!(freeable(&view, &[vec![true, true]]).is_empty());
    }

    /// GPUs of the property test: 2 nodes x 2 GPUs of 24000 MiB.
    const GPU_MIB: u64 = 24000;

    proptest::proptest! {
        /// Whatever the cluster holds and whatever may move, a plan carried out (the moved pods
        /// gone from their devices, the pod placed, each moved pod placed at its destination)
        /// leaves every device within its count, memory and cores, gives the pod all the devices
        /// it asks for and every moved pod a destination, and moves only pods that may move.
        #[test]
        fn a_plan_carried_out_keeps_every_device_within_capacity(
            loads in proptest::collection::vec(proptest::collection::vec((1u64..7, 0u32..45), 0..4), 4),
            want in (1u32..3, 6u64..25, 0u32..60),
            may_move in proptest::prelude::any::<u16>(),
        ) {
            let v = vendors();
            // Each GPU's pods (k x 2000 MiB, some cores), as many as fit it.
            let mut pods: Vec<Vec<(String, u64, u32)>> = vec![Vec::new(); 2];
            for (g, load) in loads.iter().enumerate() {
                let (n, uuid) = (g / 2, format!("n{}-{}", g / 2, g % 2));
                let (mut mem, mut cores) = (0, 0);
                for &(k, c) in load {
                    if mem + k * 2000 <= GPU_MIB && cores + c <= 100 {
                        mem += k * 2000;
                        cores += c;
                        pods[n].push((uuid.clone(), k * 2000, c));
                    }
                }
            }
            let snaps: Vec<NodeSnapshot> = (0..2)
                .map(|n| {
                    let mut b = node(&format!("n{n}"));
                    for g in 0..2 {
                        let uuid = format!("n{n}-{g}");
                        let on: Vec<_> = pods[n].iter().filter(|p| p.0 == uuid).collect();
                        let used = (on.len() as u32, on.iter().map(|p| p.1).sum(), on.iter().map(|p| p.2).sum());
                        b = b.gpu(gpu(&uuid, GPU_MIB).used(used.0, used.1, used.2));
                    }
                    b.snapshot(&v)
                })
                .collect();
            let charges: Vec<Vec<Vec<Charge>>> =
                pods.iter().map(|ps| ps.iter().map(|(u, m, c)| vec![charge(u, 1, *m, *c)]).collect()).collect();
            let reqs: Vec<Vec<PodRequest>> = pods
                .iter()
                .map(|ps| ps.iter().map(|(_, m, c)| pod().gpu(1).mem_mib(*m).cores(*c).request_with(&v)).collect())
                .collect();
            let mut bit = 0;
            let movable: Vec<Vec<Option<&PodRequest>>> = reqs
                .iter()
                .map(|rs| {
                    rs.iter()
                        .map(|r| {
                            bit += 1;
                            (may_move & (1 << (bit % 16)) != 0).then_some(r)
                        })
                        .collect()
                })
                .collect();
            let holder = |c| Holder { priority: 0, started: 0, evictable: false, charges: c };
            let view = View {
                nodes: (0..2)
                    .map(|n| Node { snapshot: &snaps[n], holders: charges[n].iter().map(|c| holder(c)).collect() })
                    .collect(),
            };
            let (nums, mem, cores) = (want.0, want.1 * 1000, want.2);
            let asked = pod().name("want").gpu(nums).mem_mib(mem).cores(cores).request_with(&v);
            let mut s = Scratch::default();
            // Planned only for a pod that fits no node as the cluster is.
            proptest::prop_assume!(snaps.iter().all(|n| crate::sched::fit::fit_pod(n, &asked, &v, &NoQuota, &mut s).is_err()));
            let mut w = With { vendors: &v, quota: &NoQuota, scratch: &mut s };
            let Some(plan) = defrag(&view, &Ask { req: &asked, within: None }, &movable, MAX_MOVES, &mut w) else {
                return Ok(());
            };
            proptest::prop_assert!(!plan.moves.is_empty() && plan.moves.len() <= MAX_MOVES);
            let mut gone: Vec<usize> = plan.moves.iter().map(|m| m.holder).collect();
            gone.sort_unstable();
            gone.dedup();
            proptest::prop_assert_eq!(gone.len(), plan.moves.len(), "a pod is moved once");
            for &h in &gone {
                proptest::prop_assert!(movable[plan.node][h].is_some(), "holder {} may not move", h);
            }
            let mut devs: Vec<Vec<DeviceUsage>> = snaps.iter().map(|s| s.devices.clone()).collect();
            devs[plan.node] = victims::usage_without(&snaps[plan.node].devices, &view.nodes[plan.node].holders, &gone);
            crate::sched::accounting::apply(&mut devs[plan.node], &plan.placement.charges);
            let count = |d: &crate::model::PodDevices| d.0.iter().flat_map(|(_, cs)| cs.iter()).map(|c| c.len()).sum::<usize>();
            proptest::prop_assert_eq!(count(&plan.placement.devices), nums as usize, "the pod gets every device it asks for");
            for m in &plan.moves {
                proptest::prop_assert_eq!(count(&m.to.devices), 1, "each moved pod has its destination");
                let from = &charges[plan.node][m.holder][0].uuid;
                proptest::prop_assert!(
                    m.to.node != plan.node || &m.to.charges[0].uuid != from,
                    "a moved pod is not put back where it was"
                );
                crate::sched::accounting::apply(&mut devs[m.to.node], &m.to.charges);
            }
            for d in devs.iter().flatten() {
                proptest::prop_assert!(d.within_capacity(), "{} over capacity: {:?}", d.info.id, d);
            }
        }
    }
}
