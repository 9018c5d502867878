//! Annotation keys of the Vastai vendor. Note the capital V in the pod keys.

/// Node: the JSON device list the Vastai device plugin publishes.
pub const REGISTER: &str = "hami.io/node-va-register";
/// Node: the `Requesting_<time>` handshake the scheduler writes.
pub const HANDSHAKE: &str = "hami.io/node-handshake-va";
/// Pod: the devices the device plugin still has to hand out.
pub const TO_ALLOCATE: &str = "hami.io/Vastai-devices-to-allocate";
/// Pod: what the scheduler allocated.
pub const ALLOCATED: &str = "hami.io/Vastai-devices-allocated";
/// Pod: only device types containing one of these (HAMi declares it without enforcing it).
pub const USE_TYPE: &str = "vastaitech.com/use-va";
/// Pod: no device type containing one of these (HAMi declares it without enforcing it).
pub const NOUSE_TYPE: &str = "vastaitech.com/nouse-va";
/// Pod: only these device ids.
pub const USE_UUID: &str = "vastaitech.com/use-gpuuuid";
/// Pod: never these device ids.
pub const NOUSE_UUID: &str = "vastaitech.com/nouse-gpuuuid";
