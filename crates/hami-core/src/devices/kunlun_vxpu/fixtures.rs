//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::model::DeviceInfo;
use crate::model::annotations::kunlun_vxpu as xpu_keys;
use crate::model::codec;
use crate::testing::*;

pub const VXPU: &str = "kunlunxin.com/vxpu";

pub const MEM: &str = "kunlunxin.com/vxpu-memory";

/// `n` registered XPUs `xpu-<i>` (index i, 4 slots, 98304 MiB, 100 cores).
pub fn registered(n: u32) -> Vec<DeviceInfo> {
    (0..n).map(|i| DeviceInfo::new(&format!("xpu-{i}"), i, 4, DEVICE_MEM, 100, "P800")).collect()
}

pub fn xpus(n: u32) -> NodeBuilder {
    node("n1").annotation(xpu_keys::REGISTER, &codec::encode_node_devices_json(&registered(n)))
}

pub fn ask(n: u32, mem: &str) -> PodBuilder {
    pod().limit(VXPU, &n.to_string()).limit(MEM, mem)
}
