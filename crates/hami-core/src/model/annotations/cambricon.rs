//! Annotation keys of the Cambricon vendor. The node lock `cambricon.com/dsmlu.lock` is
//! [`super::CAMBRICON_LOCK`]: the backends own it.

/// Devices the device plugin still has to serve (`uuid,MLU,mem,cores:` per container).
pub const TO_ALLOCATE: &str = "hami.io/cambricon-mlu-devices-to-allocate";
/// Devices the pod holds; usage is rebuilt from it.
pub const ALLOCATED: &str = "hami.io/cambricon-mlu-devices-allocated";
/// Always written `"false"` at Filter; the device plugin flips it once the profile is realised.
pub const DSMLU_ASSIGNED: &str = "CAMBRICON_DSMLU_ASSIGNED";
/// `<device index>_<cores>_<memory in 256 MiB units>` of the pod's first device.
pub const DSMLU_PROFILE: &str = "CAMBRICON_DSMLU_PROFILE";
/// Type selection HAMi declares but never enforces (see `vendor::cambricon`).
pub const USE_TYPE: &str = "cambricon.com/use-mlutype";
pub const NOUSE_TYPE: &str = "cambricon.com/nouse-mlutype";
/// UUID selection (exact device ids, e.g. `node-a-cambricon-mlu-2`).
pub const USE_UUID: &str = "cambricon.com/use-gpuuuid";
pub const NOUSE_UUID: &str = "cambricon.com/nouse-gpuuuid";
