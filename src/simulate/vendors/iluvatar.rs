//! iluvatar through the engine over an in-memory cluster.

use crate::backend::memory::ClusterObjects;
use crate::devices::iluvatar::fixtures::*;
use crate::model::DeviceInfo;
use crate::model::annotations::iluvatar as keys;
use crate::model::codec::encode_node_devices_colon;
use crate::testing::*;
use std::sync::Arc;

#[actix::test]
async fn iluvatar_chips_are_scheduled_separately_through_the_engine() {
    let mr = DeviceInfo { ty: Arc::from("MR-V100"), ..dev("mr-0", 0, 16384) };
    let n1 = chips(&[dev("ix-0", 0, 32768)])
        .annotation(&keys::register("MR-V100"), &encode_node_devices_colon(&[mr]))
        .capacity(MR_VGPU, "1");
    let cluster =
        ClusterObjects { nodes: vec![n1.view()], pods: vec![], quotas: vec![], groups: vec![], budgets: vec![] };
    let engine = crate::app::memory_engine(&scheduler_flags(&["--enable-iluvatar"]), cluster).await.unwrap();
    let pods = vec![
        ix_pod(1, 64, 50).name("bi").view(),
        pod().name("mr").limit(MR_VGPU, "1").limit("iluvatar.ai/MR-V100.vMem", "32").view(),
        // The BI-V150 device has 16384 MiB left; the MR-V100 device is not a candidate.
        ix_pod(1, 65, 10).name("too-big").view(),
    ];
    let sim = crate::simulate::simulate_pods(&engine, pods).await.unwrap();
    let got = |i: usize, k: &str| sim.pods[i].annotations.get(k).cloned();
    assert_eq!(sim.pods[0].node.as_deref(), Some("n1"), "{:?}", sim.pods[0]);
    assert_eq!(got(0, "hami.io/BI-V150-devices-allocated").as_deref(), Some("ix-0,BI-V150,16384,50:;"));
    assert_eq!(got(0, "hami.io/BI-V150-devices-to-allocate").as_deref(), Some("ix-0,BI-V150,16384,50:;"));
    assert_eq!(got(0, "hami.io/MR-V100-devices-allocated"), None);
    assert_eq!(got(1, "hami.io/MR-V100-devices-allocated").as_deref(), Some("mr-0,MR-V100,8192,0:;"));
    assert_eq!(sim.pods[2].node, None);
    let why = sim.pods[2].failed_nodes.get("n1").cloned().unwrap_or_default();
    assert!(why.starts_with("1/1 CardInsufficientMemory"), "{why}");
}
