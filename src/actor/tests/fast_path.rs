//! The fast path through a real kube-scheduler: the lock-aware node choice and the decision
//! written at bind.

use crate::actor::filter::run::MAX_BUSY_WAIT;
use crate::actor::tests::*;
use bind::{filtered_behind_a_held_lock, release_lock_after};
use std::time::Instant;

/// Two one-GPU nodes where binpack prefers `x`, which already runs a pod.
async fn x_preferred(cfg: EngineConfig) -> (Mem, MemoryBackend) {
    let (e, b) = engine_with(cfg, &[node("x").gpus(1, 16384), node("y").gpus(1, 16384)]).await;
    let running = pod().gpu(1).mem_mib(4096).name("running").placed("x", "GPU-x-0,NVIDIA,4096,0:;").bound_to("x");
    observe(&e, &b, &running).await;
    (e, b)
}

fn small(name: &str) -> PodBuilder {
    pod().gpu(1).mem_mib(2048).name(name)
}

/// Takes node `node`'s in-process bind lock for another pod, as its bind would.
async fn hold_bind_lock(e: &Mem, node: &str, uid: &str) {
    let addr = e.inner.nodes.book.get(node).map(|n| n.addr.clone()).unwrap();
    assert!(addr.send(Lock { uid: PodUid::new(uid), queue: false }).await.unwrap());
}

#[actix::test]
async fn with_every_lock_free_binpack_chooses_as_hami_does() {
    let (e, b) = x_preferred(EngineConfig::default()).await;
    assert_eq!(chosen(&filter(&e, &b, &small("p1"), &["x", "y"]).await), "x");
}

#[actix::test]
async fn a_node_whose_hami_lock_a_pod_still_needs_is_passed_over_until_it_is_released() {
    // The holder is bound to `x` and waits for its device plugin: a bind to `x` would wait for
    // it, so the pod goes to the free `y`. Once the plugin has answered (the lock is gone), `x`.
    let (e, b) = x_preferred(EngineConfig::default()).await;
    lock_node_for_holder(&b, "x");
    assert_eq!(chosen(&filter(&e, &b, &small("p1"), &["x", "y"]).await), "y");
    b.insert_node(node("x").gpus(1, 16384).view());
    assert_eq!(chosen(&filter(&e, &b, &small("p2"), &["x", "y"]).await), "x");
}

#[actix::test]
async fn a_lock_its_holder_no_longer_needs_or_this_pod_holds_does_not_count() {
    let (e, b) = x_preferred(EngineConfig::default()).await;
    lock_node_for_holder(&b, "x");
    // The holder's plugin answered, but the lock is still on the node: any bind may take it.
    let done = b.pod("default", "holder").unwrap();
    let mut done = (*done).clone();
    done.metadata.annotations.insert(keys::BIND_PHASE.into(), keys::BIND_PHASE_SUCCESS.into());
    b.insert_pod(done);
    assert_eq!(chosen(&filter(&e, &b, &small("p1"), &["x", "y"]).await), "x");

    // The pod itself holds it (its earlier bind failed after locking).
    let mine = codec::encode_node_lock(chrono::Utc::now(), "default", "p2");
    b.insert_node(node("x").gpus(1, 16384).annotation(keys::NODE_LOCK, &mine).view());
    assert_eq!(chosen(&filter(&e, &b, &small("p2"), &["x", "y"]).await), "x");
}

#[actix::test]
async fn a_node_whose_in_process_lock_another_bind_holds_is_passed_over() {
    let (e, b) = x_preferred(EngineConfig::default()).await;
    hold_bind_lock(&e, "x", "uid-other").await;
    assert_eq!(chosen(&filter(&e, &b, &small("p1"), &["x", "y"]).await), "y");
    let addr = e.inner.nodes.book.get("x").map(|n| n.addr.clone()).unwrap();
    addr.send(Unlock { uid: PodUid::new("uid-other") }).await.unwrap();
    assert_eq!(chosen(&filter(&e, &b, &small("p2"), &["x", "y"]).await), "x");
}

#[actix::test]
async fn a_locked_node_is_still_chosen_when_no_free_node_fits() {
    let (e, b) = x_preferred(EngineConfig::default()).await;
    hold_bind_lock(&e, "x", "uid-other").await;
    lock_node_for_holder(&b, "y");
    // Both locked: the rank order stands.
    assert_eq!(chosen(&filter(&e, &b, &small("p1"), &["x", "y"]).await), "x");
    // Only `x` is free of HAMi's lock but holds the in-process one; `y` is too full.
    let big = pod().gpu(1).mem_mib(16384).name("big");
    b.insert_node(node("y").gpus(1, 16384).view());
    assert_eq!(chosen(&filter(&e, &b, &big, &["x", "y"]).await), "y");
    let too_big_for_y = pod().gpu(1).mem_mib(10240).name("p2");
    observe(&e, &b, &pod().gpu(1).mem_mib(8192).name("half").placed("y", "GPU-y-0,NVIDIA,8192,0:;").bound_to("y"))
        .await;
    assert_eq!(
        chosen(&filter(&e, &b, &too_big_for_y, &["x", "y"]).await),
        "x",
        "the locked node, as nothing free fits"
    );
}

fn at_bind() -> EngineConfig {
    EngineConfig { arbiters: 2, decision_write: DecisionWrite::Bind, ..Default::default() }
}

/// What the scheduler wrote on the pod, without the two time stamps.
fn written_but_times(b: &MemoryBackend, pod: &str) -> BTreeMap<String, String> {
    let mut w = b.written("default", pod);
    for k in [keys::ASSIGNED_TIME, keys::BIND_TIME] {
        assert!(w.remove(k).is_some_and(|t| t.parse::<i64>().is_ok()), "{k} is a unix time");
    }
    w
}

#[actix::test]
async fn written_at_bind_the_decision_reaches_the_pod_in_the_bind_phase_patch_exactly_as_filter_writes_it() {
    let p = pod().gpu(2).mem_mib(4096).cores(30).name("p1");
    let nodes = [node("a").gpus(2, 16384)];

    let (e, b) = engine_with(at_bind(), &nodes).await;
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    assert_eq!(b.pod_patches(), 0, "the filter writes nothing");
    assert!(b.written("default", "p1").is_empty());
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Reserved)]);
    e.bind(&pref(&p), "a").await.unwrap();
    assert_eq!(b.pod_patches(), 1, "decision and bind-phase in one patch");
    let at_bind = written_but_times(&b, "p1");
    let view = b.pod("default", "p1").unwrap();
    assert_eq!(view.metadata.labels.get(keys::ASSIGNED_NODE).map(String::as_str), Some("a"));
    assert_eq!(messages(&b, &p, reasons::FILTERING_SUCCEED).len(), 1);
    assert!(messages(&b, &p, reasons::BINDING_SUCCEED).is_empty(), "kube-scheduler's Scheduled Event says it");
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Committed)]);

    // The same pod with the decision written in the filter: the same keys and values in the end.
    let (e, b) = engine(&nodes).await;
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    e.bind(&pref(&p), "a").await.unwrap();
    assert_eq!(b.pod_patches(), 2);
    assert_eq!(written_but_times(&b, "p1"), at_bind);
    assert_eq!(
        at_bind.keys().map(String::as_str).collect::<Vec<_>>(),
        [keys::BIND_PHASE, keys::NVIDIA_ALLOCATED, keys::NVIDIA_TO_ALLOCATE, keys::ASSIGNED_NODE]
    );
    assert_eq!(messages(&b, &p, reasons::BINDING_SUCCEED).len(), 1);
}

#[actix::test]
async fn written_at_bind_a_bind_whose_reservation_is_gone_fits_the_pod_again_or_fails_naming_why() {
    // Nothing was written on the pod, so after a lapse (or a restart) the bind fits it on the
    // chosen node afresh; if the node filled up meanwhile, the bind fails and takes nothing.
    let cfg = EngineConfig { reservation_ttl: Duration::from_millis(30), ..at_bind() };
    let (e, b) = engine_with(cfg, &[node("a").gpus(1, 16384)]).await;
    let p1 = pod().gpu(1).mem_mib(8192).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p1, &["a"]).await), "a");
    until_expired(&e, "p1").await;
    e.bind(&pref(&p1), "a").await.unwrap();
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Committed)]);
    assert_eq!(b.written("default", "p1")[keys::NVIDIA_ALLOCATED], "GPU-a-0,NVIDIA,8192,0:;");

    let p2 = pod().gpu(1).mem_mib(12288).name("p2");
    b.insert_pod(p2.view());
    let err = e.bind(&pref(&p2), "a").await.unwrap_err().to_string();
    assert!(err.starts_with("pod default/p2 no longer fits node a: 1/1 CardInsufficientMemory"), "{err}");
    assert_eq!(messages(&b, &p2, reasons::BINDING_FAILED), [err]);
    assert!(b.written("default", "p2").is_empty());
    assert_eq!(used(&e, "a"), (1, 8192, 0));
}

#[actix::test]
async fn written_at_filter_a_bind_without_the_filters_decision_still_fails() {
    // Without the decision on the pod there is nothing the device plugin could read.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    b.insert_pod(p.view());
    let err = e.bind(&pref(&p), "a").await.unwrap_err().to_string();
    assert_eq!(err, "pod default/p1 was not filtered onto node a");
    assert!(allocs(&e).await.is_empty());
}

#[actix::test]
async fn with_every_fitting_node_busy_with_a_bind_the_filter_waits_for_the_first_to_free() {
    // Both nodes hold a bind of this scheduler: queueing behind either would wait for its device
    // plugin, so the filter waits, and takes `y` (the lesser rank) because it frees first.
    let (e, b) = x_preferred(EngineConfig::default()).await;
    hold_bind_lock(&e, "x", "uid-other").await;
    hold_bind_lock(&e, "y", "uid-another").await;
    let y = e.inner.nodes.book.get("y").map(|n| n.addr.clone()).unwrap();
    let started = Instant::now();
    let unlock = actix::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        y.send(Unlock { uid: PodUid::new("uid-another") }).await.unwrap();
    });
    assert_eq!(chosen(&filter(&e, &b, &small("p1"), &["x", "y"]).await), "y");
    let waited = started.elapsed();
    unlock.await.unwrap();
    assert!(waited >= Duration::from_millis(150), "the filter waited for y's bind: {waited:?}");
    assert!(waited < MAX_BUSY_WAIT, "and no longer: {waited:?}");
}

#[actix::test]
async fn a_filter_waits_for_busy_nodes_no_longer_than_its_bound() {
    let (e, b) = x_preferred(EngineConfig::default()).await;
    hold_bind_lock(&e, "x", "uid-other").await;
    hold_bind_lock(&e, "y", "uid-another").await;
    let started = Instant::now();
    assert_eq!(chosen(&filter(&e, &b, &small("p1"), &["x", "y"]).await), "x", "the rank order once the wait is over");
    assert!(started.elapsed() >= MAX_BUSY_WAIT, "{:?}", started.elapsed());
}

#[actix::test]
async fn a_lock_held_outside_this_scheduler_does_not_hold_the_filter() {
    // HAMi's lock on the only node, for a pod whose device plugin has not answered (and may never):
    // no bind of this scheduler will free it, so the filter answers at once.
    let (e, b) = engine(&[node("x").gpus(1, 16384)]).await;
    lock_node_for_holder(&b, "x");
    let started = Instant::now();
    assert_eq!(chosen(&filter(&e, &b, &small("p1"), &["x"]).await), "x");
    assert!(started.elapsed() < MAX_BUSY_WAIT, "{:?}", started.elapsed());
}

#[actix::test]
async fn among_locked_nodes_the_one_with_fewer_pods_waiting_for_their_bind_comes_first() {
    // Every node is locked; `x` ranks first but a pod already reserved there waits for its bind,
    // so the next pod queues on `y` instead of behind it.
    let (e, b) = x_preferred(EngineConfig::default()).await;
    assert_eq!(chosen(&filter(&e, &b, &small("waiting"), &["x"]).await), "x");
    hold_bind_lock(&e, "x", "uid-other").await;
    hold_bind_lock(&e, "y", "uid-another").await;
    assert_eq!(chosen(&filter(&e, &b, &small("p1"), &["x", "y"]).await), "y");
    // Now one pod waits on each: equal queues keep the rank order.
    assert_eq!(chosen(&filter(&e, &b, &small("p2"), &["x", "y"]).await), "x");
}

#[actix::test]
async fn a_bind_waiting_for_hamis_lock_keeps_its_place_and_later_binds_queue_behind_it() {
    // While HAMi's lock is held by another pod, the waiting bind holds the node's in-process
    // lock: a later bind cannot overtake it when the lock frees, and Filter sees the node busy.
    let (e, b, p1) = filtered_behind_a_held_lock(EngineConfig::default(), 4096).await;
    let (e1, r1) = (e.clone(), pref(&p1));
    let first = actix::spawn(async move { e1.bind(&r1, "a").await });
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(e.reports().await[0].locked_by, Some(PodUid::new("uid-p1")), "p1 keeps its place while it waits");
    let p2 = pod().gpu(1).mem_mib(4096).name("p2");
    assert_eq!(chosen(&filter(&e, &b, &p2, &["a"]).await), "a");
    let (e2, r2) = (e.clone(), pref(&p2));
    let second = actix::spawn(async move { e2.bind(&r2, "a").await });
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(e.reports().await[0].locked_by, Some(PodUid::new("uid-p1")), "p2 queues behind p1");
    release_lock_after(&b, Duration::ZERO);
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    assert_eq!(
        allocs(&e).await,
        [("a".into(), "p1".into(), AllocState::Committed), ("a".into(), "p2".into(), AllocState::Committed)]
    );
}
