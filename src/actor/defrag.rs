//! Defragmentation (`--defragment=dry-run|on`): a pod no candidate fits, that would fit if some
//! running pods sat on other devices, gets its devices by moving the fewest of them. The planner
//! (`sched::plan::defrag`) chooses on one view of every node; with `on` the plan is carried out
//! in an order that loses nothing: the pending pod's devices and every moved pod's destination
//! are claimed first through `TakeAll` (each destination keyed by the moved pod's controller and
//! its shape, so the pod its controller makes next is answered there), and only then are the
//! moved pods evicted, one at a time, through the Eviction API. An eviction refused ends the
//! plan: what it has not used goes back. What may move: pods whose ReplicaSet or StatefulSet
//! makes a replacement (others only when annotated `hami.io/movable: "true"`), of no higher
//! priority than the pending pod, not annotated not to move, not in the scheduler's namespace,
//! not a pod group's member, not a replacement placed within the cooldown, within the budgets
//! per plan, per node, per controller and per minute, and never beyond a PodDisruptionBudget.

use std::sync::Arc;

use crate::actor::books::moves::Freeable;
use crate::actor::books::pods::Claimed;
use crate::actor::coordinator::{Part, Take, TakeAll};
use crate::actor::filter::cycle::FilterCycle;
use crate::actor::filter::run::Told;
use crate::actor::messages::{Reserve, TakeClaim};
use crate::actor::preemption::plan::priority;
use crate::actor::{Defragment, Failures, FilterOutcome, Inner};
use crate::model::request::FitKey;
use crate::model::{NodeName, PodRequest, PodUid, PodView};
use crate::port::{Backend, EventType, Evicted, PodRef, reasons};
use crate::sched::claim::ClaimKey;
use crate::sched::plan::defrag::defrag;
use crate::sched::plan::{Ask, Node, View};

/// A pod's own word on being moved: `"true"` lets a pod without a replacing controller move,
/// `"false"` keeps any pod where it is.
pub const MOVABLE: &str = "hami.io/movable";
/// The cluster autoscaler's word, honoured the same way.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";

/// A defragmentation's outcome, as `hami_scheduler_defrag_plans_total` labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Placed,
    Blocked,
    DryRun,
    Lapsed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Placed => "placed",
            Outcome::Blocked => "blocked",
            Outcome::DryRun => "dry_run",
            Outcome::Lapsed => "lapsed",
        }
    }
}

/// A holder that may move: its request, its controller's UID and the pod.
type MayMove = (Arc<PodRequest>, String, Arc<PodView>);

/// One pod a plan moves: who it is, whose it is, from and to where.
struct Mover {
    pod: PodRef,
    uid: PodUid,
    controller: String,
    from: NodeName,
    to: NodeName,
    key: ClaimKey,
    id: u64,
    take: TakeClaim,
}

/// The shape a controller's next pod is recognised by: the pod's fit key with the annotations
/// a decision and its bind leave on the pod left out (a replacement comes without them),
/// the time of the decision among them.
pub fn shape_of(e: &crate::devices::Vendors, pod: &PodView) -> FitKey {
    let mut clean = pod.clone();
    for k in e.scheduler_keys() {
        clean.metadata.annotations.remove(k.as_str());
    }
    clean.metadata.annotations.remove(crate::model::annotations::ASSIGNED_TIME);
    FitKey::of(&clean, clean.is_pod_group_member())
}

impl<B: Backend> Inner<B> {
    /// Whether `pod` may be moved for a pod of priority `below`, and the controller that makes
    /// its replacement (its owner's UID); `None` when it stays.
    fn movable(&self, pod: &PodView, below: i32) -> Option<String> {
        let cfg = &self.cfg.defrag;
        let word = |k: &str| pod.annotation(k).map(str::trim);
        if word(MOVABLE) == Some("false") || word(SAFE_TO_EVICT) == Some("false") {
            return None;
        }
        if cfg.own_namespace.as_deref() == Some(pod.metadata.namespace.as_str())
            || priority(pod) > below
            || pod.is_terminating()
            || pod.is_finished()
            || pod.spec.node_name.as_deref().is_none_or(str::is_empty)
            || self.pods.groups.group_of(pod).is_some()
            || self.moves.recently_replaced(&PodUid::new(&pod.metadata.uid), cfg.cooldown)
        {
            return None;
        }
        let owner = pod.controller()?;
        let replaced = matches!(owner.kind.as_str(), "ReplicaSet" | "StatefulSet") || word(MOVABLE) == Some("true");
        (replaced && !owner.uid.is_empty()).then(|| owner.uid.clone())
    }
}

/// Every allocation's and claim's charges on the node, as holders of no priority (the console's
/// figure reads only what each holds).
fn charge_holders(r: &crate::actor::NodeReport) -> Vec<crate::sched::victims::Holder<'_>> {
    let charges = r.allocs.iter().map(|a| &a.charges).chain(r.claims.iter().map(|c| &c.charges));
    charges.map(|c| crate::sched::victims::Holder { priority: 0, started: 0, evictable: false, charges: c }).collect()
}

/// What a defragmentation plans on: every node's report (sorted by name) and published snapshot,
/// and each holder's request and controller when it may move.
struct Movables {
    reports: Vec<crate::actor::NodeReport>,
    snaps: Vec<Arc<crate::sched::NodeSnapshot>>,
    reqs: Vec<Vec<Option<MayMove>>>,
}

impl<B: Backend> Inner<B> {
    /// The nodes as a defragmentation for a pod of priority `below` sees them.
    async fn movables(self: &Arc<Self>, below: i32) -> Movables {
        let e = self;
        let limits = &e.cfg.defrag;
        let mut reports = e.nodes.reports(None).await;
        reports.sort_by(|a, b| a.name.cmp(&b.name));
        let published = e.nodes.snapshots();
        let snaps: Vec<_> = reports
            .iter()
            .map(|r| {
                published
                    .binary_search_by(|(n, _)| n.cmp(&r.name))
                    .map_or_else(|_| r.snapshot.clone(), |k| published[k].1.clone())
            })
            .collect();
        // Each holder's request when it may move, and its controller.
        let mut reqs: Vec<Vec<Option<MayMove>>> = Vec::with_capacity(reports.len());
        for r in &reports {
            let mut per = Vec::with_capacity(r.allocs.len());
            for a in &r.allocs {
                let entry = e.backend.pod(&a.namespace, &a.name).and_then(|v| {
                    let controller = e.movable(&v, below)?;
                    let (on_node, of_controller) = e.moves.counts(limits.cooldown, r.name.as_str(), &controller);
                    if on_node >= limits.per_node || of_controller >= limits.per_controller {
                        return None;
                    }
                    let req = e.request_of(&v).ok()?;
                    Some((req, controller, v))
                });
                per.push(entry);
            }
            reqs.push(per);
        }
        Movables { reports, snaps, reqs }
    }

    /// Whole devices a defragmentation could free now, by vendor and device type (the console's
    /// figure), on `reports` (the console's): pods that may move for a pod of any priority, the
    /// budgets aside, packed onto the other shared devices of their type. Kept for
    /// `FREEABLE_KEPT`: it reads every running pod.
    pub(in crate::actor) fn defrag_freeable(self: &Arc<Self>, reports: &[crate::actor::NodeReport]) -> Freeable {
        self.moves.freeable(|| {
            let may_move: Vec<Vec<bool>> = reports
                .iter()
                .map(|r| {
                    r.allocs
                        .iter()
                        .map(|a| {
                            self.backend
                                .pod(&a.namespace, &a.name)
                                .is_some_and(|v| self.movable(&v, i32::MAX).is_some())
                        })
                        .collect()
                })
                .collect();
            let view = View {
                nodes: reports.iter().map(|r| Node { snapshot: &r.snapshot, holders: charge_holders(r) }).collect(),
            };
            crate::sched::plan::defrag::freeable(&view, &may_move)
                .into_iter()
                .map(|((v, ty), n)| ((self.vendors.get(v).name().to_owned(), ty.to_string()), n))
                .collect()
        })
    }
}

impl<B: Backend> FilterCycle<'_, '_, B> {
    /// A pod no candidate fits: the plan that places it by moving running pods, shown
    /// (`dry-run`) or carried out (`on`). The filter still answers no node; the pod reserves from
    /// its claim once the moved pods are gone, as a preemptor does.
    pub(in crate::actor) async fn defragment(&self, failed: &Failures) {
        let e = self.e;
        if e.cfg.defragment == Defragment::Off || failed.device_nodes().is_empty() {
            return;
        }
        if e.pods.has_claim(&ClaimKey::Pod(self.req.uid.clone())) {
            return;
        }
        // The priority that bounds who may move is the cluster's copy's; a pod the cluster does not
        // have (yet) is taken at no more than priority 0, so a request cannot claim a priority
        // to move pods with.
        let below = match e.backend.pod_of_record(&self.pref.namespace, &self.pref.name).await {
            Ok(Some(p)) if p.metadata.uid == self.pref.uid || p.metadata.uid.is_empty() => priority(&p),
            Ok(_) => priority(self.pod).min(0),
            Err(err) => {
                tracing::warn!(pod = %self.pref, error = %err, "could not read the pod; no defragmentation this time");
                return;
            }
        };
        let limits = &e.cfg.defrag;
        let budget = limits.per_plan.min(limits.per_minute.saturating_sub(e.moves.last_minute()));
        if budget == 0 {
            return;
        }
        let Movables { reports, snaps, reqs } = e.movables(below).await;
        let movable: Vec<Vec<Option<&PodRequest>>> =
            reqs.iter().map(|per| per.iter().map(|x| x.as_ref().map(|(r, ..)| &**r)).collect()).collect();
        let holders: Vec<_> = reports.iter().map(|r| e.holders(r, i32::MIN)).collect();
        let view = View { nodes: snaps.iter().zip(holders).map(|(s, h)| Node { snapshot: s, holders: h }).collect() };
        let within = self.candidate_places(reports.iter().map(|r| r.name.as_str()));
        let ask = Ask { req: &self.req, within: Some(&within) };
        let Some(plan) = e.with_planner(&self.req, |w| defrag(&view, &ask, &movable, budget, w)) else {
            return;
        };
        let node = reports[plan.node].name.clone();
        let mut movers = Vec::with_capacity(plan.moves.len());
        for m in &plan.moves {
            let Some((req, controller, view)) = reqs[plan.node].get(m.holder).and_then(Option::as_ref) else { return };
            let to = reports[m.to.node].name.clone();
            let key = ClaimKey::Next { owner: Arc::from(controller.as_str()), shape: shape_of(&e.vendors, view) };
            let id = e.pods.next_claim_id();
            let pod = PodRef::of(view);
            let uid = PodUid::new(&view.metadata.uid);
            movers.push(Mover {
                pod,
                uid,
                controller: controller.clone(),
                from: node.clone(),
                to,
                key: key.clone(),
                id,
                take: TakeClaim {
                    key,
                    id,
                    pod: req.clone(),
                    devices: m.to.devices.clone(),
                    ttl: limits.claim_ttl,
                    gone: Vec::new(),
                },
            });
        }
        let told =
            movers.iter().map(|m| format!("{} from {} to {}", m.pod, m.from, m.to)).collect::<Vec<_>>().join(", ");
        let what = format!("a defragmentation would move {told} to free room for it on {node}");
        if e.cfg.defragment == Defragment::DryRun {
            crate::metrics::defrag_plan(Outcome::DryRun.as_str());
            tracing::info!(pod = %self.pref, %node, moves = %told, "defragmentation plan (dry run: nothing moved)");
            e.pods.pending.note(self.req.uid.as_str(), &format!("{what} (dry run: nothing moved)"));
            return;
        }
        let refs: Vec<PodRef> = movers.iter().map(|m| m.pod.clone()).collect();
        match e.backend.disruption_blocked(&refs).await {
            Ok(blocked) if blocked.is_empty() => {}
            Ok(blocked) => {
                let names: Vec<String> = blocked.iter().map(ToString::to_string).collect();
                self.defrag_blocked(&format!(
                    "{what}, but a PodDisruptionBudget allows no disruption of {}",
                    names.join(", ")
                ));
                return;
            }
            Err(err) => {
                self.defrag_blocked(&format!(
                    "{what}, but the PodDisruptionBudgets could not be read ({err}): no disruption"
                ));
                return;
            }
        }
        self.carry_out(node, plan.placement.devices, movers, &what).await;
    }

    /// Claims the pending pod's devices and every destination, then evicts the moved pods one at
    /// a time; an eviction refused ends the plan and gives back what it did not use.
    async fn carry_out(&self, node: NodeName, devices: crate::model::PodDevices, movers: Vec<Mover>, what: &str) {
        let e = self.e;
        let ttl = e.cfg.defrag.claim_ttl;
        let freed = devices.0.iter().flat_map(|(_, cs)| cs.iter()).map(Vec::len).sum();
        let gone: Vec<PodUid> = movers.iter().map(|m| m.uid.clone()).collect();
        let own = ClaimKey::Pod(self.req.uid.clone());
        let own_id = e.pods.next_claim_id();
        let mut parts = vec![Part {
            node: node.clone(),
            take: Take::Claim(TakeClaim {
                key: own.clone(),
                id: own_id,
                pod: self.req.clone(),
                devices,
                ttl,
                gone: gone.clone(),
            }),
        }];
        for m in &movers {
            let mut take = m.take.clone();
            if m.to == node {
                // On the node the moves free, the destination is checked beside the usage without them.
                take.gone = gone.clone();
            }
            parts.push(Part { node: m.to.clone(), take: Take::Claim(take) });
        }
        if !matches!(e.nodes.coordinator().send(TakeAll { parts }).await, Ok(Ok(_))) {
            // The room changed meanwhile: planned again at the pod's next filter.
            return;
        }
        let victims = movers.iter().map(|m| m.pod.clone()).collect();
        e.pods.keep_claim(own.clone(), Arc::new(Claimed { node: node.clone(), id: own_id, victims }));
        for m in &movers {
            e.pods.keep_claim(m.key.clone(), Arc::new(Claimed { node: m.to.clone(), id: m.id, victims: Vec::new() }));
            e.moves.next_claim_taken();
        }
        let mut moved = Vec::new();
        let mut refused = None;
        for m in &movers {
            match e.backend.evict(&m.pod).await {
                Ok(done) => {
                    let message = format!(
                        "Moved by hami-rs to node {} to make room for pod {}: its controller's next pod is placed there",
                        m.to, self.pref
                    );
                    e.event(&m.pod, reasons::PREEMPTED, EventType::Normal, message);
                    tracing::info!(pod = %m.pod, from = %m.from, to = %m.to, for_pod = %self.pref, "moved for defragmentation");
                    e.moves.moved(m.from.clone(), m.controller.clone());
                    if done == Evicted::Gone {
                        e.delete_pod(&m.uid);
                    }
                    moved.push(m);
                }
                Err(err) => {
                    refused = Some((m, err));
                    break;
                }
            }
        }
        if let Some((m, err)) = refused {
            // The moves not made keep nothing; what the moved pods freed stays claimed for their
            // replacements, and the pending pod's claim goes back (its room is not free).
            for left in movers.iter().skip(moved.len()) {
                if e.give_back_claim(&left.key, Some(left.id), "defragmentation ended").is_some() {
                    e.moves.next_claim_ended();
                }
            }
            e.give_back_claim(&own, Some(own_id), "defragmentation ended");
            self.defrag_blocked(&format!(
                "{what}, but the eviction of {} was refused ({err}): no further disruption",
                m.pod
            ));
            return;
        }
        crate::metrics::defrag_plan(Outcome::Placed.as_str());
        crate::metrics::defrag_moved(moved.len(), freed);
        let message = format!("{what}; moving now, its devices are claimed for {}s", ttl.as_secs());
        e.event(&self.pref, reasons::PREEMPTING, EventType::Normal, message.clone());
        e.remember(&self.pref, Some(node.to_string()), "defragmenting", message.clone());
        e.pods.pending.note(self.req.uid.as_str(), &message);
        let engine = e.clone();
        let keys: Vec<(ClaimKey, u64)> =
            std::iter::once((own, own_id)).chain(movers.iter().map(|m| (m.key.clone(), m.id))).collect();
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            let mut lapsed = 0;
            for (k, id) in &keys {
                if engine.give_back_claim(k, Some(*id), "defragmentation claim lapsed").is_some() {
                    lapsed += 1;
                    if matches!(k, ClaimKey::Next { .. }) {
                        engine.moves.next_claim_ended();
                    }
                }
            }
            if lapsed > 0 {
                crate::metrics::defrag_plan(Outcome::Lapsed.as_str());
            }
        });
    }

    /// A plan stopped before it moved anything more: said on the pod, its console entry and the
    /// metric.
    fn defrag_blocked(&self, why: &str) {
        let e = self.e;
        crate::metrics::defrag_plan(Outcome::Blocked.as_str());
        tracing::info!(pod = %self.pref, reason = %why, "defragmentation blocked");
        e.event(&self.pref, reasons::PREEMPTION_FAILED, EventType::Warning, why.to_owned());
        e.pods.pending.note(self.req.uid.as_str(), why);
    }

    /// The next pod of a controller whose pod was moved: reserved on the destination claimed for
    /// it. `None` when no such claim is waiting for this pod's controller and shape.
    pub(in crate::actor) async fn reserve_replacement(&self) -> Option<(FilterOutcome, Told)> {
        let e = self.e;
        if !e.moves.any_next_claim() {
            return None;
        }
        let owner = self.pod.controller()?;
        let key = ClaimKey::Next { owner: Arc::from(owner.uid.as_str()), shape: shape_of(&e.vendors, self.pod) };
        let held = e.pods.claim(&key)?;
        if !self.names.contains(held.node.as_str()) {
            return None;
        }
        let addr = e.nodes.addr(held.node.as_str())?;
        let msg = Reserve { pod: self.req.clone(), exact: None, ttl: e.cfg.reservation_ttl, claim: Some(key.clone()) };
        let reserved = match addr.reserve(msg).await {
            Ok(Ok(r)) => r,
            _ => return None,
        };
        // The node ended the claim with the reservation.
        if e.pods.forget_claim(&key, Some(held.id)).is_some() {
            e.moves.next_claim_ended();
        }
        e.moves.replaced(self.req.uid.clone());
        let node = held.node.clone();
        let fits = vec![(node.clone(), reserved.score, ())];
        Some(self.placed(node, &reserved, &fits, 1, Failures::default()).await)
    }
}
