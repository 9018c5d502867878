//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::model::DeviceInfo;
use crate::model::codec;
use crate::testing::*;

pub const GPU: &str = "amd.com/gpu";

pub const MEM: &str = "amd.com/gpumem";

pub const CORES: &str = "amd.com/gpucores";

pub const MI300X: &str = "AMD Instinct MI300X VF";

pub fn amd() -> Amd {
    Amd::new(&AmdConfig::chart())
}

pub fn id() -> VendorId {
    vendors().by_name(WORD).unwrap()
}

/// An MI300X VF: 192 GiB, 304 CUs, 10 slots.
pub fn mi300x(id: &str, index: u32) -> DeviceInfo {
    DeviceInfo::new(id, index, 10, 196608, 304, MI300X)
}

pub fn amd_node(devs: &[DeviceInfo]) -> NodeBuilder {
    node("n1").annotation(keys::REGISTER, &codec::encode_node_devices_json(devs)).capacity(GPU, &devs.len().to_string())
}

pub fn two() -> NodeBuilder {
    amd_node(&[mi300x("GPU-a", 0), mi300x("GPU-b", 1)])
}

pub fn gpus(n: u32) -> PodBuilder {
    pod().limit(GPU, &n.to_string())
}
