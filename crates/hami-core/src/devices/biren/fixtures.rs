//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::model::DeviceInfo;
use crate::model::VendorId;
use crate::model::codec;
use crate::testing::*;

pub const BR: &str = "birentech.com/gpu";

pub fn br() -> Biren {
    Biren::new(&CountOnlyConfig { resource_count_name: BR.into() })
}

pub fn id() -> VendorId {
    vendors().by_name(WORD).unwrap()
}

pub fn dev(id: &str, index: u32, ty: &str) -> DeviceInfo {
    DeviceInfo::new(id, index, 2, 65536, 7, ty)
}

pub fn br_node(devs: &[DeviceInfo]) -> NodeBuilder {
    node("n1").annotation(keys::REGISTER, &codec::encode_node_devices_json(devs))
}

pub fn two() -> NodeBuilder {
    br_node(&[dev("br-0", 0, "BR104"), dev("br-1", 1, "BR106")])
}

pub fn ask(n: u32) -> PodBuilder {
    pod().limit(BR, &n.to_string())
}
