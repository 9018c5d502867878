//! The node actor message by message: reservations and their expiry, commit and release, the bind
//! lock, registrations, reports and many threads reserving at once.

use std::time::Duration;

use crate::actor::node::ledger::State;
use crate::actor::node::*;
use crate::model::PodRequest;
use crate::model::annotations as keys;
use crate::model::{ContainerDevice, VendorId};
use crate::sched::accounting::Layout;
use crate::testing::*;

const NV: VendorId = VendorId(0);
const TTL: Duration = Duration::from_secs(30);

/// One node actor on the test's own arbiter (so paused tokio time applies to its timers), with
/// the address book entry it publishes snapshots into.
struct Harness {
    addr: NodeAddr,
    book: Arc<Book>,
    placements: Arc<DashMap<PodUid, NodeName>>,
    vendors: Arc<Vendors>,
    name: NodeName,
}

impl Harness {
    async fn start(n: NodeBuilder) -> Harness {
        let vendors = Arc::new(vendors());
        let book: Arc<Book> = Arc::new(DashMap::new());
        let placements = Arc::new(DashMap::new());
        let name = NodeName::new(&n.name);
        let binds = Arc::new(BindState::default());
        let snap = SnapCell::new(NodeActor::initial_snapshot(&name, &vendors));
        let cfg = config(&name, &vendors, &snap, &placements, &binds);
        // On the test's own arbiter, so paused tokio time applies to its timers.
        let addr = NodeAddr::start(cfg, &actix::Arbiter::current());
        book.insert(name.clone(), NodeEntry { addr: addr.clone(), snap, binds });
        let h = Harness { addr, book, placements, vendors, name };
        let r = h.register(n.view()).await;
        assert!(matches!(r, Registration::Ok { .. }), "{r:?}");
        h
    }

    async fn register(&self, v: crate::model::pod::NodeView) -> Registration {
        self.addr.send(NodeRegistered { node: Arc::new(v) }).await.unwrap()
    }

    fn req(&self, p: &PodBuilder) -> Arc<PodRequest> {
        Arc::new(p.request_with(&self.vendors))
    }

    async fn filter(&self, p: &PodBuilder) -> Result<f32, Rejection> {
        self.addr.send(Filter { pod: self.req(p) }).await.unwrap()
    }

    /// A reservation as the coordinator makes it: on this thread when the actor is idle.
    async fn reserve(&self, p: &PodBuilder, ttl: Duration) -> Result<Reserved, Rejection> {
        self.addr.reserve(Reserve { pod: self.req(p), exact: None, ttl, claim: None }).await.unwrap()
    }

    async fn report(&self) -> NodeReport {
        self.addr.send(Report).await.unwrap()
    }

    /// The snapshot the actor last published into the address book.
    fn snap(&self) -> Arc<NodeSnapshot> {
        self.book.get(&self.name).unwrap().snap.load()
    }

    /// (slots, MiB, cores) in use on device `i` of the published snapshot.
    fn used(&self, i: usize) -> (u32, u64, u32) {
        let s = self.snap();
        let d = &s.devices[i];
        (d.used, d.used_mem.get(), d.used_cores)
    }

    async fn state_of(&self, uid: &str) -> Option<AllocState> {
        self.report().await.allocs.iter().find(|a| a.uid.as_str() == uid).map(|a| a.state)
    }
}

fn config(
    name: &NodeName,
    vendors: &Arc<Vendors>,
    snap: &Arc<SnapCell>,
    placements: &Arc<DashMap<PodUid, NodeName>>,
    binds: &Arc<BindState>,
) -> NodeConfig {
    NodeConfig {
        name: name.clone(),
        vendors: vendors.clone(),
        snap: snap.clone(),
        placements: placements.clone(),
        quota: None,
        binds: binds.clone(),
        recent: Default::default(),
    }
}

/// Moves paused time forward and lets every timer that came due run before returning.
async fn elapse(d: Duration) {
    tokio::time::advance(d).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
}

fn one_gpu() -> NodeBuilder {
    node("a").gpu(gpu("GPU-0", 16384))
}

/// A pod's NVIDIA allocation: one container on `uuid` with `mem` MiB and `cores` cores.
fn on_gpu(uuid: &str, mem: u64, cores: u32) -> PodDevices {
    PodDevices(vec![(NV, vec![vec![ContainerDevice::new(uuid, "NVIDIA", mem, cores)]])])
}

fn observed(uid: &str, devices: PodDevices, bound: bool, ttl: Duration) -> PodObserved {
    PodObserved {
        uid: PodUid::new(uid),
        namespace: Arc::from("default"),
        name: Arc::from(uid.trim_start_matches("uid-")),
        devices,
        held: Vec::new(),
        layout: Layout { n_init: 0, sidecars: vec![false], init_released: false },
        tags: Vec::new(),
        bound,
        ttl,
    }
}

#[actix::test]
async fn reserve_revalidates_against_current_usage_not_the_filter_answer() {
    // HAMi stores the reservation without re-checking capacity, so two
    // concurrent Filters can pick the same device; hami-rs re-runs the fit in Reserve.
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(16384).name("p1");
    let p2 = pod().gpu(1).mem_mib(16384).name("p2");
    assert!(h.filter(&p1).await.is_ok());
    assert!(h.filter(&p2).await.is_ok(), "both Filters see the idle device");

    let r1 = h.reserve(&p1, TTL).await.unwrap();
    assert_eq!(r1.devices, on_gpu("GPU-0", 16384, 0));
    let r2 = h.reserve(&p2, TTL).await.unwrap_err();
    assert_eq!(r2.hami_text(), "1/1 CardInsufficientMemory");
    assert!(h.filter(&p2).await.is_err(), "Filter now sees the reservation");
    assert_eq!(h.used(0), (1, 16384, 0));
    assert_eq!(h.placements.get(&PodUid::new("uid-p1")).map(|n| n.to_string()), Some("a".to_owned()));
    assert!(h.placements.get(&PodUid::new("uid-p2")).is_none());
}

#[actix::test]
async fn reserving_the_same_pod_again_replaces_its_earlier_reservation() {
    // Reserve fits "without this pod's own earlier reservation": a pod never competes with itself.
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(16384).name("p1");
    h.reserve(&p1, TTL).await.unwrap();
    h.reserve(&p1, TTL).await.unwrap();
    assert_eq!(h.used(0), (1, 16384, 0));
    assert_eq!(h.report().await.allocs.len(), 1);
}

#[actix::test]
async fn concurrent_reserves_never_exceed_a_devices_slots() {
    // The invariant: 200 reservations race for a 10-slot device; exactly 10
    // are accepted and the published usage stays within count, memory and cores.
    let h = Harness::start(one_gpu()).await;
    let sends = (0..200).map(|i| {
        let p = pod().gpu(1).mem_mib(100).cores(5).name(&format!("p{i}"));
        h.addr.send(Reserve { pod: h.req(&p), exact: None, ttl: TTL, claim: None })
    });
    let answers = futures::future::join_all(sends).await;
    let ok = answers.iter().filter(|a| matches!(a, Ok(Ok(_)))).count();
    assert_eq!(ok, 10);
    for a in answers.iter().filter_map(|a| a.as_ref().unwrap().as_ref().err()) {
        assert_eq!(a.hami_text(), "1/1 CardTimeSlicingExhausted");
    }
    let snap = h.snap();
    assert!(snap.devices.iter().all(|d| d.within_capacity()), "{:?}", snap.devices);
    assert_eq!(h.used(0), (10, 1000, 50));
    assert_eq!(h.report().await.allocs.len(), 10);
    assert_eq!(h.placements.len(), 10);
}

#[actix::test]
async fn concurrent_reserves_never_exceed_memory_or_cores() {
    // Same invariant with memory and cores as the binding limits: 7 × 2300 MiB fit in 16384 MiB,
    // and 30-core pods stop at 3 on a 100-core device.
    let h = Harness::start(node("a").gpu(gpu("GPU-0", 16384).count(100))).await;
    let mem = (0..50).map(|i| {
        let p = pod().gpu(1).mem_mib(2300).name(&format!("m{i}"));
        h.addr.send(Reserve { pod: h.req(&p), exact: None, ttl: TTL, claim: None })
    });
    let ok = futures::future::join_all(mem).await.into_iter().filter(|a| matches!(a, Ok(Ok(_)))).count();
    assert_eq!(ok, 7);
    assert_eq!(h.used(0), (7, 16100, 0));

    let h = Harness::start(node("a").gpu(gpu("GPU-0", 16384).count(100))).await;
    let cores = (0..50).map(|i| {
        let p = pod().gpu(1).mem_mib(10).cores(30).name(&format!("c{i}"));
        h.addr.send(Reserve { pod: h.req(&p), exact: None, ttl: TTL, claim: None })
    });
    let ok = futures::future::join_all(cores).await.into_iter().filter(|a| matches!(a, Ok(Ok(_)))).count();
    assert_eq!(ok, 3);
    assert_eq!(h.used(0), (3, 30, 90));
    assert!(h.snap().devices.iter().all(|d| d.within_capacity()));
}

#[actix::test]
async fn an_exact_reserve_is_validated_against_capacity() {
    // A bind whose reservation expired re-takes the exact annotated devices only if they are
    // still free; the invariant is checked for exact devices as for fitted ones.
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(10000).name("p1");
    let p2 = pod().gpu(1).mem_mib(10000).name("p2");
    let exact =
        |p: &PodBuilder| Reserve { pod: h.req(p), exact: Some(on_gpu("GPU-0", 10000, 0)), ttl: TTL, claim: None };
    assert!(h.addr.send(exact(&p1)).await.unwrap().is_ok());
    let r = h.addr.send(exact(&p2)).await.unwrap().unwrap_err();
    assert_eq!(r.hami_text(), "1/1 CardInsufficientMemory");

    // Devices the node does not have are refused rather than silently not counted.
    let p3 = pod().gpu(1).mem_mib(10).name("p3");
    let r = h
        .addr
        .send(Reserve { pod: h.req(&p3), exact: Some(on_gpu("GPU-gone", 10, 0)), ttl: TTL, claim: None })
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(r.hami_text(), "1/1 CardUuidMismatch");
    assert_eq!(h.used(0), (1, 10000, 0));
}

#[actix::test]
async fn release_only_reserved_leaves_a_committed_pod_alone() {
    // A repeated filter or a failed bind releases with only_reserved; a bound pod's devices are
    // in use and must not be freed by it.
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(4096).name("p1");
    h.reserve(&p1, TTL).await.unwrap();
    h.addr.send(Commit { uid: PodUid::new("uid-p1") }).await.unwrap().unwrap();

    assert!(
        !h.addr
            .send(Unreserve(Holding::Reservation { uid: PodUid::new("uid-p1"), only_reserved: true }))
            .await
            .unwrap()
    );
    assert_eq!(h.state_of("uid-p1").await, Some(AllocState::Committed));
    assert_eq!(h.used(0), (1, 4096, 0));

    assert!(
        h.addr
            .send(Unreserve(Holding::Reservation { uid: PodUid::new("uid-p1"), only_reserved: false }))
            .await
            .unwrap()
    );
    assert_eq!(h.state_of("uid-p1").await, None);
    assert_eq!(h.used(0), (0, 0, 0));
    assert!(
        !h.addr
            .send(Unreserve(Holding::Reservation { uid: PodUid::new("uid-p1"), only_reserved: false }))
            .await
            .unwrap()
    );
}

#[actix::test]
async fn release_frees_a_reservation_and_its_placement() {
    // A failed patch undoes the reservation.
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(4096).name("p1");
    h.reserve(&p1, TTL).await.unwrap();
    assert!(
        h.addr.send(Unreserve(Holding::Reservation { uid: PodUid::new("uid-p1"), only_reserved: true })).await.unwrap()
    );
    assert_eq!(h.used(0), (0, 0, 0));
    assert!(h.placements.is_empty());
}

#[actix::test]
async fn the_bind_lock_is_granted_in_arrival_order() {
    // HAMi's per-node in-process mutex for Bind: re-entrant for its holder, released only by its
    // holder. Waiters queue and are answered when their turn comes, first come first served; one
    // that gives up (Unlock while waiting) leaves the queue.
    let h = Harness::start(one_gpu()).await;
    let lock = |u: &str| h.addr.send(Lock { uid: PodUid::new(u), queue: true });
    let unlock = |u: &str| h.addr.send(Unlock { uid: PodUid::new(u) });
    assert!(lock("uid-a").await.unwrap());
    assert!(lock("uid-a").await.unwrap(), "the holder takes it again");

    let b = actix::spawn(lock("uid-b"));
    let c = actix::spawn(lock("uid-c"));
    let d = actix::spawn(lock("uid-d"));
    unlock("uid-d").await.unwrap();
    assert_eq!(h.report().await.locked_by, Some(PodUid::new("uid-a")));
    unlock("uid-x").await.unwrap();
    assert_eq!(h.report().await.locked_by, Some(PodUid::new("uid-a")), "another pod's unlock does nothing");

    unlock("uid-a").await.unwrap();
    assert!(b.await.unwrap().unwrap());
    assert_eq!(h.report().await.locked_by, Some(PodUid::new("uid-b")));
    assert!(!c.is_finished());
    unlock("uid-b").await.unwrap();
    assert!(c.await.unwrap().unwrap());
    assert_eq!(h.report().await.locked_by, Some(PodUid::new("uid-c")), "d left the queue");
    unlock("uid-c").await.unwrap();
    assert_eq!(h.report().await.locked_by, None);
    assert!(!d.await.unwrap().unwrap(), "the waiter that gave up is answered no");
}

#[actix::test]
async fn dropping_a_pods_reservation_releases_the_lock_it_holds() {
    // A reservation that expires or is released while its bind holds the lock must not leave
    // the node locked for every other pod.
    tokio::time::pause();
    let h = Harness::start(one_gpu()).await;
    let p1 = pod().gpu(1).mem_mib(4096).name("p1");
    h.reserve(&p1, TTL).await.unwrap();
    assert!(h.addr.send(Lock { uid: PodUid::new("uid-p1"), queue: true }).await.unwrap());
    elapse(TTL + Duration::from_secs(1)).await;
    assert_eq!(h.report().await.locked_by, None);
    assert!(h.addr.send(Lock { uid: PodUid::new("uid-p2"), queue: true }).await.unwrap());
}

#[actix::test]
async fn a_malformed_registration_marks_the_node_unusable_until_fixed() {
    // Hami-rs marks the node's devices unusable and
    // says why, rather than scheduling on stale devices; a good annotation restores the node.
    let h = Harness::start(one_gpu()).await;
    let mut bad = one_gpu().view();
    bad.metadata.annotations.insert(keys::NVIDIA_REGISTER.into(), "not a device list".into());
    match h.register(bad).await {
        Registration::Malformed { reason } => {
            assert!(reason.contains(keys::NVIDIA_REGISTER), "{reason}");
            assert!(reason.starts_with("NVIDIA annotation "), "{reason}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    let snap = h.snap();
    assert!(snap.unusable.as_deref().is_some_and(|u| u.contains(keys::NVIDIA_REGISTER)), "{:?}", snap.unusable);
    let p = pod().gpu(1).mem_mib(1024);
    assert!(h.filter(&p).await.is_err());
    assert!(h.reserve(&p, TTL).await.is_err());

    let r = h.register(one_gpu().view()).await;
    assert!(matches!(r, Registration::Ok { devices: 1, .. }), "{r:?}");
    assert_eq!(h.snap().unusable, None);
    assert!(h.filter(&p).await.is_ok());
}

#[actix::test]
async fn registration_reports_whether_the_devices_changed() {
    // A re-registration with the same devices keeps usage; a changed device list is re-read.
    let h = Harness::start(one_gpu()).await;
    h.addr.send(observed("uid-p1", on_gpu("GPU-0", 4096, 30), true, TTL)).await.unwrap();
    assert_eq!(h.register(one_gpu().view()).await, Registration::Ok { devices: 1, changed: false });
    assert_eq!(h.used(0), (1, 4096, 30));

    let two = one_gpu().gpu(gpu("GPU-1", 8192));
    assert_eq!(h.register(two.view()).await, Registration::Ok { devices: 2, changed: true });
    assert_eq!(h.used(0), (1, 4096, 30), "the pod's usage survives the change");
    assert_eq!(h.used(1), (0, 0, 0));
}

#[actix::test]
async fn report_lists_allocations_sorted_with_state_devices_and_lock() {
    // `/usage`, the simulator and the status page read this report.
    let h = Harness::start(node("a").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-1", 16384))).await;
    h.addr.send(observed("uid-zeta", on_gpu("GPU-1", 1000, 10), true, TTL)).await.unwrap();
    let alpha = pod().gpu(1).mem_mib(2000).cores(20).name("alpha");
    let r = h.reserve(&alpha, TTL).await.unwrap();
    h.addr.send(Lock { uid: PodUid::new("uid-alpha"), queue: true }).await.unwrap();

    let rep = h.report().await;
    assert_eq!(rep.name.as_str(), "a");
    assert_eq!(rep.locked_by, Some(PodUid::new("uid-alpha")));
    let rows: Vec<(&str, &str, AllocState)> = rep.allocs.iter().map(|a| (a.uid.as_str(), &*a.name, a.state)).collect();
    assert_eq!(rows, [("uid-alpha", "alpha", AllocState::Reserved), ("uid-zeta", "zeta", AllocState::Committed)]);
    assert_eq!(rep.allocs[0].devices, r.devices);
    assert_eq!(&*rep.allocs[0].namespace, "default");
    assert_eq!(rep.allocs[1].devices, on_gpu("GPU-1", 1000, 10));
    assert!(Arc::ptr_eq(&rep.snapshot, &h.snap()), "the report carries the published snapshot");
    let total: u64 = rep.snapshot.devices.iter().map(|d| d.used_mem.get()).sum();
    assert_eq!(total, 3000);
}

#[actix::test]
async fn node_removed_drops_every_placement_and_stops_the_actor() {
    // The node is gone, with every allocation it held.
    let h = Harness::start(one_gpu()).await;
    h.addr.send(observed("uid-p1", on_gpu("GPU-0", 4096, 30), true, TTL)).await.unwrap();
    h.addr.send(NodeRemoved).await.unwrap();
    assert!(h.placements.is_empty());
    assert!(h.addr.send(Report).await.is_err(), "the actor stopped");
}

#[actix::test]
async fn reserves_from_many_threads_never_exceed_a_devices_slots() {
    // The invariant under real parallelism: the actor runs on its own arbiter and eight threads
    // send 25 reservations each for a 10-slot device.
    let vendors = Arc::new(vendors());
    let book: Arc<Book> = Arc::new(DashMap::new());
    let placements = Arc::new(DashMap::new());
    let name = NodeName::new("a");
    let arbiter = actix::Arbiter::new();
    let binds = Arc::new(BindState::default());
    let snap = SnapCell::new(NodeActor::initial_snapshot(&name, &vendors));
    let addr = NodeAddr::start(config(&name, &vendors, &snap, &placements, &binds), &arbiter.handle());
    book.insert(name.clone(), NodeEntry { addr: addr.clone(), snap, binds });
    addr.send(NodeRegistered { node: Arc::new(one_gpu().view()) }).await.unwrap();

    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (addr, vendors) = (addr.clone(), vendors.clone());
            std::thread::spawn(move || {
                let sends = (0..25).map(|i| {
                    let p = pod().gpu(1).mem_mib(100).name(&format!("t{t}-{i}"));
                    let reserve =
                        Reserve { pod: Arc::new(p.request_with(&vendors)), exact: None, ttl: TTL, claim: None };
                    // On the sending thread whenever the actor is idle, through its mailbox otherwise.
                    let addr = addr.clone();
                    async move { addr.reserve(reserve).await }
                });
                let answers = futures::executor::block_on(futures::future::join_all(sends));
                answers.into_iter().filter(|a| matches!(a, Ok(Ok(_)))).count()
            })
        })
        .collect();
    let accepted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(accepted, 10);
    let snap = book.get(&name).unwrap().snap.load();
    assert_eq!(snap.devices[0].used, 10);
    assert!(snap.devices.iter().all(|d| d.within_capacity()));
    assert_eq!(placements.len(), 10);
    arbiter.stop();
}

#[actix::test]
async fn an_init_containers_layout_survives_a_change_of_the_nodes_devices() {
    // The allocation keeps its layout only when it has init containers; charges recomputed on a
    // device change must still take the larger of init and regular, not their sum, and leave out
    // the init containers once they have finished.
    let h = Harness::start(one_gpu()).await;
    let two_containers = |init_mem, mem| {
        PodDevices(vec![(
            NV,
            vec![
                vec![ContainerDevice::new("GPU-0", "NVIDIA", init_mem, 10)],
                vec![ContainerDevice::new("GPU-0", "NVIDIA", mem, 20)],
            ],
        )])
    };
    let mut running = observed("uid-p1", two_containers(4096, 2048), true, TTL);
    running.layout = Layout { n_init: 1, sidecars: vec![false], init_released: false };
    let mut done = observed("uid-p2", two_containers(8192, 1024), true, TTL);
    done.layout = Layout { n_init: 1, sidecars: vec![false], init_released: true };
    h.addr.send(running).await.unwrap();
    h.addr.send(done).await.unwrap();
    let expected = (2, 4096 + 1024, 20 + 20);
    assert_eq!(h.used(0), expected);

    let two = one_gpu().gpu(gpu("GPU-1", 8192));
    assert_eq!(h.register(two.view()).await, Registration::Ok { devices: 2, changed: true });
    assert_eq!(h.used(0), expected, "charges recomputed with each pod's own layout");
}

#[actix::test]
async fn a_record_that_does_not_read_never_reads_after_the_devices_change() {
    // A record names devices by their place in the node's list. One that no longer reads (only a
    // bug can cause it) must not come to read against a longer list, naming a device the pod
    // never had: the bind would then write that device on the pod.
    let vendors = Arc::new(vendors());
    let name = NodeName::new("a");
    let snap = SnapCell::new(NodeActor::initial_snapshot(&name, &vendors));
    let (placements, binds) = (Arc::new(DashMap::new()), Arc::new(BindState::default()));
    let mut core = NodeCore::new(config(&name, &vendors, &snap, &placements, &binds));
    let two = one_gpu().gpu(gpu("GPU-1", 8192));
    let four = two.clone().gpu(gpu("GPU-2", 8192)).gpu(gpu("GPU-3", 8192));
    assert_eq!(core.register(Arc::new(four.view())), Registration::Ok { devices: 4, changed: true });
    let layout = Layout { n_init: 0, sidecars: vec![false], init_released: false };
    let devices = on_gpu("GPU-3", 1024, 10);
    // Written against four devices, it names the fourth, beyond a list of two.
    let record = core.record("default", "p1", &devices, &layout, &[]);
    assert_eq!(core.register(Arc::new(two.view())), Registration::Ok { devices: 2, changed: true });
    let uid = PodUid::new("uid-p1");
    let charges = core.collapse(&devices, &layout, &[]).into_boxed_slice();
    core.ledger.hold(&uid, true, (charges, record), tokio::time::Instant::now() + TTL);
    assert!(core.parts(&uid, core.ledger.get(&uid).unwrap()).is_none(), "does not read against two devices");

    assert_eq!(core.register(Arc::new(four.view())), Registration::Ok { devices: 4, changed: true });
    let a = core.ledger.get(&uid).unwrap();
    assert!(core.parts(&uid, a).is_none(), "still does not read against four devices");
    assert!(matches!(a.state, State::Committed), "its devices stay counted");
    assert_eq!(&*a.charges, &*core.collapse(&devices, &layout, &[]), "its charges, placed on the new list");
    assert_eq!(core.usage(None)[3].used_mem.get(), 1024);
}

mod claims;
mod expiry;
mod observe;
