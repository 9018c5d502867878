//! metax through the engine over an in-memory cluster.

use crate::devices::metax::fixtures::*;
use crate::model::annotations::metax as keys;
use crate::testing::*;

#[actix::test]
async fn binpack_picks_the_node_with_the_lower_topology_loss() {
    // Under binpack the node score is 2000 − losses[n] and the highest score wins, so the node
    // whose 2-device loss is lower takes the pod, on the two devices registered last.
    let cluster = crate::backend::memory::ClusterObjects {
        nodes: vec![
            metax_node("a", 4).annotation(keys::TOPOLOGY_LOSSES, r#"{"1":0,"2":50}"#).view(),
            metax_node("b", 4).annotation(keys::TOPOLOGY_LOSSES, r#"{"1":0,"2":10}"#).view(),
        ],
        ..Default::default()
    };
    let engine =
        crate::app::memory_engine(&scheduler_flags(&["--node-scheduler-policy=binpack"]), cluster).await.unwrap();
    let pods = vec![metax_pod(2).name("train").view(), metax_pod(3).name("big").view()];
    let sim = crate::simulate::simulate_pods(&engine, pods).await.unwrap();
    let train = &sim.pods[0];
    assert_eq!(train.node.as_deref(), Some("b"), "{train:?}");
    assert_eq!(
        train.annotations.get(keys::ALLOCATED).map(String::as_str),
        Some("b-metax-3,Metax-GPU,65536,100:b-metax-2,Metax-GPU,65536,100:;")
    );
    assert_eq!(train.annotations.get(keys::TO_ALLOCATE), train.annotations.get(keys::ALLOCATED));
    // b has two devices left, so the 3-device pod goes to a (no key "3": score 2000 on both, but
    // only a has room).
    assert_eq!(sim.pods[1].node.as_deref(), Some("a"), "{:?}", sim.pods[1]);
    let why_b = sim.pods[1].failed_nodes.get("b").map(String::as_str).unwrap_or("");
    assert!(why_b.starts_with("2/4 AllocatedCardsInsufficientRequest, 2/4 CardTimeSlicingExhausted"), "{why_b}");
}
