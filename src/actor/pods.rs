//! The pod book: what the engine keeps about pods between their calls, by UID. A binding that
//! failed without an answer (the pod may be bound), the hold a preemption keeps for a pod, and
//! the scores a filter ranked for the prioritize call and the bind that follow, and the pods the
//! last filter left pending. Which node holds
//! a pod's allocation is the node book's (its node actor writes it).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;

use super::messages::Hold;
use super::pending::PendingBook;
use super::prioritize::ScoreBook;
use crate::model::{NodeName, PodUid};

#[derive(Default)]
pub(super) struct PodBook {
    /// Pods whose Binding failed without an answer while the pod could not be read back: it may
    /// have taken effect, so the devices stay committed on that node until the pod is seen bound,
    /// deleted, or read unbound by its next filter.
    unsettled: DashMap<PodUid, NodeName>,
    /// Preemptors whose devices a node holds (`--preemption=on`): the same record the node keeps.
    holds: DashMap<PodUid, Arc<Hold>>,
    hold_ids: AtomicU64,
    /// What filters ranked (`--filter-result=all`).
    pub scores: ScoreBook,
    /// Pods the last filter left pending.
    pub pending: PendingBook,
}

impl PodBook {
    /// The pod's binding failed without an answer: its devices stay committed on `node`.
    pub fn unsettle(&self, uid: PodUid, node: NodeName) {
        self.unsettled.insert(uid, node);
    }

    /// Takes the pod's unsettled binding, if it has one.
    pub fn take_unsettled(&self, uid: &PodUid) -> Option<(PodUid, NodeName)> {
        self.unsettled.remove(uid)
    }

    /// The pod is seen bound, or gone: nothing of it is unsettled.
    pub fn settled(&self, uid: &PodUid) {
        self.unsettled.remove(uid);
    }

    /// A new hold's number.
    pub fn next_hold_id(&self) -> u64 {
        self.hold_ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn hold(&self, uid: &PodUid) -> Option<Arc<Hold>> {
        self.holds.get(uid).map(|h| h.clone())
    }

    pub fn holds_for(&self, uid: &PodUid) -> bool {
        self.holds.contains_key(uid)
    }

    pub fn keep_hold(&self, hold: Arc<Hold>) {
        self.holds.insert(hold.uid.clone(), hold);
    }

    /// Takes the pod's hold: hold `id` only when given.
    pub fn take_hold(&self, uid: &PodUid, id: Option<u64>) -> Option<Arc<Hold>> {
        match id {
            Some(id) => self.holds.remove_if(uid, |_, h| h.id == id).map(|(_, h)| h),
            None => self.holds.remove(uid).map(|(_, h)| h),
        }
    }
}
