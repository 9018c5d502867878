//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::testing::*;
use serde_json::json;

pub const SGPU: &str = "metax-tech.com/sgpu";

pub const VMEM: &str = "metax-tech.com/vmemory";

pub const VCORE: &str = "metax-tech.com/vcore";

/// One device of the plugin's list: 8 slots, `vram` MiB, 100 compute, healthy.
pub fn sdev(uuid: &str, vram: u32, qos: &str, zone: i32) -> serde_json::Value {
    json!({"uuid": uuid, "bdf": "0000:01:00.0", "model": "MXC500", "totalDevCount": 8, "totalCompute": 100,
           "totalVRam": vram, "availableDevCount": 8, "availableCompute": 100, "availableVRam": vram,
           "numa": 0, "healthy": true, "qosPolicy": qos, "linkZone": zone})
}

pub fn sgpu_node(name: &str, devs: &[serde_json::Value]) -> NodeBuilder {
    node(name).annotation(keys::NODE_DEVICES, &serde_json::to_string(devs).unwrap())
}

/// `n` idle 64 GiB devices `sgpu-<i>` without QoS or zone.
pub fn idle(n: usize) -> NodeBuilder {
    let devs: Vec<_> = (0..n).map(|i| sdev(&format!("sgpu-{i}"), 65536, "", 0)).collect();
    sgpu_node("n1", &devs)
}

pub fn sgpu_pod(n: u32) -> PodBuilder {
    pod().limit(SGPU, &n.to_string())
}

pub fn no(s: &str) -> Result<String, String> {
    Err(s.to_owned())
}

pub fn devices(d: Discovery) -> Vec<DeviceInfo> {
    match d {
        Discovery::Devices { devices, .. } => devices,
        Discovery::Absent => panic!("absent"),
        Discovery::Malformed { key, error } => panic!("malformed {key}: {error}"),
    }
}

/// Devices 0 (zone 1), 1–3 (zone 2), 4 (no zone), all idle.
pub fn zoned() -> NodeBuilder {
    sgpu_node(
        "n1",
        &[
            sdev("sgpu-0", 65536, "", 1),
            sdev("sgpu-1", 65536, "", 2),
            sdev("sgpu-2", 65536, "", 2),
            sdev("sgpu-3", 65536, "", 2),
            sdev("sgpu-4", 65536, "", 0),
        ],
    )
}
