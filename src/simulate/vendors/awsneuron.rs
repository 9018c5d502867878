//! awsneuron through the engine over an in-memory cluster.

use crate::devices::awsneuron::fixtures::*;
use crate::model::annotations::awsneuron as keys;
use crate::testing::*;

#[actix::test]
async fn the_engine_mixes_core_and_device_requests_on_an_inf2_node() {
    // Devices without memory all score 0, so the sort keeps registration order and one-core pods
    // fill device 3, tried first, (core indexes 6 and 7); a two-device pod takes the first idle run
    // by index (0, 1); a second one finds none; the next one-core pod passes the full device 3 and
    // gets core 0 of device 2 (core index 4).
    let pods = vec![
        cores(1).name("c0").view(),
        cores(1).name("c1").view(),
        devices(2).name("d0").view(),
        devices(2).name("d1").view(),
        cores(1).name("c2").view(),
    ];
    let sim = simulate(vec![neurons(4, 2, "inf2.24xlarge").view()], pods).await;
    let ids: Vec<Option<&str>> =
        sim.pods.iter().map(|p| p.annotations.get(keys::NEURON_IDS).map(String::as_str)).collect();
    assert_eq!(ids, [Some("6"), Some("7"), Some("0,1"), None, Some("4")]);
    assert_eq!(sim.pods[0].annotations[keys::RESOURCE_TYPE], CORE);
    assert!(!sim.pods[2].annotations.contains_key(keys::RESOURCE_TYPE));
    assert_eq!(sim.pods[2].annotations[keys::PREDICATE_NODE], "n1");
    assert!(sim.pods[3].failed_nodes["n1"].starts_with("1/4 NumaNotFit"), "{:?}", sim.pods[3].failed_nodes);
}
