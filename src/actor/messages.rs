//! Messages to node actors and the coordinator, one documented struct each, with the reply type.
//! Commands: `Filter`, `Reserve`, `Commit`, `Release`, `Lock`, `Unlock`; observations:
//! `NodeRegistered`, `NodeRemoved`, `PodObserved`, `PodDeleted`; queries: `Report`.

use std::sync::Arc;
use std::time::Duration;

use actix::Message;

use crate::model::pod::NodeView;
use crate::model::{PodDevices, PodRequest, PodUid};
use crate::sched::Rejection;
use crate::sched::accounting::Layout;

/// Read-only fit and score of a pod on the node's current usage.
#[derive(Message)]
#[rtype(result = "Result<f32, Rejection>")]
pub struct Filter {
    pub pod: Arc<PodRequest>,
}

/// Reserve the pod on this node. The actor re-runs the fit against its current usage (the
/// Filter answer is only advisory) and checks the invariant before accepting. With `exact`, the
/// given devices are validated instead (a bind whose reservation expired, after the pod's
/// annotations were written). A reservation not committed within `ttl` is released.
#[derive(Message)]
#[rtype(result = "Result<Reserved, Rejection>")]
pub struct Reserve {
    pub pod: Arc<PodRequest>,
    pub exact: Option<PodDevices>,
    pub ttl: Duration,
}

/// What a reservation holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Reserved {
    pub devices: PodDevices,
    pub score: f32,
}

/// The pod is bound: its reservation no longer expires. Replies the devices it holds (what the
/// decision written at bind names); errors when there is no reservation.
#[derive(Message)]
#[rtype(result = "Result<PodDevices, NotReserved>")]
pub struct Commit {
    pub uid: PodUid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no reservation for this pod on this node (it expired or was released)")]
pub struct NotReserved;

/// Drop the pod's reservation. With `only_reserved`, a committed (bound) pod is left alone.
/// Replies whether something was released.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct Release {
    pub uid: PodUid,
    pub only_reserved: bool,
}

/// A preemption's hold: the one record of it, shared by the node that keeps the devices for the
/// preemptor (see `node/hold.rs`) and the engine's pod book, which finds it by the preemptor.
#[derive(Debug)]
pub struct Hold {
    pub uid: PodUid,
    /// Tells this hold from a later one for the same pod (a lapse timer drops only its own).
    pub id: u64,
    pub node: crate::model::NodeName,
    pub devices: Vec<crate::model::DeviceUuid>,
    /// Whom the preemption evicted for it.
    pub victims: Vec<crate::port::PodRef>,
}

/// Keep the devices of `Hold` for its preemptor. Replies false when the node already holds
/// devices for another pod.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct SetHold(pub Arc<Hold>);

/// Drop the hold for a pod (only hold `id` when given). Replies whether there was one.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct DropHold {
    pub uid: PodUid,
    pub id: Option<u64>,
}

/// Take the node's in-process bind lock for a pod (HAMi's per-node mutex). Granted at once when
/// free (or already this pod's); otherwise the pod queues and the reply comes when its turn
/// does, first come first served. Replies `false` when the node actor stops first, or at once
/// when the lock is held and `queue` is off. A caller that gives up waiting sends `Unlock`, which
/// also takes it out of the queue.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct Lock {
    pub uid: PodUid,
    pub queue: bool,
}

/// Release the in-process bind lock if this pod holds it (the next in line gets it), or leave
/// the queue if it is waiting.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Unlock {
    pub uid: PodUid,
}

/// The node object changed (labels or annotations): re-read its devices.
#[derive(Message)]
#[rtype(result = "Registration")]
pub struct NodeRegistered {
    pub node: Arc<NodeView>,
}

/// Outcome of reading a node's devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Registration {
    /// Devices read; `changed` when they differ from before.
    Ok { devices: usize, changed: bool },
    /// An annotation could not be decoded: the node's devices are unusable until it is fixed.
    Malformed { reason: String },
}

/// The health round found these vendors' devices dead on the node: they are left out until a later
/// round finds them alive again (an empty list).
#[derive(Message)]
#[rtype(result = "()")]
pub struct VendorHealth {
    pub unhealthy: Vec<crate::model::VendorId>,
}

/// The node is gone: the actor stops.
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeRemoved;

/// A pod with HAMi annotations for this node, as the cluster shows it.
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub struct PodObserved {
    pub uid: PodUid,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub devices: PodDevices,
    /// Placements held beyond `devices` (MIG reservations no entry consumed).
    pub held: Vec<(crate::model::VendorId, crate::model::DeviceUuid, crate::model::device::MigSlot)>,
    pub layout: Layout,
    /// The pod's task class and QoS per vendor (from its annotations).
    pub tags: crate::sched::accounting::Tags,
    /// `spec.nodeName` is set: the pod is bound and its devices are committed.
    pub bound: bool,
    pub ttl: Duration,
}

/// The pod finished or was deleted: it holds nothing any more.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct PodDeleted {
    pub uid: PodUid,
}

/// Answers once the node has applied everything sent to it before: a barrier, for a loader
/// that must know its observations are counted, without a report's copy of every allocation.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Settle;

/// The node's allocations, for `/usage` and the status page.
#[derive(Message)]
#[rtype(result = "NodeReport")]
pub struct Report;

pub use crate::sched::report::{AllocReport, AllocState, NodeReport};

/// A NUMA refit as the node actor checks it: the request's identity, the container's position
/// (init containers first), the vendor and the device ids the container may move to.
#[derive(Clone, Debug)]
pub struct RefitAsk {
    pub uid: PodUid,
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub index: i64,
    /// Empty: not checked.
    pub container_name: String,
    pub vendor: crate::model::VendorId,
    pub allowed: Vec<String>,
}

/// Move one container's devices onto the allowed set, on the node that holds the pod: checked,
/// re-fitted on the node's devices restricted to the allowed ones (the container's own usage
/// released, the pod's other containers counted) and validated like a reservation. A move is
/// held as what covers both the old and the new devices, in usage and quota, until
/// [`RefitSettle`] says whether the pod's annotations were written.
#[derive(Message)]
#[rtype(result = "Result<RefitPlan, RefitFailure>")]
pub struct Refit {
    pub ask: Arc<RefitAsk>,
    /// The pod as the backend's cache holds it under the asked name, if it does.
    pub pod: Option<Arc<crate::model::PodView>>,
    /// That copy's request (policies, NUMA binding, weights, layout), or why it does not parse.
    pub request: Result<Arc<PodRequest>, String>,
}

/// What a refit does.
#[derive(Clone, Debug, PartialEq)]
pub enum RefitPlan {
    /// Every device the container holds is allowed already: nothing changes.
    Unchanged { devices: String },
    /// Held in the node actor; the annotations are to be written, then [`RefitSettle`] sent.
    Moved(RefitMove),
}

/// A move waiting for its annotation write.
#[derive(Clone, Debug, PartialEq)]
pub struct RefitMove {
    /// The container's position.
    pub index: usize,
    pub from: Vec<String>,
    pub to: Vec<String>,
    /// The container's new devices, as one annotation entry.
    pub devices: String,
    /// The two NVIDIA annotations with that entry replaced.
    pub to_allocate: String,
    pub allocated: String,
    /// The resource version of the copy they were rewritten from.
    pub resource_version: String,
}

/// Why a refit was refused; `event`: the refusal is recorded as a Warning Event on the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefitFailure {
    pub reason: String,
    pub event: bool,
}

/// The annotation write of a held move is done: `written` keeps the new devices, otherwise the
/// old ones (or what the cluster showed meanwhile) come back.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RefitSettle {
    pub uid: PodUid,
    pub written: bool,
}
