//! The scores a filter ranked, kept by pod for the prioritize call and the bind that follow
//! (`--filter-result=all`), and how they map onto kube-scheduler's extender scale.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::model::request::NodePolicy;
use crate::model::{NodeName, PodUid};

/// kube-scheduler's highest extender score (`MaxExtenderPriority`); it multiplies an extender's
/// score by the extender's weight and by 10 (`MaxNodeScore / MaxExtenderPriority`).
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// Scores kept per pod at most: a pod is scored by its filter and read by the prioritize call
/// that follows at once, so entries older than this are leftovers of pods that went elsewhere.
const KEPT_FOR: Duration = Duration::from_secs(60);
/// Entries kept at most, whatever their age.
pub(in crate::actor) const KEPT_MAX: usize = 16_384;

/// What one filter ranked: each fitting node's score under the pod's node policy, and the node
/// it reserved on.
#[derive(Debug)]
pub struct Scored {
    pub policy: NodePolicy,
    pub reserved: Option<NodeName>,
    pub scores: HashMap<NodeName, f32>,
    /// Fitting nodes whose bind would now wait for another pod's node lock.
    pub locked: Vec<NodeName>,
    at: Instant,
}

impl Scored {
    pub fn new(policy: NodePolicy, reserved: Option<NodeName>, scores: HashMap<NodeName, f32>) -> Scored {
        Scored { policy, reserved, scores, locked: Vec::new(), at: Instant::now() }
    }
}

/// The filters' scores by pod, until the pod's prioritize and bind have read them.
#[derive(Default)]
pub struct ScoreBook(DashMap<PodUid, Arc<Scored>>);

impl ScoreBook {
    pub fn note(&self, uid: PodUid, scored: Scored) {
        if self.0.len() >= KEPT_MAX {
            self.0.retain(|_, s| s.at.elapsed() < KEPT_FOR);
            if self.0.len() >= KEPT_MAX {
                // Only a flood of pods filtered and never bound gets here: a later prioritize
                // evaluates afresh, so dropping them costs time, not correctness.
                self.0.clear();
            }
        }
        self.0.insert(uid, Arc::new(scored));
    }

    pub fn get(&self, uid: &PodUid) -> Option<Arc<Scored>> {
        self.0.get(uid).map(|s| s.clone()).filter(|s| s.at.elapsed() < KEPT_FOR)
    }

    pub fn forget(&self, uid: &PodUid) {
        self.0.remove(uid);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The lowest score of a node that fits. Fitting nodes score within 7–10, a band of at most 30
/// points at weight 1 (kube-scheduler counts an extender's score × weight × 10), so that
/// kube-scheduler's own preferences decide where they speak: a preferred node affinity (up to 200
/// points) or a zone spread constraint one pod out of balance (200 / the larger zone's count, 33
/// or more up to six pods a zone) outweighs it, and hami-rs's policy decides among the nodes they
/// leave equal. A higher weight gives the policy more say.
pub const FIT_FLOOR: i64 = 7;

/// Each of `names` on kube-scheduler's 0–10 scale. The node the filter reserved on scores 10, so
/// with no other preference kube-scheduler binds where hami-rs would have (HAMi's choice); every
/// other fitting node scores 7–9 by where its policy score lies between the worst and the best
/// of them (binpack: the fuller the higher; spread: the emptier the higher), and 7 when its bind
/// would wait for another pod's node lock. A node that does not fit scores 0.
pub fn extender_scores<'a>(names: &'a [Cow<'a, str>], scored: &Scored) -> Vec<(&'a str, i64)> {
    let locked = |n: &str| scored.locked.iter().any(|l| l.as_str() == n);
    let open = || scored.scores.iter().filter(|(n, _)| !locked(n.as_str())).map(|(_, s)| *s);
    let lo = open().fold(f32::INFINITY, f32::min);
    let hi = open().fold(f32::NEG_INFINITY, f32::max);
    let band = (MAX_EXTENDER_PRIORITY - 1 - FIT_FLOOR) as f64;
    names
        .iter()
        .map(|n| {
            let n = n.as_ref();
            let score = match scored.scores.get(n) {
                _ if scored.reserved.as_ref().is_some_and(|r| r.as_str() == n) => MAX_EXTENDER_PRIORITY,
                Some(_) if locked(n) => FIT_FLOOR,
                Some(s) if hi > lo => {
                    let better = match scored.policy {
                        NodePolicy::Spread => (hi - s) / (hi - lo),
                        _ => (s - lo) / (hi - lo),
                    };
                    FIT_FLOOR + (f64::from(better) * band).round() as i64
                }
                Some(_) => MAX_EXTENDER_PRIORITY - 1,
                None => 0,
            };
            (n, score.clamp(0, MAX_EXTENDER_PRIORITY))
        })
        .collect()
}
