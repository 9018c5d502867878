//! The engine: node actors (one per node, spread over a fixed set of arbiters), coordinators (one
//! per filtering thread), and `Engine`, the handle the HTTP layer and the backends use. Filter
//! reads the snapshots node actors publish and asks its thread's coordinator to reserve; Bind
//! takes locks and commits through messages; observations from the cluster go to the owning node
//! actor.
//!
//! ```text
//!  HTTP /filter ──▶ Engine::filter ── fit over snapshots ──▶ Coordinator ──Reserve──▶ NodeActor
//!  HTTP /bind   ──▶ Engine::bind ──Lock──▶ NodeActor; Backend lock + binding; Commit/Unlock
//!  HTTP /refit   ──▶ Engine::refit ──Refit──▶ NodeActor; Backend patch; RefitSettle
//!  watchers     ──▶ Engine::{register_node, observe_pod, delete_pod} ──▶ NodeActor
//! ```

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use crate::devices::Vendors;
use crate::metrics::Outcome;
use crate::model::request::PolicyDefaults;
use crate::model::{NodeName, PodDevices, PodRequest, PodUid};
use crate::port::{Backend, Event, EventType, ObjectKind, PodPatch, PodRef, reasons};
use crate::sched::{NodeSnapshot, Scratch};

mod bind;
mod candidates;
pub mod coordinator;
mod cycle;
mod decision;
pub mod error;
mod evaluate;
mod failures;
mod filter;
mod locks;
pub mod messages;
pub mod node;
mod nodes;
mod observe;
mod pending;
mod pods;
pub mod preemption;
pub mod prioritize;
mod read_side;
mod recent;
pub mod refit;
mod simulate;
/// The namespace quota book, which lives with the pure scheduling code.
pub use crate::sched::quota_book as quota;

pub use candidates::Candidates;
pub use error::{BindError, FilterError};
pub use failures::{Failures, NODE_LOCKED, NODE_UNREGISTERED, NODE_USAGE_UNAVAILABLE};
pub use filter::Told;
use messages::*;
use node::SharedQuota;
use nodes::NodeBook;
pub use pending::{PendingCounts, PendingPod};
use pods::PodBook;
use recent::NO_FIT_NODES;
pub use recent::{DeviceNeed, Recent, RecentDecision};
pub use simulate::Simulation;

/// How Filter evaluates candidate nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterMode {
    /// Fit over the immutable usage snapshots node actors publish (fast; the default).
    Snapshot,
    /// Send a Filter message to every candidate node actor and wait for the answers.
    Messages,
}

/// When the scheduling decision is written onto the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionWrite {
    /// In Filter, as HAMi does: works whether or not kube-scheduler calls hami-rs's bind.
    Filter,
    /// In Bind, in the same patch as `bind-phase: allocating`, before the Binding: the filter
    /// makes no API write. Needs kube-scheduler's `bindVerb` (the chart sets both).
    Bind,
}

/// What `/filter` answers when the pod fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterResult {
    /// The one node hami-rs chose, as HAMi answers: kube-scheduler's own scoring never applies.
    One,
    /// Every node that fits, with `/prioritize` scoring them: kube-scheduler weighs hami-rs's
    /// node policy with its own plugins, and the devices are chosen at bind on the node it picks.
    All,
}

/// What the engine needs to know from the flags (`app::engine_config` reads them).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub defaults: PolicyDefaults,
    pub reservation_ttl: Duration,
    pub node_lock_timeout: Duration,
    pub node_lock_retry_timeout: Duration,
    /// How long any pod's bind waits for a node lock held by another pod (PodGroup members wait
    /// `node_lock_retry_timeout`, as in HAMi).
    pub bind_lock_wait: Duration,
    pub filter_mode: FilterMode,
    pub decision_write: DecisionWrite,
    pub filter_result: FilterResult,
    pub filter_deadline: Duration,
    pub arbiters: usize,
    /// From this many candidates on, a filter is fitted in one slice per arbiter at the same
    /// time. Below it one thread is faster: waking another arbiter costs more than fitting a
    /// thousand nodes saves (measured on two cores: 1 000 nodes 25 % slower sliced, 5 000 nodes
    /// 20 % faster; docs/performance.md).
    pub slice_min: usize,
    /// With GPU-aware preemption on: how long the devices it frees are held for the preemptor.
    pub preemption_hold: Option<Duration>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            defaults: PolicyDefaults { gpu: "spread".into(), node: "binpack".into() },
            reservation_ttl: Duration::from_secs(30),
            node_lock_timeout: Duration::from_secs(300),
            node_lock_retry_timeout: Duration::from_secs(28),
            bind_lock_wait: Duration::from_secs(10),
            filter_mode: FilterMode::Snapshot,
            decision_write: DecisionWrite::Filter,
            filter_result: FilterResult::One,
            filter_deadline: Duration::from_secs(2),
            arbiters: 2,
            slice_min: SLICE_MIN,
            preemption_hold: None,
        }
    }
}

/// The default `EngineConfig::slice_min`.
pub const SLICE_MIN: usize = 2048;

/// The answer to one filter call.
#[derive(Debug, PartialEq)]
pub enum FilterOutcome {
    /// The pod requests no device: the candidates are passed through unchanged.
    PassThrough,
    /// Reserved on `node`; the nodes that did not fit are kept, unrendered. With
    /// `FilterResult::All`, `others` holds the other nodes that fit, best first.
    Chosen { node: NodeName, others: Vec<NodeName>, failed: Failures },
    /// No node fits; the reasons, unrendered.
    NoFit { failed: Failures },
    /// The evaluation itself failed (bad request, patch failure).
    Error(FilterError),
}

/// How many of the best fitting nodes the coordinator may try to reserve on.
const RESERVE_CANDIDATES: usize = 16;

/// The engine's state: its configuration and vendors, the cluster it writes to, and the books it
/// keeps (nodes, pods, namespace quota, recent decisions).
struct Inner<B: Backend> {
    cfg: EngineConfig,
    vendors: Arc<Vendors>,
    backend: B,
    nodes: NodeBook,
    pods: PodBook,
    quota: Option<SharedQuota>,
    recent: Arc<Recent>,
}

/// The engine handle. Cheap to clone; create it inside a running actix System.
pub struct Engine<B: Backend> {
    inner: Arc<Inner<B>>,
}

impl<B: Backend> Clone for Engine<B> {
    fn clone(&self) -> Self {
        Engine { inner: self.inner.clone() }
    }
}

thread_local! {
    /// Filter evaluation buffers, one set per HTTP worker thread.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's fit buffers: one set per thread that fits (HTTP workers,
/// arbiters), not one per node, whichever node's fit runs on it. The buffers are taken out while
/// `f` runs, so a fit further up the stack cannot clash with it (it gets a fresh set).
pub(crate) fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    let take = |c: &RefCell<Scratch>| c.try_borrow_mut().map(|mut s| std::mem::take(&mut *s)).ok();
    let mut s = SCRATCH.try_with(take).ok().flatten().unwrap_or_default();
    let r = f(&mut s);
    let _ = SCRATCH.try_with(|c| {
        if let Ok(mut slot) = c.try_borrow_mut() {
            *slot = s;
        }
    });
    r
}

pub(crate) use crate::clock::unix_now;

impl<B: Backend> Engine<B> {
    /// Starts the arbiters, the coordinator and an empty address book.
    pub fn start(cfg: EngineConfig, vendors: Arc<Vendors>, backend: B, quota: Option<SharedQuota>) -> Engine<B> {
        let recent = Arc::new(Recent::default());
        let parts = nodes::ActorParts { vendors: vendors.clone(), quota: quota.clone(), recent: recent.clone() };
        let nodes = NodeBook::start(cfg.arbiters, cfg.filter_deadline, cfg.reservation_ttl, parts);
        Engine { inner: Arc::new(Inner { cfg, vendors, backend, nodes, pods: PodBook::default(), quota, recent }) }
    }

    pub fn backend(&self) -> &B {
        &self.inner.backend
    }

    /// Whether `/filter` answers every fitting node (`FilterResult::All`).
    pub fn answers_all(&self) -> bool {
        self.inner.cfg.filter_result == FilterResult::All
    }

    pub fn vendors(&self) -> &Arc<Vendors> {
        &self.inner.vendors
    }
    pub fn config(&self) -> &EngineConfig {
        &self.inner.cfg
    }
    /// The namespace quota book, when quota is enforced.
    pub fn quota(&self) -> Option<&SharedQuota> {
        self.inner.quota.as_ref()
    }

    /// The latest snapshot of a node, if known.
    pub fn snapshot(&self, name: &str) -> Option<Arc<NodeSnapshot>> {
        self.inner.nodes.snapshot(name)
    }

    /// Names of every node the engine knows, sorted.
    pub fn node_names(&self) -> Vec<NodeName> {
        self.inner.nodes.names()
    }

    /// The list resolved lately from the JSON array `raw`, whose names then need not be read;
    /// `None` when no list came in that text lately.
    #[cfg(test)]
    pub(crate) fn known_candidates<'a>(&self, raw: &str) -> Option<Candidates<'a>> {
        self.inner.nodes.known(raw)
    }

    /// The candidates in kube-scheduler's `NodeNames` array `raw`, read and resolved in one pass
    /// (or recognised, when the same text came lately); `None` when the text is not a plain
    /// array of strings, which the caller then reads with the JSON parser.
    pub fn read_candidates<'a>(&self, raw: &str) -> Option<Candidates<'a>> {
        self.inner.nodes.read_json(raw)
    }

    /// The last decisions, newest last.
    pub fn recent_decisions(&self) -> Vec<RecentDecision> {
        self.inner.recent.list()
    }

    /// Every pod the last filter left pending, longest pending first.
    pub fn pending_pods(&self) -> Vec<PendingPod> {
        self.inner.pods.pending.list()
    }

    /// The pending pods by outcome and reason (the pending-pods gauges).
    pub fn pending_counts(&self) -> PendingCounts {
        self.inner.pods.pending.counts()
    }

    // --- reporting ----------------------------------------------------------------------------

    /// Waits until every node actor has applied what was sent to it before (observations
    /// included).
    pub async fn settle(&self) {
        self.inner.nodes.settle().await;
    }

    /// Every node's allocations (for `/usage`, the simulator and the status page).
    pub async fn reports(&self) -> Vec<NodeReport> {
        self.inner.nodes.reports(None).await
    }

    /// The reports of the named nodes the engine knows, sorted by name.
    pub async fn reports_of(&self, names: &[NodeName]) -> Vec<NodeReport> {
        self.inner.nodes.reports(Some(names)).await
    }
}

impl<B: Backend> Inner<B> {
    /// The decision patch for `devices` on `node`, now, against the node's latest devices.
    fn decision_patch(&self, node: &NodeName, req: &PodRequest, devices: &PodDevices) -> PodPatch {
        let snap = self.nodes.snapshot(node.as_str());
        let devs = snap.as_ref().map_or(&[][..], |s| &s.devices);
        decision::decision_patch(&self.vendors, node, devs, req, devices, unix_now())
    }

    fn event(&self, pod: &PodRef, reason: &'static str, kind: EventType, message: String) {
        self.backend.record_event(Event { object: ObjectKind::Pod, pod: pod.clone(), reason, kind, message });
    }

    fn remember(&self, pod: &PodRef, node: Option<String>, outcome: &'static str, detail: String) {
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
    pub(super) fn no_fit_events(&self, pod: &PodRef, failed: &Failures, candidates: usize) {
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
    fn remember_no_fit(
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
        let detail = format!("{} nodes do not meet: {}", failed.len(), failed.summary());
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
    fn remember_error(&self, pod: &PodRef, error: String) {
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
    fn sweep_pending(&self) {
        self.pods.pending.sweep(|ns, name, uid| self.backend.holds_pod(ns, name, uid.as_str()));
    }
}

#[cfg(test)]
mod tests;
