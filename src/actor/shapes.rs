//! The pod shapes filtered lately, which node actors answer ahead: after a node's usage changes,
//! its actor fits the new snapshot for each of them on its own thread, so the next filters of
//! those shapes find the answer in the snapshot's memo instead of fitting the node themselves.

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError, RwLock};

use crate::model::PodRequest;

/// As many shapes as a snapshot's memo keeps answers.
const SHAPES_KEPT: usize = crate::sched::MEMO_SLOTS;

/// Requests of the shapes filtered lately, one per shape, the oldest noted first. Only shapes
/// whose answers may come from memos (no namespace quota applies) are noted.
#[derive(Default)]
pub struct Shapes(RwLock<VecDeque<Arc<PodRequest>>>);

impl Shapes {
    /// Every filter notes its shape: one already kept costs a shared read, so concurrent filters
    /// do not queue on a lock; a new one takes the place of the oldest noted.
    pub fn note(&self, req: &Arc<PodRequest>) {
        let kept = |q: &VecDeque<Arc<PodRequest>>| q.iter().any(|r| r.fit_key == req.fit_key);
        if kept(&self.0.read().unwrap_or_else(PoisonError::into_inner)) {
            return;
        }
        let mut q = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if kept(&q) {
            return;
        }
        if q.len() == SHAPES_KEPT {
            q.pop_front();
        }
        q.push_back(req.clone());
    }

    pub fn recent(&self) -> Vec<Arc<PodRequest>> {
        self.0.read().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pod, vendors};

    #[test]
    fn each_shape_is_kept_once_and_a_new_one_replaces_the_oldest() {
        let v = vendors();
        let shape = |mib: u64| Arc::new(pod().gpu(1).mem_mib(mib).name(&format!("p{mib}")).request_with(&v));
        let s = Shapes::default();
        for mib in 1..=SHAPES_KEPT as u64 {
            s.note(&shape(mib));
            s.note(&shape(mib));
        }
        s.note(&shape(1));
        let keys = |s: &Shapes| s.recent().iter().map(|r| r.fit_key).collect::<Vec<_>>();
        assert_eq!(keys(&s), (1..=SHAPES_KEPT as u64).map(|m| shape(m).fit_key).collect::<Vec<_>>());
        s.note(&shape(100));
        let after = keys(&s);
        assert_eq!(after.len(), SHAPES_KEPT);
        assert!(!after.contains(&shape(1).fit_key) && after.last() == Some(&shape(100).fit_key));
    }
}
