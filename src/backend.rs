//! `Backend`: every read of the cluster's pods and every write the scheduler makes (pod
//! annotation patches, node locks, bindings, Events) goes through this trait. The in-memory
//! backend (backend/memory.rs) serves the simulator and unit tests; the Kubernetes backend
//! (backend/kube.rs) serves real clusters and is tested against a real API server.

use std::future::Future;
use std::sync::Arc;

use crate::model::PodView;
use crate::model::pod::NodeView;
use crate::vendor::LockKind;

pub mod kube;
pub mod memory;

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
}

impl PodPatch {
    /// The `{"metadata":{"annotations":{…},"labels":{…}}}` merge-patch body.
    pub fn to_merge_patch(&self) -> serde_json::Value {
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

/// An Event on a pod (protocol.md §10) or, for registration problems, on a node.
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

/// Event reasons HAMi records (protocol.md §10).
pub mod reasons {
    pub const FILTERING_SUCCEED: &str = "FilteringSucceed";
    pub const FILTERING_FAILED: &str = "FilteringFailed";
    pub const BINDING_SUCCEED: &str = "BindingSucceed";
    pub const BINDING_FAILED: &str = "BindingFailed";
    /// hami-rs's own: a node's registration annotation cannot be decoded.
    pub const DEVICE_REGISTRATION_INVALID: &str = "DeviceRegistrationInvalid";
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
    #[error("{0}")]
    Api(String),
}

impl Error {
    pub fn is_contention(&self) -> bool {
        matches!(self, Error::LockContention { .. })
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Everything the engine needs from a cluster.
pub trait Backend: Clone + Send + Sync + 'static {
    /// The pod as the backend's cache holds it.
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodView>>;

    /// The node as the backend's cache holds it.
    fn node(&self, name: &str) -> Option<Arc<NodeView>>;

    /// Merge-patches the pod's annotations and labels (Filter's one write).
    fn patch_pod(&self, pod: &PodRef, patch: &PodPatch) -> impl Future<Output = Result<()>> + Send;

    /// Takes one of HAMi's node locks for `pod` (protocol.md §3.8). Idempotent for the holder.
    fn lock_node(&self, node: &str, pod: &PodRef, kind: LockKind) -> impl Future<Output = Result<()>> + Send;

    /// Releases a node lock this pod holds; a lock held by someone else is left alone.
    fn unlock_node(&self, node: &str, pod: &PodRef, kind: LockKind) -> impl Future<Output = Result<()>> + Send;

    /// Writes `hami.io/bind-phase: allocating` and `hami.io/bind-time`, then creates the Binding.
    fn bind(&self, pod: &PodRef, node: &str, bind_time: i64) -> impl Future<Output = Result<()>> + Send;

    /// Records an Event; never fails the caller (Events are best effort).
    fn record_event(&self, event: Event);

    /// A pod seen in a filter request. Backends whose cache is fed by a watch ignore it; the
    /// in-memory backend adds a pod it does not know yet, so a client can drive
    /// `serve --cluster-file` with pods that are not in the file.
    fn learn_pod(&self, _pod: &PodView) {}
}
