//! Annotation keys of the Hygon HCU vendor: Hygon's DCU under the name HAMi gave it in PR 2969
//! (the same protocol, renamed keys; the UUID selectors kept their names).

/// Node: the device plugin's device list (the colon form; JSON accepted too).
pub const REGISTER: &str = "hami.io/node-hcu-register";
/// Node: the `Requesting_<time>` handshake the scheduler writes.
pub const HANDSHAKE: &str = "hami.io/node-handshake-hcu";
pub const TO_ALLOCATE: &str = "hami.io/hcu-devices-to-allocate";
pub const ALLOCATED: &str = "hami.io/hcu-devices-allocated";
/// Pod: case-insensitive substrings of the device type.
pub const USE_TYPE: &str = "hygon.com/use-hcutype";
pub const NOUSE_TYPE: &str = "hygon.com/nouse-hcutype";
/// Pod: exact device ids (the names DCU used, kept by the rename).
pub const USE_UUID: &str = "hygon.com/use-gpuuuid";
pub const NOUSE_UUID: &str = "hygon.com/nouse-gpuuuid";
