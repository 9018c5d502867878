//! The JSON shapes of the engine's view shared by `/usage`, the simulator and the status page:
//! nodes with per-device usage, and pods with their state. These shapes are a contract.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::backend::Backend;
use crate::devices::Vendors;
use crate::model::annotations as keys;
use crate::sched::report::{AllocState, NodeReport};
/// The per-device shapes, pure data the core measures fragmentation on.
pub use crate::sched::report::{DeviceJson, DeviceState, NodeJson};

#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodStateJson {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: String,
    pub node_name: Option<String>,
    pub state: AllocState,
    pub annotations: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct UsageJson {
    pub nodes: Vec<NodeJson>,
    pub pods: Vec<PodStateJson>,
}

/// Whether a node annotation key is one of HAMi's (registration, handshake, scores, locks).
pub fn is_hami_node_key(k: &str) -> bool {
    k.starts_with("hami.io/")
        || k == keys::CAMBRICON_LOCK
        || k.starts_with("metax-tech.com/")
        || k.starts_with("enflame.com/")
        || k == "hami-vnpu-core"
}

/// The pods on each device of a node, by device UUID: `namespace/name`, and the memory (MiB) and
/// cores each takes there.
pub type PodsOnDevice = BTreeMap<String, Vec<(String, u64, u32)>>;

/// What each device of the node holds, pod by pod (the console's node page, `kubectl hami`).
pub fn pods_on_devices(r: &NodeReport) -> PodsOnDevice {
    let mut on = PodsOnDevice::new();
    for a in &r.allocs {
        for (_, containers) in &a.devices.0 {
            for d in containers.iter().flatten() {
                on.entry(d.uuid.to_string()).or_default().push((
                    format!("{}/{}", a.namespace, a.name),
                    d.usedmem.0,
                    d.usedcores,
                ));
            }
        }
    }
    on
}

pub fn node_json(r: &NodeReport, vendors: &Vendors) -> NodeJson {
    NodeJson {
        name: r.name.to_string(),
        devices: r
            .snapshot
            .devices
            .iter()
            .map(|d| DeviceJson {
                vendor: vendors.get(d.vendor).name().to_owned(),
                uuid: d.info.id.to_string(),
                ty: d.info.ty.to_string(),
                index: d.info.index,
                numa: d.info.numa,
                healthy: d.health,
                cordoned: vendors
                    .get(d.vendor)
                    .cordoned(r.snapshot.extra(d.vendor))
                    .iter()
                    .any(|c| c == d.info.id.as_str()),
                count: d.info.count,
                used: d.used,
                mem_total: d.info.devmem.get(),
                mem_used: d.used_mem.get(),
                cores_total: d.info.devcore,
                cores_used: d.used_cores,
            })
            .collect(),
        annotations: None,
        unusable: r.snapshot.unusable.as_deref().map(str::to_owned),
        held_for: r.held_for.as_ref().map(|u| u.to_string()),
    }
}

/// `/usage`: every node with its HAMi annotations, and every pod holding or reserving devices.
pub fn usage<B: Backend>(reports: &[NodeReport], vendors: &Vendors, backend: &B) -> UsageJson {
    let nodes = reports
        .iter()
        .map(|r| {
            let mut n = node_json(r, vendors);
            let annos = backend.node(r.name.as_str()).map(|v| {
                v.metadata
                    .annotations
                    .iter()
                    .filter(|(k, _)| is_hami_node_key(k))
                    .map(|(k, v)| (k.to_owned(), v.clone()))
                    .collect()
            });
            n.annotations = Some(annos.unwrap_or_default());
            n
        })
        .collect();
    let mut pods = Vec::new();
    for r in reports {
        for a in &r.allocs {
            let view = backend.pod(&a.namespace, &a.name);
            pods.push(PodStateJson {
                namespace: a.namespace.to_string(),
                name: a.name.to_string(),
                uid: a.uid.to_string(),
                node: r.name.to_string(),
                node_name: view.as_ref().and_then(|v| v.spec.node_name.clone()).filter(|n| !n.is_empty()),
                state: a.state,
                annotations: view.as_ref().map(|v| v.metadata.annotations.clone().into()).unwrap_or_default(),
                labels: view.as_ref().map(|v| v.metadata.labels.clone().into()).unwrap_or_default(),
            });
        }
    }
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    UsageJson { nodes, pods }
}
