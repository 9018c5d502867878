//! HAMi's annotation and label keys, spelled exactly as HAMi and its device plugins spell them.
//! Every key used anywhere in hami-rs is defined here once; vendors' own keys live in the
//! per-vendor submodules.

pub mod amd;
pub mod ascend;
pub mod awsneuron;
pub mod biren;
pub mod cambricon;
pub mod enflame;
pub mod enflame_drs;
pub mod hcu;
pub mod hygon;
pub mod iluvatar;
pub mod kunlun;
pub mod kunlun_vxpu;
pub mod metax;
pub mod metax_sgpu;
pub mod mthreads;
pub mod vastai;

// --- pod keys written by the scheduler (at Filter, at Bind)
/// Chosen node; also written as a label with the same key.
pub const ASSIGNED_NODE: &str = "hami.io/vgpu-node";
/// Unix seconds of the Filter decision.
pub const ASSIGNED_TIME: &str = "hami.io/vgpu-time";
pub const BIND_PHASE: &str = "hami.io/bind-phase";
pub const BIND_TIME: &str = "hami.io/bind-time";
pub const BIND_PHASE_ALLOCATING: &str = "allocating";
pub const BIND_PHASE_SUCCESS: &str = "success";
pub const BIND_PHASE_FAILED: &str = "failed";

// --- pod keys the scheduler reads
pub const NODE_SCHEDULER_POLICY: &str = "hami.io/node-scheduler-policy";
pub const GPU_SCHEDULER_POLICY: &str = "hami.io/gpu-scheduler-policy";
pub const DEVICE_SCORING_WEIGHTS: &str = "hami.io/device-scoring-weights";
/// How the device plugin reconciles kubelet's NUMA-aligned choice with the annotated devices:
/// `best-effort` or `strict` (read by the webhook and the plugin; see `model::numa_alignment`).
pub const NUMA_ALIGNMENT: &str = "hami.io/numa-alignment";
/// PodGroup membership label: Bind retries lock contention.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

// --- node keys
/// The shared node lock.
pub const NODE_LOCK: &str = "hami.io/mutex.lock";
/// Cambricon's own node lock (a bare RFC3339 time).
pub const CAMBRICON_LOCK: &str = "cambricon.com/dsmlu.lock";

// --- NVIDIA
pub const NVIDIA_REGISTER: &str = "hami.io/node-nvidia-register";
pub const NVIDIA_SCORE: &str = "hami.io/node-nvidia-score";
pub const NVIDIA_HANDSHAKE: &str = "hami.io/node-handshake";
pub const NVIDIA_CORDON: &str = "hami.io/device-cordon";
pub const NVIDIA_TO_ALLOCATE: &str = "hami.io/vgpu-devices-to-allocate";
pub const NVIDIA_ALLOCATED: &str = "hami.io/vgpu-devices-allocated";
pub const NVIDIA_MIG_ALLOCATIONS: &str = "hami.io/vgpu-mig-allocations";
pub const NVIDIA_USE_TYPE: &str = "nvidia.com/use-gputype";
pub const NVIDIA_NOUSE_TYPE: &str = "nvidia.com/nouse-gputype";
pub const NVIDIA_USE_UUID: &str = "nvidia.com/use-gpuuuid";
pub const NVIDIA_NOUSE_UUID: &str = "nvidia.com/nouse-gpuuuid";
pub const NVIDIA_NUMA_BIND: &str = "nvidia.com/numa-bind";
pub const NVIDIA_VGPU_MODE: &str = "nvidia.com/vgpu-mode";

// --- labels the scheduler keeps on its own pods
pub const SCHEDULER_ROLE: &str = "hami.io/scheduler-role";
pub const SCHEDULER_COMPONENT_LABEL: &str = "app.kubernetes.io/component";
