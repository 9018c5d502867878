//! The node actor's observations of pods: bound, provisional, released and deleted ones, the
//! node's shared copies of ids and words, and the tombstones' bound.

use crate::actor::node::tests::*;
use crate::actor::node::tombstones::TOMBSTONES_KEPT;

#[actix::test]
async fn an_observed_bound_pod_is_committed() {
    // On restart the usage is rebuilt from the pods' allocated annotations;
    // a bound pod's devices are in use and do not expire.
    tokio::time::pause();
    let h = Harness::start(one_gpu()).await;
    h.addr.send(observed("uid-p1", on_gpu("GPU-0", 4096, 30), true, TTL)).await.unwrap();
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Committed));
    assert_eq!(h.used(0), (1, 4096, 30));
    assert_eq!(h.placements.get(&PodUid::new("uid-p1")).map(|n| n.to_string()), Some("a".to_owned()));
    elapse(TTL * 4).await;
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Committed));
}

#[actix::test]
async fn observed_pods_share_the_nodes_copies_of_ids_and_words() {
    // Memory per running pod: each decoded annotation brings its own copies of the device id, the
    // vendor word and the namespace; the node keeps one of each.
    let h = Harness::start(one_gpu()).await;
    h.addr.send(observed("uid-p1", on_gpu("GPU-0", 1024, 0), true, TTL)).await.unwrap();
    h.addr.send(observed("uid-p2", on_gpu("GPU-0", 2048, 0), true, TTL)).await.unwrap();
    let r = h.report().await;
    let device = &r.snapshot.devices[0].info.id;
    let entries: Vec<&ContainerDevice> = r.allocs.iter().map(|a| &a.devices.0[0].1[0][0]).collect();
    assert_eq!(entries.len(), 2);
    for e in &entries {
        assert!(Arc::ptr_eq(&e.uuid.0, &device.0), "{:?} is a copy of the device's id", e.uuid);
    }
    assert!(Arc::ptr_eq(&entries[0].ty, &entries[1].ty));
    assert!(Arc::ptr_eq(&r.allocs[0].namespace, &r.allocs[1].namespace));
    assert_eq!(h.used(0), (2, 3072, 0));
}

#[actix::test]
async fn an_observed_unbound_unknown_pod_is_provisional_and_expires() {
    // After a restart HAMi re-counts every annotated Pending pod for
    // good; hami-rs holds it provisionally, for one TTL.
    tokio::time::pause();
    let h = Harness::start(one_gpu()).await;
    h.addr.send(observed("uid-p1", on_gpu("GPU-0", 4096, 30), false, TTL)).await.unwrap();
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Reserved));
    assert_eq!(h.used(0), (1, 4096, 30));
    elapse(TTL + Duration::from_secs(1)).await;
    assert_eq!(h.state_of("uid-p1").await, None);
    assert_eq!(h.used(0), (0, 0, 0));
}

#[actix::test]
async fn an_observed_unbound_unknown_pod_is_held_only_if_it_fits() {
    // After a restart two unbound pods can name the same device (the first one's reservation had
    // lapsed before the second was placed): the one seen second is not held on top, so a bind
    // cannot skip the check on it; a bound pod counts whatever the room.
    let h = Harness::start(one_gpu()).await;
    h.addr.send(observed("uid-p1", on_gpu("GPU-0", 10000, 30), false, TTL)).await.unwrap();
    h.addr.send(observed("uid-p2", on_gpu("GPU-0", 10000, 30), false, TTL)).await.unwrap();
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Reserved));
    assert_eq!(h.state_of("uid-p2").await, None);
    assert_eq!(h.placements.get(&PodUid::new("uid-p2")).map(|n| n.to_string()), None);
    assert_eq!(h.used(0), (1, 10000, 30));
    h.addr.send(observed("uid-p3", on_gpu("GPU-0", 10000, 30), true, TTL)).await.unwrap();
    assert_eq!(h.state_of("uid-p3").await, Some(AllocState::Committed));
    assert_eq!(h.used(0), (2, 20000, 60));
}

#[actix::test]
async fn an_observed_unbound_pod_keeps_its_live_reservation_timer() {
    // The echo of Filter's own patch must not restart or cancel the reservation's TTL.
    tokio::time::pause();
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(4096).name("p1");
    let r = h.reserve(&p1, TTL).await.unwrap();
    elapse(Duration::from_secs(20)).await;
    h.addr.send(observed("uid-p1", r.devices, false, TTL)).await.unwrap();
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Reserved));
    elapse(Duration::from_secs(11)).await;
    assert_eq!(h.state_of("uid-p1").await, None);
}

#[actix::test]
async fn an_observed_pod_that_was_released_is_ignored() {
    // A released reservation leaves a tombstone: the watcher's echo of the pod's old annotations
    // must not bring it back.
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(4096).name("p1");
    let r = h.reserve(&p1, TTL).await.unwrap();
    h.addr.send(Unreserve(Holding::Reservation { uid: PodUid::new("uid-p1"), only_reserved: true })).await.unwrap();
    h.addr.send(observed("uid-p1", r.devices.clone(), false, TTL)).await.unwrap();
    assert_eq!(h.state_of("uid-p1").await, None);
    assert_eq!(h.used(0), (0, 0, 0));

    // Once the pod is bound its devices are in use whatever the scheduler thought.
    h.addr.send(observed("uid-p1", r.devices, true, TTL)).await.unwrap();
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Committed));
    assert_eq!(h.used(0), (1, 4096, 0));
}

#[actix::test]
async fn tombstones_are_bounded_without_node_updates_and_the_newest_are_kept() {
    // A node that never changes would keep one tombstone per released reservation for ten
    // minutes; past the bound the oldest go, so an echo of such a pod is held again (it fits),
    // while the newest release is still remembered.
    let h = Harness::start(one_gpu()).await;
    let n = TOMBSTONES_KEPT * 2 + 10;
    let mut first = None;
    for i in 0..n {
        let p = pod().gpu(1).mem_mib(1000).name(&format!("t{i}"));
        let r = h.reserve(&p, TTL).await.unwrap();
        h.addr
            .send(Unreserve(Holding::Reservation { uid: PodUid::new(&format!("uid-t{i}")), only_reserved: true }))
            .await
            .unwrap();
        first.get_or_insert(r.devices);
    }
    let devices = first.unwrap();
    let last = format!("uid-t{}", n - 1);
    h.addr.send(observed(&last, devices.clone(), false, TTL)).await.unwrap();
    assert_eq!(h.state_of(&last).await, None, "the newest tombstone is kept");
    h.addr.send(observed("uid-t0", devices, false, TTL)).await.unwrap();
    assert!(matches!(h.state_of("uid-t0").await, Some(AllocState::Reserved)), "the oldest was forgotten");
    assert_eq!(h.used(0), (1, 1000, 0));
}

#[actix::test]
async fn an_observed_pod_replaces_its_devices() {
    // An already stored pod's devices are replaced by the newer object's.
    let h = Harness::start(node("a").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-1", 16384))).await;
    h.addr.send(observed("uid-p1", on_gpu("GPU-0", 4096, 10), true, TTL)).await.unwrap();
    h.addr.send(observed("uid-p1", on_gpu("GPU-1", 2048, 20), true, TTL)).await.unwrap();
    assert_eq!(h.used(0), (0, 0, 0));
    assert_eq!(h.used(1), (1, 2048, 20));
}

#[actix::test]
async fn pod_deleted_frees_its_devices() {
    // Delete drops the pod's usage.
    let h = Harness::start(one_gpu()).await;
    h.addr.send(observed("uid-p1", on_gpu("GPU-0", 4096, 30), true, TTL)).await.unwrap();
    assert!(h.addr.send(Unreserve(Holding::Pod { uid: PodUid::new("uid-p1") })).await.unwrap());
    assert_eq!(h.used(0), (0, 0, 0));
    assert!(h.placements.is_empty());
    assert!(h.report().await.allocs.is_empty());
    assert!(
        !h.addr.send(Unreserve(Holding::Pod { uid: PodUid::new("uid-p1") })).await.unwrap(),
        "nothing left to delete"
    );
}
