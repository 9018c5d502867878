//! Annotation keys of the Hygon DCU vendor.

/// Node: the device plugin's device list (legacy colon form; JSON accepted too).
pub const REGISTER: &str = "hami.io/node-dcu-register";
/// Node: the `Requesting_<time>` handshake the scheduler writes.
pub const HANDSHAKE: &str = "hami.io/node-handshake-dcu";
pub const TO_ALLOCATE: &str = "hami.io/dcu-devices-to-allocate";
pub const ALLOCATED: &str = "hami.io/dcu-devices-allocated";
/// Pod: case-insensitive substrings of the device type.
pub const USE_TYPE: &str = "hygon.com/use-dcutype";
pub const NOUSE_TYPE: &str = "hygon.com/nouse-dcutype";
/// Pod: exact device ids.
pub const USE_UUID: &str = "hygon.com/use-gpuuuid";
pub const NOUSE_UUID: &str = "hygon.com/nouse-gpuuuid";
