//! Annotation keys of the Mthreads vendor.

/// Pod: devices the pod holds. Mthreads writes no to-allocate key.
pub const ALLOCATED: &str = "hami.io/mthreads-vgpu-devices-allocated";
/// HAMi registers this key as Mthreads' pending list though its scheduler never writes it; a pod
/// created with it is still refused.
pub const TO_ALLOCATE: &str = "hami.io/mthreads-vgpu-devices-to-allocate";
/// Pod: comma list of the device indexes of the last container holding devices.
pub const GPU_INDEX: &str = "mthreads.com/gpu-index";
/// Pod: unix-ns of the Filter decision.
pub const PREDICATE_TIME: &str = "mthreads.com/predicate-time";
/// Pod: the chosen node.
pub const PREDICATE_NODE: &str = "mthreads.com/predicate-node";
/// Pod: written by the webhook for multi-GPU containers (whole GPUs).
pub const REQUEST_GPU_NUM: &str = "mthreads.com/request-gpu-num";
/// Pod: exact device ids (note `.ai`, not `.com`).
pub const USE_UUID: &str = "mthreads.ai/use-gpuuuid";
pub const NOUSE_UUID: &str = "mthreads.ai/nouse-gpuuuid";
