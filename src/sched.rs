//! Pure scheduling: per-node fit and scoring of a pod (fit.rs), device order and node choice
//! (score.rs), usage accounting from allocations (accounting.rs), quota arithmetic (quota.rs) and
//! rejection reasons (reason.rs). No I/O, no clock, no actors.

use std::sync::Arc;

use crate::devices::NodeExtra;
use crate::model::request::FitKey;
use crate::model::{DeviceUsage, NodeName};

pub mod accounting;
pub mod fit;
pub mod preempt;
pub mod quota;
pub mod quota_book;
pub mod report;
/// Rejection reasons live with the model, so vendors report them without depending on `sched`.
pub use crate::model::reason;
pub mod score;

pub use fit::{NodeFit, Scratch, fit_pod, fit_pod_score};
pub use reason::{Reason, Rejection};

/// An immutable view of one node: its devices with usage, and what its vendors read from it.
/// Node actors publish a new one after every change; readers never see a half-applied update.
#[derive(Clone, Debug)]
pub struct NodeSnapshot {
    pub name: NodeName,
    /// Every vendor's devices, vendors in registry order, with the usage of every allocation.
    pub devices: Vec<DeviceUsage>,
    /// Indexed by `VendorId`.
    pub extras: Vec<Option<NodeExtra>>,
    /// Set when the node's registration is malformed: why its devices are unusable.
    pub unusable: Option<Arc<str>>,
    /// Bumped on every change (for tests and debugging).
    pub generation: u64,
    /// Filter's answers on this snapshot (see [`FitMemo`]).
    pub memo: FitMemo,
}

impl NodeSnapshot {
    pub fn new(name: NodeName, devices: Vec<DeviceUsage>, extras: Vec<Option<NodeExtra>>) -> NodeSnapshot {
        NodeSnapshot { name, devices, extras, unusable: None, generation: 0, memo: FitMemo::default() }
    }
    pub fn extra(&self, v: crate::model::VendorId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.extras.get(usize::from(v.0)).and_then(|e| e.as_deref())
    }
}

/// Answers kept per snapshot: the pod shapes in flight at once each find theirs (the load test's
/// default mix draws 14).
pub const MEMO_SLOTS: usize = 16;

/// Filter's answers on one snapshot, by the pod's [`FitKey`]: pods of one shape arriving one
/// after another (a Deployment's replicas, a Job's workers) find every node that did not change
/// since already evaluated, and only the nodes that did are fitted again. The memo lives and dies
/// with its snapshot, so an answer can never outlive the usage it was computed from. It is filled
/// and read without waiting: a filter that finds it busy evaluates the node itself.
#[derive(Default)]
pub struct FitMemo(std::sync::Mutex<Answers>);

/// Keys apart from answers: a miss scans 16-byte keys, not whole answers. A rejection is boxed:
/// every node of a large cluster keeps a memo, and most answers are fits (two words, not ten).
#[derive(Default)]
struct Answers {
    keys: Vec<FitKey>,
    answers: Vec<Result<f32, Box<Rejection>>>,
}

impl FitMemo {
    /// The answer for `key`, from the memo or from `fit` (then kept, the oldest answer making
    /// room).
    pub fn answer(&self, key: FitKey, fit: impl FnOnce() -> Result<f32, Rejection>) -> Result<f32, Rejection> {
        if let Ok(m) = self.0.try_lock()
            && let Some(i) = m.keys.iter().position(|k| *k == key)
        {
            return m.answers[i].as_ref().copied().map_err(|r| **r);
        }
        let r = fit();
        if let Ok(mut m) = self.0.try_lock()
            && !m.keys.contains(&key)
        {
            if m.keys.len() == MEMO_SLOTS {
                m.keys.remove(0);
                let _ = m.answers.remove(0);
            }
            m.keys.push(key);
            m.answers.push(r.map_err(Box::new));
        }
        r
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |m| m.keys.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A copied snapshot starts with no answers of its own.
impl Clone for FitMemo {
    fn clone(&self) -> Self {
        FitMemo::default()
    }
}

impl std::fmt::Debug for FitMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FitMemo({} answers)", self.len())
    }
}

/// A failed node's text: HAMi's reason, followed by the detail a person needs when `detail`
/// (the reason alone, and an unusable node's cause, otherwise).
pub fn failure_text(r: &Rejection, snap: Option<&NodeSnapshot>, detail: bool) -> String {
    match snap {
        Some(s) if detail => r.render(&s.devices, s.unusable.as_deref()),
        Some(s) => r.answer(s.unusable.as_deref()),
        None => r.hami_text(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pod;

    #[test]
    fn a_memo_answers_a_key_it_holds_keeps_the_newest_few_and_a_copy_starts_empty() {
        let memo = FitMemo::default();
        let key =
            |i: usize| pod().gpu(1).mem_mib(1000 + i as u64).name("p").request_with(&crate::testing::vendors()).fit_key;
        let mut fitted = 0;
        for round in 0..2 {
            for i in 0..MEMO_SLOTS {
                let r = memo.answer(key(i), || {
                    fitted += 1;
                    Ok(i as f32)
                });
                assert_eq!(r, Ok(i as f32), "round {round}");
            }
        }
        assert_eq!(fitted, MEMO_SLOTS, "the second round is answered from the memo");
        assert_eq!(memo.answer(key(99), || Err(Rejection::NodeUnregistered)), Err(Rejection::NodeUnregistered));
        assert_eq!(memo.len(), MEMO_SLOTS);
        // The oldest answer made room.
        assert_eq!(memo.answer(key(0), || Ok(-1.0)), Ok(-1.0));
        assert!(memo.clone().is_empty());
    }
}
