//! Annotation keys of the Iluvatar vendor. Every key embeds the chip's common word `<cw>` (e.g.
//! `BI-V150`), so the keys are built from the pieces below by the functions at the end; nothing
//! else spells them.

/// Node `hami.io/node-<cw>-register`: the device plugin's device list (colon form; JSON too).
pub const REGISTER_PREFIX: &str = "hami.io/node-";
pub const REGISTER_SUFFIX: &str = "-register";
/// Node `hami.io/node-handshake-<cw>`: the `Requesting_<time>` handshake.
pub const HANDSHAKE_PREFIX: &str = "hami.io/node-handshake-";
/// Pod `hami.io/<cw>-devices-to-allocate` / `hami.io/<cw>-devices-allocated`.
pub const POD_PREFIX: &str = "hami.io/";
pub const TO_ALLOCATE_SUFFIX: &str = "-devices-to-allocate";
pub const ALLOCATED_SUFFIX: &str = "-devices-allocated";
/// Pod `hami.io/use-<cw>-uuid` / `hami.io/no-use-<cw>-uuid`: exact device ids.
pub const USE_UUID_PREFIX: &str = "hami.io/use-";
pub const NOUSE_UUID_PREFIX: &str = "hami.io/no-use-";
pub const UUID_SUFFIX: &str = "-uuid";

pub fn register(cw: &str) -> String {
    format!("{REGISTER_PREFIX}{cw}{REGISTER_SUFFIX}")
}
pub fn handshake(cw: &str) -> String {
    format!("{HANDSHAKE_PREFIX}{cw}")
}
pub fn to_allocate(cw: &str) -> String {
    format!("{POD_PREFIX}{cw}{TO_ALLOCATE_SUFFIX}")
}
pub fn allocated(cw: &str) -> String {
    format!("{POD_PREFIX}{cw}{ALLOCATED_SUFFIX}")
}
pub fn use_uuid(cw: &str) -> String {
    format!("{USE_UUID_PREFIX}{cw}{UUID_SUFFIX}")
}
pub fn nouse_uuid(cw: &str) -> String {
    format!("{NOUSE_UUID_PREFIX}{cw}{UUID_SUFFIX}")
}
