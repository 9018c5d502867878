//! Preemption planning: for a pod that no candidate fits for device reasons, the node and the
//! fewest bound pods of strictly lower priority whose release would let it fit there, by the fit
//! and GPU policy a filter uses. Read-only: nothing is reserved or evicted here.

use super::{Engine, Failures, with_scratch};
use crate::model::{DeviceUsage, NodeName, PodRequest, PodView};
use crate::port::Backend;
use crate::sched::preempt::{self, Cost, Holder};
use crate::sched::report::{AllocState, NodeReport};
use crate::sched::{NodeSnapshot, fit};
use crate::vendor::{NoQuota, QuotaCheck};

/// A pod a preemption would evict.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Victim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub priority: i32,
}

/// Where the pod would fit, and whom that would evict.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    pub node: String,
    pub victims: Vec<Victim>,
}

/// The pod's priority as Kubernetes resolved it (a pod without one has 0).
pub fn priority(pod: &PodView) -> i32 {
    pod.spec.priority.unwrap_or(0)
}

/// When the pod started, in Unix seconds; one not started yet counts as starting now, the latest
/// of all.
fn started(pod: &PodView) -> i64 {
    pod.status
        .start_time
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or(i64::MAX, |t| t.timestamp())
}

impl<B: Backend> Engine<B> {
    /// The preemption that would place `pod`, or `None`: the pod may not preempt
    /// (`preemptionPolicy: Never`), or on no candidate that failed for its devices (others failed
    /// for reasons no eviction changes: unregistered, unusable, locked) does any set of
    /// lower-priority pods free enough. Nodes are ranked by their victims (fewest, then lowest priorities,
    /// then the most recently started), then by name.
    pub async fn preemption_plan(&self, pod: &PodView, req: &PodRequest, failed: &Failures) -> Option<Plan> {
        if pod.spec.preemption_policy.as_deref() == Some("Never") {
            return None;
        }
        let nodes = failed.device_nodes();
        let below = priority(pod);
        let reports = self.reports().await;
        let mut best: Option<(Cost, NodeName, Vec<Victim>)> = None;
        for r in reports.iter().filter(|r| nodes.binary_search(&r.name).is_ok()) {
            let Some(found) = self.victims_on(r, req, below) else { continue };
            let rank = (found.0, r.name.clone());
            if best.as_ref().is_none_or(|(c, n, _)| rank < (*c, n.clone())) {
                best = Some((found.0, r.name.clone(), found.1));
            }
        }
        best.map(|(_, node, victims)| Plan { node: node.to_string(), victims })
    }

    /// The victims on one node, with their cost.
    fn victims_on(&self, r: &NodeReport, req: &PodRequest, below: i32) -> Option<(Cost, Vec<Victim>)> {
        let backend = &self.inner.backend;
        let views: Vec<Option<std::sync::Arc<PodView>>> =
            r.allocs.iter().map(|a| backend.pod(&a.namespace, &a.name)).collect();
        let holders: Vec<Holder<'_>> = r
            .allocs
            .iter()
            .zip(&views)
            .map(|(a, v)| {
                let p = v.as_deref().map_or(i32::MAX, priority);
                Holder {
                    priority: p,
                    started: v.as_deref().map_or(i64::MAX, started),
                    // Only pods the cluster shows bound and running can be evicted; one being
                    // scheduled (reserved) or already terminating keeps its hold.
                    evictable: a.state == AllocState::Committed
                        && p < below
                        && v.as_deref().is_some_and(|v| !v.is_terminating() && !v.is_finished()),
                    charges: &a.charges,
                }
            })
            .collect();
        let snap = &r.snapshot;
        let i = &*self.inner;
        let view = i.quota.as_deref().and_then(|q| q.view(&req.namespace));
        let quota: &dyn QuotaCheck = match &view {
            Some(v) => v,
            None => &NoQuota,
        };
        let set = with_scratch(|s| {
            let mut fits = |devs: &[DeviceUsage]| {
                let node = NodeSnapshot::new(snap.name.clone(), devs.to_vec(), snap.extras.clone());
                fit::fit_pod(&node, req, &i.vendors, quota, s).is_ok()
            };
            preempt::victims(&snap.devices, &holders, &mut fits)
        })?;
        let cost = preempt::cost(&holders, &set);
        let mut victims: Vec<Victim> = set
            .iter()
            .map(|&k| {
                let a = &r.allocs[k];
                Victim {
                    namespace: a.namespace.to_string(),
                    name: a.name.to_string(),
                    uid: a.uid.to_string(),
                    priority: holders[k].priority,
                }
            })
            .collect();
        victims.sort_by(|a, b| (a.priority, &a.namespace, &a.name).cmp(&(b.priority, &b.namespace, &b.name)));
        Some((cost, victims))
    }
}
