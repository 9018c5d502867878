//! The `Observer` trait, the engine's side of the port: the changes a backend's watchers report.

use std::future::Future;
use std::sync::Arc;

use crate::model::PodView;
use crate::model::pod::NodeView;

/// What a backend's watchers report the cluster's changes to: the engine implements it, so
/// watchers know nothing else of the engine.
pub trait Observer: Clone + Send + Sync + 'static {
    /// The vendors whose resources and annotations the watchers look for.
    fn vendors(&self) -> &crate::devices::Vendors;
    /// A node was added, or its labels, annotations or capacity changed.
    fn register_node(&self, node: Arc<NodeView>) -> impl Future<Output = ()> + Send;
    /// Vendors whose devices the health round found dead on `node` (empty: all alive).
    fn set_unhealthy(&self, node: &str, unhealthy: Vec<crate::model::VendorId>);
    /// The node is gone, with everything it held.
    fn remove_node(&self, name: &str);
    /// Whether the node was removed and not registered since (its pods need observing again).
    fn was_removed(&self, name: &str) -> bool;
    /// A pod as the cluster shows it now.
    fn observe_pod(&self, pod: &PodView);
    /// The pod is gone.
    fn delete_pod(&self, uid: &crate::model::PodUid);
    /// A PodGroup object as the cluster shows it now.
    fn observe_pod_group(&self, group: &crate::model::group::PodGroupObject);
    /// The PodGroup object is gone.
    fn delete_pod_group(&self, id: &crate::model::group::GroupId);
    /// Whether the cluster serves a kind's PodGroup API (the links of one it does not are ignored).
    fn set_group_kind_served(&self, kind: crate::model::group::GroupKind, served: bool);
}
