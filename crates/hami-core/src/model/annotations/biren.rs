//! Annotation keys of the Biren vendor. Note the capital B in the pod keys.

/// Node: the JSON device list the Biren device plugin publishes.
pub const REGISTER: &str = "hami.io/node-biren-register";
/// Node: the `Requesting_<time>` handshake the scheduler writes.
pub const HANDSHAKE: &str = "hami.io/node-handshake-biren";
/// Pod: the devices the device plugin still has to hand out.
pub const TO_ALLOCATE: &str = "hami.io/Biren-devices-to-allocate";
/// Pod: what the scheduler allocated.
pub const ALLOCATED: &str = "hami.io/Biren-devices-allocated";
/// Pod: only device types containing one of these (HAMi declares it without enforcing it).
pub const USE_TYPE: &str = "birentech.com/use-biren";
/// Pod: no device type containing one of these (HAMi declares it without enforcing it).
pub const NOUSE_TYPE: &str = "birentech.com/nouse-biren";
/// Pod: only these device ids.
pub const USE_UUID: &str = "birentech.com/use-gpuuuid";
/// Pod: never these device ids.
pub const NOUSE_UUID: &str = "birentech.com/nouse-gpuuuid";
