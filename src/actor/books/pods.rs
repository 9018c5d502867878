//! The pod book: what the engine keeps about pods between their calls. A binding that failed
//! without an answer (the pod may be bound), the one index of claims (which node keeps the claim
//! for each key, and why), the scores a filter ranked for the prioritize call and the bind that
//! follow, and the pods the last filter left pending. Which node holds a pod's allocation is the
//! node book's (its node actor writes it); what a claim takes of each device is its node's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;

use crate::actor::books::groups::GroupBook;
use crate::actor::books::pending::PendingBook;
use crate::actor::filter::prioritize::ScoreBook;
use crate::model::{NodeName, PodUid};
use crate::port::PodRef;
use crate::sched::claim::ClaimKey;

#[derive(Default)]
pub(in crate::actor) struct PodBook {
    /// Pods whose Binding failed without an answer while the pod could not be read back: it may
    /// have taken effect, so the devices stay committed on that node until the pod is seen bound,
    /// deleted, or read unbound by its next filter.
    unsettled: DashMap<PodUid, NodeName>,
    /// Which node keeps the claim for each key. The node actor keeps the claim itself and is the
    /// only judge of it; this index only says whom to ask.
    claims: DashMap<ClaimKey, Arc<Claimed>>,
    claim_ids: AtomicU64,
    /// What filters ranked (`--filter-result=all`).
    pub scores: ScoreBook,
    /// Pods the last filter left pending.
    pub pending: PendingBook,
    /// Pod groups and their members.
    pub groups: GroupBook,
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

    /// A new claim's number.
    pub fn next_claim_id(&self) -> u64 {
        self.claim_ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn claim(&self, key: &ClaimKey) -> Option<Arc<Claimed>> {
        self.claims.get(key).map(|c| c.clone())
    }

    pub fn has_claim(&self, key: &ClaimKey) -> bool {
        self.claims.contains_key(key)
    }

    pub fn keep_claim(&self, key: ClaimKey, claimed: Arc<Claimed>) {
        self.claims.insert(key, claimed);
    }

    /// Forgets the claim for `key` (claim `id` only when given), returning where it was kept.
    pub fn forget_claim(&self, key: &ClaimKey, id: Option<u64>) -> Option<Arc<Claimed>> {
        match id {
            Some(id) => self.claims.remove_if(key, |_, c| c.id == id).map(|(_, c)| c),
            None => self.claims.remove(key).map(|(_, c)| c),
        }
    }
}

/// Where a claim is kept, and why.
#[derive(Debug)]
pub struct Claimed {
    pub node: NodeName,
    /// Tells this claim from a later one with the same key.
    pub id: u64,
    /// The pods a preemption evicted to make the claimed room.
    pub victims: Vec<PodRef>,
}
