//! metax_sgpu through the engine over an in-memory cluster.

use crate::devices::metax_sgpu::fixtures::*;
use crate::model::annotations::metax_sgpu as keys;
use crate::testing::*;

#[actix::test]
async fn an_exclusive_pod_lands_on_one_metalink_zone_and_gets_metax_annotations() {
    let flags = scheduler_flags(&[]);
    let cluster = crate::backend::memory::ClusterObjects { nodes: vec![zoned().view()], ..Default::default() };
    let engine = crate::app::memory_engine(&flags, cluster).await.unwrap();
    let pods = vec![
        sgpu_pod(2).name("train").limit(VMEM, "16").view(),
        sgpu_pod(1)
            .name("shared")
            .limit(VMEM, "8")
            .limit(VCORE, "40")
            .annotation(keys::QOS_POLICY, "best-effort")
            .view(),
    ];
    let sim = crate::simulate::simulate_pods(&engine, pods).await.unwrap();
    let train = &sim.pods[0];
    assert_eq!(train.node.as_deref(), Some("n1"), "{train:?}");
    let a = |k: &str| train.annotations.get(k).map(String::as_str);
    assert_eq!(a(keys::ALLOCATED), Some("sgpu-3,Metax-SGPU,16384,100:sgpu-2,Metax-SGPU,16384,100:;"));
    assert_eq!(a(keys::TO_ALLOCATE), a(keys::ALLOCATED));
    assert_eq!(
        a(keys::GPU_DEVICES_ALLOCATED),
        Some(r#"[[{"uuid":"sgpu-3","compute":100,"vRam":16384},{"uuid":"sgpu-2","compute":100,"vRam":16384}]]"#)
    );
    assert!(a(keys::PREDICATE_TIME).is_some_and(|t| t.parse::<i128>().is_ok()));
    // The shared pod may not join the exclusive devices; it takes the idle device tried first
    // (sgpu-4, registered last).
    let shared = &sim.pods[1];
    assert_eq!(
        shared.annotations.get(keys::ALLOCATED).map(String::as_str),
        Some("sgpu-4,Metax-SGPU,8192,40:;"),
        "{shared:?}"
    );
}
