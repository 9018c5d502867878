//! Annotation keys of the Kunlun vXPU vendor (shared XPUs).

/// Node: the JSON device list the vXPU device plugin publishes.
pub const REGISTER: &str = "hami.io/node-register-xpu";
/// Node: the `Requesting_<time>` handshake the scheduler writes.
pub const HANDSHAKE: &str = "hami.io/node-handshake-xpu";
/// Pod: the devices the device plugin still has to hand out.
pub const TO_ALLOCATE: &str = "hami.io/xpu-devices-to-allocate";
/// Pod: what the scheduler allocated.
pub const ALLOCATED: &str = "hami.io/xpu-devices-allocated";
/// Pod: only these device ids; checked by both Kunlun vendors next to the `baidu.com` pair.
pub const USE_UUID: &str = "hami.io/use-xpu-uuid";
/// Pod: never these device ids; checked by both Kunlun vendors.
pub const NOUSE_UUID: &str = "hami.io/no-use-xpu-uuid";
