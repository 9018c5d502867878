//! The planner: places many pods, and takes running pods off, on one frozen view of the cluster,
//! and says what a plan costs so the caller can choose among plans. Pure: the view is the nodes'
//! published snapshots (which already count every claim on them) and the pods holding devices
//! there; nothing is reserved, claimed or evicted here. Built from the filter's own fit
//! (`sched::fit`), its node order (`sched::score`), the accounting a node's ledger keeps
//! (`sched::accounting`) and the victim choice of preemption (`sched::victims`), so a plan's
//! answer for one pod is the answer the engine's filter and the node actors' reservation give.
//!
//! ```text
//!  View (snapshots + holders + claims) ─┬─ place(asks)   ─▶ every ask's node and devices, or why not
//!                                        └─ preempt(ask)  ─▶ the node, its victims and the devices freed
//! ```

use crate::devices::{QuotaCheck, Vendors};
use crate::model::reason::Rejection;
use crate::model::request::FitKey;
use crate::model::{DeviceUsage, DeviceUuid, PodDevices, PodRequest};

use super::accounting::{self, Charge, Layout};
use super::fit::{self, Scratch};
use super::victims::{self, Cost, Holder};
use super::{NodeSnapshot, score};

/// One node as the planner sees it: its snapshot (usage with every reservation and claim) and
/// the pods holding devices there, each of which a preemption may take off when evictable.
/// Claims appear among the holders as holders no plan may evict.
#[derive(Clone, Debug)]
pub struct Node<'a> {
    pub snapshot: &'a NodeSnapshot,
    pub holders: Vec<Holder<'a>>,
}

/// The frozen view a plan is made on. Nodes in name order: a tie in score goes to the earlier.
#[derive(Clone, Debug, Default)]
pub struct View<'a> {
    pub nodes: Vec<Node<'a>>,
}

/// One pod to place, and the nodes it may go to (places in the view; `None`: any).
#[derive(Clone, Copy, Debug)]
pub struct Ask<'a> {
    pub req: &'a PodRequest,
    pub within: Option<&'a [usize]>,
}

/// Where one ask goes: the node's place in the view, the devices it takes, what it charges
/// each device and the node's score for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub node: usize,
    pub devices: PodDevices,
    pub charges: Vec<Charge>,
    pub score: f32,
}

/// Why a list could not be placed whole: the first ask no node could take once the asks before
/// it were placed, and each node's rejection of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Unplaced {
    /// The ask's index in the list.
    pub ask: usize,
    /// How many asks before it were placed.
    pub placed: usize,
    /// Each allowed node's place in the view and why it refused the ask.
    pub rejections: Vec<(usize, Rejection)>,
}

/// What a plan costs, the smaller the better: the pods it evicts (fewest, then the lowest
/// priorities), then the pods it moves and the device memory they hold, then how tightly it
/// packs (the sum of the chosen nodes' policy scores, higher is tighter under binpack).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct PlanCost {
    pub evicted: Cost,
    pub moved: usize,
    pub moved_mem: u64,
    /// Negated policy score sum, so that smaller is better like the rest.
    pub packing: f32,
}

impl PlanCost {
    /// A plan that evicts and moves nothing.
    pub fn placing(placements: &[Placement]) -> PlanCost {
        PlanCost {
            evicted: victims::cost(&[], &[]),
            moved: 0,
            moved_mem: 0,
            packing: -placements.iter().map(|p| p.score).sum::<f32>(),
        }
    }
}

/// What the planner fits with: the vendors, the namespace quota and this thread's buffers.
pub struct With<'a> {
    pub vendors: &'a Vendors,
    pub quota: &'a dyn QuotaCheck,
    pub scratch: &'a mut Scratch,
}

/// The layout a reservation charges a pod by while its init containers may still run.
pub fn layout_of(req: &PodRequest) -> Layout {
    Layout { n_init: req.n_init, sidecars: req.sidecars.clone(), init_released: false }
}

/// What `devices` charge each device of `devs`, as a node's ledger would hold them.
pub fn charges_of(devs: &[DeviceUsage], req: &PodRequest, devices: &PodDevices, vendors: &Vendors) -> Vec<Charge> {
    let info = |u: &DeviceUuid| devs.iter().find(|d| d.info.id == *u).map(|d| d.info.clone());
    let mut charges = accounting::collapse(devices, &layout_of(req), vendors, &info);
    let tags = accounting::tags_of(vendors, &req.annotations, |v| devices.vendor(v).is_some());
    accounting::tag(&mut charges, &tags);
    charges
}

/// Places every ask, in order, each on the best node that takes it by its node policy (ties to
/// the earlier node), on the view as the asks before it left it: all of them, or `Unplaced` for
/// the first that fits nowhere. Each node's usage is copied only once an ask lands there.
pub fn place(view: &View<'_>, asks: &[Ask<'_>], w: &mut With<'_>) -> Result<Vec<Placement>, Unplaced> {
    let mut out = Vec::with_capacity(asks.len());
    for (k, placed) in place_in(view, asks, w, true).into_iter().enumerate() {
        match placed {
            Ok(p) => out.push(p),
            Err(rejections) => return Err(Unplaced { ask: k, placed: out.len(), rejections }),
        }
    }
    Ok(out)
}

/// Places the asks in order as [`place`] does, but goes on past an ask that fits nowhere (it takes
/// nothing, and the asks after it are placed on the view as the placed ones left it): each ask's
/// placement or every allowed node's rejection of it.
pub fn place_each(
    view: &View<'_>,
    asks: &[Ask<'_>],
    w: &mut With<'_>,
) -> Vec<Result<Placement, Vec<(usize, Rejection)>>> {
    place_in(view, asks, w, false)
}

/// A node's last fit of one pod shape while its usage in the plan stayed the same: its score or
/// rejection. The devices are not kept: only the chosen node's are used, and it is fitted again
/// for them (copying every fitting node's devices cost more than the plan's fits).
type Remembered = (FitKey, Result<f32, Rejection>);

fn place_in(
    view: &View<'_>,
    asks: &[Ask<'_>],
    w: &mut With<'_>,
    stop: bool,
) -> Vec<Result<Placement, Vec<(usize, Rejection)>>> {
    let mut work: Vec<Option<NodeSnapshot>> = vec![None; view.nodes.len()];
    // Members of a group mostly share one shape: a node's fit of it is read again only once an
    // ask landed there, so a plan of many like pods fits each node about once.
    let mut seen: Vec<Option<Remembered>> = vec![None; view.nodes.len()];
    let mut out = Vec::with_capacity(asks.len());
    for ask in asks {
        let within = allowed(view, ask);
        let mut best: Option<(usize, f32)> = None;
        for &n in within.iter() {
            let Some(node) = view.nodes.get(n) else { continue };
            let fitted = match &seen[n] {
                Some((key, r)) if *key == ask.req.fit_key => r.as_ref().ok().copied(),
                _ => {
                    let snap = work[n].as_ref().unwrap_or(node.snapshot);
                    let r = fit::fit_pod(snap, ask.req, w.vendors, w.quota, w.scratch);
                    seen[n] = Some((ask.req.fit_key, r));
                    r.ok()
                }
            };
            if let Some(score) = fitted {
                let better = best
                    .as_ref()
                    .is_none_or(|(b, bs)| score::node_order(ask.req.node_policy, score, *bs).then(n.cmp(b)).is_lt());
                if better {
                    best = Some((n, score));
                }
            }
        }
        let Some((n, score)) = best else {
            // Only an ask no node takes reports the rejections: every allowed node's is remembered
            // for this shape now, and copying them for an ask that fits would cost one copy per
            // refusing node per ask.
            let rejections = within
                .iter()
                .filter_map(|&n| match seen.get(n)? {
                    Some((key, Err(r))) if *key == ask.req.fit_key => Some((n, *r)),
                    _ => None,
                })
                .collect();
            out.push(Err(rejections));
            if stop {
                break;
            }
            continue;
        };
        seen[n] = None;
        let snap = work[n].get_or_insert_with(|| view.nodes[n].snapshot.clone());
        let devices = match fit::fit_pod(snap, ask.req, w.vendors, w.quota, w.scratch) {
            Ok(_) => w.scratch.result.clone(),
            Err(_) => unreachable_devices(),
        };
        let charges = charges_of(&snap.devices, ask.req, &devices, w.vendors);
        accounting::apply(&mut snap.devices, &charges);
        out.push(Ok(Placement { node: n, devices, charges, score }));
    }
    out
}

/// The best node fits again as it fitted (the fit reads nothing else); should that ever not hold,
/// an empty set places nothing rather than panicking.
fn unreachable_devices() -> PodDevices {
    debug_assert!(false, "the best node's fit was not remembered");
    PodDevices::default()
}

/// The nodes `ask` may go to: those it names, or every node of the view.
fn allowed<'v>(view: &View<'_>, ask: &Ask<'v>) -> std::borrow::Cow<'v, [usize]> {
    match ask.within {
        Some(w) => std::borrow::Cow::Borrowed(w),
        None => std::borrow::Cow::Owned((0..view.nodes.len()).collect()),
    }
}

/// A preemption: the node, the holders taken off it (places in its `holders`), where the pod
/// then goes, and what that costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Preemption {
    pub node: usize,
    pub victims: Vec<usize>,
    pub placement: Placement,
    pub cost: Cost,
}

/// The preemption that places `ask`: on each allowed node, the fewest evictable holders whose
/// release lets it fit (`victims::fewest`); the cheapest set wins, ties to the earlier node.
/// `None` when no set of evictable holders on any node frees enough.
pub fn preempt(view: &View<'_>, ask: &Ask<'_>, w: &mut With<'_>) -> Option<Preemption> {
    let mut best: Option<(Cost, usize, Vec<usize>)> = None;
    for &n in allowed(view, ask).iter() {
        let Some(node) = view.nodes.get(n) else { continue };
        let snap = node.snapshot;
        let mut fits = |devs: &[DeviceUsage]| {
            let on = NodeSnapshot::new(snap.name.clone(), devs.to_vec(), snap.extras.clone());
            fit::fit_pod(&on, ask.req, w.vendors, w.quota, w.scratch).is_ok()
        };
        let Some(set) = victims::fewest(&snap.devices, &node.holders, &mut fits) else { continue };
        let cost = victims::cost(&node.holders, &set);
        if best.as_ref().is_none_or(|(c, b, _)| (cost, n) < (*c, *b)) {
            best = Some((cost, n, set));
        }
    }
    let (cost, n, set) = best?;
    let node = &view.nodes[n];
    let freed = victims::usage_without(&node.snapshot.devices, &node.holders, &set);
    let on = NodeSnapshot::new(node.snapshot.name.clone(), freed, node.snapshot.extras.clone());
    let score = fit::fit_pod(&on, ask.req, w.vendors, w.quota, w.scratch).ok()?;
    let devices = w.scratch.result.clone();
    let charges = charges_of(&on.devices, ask.req, &devices, w.vendors);
    Some(Preemption { node: n, victims: set, placement: Placement { node: n, devices, charges, score }, cost })
}

pub mod defrag;
pub mod group;

#[cfg(test)]
mod tests;
