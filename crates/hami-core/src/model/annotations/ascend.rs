//! Annotation keys of the Ascend vNPU vendors (one per configured chip). Most keys carry the chip's
//! common word; the functions below are the only place they are built.

/// Node: the device plugin's JSON list is `hami.io/node-register-<cw>`.
pub const REGISTER_PREFIX: &str = "hami.io/node-register-";
/// Node: the handshake is `hami.io/node-handshake-<cw>`.
pub const HANDSHAKE_PREFIX: &str = "hami.io/node-handshake-";
/// Node: `"true"` lets the node take hami-core pods (overrides the config's `hamiVnpuCore`).
pub const NODE_HAMI_VNPU_CORE: &str = "hami-vnpu-core";
/// Pod: `hami.io/use-<cw>-uuid` / `hami.io/no-use-<cw>-uuid`.
pub const USE_UUID_PREFIX: &str = "hami.io/use-";
pub const NOUSE_UUID_PREFIX: &str = "hami.io/no-use-";
pub const UUID_SUFFIX: &str = "-uuid";
/// Pod: `hami.io/<cw>-devices-to-allocate` / `hami.io/<cw>-devices-allocated`.
pub const DEVICES_PREFIX: &str = "hami.io/";
pub const TO_ALLOCATE_SUFFIX: &str = "-devices-to-allocate";
pub const ALLOCATED_SUFFIX: &str = "-devices-allocated";
/// Pod: the runtime info list is `huawei.com/<cw>`.
pub const RUNTIME_INFO_PREFIX: &str = "huawei.com/";
/// Pod: unix seconds of the Filter decision (no prefix, as HAMi writes it).
pub const PREDICATE_TIME: &str = "predicate-time";
/// Pod: `hami-core` asks for the soft split.
pub const VNPU_MODE: &str = "huawei.com/vnpu-mode";
pub const VNPU_MODE_HAMI_CORE: &str = "hami-core";
/// `custominfo` key of the device's network (HCCS) group, a JSON number.
pub const CUSTOM_NETWORK_ID: &str = "NetworkID";

pub fn register(cw: &str) -> String {
    format!("{REGISTER_PREFIX}{cw}")
}
pub fn handshake(cw: &str) -> String {
    format!("{HANDSHAKE_PREFIX}{cw}")
}
pub fn use_uuid(cw: &str) -> String {
    format!("{USE_UUID_PREFIX}{cw}{UUID_SUFFIX}")
}
pub fn nouse_uuid(cw: &str) -> String {
    format!("{NOUSE_UUID_PREFIX}{cw}{UUID_SUFFIX}")
}
pub fn to_allocate(cw: &str) -> String {
    format!("{DEVICES_PREFIX}{cw}{TO_ALLOCATE_SUFFIX}")
}
pub fn allocated(cw: &str) -> String {
    format!("{DEVICES_PREFIX}{cw}{ALLOCATED_SUFFIX}")
}
pub fn runtime_info(cw: &str) -> String {
    format!("{RUNTIME_INFO_PREFIX}{cw}")
}
