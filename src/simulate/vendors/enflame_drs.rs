//! enflame_drs through the engine over an in-memory cluster.

use crate::devices::enflame_drs::fixtures::*;
use crate::model::annotations::enflame_drs as keys;
use crate::testing::*;

#[actix::test]
async fn the_engine_counts_a_bound_pods_slices() {
    // Slice accounting through the engine: after a 2-slice pod is bound, its usage is rebuilt from
    // its allocated annotation. On a 2-slice device a 1-slice pod must then find no slot (HAMi
    // counted the bound pod as one slice and would over-commit the device).
    let pods = vec![slices(2).name("big").view(), slices(1).name("small").view()];
    let sim = simulate(vec![one_device(2).view()], pods).await;
    let big = &sim.pods[0];
    assert_eq!(big.node.as_deref(), Some("n1"));
    assert_eq!(big.annotations[keys::ALLOCATED], "n1-enflame-drs-0,Enflame,24576,50:;");
    assert_eq!(
        big.annotations[keys::ASSIGNED_CONTAINERS],
        r#"{"c":{"allocated":false,"request":2,"profileID":"p2","profileName":"2g.24gb"}}"#
    );
    assert_eq!(big.annotations[keys::REQUEST_SIZE], "2");
    let small = &sim.pods[1];
    assert_eq!(small.node, None);
    assert!(small.failed_nodes["n1"].starts_with("1/1 CardTimeSlicingExhausted"), "{:?}", small.failed_nodes);
}
