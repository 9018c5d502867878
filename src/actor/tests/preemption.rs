//! Live GPU-aware preemption: victims evicted through the backend, their devices held for the
//! preemptor until its next filter takes them, budgets, `Never`, equal priority, lapse, deletion.

use super::*;

fn preempting(hold: Duration) -> EngineConfig {
    EngineConfig { arbiters: 2, preemption_hold: Some(hold), ..Default::default() }
}

/// Filters and binds the pod, as kube-scheduler would, and waits until the engine counts it.
async fn place(e: &Mem, b: &MemoryBackend, p: &PodBuilder) -> String {
    let node = chosen(&filter(e, b, p, &["n"]).await).to_owned();
    e.bind(&pref(p), &node).await.expect("bound");
    let view = crate::port::Backend::pod(b, &p.view.metadata.namespace, &p.view.metadata.name).expect("in the cluster");
    e.observe_pod(&view);
    let _ = e.reports().await;
    node
}

fn gone(b: &MemoryBackend, p: &PodBuilder) -> bool {
    crate::port::Backend::pod(b, &p.view.metadata.namespace, &p.view.metadata.name).is_none()
}

/// One 16 384 MiB GPU holding two priority-1 pods of 6 000 MiB, `b` started last.
async fn full_node(cfg: EngineConfig) -> (Mem, MemoryBackend, PodBuilder, PodBuilder) {
    let (e, b) = engine_with(cfg, &[node("n").gpus(1, 16384)]).await;
    let low = |n: &str, at: &str| pod().gpu(1).mem_mib(6000).name(n).priority(1).started(at);
    let (a, bb) = (low("low-a", "2026-01-01T10:00:00Z"), low("low-b", "2026-01-01T11:00:00Z"));
    place(&e, &b, &a).await;
    place(&e, &b, &bb).await;
    (e, b, a, bb)
}

#[actix::test]
async fn a_preemptor_evicts_the_latest_started_victim_and_takes_the_devices_held_for_it() {
    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);
    // The filter that preempts still answers "no node"; kube-scheduler comes back when the
    // victim's deletion arrives.
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &low_b) && !gone(&b, &a), "only the later started victim goes");
    assert_eq!(messages(&b, &low_b, reasons::PREEMPTED).len(), 1);
    let said = messages(&b, &urgent, reasons::PREEMPTING);
    assert!(said.len() == 1 && said[0].contains("default/low-b (priority 1)"), "{said:?}");
    // Held: a pod that would fit in what low-b freed is kept out, though it has room.
    let small = pod().gpu(1).mem_mib(2000).name("small").priority(1);
    assert!(matches!(filter(&e, &b, &small, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a), "the small pod evicts nothing: it only waits");
    let report = e.reports().await;
    assert_eq!(report[0].held_for.as_ref().map(|u| u.as_str()), Some(urgent.view.metadata.uid.as_str()));
    assert_eq!(report[0].snapshot.devices[0].used_mem.get(), 6000, "reports show the node's real usage");
    // The preemptor's next filter reserves the held devices; the hold is gone with it.
    assert_eq!(chosen(&filter(&e, &b, &urgent, &["n"]).await), "n");
    assert_eq!(used(&e, "n"), (2, 14000, 0));
    assert!(e.reports().await[0].held_for.is_none());
    assert_eq!(chosen(&filter(&e, &b, &small, &["n"]).await), "n", "what is left is anyone's");
}

#[actix::test]
async fn a_victim_protected_by_a_disruption_budget_is_spared_for_another_or_none() {
    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    b.protect("default", "low-b");
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &a) && !gone(&b, &low_b), "the budget sends the eviction to low-a");

    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    b.protect("default", "low-a");
    b.protect("default", "low-b");
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a) && !gone(&b, &low_b), "every possible victim is protected: none is evicted");
    assert!(messages(&b, &urgent, reasons::PREEMPTING).is_empty());
    assert!(e.reports().await[0].held_for.is_none(), "nothing is held");
}

#[actix::test]
async fn never_equal_priority_and_preemption_off_evict_nothing() {
    let cases: [(&str, EngineConfig, PodBuilder); 3] = [
        (
            "preemptionPolicy: Never",
            preempting(Duration::from_secs(60)),
            pod().gpu(1).mem_mib(8000).name("p").priority(100).preemption_policy("Never"),
        ),
        ("equal priority", preempting(Duration::from_secs(60)), pod().gpu(1).mem_mib(8000).name("p").priority(1)),
        (
            "--preemption=off",
            EngineConfig { arbiters: 2, ..Default::default() },
            pod().gpu(1).mem_mib(8000).name("p").priority(100),
        ),
    ];
    for (what, cfg, p) in cases {
        let (e, b, a, low_b) = full_node(cfg).await;
        assert!(matches!(filter(&e, &b, &p, &["n"]).await, FilterOutcome::NoFit { .. }), "{what}");
        assert!(!gone(&b, &a) && !gone(&b, &low_b), "{what}: nothing evicted");
        assert!(e.reports().await[0].held_for.is_none(), "{what}");
    }
}

#[actix::test]
async fn a_hold_ends_when_it_lapses_or_its_preemptor_is_deleted() {
    let small = pod().gpu(1).mem_mib(2000).name("small").priority(1);
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);

    let (e, b, _, _) = full_node(preempting(Duration::from_millis(100))).await;
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(matches!(filter(&e, &b, &small, &["n"]).await, FilterOutcome::NoFit { .. }), "held");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(e.reports().await[0].held_for.is_none(), "lapsed");
    assert_eq!(messages(&b, &urgent, reasons::PREEMPTION_FAILED).len(), 1, "and the preemptor is told");
    assert_eq!(chosen(&filter(&e, &b, &small, &["n"]).await), "n");

    let (e, b, _, _) = full_node(preempting(Duration::from_secs(60))).await;
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    e.delete_pod(&PodUid::new(&urgent.view.metadata.uid));
    assert!(e.reports().await[0].held_for.is_none(), "the preemptor is gone: so is its hold");
    assert_eq!(chosen(&filter(&e, &b, &small, &["n"]).await), "n");
}

#[actix::test]
async fn a_preemptor_waiting_on_its_hold_preempts_no_more() {
    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    // Asks for more than one victim frees: low-b goes, then the pod still does not fit, and its
    // second filter must not take low-a too while it holds.
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &low_b));
    // Another pod arrives and takes... nothing: the freed device is held. A second preemptor
    // finds the only node held and evicts nothing there.
    let other = pod().gpu(1).mem_mib(8000).name("other").priority(100);
    assert!(matches!(filter(&e, &b, &other, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a), "a held node is no second preemptor's");
}
