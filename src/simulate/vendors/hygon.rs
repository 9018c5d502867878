//! hygon through the engine over an in-memory cluster.

use crate::backend::memory::ClusterObjects;
use crate::devices::hygon::fixtures::*;
use crate::model::annotations::hygon as keys;
use crate::testing::*;

#[actix::test]
async fn dcu_pods_are_placed_through_the_engine() {
    let devs = [dcu_dev(0, "DCU-Z100", 16384), dcu_dev(1, "DCU-K100", 65536)];
    let cluster = ClusterObjects {
        nodes: vec![dcus(&devs).view()],
        pods: vec![],
        quotas: vec![],
        groups: vec![],
        budgets: vec![],
    };
    let engine = crate::app::memory_engine(&scheduler_flags(&[]), cluster).await.unwrap();
    let pods = vec![
        dcu_pod(1, 8192, 50).name("z").annotation(keys::USE_TYPE, "Z100").view(),
        // Whole-device request: the K100 is idle, the Z100 is not.
        pod().name("whole").limit(DCUNUM, "1").view(),
        // Nothing left: the K100's memory is all taken, the Z100 has 8192 MiB free.
        dcu_pod(1, 9000, 10).name("too-big").view(),
    ];
    let sim = crate::simulate::simulate_pods(&engine, pods).await.unwrap();
    let got = |i: usize, k: &str| sim.pods[i].annotations.get(k).cloned();
    assert_eq!(sim.pods[0].node.as_deref(), Some("n1"), "{:?}", sim.pods[0]);
    assert_eq!(got(0, keys::ALLOCATED).as_deref(), Some("DCU-0,DCU,8192,50:;"));
    assert_eq!(got(0, keys::TO_ALLOCATE), got(0, keys::ALLOCATED));
    assert_eq!(got(1, keys::ALLOCATED).as_deref(), Some("DCU-1,DCU,65536,100:;"));
    assert_eq!(sim.pods[2].node, None);
    let why = sim.pods[2].failed_nodes.get("n1").cloned().unwrap_or_default();
    assert!(why.starts_with("2/2 CardInsufficientMemory"), "{why}");
}

#[actix::test]
async fn hcu_and_dcu_nodes_are_each_read_in_their_family_and_placed_side_by_side() {
    use crate::model::annotations::hcu;
    // The HCU plugin writes the DCU colon form under its own key, with HCU- ids.
    let hcu_register = "HCU-R0001,4,65536,100,BW200,0,true,0,hami-core:HCU-R0002,4,65536,100,BW200,0,true,1,hami-core:";
    let hcu_node = node("hcu-node").annotation(hcu::REGISTER, hcu_register).capacity("hygon.com/hcunum", "2");
    let dcu_node = dcus(&[dcu_dev(0, "DCU-Z100", 16384)]);
    let cluster = ClusterObjects {
        nodes: vec![hcu_node.view(), dcu_node.view()],
        pods: vec![],
        quotas: vec![],
        groups: vec![],
        budgets: vec![],
    };
    let engine = crate::app::memory_engine(&scheduler_flags(&[]), cluster).await.unwrap();
    let v = engine.vendors();
    let ids = |node: &NodeBuilder| -> Vec<String> {
        let snap = node.snapshot(v);
        snap.devices.iter().map(|d| format!("{} {}", v.get(d.vendor).name(), d.info.id)).collect()
    };
    assert_eq!(ids(&hcu_node), ["HCU HCU-R0001", "HCU HCU-R0002"]);
    assert_eq!(ids(&dcu_node), ["DCU DCU-0"]);
    let pods = vec![
        pod().name("on-hcu").limit("hygon.com/hcunum", "1").limit("hygon.com/hcumem", "2000").view(),
        dcu_pod(1, 2000, 10).name("on-dcu").view(),
        pod().name("hcu-type").limit("hygon.com/hcunum", "1").annotation(hcu::USE_TYPE, "bw200").view(),
    ];
    let sim = crate::simulate::simulate_pods(&engine, pods).await.unwrap();
    let got = |i: usize, k: &str| sim.pods[i].annotations.get(k).cloned();
    assert_eq!(sim.pods[0].node.as_deref(), Some("hcu-node"), "{:?}", sim.pods[0]);
    assert_eq!(got(0, hcu::ALLOCATED).as_deref(), Some("HCU-R0002,HCU,2000,100:;"));
    assert_eq!(got(0, hcu::TO_ALLOCATE), got(0, hcu::ALLOCATED));
    assert_eq!(got(0, keys::ALLOCATED), None, "an HCU pod carries no DCU keys");
    assert_eq!(sim.pods[1].node.as_deref(), Some("n1"), "{:?}", sim.pods[1]);
    assert_eq!(got(1, keys::ALLOCATED).as_deref(), Some("DCU-0,DCU,2000,10:;"));
    assert_eq!(sim.pods[2].node.as_deref(), Some("hcu-node"), "{:?}", sim.pods[2]);
    // The scheduler's own keys of both families are refused on a created pod and guarded after.
    for k in [hcu::TO_ALLOCATE, hcu::ALLOCATED, keys::TO_ALLOCATE, keys::ALLOCATED] {
        assert!(v.scheduler_keys().iter().any(|s| s == k), "{k}");
    }
}
