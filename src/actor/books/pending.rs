//! The pending book: every pod whose last filter here found no node for it (or failed), with
//! its reasons, what it asks of each device and since when, kept until the pod is placed by a
//! later filter, seen bound, or deleted. The console's pending list, its fragmentation figure and
//! the pending-pods gauges read it; a pod pending for a day stays as visible as one pending for a
//! second, however many decisions came since.
//!
//! One entry per pod, so memory follows the pods that are pending, not time or traffic. Pods the
//! cluster no longer holds leave when the book has doubled since it last looked (the in-memory
//! cluster forgets pods filters named that nobody bound, and tells no one); a cap guards against
//! the rest: past it, the entry whose last filter is oldest makes room.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::actor::books::recent::DeviceNeed;
use crate::model::PodUid;

/// Pods the book keeps at most.
const CAP: usize = 100_000;

/// A pod left pending by its last filter.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PendingPod {
    /// `namespace/name`.
    pub pod: String,
    /// `no_fit` or `error`, as the decisions metric labels them.
    pub outcome: &'static str,
    /// The reason counts of a no-fit (`12 nodes do not meet: …`), or the error.
    pub detail: String,
    /// The rejection reasons of its last filter, as `hami_scheduler_rejections_total` labels them
    /// (`error` for a failed filter).
    pub reasons: Vec<&'static str>,
    /// What it asks of one device, per container and vendor.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<DeviceNeed>,
    /// When a filter first left it pending, and when the last one did (Unix seconds).
    pub since_s: i64,
    pub last_s: i64,
    /// Filters that left it pending.
    pub attempts: u64,
}

/// What starts a note in a pending pod's detail.
const NOTE_MARK: &str = "; ";

/// The book's size at which it first looks for pods the cluster no longer holds.
const FIRST_SWEEP: usize = 1024;

#[derive(Debug, Default)]
pub struct PendingBook {
    pods: Mutex<HashMap<PodUid, PendingPod>>,
    /// The size at which the next sweep is due (0: `FIRST_SWEEP`).
    sweep_at: std::sync::atomic::AtomicUsize,
    /// How many pods the book holds, written under the lock: every placed pod asks the book to
    /// forget it, and while nothing is pending that costs a load, not a lock.
    held: std::sync::atomic::AtomicUsize,
}

impl PendingBook {
    /// The pod's last filter left it pending: its first time keeps, the rest is the latest.
    /// Returns whether a sweep is due (see [`PendingBook::sweep`]).
    pub fn refused(&self, uid: PodUid, mut p: PendingPod) -> bool {
        let Ok(mut m) = self.pods.lock() else { return false };
        if let Some(old) = m.get(&uid) {
            p.since_s = old.since_s;
            p.attempts = old.attempts + 1;
        } else if m.len() >= CAP
            && let Some(oldest) = m.iter().min_by_key(|(_, p)| p.last_s).map(|(k, _)| k.clone())
        {
            m.remove(&oldest);
        }
        m.insert(uid, p);
        self.held.store(m.len(), std::sync::atomic::Ordering::Relaxed);
        m.len() >= self.sweep_at.load(std::sync::atomic::Ordering::Relaxed).max(FIRST_SWEEP)
    }

    /// Keeps only the pods `holds` says the cluster still has (namespace, name, uid); the next
    /// sweep is due when the book has doubled from what is left.
    pub fn sweep(&self, holds: impl Fn(&str, &str, &PodUid) -> bool) {
        let Ok(mut m) = self.pods.lock() else { return };
        m.retain(|uid, p| {
            let (ns, name) = p.pod.split_once('/').unwrap_or(("", &p.pod));
            holds(ns, name, uid)
        });
        self.held.store(m.len(), std::sync::atomic::Ordering::Relaxed);
        self.sweep_at.store((2 * m.len()).max(FIRST_SWEEP), std::sync::atomic::Ordering::Relaxed);
    }

    /// Adds what else was found about a pending pod (a defragmentation's plan, or what blocked
    /// it) to its detail, replacing an earlier note.
    pub fn note(&self, uid: &str, note: &str) {
        if let Ok(mut m) = self.pods.lock()
            && let Some(p) = m.get_mut(uid)
        {
            if let Some(at) = p.detail.find(NOTE_MARK) {
                p.detail.truncate(at);
            }
            p.detail.push_str(NOTE_MARK);
            p.detail.push_str(note);
        }
    }

    /// The pod was placed, bound or deleted: it is pending no more.
    pub fn gone(&self, uid: &str) {
        if self.held.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return;
        }
        if let Ok(mut m) = self.pods.lock() {
            m.remove(uid);
            self.held.store(m.len(), std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Every pending pod, longest pending first.
    pub fn list(&self) -> Vec<PendingPod> {
        let mut v: Vec<PendingPod> = self.pods.lock().map(|m| m.values().cloned().collect()).unwrap_or_default();
        v.sort_by(|a, b| a.since_s.cmp(&b.since_s).then_with(|| a.pod.cmp(&b.pod)));
        v
    }

    /// Pending pods by outcome, and by each reason of their last filter (a pod counted under
    /// every reason it was given).
    pub fn counts(&self) -> PendingCounts {
        let mut c = PendingCounts::default();
        if let Ok(m) = self.pods.lock() {
            for p in m.values() {
                *c.by_outcome.entry(p.outcome).or_default() += 1;
                for r in &p.reasons {
                    *c.by_reason.entry(r).or_default() += 1;
                }
            }
        }
        c
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.pods.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// What the pending-pods gauges show.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PendingCounts {
    pub by_outcome: std::collections::BTreeMap<&'static str, u64>,
    pub by_reason: std::collections::BTreeMap<&'static str, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, outcome: &'static str, reasons: &[&'static str], at: i64) -> PendingPod {
        PendingPod {
            pod: name.into(),
            outcome,
            detail: String::new(),
            reasons: reasons.to_vec(),
            needs: vec![],
            since_s: at,
            last_s: at,
            attempts: 1,
        }
    }

    #[test]
    fn a_pod_keeps_its_first_time_and_counts_its_attempts_until_it_is_gone() {
        let b = PendingBook::default();
        b.refused(PodUid::new("u1"), pod("ns/a", "no_fit", &["CardInsufficientMemory"], 100));
        b.refused(PodUid::new("u2"), pod("ns/b", "error", &["error"], 150));
        b.refused(PodUid::new("u1"), pod("ns/a", "no_fit", &["CardInsufficientCore"], 200));
        let l = b.list();
        assert_eq!(l.iter().map(|p| p.pod.as_str()).collect::<Vec<_>>(), ["ns/a", "ns/b"], "longest pending first");
        assert_eq!((l[0].since_s, l[0].last_s, l[0].attempts), (100, 200, 2));
        assert_eq!(l[0].reasons, ["CardInsufficientCore"], "the last filter's reasons");
        let c = b.counts();
        assert_eq!(c.by_outcome.get("no_fit"), Some(&1));
        assert_eq!(c.by_outcome.get("error"), Some(&1));
        assert_eq!(c.by_reason.get("CardInsufficientMemory"), None);
        assert_eq!(c.by_reason.get("CardInsufficientCore"), Some(&1));
        b.gone("u1");
        b.gone("nobody");
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn pods_the_cluster_no_longer_holds_are_swept_once_the_book_has_doubled() {
        let b = PendingBook::default();
        let mut due = Vec::new();
        for k in 0..FIRST_SWEEP {
            due.push(b.refused(PodUid::new(&format!("u{k}")), pod(&format!("ns/p{k}"), "no_fit", &[], k as i64)));
        }
        assert_eq!(due.iter().filter(|d| **d).count(), 1, "due once, at {FIRST_SWEEP}");
        // The cluster holds every tenth pod.
        b.sweep(|ns, name, _| ns == "ns" && name.trim_start_matches('p').parse::<usize>().is_ok_and(|k| k % 10 == 0));
        assert_eq!(b.len(), FIRST_SWEEP.div_ceil(10));
        assert!(!b.refused(PodUid::new("x"), pod("ns/x", "no_fit", &[], 0)), "not due again until it has doubled");
    }

    #[test]
    fn past_the_cap_the_pod_least_recently_refused_makes_room() {
        let b = PendingBook::default();
        for k in 0..CAP {
            b.refused(PodUid::new(&format!("u{k}")), pod(&format!("ns/p{k}"), "no_fit", &[], 1000 + k as i64));
        }
        // The first pod is filtered again, so the second is now the least recent.
        b.refused(PodUid::new("u0"), pod("ns/p0", "no_fit", &[], 5_000_000));
        b.refused(PodUid::new("new"), pod("ns/new", "no_fit", &[], 5_000_001));
        assert_eq!(b.len(), CAP);
        let l = b.list();
        assert!(l.iter().any(|p| p.pod == "ns/p0") && l.iter().any(|p| p.pod == "ns/new"));
        assert!(!l.iter().any(|p| p.pod == "ns/p1"), "the least recently refused left");
    }
}
