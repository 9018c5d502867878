//! Annotation keys and values of the Metax sGPU vendor (shared devices).

/// Node: the device plugin's JSON device list.
pub const NODE_DEVICES: &str = "metax-tech.com/node-gpu-devices";
/// Pod: the devices the plugin still has to serve.
pub const TO_ALLOCATE: &str = "hami.io/metax-sgpu-devices-to-allocate";
/// Pod: the devices allocated (read back on restart).
pub const ALLOCATED: &str = "hami.io/metax-sgpu-devices-allocated";
/// Pod: Metax's own JSON allocation, one array per container of `{"uuid","compute","vRam"}`.
pub const GPU_DEVICES_ALLOCATED: &str = "metax-tech.com/gpu-devices-allocated";
/// Pod: unix nanoseconds of the Filter decision.
pub const PREDICATE_TIME: &str = "metax-tech.com/predicate-time";
pub const USE_UUID: &str = "metax-tech.com/use-gpuuuid";
pub const NOUSE_UUID: &str = "metax-tech.com/nouse-gpuuuid";
/// Pod: `best-effort`, `fixed-share` or `burst-share` (the webhook defaults it).
pub const QOS_POLICY: &str = "metax-tech.com/sgpu-qos-policy";
/// Pod: `online` or `offline` co-location class.
pub const APP_CLASS: &str = "metax-tech.com/sgpu-app-class";
/// Pod: Go boolean overriding the config's `sgpuTopologyAware` for exclusive pods.
pub const TOPOLOGY_AWARE: &str = "metax-tech.com/sgpu-topology-aware";

// --- values
pub const APP_CLASS_ONLINE: &str = "online";
pub const APP_CLASS_OFFLINE: &str = "offline";
pub const QOS_BEST_EFFORT: &str = "best-effort";
pub const QOS_FIXED_SHARE: &str = "fixed-share";
pub const QOS_BURST_SHARE: &str = "burst-share";

// --- `custominfo` keys of discovered devices (HAMi's names)
pub const CUSTOM_QOS_POLICY: &str = "QosPolicy";
pub const CUSTOM_MODEL: &str = "Model";
pub const CUSTOM_LINK_ZONE: &str = "LinkZone";
