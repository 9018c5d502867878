//! HAMi's node locks as both pipelines read them: which locks a pod needs, whether a node's
//! lock is taken for a pod (Filter ranks free nodes first), and taking them in order (Bind), each
//! in one place.

use crate::actor::Inner;
use crate::devices::LockKind;
use crate::model::PodRequest;
use crate::port::{self, Backend, PodRef};

use crate::actor::BindError;

impl<B: Backend> Inner<B> {
    /// HAMi's node locks the pod needs, sorted: every vendor it requests in any container (HAMi
    /// locks for regular containers only, so two init-only pods' Allocates race on one node).
    pub(in crate::actor) fn lock_kinds(&self, req: &PodRequest) -> Vec<LockKind> {
        let mut kinds: Vec<LockKind> =
            req.vendors().iter().map(|v| self.vendors.get(*v).lock()).filter(|k| *k != LockKind::None).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// Whether a bind of `pod` on `node` would now wait for a lock another pod holds: if so, how
    /// many pods reserved there still wait for their bind.
    pub(in crate::actor) fn lock_taken(&self, node: &str, pod: &PodRef, kinds: &[LockKind]) -> Option<u32> {
        let (locked, pending) = self.nodes.book.get(node).map_or((false, 0), |e| (e.binds.locked(), e.binds.pending()));
        if locked {
            return Some(pending);
        }
        if kinds.is_empty() {
            return None;
        }
        let view = self.backend.node(node)?;
        let timeout = self.cfg.node_lock_timeout;
        kinds
            .iter()
            .any(|k| port::lock_taken(&view, pod, *k, timeout, |ns, name| self.backend.pod(ns, name)))
            .then_some(pending)
    }

    /// Takes each of HAMi's node locks once, in order; on the first failure the ones already
    /// taken are released again, in reverse.
    pub(in crate::actor) async fn take_locks(
        &self,
        pod: &PodRef,
        node: &str,
        kinds: &[LockKind],
    ) -> Result<Vec<LockKind>, BindError> {
        let b = &self.backend;
        let mut taken: Vec<LockKind> = Vec::with_capacity(kinds.len());
        for k in kinds {
            if let Err(e) = b.lock_node(node, pod, *k).await {
                for t in taken.iter().rev() {
                    let _ = b.unlock_node(node, pod, *t).await;
                }
                return Err(e.into());
            }
            taken.push(*k);
        }
        Ok(taken)
    }
}
