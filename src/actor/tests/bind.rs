//! Bind through the engine: the annotations and phase it writes, the commit, HAMi's node lock
//! (contention, the bounded wait, PodGroup retries) and reservations that lapse meanwhile.

use crate::actor::tests::*;

#[actix::test]
async fn bind_writes_bind_phase_sets_the_node_commits_and_the_lock_is_released() {
    // Bind-phase allocating and bind-time before the Binding, then
    // BindingSucceed; the reservation no longer expires; the in-memory plugin releases the lock.
    let ttl = Duration::from_millis(100);
    let (e, b) = engine_with(cfg_ttl(ttl), &[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    let before = unix_now().0;
    e.bind(&pref(&p), "a").await.unwrap();

    let written = b.written("default", "p1");
    assert_eq!(written[keys::BIND_PHASE], keys::BIND_PHASE_ALLOCATING);
    assert!(written[keys::BIND_TIME].parse::<i64>().unwrap() >= before);
    let view = b.pod("default", "p1").unwrap();
    assert_eq!(view.spec.node_name.as_deref(), Some("a"));
    assert_eq!(view.annotation(keys::BIND_PHASE), Some(keys::BIND_PHASE_SUCCESS), "the plugin's part");
    assert_eq!(view.annotation(keys::NVIDIA_TO_ALLOCATE), Some(";;"), "the plugin served the container");
    assert!(!b.node("a").unwrap().metadata.annotations.contains_key(keys::NODE_LOCK));
    assert_eq!(messages(&b, &p, reasons::BINDING_SUCCEED), ["Successfully binding node [a] to default/p1"]);
    assert!(messages(&b, &p, reasons::BINDING_FAILED).is_empty());

    tokio::time::sleep(ttl * 3).await;
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Committed)]);
    assert_eq!(used(&e, "a"), (1, 4096, 0));
    let rep = e.reports().await;
    assert_eq!(rep[0].locked_by, None, "the in-process lock is released");
}

#[actix::test]
async fn binding_a_pod_that_does_not_exist_fails_with_an_event() {
    // The lookup error, and any reservation under the UID dropped.
    // HAMi records no Event here; hami-rs records BindingFailed on every failed bind.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    b.remove_pod("default", "p1");
    let err = e.bind(&pref(&p), "a").await.unwrap_err().to_string();
    assert_eq!(err, "pod default/p1 not found");
    assert_eq!(messages(&b, &p, reasons::BINDING_FAILED), [err]);
    assert!(allocs(&e).await.is_empty());
    assert_eq!(used(&e, "a"), (0, 0, 0));
}

#[actix::test]
async fn binding_to_an_unknown_node_fails_with_hamis_message_and_event() {
    // `failed to get node <n>` as BindingFailed, reservation dropped.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    let err = e.bind(&pref(&p), "zz").await.unwrap_err().to_string();
    assert_eq!(err, "failed to get node zz");
    assert_eq!(messages(&b, &p, reasons::BINDING_FAILED), ["failed to get node zz"]);
    assert!(allocs(&e).await.is_empty());

    // A node the engine knows but the cluster no longer has fails the same way.
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    b.remove_node("a");
    assert_eq!(e.bind(&pref(&p), "a").await.unwrap_err().to_string(), "failed to get node a");
}

#[actix::test]
async fn a_failing_binding_releases_the_reservation_and_the_locks() {
    // On a Binding error the node lock is released and BindingFailed recorded;
    // hami-rs also releases the reservation so the devices are free for the requeued pod.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    b.fail_binds(true);
    let err = e.bind(&pref(&p), "a").await.unwrap_err().to_string();
    assert_eq!(err, "pods \"p1\" binding refused");
    assert_eq!(messages(&b, &p, reasons::BINDING_FAILED), [err]);
    assert!(!b.node("a").unwrap().metadata.annotations.contains_key(keys::NODE_LOCK));
    assert!(allocs(&e).await.is_empty());
    assert_eq!(e.reports().await[0].locked_by, None);
    assert_eq!(used(&e, "a"), (0, 0, 0));
    assert_eq!(b.pod("default", "p1").unwrap().spec.node_name, None);

    // The requeued pod goes through again.
    b.fail_binds(false);
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    e.bind(&pref(&p), "a").await.unwrap();
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Committed)]);
}

#[actix::test]
async fn a_node_locked_by_another_pod_fails_the_bind_with_contention() {
    // A fresh lock held by another live pod is contention;
    // with no wait configured the bind fails at once with HAMi's wording and releases what it took.
    let cfg = EngineConfig { arbiters: 2, bind_lock_wait: Duration::ZERO, ..Default::default() };
    let (e, b) = engine_with(cfg, &[node("a").gpus(1, 16384)]).await;
    let lock = lock_node_for_holder(&b, "a");

    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    let err = e.bind(&pref(&p), "a").await.unwrap_err().to_string();
    assert_eq!(err, "node a has been locked within 5m0s: node lock contention");
    assert_eq!(messages(&b, &p, reasons::BINDING_FAILED), [err]);
    assert_eq!(b.node("a").unwrap().annotation(keys::NODE_LOCK), Some(lock.as_str()), "not ours to release");
    assert!(allocs(&e).await.is_empty());
    assert_eq!(e.reports().await[0].locked_by, None);
}

/// An engine whose one node "a" is locked by another pod's bind, and pod p1 (one GPU, `mem`
/// MiB) filtered onto it: its bind has to wait for the lock.
pub(super) async fn filtered_behind_a_held_lock(cfg: EngineConfig, mem: u64) -> (Mem, MemoryBackend, PodBuilder) {
    let cfg = EngineConfig { arbiters: 2, bind_lock_wait: Duration::from_secs(20), ..cfg };
    let (e, b) = engine_with(cfg, &[node("a").gpus(1, 16384)]).await;
    lock_node_for_holder(&b, "a");
    let p = pod().gpu(1).mem_mib(mem).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    (e, b, p)
}

/// The holder's device plugin answers after `after`: the node's lock annotation goes.
pub(super) fn release_lock_after(b: &MemoryBackend, after: Duration) {
    let plugin = b.clone();
    actix::spawn(async move {
        tokio::time::sleep(after).await;
        plugin.insert_node(node("a").gpus(1, 16384).view());
    });
}

#[actix::test]
async fn a_bind_waits_a_bounded_time_for_a_node_lock_another_pod_holds() {
    // hami-rs: HAMi retries contention only for PodGroup members; hami-rs lets every bind wait
    // up to --bind-lock-wait for the holder's device plugin to release the lock.
    let (e, b, p) = filtered_behind_a_held_lock(EngineConfig::default(), 4096).await;
    release_lock_after(&b, Duration::from_millis(100));
    e.bind(&pref(&p), "a").await.unwrap();
    assert_eq!(b.pod("default", "p1").unwrap().spec.node_name.as_deref(), Some("a"));
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Committed)]);
}

#[actix::test]
async fn a_reservation_that_lapses_while_the_bind_waits_for_the_lock_is_still_counted() {
    // The bind waits for a node lock longer than the reservation lives. The pod must not end up
    // bound and uncounted: its devices are taken again, exactly, before the Binding is written.
    let ttl = Duration::from_millis(100);
    let (e, b, p) =
        filtered_behind_a_held_lock(EngineConfig { reservation_ttl: ttl, ..Default::default() }, 4096).await;
    release_lock_after(&b, ttl * 4);
    e.bind(&pref(&p), "a").await.unwrap();
    assert_eq!(b.pod("default", "p1").unwrap().spec.node_name.as_deref(), Some("a"));
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Committed)]);
    assert_eq!(used(&e, "a"), (1, 4096, 0));
}

#[actix::test]
async fn a_lapsed_reservation_whose_devices_were_taken_during_the_lock_wait_fails_the_bind() {
    // As above, but another pod took the whole device meanwhile: binding would over-commit it,
    // so the bind fails with the figures and the pod stays unbound.
    let ttl = Duration::from_millis(100);
    let (e, b, p) =
        filtered_behind_a_held_lock(EngineConfig { reservation_ttl: ttl, ..Default::default() }, 16000).await;

    let (e2, b2) = (e.clone(), b.clone());
    actix::spawn(async move {
        until_expired(&e2, "p1").await;
        let other = pod().gpu(1).mem_mib(16000).name("p2");
        assert_eq!(chosen(&filter(&e2, &b2, &other, &["a"]).await), "a");
        b2.insert_node(node("a").gpus(1, 16384).view());
    });
    let err = e.bind(&pref(&p), "a").await.unwrap_err().to_string();
    assert!(
        err.starts_with("reservation of pod default/p1 on node a expired and its devices are no longer free"),
        "{err}"
    );
    assert_eq!(messages(&b, &p, reasons::BINDING_FAILED), [err]);
    assert_eq!(b.pod("default", "p1").unwrap().spec.node_name, None);
    assert_eq!(allocs(&e).await, [("a".into(), "p2".into(), AllocState::Reserved)]);
    assert_eq!(used(&e, "a"), (1, 16000, 0));
}

#[actix::test]
async fn a_pod_group_member_gives_up_after_the_retry_timeout_with_hamis_message() {
    // PodGroup members retry contention up to --node-lock-retry-timeout,
    // then fail with `timed out after <d> waiting for node <n> to be unlocked: node lock contention`.
    let cfg = EngineConfig { arbiters: 2, node_lock_retry_timeout: Duration::from_millis(200), ..Default::default() };
    let (e, b) = engine_with(cfg, &[node("a").gpus(1, 16384)]).await;
    lock_node_for_holder(&b, "a");
    let p = pod().gpu(1).mem_mib(4096).name("p1").label(keys::POD_GROUP_LABEL, "job-1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    let err = e.bind(&pref(&p), "a").await.unwrap_err().to_string();
    assert_eq!(err, "timed out after 0.2s waiting for node a to be unlocked: node lock contention");
    assert_eq!(messages(&b, &p, reasons::BINDING_FAILED), [err]);
    assert!(allocs(&e).await.is_empty());
}

#[actix::test]
async fn binding_twice_is_idempotent() {
    // A retried Bind of a pod already bound to that node succeeds without doing anything again.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    e.bind(&pref(&p), "a").await.unwrap();
    let written = b.written("default", "p1");
    e.bind(&pref(&p), "a").await.unwrap();
    assert_eq!(b.written("default", "p1"), written);
    assert_eq!(messages(&b, &p, reasons::BINDING_SUCCEED).len(), 1);
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Committed)]);
    assert_eq!(used(&e, "a"), (1, 4096, 0));
}

#[actix::test]
async fn a_bind_after_the_reservation_expired_retakes_the_annotated_devices() {
    // The devices written on the pod are reserved
    // again, exactly, when still free.
    let (e, b) = engine_with(cfg_ttl(Duration::from_millis(30)), &[node("a").gpus(2, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).cores(20).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    let annotated = b.written("default", "p1")[keys::NVIDIA_ALLOCATED].clone();
    until_expired(&e, "p1").await;

    e.bind(&pref(&p), "a").await.unwrap();
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Committed)]);
    let rep = e.reports().await;
    let devices = &rep[0].allocs[0].devices;
    assert_eq!(codec::encode_pod_devices(devices.vendor(VendorId(0)).unwrap()), annotated);
}

#[actix::test]
async fn an_expired_reservation_is_told_among_the_recent_decisions() {
    let (e, b) = engine_with(cfg_ttl(Duration::from_millis(30)), &[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    until_expired(&e, "p1").await;
    let last = e.recent_decisions().pop().expect("a decision");
    assert_eq!((last.pod.as_str(), last.node.as_deref(), last.outcome), ("default/p1", Some("a"), "expired"));
}

#[actix::test]
async fn a_bind_after_the_reservation_expired_fails_when_the_devices_were_taken() {
    // The expired pod's devices went to another pod in the meantime: a clear error, not an
    // over-committed device.
    let (e, b) = engine_with(cfg_ttl(Duration::from_millis(30)), &[node("a").gpus(1, 16384)]).await;
    let p1 = pod().gpu(1).mem_mib(16384).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p1, &["a"]).await), "a");
    until_expired(&e, "p1").await;
    let p2 = pod().gpu(1).mem_mib(16384).name("p2");
    assert_eq!(chosen(&filter(&e, &b, &p2, &["a"]).await), "a");
    e.bind(&pref(&p2), "a").await.unwrap();

    let err = e.bind(&pref(&p1), "a").await.unwrap_err().to_string();
    assert!(
        err.starts_with("reservation of pod default/p1 on node a expired and its devices are no longer free: 1/1 CardInsufficientMemory"),
        "{err}"
    );
    // The pod's own request and what the device has free, not the device's total with the pod added.
    assert!(err.ends_with("requested 16384 MiB, free 0 MiB)"), "{err}");
    assert_eq!(messages(&b, &p1, reasons::BINDING_FAILED), [err]);
    assert_eq!(allocs(&e).await, [("a".into(), "p2".into(), AllocState::Committed)]);
    assert_eq!(used(&e, "a"), (1, 16384, 0));
    assert_eq!(b.pod("default", "p1").unwrap().spec.node_name, None);
}

#[actix::test]
async fn a_bind_to_a_node_the_pod_was_not_filtered_onto_fails() {
    // Bind trusts only its own decision: a pod annotated for `a` is not bound to `b`.
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    let err = e.bind(&pref(&p), "b").await.unwrap_err().to_string();
    assert_eq!(err, "pod default/p1 was not filtered onto node b");
    assert_eq!(used(&e, "b"), (0, 0, 0));
    assert_eq!(b.pod("default", "p1").unwrap().spec.node_name, None);
}
