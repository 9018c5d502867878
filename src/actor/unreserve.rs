//! The engine's one way to give back what node actors keep: a pod's reservation, a claim, or
//! both once the pod is gone. A filter dropping its pod's earlier attempt, a failed decision
//! write or bind, a preemption that ends, a claim that lapses and a deleted pod all come here,
//! and each becomes one `Unreserve` to the node that keeps it, which alone decides what that
//! gives back.

use std::sync::Arc;

use crate::model::PodUid;
use crate::port::Backend;
use crate::sched::claim::ClaimKey;

use crate::actor::books::pods::Claimed;
use crate::actor::messages::Holding;
use crate::actor::state::Inner;

impl<B: Backend> Inner<B> {
    /// Gives back `what` on `node` and waits for the node's answer: whether it gave anything.
    pub(super) async fn unreserve(&self, node: &str, what: Holding, why: &'static str) -> bool {
        tracing::debug!(%node, ?what, why, "unreserve");
        match self.nodes.addr(node) {
            Some(a) => a.unreserve(what).await.unwrap_or(false),
            None => false,
        }
    }

    /// `unreserve` without waiting for the answer (watchers, which must not wait on a node).
    pub(super) fn unreserve_soon(&self, node: &str, what: Holding, why: &'static str) {
        tracing::debug!(%node, ?what, why, "unreserve");
        if let Some(a) = self.nodes.addr(node) {
            a.unreserve_soon(what);
        }
    }

    /// Gives back the claim for `key` where the index says it is kept (only claim `id` when
    /// given) and forgets it; where it was, if the index had it.
    pub(super) fn give_back_claim(&self, key: &ClaimKey, id: Option<u64>, why: &'static str) -> Option<Arc<Claimed>> {
        let claimed = self.pods.forget_claim(key, id)?;
        self.unreserve_soon(claimed.node.as_str(), Holding::Claim { key: key.clone(), id: Some(claimed.id) }, why);
        Some(claimed)
    }

    /// The pod is gone: its allocation wherever it is placed and its claim wherever it is kept.
    pub(super) fn give_back_pod(&self, uid: &PodUid) {
        let key = ClaimKey::Pod(uid.clone());
        if let Some(claimed) = self.pods.forget_claim(&key, None) {
            self.unreserve_soon(claimed.node.as_str(), Holding::Pod { uid: uid.clone() }, "pod deleted");
        }
        if let Some((_, node)) = self.nodes.placements.remove(uid) {
            self.unreserve_soon(node.as_str(), Holding::Pod { uid: uid.clone() }, "pod deleted");
        }
    }
}
