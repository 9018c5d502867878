//! What a node holds, as its actor reports it: every allocation with its state, the claims it
//! keeps, the snapshot and the bind lock's holder; and the per-device JSON shapes of that view
//! (`/usage`, the simulator, the console) with each device's state. Plain data.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

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

#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceJson {
    pub vendor: String,
    pub uuid: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub index: u32,
    pub numa: i32,
    pub healthy: bool,
    /// Takes no new allocations (NVIDIA's `hami.io/device-cordon`).
    pub cordoned: bool,
    pub count: u32,
    pub used: u32,
    pub mem_total: u64,
    pub mem_used: u64,
    pub cores_total: u32,
    pub cores_used: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NodeJson {
    pub name: String,
    pub devices: Vec<DeviceJson>,
    /// The HAMi annotations on the node (register, handshake, locks); `/usage` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Why the node's devices are unusable, when its registration is malformed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unusable: Option<String>,
    /// The UID of the preemptor the node holds its victims' devices for, while it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_for: Option<String>,
}

/// A device's state as the console and `kubectl hami` show it. The console also tells the shared
/// devices whose free memory no pending pod could use (fragmented), which needs the pending pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeviceState {
    Idle,
    Shared,
    Full,
    /// On a node that holds its devices for a preemptor.
    Held,
    /// Takes no new allocations, whatever it holds.
    Cordoned,
    Unhealthy,
}

impl DeviceState {
    pub fn of(n: &NodeJson, d: &DeviceJson) -> DeviceState {
        if !d.healthy {
            DeviceState::Unhealthy
        } else if d.cordoned {
            DeviceState::Cordoned
        } else if n.held_for.is_some() {
            DeviceState::Held
        } else if d.used == 0 {
            DeviceState::Idle
        } else if n.unusable.is_some()
            || d.used >= d.count
            || d.mem_used >= d.mem_total
            || d.cores_used >= d.cores_total
        {
            DeviceState::Full
        } else {
            DeviceState::Shared
        }
    }
    pub fn word(self) -> &'static str {
        match self {
            DeviceState::Idle => "idle",
            DeviceState::Shared => "shared",
            DeviceState::Full => "full",
            DeviceState::Held => "held",
            DeviceState::Cordoned => "cordoned",
            DeviceState::Unhealthy => "unhealthy",
        }
    }
}
