//! Annotation keys of the Kunlun XPU vendor (whole P800 devices).

/// Pod: what the scheduler allocated (there is no to-allocate key for whole XPUs).
pub const ALLOCATED: &str = "hami.io/kunlun-allocated";
/// Pod: comma list of the device indexes of the last container holding devices.
pub const DEVICE_IDX: &str = "BAIDU_COM_DEVICE_IDX";
/// Pod: only these device ids; checked by both Kunlun vendors next to the `hami.io` pair.
pub const BAIDU_USE_UUID: &str = "baidu.com/use-gpuuuid";
/// Pod: never these device ids; checked by both Kunlun vendors.
pub const BAIDU_NOUSE_UUID: &str = "baidu.com/nouse-gpuuuid";
