//! Filters side by side: long lists fitted in slices over the arbiters, the message fan-out,
//! engines sharing a thread, the coordinator falling back when the best node refuses, and
//! concurrent filters and binds that never over-commit a node.

use crate::actor::tests::*;

#[actix::test]
async fn long_candidate_lists_fitted_in_slices_decide_as_one_thread_does() {
    // From `slice_min` candidates on, the snapshot path fits slices on several arbiters at once;
    // the decisions, devices, failure reasons and usage must be those of one thread fitting them
    // all.
    let nodes: Vec<NodeBuilder> = (0..300)
        .map(|k| {
            let n = node(&format!("n{k:03}"));
            match k % 3 {
                0 => n.gpus(1, 8192),
                1 => n.gpus(2, 16384),
                _ => n.gpu(gpu(&format!("GPU-n{k}-0"), 32768).ty("NVIDIA-A100")),
            }
        })
        .collect();
    let names: Vec<&'static str> =
        nodes.iter().map(|n| &*Box::leak(n.name.clone().into_boxed_str())).chain(["unknown"]).collect();
    let pods: Vec<PodBuilder> = (0..12)
        .map(|k| {
            let p = pod().gpu(1 + k % 2).mem_mib(3000 + 2500 * u64::from(k % 5)).name(&format!("p{k}"));
            if k % 4 == 3 { p.annotation(keys::NODE_SCHEDULER_POLICY, "spread") } else { p }
        })
        .chain([
            pod().gpu(1).mem_mib(40000).name("too-big"),
            pod().gpu(1).mem_mib(1000).name("a100").annotation(keys::NVIDIA_USE_TYPE, "A100"),
        ])
        .collect();
    let mut runs = Vec::new();
    for arbiters in [1, 3] {
        let cfg = EngineConfig { arbiters, slice_min: 64, ..Default::default() };
        let (e, b) = engine_with(cfg, &nodes).await;
        let mut seen = Vec::new();
        for p in &pods {
            let out = filter(&e, &b, p, &names).await;
            let mut written = b.written("default", &p.view.metadata.name);
            written.remove(keys::ASSIGNED_TIME);
            let out = match out {
                FilterOutcome::Chosen { node, failed, .. } => (Some(node), failed.render()),
                FilterOutcome::NoFit { failed } => (None, failed.render()),
                other => panic!("{other:?}"),
            };
            seen.push((out, written));
        }
        runs.push((seen, usage(&e).await));
    }
    assert!(runs[0].0.iter().any(|((n, _), _)| n.is_none()), "the scenario refuses a pod");
    assert_eq!(runs[0], runs[1]);
}

#[actix::test]
async fn messages_mode_decides_like_snapshot_mode() {
    // The two evaluation paths (FilterMode) must agree: same node, same devices, same
    // failure reasons, pod after pod.
    let nodes =
        [node("a").gpus(2, 16384), node("b").gpus(1, 8192), node("c").gpu(gpu("GPU-c-0", 32768).ty("NVIDIA-A100"))];
    let pods = [
        pod().gpu(1).mem_mib(4096).cores(30).name("p1"),
        pod().gpu(2).mem_mib(8000).name("p2"),
        pod().gpu(1).mem_mib(6000).name("p3").annotation(keys::NODE_SCHEDULER_POLICY, "spread"),
        pod().gpu(1).mem_mib(30000).name("p4"),
        pod().gpu(1).mem_mib(30000).name("p5"),
        pod().gpu(1).mem_mib(20000).cores(100).name("p6"),
        pod().gpu(1).mem_mib(1000).name("p7").annotation(keys::NVIDIA_USE_TYPE, "A100"),
    ];
    let candidates = ["a", "b", "c", "unknown"];
    let mut runs = Vec::new();
    for mode in [FilterMode::Snapshot, FilterMode::Messages] {
        let (e, b) = engine_with(EngineConfig { arbiters: 2, filter_mode: mode, ..Default::default() }, &nodes).await;
        let mut seen = Vec::new();
        for p in &pods {
            let out = filter(&e, &b, p, &candidates).await;
            let mut written = b.written("default", &p.view.metadata.name);
            written.remove(keys::ASSIGNED_TIME);
            seen.push((out, written));
        }
        seen.push((FilterOutcome::PassThrough, BTreeMap::new()));
        runs.push((seen, usage(&e).await));
    }
    let placed = runs[0].0.iter().filter(|(o, _)| matches!(o, FilterOutcome::Chosen { .. })).count();
    assert!(placed >= 5, "the scenario places most pods: {:?}", runs[0].0);
    assert!(runs[0].0.iter().any(|(o, _)| matches!(o, FilterOutcome::NoFit { .. })), "and refuses some");
    assert_eq!(runs[0], runs[1]);
}

#[actix::test]
async fn engines_sharing_a_thread_each_decide_through_their_own_coordinator() {
    // Each filtering thread keeps a coordinator per engine; one engine's must never decide
    // over another's address book (its nodes would be unknown there: no fit).
    let (a, ab) = engine(&[node("a1").gpus(1, 16384)]).await;
    let (b, bb) = engine(&[node("b1").gpus(1, 16384)]).await;
    for round in 0..3 {
        let p = |n: &str| pod().gpu(1).mem_mib(1024).name(&format!("{n}-{round}"));
        assert_eq!(chosen(&filter(&a, &ab, &p("pa"), &["a1"]).await), "a1");
        assert_eq!(chosen(&filter(&b, &bb, &p("pb"), &["b1"]).await), "b1");
    }
    // A stopped engine's coordinator on this thread does not keep its node actors alive.
    let book = Arc::downgrade(&a.inner.nodes.book);
    drop((a, ab));
    assert!(book.upgrade().is_none(), "the address book went with its engine");
    assert_eq!(chosen(&filter(&b, &bb, &pod().gpu(1).mem_mib(1024).name("after"), &["b1"]).await), "b1");
}

#[actix::test]
async fn the_coordinator_falls_back_to_the_next_node_when_the_best_one_refuses() {
    // The Filter answer is advisory; when the winner's Reserve re-validation
    // says no, the coordinator tries the next best node and reports the refusal.
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 16384)]).await;
    let full = pod().gpu(1).mem_mib(16384).name("full").placed("a", "GPU-a-0,NVIDIA,16384,0:;").bound_to("a");
    observe(&e, &b, &full).await;
    let req = Arc::new(pod().gpu(1).mem_mib(4096).name("p1").request_with(e.vendors()));
    let coordinator = e.inner.nodes.coordinator();

    let ranked = vec![NodeName::new("a"), NodeName::new("b")];
    let Decision::Reserved { node, reserved, refused } =
        coordinator.send(Decide { pod: req.clone(), ranked }).await.unwrap()
    else {
        panic!("expected a reservation on b")
    };
    assert_eq!(node.as_str(), "b");
    assert_eq!(codec::encode_pod_devices(reserved.devices.vendor(VendorId(0)).unwrap()), "GPU-b-0,NVIDIA,4096,0:;");
    assert_eq!(refused.len(), 1);
    assert_eq!((refused[0].0.as_str(), refused[0].1.hami_text()), ("a", "1/1 CardInsufficientMemory".to_owned()));

    let ranked = vec![NodeName::new("a"), NodeName::new("zz")];
    let Decision::Refused(refused) = coordinator.send(Decide { pod: req, ranked }).await.unwrap() else {
        panic!("expected every node to refuse")
    };
    let refused: Vec<(&str, Rejection)> = refused.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    assert_eq!(refused[1], ("zz", Rejection::NodeUnregistered));
    assert_eq!(refused[0].1.hami_text(), "1/1 CardInsufficientMemory");
}

#[actix::test]
async fn concurrent_filters_never_overcommit_a_node() {
    // Concurrent Filters reading the same snapshot all pick the same
    // device; the owning actor accepts only what fits and the rest answer NoFit.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let pods: Vec<PodBuilder> = (0..40).map(|i| pod().gpu(1).mem_mib(1000).cores(10).name(&format!("p{i}"))).collect();
    for p in &pods {
        b.insert_pod(p.view());
    }
    let candidates = names(&["a"]);
    let outs = futures::future::join_all(pods.iter().map(|p| {
        let (e, v, c) = (e.clone(), p.view(), candidates.clone());
        async move { e.filter(&v, &c).await }
    }))
    .await;
    let chosen = outs.iter().filter(|o| matches!(o, FilterOutcome::Chosen { .. })).count();
    assert_eq!(chosen, 10, "10 slots: {outs:?}");
    assert_eq!(outs.iter().filter(|o| matches!(o, FilterOutcome::NoFit { .. })).count(), 30);
    assert_eq!(used(&e, "a"), (10, 10000, 100));
    assert!(e.snapshot("a").unwrap().devices.iter().all(|d| d.within_capacity()));
    assert_eq!(allocs(&e).await.len(), 10);
}

#[actix::test]
async fn concurrent_filters_for_the_last_gpu_of_the_best_node_spill_to_the_next() {
    // Two pods both rank `a` first; one gets it, the other is placed on `b` with a's reason.
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 16384)]).await;
    let p1 = pod().gpu(1).mem_mib(16384).name("p1");
    let p2 = pod().gpu(1).mem_mib(16384).name("p2");
    b.insert_pod(p1.view());
    b.insert_pod(p2.view());
    let c = names(&["a", "b"]);
    let (v1, v2) = (p1.view(), p2.view());
    let (o1, o2) = futures::join!(e.filter(&v1, &c), e.filter(&v2, &c));
    let mut placed = vec![chosen(&o1).to_owned(), chosen(&o2).to_owned()];
    let loser = if chosen(&o1) == "b" { &o1 } else { &o2 };
    let FilterOutcome::Chosen { failed, .. } = loser else { unreachable!() };
    let failed = failed.render();
    assert!(failed["a"].starts_with("1/1 CardInsufficientMemory"), "{failed:?}");
    placed.sort();
    assert_eq!(placed, ["a", "b"]);
    assert_eq!(used(&e, "a"), (1, 16384, 0));
    assert_eq!(used(&e, "b"), (1, 16384, 0));
}

#[actix::test]
async fn concurrent_binds_to_one_node_are_serialized_and_all_succeed() {
    // HAMi's per-node bind mutex: binds to one node wait for each other instead of failing on
    // the node lock the previous bind took (the in-memory plugin releases it after each bind).
    let (e, b) = engine(&[node("a").gpus(2, 16384)]).await;
    let pods: Vec<PodBuilder> = (0..6).map(|i| pod().gpu(1).mem_mib(1000).name(&format!("p{i}"))).collect();
    for p in &pods {
        assert_eq!(chosen(&filter(&e, &b, p, &["a"]).await), "a");
    }
    let results = futures::future::join_all(pods.iter().map(|p| {
        let (e, r) = (e.clone(), pref(p));
        async move { e.bind(&r, "a").await }
    }))
    .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert!(allocs(&e).await.iter().all(|a| a.2 == AllocState::Committed));
    assert!(!b.node("a").unwrap().metadata.annotations.contains_key(keys::NODE_LOCK));
    assert_eq!(e.reports().await[0].locked_by, None);
}
