//! The engine's state behind its handle: its configuration and vendors, the cluster it writes to,
//! and the books it keeps (nodes, pods, namespace quota, recent decisions), with the small
//! tellings every pipeline shares (Events, the console's lines, the pending book). The pipelines
//! (filter, bind, observe, refit, preemption, prioritize, simulate) are methods on it, each in its
//! own module; `Engine` is the handle that calls them.

use std::sync::Arc;

use crate::devices::Vendors;
use crate::metrics::Outcome;
use crate::model::{NodeName, PodDevices, PodRequest, PodUid};
use crate::port::{Backend, Event, EventType, ObjectKind, PodPatch, PodRef, reasons};

use crate::actor::books::nodes::{ActorParts, NodeBook};
use crate::actor::books::pending::PendingPod;
use crate::actor::books::pods::PodBook;
use crate::actor::books::recent::{DeviceNeed, NO_FIT_NODES, Recent, RecentDecision};
use crate::actor::config::EngineConfig;
use crate::actor::filter::decision;
use crate::actor::filter::failures::Failures;
use crate::actor::node::SharedQuota;

/// The engine's state: its configuration and vendors, the cluster it writes to, and the books it
/// keeps (nodes, pods, namespace quota, recent decisions).
pub(crate) struct Inner<B: Backend> {
    pub(super) cfg: EngineConfig,
    pub(super) vendors: Arc<Vendors>,
    pub(super) backend: B,
    pub(super) nodes: NodeBook,
    pub(super) pods: PodBook,
    pub(super) quota: Option<SharedQuota>,
    pub(super) recent: Arc<Recent>,
    /// Defragmentation's moves and the claims for moved pods' replacements.
    pub(super) moves: crate::actor::books::moves::MoveBook,
}

pub(crate) use crate::clock::unix_now;

impl<B: Backend> Inner<B> {
    /// Starts the arbiters and their node actors' address book, with empty books.
    pub(super) fn start(cfg: EngineConfig, vendors: Arc<Vendors>, backend: B, quota: Option<SharedQuota>) -> Inner<B> {
        let recent = Arc::new(Recent::default());
        let parts = ActorParts { vendors: vendors.clone(), quota: quota.clone(), recent: recent.clone() };
        let nodes = NodeBook::start(cfg.arbiters, cfg.filter_deadline, cfg.reservation_ttl, parts);
        Inner { cfg, vendors, backend, nodes, pods: PodBook::default(), quota, recent, moves: Default::default() }
    }

    /// The decision patch for `devices` on `node`, now, against the node's latest devices.
    pub(crate) fn decision_patch(&self, node: &NodeName, req: &PodRequest, devices: &PodDevices) -> PodPatch {
        let snap = self.nodes.snapshot(node.as_str());
        let devs = snap.as_ref().map_or(&[][..], |s| &s.devices);
        decision::decision_patch(&self.vendors, node, devs, req, devices, unix_now())
    }

    pub(crate) fn event(&self, pod: &PodRef, reason: &'static str, kind: EventType, message: String) {
        self.backend.record_event(Event { object: ObjectKind::Pod, pod: pod.clone(), reason, kind, message });
    }

    pub(crate) fn remember(&self, pod: &PodRef, node: Option<String>, outcome: &'static str, detail: String) {
        self.recent.push(RecentDecision {
            pod: pod.to_string(),
            node,
            outcome,
            detail,
            unix_s: unix_now().0,
            ..RecentDecision::default()
        });
    }

    /// One FilteringFailed Event per reason word of the `<n>/<m> <Reason>` items, as HAMi records
    /// them, and the summary.
    pub(crate) fn no_fit_events(&self, pod: &PodRef, failed: &Failures, candidates: usize) {
        for (reason, nodes) in failed.nodes_by_reason() {
            self.event(
                pod,
                reasons::FILTERING_FAILED,
                EventType::Warning,
                format!("{} nodes {reason}({})", nodes.len(), nodes.join(",")),
            );
        }
        self.event(
            pod,
            reasons::FILTERING_FAILED,
            EventType::Warning,
            format!("no available node, {candidates} nodes do not meet"),
        );
    }

    /// A no-fit, with its first nodes' reasons and what it needs per device; the pod is pending.
    pub(crate) fn remember_no_fit(
        &self,
        pod: &PodRef,
        req: &PodRequest,
        failed: &Failures,
        counts: &crate::metrics::RejectionCounts,
    ) {
        let needs: Vec<DeviceNeed> = req
            .containers
            .iter()
            .flatten()
            .filter(|c| c.nums > 0)
            .map(|c| DeviceNeed {
                vendor: self.vendors.get(c.vendor).name().to_owned(),
                vendor_id: c.vendor,
                nums: c.nums,
                mem: c.memreq.0,
                mem_pct: if c.memreq.0 == 0 { c.mempct } else { 0 },
                cores: c.cores,
                params: req.vendor_params.get(c.vendor.0 as usize).cloned().flatten(),
                shape: Some(req.fit_key),
            })
            .collect();
        let now = unix_now().0;
        let detail = match failed.group_reason() {
            Some(why) => format!("pod group not placed whole: {why}"),
            None => format!("{} nodes do not meet: {}", failed.len(), failed.summary()),
        };
        let sweep = self.pods.pending.refused(
            PodUid::new(&pod.uid),
            PendingPod {
                pod: pod.to_string(),
                outcome: Outcome::NoFit.as_str(),
                detail: detail.clone(),
                reasons: counts.labels(),
                needs: needs.clone(),
                since_s: now,
                last_s: now,
                attempts: 1,
            },
        );
        if sweep {
            self.sweep_pending();
        }
        self.recent.push(RecentDecision {
            pod: pod.to_string(),
            node: None,
            outcome: Outcome::NoFit.as_str(),
            detail,
            unix_s: now,
            nodes: failed.first(NO_FIT_NODES),
            needs,
        });
    }

    /// A filter that failed: the pod is pending, with the error as its reason.
    pub(crate) fn remember_error(&self, pod: &PodRef, error: String) {
        let now = unix_now().0;
        let p = PendingPod {
            pod: pod.to_string(),
            outcome: Outcome::Error.as_str(),
            detail: error.clone(),
            reasons: vec![Outcome::Error.as_str()],
            needs: Vec::new(),
            since_s: now,
            last_s: now,
            attempts: 1,
        };
        if self.pods.pending.refused(PodUid::new(&pod.uid), p) {
            self.sweep_pending();
        }
        self.remember(pod, None, Outcome::Error.as_str(), error);
    }

    /// Drops the pending pods the cluster no longer holds.
    pub(crate) fn sweep_pending(&self) {
        self.pods.pending.sweep(|ns, name, uid| self.backend.holds_pod(ns, name, uid.as_str()));
    }
}
