//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::model::VendorId;
use crate::model::codec;
use crate::testing::*;
use serde_json::{Map, json};

pub const VA: &str = "vastaitech.com/va";

pub fn va() -> Vastai {
    Vastai::new(&CountOnlyConfig { resource_count_name: VA.into() })
}

pub fn id() -> VendorId {
    vendors().by_name(WORD).unwrap()
}

/// A registered Vastai device; `die` = `Some(card)` for a die in die mode.
pub fn dev(id: &str, index: u32, die: Option<&str>) -> DeviceInfo {
    let mut d = DeviceInfo::new(id, index, 4, 16384, 0, "VA1L");
    if let Some(card) = die {
        let mut m = Map::new();
        m.insert("DeviceStrategy".into(), json!("die"));
        m.insert("AIC".into(), json!(card));
        d.custom = Some(std::sync::Arc::new(m));
    }
    d
}

pub fn va_node(devs: &[DeviceInfo]) -> NodeBuilder {
    node("n1").annotation(keys::REGISTER, &codec::encode_node_devices_json(devs))
}

/// Cards A (dies 0, 1) and B (dies 2, 3, 4), in die mode.
pub fn dies() -> NodeBuilder {
    va_node(&[
        dev("d0", 0, Some("A")),
        dev("d1", 1, Some("A")),
        dev("d2", 2, Some("B")),
        dev("d3", 3, Some("B")),
        dev("d4", 4, Some("B")),
    ])
}

pub fn ask(n: u32) -> PodBuilder {
    pod().limit(VA, &n.to_string())
}
