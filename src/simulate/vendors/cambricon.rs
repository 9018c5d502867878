//! cambricon through the engine over an in-memory cluster.

use crate::backend::Backend;
use crate::backend::memory::ClusterObjects;
use crate::devices::cambricon::fixtures::*;
use crate::model::annotations as common;
use crate::model::annotations::cambricon as keys;
use crate::testing::*;

#[actix::test]
async fn mlu_pods_are_placed_through_the_engine_and_their_lock_released_after_allocation() {
    let cluster =
        ClusterObjects { nodes: vec![mlus(2).view()], pods: vec![], quotas: vec![], groups: vec![], budgets: vec![] };
    let engine = crate::app::memory_engine(&scheduler_flags(&[]), cluster).await.unwrap();
    let pods = vec![
        mlu_pod(1, 16, 50).name("mlu-a").view(),
        // mlu-a's bind took `cambricon.com/dsmlu.lock`; the device plugin (played by the in-memory
        // cluster) releases it after Allocate, so mlu-b can bind.
        pod().name("mlu-b").limit(VMLU, "1").view(),
    ];
    let sim = crate::simulate::simulate_pods(&engine, pods).await.unwrap();
    let a = &sim.pods[0];
    assert_eq!(a.node.as_deref(), Some("n1"), "{a:?}");
    let got = |k: &str| a.annotations.get(k).map(String::as_str);
    // Of two idle cards, the one registered last is tried first.
    assert_eq!(got(keys::TO_ALLOCATE), Some("n1-cambricon-mlu-1,MLU,4096,50:;"));
    assert_eq!(got(keys::ALLOCATED), Some("n1-cambricon-mlu-1,MLU,4096,50:;"));
    assert_eq!(got(keys::DSMLU_PROFILE), Some("1_50_16"));
    assert_eq!(got(keys::DSMLU_ASSIGNED), Some("false"));
    assert_eq!(sim.pods[1].node.as_deref(), Some("n1"), "{:?}", sim.pods[1]);
    assert!(engine.backend().node("n1").unwrap().annotation(common::CAMBRICON_LOCK).is_none());
}

#[actix::test]
async fn a_held_mlu_lock_blocks_mlu_pods_and_survives_another_pods_failed_bind() {
    // Another pod holds the shared lock, so an NVIDIA pod's bind fails on this node; a fresh
    // Cambricon lock is held too.
    let n1 = mlus(2)
        .gpu(gpu("GPU-0", 16384))
        .annotation(common::NODE_LOCK, "2099-01-01T00:00:00Z,default,holder")
        .annotation(common::CAMBRICON_LOCK, "2099-01-01T00:00:00Z");
    // The holder still needs the lock: bound to n1, its device plugin not yet answered.
    let mut holder = pod()
        .name("holder")
        .annotation(common::ASSIGNED_NODE, "n1")
        .annotation(common::BIND_PHASE, "allocating")
        .view();
    holder.spec.node_name = Some("n1".into());
    let cluster =
        ClusterObjects { nodes: vec![n1.view()], pods: vec![holder], quotas: vec![], groups: vec![], budgets: vec![] };
    let engine = crate::app::memory_engine(&scheduler_flags(&[]), cluster).await.unwrap();
    let pods = vec![
        // As in HAMi, a Cambricon lock younger than 2 minutes fails the bind.
        pod().name("mlu-b").limit(VMLU, "1").view(),
        // An NVIDIA pod's bind fails on the shared lock. HAMi would then also remove the MLU
        // lock (its rollback releases Cambricon's lock for every pod, without an owner check);
        // hami-rs releases only locks this pod took.
        pod().name("gpu-c").gpu(1).mem_mib(1000).view(),
    ];
    let sim = crate::simulate::simulate_pods(&engine, pods).await.unwrap();
    let b = &sim.pods[0];
    assert_eq!(b.node, None);
    assert!(b.error.as_deref().is_some_and(|e| e.to_string().contains("node n1 has been locked within 2m0s")), "{b:?}");
    let c = &sim.pods[1];
    assert!(c.error.as_deref().is_some_and(|e| e.to_string().contains("node lock contention")), "{c:?}");
    let node = engine.backend().node("n1").unwrap();
    assert_eq!(node.annotation(common::CAMBRICON_LOCK), Some("2099-01-01T00:00:00Z"), "the MLU lock survives");
    assert_eq!(node.annotation(common::NODE_LOCK), Some("2099-01-01T00:00:00Z,default,holder"));
}
