//! A node's tombstones: the reservations it released lately, so an echo of a released pod's old
//! annotations does not bring the reservation back.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::model::PodUid;

/// How long a released reservation's tombstone stops an echo of its pod's annotations.
pub(super) const TOMBSTONE_AGE: Duration = Duration::from_secs(600);
/// Tombstones one node keeps at most: a busy node with no annotation updates to prune them on
/// would otherwise keep one per expired reservation for `TOMBSTONE_AGE`.
pub(super) const TOMBSTONES_KEPT: usize = 256;

/// The key of a pod's tombstone: its uid hashed with a key drawn once per process. Two pods share
/// one with odds of about one in 2^56 among a node's 256 at most; then an echo of the other pod,
/// unbound, is not held provisionally (its bind reserves it again), so nothing is over-committed.
fn tombstone(uid: &PodUid) -> u64 {
    use std::hash::BuildHasher;
    static KEY: std::sync::LazyLock<std::hash::RandomState> = std::sync::LazyLock::new(std::hash::RandomState::new);
    KEY.hash_one(uid.as_str())
}

/// A node's tombstones, oldest first. Bounded without a node update to prune them: past
/// `TOMBSTONES_KEPT` the oldest goes. Forgetting one is safe: an echo of that pod is then held
/// only if its devices are free, and only until its TTL. Each is a hash of the uid and a time
/// (see [`tombstone`]), not the uid's own allocation, and an emptied list gives its room back, so
/// the nodes a busy cluster once used do not keep theirs.
#[derive(Default)]
pub(super) struct Tombstones(VecDeque<(u64, Instant)>);

impl Tombstones {
    pub fn bury(&mut self, uid: &PodUid, now: Instant) {
        if self.0.len() >= TOMBSTONES_KEPT {
            self.0.pop_front();
        }
        self.0.push_back((tombstone(uid), now));
    }
    pub fn holds(&self, uid: &PodUid) -> bool {
        let key = tombstone(uid);
        self.0.iter().any(|(k, _)| *k == key)
    }
    pub fn forget(&mut self, uid: &PodUid) {
        let key = tombstone(uid);
        self.0.retain(|(k, _)| *k != key);
    }
    pub fn forget_older_than(&mut self, age: Duration, now: Instant) {
        while self.0.front().is_some_and(|(_, t)| now.duration_since(*t) >= age) {
            self.0.pop_front();
        }
        if self.0.is_empty() {
            self.0 = VecDeque::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tombstones_keep_the_newest_and_give_their_room_back_once_forgotten() {
        let t0 = Instant::now();
        let uid = |i: usize| PodUid::new(&format!("uid-{i}"));
        let mut t = Tombstones::default();
        for i in 0..TOMBSTONES_KEPT + 3 {
            t.bury(&uid(i), t0 + Duration::from_secs(i as u64));
        }
        assert_eq!(t.0.len(), TOMBSTONES_KEPT);
        assert!(t.0.capacity() <= TOMBSTONES_KEPT, "never grows past its bound");
        assert!(!t.holds(&uid(0)) && !t.holds(&uid(2)), "the oldest went first");
        assert!(t.holds(&uid(3)) && t.holds(&uid(TOMBSTONES_KEPT + 2)));
        t.forget(&uid(10));
        assert!(!t.holds(&uid(10)) && t.holds(&uid(11)));
        // Old ones go by age; the rest stay.
        let later = t0 + Duration::from_secs(100) + TOMBSTONE_AGE;
        t.forget_older_than(TOMBSTONE_AGE, later);
        assert!(!t.holds(&uid(100)) && t.holds(&uid(101)), "one as old as the age goes");
        t.forget_older_than(TOMBSTONE_AGE, later + Duration::from_secs(1000));
        assert_eq!((t.0.len(), t.0.capacity()), (0, 0), "an emptied list keeps no room");
    }
}
