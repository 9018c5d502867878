//! A pod group that fits only by evicting lower-priority pods (`--preemption=on`): one plan for
//! every member it needs (`sched::plan::group::preempt_group`), budgets checked for all its
//! victims, every member's claim taken at once beside the usage without its node's victims, and
//! only then the evictions. A group never evicts for part of its members, and a member of another
//! group is never a victim (its group would be left short).

use std::sync::Arc;

use crate::actor::books::groups::member_key;
use crate::actor::books::pods::Claimed;
use crate::actor::coordinator::{Part, Take, TakeAll};
use crate::actor::filter::cycle::FilterCycle;
use crate::actor::messages::TakeClaim;
use crate::actor::preemption::plan::priority;
use crate::metrics::Preemption;
use crate::model::group::{GroupId, GroupSpec};
use crate::model::{NodeName, PodUid};
use crate::port::{Backend, EventType, Evicted, PodRef, reasons};
use crate::sched::plan::group::preempt_group;
use crate::sched::plan::{Node, View};

use super::filter::Planned;

impl<B: Backend> FilterCycle<'_, '_, B> {
    /// Plans `planned` with evictions and carries the plan out: claims for every member (each
    /// beside its node's usage without that node's victims), then the evictions. The reason the
    /// member is told while the victims leave, or `None` when no plan (or no budget) allows it.
    pub(super) async fn preempt_for_group(&self, id: &GroupId, spec: GroupSpec, planned: &Planned) -> Option<String> {
        let e = self.e;
        e.cfg.preemption_hold?;
        // Who preempts, and at which priority, is the cluster's word, never the request's.
        let pod = e.preemptor_of_record(&self.pref).await?;
        let below = priority(&pod);
        let mut reports = e.nodes.reports(None).await;
        reports.sort_by(|a, b| a.name.cmp(&b.name));
        let holders: Vec<_> = reports.iter().map(|r| e.holders(r, below)).collect();
        let view = View {
            nodes: reports.iter().zip(holders).map(|(r, h)| Node { snapshot: &r.snapshot, holders: h }).collect(),
        };
        let within = self.candidate_places(reports.iter().map(|r| r.name.as_str()));
        let members = planned.members(&self.pod.metadata.name, &within);
        let plan = e.with_planner(&self.req, |w| preempt_group(&view, &members, w))?;
        if plan.victims.is_empty() {
            return None;
        }
        let victims: Vec<(NodeName, PodRef, PodUid)> = plan
            .victims
            .iter()
            .filter_map(|&(n, h)| {
                let a = reports[n].allocs.get(h)?;
                let pref =
                    PodRef { namespace: a.namespace.to_string(), name: a.name.to_string(), uid: a.uid.to_string() };
                Some((reports[n].name.clone(), pref, a.uid.clone()))
            })
            .collect();
        let refs: Vec<PodRef> = victims.iter().map(|(_, p, _)| p.clone()).collect();
        match e.backend.disruption_blocked(&refs).await {
            Ok(blocked) if blocked.is_empty() => {}
            Ok(blocked) => {
                tracing::info!(group = %id, protected = blocked.len(), "disruption budgets protect a group's victims; no preemption");
                crate::metrics::preemption(Preemption::Blocked);
                return None;
            }
            Err(err) => {
                tracing::warn!(group = %id, error = %err, "could not read disruption budgets; no preemption");
                return None;
            }
        }
        let ttl = spec.timeout.unwrap_or(e.cfg.gang_claim_ttl);
        let mut parts = Vec::with_capacity(plan.placements.len());
        let mut kept = Vec::with_capacity(plan.placements.len());
        for (k, p) in plan.placements.into_iter().enumerate() {
            let node = reports[p.node].name.clone();
            let on_node: Vec<&(NodeName, PodRef, PodUid)> = victims.iter().filter(|(n, ..)| *n == node).collect();
            let key = member_key(id, &planned.names[k]);
            let claim_id = e.pods.next_claim_id();
            let gone = on_node.iter().map(|(_, _, u)| u.clone()).collect();
            let claim = TakeClaim {
                key: key.clone(),
                id: claim_id,
                pod: planned.reqs[k].clone(),
                devices: p.devices,
                ttl,
                gone,
            };
            let claimed = Claimed {
                node: node.clone(),
                id: claim_id,
                victims: on_node.iter().map(|(_, p, _)| p.clone()).collect(),
            };
            kept.push((key, Arc::new(claimed)));
            parts.push(Part { node, take: Take::Claim(claim) });
        }
        match e.nodes.coordinator().send(TakeAll { parts }).await {
            Ok(Ok(_)) => {}
            // The room changed meanwhile: the group is planned again at its next member's filter.
            _ => return None,
        }
        for (key, claimed) in &kept {
            e.pods.keep_claim(key.clone(), claimed.clone());
        }
        e.lapse_group_claims(id.clone(), kept.iter().map(|(k, c)| (k.clone(), c.id)).collect(), ttl);
        let mut evicted = 0usize;
        for (node, victim, uid) in &victims {
            match e.backend.evict(victim).await {
                Ok(gone) => {
                    let message = format!(
                        "Preempted by pod group {id} (priority {below}) on node {node}: hami-rs frees its devices for the group's members"
                    );
                    e.event(victim, reasons::PREEMPTED, EventType::Warning, message);
                    if gone == Evicted::Gone {
                        e.delete_pod(uid);
                    }
                    evicted += 1;
                }
                Err(err) => {
                    tracing::warn!(group = %id, victim = %victim, error = %err, "eviction refused");
                    let message = format!("could not evict {victim} on node {node}: {err}");
                    e.event(&self.pref, reasons::PREEMPTION_FAILED, EventType::Warning, message);
                }
            }
        }
        if evicted == 0 {
            e.release_group(id, super::Released::Lapsed);
            crate::metrics::preemption(Preemption::Blocked);
            return None;
        }
        crate::metrics::preemption(Preemption::Started);
        crate::metrics::group_decision("claimed");
        let names: Vec<String> = refs.iter().map(ToString::to_string).collect();
        let why = format!(
            "{}: evicting {} pods of lower priority ({}) to make room for its {} members; their room is claimed",
            id.name,
            names.len(),
            names.join(", "),
            planned.names.len()
        );
        tracing::info!(group = %id, victims = %names.join(","), "preempting for a pod group");
        e.event(&self.pref, reasons::PREEMPTING, EventType::Normal, why.clone());
        Some(why)
    }
}
