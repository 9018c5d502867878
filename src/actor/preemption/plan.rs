//! Preemption planning: for a pod that no candidate fits for device reasons, the node and the
//! fewest bound pods of strictly lower priority whose release would let it fit there, by the
//! planner (`sched::plan`) over one view of the candidate nodes gathered at once. Read-only:
//! nothing is claimed or evicted here.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::actor::error::FilterError;
use crate::actor::{Failures, Inner, with_scratch};
use crate::devices::{NoQuota, QuotaCheck};
use crate::model::{DeviceUuid, NodeName, PodDevices, PodRequest, PodView};
use crate::port::Backend;
use crate::port::PodRef;
use crate::sched::claim::ClaimKey;
use crate::sched::report::{AllocReport, AllocState, NodeReport};
use crate::sched::victims::{self, Holder};
use crate::sched::{NodeSnapshot, plan};

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
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Plan {
    pub node: String,
    pub victims: Vec<Victim>,
    /// The devices the victims hold there.
    #[serde(skip)]
    pub devices: Vec<DeviceUuid>,
    /// The devices the pod takes there once the victims are gone (what a live preemption
    /// claims for it).
    #[serde(skip)]
    pub placement: PodDevices,
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
        if self.pods.has_claim(&ClaimKey::Pod(req.uid.clone())) {
            // This scheduler's own preemption is already making room for the pod: no one else goes.
            return Ok(BTreeMap::new());
        }
        // The priority that decides who may go is the cluster's copy's; a pod the cluster does not
        // have keeps no node, so kube-scheduler evicts no one for it.
        let Some(own) = self.preemptor_of_record(&PodRef::of(pod)).await else { return Ok(BTreeMap::new()) };
        let below = priority(&own);
        let names: Vec<NodeName> = proposals.keys().map(|n| NodeName::new(n)).collect();
        // One view of every proposed node, asked of their actors at once.
        let reports = self.nodes.reports(Some(&names)).await;
        let mut out = BTreeMap::new();
        for r in &reports {
            let Some(uids) = proposals.get(r.name.as_str()) else { continue };
            // The proposed victims are gone; the others may still be added. Each holder is paired
            // with its allocation (the node's claims, after them, with none: nothing evicts them).
            let (rest, kept): (Vec<Holder<'_>>, Vec<Option<&AllocReport>>) = self
                .holders(r, below)
                .into_iter()
                .zip(r.allocs.iter().map(Some).chain(std::iter::repeat(None)))
                .filter(|(_, a)| !a.is_some_and(|a| uids.iter().any(|u| u == a.uid.as_str())))
                .unzip();
            let freed = NodeSnapshot::new(
                r.snapshot.name.clone(),
                victims::usage_without(&r.snapshot.devices, &rest, &[]),
                r.snapshot.extras.clone(),
            );
            let view = plan::View { nodes: vec![plan::Node { snapshot: &freed, holders: rest }] };
            let ask = plan::Ask { req: &req, within: None };
            let extra = self.with_planner(&req, |w| match plan::place(&view, &[ask], w) {
                Ok(_) => Some(Vec::new()),
                Err(_) => plan::preempt(&view, &ask, w).map(|p| p.victims),
            });
            if let Some(extra) = extra {
                let mut victims = uids.clone();
                victims.extend(
                    extra.into_iter().filter_map(|k| kept.get(k).copied().flatten()).map(|a| a.uid.to_string()),
                );
                // kube-scheduler refuses an answer naming a node without victims: a node the pod
                // fits as it is needs no preemption.
                if !victims.is_empty() {
                    out.insert(r.name.to_string(), victims);
                }
            }
        }
        Ok(out)
    }
}

impl<B: Backend> Inner<B> {
    /// `preemption_plan` with the pods of `spared` (UIDs) kept. Other claims count as holders no
    /// plan may evict, so a node whose room another preemptor claimed is planned as it is.
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
        // One view of every candidate node, asked of their actors at once.
        let reports = self.nodes.reports(Some(&nodes)).await;
        let view = plan::View {
            nodes: reports
                .iter()
                .map(|r| {
                    let mut holders = self.holders(r, below);
                    for (h, a) in holders.iter_mut().zip(&r.allocs) {
                        if spared.iter().any(|u| u == a.uid.as_str()) {
                            h.evictable = false;
                        }
                    }
                    plan::Node { snapshot: &r.snapshot, holders }
                })
                .collect(),
        };
        let ask = plan::Ask { req, within: None };
        let p = self.with_planner(req, |w| plan::preempt(&view, &ask, w))?;
        Some(plan_of(&reports[p.node], &view.nodes[p.node].holders, &p))
    }

    /// Every pod holding devices on the node, evictable when it is bound and running with a
    /// priority below `below` (a pod being scheduled or terminating keeps its hold), followed by
    /// every claim the node keeps, which nothing evicts.
    pub(in crate::actor) fn holders<'r>(self: &Arc<Self>, r: &'r NodeReport, below: i32) -> Vec<Holder<'r>> {
        let backend = &self.backend;
        let allocs = r.allocs.iter().map(|a| {
            let v = backend.pod(&a.namespace, &a.name);
            let p = v.as_deref().map_or(i32::MAX, priority);
            Holder {
                priority: p,
                started: v.as_deref().map_or(i64::MAX, started),
                // A member of a pod group is never evicted alone: its group would be left short,
                // holding the rest of its devices for a job that cannot run.
                evictable: a.state == AllocState::Committed
                    && p < below
                    && v.as_deref().is_some_and(|v| {
                        !v.is_terminating() && !v.is_finished() && self.pods.groups.group_of(v).is_none()
                    }),
                charges: &a.charges,
            }
        });
        let claims = r.claims.iter().map(|c| Holder {
            priority: i32::MAX,
            started: i64::MAX,
            evictable: false,
            charges: &c.charges,
        });
        allocs.chain(claims).collect()
    }

    /// Runs `f` with the planner's fit of `req` (its namespace quota applied), on this thread's
    /// fit buffers.
    pub(in crate::actor) fn with_planner<R>(
        self: &Arc<Self>,
        req: &PodRequest,
        f: impl FnOnce(&mut plan::With<'_>) -> R,
    ) -> R {
        let view = self.quota.as_deref().and_then(|q| q.view(&req.namespace));
        let quota: &dyn QuotaCheck = match &view {
            Some(v) => v,
            None => &NoQuota,
        };
        with_scratch(|s| f(&mut plan::With { vendors: &self.vendors, quota, scratch: s }))
    }
}

/// The plan `p` makes on `r`'s node: its victims (the holders it takes off, all allocations) and
/// the devices the pod then takes.
fn plan_of(r: &NodeReport, holders: &[Holder<'_>], p: &plan::Preemption) -> Plan {
    let mut victims: Vec<Victim> = p
        .victims
        .iter()
        .filter_map(|&k| {
            let a = r.allocs.get(k)?;
            Some(Victim {
                namespace: a.namespace.to_string(),
                name: a.name.to_string(),
                uid: a.uid.to_string(),
                priority: holders[k].priority,
                holds: a.charges.iter().fold((0, 0), |(m, c), ch| (m + ch.mem.0, c + u64::from(ch.cores))),
            })
        })
        .collect();
    victims.sort_by(|a, b| (a.priority, &a.namespace, &a.name).cmp(&(b.priority, &b.namespace, &b.name)));
    let mut devices: Vec<DeviceUuid> = Vec::new();
    for c in p.victims.iter().filter_map(|&k| r.allocs.get(k)).flat_map(|a| &a.charges) {
        if !devices.contains(&c.uuid) {
            devices.push(c.uuid.clone());
        }
    }
    Plan { node: r.name.to_string(), victims, devices, placement: p.placement.devices.clone() }
}
