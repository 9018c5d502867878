//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::model::ContainerDevices;
use crate::model::pod::QuantityText;
use crate::testing::*;

pub const GPU: &str = "metax-tech.com/gpu";

pub fn chart() -> MetaxConfig {
    MetaxConfig::chart()
}

pub fn container(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> ContainerView {
    let mut c = ContainerView { name: "c".into(), ..Default::default() };
    for (k, v) in limits {
        c.resources.limits.insert((*k).to_owned(), QuantityText((*v).to_owned()));
    }
    for (k, v) in requests {
        c.resources.requests.insert((*k).to_owned(), QuantityText((*v).to_owned()));
    }
    c
}

/// A node `name` with `n` Metax GPUs in its capacity.
pub fn metax_node(name: &str, n: u32) -> NodeBuilder {
    node(name).capacity(GPU, &n.to_string())
}

/// A pod asking for `n` Metax GPUs in its (last) container.
pub fn metax_pod(n: u32) -> PodBuilder {
    pod().limit(GPU, &n.to_string())
}

pub fn devices(d: Discovery) -> (Vec<DeviceInfo>, Arc<Extra>) {
    match d {
        Discovery::Devices { devices, extra } => {
            (devices, extra.expect("Metax GPU always reports extras").downcast::<Extra>().unwrap())
        }
        Discovery::Absent => panic!("absent"),
        Discovery::Malformed { key, error } => panic!("malformed {key}: {error}"),
    }
}

pub fn score(extra: &Extra, policy: NodePolicy, devices_per_container: &[usize]) -> f32 {
    let v = vendors();
    let req = metax_pod(1).request_with(&v);
    let cs: Vec<ContainerDevices> = devices_per_container
        .iter()
        .map(|&n| (0..n).map(|i| crate::model::ContainerDevice::new(&format!("d{i}"), WORD, 65536, 100)).collect())
        .collect();
    let name = crate::model::NodeName::new("n1");
    let cx = ScoreCx { node: &name, extra: Some(extra), before: &[], devices: &cs, pod: &req, policy };
    MetaxGpu::new(&chart()).node_score(&cx)
}
