//! vastai through the engine over an in-memory cluster.

use crate::devices::vastai::fixtures::*;
use crate::model::DeviceInfo;
use crate::model::annotations::vastai as keys;
use crate::testing::*;

#[actix::test]
async fn the_engine_keeps_multi_die_pods_on_one_card() {
    // The two-die pod takes card B's dies, from the end (d4, d3); the next two-die pod takes card A
    // (B has one die left); a single die fills B's last one.
    let pods = vec![ask(2).name("p0").view(), ask(2).name("p1").view(), ask(1).name("p2").view()];
    // Each die takes one task, so a chosen die is full.
    let devs: Vec<DeviceInfo> = ["d0", "d1", "d2", "d3", "d4"]
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut x = dev(d, i as u32, Some(if i < 2 { "A" } else { "B" }));
            x.count = 1;
            x
        })
        .collect();
    let sim = simulate(vec![va_node(&devs).view()], pods).await;
    let alloc: Vec<&str> = sim.pods.iter().map(|p| p.annotations[keys::ALLOCATED].as_str()).collect();
    assert_eq!(alloc, ["d4,Vastai,0,0:d3,Vastai,0,0:;", "d1,Vastai,0,0:d0,Vastai,0,0:;", "d2,Vastai,0,0:;"]);
}
