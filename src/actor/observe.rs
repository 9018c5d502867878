//! What the cluster shows the engine: nodes registered, changed or removed, pods observed or
//! deleted. Each observation goes to the owning node actor as a message.

use std::sync::Arc;

use crate::actor::Inner;
use crate::actor::messages::{Holding, NodeRegistered, PodObserved, Registration, VendorHealth};
use crate::devices::Vendors;
use crate::model::annotations as keys;
use crate::model::pod::NodeView;
use crate::model::{PodDevices, PodUid, PodView};
use crate::port::{Backend, Event, EventType, ObjectKind, PodRef, reasons};
use crate::sched::accounting::{self, Layout};
impl<B: Backend> Inner<B> {
    /// A node was added or its labels/annotations changed. A malformed registration marks the
    /// node's devices unusable, logs why and records an Event; other nodes are unaffected.
    pub async fn register_node(self: &Arc<Self>, node: Arc<NodeView>) -> Registration {
        let name = node.metadata.name.clone();
        self.nodes.restored(name.as_str());
        let addr = self.nodes.actor(&name);
        let r = match addr.send(NodeRegistered { node }).await {
            Ok(r) => r,
            Err(_) => return Registration::Malformed { reason: "node actor stopped".into() },
        };
        if let Registration::Malformed { reason } = &r {
            tracing::warn!(node = %name, %reason, "node devices unusable");
            self.backend.record_event(Event {
                object: ObjectKind::Node,
                pod: PodRef { namespace: String::new(), name: name.clone(), uid: String::new() },
                reason: reasons::DEVICE_REGISTRATION_INVALID,
                kind: EventType::Warning,
                message: reason.clone(),
            });
        }
        r
    }

    /// Vendors whose devices the health round found dead on `node` (empty: all alive).
    pub fn set_unhealthy(self: &Arc<Self>, node: &str, unhealthy: Vec<crate::model::VendorId>) {
        self.nodes.actor(node).do_send(VendorHealth { unhealthy });
    }

    /// The node is gone, with every allocation it held. Until it is registered again, pods that
    /// name it are not counted (they would bring back a node nobody registered); whoever
    /// registers it again observes the pods still bound to it once more ([`Engine::was_removed`]).
    pub fn remove_node(self: &Arc<Self>, name: &str) {
        self.nodes.remove(name);
    }

    /// Whether the node was removed and not registered since: its pods need observing again once
    /// it is registered.
    pub fn was_removed(self: &Arc<Self>, name: &str) -> bool {
        self.nodes.was_removed(name)
    }

    /// A pod as the cluster shows it. Pods without `hami.io/vgpu-node` are ignored; finished
    /// pods release what they held; terminating pods keep their devices until deleted.
    pub fn observe_pod(self: &Arc<Self>, pod: &PodView) {
        let uid = PodUid::new(&pod.metadata.uid);
        if pod.is_finished() {
            self.delete_pod(&uid);
            return;
        }
        self.observe_member(pod);
        if pod.spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
            self.pods.settled(&uid);
            self.pods.pending.gone(uid.as_str());
        }
        let Some(node) = pod.annotation(keys::ASSIGNED_NODE) else { return };
        if self.nodes.was_removed(node) {
            self.delete_pod(&uid);
            return;
        }
        let devices = match self.vendors.decode_allocation(pod) {
            Ok(d) => d,
            Err(e) => {
                // HAMi ignores such a pod's usage; say so, since it may hold devices.
                tracing::warn!(pod = %format_args!("{}/{}", pod.metadata.namespace, pod.metadata.name), error = %e, "pod device annotations are malformed; its usage is not counted");
                return;
            }
        };
        let devices = align(&self.vendors, pod, devices);
        let held = self.vendors.decode_held(pod);
        let holds = |v| devices.vendor(v).is_some() || held.iter().any(|(h, _, _)| *h == v);
        let tags = accounting::tags_of(&self.vendors, &pod.metadata.annotations, holds);
        let obs = PodObserved {
            uid: uid.clone(),
            namespace: Arc::from(pod.metadata.namespace.as_str()),
            name: Arc::from(pod.metadata.name.as_str()),
            devices,
            held,
            layout: Layout {
                n_init: pod.spec.init_containers.len(),
                sidecars: pod.spec.init_containers.iter().map(|c| c.is_sidecar()).collect(),
                init_released: !pod.spec.init_containers.is_empty() && pod.init_containers_succeeded(),
            },
            tags,
            bound: pod.spec.node_name.as_deref().is_some_and(|n| !n.is_empty()),
            ttl: self.cfg.reservation_ttl,
        };
        // A pod moved to another node (a new decision) is dropped from the old one first.
        let nodes = &self.nodes;
        if let Some(prev) = nodes.placement(&uid)
            && prev.as_str() != node
        {
            self.unreserve_soon(
                prev.as_str(),
                Holding::Reservation { uid: uid.clone(), only_reserved: false },
                "placed elsewhere",
            );
        }
        nodes.actor(node).pod_observed(obs);
    }

    /// Observes the pod as the backend's cache holds it now (just read from the source after a
    /// write found it bound).
    pub(super) fn observe_read(self: &Arc<Self>, pod: &PodRef) {
        if let Some(v) = self.backend.pod(&pod.namespace, &pod.name) {
            self.observe_pod(&v);
        }
    }

    /// The pod is gone (deleted, or finished).
    pub fn delete_pod(self: &Arc<Self>, uid: &PodUid) {
        self.pods.settled(uid);
        self.pods.pending.gone(uid.as_str());
        self.forget_member(uid);
        self.give_back_pod(uid);
    }
}

/// Places each vendor's decoded entries on the pod's containers (see `accounting::align`).
pub(super) fn align(vendors: &Vendors, pod: &PodView, mut devices: PodDevices) -> PodDevices {
    for (v, list) in devices.0.iter_mut() {
        let vendor = vendors.get(*v);
        let requesting: Vec<bool> = pod
            .all_containers()
            .map(|c| vendor.request(*v, c, pod).ok().flatten().is_some_and(|r| r.nums > 0))
            .collect();
        *list = accounting::align(std::mem::take(list), &requesting);
    }
    devices
}
