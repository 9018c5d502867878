//! Annotation keys of the AMD vendor.

/// Node: the JSON device list the AMD device plugin publishes; removed by clean-up.
pub const REGISTER: &str = "hami.io/node-amd-register";
/// Pod: the devices the device plugin still has to hand out.
pub const TO_ALLOCATE: &str = "hami.io/amd-devices-to-allocate";
/// Pod: what the scheduler allocated (type field = the device's product name).
pub const ALLOCATED: &str = "hami.io/amd-devices-allocated";
/// Pod: only device types containing one of these (comma list, case-insensitive).
pub const USE_TYPE: &str = "amd.com/use-gputype";
/// Pod: no device type containing one of these.
pub const NOUSE_TYPE: &str = "amd.com/nouse-gputype";
/// Pod: only these device ids.
pub const USE_UUID: &str = "amd.com/use-gpu-uuid";
/// Pod: never these device ids.
pub const NOUSE_UUID: &str = "amd.com/nouse-gpu-uuid";
