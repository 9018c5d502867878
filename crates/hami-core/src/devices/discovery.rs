//! What a vendor finds on a node: its devices and the per-node data it reads beside them, or why
//! its annotation cannot be read.

use std::any::Any;
use std::sync::Arc;

use crate::model::DeviceInfo;
use crate::model::codec;

/// Opaque per-node data a vendor read from the node (cordon list, pair scores, topology maps).
pub type NodeExtra = Arc<dyn Any + Send + Sync>;

/// What a vendor found on a node.
pub enum Discovery {
    /// The node has no devices of this vendor.
    Absent,
    Devices {
        devices: Vec<DeviceInfo>,
        extra: Option<NodeExtra>,
    },
    /// The vendor's annotation is present but cannot be decoded.
    Malformed {
        key: String,
        error: codec::Error,
    },
}

impl Discovery {
    /// Devices and no node extras, what most vendors find.
    pub fn devices(devices: Vec<DeviceInfo>) -> Discovery {
        Discovery::Devices { devices, extra: None }
    }
}
