//! `--filter-result=all`: the filter answers every fitting node and still reserves on the best,
//! prioritize scores them, and a bind to another node moves the reservation there.

use crate::actor::tests::*;

fn all_cfg() -> EngineConfig {
    EngineConfig {
        arbiters: 2,
        filter_result: FilterResult::All,
        decision_write: DecisionWrite::Bind,
        ..Default::default()
    }
}

/// a: 8 GiB already taken; b: empty; c: a card too small for the pods below.
async fn three_nodes() -> (Mem, MemoryBackend) {
    let nodes = [node("a").gpus(1, 16384), node("b").gpus(1, 16384), node("c").gpus(1, 2048)];
    let (e, b) = engine_with(all_cfg(), &nodes).await;
    let busy = pod().gpu(1).mem_mib(8192).name("busy").placed("a", "GPU-a-0,NVIDIA,8192,0:;").bound_to("a");
    observe(&e, &b, &busy).await;
    (e, b)
}

fn others(o: &FilterOutcome) -> Vec<&str> {
    match o {
        FilterOutcome::Chosen { others, .. } => others.iter().map(NodeName::as_str).collect(),
        other => panic!("expected a node, got {other:?}"),
    }
}

#[actix::test]
async fn every_fitting_node_is_answered_and_only_the_best_is_reserved() {
    let (e, b) = three_nodes().await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    let out = filter(&e, &b, &p, &["a", "b", "c"]).await;
    // The chosen node is binpack's, as with one node answered.
    assert_eq!(chosen(&out), "a");
    assert_eq!(others(&out), ["b"]);
    let FilterOutcome::Chosen { failed, .. } = &out else { unreachable!() };
    assert!(failed.render()["c"].contains("CardInsufficientMemory"), "{:?}", failed.render());
    assert_eq!(used(&e, "a"), (2, 12288, 0));
    assert_eq!(used(&e, "b"), (0, 0, 0));
    // The decision is written at bind: the filter wrote nothing.
    assert_eq!(b.pod_patches(), 0);

    // The same pod with one node answered is placed alike.
    let one = EngineConfig { arbiters: 2, decision_write: DecisionWrite::Bind, ..Default::default() };
    let (e1, b1) = engine_with(one, &[node("a").gpus(1, 16384), node("b").gpus(1, 16384)]).await;
    let busy = pod().gpu(1).mem_mib(8192).name("busy").placed("a", "GPU-a-0,NVIDIA,8192,0:;").bound_to("a");
    observe(&e1, &b1, &busy).await;
    let out = filter(&e1, &b1, &p, &["a", "b"]).await;
    assert_eq!((chosen(&out), others(&out).len()), ("a", 0));
}

#[actix::test]
async fn prioritize_puts_the_reserved_node_on_top_and_scores_the_rest_by_policy() {
    let (e, b) = three_nodes().await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a", "b", "c"]).await), "a");
    let scores = e.prioritize(&p.view(), &names(&["a", "b", "c"])).await.unwrap();
    // b, the emptier, is the worst for binpack among the fitting nodes: the floor of the band.
    assert_eq!(scores, [("a".to_owned(), 10), ("b".to_owned(), 7), ("c".to_owned(), 0)]);

    // Spread, never filtered here (as after a restart): scored afresh, reserving nothing; the
    // emptier node scores higher and no node is marked as reserved.
    let s = pod().gpu(1).mem_mib(4096).name("p2").annotation(keys::NODE_SCHEDULER_POLICY, "spread");
    b.insert_pod(s.view());
    let scores = e.prioritize(&s.view(), &names(&["a", "b", "c"])).await.unwrap();
    assert_eq!(scores, [("a".to_owned(), 7), ("b".to_owned(), 9), ("c".to_owned(), 0)]);
    assert!(!allocs(&e).await.iter().any(|a| a.1 == "p2"));

    // A pod that asks for no device leaves the choice to kube-scheduler.
    let plain = pod().name("plain");
    let scores = e.prioritize(&plain.view(), &names(&["a", "b"])).await.unwrap();
    assert_eq!(scores, [("a".to_owned(), 0), ("b".to_owned(), 0)]);
}

#[actix::test]
async fn a_bind_to_another_fitting_node_moves_the_reservation_and_writes_that_node() {
    let (e, b) = three_nodes().await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a", "b", "c"]).await), "a");
    e.bind(&pref(&p), "b").await.expect("b fits");
    let _ = e.reports().await;
    // The guess on a is given back; the pod is counted once, on b.
    assert_eq!(used(&e, "a"), (1, 8192, 0));
    assert_eq!(used(&e, "b"), (1, 4096, 0));
    let mine: Vec<_> = allocs(&e).await.into_iter().filter(|a| a.1 == "p1").collect();
    assert_eq!(mine, [("b".to_owned(), "p1".to_owned(), AllocState::Committed)]);
    let view = b.pod("default", "p1").unwrap();
    assert_eq!(view.spec.node_name.as_deref(), Some("b"));
    assert_eq!(view.annotation(keys::ASSIGNED_NODE), Some("b"));
    assert!(view.annotation(keys::NVIDIA_ALLOCATED).is_some_and(|d| d.starts_with("GPU-b-0,NVIDIA,4096,")));
}

#[actix::test]
async fn a_bind_to_a_node_that_filled_meanwhile_fails_and_holds_nothing() {
    let (e, b) = three_nodes().await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a", "b", "c"]).await), "a");
    // Another pod takes all of b before the bind.
    let full = pod().gpu(1).mem_mib(16384).name("full").placed("b", "GPU-b-0,NVIDIA,16384,0:;").bound_to("b");
    observe(&e, &b, &full).await;
    let err = e.bind(&pref(&p), "b").await.unwrap_err();
    assert!(matches!(err, BindError::NoLongerFits { .. }), "{err}");
    let _ = e.reports().await;
    assert!(!allocs(&e).await.iter().any(|a| a.1 == "p1"), "{:?}", allocs(&e).await);
    assert_eq!(used(&e, "a"), (1, 8192, 0));
    assert!(e.snapshot("b").unwrap().devices.iter().all(|d| d.within_capacity()));
    // kube-scheduler filters it again: it fits where there is room.
    assert_eq!(chosen(&filter(&e, &b, &p, &["a", "b", "c"]).await), "a");
}

#[actix::test]
async fn concurrent_filters_and_binds_anywhere_never_overcommit() {
    // Every pod is filtered over every node and bound to a node of its answer other than the
    // reserved one where there is one, all at once: the devices stay within their capacity and
    // each bound pod is counted exactly once.
    let nodes: Vec<NodeBuilder> = ["a", "b", "c", "d"].iter().map(|n| node(n).gpus(2, 16384)).collect();
    let (e, b) = engine_with(all_cfg(), &nodes).await;
    let pods: Vec<PodBuilder> =
        (0..60).map(|i| pod().gpu(1).mem_mib(1000 + 200 * (i % 5)).cores(10).name(&format!("p{i}"))).collect();
    for p in &pods {
        b.insert_pod(p.view());
    }
    let candidates = names(&["a", "b", "c", "d"]);
    let results = futures::future::join_all(pods.iter().enumerate().map(|(k, p)| {
        let (e, v, c, r) = (e.clone(), p.view(), candidates.clone(), pref(p));
        async move {
            match e.filter(&v, &c).await {
                FilterOutcome::Chosen { node, others, .. } => {
                    let to = others.get(k % (others.len() + 1)).cloned().unwrap_or(node);
                    e.bind(&r, to.as_str()).await.is_ok()
                }
                _ => false,
            }
        }
    }))
    .await;
    let bound = results.iter().filter(|ok| **ok).count();
    let _ = e.reports().await;
    for r in e.reports().await {
        assert!(r.snapshot.devices.iter().all(|d| d.within_capacity()), "{}: {:?}", r.name, r.snapshot.devices);
    }
    let held = allocs(&e).await;
    assert_eq!(held.iter().filter(|a| a.2 == AllocState::Committed).count(), bound, "{held:?}");
    let mut names_held: Vec<_> = held.iter().map(|a| a.1.clone()).collect();
    names_held.dedup();
    assert_eq!(names_held.len(), held.len(), "a pod counted twice: {held:?}");
    // 60 of 80 slots, 84 000 of 131 072 MiB: only a bind racing another to the last room of a
    // node fails.
    assert!(bound >= 50, "most pods fit somewhere: {bound}");
}
