//! mthreads through the engine over an in-memory cluster.

use crate::backend::memory::ClusterObjects;
use crate::devices::mthreads::fixtures::*;
use crate::model::annotations::mthreads as keys;
use crate::testing::*;

#[actix::test]
async fn a_pod_lands_on_one_gpu_through_the_engine() {
    let cluster =
        ClusterObjects { nodes: vec![gpus(2).view()], pods: vec![], quotas: vec![], groups: vec![], budgets: vec![] };
    let engine = crate::app::memory_engine(&scheduler_flags(&[]), cluster).await.unwrap();
    let pods = vec![
        and_container(mt_pod(1, 16, 4), "second", 32, 8).name("pair").view(),
        // What the webhook makes of `vgpu: 2`: two whole GPUs; one is partly taken.
        mt_pod(2, 192, 32).name("two-whole").view(),
        mt_pod(1, 96, 16).name("one-whole").view(),
    ];
    let sim = crate::simulate::simulate_pods(&engine, pods).await.unwrap();
    let pair = &sim.pods[0];
    assert_eq!(pair.node.as_deref(), Some("n1"), "{pair:?}");
    let got = |k: &str| pair.annotations.get(k).map(String::as_str);
    // Of two idle GPUs the one registered last is tried first, and the second container joins it.
    assert_eq!(got(keys::ALLOCATED), Some("n1-mthreads-1,Mthreads,8192,4:;n1-mthreads-1,Mthreads,16384,8:;"));
    assert_eq!(got(keys::GPU_INDEX), Some("1"));
    assert_eq!(got(keys::PREDICATE_NODE), Some("n1"));
    assert!(got(keys::PREDICATE_TIME).is_some_and(|t| t.len() >= 19 && t.bytes().all(|b| b.is_ascii_digit())));
    assert_eq!(sim.pods[1].node, None, "{:?}", sim.pods[1]);
    assert_eq!(
        sim.pods[2].annotations.get(keys::ALLOCATED).map(String::as_str),
        Some("n1-mthreads-0,Mthreads,49152,16:;")
    );
}
