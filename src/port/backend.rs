//! The `Backend` trait, every read and write the engine makes of a cluster.

use std::future::Future;
use std::sync::Arc;

use crate::devices::LockKind;
use crate::model::PodView;
use crate::model::pod::NodeView;

use super::access::{PodPlacement, RequestUser, TokenIdentity};
use super::error::Result;
use super::{Event, PodPatch, PodRef};

/// What an eviction came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evicted {
    /// The pod's deletion is under way (its grace period runs); the watch will say when it is gone.
    Requested,
    /// The pod no longer exists (the in-memory backend removes it at once).
    Gone,
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

    /// The pod as the cluster has it: the cache or, when the cache does not hold it, the source.
    /// Never a pod known only from a request body (which [`Backend::pod`] may hold: see
    /// [`Backend::learn_pod`]), so what it says (UID, priority, preemption policy) can be trusted
    /// to grant privileges. `Ok(None)` when the cluster has no such pod.
    fn pod_of_record(&self, namespace: &str, name: &str) -> impl Future<Output = Result<Option<Arc<PodView>>>> + Send;

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

    /// Evicts the pod through the Eviction API (`policy/v1`), only the pod with this UID; the
    /// API server refuses what a PodDisruptionBudget forbids. A pod already gone counts as
    /// evicted.
    fn evict(&self, pod: &PodRef) -> impl Future<Output = Result<Evicted>> + Send;

    /// Of `pods`, those that PodDisruptionBudgets would not let go together: every pod a budget
    /// selects when the budget allows fewer disruptions than it has pods among `pods`.
    fn disruption_blocked(&self, pods: &[PodRef]) -> impl Future<Output = Result<Vec<PodRef>>> + Send;

    /// Who `token` belongs to, by the API server's TokenReview; `Ok(None)` when the API server
    /// does not authenticate it (or there is no API server to ask).
    fn review_token(&self, token: &str) -> impl Future<Output = Result<Option<TokenIdentity>>> + Send;

    /// Whether the API server's authorizer lets `user` do `verb` on the cluster-scoped
    /// `resource` of the core group (a SubjectAccessReview). `Ok(false)` when there is no
    /// authorizer to ask.
    fn permits(&self, user: &RequestUser, verb: &str, resource: &str) -> impl Future<Output = Result<bool>> + Send;

    /// The UID and node of any pod, read from the source and not cached (the pods this
    /// scheduler's cache holds are only those that concern it); `Ok(None)` when it does not exist.
    fn pod_placement(&self, namespace: &str, name: &str) -> impl Future<Output = Result<Option<PodPlacement>>> + Send;

    /// Records an Event; never fails the caller (Events are best effort).
    fn record_event(&self, event: Event);

    /// Whether this backend's pod watch has delivered the pod (`namespace/name` with `uid`).
    /// Backends without a watch have every pod they will ever have.
    fn watched(&self, _namespace: &str, _name: &str, _uid: &str) -> bool {
        true
    }

    /// Whether the pod is still in the cluster as this backend keeps it: the in-memory cluster
    /// forgets pods that filters named and nobody bound, a watch-fed backend's cache holds what the
    /// watch delivered.
    fn holds_pod(&self, _namespace: &str, _name: &str, _uid: &str) -> bool {
        true
    }

    /// A pod seen in a filter request. Backends whose cache is fed by a watch ignore it; the
    /// in-memory backend adds a pod it does not know yet, so a client can drive
    /// `serve --cluster-file` with pods that are not in the file.
    fn learn_pod(&self, _pod: &PodView) {}

    /// The DeviceClasses that let DRA serve a resource name hami-rs serves, as the backend last
    /// saw them (none where it does not watch them).
    fn dra_classes(&self) -> Vec<super::dra::DraClass> {
        Vec::new()
    }
}
