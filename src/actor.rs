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
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix::{Actor, Addr, Arbiter};
use dashmap::DashMap;

use crate::model::request::PolicyDefaults;
use crate::model::{NodeName, PodDevices, PodRequest, PodUid};
use crate::port::{Backend, Event, EventType, ObjectKind, PodPatch, PodRef};
use crate::sched::{NodeSnapshot, Scratch};
use crate::vendor::Vendors;

mod bind;
mod candidates;
pub mod coordinator;
mod decision;
pub mod error;
mod evaluate;
mod failures;
mod filter;
pub mod messages;
pub mod node;
mod observe;
pub mod preempt;
mod preemption;
pub mod prioritize;
mod read_side;
mod recent;
pub mod refit;
mod simulate;
/// The namespace quota book, which lives with the pure scheduling code.
pub use crate::sched::quota_book as quota;

pub use candidates::Candidates;
use coordinator::Coordinator;
pub use error::{BindError, FilterError};
pub use failures::Failures;
use messages::*;
use node::{Book, NodeActor, NodeAddr, NodeConfig, NodeEntry, SharedQuota, SnapCell};
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

struct Inner<B: Backend> {
    cfg: EngineConfig,
    vendors: Arc<Vendors>,
    backend: B,
    book: Arc<Book>,
    placements: Arc<read_side::Placements>,
    /// Pods whose Binding failed without an answer while the pod could not be read back: it may
    /// have taken effect, so the devices stay committed on that node until the pod is seen bound,
    /// deleted, or read unbound by its next filter.
    unsettled: DashMap<PodUid, NodeName>,
    /// Nodes the cluster deleted and has not shown again: pods still bound to them are not
    /// counted anywhere until the node comes back (then they are observed again).
    removed: DashMap<NodeName, ()>,
    /// Bumped after a node joins or leaves the address book: resolutions made before are stale.
    book_generation: AtomicU64,
    /// Every node's snapshot generation, densely (Filter's answer tables read it).
    board: Arc<read_side::Board>,
    /// Candidate lists Filter resolved lately (kube-scheduler sends the same list pod after pod).
    resolved: RwLock<VecDeque<Arc<candidates::Resolution>>>,
    arbiters: Vec<Arbiter>,
    /// The coordinator on the first arbiter, for callers on threads that run no arbiter.
    coordinator: Addr<Coordinator>,
    /// This engine's number among the process's (`ENGINES`).
    id: u64,
    quota: Option<SharedQuota>,
    recent: Arc<Recent>,
    /// What filters ranked, for the prioritize call and the bind that follow
    /// (`--filter-result=all`).
    scores: prioritize::ScoreBook,
    /// Preemptors whose devices a node holds (`--preemption=on`).
    holds: DashMap<PodUid, preemption::HeldFor>,
    hold_ids: AtomicU64,
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
    /// Coordinators started on this thread's arbiter, by engine (see `Engine::coordinator`).
    static COORDINATORS: RefCell<VecDeque<(u64, Addr<Coordinator>)>> = const { RefCell::new(VecDeque::new()) };
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

/// Engines started in this process, numbered so a thread's coordinators can tell them apart.
static ENGINES: AtomicU64 = AtomicU64::new(0);

/// Coordinators one thread keeps, for the engines it filtered for last (a process runs one
/// engine; tests run many).
const LOCAL_COORDINATORS_KEPT: usize = 4;

pub(crate) fn unix_now() -> (i64, i128) {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() as i64, d.as_nanos() as i128)
}

impl<B: Backend> Engine<B> {
    /// Starts the arbiters, the coordinator and an empty address book.
    pub fn start(cfg: EngineConfig, vendors: Arc<Vendors>, backend: B, quota: Option<SharedQuota>) -> Engine<B> {
        let book: Arc<Book> = Arc::new(DashMap::new());
        let arbiters: Vec<Arbiter> = (0..cfg.arbiters.max(1)).map(|_| Arbiter::new()).collect();
        let coordinator = {
            let (book, deadline, ttl) = (book.clone(), cfg.filter_deadline, cfg.reservation_ttl);
            let book = Arc::downgrade(&book);
            Coordinator::start_in_arbiter(&arbiters[0].handle(), move |_| Coordinator::new(book, deadline, ttl))
        };
        Engine {
            inner: Arc::new(Inner {
                id: ENGINES.fetch_add(1, Ordering::Relaxed),
                cfg,
                vendors,
                backend,
                book,
                placements: Arc::new(DashMap::new()),
                unsettled: DashMap::new(),
                removed: DashMap::new(),
                book_generation: AtomicU64::new(0),
                board: Arc::new(read_side::Board::default()),
                resolved: RwLock::new(VecDeque::new()),
                arbiters,
                coordinator,
                quota,
                recent: Arc::new(Recent::default()),
                scores: prioritize::ScoreBook::default(),
                holds: DashMap::new(),
                hold_ids: AtomicU64::new(1),
            }),
        }
    }

    /// The decision patch for `devices` on `node`, now, against the node's latest devices.
    fn decision_patch(&self, node: &NodeName, req: &PodRequest, devices: &PodDevices) -> PodPatch {
        let snap = self.snapshot(node.as_str());
        let devs = snap.as_ref().map_or(&[][..], |s| &s.devices);
        decision::decision_patch(&self.inner.vendors, node, devs, req, devices, unix_now())
    }

    pub fn backend(&self) -> &B {
        &self.inner.backend
    }

    /// The coordinator a filter on this thread asks: one started on this thread's own arbiter,
    /// so handing it the decision wakes no other core (only its Reserve goes to the node actor's
    /// arbiter); the engine's shared one where this thread runs no arbiter.
    fn coordinator(&self) -> Addr<Coordinator> {
        let i = &*self.inner;
        if Arbiter::try_current().is_none() {
            return i.coordinator.clone();
        }
        COORDINATORS.with(|c| {
            let mut c = c.borrow_mut();
            if let Some((_, a)) = c.iter().find(|(id, a)| *id == i.id && a.connected()) {
                return a.clone();
            }
            c.retain(|(id, a)| *id != i.id && a.connected());
            if c.len() >= LOCAL_COORDINATORS_KEPT {
                c.pop_front();
            }
            let (deadline, ttl) = (i.cfg.filter_deadline, i.cfg.reservation_ttl);
            let a = Coordinator::new(Arc::downgrade(&i.book), deadline, ttl).start();
            c.push_back((i.id, a.clone()));
            a
        })
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

    /// The node's actor, started on its arbiter (picked by hashing the name) when first seen.
    fn actor(&self, name: &str) -> NodeAddr {
        if let Some(e) = self.inner.book.get(name) {
            return e.addr.clone();
        }
        let name = NodeName::new(name);
        let i = &self.inner;
        let mut created = false;
        let addr = i
            .book
            .entry(name.clone())
            .or_insert_with(|| {
                created = true;
                let mut h = std::collections::hash_map::DefaultHasher::new();
                name.hash(&mut h);
                let arb = &i.arbiters[(h.finish() as usize) % i.arbiters.len()];
                let snap = SnapCell::on_board(NodeActor::initial_snapshot(&name, &i.vendors), &i.board);
                let binds = Arc::new(node::BindState::default());
                let cfg = NodeConfig {
                    name: name.clone(),
                    vendors: i.vendors.clone(),
                    snap: snap.clone(),
                    placements: i.placements.clone(),
                    quota: i.quota.clone(),
                    binds: binds.clone(),
                    recent: i.recent.clone(),
                };
                NodeEntry { addr: NodeAddr::start(cfg, &arb.handle()), snap, binds }
            })
            .addr
            .clone();
        if created {
            // After the node is in the book: a resolution that missed it is then seen as stale.
            i.book_generation.fetch_add(1, Ordering::SeqCst);
        }
        addr
    }

    /// The latest snapshot of a node, if known.
    pub fn snapshot(&self, name: &str) -> Option<Arc<NodeSnapshot>> {
        self.inner.book.get(name).map(|e| e.snap.load())
    }

    /// Names of every node the engine knows, sorted.
    pub fn node_names(&self) -> Vec<NodeName> {
        let mut v: Vec<NodeName> = self.inner.book.iter().map(|e| e.key().clone()).collect();
        v.sort();
        v
    }

    fn event(&self, pod: &PodRef, reason: &'static str, kind: EventType, message: String) {
        self.inner.backend.record_event(Event { object: ObjectKind::Pod, pod: pod.clone(), reason, kind, message });
    }

    fn remember(&self, pod: &PodRef, node: Option<String>, outcome: &'static str, detail: String) {
        self.inner.recent.push(RecentDecision {
            pod: pod.to_string(),
            node,
            outcome,
            detail,
            unix_s: unix_now().0,
            ..RecentDecision::default()
        });
    }

    /// A no-fit, with its first nodes' reasons and what it needs per device.
    fn remember_no_fit(&self, pod: &PodRef, req: &PodRequest, failed: &Failures) {
        let vendors = &self.inner.vendors;
        let needs = req
            .containers
            .iter()
            .flatten()
            .filter(|c| c.nums > 0)
            .map(|c| DeviceNeed {
                vendor: vendors.get(c.vendor).name().to_owned(),
                mem: c.memreq.0,
                mem_pct: if c.memreq.0 == 0 { c.mempct } else { 0 },
                cores: c.cores,
            })
            .collect();
        self.inner.recent.push(RecentDecision {
            pod: pod.to_string(),
            node: None,
            outcome: "no-fit",
            detail: format!("{} nodes do not meet: {}", failed.len(), failed.summary()),
            unix_s: unix_now().0,
            nodes: failed.first(NO_FIT_NODES),
            needs,
        });
    }

    /// The last decisions, newest last.
    pub fn recent_decisions(&self) -> Vec<RecentDecision> {
        self.inner.recent.list()
    }

    // --- reporting ----------------------------------------------------------------------------

    /// Waits until every node actor has applied what was sent to it before (observations
    /// included).
    pub async fn settle(&self) {
        let addrs: Vec<NodeAddr> = self.inner.book.iter().map(|e| e.addr.clone()).collect();
        futures::future::join_all(addrs.iter().map(|a| a.send(Settle))).await;
    }

    /// Every node's allocations (for `/usage`, the simulator and the status page).
    pub async fn reports(&self) -> Vec<NodeReport> {
        let addrs: Vec<NodeAddr> = self.inner.book.iter().map(|e| e.addr.clone()).collect();
        Self::reports_from(addrs).await
    }

    /// The reports of the named nodes the engine knows, sorted by name.
    pub async fn reports_of(&self, names: &[NodeName]) -> Vec<NodeReport> {
        let book = &self.inner.book;
        Self::reports_from(names.iter().filter_map(|n| book.get(n.as_str()).map(|e| e.addr.clone())).collect()).await
    }

    async fn reports_from(addrs: Vec<NodeAddr>) -> Vec<NodeReport> {
        let mut out: Vec<NodeReport> = futures::future::join_all(addrs.iter().map(|a| a.send(Report)))
            .await
            .into_iter()
            .filter_map(Result::ok)
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

impl<B: Backend> Drop for Inner<B> {
    fn drop(&mut self) {
        for a in &self.arbiters {
            a.stop();
        }
    }
}

#[cfg(test)]
mod tests;
