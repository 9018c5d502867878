//! The engine: node actors (one per node, spread over a fixed set of arbiters), the coordinator,
//! and `Engine`, the handle the HTTP layer and the backends use. Filter reads the snapshots node
//! actors publish and asks the coordinator to reserve; Bind takes locks and commits through
//! messages; observations from the cluster go to the owning node actor.
//!
//! ```text
//!  HTTP /filter ──▶ Engine::filter ── fit over snapshots ──▶ Coordinator ──Reserve──▶ NodeActor
//!  HTTP /bind   ──▶ Engine::bind ──Lock──▶ NodeActor; Backend lock + binding; Commit/Unlock
//!  watchers     ──▶ Engine::{register_node, observe_pod, delete_pod} ──▶ NodeActor
//! ```

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actix::{Actor, Addr, Arbiter};
use dashmap::DashMap;

use crate::backend::{self, Backend, Event, EventType, ObjectKind, PodPatch, PodRef, reasons};
use crate::config::FilterMode;
use crate::model::annotations as keys;
use crate::model::pod::NodeView;
use crate::model::request::PolicyDefaults;
use crate::model::{NodeName, PodDevices, PodRequest, PodUid, PodView};
use crate::sched::accounting::{self, Layout};
use crate::sched::{NodeSnapshot, Rejection, Scratch, fit, score};
use crate::vendor::{LockKind, NoQuota, QuotaCheck, Vendors, WriteCx};

pub mod coordinator;
pub mod messages;
pub mod node;
pub mod quota;

use coordinator::{Coordinator, Decide, Decision, FanOut};
use messages::*;
use node::{Book, NodeActor, NodeEntry, SharedQuota};

/// What the engine needs to know from the flags.
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
    pub filter_deadline: Duration,
    pub arbiters: usize,
}

impl EngineConfig {
    pub fn from_flags(f: &crate::config::SchedulerFlags) -> EngineConfig {
        EngineConfig {
            defaults: f.policy_defaults(),
            reservation_ttl: f.reservation_ttl,
            node_lock_timeout: f.node_lock_timeout,
            node_lock_retry_timeout: f.node_lock_retry_timeout,
            bind_lock_wait: f.bind_lock_wait,
            filter_mode: f.filter_mode,
            filter_deadline: f.filter_deadline,
            arbiters: f.arbiters(),
        }
    }
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
            filter_deadline: Duration::from_secs(2),
            arbiters: 2,
        }
    }
}

/// Candidates that did not fit, with what is needed to render their reasons. Rendering builds
/// text, so it happens only when someone asks (a no-fit answer, the simulator, a debug log).
#[derive(Clone, Debug, Default)]
pub struct Failures(pub Vec<(NodeName, Rejection, Option<Arc<NodeSnapshot>>)>);

impl Failures {
    /// HAMi's reason, then the detail, per node.
    pub fn render(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .map(|(n, r, snap)| {
                let text = match snap {
                    Some(s) => r.render(&s.devices, s.unusable.as_deref()),
                    None => r.hami_text(),
                };
                (n.to_string(), text)
            })
            .collect()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl PartialEq for Failures {
    fn eq(&self, other: &Self) -> bool {
        self.render() == other.render()
    }
}

/// The answer to one filter call.
#[derive(Clone, Debug, PartialEq)]
pub enum FilterOutcome {
    /// The pod requests no device: the candidates are passed through unchanged.
    PassThrough,
    /// Reserved on `node`; the nodes that did not fit are kept, unrendered.
    Chosen { node: NodeName, failed: Failures },
    /// No node fits.
    NoFit { failed: BTreeMap<String, String> },
    /// The evaluation itself failed (bad request, patch failure).
    Error(String),
}

/// A recent decision, for the status page.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RecentDecision {
    pub pod: String,
    pub node: Option<String>,
    pub outcome: &'static str,
    pub detail: String,
    pub unix_s: i64,
}

const RECENT_DECISIONS: usize = 50;
/// How many of the best fitting nodes the coordinator may try to reserve on.
const RESERVE_CANDIDATES: usize = 16;
/// How many fitting nodes the FilteringSucceed Event names.
const EVENT_FIT_NODES: usize = 10;

struct Inner<B: Backend> {
    cfg: EngineConfig,
    vendors: Arc<Vendors>,
    backend: B,
    book: Arc<Book>,
    placements: Arc<DashMap<PodUid, NodeName>>,
    /// Nodes the cluster deleted and has not shown again: pods still bound to them are not
    /// counted anywhere until the node comes back (then they are observed again).
    removed: DashMap<NodeName, ()>,
    arbiters: Vec<Arbiter>,
    coordinator: Addr<Coordinator>,
    quota: Option<SharedQuota>,
    recent: Mutex<VecDeque<RecentDecision>>,
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

/// Fitting nodes with their scores, and every other candidate with its rejection.
type Evaluation = (Vec<(NodeName, f32, ())>, Failures);

thread_local! {
    /// Filter evaluation buffers, one set per HTTP worker thread.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

fn unix_now() -> (i64, i128) {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() as i64, d.as_nanos() as i128)
}

/// Label values are at most 63 characters; HAMi's patch fails for longer node names, so such
/// nodes never get pods. hami-rs writes the annotation and skips the label instead.
const MAX_LABEL_VALUE: usize = 63;

impl<B: Backend> Engine<B> {
    /// Starts the arbiters, the coordinator and an empty address book.
    pub fn start(cfg: EngineConfig, vendors: Arc<Vendors>, backend: B, quota: Option<SharedQuota>) -> Engine<B> {
        let book: Arc<Book> = Arc::new(DashMap::new());
        let arbiters: Vec<Arbiter> = (0..cfg.arbiters.max(1)).map(|_| Arbiter::new()).collect();
        let coordinator = {
            let (book, deadline, ttl) = (book.clone(), cfg.filter_deadline, cfg.reservation_ttl);
            Coordinator::start_in_arbiter(&arbiters[0].handle(), move |_| Coordinator::new(book, deadline, ttl))
        };
        Engine {
            inner: Arc::new(Inner {
                cfg,
                vendors,
                backend,
                book,
                placements: Arc::new(DashMap::new()),
                removed: DashMap::new(),
                arbiters,
                coordinator,
                quota,
                recent: Mutex::new(VecDeque::new()),
            }),
        }
    }

    pub fn backend(&self) -> &B {
        &self.inner.backend
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
    fn actor(&self, name: &str) -> Addr<NodeActor> {
        if let Some(e) = self.inner.book.get(name) {
            return e.addr.clone();
        }
        let name = NodeName::new(name);
        let i = &self.inner;
        i.book
            .entry(name.clone())
            .or_insert_with(|| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                name.hash(&mut h);
                let arb = &i.arbiters[(h.finish() as usize) % i.arbiters.len()];
                let (n, v, b, p, q) =
                    (name.clone(), i.vendors.clone(), i.book.clone(), i.placements.clone(), i.quota.clone());
                let addr = NodeActor::start_in_arbiter(&arb.handle(), move |_| NodeActor::new(n, v, b, p, q));
                NodeEntry { addr, snap: NodeActor::initial_snapshot(&name, &i.vendors) }
            })
            .addr
            .clone()
    }

    /// The latest snapshot of a node, if known.
    pub fn snapshot(&self, name: &str) -> Option<Arc<NodeSnapshot>> {
        self.inner.book.get(name).map(|e| e.snap.clone())
    }

    /// Names of every node the engine knows, sorted.
    pub fn node_names(&self) -> Vec<NodeName> {
        let mut v: Vec<NodeName> = self.inner.book.iter().map(|e| e.key().clone()).collect();
        v.sort();
        v
    }

    // --- observations -------------------------------------------------------------------------

    /// A node was added or its labels/annotations changed. A malformed registration marks the
    /// node's devices unusable, logs why and records an Event; other nodes are unaffected.
    pub async fn register_node(&self, node: Arc<NodeView>) -> Registration {
        let name = node.metadata.name.clone();
        self.inner.removed.remove(name.as_str());
        let addr = self.actor(&name);
        let r = match addr.send(NodeRegistered { node }).await {
            Ok(r) => r,
            Err(_) => return Registration::Malformed { reason: "node actor stopped".into() },
        };
        if let Registration::Malformed { reason } = &r {
            tracing::warn!(node = %name, %reason, "node devices unusable");
            self.inner.backend.record_event(Event {
                object: ObjectKind::Node,
                pod: PodRef { namespace: String::new(), name: name.clone(), uid: String::new() },
                reason: reasons::DEVICE_REGISTRATION_INVALID,
                kind: EventType::Warning,
                message: reason.clone(),
            });
        }
        r
    }

    /// Vendors whose devices the health round found dead on `node` (empty: all alive).
    pub fn set_unhealthy(&self, node: &str, unhealthy: Vec<crate::model::VendorId>) {
        self.actor(node).do_send(VendorHealth { unhealthy });
    }

    /// The node is gone, with every allocation it held. Until it is registered again, pods that
    /// name it are not counted (they would bring back a node nobody registered); whoever
    /// registers it again observes the pods still bound to it once more ([`Engine::was_removed`]).
    pub fn remove_node(&self, name: &str) {
        self.inner.removed.insert(NodeName::new(name), ());
        if let Some((_, e)) = self.inner.book.remove(name) {
            e.addr.do_send(NodeRemoved);
        }
    }

    /// Whether the node was removed and not registered since: its pods need observing again once
    /// it is registered.
    pub fn was_removed(&self, name: &str) -> bool {
        self.inner.removed.contains_key(name)
    }

    /// A pod as the cluster shows it. Pods without `hami.io/vgpu-node` are ignored; finished
    /// pods release what they held; terminating pods keep their devices until deleted.
    pub fn observe_pod(&self, pod: &PodView) {
        let uid = PodUid::new(&pod.metadata.uid);
        if pod.is_finished() {
            self.delete_pod(&uid);
            return;
        }
        let Some(node) = pod.annotation(keys::ASSIGNED_NODE) else { return };
        if self.inner.removed.contains_key(node) {
            self.delete_pod(&uid);
            return;
        }
        let devices = match self.inner.vendors.decode_allocation(pod) {
            Ok(d) => d,
            Err(e) => {
                // HAMi ignores such a pod's usage; say so, since it may hold devices.
                tracing::warn!(pod = %format_args!("{}/{}", pod.metadata.namespace, pod.metadata.name), error = %e, "pod device annotations are malformed; its usage is not counted");
                return;
            }
        };
        let devices = self.align(pod, devices);
        let obs = PodObserved {
            uid: uid.clone(),
            namespace: Arc::from(pod.metadata.namespace.as_str()),
            name: Arc::from(pod.metadata.name.as_str()),
            devices,
            held: self.inner.vendors.decode_held(pod),
            layout: Layout {
                n_init: pod.spec.init_containers.len(),
                sidecars: pod.spec.init_containers.iter().map(|c| c.is_sidecar()).collect(),
                init_released: !pod.spec.init_containers.is_empty() && pod.init_containers_succeeded(),
            },
            tags: accounting::tags_of(&self.inner.vendors, &pod.metadata.annotations),
            bound: pod.spec.node_name.as_deref().is_some_and(|n| !n.is_empty()),
            ttl: self.inner.cfg.reservation_ttl,
        };
        // A pod moved to another node (a new decision) is dropped from the old one first.
        if let Some(prev) = self.inner.placements.get(&uid).map(|p| p.clone())
            && prev.as_str() != node
            && let Some(e) = self.inner.book.get(prev.as_str())
        {
            e.addr.do_send(PodDeleted { uid: uid.clone() });
        }
        self.actor(node).do_send(obs);
    }

    /// Places each vendor's decoded entries on the pod's containers (see `accounting::align`).
    fn align(&self, pod: &PodView, mut devices: PodDevices) -> PodDevices {
        for (v, list) in devices.0.iter_mut() {
            let vendor = self.inner.vendors.get(*v);
            let requesting: Vec<bool> = pod
                .all_containers()
                .map(|c| vendor.request(*v, c, pod).ok().flatten().is_some_and(|r| r.nums > 0))
                .collect();
            *list = accounting::align(std::mem::take(list), &requesting);
        }
        devices
    }

    /// The pod is gone (deleted, or finished).
    pub fn delete_pod(&self, uid: &PodUid) {
        if let Some((_, node)) = self.inner.placements.remove(uid)
            && let Some(e) = self.inner.book.get(node.as_str())
        {
            e.addr.do_send(PodDeleted { uid: uid.clone() });
        }
    }

    // --- filter -------------------------------------------------------------------------------

    /// kube-scheduler's filter call in live mode (`nodeCacheCapable`): decide one node for the
    /// pod among `names`, reserve it there and write the decision onto the pod.
    pub async fn filter(&self, pod: &PodView, names: &[Cow<'_, str>]) -> FilterOutcome {
        let started = Instant::now();
        let i = &*self.inner;
        let req = match i.vendors.pod_request(pod, &i.cfg.defaults) {
            Ok(r) => Arc::new(r),
            Err(crate::model::request::Error::Weights(e)) => {
                return FilterOutcome::Error(format!("calcScore failed {e} for pod {}", pod.metadata.name));
            }
            Err(e) => {
                return FilterOutcome::Error(format!("pod {}/{}: {e}", pod.metadata.namespace, pod.metadata.name));
            }
        };
        if !req.requests_devices() {
            return FilterOutcome::PassThrough;
        }
        let pref = PodRef {
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
        };
        // A repeated filter of the same pod drops what it holds from the earlier attempt, reserved
        // or committed (a bind that failed after its commit), so the pod does not compete with
        // itself, as HAMi does. A pod kube-scheduler filters is not bound; should one that is
        // bound arrive all the same, its devices stay counted.
        if let Some(prev) = i.placements.get(&req.uid).map(|p| p.clone())
            && let Some(addr) = i.book.get(prev.as_str()).map(|e| e.addr.clone())
        {
            let bound = pod.spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
            let _ = addr.send(Release { uid: req.uid.clone(), only_reserved: bound }).await;
        }

        let fan_out = Instant::now();
        let (mut fits, mut failed) = match i.cfg.filter_mode {
            FilterMode::Snapshot => self.evaluate_snapshots(&req, names),
            FilterMode::Messages => self.evaluate_messages(&req, names).await,
        };
        crate::metrics::phase(crate::metrics::Phase::FanOut, fan_out);
        score::rank_nodes(&mut fits, req.node_policy);
        let n_candidates = names.len();
        let n_fit = fits.len();
        // The best few go to the coordinator; beyond them a pod whose every choice was taken
        // in the meantime is better filtered again by kube-scheduler than reserved on a poor node.
        let ranked: Vec<NodeName> = fits.iter().take(RESERVE_CANDIDATES).map(|(n, _, _)| n.clone()).collect();

        let reserve = Instant::now();
        let decision = if ranked.is_empty() {
            Decision::Refused(Vec::new())
        } else {
            match i.coordinator.send(Decide { pod: req.clone(), ranked }).await {
                Ok(d) => d,
                Err(e) => return FilterOutcome::Error(format!("coordinator unavailable: {e}")),
            }
        };
        crate::metrics::phase(crate::metrics::Phase::Reserve, reserve);
        let (node, reserved, refused) = match decision {
            Decision::Reserved { node, reserved, refused } => (node, reserved, refused),
            Decision::Refused(refused) => {
                for (n, r) in refused {
                    let snap = self.snapshot(n.as_str());
                    failed.0.push((n, r, snap));
                }
                let failed = failed.render();
                self.no_fit_events(&pref, &failed, n_candidates);
                self.remember(&pref, None, "no-fit", format!("{} nodes do not meet", failed.len()));
                crate::metrics::filter_done(crate::metrics::Outcome::NoFit, started);
                return FilterOutcome::NoFit { failed };
            }
        };
        for (n, r) in refused {
            let snap = self.snapshot(n.as_str());
            failed.0.push((n, r, snap));
        }

        let patch = self.decision_patch(&node, &req, &reserved.devices);
        let write = Instant::now();
        let patched = i.backend.patch_pod(&pref, &patch).await;
        crate::metrics::phase(crate::metrics::Phase::ApiWrite, write);
        if let Err(e) = patched {
            if let Some(a) = i.book.get(node.as_str()).map(|e| e.addr.clone()) {
                let _ = a.send(Release { uid: req.uid.clone(), only_reserved: true }).await;
            }
            let msg = e.to_string();
            self.event(&pref, reasons::FILTERING_FAILED, EventType::Warning, msg.clone());
            crate::metrics::filter_done(crate::metrics::Outcome::Error, started);
            return FilterOutcome::Error(msg);
        }
        // HAMi lists every fitting node with its score; the list is capped so one Event stays small
        // on large clusters.
        let mut fit_list = String::new();
        for (k, (n, s, _)) in fits.iter().take(EVENT_FIT_NODES).enumerate() {
            if k > 0 {
                fit_list.push(',');
            }
            let _ = write!(fit_list, "{n}:{s:.2}");
        }
        if n_fit > EVENT_FIT_NODES {
            let _ = write!(fit_list, ",…{} more", n_fit - EVENT_FIT_NODES);
        }
        self.event(
            &pref,
            reasons::FILTERING_SUCCEED,
            EventType::Normal,
            format!("find fit node({node}), {} nodes not fit, {n_fit} nodes fit({fit_list})", n_candidates - n_fit),
        );
        self.remember(&pref, Some(node.to_string()), "scheduled", format!("{n_fit} of {n_candidates} nodes fit"));
        crate::metrics::filter_done(crate::metrics::Outcome::Scheduled, started);
        FilterOutcome::Chosen { node, failed }
    }

    /// Fits the pod on every candidate's published snapshot, on this thread.
    fn evaluate_snapshots(&self, req: &PodRequest, names: &[Cow<'_, str>]) -> Evaluation {
        let i = &*self.inner;
        let view = i.quota.as_ref().and_then(|q| q.view(&req.namespace));
        let quota: &dyn QuotaCheck = match &view {
            Some(v) => v,
            None => &NoQuota,
        };
        let mut fits = Vec::with_capacity(names.len());
        let mut failed = Failures::default();
        let mut counts = crate::metrics::RejectionCounts::default();
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            for name in names {
                let Some(snap) = i.book.get(name.as_ref()).map(|e| e.snap.clone()) else {
                    counts.add(&Rejection::NodeUnregistered);
                    failed.0.push((NodeName::new(name), Rejection::NodeUnregistered, None));
                    continue;
                };
                match fit::fit_pod_score(&snap, req, &i.vendors, quota, s) {
                    Ok(score) => fits.push((snap.name.clone(), score, ())),
                    Err(r) => {
                        counts.add(&r);
                        failed.0.push((snap.name.clone(), r, Some(snap)));
                    }
                }
            }
        });
        crate::metrics::rejections(&counts);
        (fits, failed)
    }

    /// Sends `Filter` to every candidate node actor through the coordinator.
    async fn evaluate_messages(&self, req: &Arc<PodRequest>, names: &[Cow<'_, str>]) -> Evaluation {
        let i = &*self.inner;
        let ids: Vec<NodeName> = names.iter().map(|n| NodeName::new(n)).collect();
        let answers = i.coordinator.send(FanOut { pod: req.clone(), names: ids }).await.unwrap_or_default();
        let mut fits = Vec::with_capacity(answers.len());
        let mut failed = Failures::default();
        let mut counts = crate::metrics::RejectionCounts::default();
        for (n, r) in answers {
            match r {
                Ok(s) => fits.push((n, s, ())),
                Err(r) => {
                    counts.add(&r);
                    // A name the engine does not know reads as in snapshot mode: HAMi's bare text.
                    let snap = self.snapshot(n.as_str());
                    failed.0.push((n, r, snap));
                }
            }
        }
        crate::metrics::rejections(&counts);
        (fits, failed)
    }

    /// The one merge patch Filter writes (protocol.md §4.1): node, time, every chosen vendor's
    /// keys, the node label, and `null` for keys of vendors not chosen this time.
    fn decision_patch(&self, node: &NodeName, req: &PodRequest, devices: &PodDevices) -> PodPatch {
        let (unix_s, unix_ns) = unix_now();
        let mut annotations: Vec<(String, String)> =
            vec![(keys::ASSIGNED_NODE.into(), node.to_string()), (keys::ASSIGNED_TIME.into(), unix_s.to_string())];
        let snap = self.snapshot(node.as_str());
        let devs = snap.as_ref().map_or(&[][..], |s| &s.devices);
        for (v, cs) in &devices.0 {
            self.inner
                .vendors
                .get(*v)
                .annotations(&WriteCx { node, devs, devices: cs, pod: req, unix_s, unix_ns }, &mut annotations);
        }
        let mut patch =
            PodPatch { annotations: annotations.into_iter().map(|(k, v)| (k, Some(v))).collect(), labels: Vec::new() };
        for (_, v) in self.inner.vendors.iter() {
            for k in v.pod_keys() {
                if req.annotations.contains_key(&k) && !patch.annotations.iter().any(|(w, _)| *w == k) {
                    patch.annotations.push((k, None));
                }
            }
        }
        if node.as_str().len() <= MAX_LABEL_VALUE {
            patch.labels.push((keys::ASSIGNED_NODE.into(), node.to_string()));
        }
        patch
    }

    fn no_fit_events(&self, pod: &PodRef, failed: &BTreeMap<String, String>, candidates: usize) {
        // One Event per reason word of the `<n>/<m> <Reason>` items, as HAMi records them.
        let mut by_reason: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (node, text) in failed {
            let hami = text.split(" (").next().unwrap_or(text);
            for item in hami.split(", ") {
                if let Some((count, word)) = item.split_once(' ')
                    && count.contains('/')
                {
                    by_reason.entry(word.to_owned()).or_default().push(node);
                }
            }
        }
        for (reason, mut nodes) in by_reason {
            nodes.sort();
            nodes.dedup();
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

    fn event(&self, pod: &PodRef, reason: &'static str, kind: EventType, message: String) {
        self.inner.backend.record_event(Event { object: ObjectKind::Pod, pod: pod.clone(), reason, kind, message });
    }

    fn remember(&self, pod: &PodRef, node: Option<String>, outcome: &'static str, detail: String) {
        if let Ok(mut q) = self.inner.recent.lock() {
            if q.len() >= RECENT_DECISIONS {
                q.pop_front();
            }
            q.push_back(RecentDecision { pod: pod.to_string(), node, outcome, detail, unix_s: unix_now().0 });
        }
    }

    /// The last decisions, newest last.
    pub fn recent_decisions(&self) -> Vec<RecentDecision> {
        self.inner.recent.lock().map(|q| q.iter().cloned().collect()).unwrap_or_default()
    }

    // --- bind ---------------------------------------------------------------------------------

    /// kube-scheduler's bind call: lock, write bind-phase and the Binding, commit. On any failure
    /// the locks and the reservation are released, a BindingFailed Event is recorded and the
    /// error is returned. Binding a pod that
    /// is already bound to that node succeeds without doing anything.
    pub async fn bind(&self, pod: &PodRef, node: &str) -> Result<(), String> {
        let started = Instant::now();
        let r = self.bind_inner(pod, node).await;
        crate::metrics::bind_done(
            if r.is_ok() { crate::metrics::Outcome::Scheduled } else { crate::metrics::Outcome::Error },
            started,
        );
        match &r {
            Ok(()) => self.remember(pod, Some(node.to_owned()), "bound", String::new()),
            Err(e) => {
                // Every failure is told on the pod, the early ones too: `kubectl describe` is
                // where users look first when a pod stays pending.
                self.event(pod, reasons::BINDING_FAILED, EventType::Warning, e.clone());
                self.remember(pod, Some(node.to_owned()), "bind-failed", e.clone());
            }
        }
        r
    }

    async fn bind_inner(&self, pod: &PodRef, node: &str) -> Result<(), String> {
        let i = &*self.inner;
        let uid = PodUid::new(&pod.uid);
        let release = |why: &str| {
            let (uid, book) = (uid.clone(), i.book.clone());
            let node = node.to_owned();
            tracing::debug!(pod = %pod, %node, why, "releasing reservation after a failed bind");
            async move {
                if let Some(a) = book.get(node.as_str()).map(|e| e.addr.clone()) {
                    let _ = a.send(Release { uid, only_reserved: true }).await;
                }
            }
        };
        let Some(view) = i.backend.pod(&pod.namespace, &pod.name) else {
            self.delete_pod(&uid);
            return Err(backend::Error::PodNotFound(pod.to_string()).to_string());
        };
        let Some(addr) = i.book.get(node).map(|e| e.addr.clone()).filter(|_| i.backend.node(node).is_some()) else {
            let msg = backend::Error::NodeNotFound(node.to_owned()).to_string();
            self.delete_pod(&uid);
            return Err(msg);
        };
        if view.spec.node_name.as_deref() == Some(node) {
            let _ = addr.send(Commit { uid: uid.clone() }).await;
            return Ok(());
        }
        let req = match i.vendors.pod_request(&view, &i.cfg.defaults) {
            Ok(r) => Arc::new(r),
            Err(e) => return Err(e.to_string()),
        };
        // Make sure the reservation is still there; one that expired is taken again with the
        // exact devices written on the pod, if they are still free.
        if i.placements.get(&uid).is_none_or(|n| n.as_str() != node) {
            if view.annotation(keys::ASSIGNED_NODE) != Some(node) {
                let msg = format!("pod {pod} was not filtered onto node {node}");
                return Err(msg);
            }
            let devices = match i.vendors.decode_allocation(&view) {
                Ok(d) => self.align(&view, d),
                Err(e) => return Err(format!("pod {pod}: device annotations are malformed: {e}")),
            };
            let exact = Reserve { pod: req.clone(), exact: Some(devices), ttl: i.cfg.reservation_ttl };
            match addr.send(exact).await {
                Ok(Ok(_)) => {}
                Ok(Err(r)) => {
                    let snap = self.snapshot(node);
                    let msg = format!(
                        "reservation of pod {pod} on node {node} expired and its devices are no longer free: {}",
                        r.render(snap.as_ref().map_or(&[][..], |s| &s.devices), None)
                    );
                    return Err(msg);
                }
                Err(e) => return Err(format!("node {node}: {e}")),
            }
        }

        // HAMi retries contention only for PodGroup members; hami-rs lets every pod wait a bounded
        // time, since the holder is usually a bind whose device plugin answers within moments.
        let pod_group = view.is_pod_group_member();
        let (wait, every) = if pod_group {
            (i.cfg.node_lock_retry_timeout, Duration::from_millis(100))
        } else {
            (i.cfg.bind_lock_wait, Duration::from_millis(50))
        };
        let deadline = Instant::now() + wait;
        let kinds = self.lock_kinds(&req);
        let lock_started = Instant::now();
        // Each attempt takes this process's own lock on the node (so its binds to one node do not
        // race each other) and then HAMi's node locks once. Between attempts both are let go, so
        // the pod a leftover lock names can get in and finish.
        let taken = loop {
            let attempt = match addr.send(Lock { uid: uid.clone() }).await {
                Ok(true) => match self.take_locks(pod, node, &kinds).await {
                    Ok(taken) => Ok(taken),
                    Err(e) => {
                        addr.do_send(Unlock { uid: uid.clone() });
                        Err(e)
                    }
                },
                Ok(false) => Err(backend::Error::LockContention {
                    node: node.to_owned(),
                    within: crate::config::format_go_duration(i.cfg.node_lock_timeout),
                }),
                Err(e) => Err(backend::Error::Api(format!("node {node}: {e}"))),
            };
            match attempt {
                Ok(taken) => {
                    crate::metrics::phase(crate::metrics::Phase::LockWait, lock_started);
                    break taken;
                }
                Err(e) if e.is_contention() && Instant::now() < deadline => {
                    crate::metrics::lock_wait();
                    tokio::time::sleep(every).await;
                }
                Err(e) => {
                    crate::metrics::phase(crate::metrics::Phase::LockWait, lock_started);
                    if e.is_contention() {
                        crate::metrics::lock_timeout();
                    }
                    let e = if pod_group && e.is_contention() && !wait.is_zero() {
                        backend::Error::Api(format!(
                            "timed out after {} waiting for node {node} to be unlocked: node lock contention",
                            crate::config::format_go_duration(wait)
                        ))
                    } else {
                        e
                    };
                    release("node lock not taken").await;
                    let msg = e.to_string();
                    return Err(msg);
                }
            }
        };
        let (bind_time, _) = unix_now();
        let write = Instant::now();
        let bound = i.backend.bind(pod, node, bind_time).await;
        crate::metrics::phase(crate::metrics::Phase::ApiWrite, write);
        match bound {
            Ok(()) => {
                let _ = addr.send(Commit { uid: uid.clone() }).await;
                addr.do_send(Unlock { uid });
                self.event(
                    pod,
                    reasons::BINDING_SUCCEED,
                    EventType::Normal,
                    format!("Successfully binding node [{node}] to {pod}"),
                );
                Ok(())
            }
            Err(e) => {
                for t in taken.iter().rev() {
                    let _ = i.backend.unlock_node(node, pod, *t).await;
                }
                addr.do_send(Unlock { uid: uid.clone() });
                release("bind failed").await;
                let msg = e.to_string();
                Err(msg)
            }
        }
    }

    /// HAMi's node locks the pod needs, sorted: every vendor it requests in any container (HAMi
    /// locks for regular containers only; scheduling.md §14 row 8).
    fn lock_kinds(&self, req: &PodRequest) -> Vec<LockKind> {
        let mut kinds: Vec<LockKind> =
            req.vendors().iter().map(|v| self.inner.vendors.get(*v).lock()).filter(|k| *k != LockKind::None).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// Takes each of HAMi's node locks once, in order; on the first failure the ones already
    /// taken are released again, in reverse.
    async fn take_locks(&self, pod: &PodRef, node: &str, kinds: &[LockKind]) -> backend::Result<Vec<LockKind>> {
        let b = &self.inner.backend;
        let mut taken: Vec<LockKind> = Vec::with_capacity(kinds.len());
        for k in kinds {
            if let Err(e) = b.lock_node(node, pod, *k).await {
                for t in taken.iter().rev() {
                    let _ = b.unlock_node(node, pod, *t).await;
                }
                return Err(e);
            }
            taken.push(*k);
        }
        Ok(taken)
    }

    // --- reporting ----------------------------------------------------------------------------

    /// Every node's allocations (for `/usage`, the simulator and the status page).
    pub async fn reports(&self) -> Vec<NodeReport> {
        let addrs: Vec<Addr<NodeActor>> = self.inner.book.iter().map(|e| e.addr.clone()).collect();
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
