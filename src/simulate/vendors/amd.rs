//! amd through the engine over an in-memory cluster.

use crate::devices::amd::fixtures::*;
use crate::model::annotations::amd as keys;
use crate::testing::*;

#[actix::test]
async fn the_engine_converts_percentages_to_cus_per_card() {
    // Half the CUs and 8 GiB on GPU-b (of two idle cards, the one registered last is tried first);
    // a full-CU request (the default 100 %) cannot join it and takes GPU-a; a whole-card pod finds
    // no card with all its memory free.
    let pods = vec![
        gpus(1).limit(MEM, "8192").limit(CORES, "50").name("half").view(),
        gpus(1).limit(MEM, "8192").name("allcus").view(),
        gpus(1).name("whole").view(),
    ];
    let sim = simulate(vec![two().view()], pods).await;
    assert_eq!(sim.pods[0].annotations[keys::ALLOCATED], format!("GPU-b,{MI300X},8192,152:;"));
    assert_eq!(sim.pods[1].annotations[keys::TO_ALLOCATE], format!("GPU-a,{MI300X},8192,304:;"));
    assert_eq!(sim.pods[2].node, None);
    assert!(sim.pods[2].failed_nodes["n1"].starts_with("2/2 CardInsufficientMemory"), "{:?}", sim.pods[2].failed_nodes);
}
