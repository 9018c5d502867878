//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::model::{ContainerDevice, ContainerDevices};
use crate::sched::NodeSnapshot;
use crate::testing::*;
use serde_json::{Value, json};

pub const B3: &str = "Ascend910B3";

pub const NPU: &str = "huawei.com/Ascend910B3";

pub const MEM: &str = "huawei.com/Ascend910B3-memory";

pub const CORE: &str = "huawei.com/Ascend910B3-core";

/// An NPU as the Ascend plugin registers it: 4 slots, 64 GiB, 20 AI cores, healthy.
pub fn npu(uuid: &str, index: u32, ty: &str, network: Option<Value>) -> DeviceInfo {
    let mut d = DeviceInfo::new(uuid, index, 4, 65536, 20, ty);
    if let Some(n) = network {
        let mut m = serde_json::Map::new();
        m.insert("NetworkID".into(), n);
        d.custom = Some(Arc::new(m));
    }
    d
}

pub fn ascend_node(name: &str, cw: &str, devs: &[DeviceInfo]) -> NodeBuilder {
    node(name).annotation(&keys::register(cw), &codec::encode_node_devices_json(devs))
}

/// `n` Ascend910B3 NPUs `npu-<i>` without NetworkID.
pub fn plain_b3(n: u32) -> NodeBuilder {
    let devs: Vec<_> = (0..n).map(|i| npu(&format!("npu-{i}"), i, B3, None)).collect();
    ascend_node("n1", B3, &devs)
}

pub fn b3_pod(n: u32) -> PodBuilder {
    pod().limit(NPU, &n.to_string())
}

pub fn devices(d: Discovery) -> (Vec<DeviceInfo>, Option<Arc<Extra>>) {
    match d {
        Discovery::Devices { devices, extra } => (devices, extra.map(|e| e.downcast::<Extra>().unwrap())),
        Discovery::Absent => panic!("absent"),
        Discovery::Malformed { key, error } => panic!("malformed {key}: {error}"),
    }
}

pub const HAMI_CORE: &str = "hami-core";

/// npu-0 (network 1), npu-1..2 (network 2), npu-3 (network 1), npu-4 (network 2).
pub fn networked(cw: &str) -> NodeBuilder {
    let ids = [1, 2, 2, 1, 2];
    let devs: Vec<_> =
        ids.iter().enumerate().map(|(i, n)| npu(&format!("npu-{i}"), i as u32, cw, Some(json!(n)))).collect();
    ascend_node("n1", cw, &devs)
}

pub fn score(a: &Ascend, snap: &NodeSnapshot, containers: &[&[&str]]) -> f32 {
    let req = b3_pod(1).request_with(&vendors());
    let cs: Vec<ContainerDevices> =
        containers.iter().map(|c| c.iter().map(|u| ContainerDevice::new(u, B3, 1, 0)).collect()).collect();
    let cx = ScoreCx {
        node: &snap.name,
        extra: None,
        before: &snap.devices,
        devices: &cs,
        pod: &req,
        policy: crate::model::request::NodePolicy::Binpack,
    };
    a.node_score(&cx)
}
