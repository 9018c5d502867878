//! A reservation's life on its node: it lapses on the shared tick after its deadline unless
//! committed, a renewed one is not lapsed by the earlier timer, each lapses at its own deadline.

use crate::actor::node::tests::*;

#[actix::test]
async fn an_uncommitted_reservation_expires_after_its_ttl() {
    // HAMi keeps reservations of pods that never bind until the pod is
    // filtered again or finishes; hami-rs expires them.
    tokio::time::pause();
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(16384).name("p1");
    h.reserve(&p1, TTL).await.unwrap();

    elapse(TTL - Duration::from_secs(1)).await;
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Reserved));
    assert_eq!(h.used(0), (1, 16384, 0));

    elapse(Duration::from_secs(2)).await;
    assert_eq!(h.state_of("uid-p1").await, None);
    assert_eq!(h.used(0), (0, 0, 0));
    assert!(h.placements.is_empty());
    assert!(h.reserve(&pod().gpu(1).mem_mib(16384).name("p2"), TTL).await.is_ok(), "the capacity is free again");
}

#[test]
fn deadlines_lapse_on_the_next_shared_tick() {
    use crate::actor::node::tests::core::{EXPIRY_TICK, on_tick};
    let now = tokio::time::Instant::now();
    let mut ticks = std::collections::BTreeSet::new();
    for ms in (0..2_000).step_by(7) {
        let at = now + Duration::from_millis(ms);
        let t = on_tick(at);
        assert!(t >= at && t - at < EXPIRY_TICK, "{ms} ms: {:?} after", t - at);
        assert_eq!(on_tick(t), t, "a tick is its own tick");
        ticks.insert(t);
    }
    // 2 s of deadlines share 20 (or 21) ticks, whatever instant the ticks count from.
    assert!((20..=21).contains(&ticks.len()), "{} ticks", ticks.len());
}

#[actix::test]
async fn a_reservation_lapses_within_one_tick_of_its_deadline() {
    tokio::time::pause();
    let h = Harness::start(one_gpu()).await;
    h.reserve(&pod().gpu(1).mem_mib(1000).name("p1"), TTL).await.unwrap();
    elapse(TTL - Duration::from_millis(2)).await;
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Reserved), "before its deadline");
    elapse(crate::actor::node::tests::core::EXPIRY_TICK + Duration::from_millis(2)).await;
    assert_eq!(h.state_of("uid-p1").await, None, "one tick after its deadline");
}

#[actix::test]
async fn a_renewed_reservation_is_not_expired_by_the_earlier_timer() {
    // The timer of a replaced reservation is stale (sequence number): only the newest TTL counts.
    tokio::time::pause();
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(4096).name("p1");
    h.reserve(&p1, TTL).await.unwrap();
    elapse(Duration::from_secs(20)).await;
    h.reserve(&p1, TTL).await.unwrap();
    elapse(Duration::from_secs(20)).await;
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Reserved), "40 s after the first, 20 s after the second");
    elapse(Duration::from_secs(11)).await;
    assert_eq!(h.state_of("uid-p1").await, None);
}

#[actix::test]
async fn reservations_lapse_each_at_its_own_deadline_whatever_order_they_were_made_in() {
    // One timer serves every reservation of the node: a later reservation with a nearer deadline
    // moves it earlier, and after each expiry it is armed for the next deadline.
    tokio::time::pause();
    let h = Harness::start(one_gpu()).await;
    let (long, short, mid) = (
        pod().gpu(1).mem_mib(1000).name("long"),
        pod().gpu(1).mem_mib(1000).name("short"),
        pod().gpu(1).mem_mib(1000).name("mid"),
    );
    h.reserve(&long, Duration::from_secs(30)).await.unwrap();
    h.reserve(&short, Duration::from_secs(5)).await.unwrap();
    h.reserve(&mid, Duration::from_secs(12)).await.unwrap();
    let states = || async {
        let mut v = Vec::new();
        for p in ["uid-long", "uid-short", "uid-mid"] {
            v.push(h.state_of(p).await.is_some());
        }
        v
    };
    elapse(Duration::from_secs(6)).await;
    assert_eq!(states().await, [true, false, true]);
    elapse(Duration::from_secs(7)).await;
    assert_eq!(states().await, [true, false, false]);
    assert_eq!(h.used(0), (1, 1000, 0));
    elapse(Duration::from_secs(18)).await;
    assert_eq!(states().await, [false, false, false]);
    assert_eq!(h.used(0), (0, 0, 0));
}

#[actix::test]
async fn commit_stops_expiry() {
    // Bind commits the reservation: a bound pod holds its devices until it is deleted.
    tokio::time::pause();
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(4096).name("p1");
    let reserved = h.reserve(&p1, TTL).await.unwrap();
    // Commit answers the devices held, which the decision written at bind names.
    assert_eq!(h.addr.send(Commit { uid: PodUid::new("uid-p1") }).await.unwrap(), Ok(reserved.devices));
    elapse(TTL * 4).await;
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Committed));
    assert_eq!(h.used(0), (1, 4096, 0));

    // Reserving a committed pod again changes nothing.
    let again = h.reserve(&p1, TTL).await.unwrap();
    assert_eq!(again.devices, on_gpu("GPU-0", 4096, 0));
    assert_eq!(h.used(0), (1, 4096, 0));
}

#[actix::test]
async fn commit_without_a_reservation_is_an_error() {
    // A bind that finds no reservation must know it (the caller re-reserves or fails).
    let h = Harness::start(one_gpu()).await;
    assert_eq!(h.addr.send(Commit { uid: PodUid::new("uid-nobody") }).await.unwrap(), Err(NotReserved));
}
