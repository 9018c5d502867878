//! Planning a pod group all or none: every member the group needs, largest first, on one view,
//! each on the usage the members before it left. The answer is every member's placement, or how
//! many fit and which did not, with what the first of those needs, for a reason that names the
//! group and what is missing.

use std::fmt::Write as _;

use crate::devices::Vendors;
use crate::model::reason::Rejection;
use crate::model::{PodRequest, VendorId};

use super::{Ask, Placement, View, With, charges_of, place_each};
use crate::sched::accounting::{self, Charge};
use crate::sched::fit;
use crate::sched::victims::{self, Cost, Holder};
use crate::sched::{NodeSnapshot, score};

/// One member to place, and the nodes it may go to (places in the view; `None`: any).
#[derive(Clone, Copy, Debug)]
pub struct Member<'a> {
    pub req: &'a PodRequest,
    pub within: Option<&'a [usize]>,
}

/// Why a group does not fit whole: how many of its members fit together, the members that did
/// not (their places in the list given), and each node's rejection of the first of them.
#[derive(Clone, Debug, PartialEq)]
pub struct Short {
    pub fit: usize,
    pub missing: Vec<usize>,
    pub rejections: Vec<(usize, Rejection)>,
}

/// How large a member is, for "largest first": its device memory over all devices, then its
/// memory shares, its device count and its cores.
fn size(req: &PodRequest) -> (u64, u64, u64, u64) {
    req.containers.iter().flatten().fold((0, 0, 0, 0), |(m, p, n, c), r| {
        let k = u64::from(r.nums);
        (m + k * r.memreq.0, p + k * u64::from(r.mempct), n + k, c + k * u64::from(r.cores))
    })
}

/// Places every member, largest first (ties in the order given), each on the best node by its
/// policy on the usage the others placed before it left: every placement in the order given, or
/// [`Short`]. Members that do not fit take nothing, so the count of those that do is what the
/// group would have were it placed as far as it goes.
pub fn place_group(view: &View<'_>, members: &[Member<'_>], w: &mut With<'_>) -> Result<Vec<Placement>, Short> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(size(members[k].req)));
    let asks: Vec<Ask<'_>> = order.iter().map(|&k| Ask { req: members[k].req, within: members[k].within }).collect();
    let placed = place_each(view, &asks, w);
    let mut out: Vec<Option<Placement>> = vec![None; members.len()];
    let mut short = Short { fit: 0, missing: Vec::new(), rejections: Vec::new() };
    for (k, r) in order.into_iter().zip(placed) {
        match r {
            Ok(p) => {
                short.fit += 1;
                out[k] = Some(p);
            }
            Err(rejections) => {
                if short.missing.is_empty() {
                    short.rejections = rejections;
                }
                short.missing.push(k);
            }
        }
    }
    if short.missing.is_empty() { Ok(out.into_iter().flatten().collect()) } else { Err(short) }
}

/// A group placed by evicting lower-priority pods: every member's placement in the order given,
/// and the holders evicted for them (node's place in the view, holder's place in its list).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupPreemption {
    pub placements: Vec<Placement>,
    pub victims: Vec<(usize, usize)>,
}

/// Places every member, largest first, as [`place_group`] does, and where one fits nowhere,
/// evicts for it the fewest evictable holders of one node (`victims::fewest`, the cheapest set
/// over the allowed nodes, ties to the earlier node) on the usage the members and evictions
/// before it left. All members placed, with every victim, or `None`: a group never evicts for
/// part of its members.
pub fn preempt_group(view: &View<'_>, members: &[Member<'_>], w: &mut With<'_>) -> Option<GroupPreemption> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(size(members[k].req)));
    let n = view.nodes.len();
    // Per node: its holders evicted so far, and what the members placed there charge.
    let mut gone: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut landed: Vec<Vec<Charge>> = vec![Vec::new(); n];
    let mut out: Vec<Option<Placement>> = vec![None; members.len()];
    let usage = |k: usize, gone: &[usize], landed: &[Charge]| {
        let node = &view.nodes[k];
        let mut devs = victims::usage_without(&node.snapshot.devices, &node.holders, gone);
        accounting::apply(&mut devs, landed);
        NodeSnapshot::new(node.snapshot.name.clone(), devs, node.snapshot.extras.clone())
    };
    for k in order {
        let m = members[k];
        let all: Vec<usize>;
        let within = match m.within {
            Some(w) => w,
            None => {
                all = (0..n).collect();
                &all
            }
        };
        let mut best: Option<(usize, f32)> = None;
        for &i in within.iter().filter(|&&i| i < n) {
            let on = usage(i, &gone[i], &landed[i]);
            if let Ok(s) = fit::fit_pod(&on, m.req, w.vendors, w.quota, w.scratch) {
                let better =
                    best.is_none_or(|(b, bs)| score::node_order(m.req.node_policy, s, bs).then(i.cmp(&b)).is_lt());
                if better {
                    best = Some((i, s));
                }
            }
        }
        if best.is_none() {
            // The cheapest eviction on one node that lets this member fit there.
            let mut cheapest: Option<(Cost, usize, Vec<usize>)> = None;
            for &i in within.iter().filter(|&&i| i < n) {
                let node = &view.nodes[i];
                // The holders still there (earlier victims left out), then the members placed
                // there, which nothing evicts.
                let kept: Vec<usize> = (0..node.holders.len()).filter(|h| !gone[i].contains(h)).collect();
                let mut hs: Vec<Holder<'_>> = kept.iter().map(|&h| node.holders[h].clone()).collect();
                hs.push(Holder { priority: i32::MAX, started: i64::MAX, evictable: false, charges: &landed[i] });
                let mut fits = |devs: &[crate::model::DeviceUsage]| {
                    let on = NodeSnapshot::new(node.snapshot.name.clone(), devs.to_vec(), node.snapshot.extras.clone());
                    fit::fit_pod(&on, m.req, w.vendors, w.quota, w.scratch).is_ok()
                };
                let Some(set) = victims::fewest(&node.snapshot.devices, &hs, &mut fits) else { continue };
                let cost = victims::cost(&hs, &set);
                if cheapest.as_ref().is_none_or(|(c, b, _)| (cost, i) < (*c, *b)) {
                    cheapest = Some((cost, i, set.into_iter().map(|x| kept[x]).collect()));
                }
            }
            let (_, i, set) = cheapest?;
            gone[i].extend(set);
            let on = usage(i, &gone[i], &landed[i]);
            best = Some((i, fit::fit_pod(&on, m.req, w.vendors, w.quota, w.scratch).ok()?));
        }
        let (i, s) = best?;
        let on = usage(i, &gone[i], &landed[i]);
        let score = fit::fit_pod(&on, m.req, w.vendors, w.quota, w.scratch).ok().unwrap_or(s);
        let devices = w.scratch.result.clone();
        let charges = charges_of(&on.devices, m.req, &devices, w.vendors);
        landed[i].extend(charges.iter().cloned());
        out[k] = Some(Placement { node: i, devices, charges, score });
    }
    let victims = gone.into_iter().enumerate().flat_map(|(i, g)| g.into_iter().map(move |h| (i, h))).collect();
    Some(GroupPreemption { placements: out.into_iter().collect::<Option<Vec<_>>>()?, victims })
}

/// What a member asks for, in a few words: `4 × NVIDIA 16 GiB` (count, vendor, memory per
/// device; a share of memory as a percentage; cores when it asks for them), one part per
/// container that asks for devices.
pub fn describe(req: &PodRequest, vendors: &Vendors) -> String {
    let mut out = String::new();
    for r in req.containers.iter().flatten().filter(|r| r.nums > 0) {
        if !out.is_empty() {
            out.push_str(" + ");
        }
        let _ = write!(out, "{} × {}", r.nums, vendor_name(vendors, r.vendor));
        let whole = r.memreq.0 == 0 && r.mempct >= 100;
        if r.memreq.0 > 0 {
            out.push(' ');
            out.push_str(&memory(r.memreq.0));
        } else if whole {
            out.push_str(" whole");
        } else if r.mempct > 0 {
            let _ = write!(out, " {}% memory", r.mempct);
        }
        // A whole device's cores go with it.
        if r.cores > 0 && !(whole && r.cores >= 100) {
            let _ = write!(out, " {}% cores", r.cores);
        }
    }
    out
}

fn vendor_name(vendors: &Vendors, v: VendorId) -> &str {
    vendors.get(v).name()
}

/// MiB as a person writes them: whole GiB as GiB, else MiB.
fn memory(mib: u64) -> String {
    if mib >= 1024 && mib.is_multiple_of(1024) { format!("{} GiB", mib / 1024) } else { format!("{mib} MiB") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::NoQuota;
    use crate::sched::fit::Scratch;
    use crate::testing::{gpu, node, pod, vendors};

    fn view_of(snaps: &[crate::sched::NodeSnapshot]) -> View<'_> {
        View { nodes: snaps.iter().map(|s| super::super::Node { snapshot: s, holders: Vec::new() }).collect() }
    }

    #[test]
    fn a_group_fits_whole_or_says_how_many_fit() {
        let v = vendors();
        let snaps: Vec<_> = ["n1", "n2"]
            .iter()
            .map(|n| node(n).gpu(gpu(&format!("{n}-a"), 16384)).gpu(gpu(&format!("{n}-b"), 16384)).snapshot(&v))
            .collect();
        let view = view_of(&snaps);
        let whole = pod().name("w").gpu(2).mem_mib(16384).request_with(&v);
        let half = pod().name("h").gpu(1).mem_mib(8000).request_with(&v);
        let mut s = Scratch::default();
        let mut w = With { vendors: &v, quota: &NoQuota, scratch: &mut s };
        // Two whole-node members fit, one on each node.
        let m = |r| Member { req: r, within: None };
        let two = place_group(&view, &[m(&whole), m(&whole)], &mut w).expect("fits");
        assert_eq!(two.iter().map(|p| p.node).collect::<Vec<_>>(), [0, 1]);
        // A third does not: 2 of 3 fit, and the one missing is said.
        let short = place_group(&view, &[m(&whole), m(&whole), m(&whole)], &mut w).expect_err("short");
        assert_eq!((short.fit, short.missing.clone()), (2, vec![2]));
        assert_eq!(short.rejections.len(), 2);
        // Largest first: the small members given first do not take the room a whole one needs.
        let mixed = [m(&half), m(&half), m(&whole), m(&half), m(&half)];
        let placed = place_group(&view, &mixed, &mut w).expect("fits when the whole one goes first");
        assert_eq!(placed.len(), 5);
        let on_whole = placed[2].node;
        assert!(placed.iter().enumerate().all(|(k, p)| k == 2 || p.node != on_whole), "{placed:?}");
        // A member kept within nodes it cannot use is the one missing.
        let none: [usize; 0] = [];
        let short =
            place_group(&view, &[m(&half), Member { req: &half, within: Some(&none) }], &mut w).expect_err("short");
        assert_eq!((short.fit, short.missing), (1, vec![1]));
    }

    #[test]
    fn a_group_evicts_for_all_its_members_or_none() {
        let v = vendors();
        let charge = |uuid: &str| vec![crate::testing::charge(uuid, 1, 16384, 100)];
        let snaps: Vec<_> = ["n1", "n2"]
            .iter()
            .map(|n| node(n).gpu(gpu(&format!("{n}-a"), 16384).used(1, 16384, 100)).snapshot(&v))
            .collect();
        let (c1, c2) = (charge("n1-a"), charge("n2-a"));
        let holder = |charges, evictable| Holder { priority: 1, started: 0, evictable, charges };
        let whole = pod().name("w").gpu(1).mem_mib(16384).request_with(&v);
        let m = |r| Member { req: r, within: None };
        let mut s = Scratch::default();
        let mut w = With { vendors: &v, quota: &NoQuota, scratch: &mut s };
        let view = |e1, e2| View {
            nodes: vec![
                super::super::Node { snapshot: &snaps[0], holders: vec![holder(&c1, e1)] },
                super::super::Node { snapshot: &snaps[1], holders: vec![holder(&c2, e2)] },
            ],
        };
        let both = view(true, true);
        let p = preempt_group(&both, &[m(&whole), m(&whole)], &mut w).expect("evicts both");
        assert_eq!(p.victims, [(0, 0), (1, 0)]);
        assert_eq!(p.placements.iter().map(|p| p.node).collect::<Vec<_>>(), [0, 1]);
        // One member needs no eviction beyond one node's.
        let one = preempt_group(&both, &[m(&whole)], &mut w).expect("evicts one");
        assert_eq!(one.victims, [(0, 0)]);
        // A holder that may not go leaves the second member nowhere: nobody is evicted.
        assert_eq!(preempt_group(&view(true, false), &[m(&whole), m(&whole)], &mut w), None);
    }

    #[test]
    fn a_member_is_described_by_count_vendor_and_memory() {
        let v = vendors();
        assert_eq!(describe(&pod().gpu(4).mem_mib(16384).request_with(&v), &v), "4 × NVIDIA 16 GiB");
        assert_eq!(describe(&pod().gpu(1).mem_mib(3000).request_with(&v), &v), "1 × NVIDIA 3000 MiB");
        assert_eq!(describe(&pod().gpu(2).cores(50).request_with(&v), &v), "2 × NVIDIA whole 50% cores");
        assert_eq!(describe(&pod().gpu(4).cores(100).request_with(&v), &v), "4 × NVIDIA whole");
        assert_eq!(describe(&pod().gpu(1).mem_pct(25).request_with(&v), &v), "1 × NVIDIA 25% memory");
    }
}
