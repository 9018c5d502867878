//! Pure scheduling: per-node fit and scoring of a pod (fit.rs), device order and node choice
//! (score.rs), usage accounting from allocations (accounting.rs), quota arithmetic (quota.rs) and
//! rejection reasons (reason.rs). No I/O, no clock, no actors.

use std::sync::Arc;

use crate::model::{DeviceUsage, NodeName};
use crate::vendor::NodeExtra;

pub mod accounting;
pub mod fit;
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
}

impl NodeSnapshot {
    pub fn new(name: NodeName, devices: Vec<DeviceUsage>, extras: Vec<Option<NodeExtra>>) -> NodeSnapshot {
        NodeSnapshot { name, devices, extras, unusable: None, generation: 0 }
    }
    pub fn extra(&self, v: crate::model::VendorId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.extras.get(usize::from(v.0)).and_then(|e| e.as_deref())
    }
}
