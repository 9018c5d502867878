use proptest::prelude::*;

use super::*;
use crate::devices::NoQuota;
use crate::model::request::NodePolicy;
use crate::testing::{charge, gpu, node, pod, vendors};

fn with<'a>(v: &'a Vendors, s: &'a mut Scratch) -> With<'a> {
    With { vendors: v, quota: &NoQuota, scratch: s }
}

/// Two nodes of two 16384 MiB GPUs: `a` with 8000 MiB used on its first GPU, `b` idle.
fn two_nodes(v: &Vendors) -> Vec<NodeSnapshot> {
    vec![
        node("a").gpu(gpu("GPU-a0", 16384).used(1, 8000, 0)).gpu(gpu("GPU-a1", 16384)).snapshot(v),
        node("b").gpu(gpu("GPU-b0", 16384)).gpu(gpu("GPU-b1", 16384)).snapshot(v),
    ]
}

fn view_of(snaps: &[NodeSnapshot]) -> View<'_> {
    View { nodes: snaps.iter().map(|s| Node { snapshot: s, holders: Vec::new() }).collect() }
}

fn node_of(view: &View<'_>, p: &Placement) -> String {
    view.nodes[p.node].snapshot.name.to_string()
}

#[test]
fn one_ask_lands_where_the_filter_and_the_node_policy_put_it() {
    let v = vendors();
    let snaps = two_nodes(&v);
    let view = view_of(&snaps);
    // (node policy, the node a 4000 MiB pod goes to): binpack to the busier node, spread to the
    // idler, as the filter ranks them.
    for (policy, want) in [("binpack", "a"), ("spread", "b")] {
        let req = pod().gpu(1).mem_mib(4000).annotation("hami.io/node-scheduler-policy", policy).request_with(&v);
        let mut s = Scratch::default();
        let got = place(&view, &[Ask { req: &req, within: None }], &mut with(&v, &mut s)).unwrap();
        assert_eq!(node_of(&view, &got[0]), want, "{policy}");
        // The devices and the score are the fit's own on that node.
        let mut s2 = Scratch::default();
        let fit = fit::fit_pod_devices(&snaps[got[0].node], &req, &v, &NoQuota, &mut s2).unwrap();
        assert_eq!((got[0].devices.clone(), got[0].score), (fit.devices, fit.score), "{policy}");
    }
}

#[test]
fn later_asks_see_what_earlier_ones_took() {
    let v = vendors();
    let snaps = two_nodes(&v);
    let view = view_of(&snaps);
    // Four whole GPUs asked, three free in all (a0 is partly used): the fourth fits nowhere once
    // the first three are placed, and every node says why.
    let req = pod().gpu(1).mem_mib(16384).request_with(&v);
    let asks = vec![Ask { req: &req, within: None }; 4];
    let mut s = Scratch::default();
    let err = place(&view, &asks, &mut with(&v, &mut s)).unwrap_err();
    assert_eq!((err.ask, err.placed), (3, 3));
    assert_eq!(err.rejections.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [0, 1]);
    // Three fit, on three distinct devices.
    let got = place(&view, &asks[..3], &mut with(&v, &mut s)).unwrap();
    let mut devs: Vec<String> = got.iter().flat_map(|p| p.charges.iter().map(|c| c.uuid.to_string())).collect();
    devs.sort();
    assert_eq!(devs, ["GPU-a1", "GPU-b0", "GPU-b1"]);
    // The view itself is untouched: a plan is made on a copy.
    assert_eq!(snaps[1].devices[0].used_mem.get(), 0);
}

#[test]
fn an_ask_goes_only_to_the_nodes_it_is_allowed() {
    let v = vendors();
    let snaps = two_nodes(&v);
    let view = view_of(&snaps);
    let req = pod().gpu(1).mem_mib(1000).annotation("hami.io/node-scheduler-policy", "binpack").request_with(&v);
    let only_b = [1];
    let mut s = Scratch::default();
    let got = place(&view, &[Ask { req: &req, within: Some(&only_b) }], &mut with(&v, &mut s)).unwrap();
    assert_eq!(node_of(&view, &got[0]), "b");
    let none: [usize; 0] = [];
    let err = place(&view, &[Ask { req: &req, within: Some(&none) }], &mut with(&v, &mut s)).unwrap_err();
    assert_eq!((err.ask, err.placed, err.rejections.len()), (0, 0, 0));
}

#[test]
fn a_tie_goes_to_the_earlier_node() {
    let v = vendors();
    let snaps = vec![node("a").gpu(gpu("GPU-a", 16384)).snapshot(&v), node("b").gpu(gpu("GPU-b", 16384)).snapshot(&v)];
    let view = view_of(&snaps);
    for policy in [NodePolicy::Binpack, NodePolicy::Spread] {
        let word = if policy == NodePolicy::Binpack { "binpack" } else { "spread" };
        let req = pod().gpu(1).mem_mib(1000).annotation("hami.io/node-scheduler-policy", word).request_with(&v);
        let mut s = Scratch::default();
        let got = place(&view, &[Ask { req: &req, within: None }], &mut with(&v, &mut s)).unwrap();
        assert_eq!(node_of(&view, &got[0]), "a", "{word}");
    }
}

/// A node of one 16384 MiB GPU holding `held` (MiB, priority) pods, each a holder.
fn held_node(name: &str, held: &[(u64, i32)], v: &Vendors) -> (NodeSnapshot, Vec<Vec<Charge>>) {
    let used: u64 = held.iter().map(|(m, _)| m).sum();
    let id = format!("GPU-{name}");
    let snap = node(name).gpu(gpu(&id, 16384).used(held.len() as u32, used, 0)).snapshot(v);
    let charges = held.iter().map(|(m, _)| vec![charge(&id, 1, *m, 0)]).collect();
    (snap, charges)
}

fn holders<'a>(charges: &'a [Vec<Charge>], held: &[(u64, i32)], evictable: bool) -> Vec<Holder<'a>> {
    charges.iter().zip(held).map(|(c, (_, p))| Holder { priority: *p, started: 0, evictable, charges: c }).collect()
}

#[test]
fn a_preemption_takes_the_fewest_lowest_victims_and_says_where_the_pod_goes() {
    let v = vendors();
    // Node a: two 6000 MiB pods (priorities 1, 2); node b: one 12000 MiB pod of priority 5.
    let ha = [(6000, 1), (6000, 2)];
    let hb = [(12000, 5)];
    let (sa, ca) = held_node("a", &ha, &v);
    let (sb, cb) = held_node("b", &hb, &v);
    let view = View {
        nodes: vec![
            Node { snapshot: &sa, holders: holders(&ca, &ha, true) },
            Node { snapshot: &sb, holders: holders(&cb, &hb, true) },
        ],
    };
    // 9000 MiB: one victim either way; a's priority-1 pod costs less than b's priority-5 one.
    let req = pod().gpu(1).mem_mib(9000).request_with(&v);
    let mut s = Scratch::default();
    let p = preempt(&view, &Ask { req: &req, within: None }, &mut with(&v, &mut s)).unwrap();
    assert_eq!((p.node, p.victims.clone()), (0, vec![0]));
    assert_eq!(
        p.placement.charges.iter().map(|c| (c.uuid.to_string(), c.mem.get())).collect::<Vec<_>>(),
        [("GPU-a".to_owned(), 9000)]
    );
    // 12000 MiB: a needs both its pods, b only one: fewest wins.
    let req = pod().gpu(1).mem_mib(12000).request_with(&v);
    let p = preempt(&view, &Ask { req: &req, within: None }, &mut with(&v, &mut s)).unwrap();
    assert_eq!((p.node, p.victims.clone()), (1, vec![0]));
}

#[test]
fn nothing_evictable_or_a_claim_in_the_way_means_no_preemption() {
    let v = vendors();
    let h = [(8000, 0), (8000, 0)];
    let (sn, cn) = held_node("a", &h, &v);
    let req = pod().gpu(1).mem_mib(8000).request_with(&v);
    let mut s = Scratch::default();
    // Neither pod may be evicted (a claim is such a holder): nothing frees the memory.
    let view = View { nodes: vec![Node { snapshot: &sn, holders: holders(&cn, &h, false) }] };
    assert_eq!(preempt(&view, &Ask { req: &req, within: None }, &mut with(&v, &mut s)), None);
    // One may: it goes.
    let mut hs = holders(&cn, &h, false);
    hs[1].evictable = true;
    let view = View { nodes: vec![Node { snapshot: &sn, holders: hs }] };
    let p = preempt(&view, &Ask { req: &req, within: None }, &mut with(&v, &mut s)).unwrap();
    assert_eq!(p.victims, [1]);
}

#[test]
fn a_plan_that_places_costs_less_the_tighter_it_packs() {
    let p = |score| Placement { node: 0, devices: PodDevices::default(), charges: Vec::new(), score };
    assert!(PlanCost::placing(&[p(9.0)]) < PlanCost::placing(&[p(3.0)]));
    let moved = PlanCost { moved: 1, ..PlanCost::placing(&[p(9.0)]) };
    assert!(PlanCost::placing(&[p(0.0)]) < moved, "a move costs more than any packing");
}

proptest! {
    /// Whatever the asks, a plan keeps every device within its count, memory and cores, and
    /// each placement is what the fit gives on the node as the plan left it before.
    #[test]
    fn a_plan_never_over_commits_a_device(
        used in proptest::collection::vec((0u32..3, 0u64..16384), 4),
        asks in proptest::collection::vec((1u32..3, 1u64..12000), 1..8),
    ) {
        let v = vendors();
        let snaps: Vec<NodeSnapshot> = (0..2)
            .map(|n| {
                let mut b = node(&format!("n{n}"));
                for g in 0..2 {
                    let (slots, mem) = used[n * 2 + g];
                    b = b.gpu(gpu(&format!("GPU-{n}-{g}"), 16384).used(slots, mem, 0));
                }
                b.snapshot(&v)
            })
            .collect();
        let view = view_of(&snaps);
        let reqs: Vec<PodRequest> = asks.iter().map(|(n, m)| pod().gpu(*n).mem_mib(*m).request_with(&v)).collect();
        let list: Vec<Ask<'_>> = reqs.iter().map(|r| Ask { req: r, within: None }).collect();
        let mut s = Scratch::default();
        let placed = match place(&view, &list, &mut with(&v, &mut s)) {
            Ok(p) => p,
            Err(u) => {
                prop_assert!(u.placed == u.ask);
                place(&view, &list[..u.ask], &mut with(&v, &mut s)).unwrap()
            }
        };
        let mut devs: Vec<Vec<DeviceUsage>> = snaps.iter().map(|s| s.devices.clone()).collect();
        for p in &placed {
            accounting::apply(&mut devs[p.node], &p.charges);
        }
        for d in devs.iter().flatten() {
            prop_assert!(d.within_capacity(), "{} over capacity", d.info.id);
        }
    }
}
