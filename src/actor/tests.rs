use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::actor::coordinator::{Decide, Decision};
use crate::actor::messages::*;
use crate::actor::node::SharedQuota;
use crate::actor::*;
use crate::backend::memory::{ClusterObjects, MemoryBackend};
use crate::model::NodeName;
use crate::model::annotations as keys;
use crate::model::codec;
use crate::model::{PodUid, VendorId};
use crate::port::{self, reasons};
use crate::port::{Backend, EventType, ObjectKind, PodPatch, PodRef};
use crate::sched::{Rejection, score};
use crate::testing::*;

type Mem = Engine<MemoryBackend>;

/// An engine over an in-memory cluster holding `nodes`, each registered.
async fn engine_with(cfg: EngineConfig, nodes: &[NodeBuilder]) -> (Mem, MemoryBackend) {
    let backend = MemoryBackend::new(Duration::from_secs(300));
    let engine = Engine::start(cfg, Arc::new(vendors()), backend.clone(), None);
    for n in nodes {
        backend.insert_node(n.view());
        let r = engine.register_node(Arc::new(n.view())).await;
        assert!(matches!(r, Registration::Ok { .. }), "{}: {r:?}", n.name);
    }
    (engine, backend)
}

async fn engine(nodes: &[NodeBuilder]) -> (Mem, MemoryBackend) {
    engine_with(EngineConfig { arbiters: 2, ..Default::default() }, nodes).await
}

fn cfg_ttl(ttl: Duration) -> EngineConfig {
    EngineConfig { arbiters: 2, reservation_ttl: ttl, ..Default::default() }
}

fn names(ns: &[&'static str]) -> Vec<Cow<'static, str>> {
    ns.iter().map(|n| Cow::Borrowed(*n)).collect()
}

fn pref(p: &PodBuilder) -> PodRef {
    let m = &p.view.metadata;
    PodRef { namespace: m.namespace.clone(), name: m.name.clone(), uid: m.uid.clone() }
}

/// Inserts the pod into the cluster and filters it over `candidates`.
async fn filter(e: &Mem, b: &MemoryBackend, p: &PodBuilder, candidates: &[&'static str]) -> FilterOutcome {
    b.insert_pod(p.view());
    e.filter(&p.view(), &names(candidates)).await
}

fn chosen(o: &FilterOutcome) -> &str {
    match o {
        FilterOutcome::Chosen { node, .. } => node.as_str(),
        other => panic!("expected a node, got {other:?}"),
    }
}

/// Observes a pod that is already in the cluster and waits until every node actor has seen it.
async fn observe(e: &Mem, b: &MemoryBackend, p: &PodBuilder) {
    b.insert_pod(p.view());
    e.observe_pod(&p.view());
    let _ = e.reports().await;
}

/// (slots, MiB, cores) in use on the node's first device, as Filter sees it.
fn used(e: &Mem, node: &str) -> (u32, u64, u32) {
    let s = e.snapshot(node).unwrap();
    let d = &s.devices[0];
    (d.used, d.used_mem.get(), d.used_cores)
}

/// Every allocation the engine holds: (node, pod name, state).
async fn allocs(e: &Mem) -> Vec<(String, String, AllocState)> {
    let mut v: Vec<_> = e
        .reports()
        .await
        .iter()
        .flat_map(|r| r.allocs.iter().map(|a| (r.name.to_string(), a.name.to_string(), a.state)))
        .collect();
    v.sort_by(|a, b| a.1.cmp(&b.1));
    v
}

/// Per node and device: (uuid, slots, MiB, cores), for comparing two engines' usage.
async fn usage(e: &Mem) -> Vec<(String, Vec<(String, u32, u64, u32)>)> {
    e.reports()
        .await
        .iter()
        .map(|r| {
            let devs =
                r.snapshot.devices.iter().map(|d| (d.info.id.to_string(), d.used, d.used_mem.get(), d.used_cores));
            (r.name.to_string(), devs.collect())
        })
        .collect()
}

fn messages(b: &MemoryBackend, p: &PodBuilder, reason: &str) -> Vec<String> {
    b.events_for(&pref(p)).into_iter().filter(|e| e.reason == reason).map(|e| e.message).collect()
}

/// Waits (bounded) until the engine holds no allocation for `pod`; for reservations expiring on
/// the engine's own arbiter threads, where paused test time does not reach.
async fn until_expired(e: &Mem, pod: &str) {
    for _ in 0..500 {
        if !allocs(e).await.iter().any(|a| a.1 == pod) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the reservation of {pod} never expired");
}

#[actix::test]
async fn binpack_picks_the_fuller_node_and_spread_the_emptier_one() {
    // Binpack takes the highest node score, spread the lowest.
    let nodes = [node("a").gpus(1, 16384), node("b").gpus(1, 16384)];
    let busy = pod().gpu(1).mem_mib(4096).name("busy").placed("b", "GPU-b-0,NVIDIA,4096,0:;").bound_to("b");

    let (e, b) = engine(&nodes).await;
    observe(&e, &b, &busy).await;
    let p = pod().gpu(1).mem_mib(2048).name("packed");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a", "b"]).await), "b");

    let (e, b) = engine(&nodes).await;
    observe(&e, &b, &busy).await;
    let p = pod().gpu(1).mem_mib(2048).name("spread").annotation(keys::NODE_SCHEDULER_POLICY, "spread");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a", "b"]).await), "a");
}

#[actix::test]
async fn ties_between_nodes_are_broken_by_name() {
    // HAMi breaks ties arbitrarily; hami-rs by node name.
    let (e, b) = engine(&[node("b").gpus(1, 16384), node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(2048).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["b", "a"]).await), "a");
}

#[actix::test]
async fn filter_writes_hamis_exact_annotation_set_and_label() {
    // One merge patch with vgpu-node, vgpu-time, NVIDIA's to-allocate and
    // allocated keys (identical values), and the hami.io/vgpu-node label.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).cores(30).name("p1");
    let before = unix_now().0;
    let out = filter(&e, &b, &p, &["a"]).await;
    assert_eq!(
        out,
        FilterOutcome::Chosen { node: NodeName::new("a"), others: Vec::new(), failed: Failures::default() }
    );

    let written = b.written("default", "p1");
    let keys_written: Vec<&str> = written.keys().map(String::as_str).collect();
    assert_eq!(
        keys_written,
        [keys::NVIDIA_ALLOCATED, keys::NVIDIA_TO_ALLOCATE, keys::ASSIGNED_NODE, keys::ASSIGNED_TIME]
    );
    assert_eq!(written[keys::ASSIGNED_NODE], "a");
    assert_eq!(written[keys::NVIDIA_ALLOCATED], "GPU-a-0,NVIDIA,4096,30:;");
    assert_eq!(written[keys::NVIDIA_TO_ALLOCATE], written[keys::NVIDIA_ALLOCATED]);
    let t: i64 = written[keys::ASSIGNED_TIME].parse().unwrap();
    assert!(t >= before, "vgpu-time is the unix-s of the decision");

    let view = b.pod("default", "p1").unwrap();
    assert_eq!(view.metadata.labels.get(keys::ASSIGNED_NODE).map(String::as_str), Some("a"));
    assert_eq!(view.annotation(keys::NVIDIA_ALLOCATED), Some("GPU-a-0,NVIDIA,4096,30:;"));

    // FilteringSucceed with the fitting nodes and their scores.
    let ok = messages(&b, &p, reasons::FILTERING_SUCCEED);
    assert_eq!(ok.len(), 1);
    assert!(ok[0].starts_with("find fit node(a), 0 nodes not fit, 1 nodes fit(a:"), "{}", ok[0]);
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Reserved)]);
}

#[actix::test]
async fn a_node_name_too_long_for_a_label_gets_the_annotation_without_the_label() {
    // HAMi's label patch fails for node names over 63 characters, so
    // such nodes never get pods; hami-rs writes the annotation and skips the label.
    const LONG: &str = "a-node-name-that-is-much-longer-than-sixty-three-characters-allowed-in-labels";
    let (e, b) = engine(&[node(LONG).gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &[LONG]).await), LONG);
    let view = b.pod("default", "p1").unwrap();
    assert_eq!(view.annotation(keys::ASSIGNED_NODE), Some(LONG));
    assert!(!view.metadata.labels.contains_key(keys::ASSIGNED_NODE));
}

#[actix::test]
async fn a_repeated_filter_of_the_same_pod_does_not_count_it_twice() {
    // The earlier reservation of the same UID is released first, so the pod
    // does not compete with itself (10000 MiB twice would not fit in 16384 MiB).
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(10000).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    assert_eq!(used(&e, "a"), (1, 10000, 0));
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Reserved)]);
}

#[actix::test]
async fn a_refiltered_pod_drops_its_committed_allocation_before_fitting() {
    // HAMi takes the pod out of its books before every filter, whatever state it was in. A pod
    // whose allocation was committed (a bind that failed after its commit) and that comes back
    // must not collide with itself: 10000 MiB twice would not fit in 16384 MiB.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(10000).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    let addr = e.inner.nodes.book.get("a").map(|n| n.addr.clone()).unwrap();
    addr.send(Commit { uid: PodUid::new(&p.view.metadata.uid) }).await.unwrap().unwrap();
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Committed)]);

    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    assert_eq!(used(&e, "a"), (1, 10000, 0));
    assert_eq!(allocs(&e).await, [("a".into(), "p1".into(), AllocState::Reserved)]);
}

#[actix::test]
async fn a_refiltered_pod_moves_to_the_node_chosen_the_second_time() {
    // A pod filtered again over other candidates is held only where it was placed last.
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(4096).name("p1");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    assert_eq!(chosen(&filter(&e, &b, &p, &["b"]).await), "b");
    assert_eq!(used(&e, "a"), (0, 0, 0));
    assert_eq!(used(&e, "b"), (1, 4096, 0));
    assert_eq!(b.written("default", "p1")[keys::ASSIGNED_NODE], "b");
}

/// Puts a fresh node lock on `node` held by the live pod `default/holder`; returns its value.
fn lock_node_for_holder(b: &MemoryBackend, node_name: &str) -> String {
    // A holder that still needs the lock: bound to the node, its device plugin not yet answered.
    let mut holder = pod()
        .name("holder")
        .annotation(keys::ASSIGNED_NODE, node_name)
        .annotation(keys::BIND_PHASE, "allocating")
        .view();
    holder.spec.node_name = Some(node_name.to_owned());
    b.insert_pod(holder);
    let lock = codec::encode_node_lock(chrono::Utc::now(), "default", "holder");
    b.insert_node(node(node_name).gpus(1, 16384).annotation(keys::NODE_LOCK, &lock).view());
    lock
}

#[actix::test]
async fn no_fitting_node_answers_failed_nodes_and_records_hamis_events() {
    // Per-node reasons; one FilteringFailed per reason word of the
    // `<n>/<m> <Reason>` items, then `no available node, <candidates> nodes do not meet`.
    let nodes = [node("a").gpus(1, 4096), node("b").gpus(1, 8192), node("c").gpus(1, 32768)];
    let (e, b) = engine(&nodes).await;
    let hog = pod().gpu(1).mem_mib(1000).cores(80).name("hog").placed("c", "GPU-c-0,NVIDIA,1000,80:;").bound_to("c");
    observe(&e, &b, &hog).await;

    let p = pod().gpu(1).mem_mib(10000).cores(50).name("p1");
    let FilterOutcome::NoFit { failed } = filter(&e, &b, &p, &["a", "b", "c", "zz"]).await else {
        panic!("expected NoFit")
    };
    let hami = failed.hami();
    assert_eq!(hami["a"], "1/1 CardInsufficientMemory", "FailedNodes carries HAMi's text alone");
    assert_eq!(hami["c"], "1/1 CardInsufficientCore");
    let failed = failed.render();
    let failed_names: Vec<&str> = failed.keys().map(String::as_str).collect();
    assert_eq!(failed_names, ["a", "b", "c", "zz"]);
    assert!(failed["a"].starts_with("1/1 CardInsufficientMemory"), "{}", failed["a"]);
    assert!(failed["a"].contains("GPU-a-0"), "the detail names the device: {}", failed["a"]);
    assert!(failed["b"].starts_with("1/1 CardInsufficientMemory"), "{}", failed["b"]);
    assert!(failed["c"].starts_with("1/1 CardInsufficientCore"), "{}", failed["c"]);
    assert_eq!(failed["zz"], "node unregistered");

    assert_eq!(
        messages(&b, &p, reasons::FILTERING_FAILED),
        [
            "1 nodes CardInsufficientCore(c)",
            "2 nodes CardInsufficientMemory(a,b)",
            "no available node, 4 nodes do not meet",
        ]
    );
    assert!(b.written("default", "p1").is_empty(), "nothing is written on no fit");
    assert_eq!(allocs(&e).await, [("c".into(), "hog".into(), AllocState::Committed)]);
}

#[actix::test]
async fn a_no_fit_is_remembered_with_its_first_nodes_reasons_and_its_need_per_device() {
    let (e, b) = engine(&[node("a").gpus(1, 4096), node("b").gpus(1, 8192)]).await;
    let p = pod().gpu(1).mem_mib(10000).cores(30).name("p1");
    assert!(matches!(filter(&e, &b, &p, &["a", "b", "zz"]).await, FilterOutcome::NoFit { .. }));
    let last = e.recent_decisions().pop().expect("a decision");
    assert_eq!((last.pod.as_str(), last.outcome), ("default/p1", "no_fit"));
    assert_eq!(last.detail, "3 nodes do not meet: 2 CardInsufficientMemory, 1 node unregistered");
    let mut nodes = last.nodes.clone();
    nodes.sort();
    assert_eq!(nodes.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["a", "b", "zz"]);
    assert!(nodes[0].1.starts_with("1/1 CardInsufficientMemory") && nodes[0].1.contains("GPU-a-0"), "{nodes:?}");
    assert_eq!(last.needs, [crate::actor::DeviceNeed::new("NVIDIA", 1, 10000, 0, 30)]);

    let q = pod().gpu(2).mem_pct(60).name("q");
    assert!(matches!(filter(&e, &b, &q, &["a", "b"]).await, FilterOutcome::NoFit { .. }));
    let last = e.recent_decisions().pop().expect("a decision");
    assert_eq!(last.needs, [crate::actor::DeviceNeed::new("NVIDIA", 2, 0, 60, 0)]);
}

#[actix::test]
async fn a_pod_is_pending_from_its_first_refused_filter_until_it_is_placed_bound_or_deleted() {
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    // Within one second, longest pending first is name order.
    let names = |e: &Mem| e.pending_pods().into_iter().map(|p| p.pod).collect::<Vec<_>>();
    let huge = pod().gpu(1).mem_mib(900_000).name("huge").uid("u-huge");
    let big = pod().gpu(1).mem_mib(20_000).name("big").uid("u-big");
    let gone = pod().gpu(1).mem_mib(20_000).name("gone").uid("u-gone");
    for p in [&huge, &big, &gone, &huge] {
        assert!(matches!(filter(&e, &b, p, &["a"]).await, FilterOutcome::NoFit { .. }));
    }
    assert_eq!(names(&e), ["default/big", "default/gone", "default/huge"]);
    let first = &e.pending_pods()[2];
    assert_eq!(
        (first.attempts, first.outcome, first.reasons.as_slice()),
        (2, "no_fit", &["CardInsufficientMemory"][..])
    );
    assert_eq!(first.needs, [crate::actor::DeviceNeed::new("NVIDIA", 1, 900_000, 0, 0)]);
    // Three hundred pods that fit, and their decisions, leave it where it is.
    for k in 0..300 {
        let p = pod().gpu(1).mem_mib(10).name(&format!("w{k}")).uid(&format!("u-w{k}"));
        let o = filter(&e, &b, &p, &["a"]).await;
        e.delete_pod(&PodUid::new(&format!("u-w{k}")));
        assert!(matches!(o, FilterOutcome::Chosen { .. }), "{o:?}");
    }
    assert_eq!(names(&e), ["default/big", "default/gone", "default/huge"]);
    let c = e.pending_counts();
    assert_eq!((c.by_outcome.get("no_fit"), c.by_reason.get("CardInsufficientMemory")), (Some(&3), Some(&3)));

    // Deleted: gone. Seen bound (the watch): gone. Placed by a later filter: gone.
    e.delete_pod(&PodUid::new("u-gone"));
    e.observe_pod(&big.clone().bound_to("a").view());
    assert_eq!(names(&e), ["default/huge"]);
    let small = huge.clone().mem_mib(1000);
    assert!(matches!(filter(&e, &b, &small, &["a"]).await, FilterOutcome::Chosen { .. }));
    assert!(e.pending_pods().is_empty());
    // A filter that fails leaves its pod pending with the error.
    let bad = pod().gpu(1).limit("nvidia.com/gpumem", "lots").name("bad").uid("u-bad");
    assert!(matches!(filter(&e, &b, &bad, &["a"]).await, FilterOutcome::Error(_)));
    let p = e.pending_pods();
    assert_eq!((p[0].pod.as_str(), p[0].outcome, p[0].reasons.as_slice()), ("default/bad", "error", &["error"][..]));
}

#[test]
fn a_device_need_fits_by_vendor_memory_share_and_cores() {
    let need = |mem, mem_pct, cores| crate::actor::DeviceNeed::new("NVIDIA", 1, mem, mem_pct, cores);
    assert!(need(4000, 0, 20).fits("NVIDIA", 16384, 4000, 20));
    assert!(!need(4000, 0, 20).fits("NVIDIA", 16384, 3999, 20), "memory short");
    assert!(!need(4000, 0, 20).fits("NVIDIA", 16384, 4000, 19), "cores short");
    assert!(!need(4000, 0, 0).fits("MLU", 16384, 8000, 100), "another vendor's device");
    assert!(need(0, 50, 0).fits("NVIDIA", 16000, 8000, 0), "half of 16000");
    assert!(!need(0, 50, 0).fits("NVIDIA", 16000, 7999, 0));
}

#[actix::test]
async fn a_pod_requesting_nothing_passes_through() {
    // A pod with no HAMi request is answered with the input node names.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let p = pod().name("plain").limit("cpu", "2");
    assert_eq!(filter(&e, &b, &p, &["a"]).await, FilterOutcome::PassThrough);
    assert!(b.written("default", "plain").is_empty());
    assert!(b.events_for(&pref(&p)).is_empty());
    assert!(allocs(&e).await.is_empty());
}

#[actix::test]
async fn a_stale_mig_allocation_from_an_earlier_decision_is_removed() {
    // HAMi leaves hami.io/vgpu-mig-allocations of an
    // earlier MIG attempt on the pod; hami-rs removes vendor keys it does not write this time.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let stale = r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-old","profile":"1g.5gb","placement":{"start":0,"size":1}}]"#;
    let p = pod().gpu(1).mem_mib(4096).name("p1").annotation(keys::NVIDIA_MIG_ALLOCATIONS, stale);
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    let view = b.pod("default", "p1").unwrap();
    assert_eq!(view.annotation(keys::NVIDIA_MIG_ALLOCATIONS), None);
    assert_eq!(view.annotation(keys::NVIDIA_ALLOCATED), Some("GPU-a-0,NVIDIA,4096,0:;"));
}

#[actix::test]
async fn a_failing_pod_patch_releases_the_reservation_and_answers_the_error() {
    // FilteringFailed with the error, reservation undone, `Error`.
    let (e, b) = engine(&[node("a").gpus(1, 16384)]).await;
    let p = pod().gpu(1).mem_mib(16384).name("p1");
    b.fail_patches(true);
    let out = filter(&e, &b, &p, &["a"]).await;
    assert_eq!(
        out,
        FilterOutcome::Error(FilterError::Backend(port::Error::Refused("pod default/p1: patch refused".into())))
    );
    assert_eq!(messages(&b, &p, reasons::FILTERING_FAILED), ["pod default/p1: patch refused"]);
    assert!(allocs(&e).await.is_empty());
    assert_eq!(used(&e, "a"), (0, 0, 0));

    b.fail_patches(false);
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a", "the whole device is free again");
}

#[actix::test]
async fn mig_reservations_beyond_a_pods_entries_stay_taken_and_the_next_pod_avoids_them() {
    // A reservation in `hami.io/vgpu-mig-allocations` that no device
    // entry consumed is restored: its placement stays taken for the next MIG pod.
    let n = node("a").gpu(gpu("GPU-aa11", 40960).mig(a100_profiles()));
    let (e, b) = engine(&[n]).await;
    let mig = r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-aa11","profile":"1g.5gb","placement":{"start":6,"size":1}},
                  {"containerIndex":0,"deviceIndex":1,"gpuUUID":"GPU-aa11","profile":"1g.5gb","placement":{"start":5,"size":1}}]"#;
    let held = pod()
        .gpu(1)
        .mem_mib(4864)
        .name("held")
        .placed("a", "GPU-aa11,NVIDIA,4864,15:;")
        .annotation(keys::NVIDIA_MIG_ALLOCATIONS, mig)
        .bound_to("a");
    observe(&e, &b, &held).await;
    let snap = e.snapshot("a").unwrap();
    let taken: Vec<u32> = snap.devices[0].mig_used.iter().map(|m| m.placement.start).collect();
    assert_eq!(taken, [6, 5]);
    assert_eq!(snap.devices[0].used, 1, "the leftover reservation takes no slot");

    let p = pod().gpu(1).mem_mib(4000).name("next");
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
    let written = b.written("default", "next");
    let next = codec::decode_mig_allocations(&written[keys::NVIDIA_MIG_ALLOCATIONS]).unwrap();
    assert_eq!(next[0].placement.start, 4, "the 1g.5gb slots 6 and 5 are taken");
}

#[test]
fn the_failures_summary_counts_nodes_per_reason_most_first() {
    use crate::sched::reason::{Reason, Tally};
    let mut memory = Tally::new(2);
    memory.add(Reason::CardInsufficientMemory, 2);
    let mut both = Tally::new(2);
    both.add(Reason::CardInsufficientMemory, 1);
    both.add(Reason::CardInsufficientCore, 1);
    let mut f = Failures::default();
    assert_eq!(f.summary(), "");
    f.push(NodeName::new("a"), Rejection::Devices(memory), None);
    f.push(NodeName::new("b"), Rejection::Devices(both), None);
    f.push(NodeName::new("c"), Rejection::NodeUnregistered, None);
    f.push(NodeName::new("d"), Rejection::NodeUnusable, None);
    f.push(NodeName::new("e"), Rejection::NodeInsufficientDevice { requested: 2, available: 1 }, None);
    assert_eq!(
        f.summary(),
        "2 CardInsufficientMemory, 2 node unregistered, 1 CardInsufficientCore, 1 NodeInsufficientDevice"
    );
}

mod bind;
mod bound_elsewhere;
mod concurrent;
mod defrag;
mod fast_path;
mod filter_all;
mod gang;
mod kept_answers;
mod mig;
mod observe;
mod preemption;
mod refit;
mod resolution;
mod tables;
mod take_all;
