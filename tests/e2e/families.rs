//! Scenario w: device families past HAMi's basis, through the real kube-apiserver and
//! kube-scheduler. A Hygon node registered as HCU (HAMi PR 2969's names) beside one registered as
//! DCU: each takes the pods of its own family, with its own annotations. And a MIG node in the shape
//! HAMi places and hami-rs used to refuse: GPU-1 booked 88 cores by a running pod with one slice
//! free, GPU-0 idle; a binpack pod of two instances gets one on each, GPU-1 then booked 103.

use std::collections::BTreeMap;
use std::time::Duration;

use hami_rs::model::DeviceInfo;
use hami_rs::model::annotations::{self as keys, hcu, hygon};
use hami_rs::model::codec;
use hami_rs::testing::a100_profiles;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::cluster::*;
use crate::harness::*;

/// A Node as a device plugin leaves it: these annotations, these allocatable device counts, Ready.
fn node_object(name: &str, annotations: BTreeMap<&str, String>, allocatable: &[(&str, &str)]) -> Node {
    let mut alloc = json!({"cpu": "64", "memory": "256Gi", "pods": "250"});
    for (k, v) in allocatable {
        alloc[*k] = json!(v);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "annotations": annotations},
        "status": {"capacity": alloc, "allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]},
    }))
    .expect("a Node")
}

/// Plays the device plugin after a bind: `bind-phase: success`, the node lock released.
async fn allocated_by_hand(cp: &ControlPlane, pod: &str, node: &str) {
    let pods = pods_api(&cp.client);
    let done = json!({"metadata": {"annotations": {keys::BIND_PHASE: "success"}}});
    pods.patch(pod, &PatchParams::default(), &Patch::Merge(&done)).await.expect("bind-phase success");
    let nodes: Api<Node> = Api::all(cp.client.clone());
    let unlock = json!({"metadata": {"annotations": {keys::NODE_LOCK: null}}});
    nodes.patch(node, &PatchParams::default(), &Patch::Merge(&unlock)).await.expect("node lock released");
}

/// Waits until the pod is bound; the pod.
async fn bound(cp: &ControlPlane, pod: &str) -> Pod {
    wait_for(&format!("pod {pod} to be bound"), Duration::from_secs(90), || async {
        let p = get_pod(&cp.client, pod).await;
        if node_name(&p).is_some() { Ok(p) } else { Err(format!("{:?}", p.status.map(|s| s.conditions))) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn w_an_hcu_node_beside_a_dcu_node_and_mig_instances_booked_past_100_cores() {
    let cp = ControlPlane::start("w").await;
    let nodes: Api<Node> = Api::all(cp.client.clone());
    // Hygon: the HCU plugin's colon list under HAMi's new key, the DCU plugin's under the old.
    let hcu_register = "HCU-R0001,4,65536,100,BW200,0,true,0,hami-core:HCU-R0002,4,65536,100,BW200,0,true,1,hami-core:";
    let dcu_register = "DCU-Z0001,4,16384,100,DCU-Z100,0,true,0,hami-core:";
    let hygon_nodes = [
        node_object("hcu-w-0", [(hcu::REGISTER, hcu_register.to_owned())].into(), &[("hygon.com/hcunum", "2")]),
        node_object("dcu-w-0", [(hygon::REGISTER, dcu_register.to_owned())].into(), &[("hygon.com/dcunum", "1")]),
    ];
    // MIG: two A100-40GB GPUs in MIG mode, as NVIDIA's plugin registers them.
    let mig = |id: &str, i: u32| {
        let mut d = DeviceInfo::new(id, i, 7, 40960, 100, "NVIDIA-A100-SXM4-40GB");
        d.mode = std::sync::Arc::from("mig");
        d.mig_profiles = a100_profiles().into();
        d
    };
    let register = codec::encode_node_devices_json(&[mig("GPU-w-0", 0), mig("GPU-w-1", 1)]);
    let mig_node = node_object("mig-w-0", [(keys::NVIDIA_REGISTER, register)].into(), &[("nvidia.com/gpu", "14")]);
    for n in hygon_nodes.iter().chain([&mig_node]) {
        let created = nodes.create(&PostParams::default(), n).await.expect("a node");
        // The TaintNodesByCondition admission plugin taints new nodes; no kubelet lifts it here.
        let untaint = json!({"spec": {"taints": null}});
        let name = created.metadata.name.unwrap_or_default();
        nodes.patch(&name, &PatchParams::default(), &Patch::Merge(&untaint)).await.expect("untainted");
    }
    // A running pod holding 2g at 0 and 2, 1g at 5 and 6 on GPU-w-1: 29 + 29 + 15 + 15 = 88 cores,
    // slice 4 free. Created bound, as HAMi's scheduler and plugin left it (before the webhook).
    let held = [
        ("2g.10gb", 0, 2, 9984, 29),
        ("2g.10gb", 2, 2, 9984, 29),
        ("1g.5gb", 5, 1, 4864, 15),
        ("1g.5gb", 6, 1, 4864, 15),
    ];
    let entries: String =
        held.iter().map(|(_, _, _, m, c)| format!("GPU-w-1,NVIDIA,{m},{c}:")).collect::<String>() + ";";
    let allocations: Vec<Value> = held
        .iter()
        .enumerate()
        .map(|(i, (p, start, size, _, _))| {
            json!({"containerIndex": 0, "deviceIndex": i, "gpuUUID": "GPU-w-1", "profile": p, "placement": {"start": start, "size": size}})
        })
        .collect();
    let mut busy = pod("w-busy", &[("nvidia.com/gpu", "4"), ("nvidia.com/gpumem", "4000")], &[], Some(SCHEDULER_NAME));
    let a = busy.metadata.annotations.get_or_insert_default();
    for (k, v) in [
        (keys::ASSIGNED_NODE, "mig-w-0".to_owned()),
        (keys::NVIDIA_ALLOCATED, entries.clone()),
        (keys::NVIDIA_TO_ALLOCATE, entries),
        (keys::NVIDIA_MIG_ALLOCATIONS, Value::Array(allocations).to_string()),
        (keys::BIND_PHASE, "success".to_owned()),
    ] {
        a.insert(k.to_owned(), v);
    }
    busy.spec.as_mut().unwrap().node_name = Some("mig-w-0".into());
    create(&cp.client, &busy).await;

    let mut hami = Hami::start(&cp, "hami-rs", &[]).await;
    hami.wait_ready(Duration::from_secs(60)).await;
    wait_for("hami-rs to register the HCU, DCU and MIG nodes", Duration::from_secs(60), || async {
        let u = hami.usage().await?;
        let devices = u["nodes"]
            .as_array()
            .map_or(0, |ns| ns.iter().filter_map(|n| n["devices"].as_array()).map(Vec::len).sum::<usize>());
        if devices == 5 { Ok(()) } else { Err(format!("{devices} devices: {u}")) }
    })
    .await;
    cp.apply_webhook(&hami.url()).await;
    let _ks = KubeScheduler::start(&cp, "kube-scheduler", &hami.url(), SchedulerOpts::default()).await;

    // Each Hygon family's pod goes to its own node, with its own annotations.
    create(&cp.client, &pod("w-hcu", &[("hygon.com/hcunum", "1"), ("hygon.com/hcumem", "2000")], &[], None)).await;
    create(&cp.client, &pod("w-dcu", &[("hygon.com/dcunum", "1"), ("hygon.com/dcumem", "2000")], &[], None)).await;
    let p = bound(&cp, "w-hcu").await;
    assert_eq!(node_name(&p), Some("hcu-w-0"));
    assert_eq!(annotation(&p, hcu::ALLOCATED), Some("HCU-R0002,HCU,2000,100:;"));
    assert_eq!(annotation(&p, hcu::TO_ALLOCATE), annotation(&p, hcu::ALLOCATED));
    assert_eq!(annotation(&p, hygon::ALLOCATED), None);
    allocated_by_hand(&cp, "w-hcu", "hcu-w-0").await;
    let p = bound(&cp, "w-dcu").await;
    assert_eq!(node_name(&p), Some("dcu-w-0"));
    assert_eq!(annotation(&p, hygon::ALLOCATED), Some("DCU-Z0001,DCU,2000,100:;"));
    allocated_by_hand(&cp, "w-dcu", "dcu-w-0").await;

    // MIG: binpack visits the busy GPU first; its free slice takes one instance, the idle GPU the
    // other, and the busy GPU is booked past 100 cores.
    let two = pod(
        "w-mig",
        &[("nvidia.com/gpu", "2"), ("nvidia.com/gpumem", "4000")],
        &[(keys::GPU_SCHEDULER_POLICY, "binpack")],
        None,
    );
    create(&cp.client, &two).await;
    let p = bound(&cp, "w-mig").await;
    assert_eq!(node_name(&p), Some("mig-w-0"));
    assert_eq!(annotation(&p, keys::NVIDIA_ALLOCATED), Some("GPU-w-1,NVIDIA,4864,15:GPU-w-0,NVIDIA,4864,15:;"));
    let placed = codec::decode_mig_allocations(annotation(&p, keys::NVIDIA_MIG_ALLOCATIONS).unwrap_or(""))
        .expect("MIG allocations");
    let got: Vec<(String, u32)> = placed.iter().map(|a| (a.gpu_uuid.clone(), a.placement.start)).collect();
    assert_eq!(got, [("GPU-w-1".to_owned(), 4), ("GPU-w-0".to_owned(), 6)]);
    allocated_by_hand(&cp, "w-mig", "mig-w-0").await;
    let u = hami.usage().await.expect("usage");
    let gpu1 = u["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["name"] == "mig-w-0"))
        .and_then(|n| n["devices"].as_array())
        .and_then(|ds| ds.iter().find(|d| d["uuid"] == "GPU-w-1"))
        .cloned()
        .expect("GPU-w-1 in /usage");
    assert_eq!((&gpu1["used"], &gpu1["coresUsed"]), (&json!(5), &json!(103)), "{gpu1}");
    println!(
        "e2e summary w: an HCU pod on the HCU node ({}), a DCU pod on the DCU node; a binpack MIG pod of two instances placed on the busy GPU's free slice and the idle GPU, the busy GPU now {gpu1}",
        annotation(&get_pod(&cp.client, "w-hcu").await, hcu::ALLOCATED).unwrap_or("")
    );
}
