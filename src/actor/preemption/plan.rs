//! Preemption planning: for a pod that no candidate fits for device reasons, the node and the
//! fewest bound pods of strictly lower priority whose release would let it fit there, by the fit
//! and GPU policy a filter uses. Read-only: nothing is reserved or evicted here.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::super::error::FilterError;
use super::super::messages::Report;
use super::super::{Failures, Inner, with_scratch};
use crate::devices::{NoQuota, QuotaCheck};
use crate::model::{DeviceUsage, DeviceUuid, PodRequest, PodView};
use crate::port::Backend;
use crate::port::PodRef;
use crate::sched::report::{AllocReport, AllocState, NodeReport};
use crate::sched::victims::{self, Cost, Holder};
use crate::sched::{NodeSnapshot, fit};

/// A pod a preemption would evict.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Victim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub priority: i32,
    /// Device memory (MiB) and cores the pod holds on the node.
    #[serde(skip)]
    pub holds: (u64, u64),
}

impl std::fmt::Display for Victim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} (priority {})", self.namespace, self.name, self.priority)
    }
}

/// Where the pod would fit, and whom that would evict.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    pub node: String,
    pub victims: Vec<Victim>,
    /// The devices the victims hold there (what a live preemption holds for the pod).
    #[serde(skip)]
    pub devices: Vec<DeviceUuid>,
}

impl Victim {
    pub fn pod_ref(&self) -> PodRef {
        PodRef { namespace: self.namespace.clone(), name: self.name.clone(), uid: self.uid.clone() }
    }
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

impl<B: Backend> Inner<B> {
    /// The preemption that would place `pod`, or `None`: the pod may not preempt
    /// (`preemptionPolicy: Never`), or on no candidate that failed for its devices (others failed
    /// for reasons no eviction changes: unregistered, unusable, locked) does any set of
    /// lower-priority pods free enough. Nodes are ranked by their victims (fewest, then lowest priorities,
    /// then the most recently started), then by name.
    pub async fn preemption_plan(self: &Arc<Self>, pod: &PodView, req: &PodRequest, failed: &Failures) -> Option<Plan> {
        self.plan_sparing(pod, req, failed, &[]).await
    }

    /// kube-scheduler's preemption verb: for each node it proposes victims on (by UID), whether
    /// their release lets the pod's devices fit. Where it does, the node keeps those victims;
    /// where it does not, the fewest more bound pods of lower priority are added when they
    /// suffice; otherwise the node is dropped, so kube-scheduler never evicts for devices that
    /// would still be missing. A pod asking for no device keeps every proposal; a pod a node
    /// already holds devices for (`--preemption=on`) keeps none.
    pub async fn preempt_proposals(
        self: &Arc<Self>,
        pod: &PodView,
        proposals: &BTreeMap<String, Vec<String>>,
    ) -> Result<BTreeMap<String, Vec<String>>, FilterError> {
        let req = self.request_of(pod)?;
        if !req.requests_devices() {
            return Ok(proposals.clone());
        }
        if self.pods.holds_for(&req.uid) {
            // This scheduler's own preemption is already making room for the pod: no one else goes.
            return Ok(BTreeMap::new());
        }
        // The priority that decides who may go is the cluster's copy's; a pod the cluster does not
        // have keeps no node, so kube-scheduler evicts no one for it.
        let Some(own) = self.preemptor_of_record(&PodRef::of(pod)).await else { return Ok(BTreeMap::new()) };
        let below = priority(&own);
        let mut out = BTreeMap::new();
        for (node, uids) in proposals {
            let Some(addr) = self.nodes.addr(node.as_str()) else { continue };
            let Ok(r) = addr.send(Report).await else { continue };
            // The proposed victims are gone; the others may still be added.
            let (rest, kept): (Vec<Holder<'_>>, Vec<&AllocReport>) = self
                .holders(&r, below)
                .into_iter()
                .zip(&r.allocs)
                .filter(|(_, a)| !uids.iter().any(|u| u == a.uid.as_str()))
                .unzip();
            let extra = self.with_fit(&r, &req, |fits| {
                if fits(&victims::usage_without(&r.snapshot.devices, &rest, &[])) {
                    Some(Vec::new())
                } else {
                    victims::fewest(&r.snapshot.devices, &rest, fits)
                }
            });
            if let Some(extra) = extra {
                let mut victims = uids.clone();
                victims.extend(extra.into_iter().map(|k| kept[k].uid.to_string()));
                // kube-scheduler refuses an answer naming a node without victims: a node the pod
                // fits as it is needs no preemption.
                if !victims.is_empty() {
                    out.insert(node.clone(), victims);
                }
            }
        }
        Ok(out)
    }
}

impl<B: Backend> Inner<B> {
    /// `preemption_plan` with the pods of `spared` (UIDs) kept, and no node that holds devices
    /// for another preemptor.
    pub(super) async fn plan_sparing(
        self: &Arc<Self>,
        pod: &PodView,
        req: &PodRequest,
        failed: &Failures,
        spared: &[String],
    ) -> Option<Plan> {
        if pod.spec.preemption_policy.as_deref() == Some("Never") {
            return None;
        }
        let nodes = failed.device_nodes();
        let below = priority(pod);
        let reports = self.nodes.reports(Some(&nodes)).await;
        let mut best: Option<(Cost, &NodeReport, Victims)> = None;
        let open = |r: &&NodeReport| r.held_for.as_ref().is_none_or(|u| *u == req.uid);
        for r in reports.iter().filter(open) {
            let Some((cost, set)) = self.victims_on(r, req, below, spared) else { continue };
            if best.as_ref().is_none_or(|(c, n, _)| (cost, &r.name) < (*c, &n.name)) {
                best = Some((cost, r, set));
            }
        }
        let (_, r, set) = best?;
        Some(plan_of(r, &set))
    }

    /// Every pod holding devices on the node, evictable when it is bound and running with a
    /// priority below `below` (a pod being scheduled or terminating keeps its hold).
    fn holders<'r>(self: &Arc<Self>, r: &'r NodeReport, below: i32) -> Vec<Holder<'r>> {
        let backend = &self.backend;
        r.allocs
            .iter()
            .map(|a| {
                let v = backend.pod(&a.namespace, &a.name);
                let p = v.as_deref().map_or(i32::MAX, priority);
                Holder {
                    priority: p,
                    started: v.as_deref().map_or(i64::MAX, started),
                    evictable: a.state == AllocState::Committed
                        && p < below
                        && v.as_deref().is_some_and(|v| !v.is_terminating() && !v.is_finished()),
                    charges: &a.charges,
                }
            })
            .collect()
    }

    /// Runs `f` with the filter's fit of `req` on usages of the node (its namespace quota
    /// applied), on this thread's fit buffers.
    fn with_fit<R>(
        self: &Arc<Self>,
        r: &NodeReport,
        req: &PodRequest,
        f: impl FnOnce(&mut dyn FnMut(&[DeviceUsage]) -> bool) -> R,
    ) -> R {
        let i = self;
        let view = i.quota.as_deref().and_then(|q| q.view(&req.namespace));
        let quota: &dyn QuotaCheck = match &view {
            Some(v) => v,
            None => &NoQuota,
        };
        let snap = &r.snapshot;
        with_scratch(|s| {
            let mut fits = |devs: &[DeviceUsage]| {
                let node = NodeSnapshot::new(snap.name.clone(), devs.to_vec(), snap.extras.clone());
                fit::fit_pod(&node, req, &i.vendors, quota, s).is_ok()
            };
            f(&mut fits)
        })
    }

    /// The victims on one node (places in `r.allocs`, with their priorities), with their cost;
    /// the pods of `spared` are not evictable.
    fn victims_on(
        self: &Arc<Self>,
        r: &NodeReport,
        req: &PodRequest,
        below: i32,
        spared: &[String],
    ) -> Option<(Cost, Victims)> {
        let mut holders = self.holders(r, below);
        for (h, a) in holders.iter_mut().zip(&r.allocs) {
            if spared.iter().any(|u| u == a.uid.as_str()) {
                h.evictable = false;
            }
        }
        let set = self.with_fit(r, req, |fits| victims::fewest(&r.snapshot.devices, &holders, fits))?;
        let cost = victims::cost(&holders, &set);
        Some((cost, set.into_iter().map(|k| (k, holders[k].priority)).collect()))
    }
}

/// Victims on one node: their places in its report's `allocs`, with their priorities.
type Victims = Vec<(usize, i32)>;

/// The plan that evicts `set` on `r`'s node.
fn plan_of(r: &NodeReport, set: &[(usize, i32)]) -> Plan {
    let mut victims: Vec<Victim> = set
        .iter()
        .map(|&(k, priority)| {
            let a = &r.allocs[k];
            Victim {
                namespace: a.namespace.to_string(),
                name: a.name.to_string(),
                uid: a.uid.to_string(),
                priority,
                holds: a.charges.iter().fold((0, 0), |(m, c), ch| (m + ch.mem.0, c + u64::from(ch.cores))),
            }
        })
        .collect();
    victims.sort_by(|a, b| (a.priority, &a.namespace, &a.name).cmp(&(b.priority, &b.namespace, &b.name)));
    let mut devices: Vec<DeviceUuid> = Vec::new();
    for c in set.iter().flat_map(|&(k, _)| &r.allocs[k].charges) {
        if !devices.contains(&c.uuid) {
            devices.push(c.uuid.clone());
        }
    }
    Plan { node: r.name.to_string(), victims, devices }
}
