//! The defragmentation book: the moves made lately (when, from which node, of which controller's
//! pod), for the budgets per node, per controller and per minute; the replacements placed on a
//! claimed destination, which are not moved again within the cooldown; and how many claims for
//! a controller's next pod are outstanding, so filters compute a pod's shape only while one is;
//! and the console's last figure of whole devices a defragmentation could free, kept a while
//! (at thousands of nodes it reads every running pod).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::model::{NodeName, PodUid};

#[derive(Default)]
pub struct MoveBook {
    moves: Mutex<VecDeque<(Instant, NodeName, String)>>,
    replacements: DashMap<PodUid, Instant>,
    next_claims: AtomicUsize,
    freeable: Mutex<Option<(Instant, Freeable)>>,
}

/// Whole devices a defragmentation could free, by (vendor, device type).
pub type Freeable = Vec<((String, String), usize)>;

/// How long the console's figure is kept before it is computed again.
pub const FREEABLE_KEPT: Duration = Duration::from_secs(30);

impl MoveBook {
    /// The figure computed within [`FREEABLE_KEPT`], else `compute`'s, kept from now.
    pub fn freeable(&self, compute: impl FnOnce() -> Freeable) -> Freeable {
        let Ok(mut kept) = self.freeable.lock() else { return compute() };
        match &*kept {
            Some((at, f)) if at.elapsed() < FREEABLE_KEPT => f.clone(),
            _ => {
                let f = compute();
                *kept = Some((Instant::now(), f.clone()));
                f
            }
        }
    }

    /// A pod of `controller` moved off `node` now.
    pub fn moved(&self, node: NodeName, controller: String) {
        if let Ok(mut m) = self.moves.lock() {
            m.push_back((Instant::now(), node, controller));
        }
    }

    /// Moves within `window`: off `node`, of `controller`, and all of them within the last minute.
    pub fn counts(&self, window: Duration, node: &str, controller: &str) -> (usize, usize) {
        let Ok(mut m) = self.moves.lock() else { return (usize::MAX, usize::MAX) };
        let now = Instant::now();
        while m.front().is_some_and(|(t, ..)| now.duration_since(*t) > window.max(Duration::from_secs(60))) {
            m.pop_front();
        }
        let recent = m.iter().filter(|(t, ..)| now.duration_since(*t) <= window);
        let on_node = recent.clone().filter(|(_, n, _)| n.as_str() == node).count();
        let of_controller = recent.filter(|(.., c)| c == controller).count();
        (on_node, of_controller)
    }

    /// Moves cluster-wide in the last minute.
    pub fn last_minute(&self) -> usize {
        let now = Instant::now();
        self.moves
            .lock()
            .map(|m| m.iter().filter(|(t, ..)| now.duration_since(*t) <= Duration::from_secs(60)).count())
            .unwrap_or(usize::MAX)
    }

    /// A replacement took its claimed destination: it is not moved again within the cooldown.
    pub fn replaced(&self, uid: PodUid) {
        self.replacements.insert(uid, Instant::now());
    }

    /// Whether the pod is a replacement placed within `cooldown`.
    pub fn recently_replaced(&self, uid: &PodUid, cooldown: Duration) -> bool {
        let fresh = self.replacements.get(uid).is_some_and(|t| t.elapsed() < cooldown);
        if !fresh {
            self.replacements.remove(uid);
        }
        fresh
    }

    pub fn next_claim_taken(&self) {
        self.next_claims.fetch_add(1, Ordering::Relaxed);
    }

    pub fn next_claim_ended(&self) {
        let _ = self.next_claims.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    pub fn any_next_claim(&self) -> bool {
        self.next_claims.load(Ordering::Relaxed) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_count_per_node_per_controller_and_per_minute() {
        let b = MoveBook::default();
        b.moved(NodeName::new("fa"), "rs-1".into());
        b.moved(NodeName::new("fa"), "rs-2".into());
        b.moved(NodeName::new("fb"), "rs-1".into());
        assert_eq!(b.counts(Duration::from_secs(3600), "fa", "rs-1"), (2, 2));
        assert_eq!(b.counts(Duration::from_secs(3600), "fc", "rs-3"), (0, 0));
        assert_eq!(b.last_minute(), 3);
        let uid = PodUid::new("u");
        b.replaced(uid.clone());
        assert!(b.recently_replaced(&uid, Duration::from_secs(60)));
        assert!(!b.recently_replaced(&uid, Duration::ZERO));
        assert!(!b.any_next_claim());
        b.next_claim_taken();
        assert!(b.any_next_claim());
        b.next_claim_ended();
        b.next_claim_ended();
        assert!(!b.any_next_claim());
    }
}
