//! What the cluster shows, through the engine: finished, terminating and malformed pods, a
//! restart rebuilding usage from the pods, malformed and deleted nodes.

use crate::actor::tests::*;

#[actix::test]
async fn a_finished_pod_frees_its_devices_and_a_terminating_one_keeps_them() {
    // Succeeded/Failed drop the pod's usage; terminating pods keep their
    // devices until deleted, also when first seen after a restart.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let run = pod().gpu(1).mem_mib(4096).name("run").placed("a", "GPU-a-0,NVIDIA,4096,10:;").bound_to("a");
    observe(&e, &b, &run.clone().phase("Running")).await;
    assert_eq!(used(&e, "a"), (1, 4096, 10));
    observe(&e, &b, &run.clone().phase("Succeeded")).await;
    assert_eq!(used(&e, "a"), (0, 0, 0));
    assert!(allocs(&e).await.is_empty());

    let fail = pod().gpu(1).mem_mib(2048).name("fail").placed("a", "GPU-a-0,NVIDIA,2048,0:;").bound_to("a");
    observe(&e, &b, &fail.clone().phase("Failed")).await;
    assert_eq!(used(&e, "a"), (0, 0, 0), "a finished pod first seen is not counted");

    let term = pod().gpu(1).mem_mib(8192).name("term").placed("a", "GPU-a-0,NVIDIA,8192,0:;").bound_to("a");
    observe(&e, &b, &term.clone().phase("Running").terminating()).await;
    assert_eq!(used(&e, "a"), (1, 8192, 0));
    assert_eq!(allocs(&e).await, [("a".into(), "term".into(), AllocState::Committed)]);
    e.delete_pod(&PodUid::new("uid-term"));
    let _ = e.reports().await;
    assert_eq!(used(&e, "a"), (0, 0, 0));
}

#[actix::test]
async fn pods_without_the_node_annotation_or_with_malformed_devices_are_not_counted() {
    // Only pods with hami.io/vgpu-node count; a decode error ignores the pod.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let plain = pod().gpu(1).mem_mib(4096).name("plain").bound_to("a");
    observe(&e, &b, &plain).await;
    let bad = pod().gpu(1).mem_mib(4096).name("bad").placed("a", "GPU-a-0,NVIDIA,lots,0:;").bound_to("a");
    observe(&e, &b, &bad).await;
    assert_eq!(used(&e, "a"), (0, 0, 0));
    assert!(allocs(&e).await.is_empty());
}

#[actix::test]
async fn a_restarted_engine_rebuilds_the_same_usage_from_the_pods() {
    // Nothing is persisted; usage is rebuilt from the pods' allocated keys.
    // Bound pods come back committed, a filtered but unbound one provisionally.
    let nodes = [node("a").gpus(2, 16384), node("b").gpus(1, 8192)];
    let (e, b) = engine(&nodes).await;
    let pods = [
        pod().gpu(1).mem_mib(4096).cores(30).name("p1"),
        pod().gpu(2).mem_mib(2048).name("p2"),
        pod().gpu(1).mem_mib(6000).cores(50).name("p3").annotation(keys::NODE_SCHEDULER_POLICY, "spread"),
    ];
    for p in &pods {
        let out = filter(&e, &b, p, &["a", "b"]).await;
        e.bind(&pref(p), chosen(&out)).await.unwrap();
        e.observe_pod(&b.pod("default", &p.view.metadata.name).unwrap());
    }
    let pending = pod().gpu(1).mem_mib(1000).name("pending");
    filter(&e, &b, &pending, &["a", "b"]).await;
    let before = usage(&e).await;
    let states = allocs(&e).await;
    assert_eq!(states.len(), 4);

    let cluster = ClusterObjects {
        nodes: b.nodes().iter().map(|n| (**n).clone()).collect(),
        pods: b.pods().iter().map(|p| (**p).clone()).collect(),
        quotas: Vec::new(),
        groups: Vec::new(),
        budgets: Vec::new(),
    };
    let restarted = Engine::start(
        EngineConfig { arbiters: 3, ..Default::default() },
        Arc::new(vendors()),
        MemoryBackend::new(Duration::from_secs(300)),
        None,
    );
    crate::app::load_cluster(&restarted, cluster).await;
    assert_eq!(usage(&restarted).await, before);
    assert_eq!(allocs(&restarted).await, states, "same pods, same nodes, same states");
    assert!(states.iter().any(|s| s.1 == "pending" && s.2 == AllocState::Reserved));
}

#[actix::test]
async fn a_malformed_node_registration_is_reported_and_the_node_skipped() {
    // hami-rs: a registration that cannot be decoded makes that node's devices unusable, with
    // the reason in FailedNodes and a DeviceRegistrationInvalid Event; other nodes are unaffected.
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 16384)]).await;
    let mut bad = node("a").gpus(1, 16384).view();
    bad.metadata.annotations.insert(keys::NVIDIA_REGISTER.into(), "[{".into());
    b.insert_node(bad.clone());
    let r = e.register_node(Arc::new(bad)).await;
    let Registration::Malformed { reason } = r else { panic!("expected Malformed, got {r:?}") };
    let ev: Vec<_> = b.events().into_iter().filter(|ev| ev.reason == reasons::DEVICE_REGISTRATION_INVALID).collect();
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].object, ev[0].pod.name.as_str(), ev[0].message.as_str()),
        (ObjectKind::Node, "a", reason.as_str())
    );

    let p = pod().gpu(1).mem_mib(1000).name("p1");
    let FilterOutcome::Chosen { node, failed, .. } = filter(&e, &b, &p, &["a", "b"]).await else { panic!() };
    assert_eq!(node.as_str(), "b");
    assert_eq!(failed.render()["a"], format!("node unregistered ({reason})"));
}

#[actix::test]
async fn pods_of_a_deleted_node_count_again_only_once_it_is_registered_again() {
    // A deleted node drops its allocations; an update to one of its pods must not bring the node
    // back half-counted. Registered again, it is empty until its pods are observed once more.
    let a = node("a").gpus(1, 16384);
    let (e, b) = engine(std::slice::from_ref(&a)).await;
    let p1 = pod().gpu(1).mem_mib(4096).name("p1").placed("a", "GPU-a-0,NVIDIA,4096,0:;").bound_to("a");
    let p2 = pod().gpu(1).mem_mib(2048).name("p2").placed("a", "GPU-a-0,NVIDIA,2048,0:;").bound_to("a");
    observe(&e, &b, &p1).await;
    observe(&e, &b, &p2).await;
    assert_eq!(used(&e, "a"), (2, 6144, 0));

    e.remove_node("a");
    assert!(e.was_removed("a"));
    observe(&e, &b, &p1).await;
    assert!(e.node_names().is_empty(), "an update to a pod of the deleted node does not bring it back");
    assert!(allocs(&e).await.is_empty());

    assert!(matches!(e.register_node(Arc::new(a.view())).await, Registration::Ok { .. }));
    assert!(!e.was_removed("a"));
    observe(&e, &b, &p1).await;
    observe(&e, &b, &p2).await;
    assert_eq!(used(&e, "a"), (2, 6144, 0));
    assert_eq!(
        allocs(&e).await,
        [("a".into(), "p1".into(), AllocState::Committed), ("a".into(), "p2".into(), AllocState::Committed)]
    );
}
