//! The engine's port to a cluster: the `Backend` trait through which every read of the
//! cluster's pods and every write the scheduler makes (pod annotation patches, node locks,
//! bindings, Events) goes, the `Observer` trait through which a backend's watchers report what
//! changes, and the types both sides share. The engine and the backends depend on this module,
//! never on each other: the in-memory backend (backend/memory.rs) serves the simulator and unit
//! tests, the Kubernetes backend (backend/kube.rs) real clusters.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::model::PodView;
use crate::model::pod::NodeView;
use crate::vendor::LockKind;

/// A pod's identity as the extender names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One merge patch of a pod's metadata: annotations to set (`Some`) or remove (`None`), labels to set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodPatch {
    pub annotations: Vec<(String, Option<String>)>,
    pub labels: Vec<(String, String)>,
    /// Write only while the pod is unbound: the resource version of the copy that showed it so
    /// (empty when that copy has none). A decision must never land on a pod that already runs
    /// elsewhere (a Binding whose answer was lost, then a retry choosing another node): such a
    /// write fails with [`Error::AlreadyBound`] and changes nothing.
    pub while_unbound: Option<String>,
    /// Write only onto this exact resource version of the pod (the copy the caller decided
    /// from; empty: no precondition). A conflict fails the write, with no retry: the NUMA refit
    /// rewrites entries by position, which must not land on a pod that changed since.
    pub at_version: Option<String>,
}

impl PodPatch {
    /// What every bind writes before the Binding: `bind-phase: allocating` and the bind time.
    pub fn bind_phase(bind_time: i64) -> PodPatch {
        use crate::model::annotations as keys;
        PodPatch {
            annotations: vec![
                (keys::BIND_PHASE.into(), Some(keys::BIND_PHASE_ALLOCATING.into())),
                (keys::BIND_TIME.into(), Some(bind_time.to_string())),
            ],
            labels: Vec::new(),
            while_unbound: None,
            at_version: None,
        }
    }

    /// The `{"metadata":{"annotations":{…},"labels":{…}}}` merge-patch body; with
    /// `resource_version`, the API server applies it only to that version of the pod.
    pub fn to_merge_patch(&self, resource_version: Option<&str>) -> serde_json::Value {
        let annos: serde_json::Map<String, serde_json::Value> = self
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().map_or(serde_json::Value::Null, serde_json::Value::String)))
            .collect();
        let mut meta = serde_json::Map::new();
        meta.insert("annotations".into(), serde_json::Value::Object(annos));
        if !self.labels.is_empty() {
            let labels: serde_json::Map<String, serde_json::Value> =
                self.labels.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
            meta.insert("labels".into(), serde_json::Value::Object(labels));
        }
        if let Some(rv) = resource_version.filter(|rv| !rv.is_empty()) {
            meta.insert("resourceVersion".into(), serde_json::Value::String(rv.to_owned()));
        }
        serde_json::json!({ "metadata": meta })
    }
}

/// Event type, as core/v1 Events spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum EventType {
    Normal,
    Warning,
}

/// What an Event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ObjectKind {
    Pod,
    Node,
}

/// An Event on a pod, as HAMi records them, or, for registration problems, on a node.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Event {
    pub object: ObjectKind,
    /// The pod (or, for node Events, the node's name with an empty namespace).
    pub pod: PodRef,
    pub reason: &'static str,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub message: String,
}

/// Whether this replica may schedule: leader (or no election) and caches synced. The backend's
/// election and watchers set it; the HTTP layer reads it.
#[derive(Clone)]
pub struct Readiness {
    pub leader: Arc<AtomicBool>,
    pub synced: Arc<AtomicBool>,
}

impl Readiness {
    /// Always leader, already synced (in-memory backend, no election).
    pub fn ready() -> Readiness {
        Readiness { leader: Arc::new(AtomicBool::new(true)), synced: Arc::new(AtomicBool::new(true)) }
    }
    pub fn is_ready(&self) -> bool {
        self.leader.load(Ordering::SeqCst) && self.synced.load(Ordering::SeqCst)
    }
}

pub mod reasons {
    pub const FILTERING_SUCCEED: &str = "FilteringSucceed";
    pub const FILTERING_FAILED: &str = "FilteringFailed";
    pub const BINDING_SUCCEED: &str = "BindingSucceed";
    pub const BINDING_FAILED: &str = "BindingFailed";
    /// hami-rs's own: a node's registration annotation cannot be decoded.
    pub const DEVICE_REGISTRATION_INVALID: &str = "DeviceRegistrationInvalid";
    pub const NUMA_REFIT_SUCCEED: &str = "NumaRefitSucceed";
    pub const NUMA_REFIT_FAILED: &str = "NumaRefitFailed";
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("pod {0} not found")]
    PodNotFound(String),
    #[error("failed to get node {0}")]
    NodeNotFound(String),
    /// Lock held by another pod (HAMi's wording, so tools matching it keep working).
    #[error("node {node} has been locked within {within}: node lock contention")]
    LockContention { node: String, within: String },
    #[error("node {node}: lock annotation is malformed: {why}")]
    LockMalformed { node: String, why: String },
    /// The API server answered with an error status.
    #[error("{message} ({reason})")]
    Status { code: u16, message: String, reason: String },
    /// The request did not get an answer (connection, timeout, decoding): the error and its
    /// causes.
    #[error("{0}")]
    Transport(String),
    /// Releasing HAMi's node lock kept conflicting with other writers.
    #[error("node {node}: could not release the node lock")]
    UnlockFailed { node: String },
    /// Cambricon's own node lock is fresh.
    #[error("node {node} has been locked within 2 minutes")]
    CambriconLocked { node: String },
    /// A write meant for an unbound pod found it bound (see [`PodPatch::while_unbound`]); the
    /// backend's cache holds the pod as read then.
    #[error("pod {pod} is already bound to node {node}")]
    AlreadyBound { pod: String, node: String },
    /// A write refused (the in-memory backend's stand-in for the API server's refusals).
    #[error("{0}")]
    Refused(String),
}

impl Error {
    pub fn is_contention(&self) -> bool {
        matches!(self, Error::LockContention { .. })
    }

    /// The request may have taken effect although it failed: no answer came, or the API server
    /// failed while serving it.
    pub fn is_ambiguous(&self) -> bool {
        matches!(self, Error::Transport(_)) || matches!(self, Error::Status { code, .. } if *code >= 500)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// What a bind may do with the node lock it finds on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockVerdict {
    /// This pod holds it already.
    Mine,
    /// It may be taken over: it names a holder that no longer needs it (expired or not), or it
    /// is a legacy lock naming nobody that expired. `expired` says which, for the handover metric.
    Take { expired: bool },
    /// Another pod still needs it, or a legacy lock is still fresh.
    Contention,
}

/// The pod named in `lock` whose need of it decides the verdict, if any: not this pod, and not
/// a legacy lock naming nobody.
pub fn lock_holder_to_ask<'a>(lock: &'a crate::model::codec::NodeLock, pod: &PodRef) -> Option<(&'a str, &'a str)> {
    if lock.is_held_by(&pod.namespace, &pod.name) {
        return None;
    }
    lock.owner.as_ref().map(|(ns, name)| (ns.as_str(), name.as_str()))
}

/// The lock decision both backends take. `holder_needs` answers for the pod
/// [`lock_holder_to_ask`] named (ignored when it named none): a lock whose holder still waits
/// for its device plugin's Allocate is never taken, even expired, since the plugin finds its pod
/// through the lock; one whose holder is gone, bound elsewhere or done is taken at once, fresh or
/// not, so a failed bind does not block the node for the whole lock timeout.
pub fn judge_lock(
    lock: &crate::model::codec::NodeLock,
    pod: &PodRef,
    expired: bool,
    holder_needs: Option<bool>,
) -> LockVerdict {
    if lock.is_held_by(&pod.namespace, &pod.name) {
        return LockVerdict::Mine;
    }
    let free = match &lock.owner {
        None => expired,
        Some(_) => holder_needs == Some(false),
    };
    if free { LockVerdict::Take { expired } } else { LockVerdict::Contention }
}

/// How long Cambricon's own node lock holds (its device plugin's rule).
pub const CAMBRICON_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Whether a bind of `pod` would now find HAMi's `kind` lock on `node` held by someone else, as
/// the caches show it (no API call): the same verdict as [`judge_lock`], with a holder the cache
/// does not know taken as gone. Filter uses it only to prefer nodes whose lock is free; the bind
/// still decides with fresh reads.
pub fn lock_taken(
    node: &NodeView,
    pod: &PodRef,
    kind: crate::vendor::LockKind,
    timeout: std::time::Duration,
    holder: impl Fn(&str, &str) -> Option<Arc<PodView>>,
) -> bool {
    use crate::model::annotations as keys;
    use crate::model::codec;
    use crate::vendor::LockKind;
    match kind {
        LockKind::Shared => {
            let Some(v) = node.annotation(keys::NODE_LOCK) else { return false };
            // A malformed lock fails every bind until someone fixes it.
            let Ok(l) = codec::decode_node_lock(v) else { return true };
            let needs = lock_holder_to_ask(&l, pod)
                .map(|(ns, name)| holder(ns, name).is_some_and(|p| holder_needs_lock(&p, &node.metadata.name)));
            judge_lock(&l, pod, l.is_expired(chrono::Utc::now(), timeout), needs) == LockVerdict::Contention
        }
        LockKind::Cambricon => node.annotation(keys::CAMBRICON_LOCK).is_some_and(|v| {
            codec::decode_node_lock(v).is_ok_and(|l| !l.is_expired(chrono::Utc::now(), CAMBRICON_LOCK_TIMEOUT))
        }),
        LockKind::None => false,
    }
}

/// client-go's Event spam filter, which HAMi's recorder applies: per object, a burst of 25 Events,
/// then one every 5 minutes. A pod that keeps failing to schedule must not flood the API server.
pub struct EventBudget {
    buckets: std::collections::HashMap<String, (f64, std::time::Instant)>,
}

impl EventBudget {
    const BURST: f64 = 25.0;
    const REFILL_PER_SEC: f64 = 1.0 / 300.0;
    const MAX_OBJECTS: usize = 100_000;

    pub fn new() -> EventBudget {
        EventBudget { buckets: std::collections::HashMap::new() }
    }

    /// Whether an Event about `object` may be written at `now`.
    pub fn allow(&mut self, object: &str, now: std::time::Instant) -> bool {
        if self.buckets.len() >= Self::MAX_OBJECTS {
            // Forget objects whose bucket has refilled completely: they behave as new ones. If most
            // are still draining (a flood of distinct objects), forget them all: each may then send
            // one more burst, and the map stays bounded with the scan amortised over many calls.
            self.buckets.retain(|_, (tokens, t)| {
                *tokens + now.duration_since(*t).as_secs_f64() * Self::REFILL_PER_SEC < Self::BURST
            });
            if self.buckets.len() >= Self::MAX_OBJECTS / 2 {
                self.buckets.clear();
            }
        }
        let (tokens, last) = self.buckets.entry(object.to_owned()).or_insert((Self::BURST, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * Self::REFILL_PER_SEC).min(Self::BURST);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Default for EventBudget {
    fn default() -> Self {
        EventBudget::new()
    }
}

/// A cached pod unpacked for a reader. A buffer `PackedPod::pack` did not write is a bug; the pod
/// reads as absent and the log says so.
pub(crate) fn unpacked(p: &crate::model::packed::PackedPod) -> Option<Arc<PodView>> {
    let v = p.unpack();
    if v.is_none() {
        tracing::error!(pod = %format_args!("{}/{}", p.namespace(), p.name()), bytes = p.len(), "a cached pod could not be unpacked");
    }
    v.map(Arc::new)
}

/// Whether the pod a node lock names still needs the lock on `node`: it is headed for the node
/// and its device plugin has not answered yet. A lock whose holder does not need it any more (gone,
/// finished, terminating, answered, moved elsewhere, or never got as far as writing its bind-phase)
/// may be taken over, expired or not; one whose holder still waits for its Allocate may not, even
/// when it expired, since the plugin finds "its" pod through the lock (HAMi issue 3096).
pub fn holder_needs_lock(p: &PodView, node: &str) -> bool {
    use crate::model::annotations as keys;
    if p.is_terminating() || p.is_finished() {
        return false;
    }
    if p.status.phase.as_deref().is_some_and(|ph| ph != "Pending") {
        return false;
    }
    let phase = p.annotation(keys::BIND_PHASE);
    if matches!(phase, Some(keys::BIND_PHASE_SUCCESS) | Some(keys::BIND_PHASE_FAILED)) {
        return false;
    }
    if p.annotation(keys::ASSIGNED_NODE) != Some(node) {
        return false;
    }
    match p.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        Some(n) => n == node,
        // Between the bind-phase patch and the Binding: its bind will be retried.
        None => phase == Some(keys::BIND_PHASE_ALLOCATING),
    }
}

/// Everything the engine needs from a cluster.
pub trait Backend: Clone + Send + Sync + 'static {
    /// The pod as the backend's cache holds it.
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodView>>;

    /// The pod from the cache or, when the cache does not hold it (its watch event may still be
    /// on the way), from the source; `Ok(None)` when it does not exist.
    fn pod_fresh(&self, namespace: &str, name: &str) -> impl Future<Output = Result<Option<Arc<PodView>>>> + Send {
        let cached = self.pod(namespace, name);
        async move { Ok(cached) }
    }

    /// The pod read from the source, past the cache (which may lag behind a write whose answer
    /// was lost); `Ok(None)` when it does not exist.
    fn pod_read(&self, namespace: &str, name: &str) -> impl Future<Output = Result<Option<Arc<PodView>>>> + Send {
        let cached = self.pod(namespace, name);
        async move { Ok(cached) }
    }

    /// How long a write asked for now would wait behind the writes already queued (the client's
    /// rate limit). Filter waits while it is long, so kube-scheduler does not schedule faster
    /// than the binds can be written.
    fn write_backlog(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// The node as the backend's cache holds it.
    fn node(&self, name: &str) -> Option<Arc<NodeView>>;

    /// Merge-patches the pod's annotations and labels (Filter's one write), honouring
    /// [`PodPatch::while_unbound`].
    fn patch_pod(&self, pod: &PodRef, patch: &PodPatch) -> impl Future<Output = Result<()>> + Send;

    /// Takes one of HAMi's node locks for `pod`, the value HAMi's device plugins expect and
    /// release. Idempotent for the holder.
    fn lock_node(&self, node: &str, pod: &PodRef, kind: LockKind) -> impl Future<Output = Result<()>> + Send;

    /// Releases a node lock this pod holds; a lock held by someone else is left alone.
    fn unlock_node(&self, node: &str, pod: &PodRef, kind: LockKind) -> impl Future<Output = Result<()>> + Send;

    /// Merge-patches `patch` onto the pod (`hami.io/bind-phase: allocating`, `hami.io/bind-time`,
    /// and the decision when it is written at bind: one write either way), honouring
    /// [`PodPatch::while_unbound`], then creates the Binding.
    fn bind(&self, pod: &PodRef, node: &str, patch: &PodPatch) -> impl Future<Output = Result<()>> + Send;

    /// Records an Event; never fails the caller (Events are best effort).
    fn record_event(&self, event: Event);

    /// A pod seen in a filter request. Backends whose cache is fed by a watch ignore it; the
    /// in-memory backend adds a pod it does not know yet, so a client can drive
    /// `serve --cluster-file` with pods that are not in the file.
    fn learn_pod(&self, _pod: &PodView) {}
}

/// What a backend's watchers report the cluster's changes to: the engine implements it, so
/// watchers know nothing else of the engine.
pub trait Observer: Clone + Send + Sync + 'static {
    /// The vendors whose resources and annotations the watchers look for.
    fn vendors(&self) -> &crate::vendor::Vendors;
    /// A node was added, or its labels, annotations or capacity changed.
    fn register_node(&self, node: Arc<NodeView>) -> impl Future<Output = ()> + Send;
    /// Vendors whose devices the health round found dead on `node` (empty: all alive).
    fn set_unhealthy(&self, node: &str, unhealthy: Vec<crate::model::VendorId>);
    /// The node is gone, with everything it held.
    fn remove_node(&self, name: &str);
    /// Whether the node was removed and not registered since (its pods need observing again).
    fn was_removed(&self, name: &str) -> bool;
    /// A pod as the cluster shows it now.
    fn observe_pod(&self, pod: &PodView);
    /// The pod is gone.
    fn delete_pod(&self, uid: &crate::model::PodUid);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_decision_is_one_table_for_both_backends() {
        use crate::model::codec::NodeLock;
        let me = PodRef { namespace: "default".into(), name: "me".into(), uid: "uid-me".into() };
        let named =
            |who: &str| NodeLock { time: chrono::Utc::now().into(), owner: Some(("default".into(), who.into())) };
        let legacy = NodeLock { time: chrono::Utc::now().into(), owner: None };
        // (lock, expired, does the named holder still need it, verdict)
        let rows = [
            (named("me"), false, None, LockVerdict::Mine),
            (named("me"), true, None, LockVerdict::Mine),
            (named("other"), false, Some(true), LockVerdict::Contention),
            // Expired but its pod still waits for Allocate: the plugin finds the pod through it.
            (named("other"), true, Some(true), LockVerdict::Contention),
            // Fresh, but its pod no longer needs it: taken at once.
            (named("other"), false, Some(false), LockVerdict::Take { expired: false }),
            (named("other"), true, Some(false), LockVerdict::Take { expired: true }),
            // A legacy lock names nobody: only its age frees it.
            (legacy.clone(), false, None, LockVerdict::Contention),
            (legacy, true, None, LockVerdict::Take { expired: true }),
        ];
        for (lock, expired, needs, want) in rows {
            assert_eq!(judge_lock(&lock, &me, expired, needs), want, "{lock:?} expired={expired} needs={needs:?}");
        }
        assert_eq!(lock_holder_to_ask(&named("me"), &me), None);
        assert_eq!(lock_holder_to_ask(&named("other"), &me), Some(("default", "other")));
    }

    use crate::model::annotations as keys;
    use crate::testing::pod;

    fn holder(f: impl FnOnce(&mut PodView)) -> PodView {
        let mut p = pod()
            .name("holder")
            .annotation(keys::ASSIGNED_NODE, "n1")
            .annotation(keys::BIND_PHASE, "allocating")
            .view();
        p.spec.node_name = Some("n1".into());
        f(&mut p);
        p
    }

    #[test]
    fn a_holder_bound_here_and_waiting_for_its_plugin_needs_the_lock() {
        // HAMi issue 3096: handing the lock over now would let the plugin serve the wrong pod.
        assert!(holder_needs_lock(&holder(|_| {}), "n1"));
        // Between the bind-phase patch and the Binding, the bind will be retried.
        assert!(holder_needs_lock(&holder(|p| p.spec.node_name = None), "n1"));
    }

    #[test]
    fn a_holder_that_is_done_or_elsewhere_does_not() {
        let cases: Vec<(&str, PodView)> = vec![
            (
                "plugin answered",
                holder(|p| {
                    p.metadata.annotations.insert(keys::BIND_PHASE.into(), "success".into());
                }),
            ),
            (
                "plugin failed",
                holder(|p| {
                    p.metadata.annotations.insert(keys::BIND_PHASE.into(), "failed".into());
                }),
            ),
            ("running", holder(|p| p.status.phase = Some("Running".into()))),
            ("finished", holder(|p| p.status.phase = Some("Succeeded".into()))),
            ("terminating", holder(|p| p.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into()))),
            ("bound elsewhere", holder(|p| p.spec.node_name = Some("n2".into()))),
            (
                "filtered elsewhere",
                holder(|p| {
                    p.metadata.annotations.insert(keys::ASSIGNED_NODE.into(), "n2".into());
                }),
            ),
            (
                "never wrote bind-phase",
                holder(|p| {
                    p.spec.node_name = None;
                    p.metadata.annotations.remove(keys::BIND_PHASE);
                }),
            ),
        ];
        for (why, p) in cases {
            assert!(!holder_needs_lock(&p, "n1"), "{why}");
        }
    }

    #[test]
    fn events_follow_client_gos_spam_filter() {
        let mut b = EventBudget::new();
        let t = std::time::Instant::now();
        assert_eq!((0..30).filter(|_| b.allow("Pod/ns/p", t)).count(), 25, "a burst of 25");
        assert!(b.allow("Pod/ns/other", t), "other objects are not affected");
        assert!(!b.allow("Pod/ns/p", t + std::time::Duration::from_secs(100)));
        assert!(b.allow("Pod/ns/p", t + std::time::Duration::from_secs(301)), "one more every 5 minutes");
    }

    #[test]
    fn the_event_budget_stays_bounded_under_a_flood_of_distinct_objects() {
        let mut b = EventBudget::new();
        let t = std::time::Instant::now();
        for i in 0..EventBudget::MAX_OBJECTS * 3 {
            assert!(b.allow(&format!("Pod/ns/p{i}"), t), "a new object always gets its first Event");
            assert!(b.buckets.len() <= EventBudget::MAX_OBJECTS, "bounded at {i}");
        }
        // An object still draining its own burst keeps its limit while the map is below the bound.
        let mut b = EventBudget::new();
        assert_eq!((0..30).filter(|_| b.allow("Pod/ns/p", t)).count(), 25);
        assert!(!b.allow("Pod/ns/p", t));
    }
}
