//! Messages to node actors and the coordinator, one documented struct each, with the reply type.
//! Commands: `Filter`, `Reserve`, `Commit`, `Unreserve`, `TakeClaim`, `Lock`, `Unlock`;
//! observations: `NodeRegistered`, `NodeRemoved`, `PodObserved`; queries: `Report`.

use std::sync::Arc;
use std::time::Duration;

use actix::Message;

use crate::model::pod::NodeView;
use crate::model::{PodDevices, PodRequest, PodUid};
use crate::sched::Rejection;
use crate::sched::accounting::Layout;
use crate::sched::claim::ClaimKey;

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
    /// The claim the pod reserves from, if the node keeps one for it: the pod then fits on the
    /// node without that claim (its own capacity), and the claim ends with the reservation.
    pub claim: Option<ClaimKey>,
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

/// Give back what a node keeps: the one way a reservation or a claim is released, whether a
/// filter drops its pod's earlier attempt, a bind fails, a preemption ends, a claim lapses or a
/// pod is deleted. Replies whether something was given back.
#[derive(Message, Clone, Debug)]
#[rtype(result = "bool")]
pub struct Unreserve(pub Holding);

/// What `Unreserve` gives back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holding {
    /// The pod's allocation; with `only_reserved`, a committed (bound) pod keeps it. Its claims
    /// stay.
    Reservation { uid: PodUid, only_reserved: bool },
    /// The claim for `key` (only claim `id` when given).
    Claim { key: ClaimKey, id: Option<u64> },
    /// The pod is gone: its allocation and every claim keyed by its UID.
    Pod { uid: PodUid },
}

/// Keep a claim for `key`: the devices `pod` is to take, charged as the node would charge its
/// reservation, checked against the node's usage without the pods of `gone` (a preemption's
/// victims, on their way out) and beside every other claim; refused when it does not fit. It
/// lapses after `ttl` unless its pod reserves from it first.
#[derive(Message, Clone)]
#[rtype(result = "Result<(), Rejection>")]
pub struct TakeClaim {
    pub key: ClaimKey,
    pub id: u64,
    pub pod: Arc<PodRequest>,
    pub devices: PodDevices,
    pub ttl: Duration,
    pub gone: Vec<PodUid>,
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
