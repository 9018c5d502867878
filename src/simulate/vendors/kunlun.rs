//! kunlun through the engine over an in-memory cluster.

use crate::devices::kunlun::fixtures::*;
use crate::model::annotations::kunlun as keys;
use crate::testing::*;

#[actix::test]
async fn the_engine_fills_wings_by_device_index() {
    // HAMi's wing preferences on one 8-device node: 4 take the left wing, 2 a full right wing's
    // first pair, then single devices fill the right wing; the ninth device does not exist.
    let pods = [4, 2, 1, 1, 1].iter().enumerate().map(|(i, n)| ask(*n).name(&format!("p{i}")).view()).collect();
    let sim = simulate(vec![xpus(8).view()], pods).await;
    let idx: Vec<Option<&str>> =
        sim.pods.iter().map(|p| p.annotations.get(keys::DEVICE_IDX).map(String::as_str)).collect();
    assert_eq!(idx, [Some("0,1,2,3"), Some("4,5"), Some("6"), Some("7"), None]);
    assert_eq!(sim.pods[0].annotations[keys::ALLOCATED].matches("kunlun,98304,100").count(), 4);
    assert!(sim.pods[4].failed_nodes["n1"].starts_with("1/8 NumaNotFit"), "{:?}", sim.pods[4].failed_nodes);
}
