//! kunlun_vxpu through the engine over an in-memory cluster.

use crate::devices::kunlun_vxpu::fixtures::*;
use crate::model::annotations::kunlun_vxpu as xpu_keys;
use crate::testing::*;

#[actix::test]
async fn the_engine_packs_equal_slices_and_keeps_sizes_apart() {
    // A quarter joins the device already running a quarter (the selector goes by index, left wing
    // first); a half needs a device without quarters; a whole device needs an idle one, and none is
    // left.
    let pods = vec![
        ask(1, "20000").name("q1").view(),
        ask(1, "20000").name("q2").view(),
        ask(1, "40000").name("h1").view(),
        ask(1, "98304").name("w1").view(),
    ];
    let sim = simulate(vec![xpus(2).view()], pods).await;
    let alloc = |i: usize| sim.pods[i].annotations.get(xpu_keys::ALLOCATED).cloned();
    assert_eq!(alloc(0).as_deref(), Some("xpu-0,XPU,24576,25:;"));
    assert_eq!(alloc(1).as_deref(), Some("xpu-0,XPU,24576,25:;"));
    assert_eq!(alloc(2).as_deref(), Some("xpu-1,XPU,49152,50:;"));
    assert_eq!(sim.pods[2].annotations[xpu_keys::TO_ALLOCATE], "xpu-1,XPU,49152,50:;");
    assert_eq!(alloc(3), None);
    assert!(sim.pods[3].failed_nodes["n1"].starts_with("1/2 NumaNotFit"), "{:?}", sim.pods[3].failed_nodes);
}
