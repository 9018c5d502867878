//! Claims on a node actor: taken only beside the ledger and every other claim, seen by every
//! other pod, reserved from by their own pod, given back by the one `Unreserve`, and lapsed by
//! the node's own timer.

use crate::actor::node::tests::*;
use crate::sched::claim::ClaimKey;

fn take(h: &Harness, p: &PodBuilder, mem: u64, id: u64, ttl: Duration) -> TakeClaim {
    let pod = h.req(p);
    TakeClaim { key: ClaimKey::Pod(pod.uid.clone()), id, pod, devices: on_gpu("GPU-0", mem, 0), ttl, gone: Vec::new() }
}

#[actix::test]
async fn a_claim_is_taken_beside_what_the_node_holds_and_refused_past_it() {
    let h = Harness::start(one_gpu()).await;
    h.reserve(&pod().gpu(1).mem_mib(6000).name("held"), TTL).await.unwrap();
    let a = pod().gpu(1).mem_mib(6000).name("a");
    let b = pod().gpu(1).mem_mib(6000).name("b");
    h.addr.take_claim(take(&h, &a, 6000, 1, TTL)).await.unwrap().unwrap();
    // 6000 held and 6000 claimed of 16384: a second 6000 claim does not fit.
    assert!(h.addr.take_claim(take(&h, &b, 6000, 2, TTL)).await.unwrap().is_err());
    // Every other pod sees the claim taken; the node's usage is the ledger's alone.
    assert_eq!(h.used(0).1, 12000);
    let r = h.report().await;
    assert_eq!((r.snapshot.devices[0].used_mem.get(), r.claims.len()), (6000, 1));
    assert!(h.reserve(&pod().gpu(1).mem_mib(6000).name("c"), TTL).await.is_err(), "no room beside the claim");
    // A claim assuming the held pod gone fits: what a preemption's victims free.
    let mut gone = take(&h, &b, 6000, 2, TTL);
    gone.gone = vec![PodUid::new("uid-held")];
    h.addr.take_claim(gone).await.unwrap().unwrap();
}

#[actix::test]
async fn the_claims_own_pod_reserves_from_it_and_the_claim_ends() {
    let h = Harness::start(one_gpu()).await;
    let a = pod().gpu(1).mem_mib(16000).name("a");
    h.addr.take_claim(take(&h, &a, 16000, 1, TTL)).await.unwrap().unwrap();
    // Without naming its claim the pod competes with it like anyone else.
    assert!(h.reserve(&a, TTL).await.is_err());
    let key = ClaimKey::Pod(PodUid::new("uid-a"));
    let r = h.addr.reserve(Reserve { pod: h.req(&a), exact: None, ttl: TTL, claim: Some(key) }).await.unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(h.used(0).1, 16000, "the reservation, not the claim and the reservation");
    assert!(h.report().await.claims.is_empty());
}

#[actix::test]
async fn unreserve_gives_a_claim_back_by_key_and_id_and_with_its_pod() {
    let h = Harness::start(one_gpu()).await;
    let a = pod().gpu(1).mem_mib(8000).name("a");
    h.addr.take_claim(take(&h, &a, 8000, 7, TTL)).await.unwrap().unwrap();
    let key = ClaimKey::Pod(PodUid::new("uid-a"));
    // Another claim's id gives nothing back (a lapse timer of an older claim, say).
    assert!(!h.addr.unreserve(Holding::Claim { key: key.clone(), id: Some(6) }).await.unwrap());
    // Dropping the pod's reservation leaves its claim.
    assert!(!h.addr.unreserve(Holding::Reservation { uid: PodUid::new("uid-a"), only_reserved: false }).await.unwrap());
    assert_eq!(h.used(0).1, 8000);
    // The pod gone: its claim goes with it.
    assert!(h.addr.unreserve(Holding::Pod { uid: PodUid::new("uid-a") }).await.unwrap());
    assert_eq!(h.used(0).1, 0);
    h.addr.take_claim(take(&h, &a, 8000, 8, TTL)).await.unwrap().unwrap();
    assert!(h.addr.unreserve(Holding::Claim { key, id: Some(8) }).await.unwrap());
    assert_eq!(h.used(0).1, 0);
}

#[actix::test]
async fn a_claim_lapses_on_the_node_timer_at_its_deadline() {
    tokio::time::pause();
    let h = Harness::start(one_gpu()).await;
    let a = pod().gpu(1).mem_mib(8000).name("a");
    h.addr.take_claim(take(&h, &a, 8000, 1, Duration::from_secs(5))).await.unwrap().unwrap();
    elapse(Duration::from_secs(4)).await;
    assert_eq!(h.used(0).1, 8000, "held until its deadline");
    elapse(Duration::from_secs(2)).await;
    assert_eq!(h.used(0).1, 0, "gone after it");
    assert!(h.report().await.claims.is_empty());
}
