//! enflame through the engine over an in-memory cluster.

use crate::devices::enflame::fixtures::*;
use crate::model::annotations::enflame as keys;
use crate::testing::*;

#[actix::test]
async fn the_engine_places_exclusive_gcus_until_the_node_is_full() {
    // Each GCU serves one pod, the one registered last first; the third
    // one-device pod finds none left.
    let pods = (0..3).map(|i| ask(1).name(&format!("p{i}")).view()).collect();
    let sim = simulate(vec![gcus(2).view()], pods).await;
    assert_eq!(sim.pods[0].node.as_deref(), Some("n1"));
    assert_eq!(sim.pods[0].annotations[keys::TO_ALLOCATE], "n1-GCU-1,GCU,100,100:;");
    assert_eq!(sim.pods[1].annotations[keys::ALLOCATED], "n1-GCU-0,GCU,100,100:;");
    assert_eq!(sim.pods[2].node, None);
    assert_eq!(sim.pods[2].failed_nodes["n1"], "2/2 ExclusiveDeviceAllocateConflict");
}
