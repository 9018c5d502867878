//! biren through the engine over an in-memory cluster.

use crate::devices::biren::fixtures::*;
use crate::model::annotations::biren as keys;
use crate::testing::*;

#[actix::test]
async fn the_engine_shares_devices_up_to_their_slot_count() {
    // Two slots per device, four slots on the node: the fifth single-device pod finds every device
    // full.
    let pods = (0..5).map(|i| ask(1).name(&format!("p{i}")).view()).collect();
    let sim = simulate(vec![two().view()], pods).await;
    let placed = sim.pods.iter().filter(|p| p.node.is_some()).count();
    assert_eq!(placed, 4);
    assert!(sim.pods.iter().take(4).all(|p| p.annotations[keys::ALLOCATED].ends_with(",Biren,0,0:;")));
    assert!(
        sim.pods[4].failed_nodes["n1"].starts_with("2/2 CardTimeSlicingExhausted"),
        "{:?}",
        sim.pods[4].failed_nodes
    );
}
