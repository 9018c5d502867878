//! Pure scheduling: per-node fit and scoring of a pod (fit.rs), device order and node choice
//! (score.rs), usage accounting from allocations (accounting.rs), quota arithmetic (quota.rs),
//! rejection reasons (reason.rs), the victims a preemption would evict (victims.rs) and the
//! planner that places many pods on one frozen view (plan.rs). No I/O, no clock, no actors.

use std::sync::Arc;

use crate::devices::NodeExtra;
use crate::model::{DeviceUsage, NodeName};

pub mod accounting;
pub mod claim;
pub mod fit;
pub mod fragmentation;
pub mod plan;
pub mod quota;
pub mod quota_book;
pub mod report;
pub mod victims;
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
    /// Bumped on every change: Filter's answer tables know an answer is current by it.
    pub generation: u64,
}

impl NodeSnapshot {
    pub fn new(name: NodeName, devices: Vec<DeviceUsage>, extras: Vec<Option<NodeExtra>>) -> NodeSnapshot {
        NodeSnapshot { name, devices, extras, unusable: None, generation: 0 }
    }
    pub fn extra(&self, v: crate::model::VendorId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.extras.get(usize::from(v.0)).and_then(|e| e.as_deref())
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
