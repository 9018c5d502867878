//! Annotation keys of the Enflame DRS vGCU vendor (hard partitions of a GCU).

/// Node: the DRS capacity JSON (`{"devices":[…],"profiles":{…}}`) the device plugin publishes.
pub const DRS_CAPACITY: &str = "enflame.com/gcu-drs-capacity";
/// Pod: what the scheduler allocated (there is no to-allocate key for DRS).
pub const ALLOCATED: &str = "hami.io/enflame-vgpu-devices-allocated";
/// Pod: `"false"` until the device plugin has served the pod.
pub const ASSIGNED: &str = "enflame.com/gcu-assigned";
/// Pod: unix-ns of the decision.
pub const ASSIGNED_TIME: &str = "enflame.com/gcu-assigned-time";
/// Pod: JSON object, container name → `{"allocated","request","profileID","profileName"}`.
pub const ASSIGNED_CONTAINERS: &str = "assigned-containers";
/// Pod: device index of the first container's device.
pub const ASSIGNED_INDEX: &str = "enflame.com/gcu-assigned-index";
/// Pod: the same device index, under the key older plugins read.
pub const ASSIGNED_ID: &str = "enflame.com/gcu-assigned-id";
/// Pod: device minor number of the first container's device.
pub const ASSIGNED_MINOR: &str = "enflame.com/gcu-assigned-minor";
/// Pod: slices of the first container's profile.
pub const REQUEST_SIZE: &str = "enflame.com/gcu-request-size";
/// Pod: only these device ids (comma list).
pub const USE_UUID: &str = "enflame.com/use-gpuuuid";
/// Pod: never these device ids (comma list).
pub const NOUSE_UUID: &str = "enflame.com/nouse-gpuuuid";
