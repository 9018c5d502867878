//! GPU-aware preemption, live (`--preemption=on`): when no candidate fits a pod for its devices,
//! the planner's victims are checked against PodDisruptionBudgets, the pod's node takes a claim
//! for the devices the pod will use there once the victims are gone (through the coordinator's
//! all-or-nothing `TakeAll`), and the victims are evicted through the Eviction API. The filter
//! still answers "no node": kube-scheduler filters the pod again when the victims' deletions
//! arrive, and that filter reserves from the claim on the claimed node. A claim ends when the
//! pod reserves there or anywhere else, is deleted, or the claim lapses (`--preemption-hold`);
//! the node accepts it only beside every other claim, so two preemptors never count the same
//! victims.

pub mod plan;

use std::sync::Arc;
use std::time::{Duration, Instant};

use plan::Plan;

use crate::actor::books::pods::Claimed;
use crate::actor::coordinator::{Part, Take, TakeAll};
use crate::actor::filter::cycle::FilterCycle;
use crate::actor::messages::{Reserve, TakeClaim};
use crate::actor::{Failures, FilterOutcome, Inner};
use crate::metrics::Preemption;
use crate::model::{NodeName, PodUid, PodView};
use crate::port::{Backend, EventType, Evicted, PodRef, reasons};
use crate::sched::claim::ClaimKey;

/// Rounds of planning that spare the victims PodDisruptionBudgets protect.
const BUDGET_ROUNDS: usize = 4;

/// How long a preemptor's filter waits for this scheduler's watch to release victims the API
/// server no longer has.
const RELEASE_WAIT: Duration = Duration::from_secs(2);
const RELEASE_POLL: Duration = Duration::from_millis(20);

impl<B: Backend> FilterCycle<'_, '_, B> {
    /// A preemptor's filter: it reserves from its claim on the claimed node, on that node's
    /// usage without the claim. `None` (the filter goes on as usual) when the pod has no claim,
    /// its node is not among the candidates, or its victims have not all gone yet.
    pub(super) async fn reserve_held(&self) -> Option<(FilterOutcome, crate::actor::filter::run::Told)> {
        let (i, req) = (self.e, &self.req);
        let key = ClaimKey::Pod(req.uid.clone());
        let held = i.pods.claim(&key)?;
        if !self.names.contains(held.node.as_str()) {
            return None;
        }
        let addr = i.nodes.addr(held.node.as_str())?;
        let reserve = || {
            let claim = Some(key.clone());
            addr.reserve(Reserve { pod: req.clone(), exact: None, ttl: i.cfg.reservation_ttl, claim })
        };
        let reserved = match reserve().await {
            Ok(Ok(r)) => r,
            // kube-scheduler filters the pod again as soon as a victim's deletion reaches it,
            // which may be before this scheduler's watch has released the victim's devices: when
            // every victim is gone from the API server, the release is moments away.
            _ if i.victims_gone(&held.victims).await => {
                let until = Instant::now() + RELEASE_WAIT;
                loop {
                    tokio::time::sleep(RELEASE_POLL).await;
                    match reserve().await {
                        Ok(Ok(r)) => break r,
                        _ if Instant::now() >= until => return None,
                        _ => {}
                    }
                }
            }
            // Victims still terminating: the last one's deletion brings the pod back.
            _ => return None,
        };
        // The node ended the claim with the reservation.
        i.pods.forget_claim(&key, Some(held.id));
        crate::metrics::preemption(Preemption::Placed);
        let node = held.node.clone();
        let fits = vec![(node.clone(), reserved.score, ())];
        Some(self.placed(node, &reserved, &fits, 1, Failures::default()).await)
    }

    /// For a pod no candidate fits: plans a preemption, sparing pods PodDisruptionBudgets
    /// protect, claims on its node the devices the pod will take there once the victims are gone,
    /// and evicts the victims. Off, for a pod already waiting on a claim, or with nothing to
    /// evict: `None`.
    pub(super) async fn preempt(&self, failed: &Failures) -> Option<Plan> {
        let (e, pref, req) = (self.e, &self.pref, &self.req);
        let i = e;
        let ttl = i.cfg.preemption_hold?;
        let key = ClaimKey::Pod(req.uid.clone());
        if i.pods.has_claim(&key) {
            return None;
        }
        // Who preempts, and at which priority, is the cluster's word, never the request's.
        let pod = &*i.preemptor_of_record(pref).await?;
        let plan = self.plan_within_budgets(pod, failed).await?;
        let node = NodeName::new(&plan.node);
        let id = i.pods.next_claim_id();
        let claim = TakeClaim {
            key: key.clone(),
            id,
            pod: req.clone(),
            devices: plan.placement.clone(),
            ttl,
            gone: plan.victims.iter().map(|v| PodUid::new(&v.uid)).collect(),
        };
        let parts = vec![Part { node: node.clone(), take: Take::Claim(claim) }];
        match i.nodes.coordinator().send(TakeAll { parts }).await {
            Ok(Ok(_)) => {}
            // The node's room was claimed by another preemptor, or changed: this pod is planned
            // again on its next filter.
            _ => return None,
        }
        let victims = plan.victims.iter().map(|v| v.pod_ref()).collect();
        let hold = Arc::new(Claimed { node: node.clone(), id, victims });
        i.pods.keep_claim(key.clone(), hold.clone());
        let mut evicted = Vec::with_capacity(plan.victims.len());
        for v in &plan.victims {
            let victim = v.pod_ref();
            match i.backend.evict(&victim).await {
                Ok(gone) => {
                    let message = format!(
                        "Preempted by pod {pref} (priority {}) on node {}: hami-rs frees its devices for it",
                        plan::priority(pod),
                        plan.node
                    );
                    i.event(&victim, reasons::PREEMPTED, EventType::Warning, message);
                    if gone == Evicted::Gone {
                        e.delete_pod(&PodUid::new(&v.uid));
                    }
                    evicted.push(v);
                }
                Err(err) => {
                    tracing::warn!(pod = %pref, victim = %victim, error = %err, "eviction refused");
                    let message = format!("could not evict {victim} on node {}: {err}", plan.node);
                    i.event(pref, reasons::PREEMPTION_FAILED, EventType::Warning, message);
                }
            }
        }
        if evicted.is_empty() {
            // Nothing is on its way out: a claim would only keep the devices from other pods.
            e.give_back_claim(&key, Some(id), "no victim evicted");
            crate::metrics::preemption(Preemption::Blocked);
            return None;
        }
        crate::metrics::preemption(Preemption::Started);
        let (mem, cores) = evicted.iter().fold((0, 0), |(m, c), v| (m + v.holds.0, c + v.holds.1));
        crate::metrics::preempted(evicted.len(), mem, cores);
        let names: Vec<String> = evicted.iter().map(|v| v.to_string()).collect();
        let message = format!(
            "evicting {} on node {} to free device memory and cores for this pod; held for it for {}s",
            names.join(", "),
            plan.node,
            ttl.as_secs()
        );
        tracing::info!(pod = %pref, node = %plan.node, victims = %names.join(","), "preempting");
        i.event(pref, reasons::PREEMPTING, EventType::Normal, message.clone());
        i.remember(pref, Some(plan.node.clone()), "preempting", message);
        let engine = e.clone();
        let pref = pref.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            lapse(&engine, &key, &hold, &pref);
        });
        Some(plan)
    }

    /// The plan with the victims PodDisruptionBudgets protect spared; `None` when none is left
    /// or the budgets cannot be read (nothing is evicted blind).
    async fn plan_within_budgets(&self, pod: &PodView, failed: &Failures) -> Option<Plan> {
        let (e, pref) = (self.e, &self.pref);
        let mut spared: Vec<String> = Vec::new();
        for _ in 0..BUDGET_ROUNDS {
            let plan = e.plan_sparing(pod, &self.req, failed, &spared).await?;
            let victims: Vec<PodRef> = plan.victims.iter().map(|v| v.pod_ref()).collect();
            match e.backend.disruption_blocked(&victims).await {
                Ok(blocked) if blocked.is_empty() => return Some(plan),
                Ok(blocked) => {
                    tracing::info!(pod = %pref, protected = blocked.len(), "disruption budgets protect planned victims; planning again");
                    spared.extend(blocked.into_iter().map(|p| p.uid));
                }
                Err(err) => {
                    tracing::warn!(pod = %pref, error = %err, "could not read disruption budgets; no preemption");
                    return None;
                }
            }
        }
        crate::metrics::preemption(Preemption::Blocked);
        None
    }
}

impl<B: Backend> Inner<B> {
    /// The preemptor as the cluster has it (this scheduler's watch cache, else a read of the API
    /// server): only a pod the cluster has with the UID the filter named may preempt, at the
    /// priority and with the preemption policy of the cluster's copy. A request body claims
    /// nothing: a pod unknown to the cluster, or known under another UID, is logged, counted
    /// (`preemptions_total{outcome="unverified"}`) and evicts no one.
    pub(super) async fn preemptor_of_record(self: &Arc<Self>, pref: &PodRef) -> Option<Arc<PodView>> {
        let why = match self.backend.pod_of_record(&pref.namespace, &pref.name).await {
            // A cluster file may name its pods without UIDs; the API server's pods all have one.
            Ok(Some(p)) if p.metadata.uid == pref.uid || p.metadata.uid.is_empty() => return Some(p),
            Ok(Some(_)) => "the cluster's pod of that name has another UID",
            Ok(None) => "the cluster has no such pod",
            Err(e) => {
                tracing::warn!(pod = %pref, error = %e, "could not read the preemptor; no preemption this time");
                return None;
            }
        };
        crate::metrics::preemption(Preemption::Unverified);
        tracing::warn!(pod = %pref, uid = %pref.uid, why, "not a preemptor: a filter named a pod the cluster does not have; no one is evicted");
        None
    }

    /// Whether the API server has none of `victims` any more (a pod of the same name with
    /// another UID is not the victim). A read that fails answers no.
    pub(in crate::actor) async fn victims_gone(self: &Arc<Self>, victims: &[PodRef]) -> bool {
        for v in victims {
            match self.backend.pod_read(&v.namespace, &v.name).await {
                Ok(None) => {}
                Ok(Some(p)) if p.metadata.uid != v.uid => {}
                _ => return false,
            }
        }
        true
    }
}

/// The claim's time ran out before the preemptor reserved from it (a filter that does forgets it
/// in the index, so the index is what says): its devices are free for any pod, and the preemptor
/// is told. The node may have lapsed it a tick before, on its own timer.
fn lapse<B: Backend>(e: &Arc<Inner<B>>, key: &ClaimKey, hold: &Claimed, pref: &PodRef) {
    if e.give_back_claim(key, Some(hold.id), "preemption claim lapsed").is_some() {
        crate::metrics::preemption(Preemption::Lapsed);
        let message = format!(
            "the devices claimed on node {} were not taken in time (its evicted pods may still be terminating); they are free for any pod again",
            hold.node
        );
        tracing::info!(pod = %pref, node = %hold.node, "preemption claim lapsed");
        e.event(pref, reasons::PREEMPTION_FAILED, EventType::Warning, message.clone());
        e.remember(pref, Some(hold.node.to_string()), "hold_lapsed", message);
    }
}
