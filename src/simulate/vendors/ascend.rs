//! ascend through the engine over an in-memory cluster.

use crate::devices::ascend::fixtures::*;
use crate::model::annotations::ascend as keys;
use crate::testing::*;

#[actix::test]
async fn a_two_npu_pod_lands_in_one_network_group_and_hami_core_needs_a_willing_node() {
    let cluster = crate::backend::memory::ClusterObjects {
        nodes: vec![networked(B3).view(), {
            let mut b = plain_b3(2).annotation(keys::NODE_HAMI_VNPU_CORE, "true");
            b.name = "n2".into();
            b.view()
        }],
        ..Default::default()
    };
    let engine = crate::app::memory_engine(&scheduler_flags(&["--enable-ascend"]), cluster).await.unwrap();
    let pods = vec![
        // Binpack default node policy: n2 scores 0 for a plain 2-NPU pod, n1 gets 10 from the
        // network score, so n1 wins; its largest network group is filled from npu-4 down.
        b3_pod(2).name("train").view(),
        b3_pod(1).name("soft").limit(MEM, "8000").limit(CORE, "25").annotation(keys::VNPU_MODE, HAMI_CORE).view(),
    ];
    let sim = crate::simulate::simulate_pods(&engine, pods).await.unwrap();
    let train = &sim.pods[0];
    assert_eq!(train.node.as_deref(), Some("n1"), "{train:?}");
    let a = |k: &str| train.annotations.get(k).map(String::as_str);
    assert_eq!(
        a("hami.io/Ascend910B3-devices-allocated"),
        Some("npu-4,Ascend910B3,65536,0:npu-2,Ascend910B3,65536,0:;")
    );
    assert_eq!(a("hami.io/Ascend910B3-devices-to-allocate"), a("hami.io/Ascend910B3-devices-allocated"));
    assert_eq!(
        a("huawei.com/Ascend910B3"),
        Some(r#"[{"UUID":"npu-4","memory":65536},{"UUID":"npu-2","memory":65536}]"#)
    );
    assert!(a("predicate-time").is_some_and(|t| t.parse::<i64>().is_ok()));
    // Only n2 takes hami-core pods; n1 says why not.
    let soft = &sim.pods[1];
    assert_eq!(soft.node.as_deref(), Some("n2"), "{soft:?}");
    assert_eq!(
        soft.annotations.get("huawei.com/Ascend910B3").map(String::as_str),
        Some(r#"[{"UUID":"npu-1","memory":8000,"core":25}]"#)
    );
    assert_eq!(soft.failed_nodes.get("n1").map(String::as_str), Some("1/5 ModeNotFit"));
}
