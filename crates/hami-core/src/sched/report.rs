//! What a node holds, as its actor reports it: every allocation with its state, the claims it
//! keeps, the snapshot and the bind lock's holder. Plain data for `/usage`, the status page, the simulator and the
//! cluster gauges.

use std::sync::Arc;

use crate::model::{NodeName, PodDevices, PodUid};

/// A pod's state on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AllocState {
    Reserved,
    Committed,
}

#[derive(Clone, Debug)]
pub struct AllocReport {
    pub uid: PodUid,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub state: AllocState,
    pub devices: PodDevices,
    /// What the pod holds on each device, as the node's usage counts it.
    pub charges: Vec<crate::sched::accounting::Charge>,
}

#[derive(Clone, Debug)]
pub struct NodeReport {
    pub name: NodeName,
    pub snapshot: Arc<super::NodeSnapshot>,
    pub allocs: Vec<AllocReport>,
    pub locked_by: Option<PodUid>,
    /// The first pod the node keeps a claim for (a preemptor whose victims are leaving), while
    /// it does: what the console and `kubectl hami` name.
    pub held_for: Option<PodUid>,
    /// Every claim the node keeps, with what it takes of each device.
    pub claims: Vec<ClaimReport>,
}

/// Capacity a node keeps for a pod not placed yet (see `sched::claim`).
#[derive(Clone, Debug)]
pub struct ClaimReport {
    pub key: super::claim::ClaimKey,
    pub charges: Vec<crate::sched::accounting::Charge>,
}
