//! The coordinator's reserve-all: a plan's reservations and claims on several nodes are taken
//! whole, or, at the first node that refuses, every part already taken is given back before the
//! answer.

use crate::actor::coordinator::{Part, Take, TakeAll, Taken};
use crate::actor::messages::{Holding, Reserve, TakeClaim};
use crate::actor::tests::*;
use crate::model::{PodDevices, PodRequest};
use crate::sched::claim::ClaimKey;
use crate::sched::{Scratch, fit};

const TTL: Duration = Duration::from_secs(30);

/// Three one-GPU nodes: `a` and `b` of 16384 MiB, `c` too small for any pod here.
async fn three() -> (Mem, MemoryBackend) {
    let nodes = [node("a").gpus(1, 16384), node("b").gpus(1, 16384), node("c").gpus(1, 4000)];
    engine_with(EngineConfig::default(), &nodes).await
}

fn req(e: &Mem, name: &str) -> Arc<PodRequest> {
    Arc::new(pod().gpu(1).mem_mib(8000).name(name).request_with(e.vendors()))
}

/// The devices `req` takes on `node` as it is now.
fn devices_on(e: &Mem, node: &str, req: &PodRequest) -> PodDevices {
    let snap = e.snapshot(node).expect("known node");
    fit::fit_pod_devices(&snap, req, e.vendors(), &crate::devices::NoQuota, &mut Scratch::default())
        .expect("fits")
        .devices
}

fn reserve(node: &str, req: Arc<PodRequest>) -> Part {
    Part { node: NodeName::new(node), take: Take::Reserve(Reserve { pod: req, exact: None, ttl: TTL, claim: None }) }
}

fn claim(e: &Mem, node: &str, req: Arc<PodRequest>) -> Part {
    let devices = devices_on(e, node, &req);
    let key = ClaimKey::Pod(req.uid.clone());
    let c = TakeClaim { key, id: 1, pod: req, devices, ttl: TTL, gone: Vec::new() };
    Part { node: NodeName::new(node), take: Take::Claim(c) }
}

#[actix::test]
async fn a_plan_is_taken_whole_on_every_node() {
    let (e, _b) = three().await;
    let parts = vec![reserve("a", req(&e, "p1")), claim(&e, "b", req(&e, "p2"))];
    let taken = e.inner.nodes.coordinator().send(TakeAll { parts }).await.unwrap().unwrap();
    assert!(matches!(taken[..], [Taken::Reserved(_), Taken::Claimed]), "{taken:?}");
    assert_eq!(used(&e, "a"), (1, 8000, 0));
    // The claim shows as taken to every other pod, and is the node's, not its usage.
    assert_eq!(e.snapshot("b").unwrap().devices[0].used_mem.get(), 8000);
    let b_report = e.reports_of(&[NodeName::new("b")]).await;
    assert_eq!((b_report[0].snapshot.devices[0].used_mem.get(), b_report[0].claims.len()), (0, 1));
}

#[actix::test]
async fn the_first_refusal_gives_back_every_part_already_taken() {
    let (e, _b) = three().await;
    let parts = vec![reserve("a", req(&e, "p1")), claim(&e, "b", req(&e, "p2")), reserve("c", req(&e, "p3"))];
    let refusal = e.inner.nodes.coordinator().send(TakeAll { parts }).await.unwrap().unwrap_err();
    assert_eq!((refusal.part, refusal.node.as_str()), (2, "c"));
    assert!(matches!(refusal.rejection, crate::sched::Rejection::Devices(_)), "{:?}", refusal.rejection);
    // Nothing of the plan is held anywhere.
    assert_eq!(used(&e, "a"), (0, 0, 0));
    assert_eq!(e.snapshot("b").unwrap().devices[0].used_mem.get(), 0);
    let reports = e.reports_of(&[NodeName::new("a"), NodeName::new("b")]).await;
    assert!(reports.iter().all(|r| r.claims.is_empty() && r.allocs.is_empty()), "{reports:?}");
    // An unknown node refuses as unregistered, and the parts before it are given back too.
    let parts = vec![reserve("a", req(&e, "p4")), reserve("nowhere", req(&e, "p5"))];
    let refusal = e.inner.nodes.coordinator().send(TakeAll { parts }).await.unwrap().unwrap_err();
    assert_eq!((refusal.part, refusal.rejection), (1, crate::sched::Rejection::NodeUnregistered));
    assert_eq!(used(&e, "a"), (0, 0, 0));
}

#[actix::test]
async fn two_claims_never_count_the_same_room() {
    let (e, _b) = three().await;
    // Each asks 8000 of b's 16384: two fit, a third is refused by the node, whatever the plan
    // said when it was made.
    for (name, id, ok) in [("q1", 1, true), ("q2", 2, true), ("q3", 3, false)] {
        let r = req(&e, name);
        let key = ClaimKey::Pod(r.uid.clone());
        let entry = crate::model::ContainerDevice::new("GPU-b-0", "NVIDIA", 8000, 0);
        let devices = PodDevices(vec![(VendorId(0), vec![vec![entry]])]);
        let c = TakeClaim { key, id, pod: r, devices, ttl: TTL, gone: Vec::new() };
        let parts = vec![Part { node: NodeName::new("b"), take: Take::Claim(c) }];
        let got = e.inner.nodes.coordinator().send(TakeAll { parts }).await.unwrap();
        assert_eq!(got.is_ok(), ok, "{name}: {got:?}");
    }
    assert_eq!(e.snapshot("b").unwrap().devices[0].used_mem.get(), 16000);
}

#[actix::test]
async fn concurrent_plans_and_releases_never_over_commit_a_device() {
    // Four nodes of two 16384 MiB GPUs; 48 plans of one to three parts (reservations and claims
    // of 4000-9000 MiB on random nodes) race with each other and with releases of what earlier
    // plans took. Whatever wins, every device's usage with every claim stays within it, and a
    // refused plan holds nothing.
    let nodes: Vec<NodeBuilder> = (0..4).map(|i| node(&format!("n{i}")).gpus(2, 16384)).collect();
    let (e, _b) = engine_with(EngineConfig::default(), &nodes).await;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut tasks = Vec::new();
    for k in 0..48u64 {
        let parts: Vec<(String, u64, bool)> =
            (0..1 + next() % 3).map(|_| (format!("n{}", next() % 4), 4000 + next() % 5001, next() % 2 == 0)).collect();
        let e = e.clone();
        tasks.push(actix::spawn(async move {
            let mut plan = Vec::new();
            for (j, (n, mem, claim)) in parts.iter().enumerate() {
                let r = Arc::new(pod().gpu(1).mem_mib(*mem).name(&format!("p{k}-{j}")).request_with(e.vendors()));
                let gpu = format!("GPU-{n}-{}", (k as usize + j) % 2);
                let devices = PodDevices(vec![(
                    VendorId(0),
                    vec![vec![crate::model::ContainerDevice::new(&gpu, "NVIDIA", *mem, 0)]],
                )]);
                let take = if *claim {
                    let key = ClaimKey::Pod(r.uid.clone());
                    Take::Claim(TakeClaim { key, id: k, pod: r, devices, ttl: TTL, gone: Vec::new() })
                } else {
                    Take::Reserve(Reserve { pod: r, exact: Some(devices), ttl: TTL, claim: None })
                };
                plan.push(Part { node: NodeName::new(n), take });
            }
            let holdings: Vec<(NodeName, Holding)> = plan
                .iter()
                .map(|p| match &p.take {
                    Take::Reserve(r) => {
                        (p.node.clone(), Holding::Reservation { uid: r.pod.uid.clone(), only_reserved: false })
                    }
                    Take::Claim(c) => (p.node.clone(), Holding::Claim { key: c.key.clone(), id: None }),
                })
                .collect();
            let taken = e.inner.nodes.coordinator().send(TakeAll { parts: plan }).await.unwrap();
            // Every third plan that was taken is given back at once, racing the others.
            if taken.is_ok() && k % 3 == 0 {
                for (n, h) in holdings {
                    e.inner.unreserve(n.as_str(), h, "test").await;
                }
            }
            taken.is_ok()
        }));
    }
    let mut placed = 0;
    for t in tasks {
        placed += usize::from(t.await.unwrap());
    }
    assert!(placed > 0, "some plans are taken");
    for r in e.reports().await {
        let snap = e.snapshot(r.name.as_str()).unwrap();
        for d in &snap.devices {
            assert!(d.within_capacity(), "{} on {} over capacity: {} MiB", d.info.id, r.name, d.used_mem.get());
        }
    }
}
