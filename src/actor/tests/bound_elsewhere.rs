//! Binds whose answer was lost: the pod runs on a node although its bind reported failure. The
//! decision on it must stay the one for that node, and its devices must stay counted there.

use crate::actor::tests::*;

/// Two nodes of one GPU each; the pod takes a whole GPU's memory, so it fits either node once.
async fn two_nodes(at: DecisionWrite) -> (Mem, MemoryBackend, PodBuilder) {
    let cfg = EngineConfig { arbiters: 2, decision_write: at, ..Default::default() };
    let (e, b) = engine_with(cfg, &[node("a").gpus(1, 16384), node("b").gpus(1, 16384)]).await;
    (e, b, pod().gpu(1).mem_mib(16384).name("p1"))
}

#[actix::test]
async fn a_bind_whose_answer_was_lost_but_took_effect_succeeds_and_counts_the_pod_once() {
    for at in [DecisionWrite::Filter, DecisionWrite::Bind] {
        let (e, b, p) = two_nodes(at).await;
        assert_eq!(chosen(&filter(&e, &b, &p, &["a", "b"]).await), "a");
        b.lose_bind_answers(true);
        e.bind(&pref(&p), "a").await.expect("the pod, read back, is bound to a");
        let _ = e.reports().await;
        assert_eq!(used(&e, "a"), (1, 16384, 0), "{at:?}");
        assert_eq!(allocs(&e).await.len(), 1, "{at:?}: {:?}", allocs(&e).await);
        assert!(messages(&b, &p, reasons::BINDING_FAILED).is_empty());
    }
}

#[actix::test]
async fn a_lost_bind_answer_keeps_the_devices_until_the_pod_is_read_back_and_no_retry_rewrites_it() {
    for at in [DecisionWrite::Filter, DecisionWrite::Bind] {
        let (e, b, p) = two_nodes(at).await;
        assert_eq!(chosen(&filter(&e, &b, &p, &["a", "b"]).await), "a");
        b.lose_bind_answers(true);
        b.fail_reads(true);
        let err = e.bind(&pref(&p), "a").await.unwrap_err().to_string();
        assert_eq!(err, "connection reset by peer");
        assert_eq!(used(&e, "a"), (1, 16384, 0), "it may be bound: its devices stay committed");
        let written = b.pod_patches();

        // kube-scheduler filters it again from its own (unbound) copy. While the pod cannot be read,
        // nothing is decided and nothing is given away.
        let unbound = p.view();
        let o = e.filter(&unbound, &names(&["a", "b"])).await;
        assert!(matches!(&o, FilterOutcome::Error(err) if err.to_string() == "connection refused"), "{o:?}");
        assert_eq!(used(&e, "a"), (1, 16384, 0));
        // Read back, it is bound: the filter says so and decides nothing.
        b.fail_reads(false);
        let o = e.filter(&unbound, &names(&["a", "b"])).await;
        assert!(
            matches!(&o, FilterOutcome::Error(err) if err.to_string() == "pod default/p1 is already bound to node a"),
            "{o:?}"
        );
        let _ = e.reports().await;
        assert_eq!(used(&e, "a"), (1, 16384, 0));
        assert_eq!(used(&e, "b"), (0, 0, 0));

        // A bind to another node writes nothing on the pod.
        let err = e.bind(&pref(&p), "b").await.unwrap_err().to_string();
        assert_eq!(err, "pod default/p1 is already bound to node a");
        assert_eq!(b.pod_patches(), written);
        let view = b.pod("default", "p1").unwrap();
        assert_eq!(view.spec.node_name.as_deref(), Some("a"));
        assert_eq!(view.annotation(keys::ASSIGNED_NODE), Some("a"));
        let _ = e.reports().await;
        assert_eq!((used(&e, "a"), used(&e, "b")), ((1, 16384, 0), (0, 0, 0)));
    }
}

#[actix::test]
async fn a_pod_filtered_again_after_it_was_bound_keeps_the_decision_of_its_node() {
    // kube-scheduler's copy lags behind: it filters a pod already bound to a, over b only. The
    // bind to b must not write b's decision onto a pod that runs on a.
    let (e, b, p) = two_nodes(DecisionWrite::Bind).await;
    assert_eq!(chosen(&filter(&e, &b, &p, &["a", "b"]).await), "a");
    e.bind(&pref(&p), "a").await.unwrap();
    let stale = p.view();
    assert_eq!(chosen(&e.filter(&stale, &names(&["b"])).await), "b");
    let written = b.pod_patches();
    let err = e.bind(&pref(&p), "b").await.unwrap_err().to_string();
    assert_eq!(err, "pod default/p1 is already bound to node a");
    assert_eq!(b.pod_patches(), written, "nothing written");
    assert_eq!(b.pod("default", "p1").unwrap().annotation(keys::ASSIGNED_NODE), Some("a"));
    let _ = e.reports().await;
    assert_eq!((used(&e, "a"), used(&e, "b")), ((1, 16384, 0), (0, 0, 0)), "counted where it runs");
    assert_eq!(messages(&b, &p, reasons::BINDING_FAILED), [err]);
}

#[actix::test]
async fn with_the_decision_written_at_filter_a_bound_pod_is_not_rewritten() {
    let (e, b, p) = two_nodes(DecisionWrite::Filter).await;
    assert_eq!(chosen(&filter(&e, &b, &p, &["a", "b"]).await), "a");
    e.bind(&pref(&p), "a").await.unwrap();
    let o = e.filter(&p.view(), &names(&["b"])).await;
    assert!(
        matches!(&o, FilterOutcome::Error(err) if err.to_string() == "pod default/p1 is already bound to node a"),
        "{o:?}"
    );
    let view = b.pod("default", "p1").unwrap();
    assert_eq!(view.annotation(keys::ASSIGNED_NODE), Some("a"));
    let _ = e.reports().await;
    assert_eq!((used(&e, "a"), used(&e, "b")), ((1, 16384, 0), (0, 0, 0)));
}
