//! The NUMA refit (HAMi's RefitNumaAllocation cases, issue 2828's quota case, and concurrency).

use crate::actor::refit::{RefitArgs, RefitOutcome};
use crate::actor::tests::*;
use crate::model::annotations as keys;

const UID: &str = "refit-pod-uid";

/// node-1: GPU-a (numa 1, 40000 MiB) and GPU-b (numa 0, `b_mem` MiB), 10 slots and 100 cores each.
fn node1(b_mem: u64) -> NodeBuilder {
    node("node-1")
        .gpu(gpu("GPU-a", 40000).count(10).cores(100).numa(1))
        .gpu(gpu("GPU-b", b_mem).count(10).cores(100).numa(0))
}

/// `default/refit-pod`, container `main`, bound to node-1 holding `allocated` (both annotations).
fn refit_pod(allocated: &str) -> PodBuilder {
    let mut p = pod().name("refit-pod").uid(UID).bound_to("node-1");
    p.view.spec.containers[0].name = "main".into();
    p.gpu(1).mem_mib(20000).cores(30).placed("node-1", allocated)
}

fn args(allowed: &[&str]) -> RefitArgs {
    RefitArgs {
        pod_uid: UID.into(),
        pod_namespace: "default".into(),
        pod_name: "refit-pod".into(),
        node_name: "node-1".into(),
        container_index: 0,
        container_name: String::new(),
        device_type: "NVIDIA".into(),
        allowed_device_uuids: allowed.iter().map(|s| (*s).to_owned()).collect(),
    }
}

async fn setup(b_mem: u64, p: &PodBuilder) -> (Mem, MemoryBackend) {
    let (e, b) = engine(&[node1(b_mem)]).await;
    observe(&e, &b, p).await;
    (e, b)
}

/// The devices the node actor holds for the pod, as `uuid:mem` per device.
async fn held(e: &Mem, name: &str) -> Vec<String> {
    let r = e.reports().await;
    let a = r.iter().flat_map(|n| n.allocs.iter()).find(|a| &*a.name == name).expect("pod is tracked");
    a.devices.entries().map(|(_, _, d)| format!("{}:{}", d.uuid, d.usedmem.get())).collect()
}

fn anno(b: &MemoryBackend, name: &str, key: &str) -> String {
    b.pod("default", name).and_then(|p| p.annotation(key).map(str::to_owned)).unwrap_or_default()
}

fn refused(o: &RefitOutcome) -> &str {
    match o {
        RefitOutcome::Refused(r) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[actix::test]
async fn a_refit_moves_the_reservation_and_rewrites_both_annotations() {
    let (e, b) = setup(40000, &refit_pod("GPU-a,NVIDIA,20000,30:;")).await;
    let patches = b.pod_patches();
    let o = e.refit(args(&["GPU-b"])).await;
    assert_eq!(o, RefitOutcome::Moved("GPU-b,NVIDIA,20000,30:".into()));
    assert_eq!(b.pod_patches(), patches + 1);
    assert_eq!(anno(&b, "refit-pod", keys::NVIDIA_TO_ALLOCATE), "GPU-b,NVIDIA,20000,30:;");
    assert_eq!(anno(&b, "refit-pod", keys::NVIDIA_ALLOCATED), "GPU-b,NVIDIA,20000,30:;");
    assert_eq!(held(&e, "refit-pod").await, ["GPU-b:20000"]);
    let s = e.snapshot("node-1").unwrap();
    assert_eq!((s.devices[0].used, s.devices[0].used_mem.get()), (0, 0), "GPU-a is free again");
    assert_eq!((s.devices[1].used, s.devices[1].used_mem.get()), (1, 20000));
    let ev = b.events_for(&PodRef { namespace: "default".into(), name: "refit-pod".into(), uid: UID.into() });
    assert!(ev.iter().any(|e| e.reason == "NumaRefitSucceed"
        && e.kind == EventType::Normal
        && e.message == "NUMA refit moved container 0 from [GPU-a] to [GPU-b]"));
}

#[actix::test]
async fn a_refit_onto_devices_already_held_changes_nothing() {
    let (e, b) = setup(40000, &refit_pod("GPU-a,NVIDIA,20000,30:;")).await;
    let patches = b.pod_patches();
    let o = e.refit(args(&["GPU-a", "GPU-b"])).await;
    assert_eq!(o, RefitOutcome::Unchanged("GPU-a,NVIDIA,20000,30:".into()));
    assert_eq!(b.pod_patches(), patches);
    assert_eq!(held(&e, "refit-pod").await, ["GPU-a:20000"]);
    assert!(b.events().is_empty());
}

#[actix::test]
async fn refusals_after_the_lookup_give_hamis_texts_and_leave_the_pod_as_it_was() {
    // (GPU-b memory, the pod's annotation, the request, the reason, an Event)
    let cases: Vec<(u64, &str, RefitArgs, &str, bool)> = vec![
        (
            16000,
            "GPU-a,NVIDIA,20000,30:;",
            args(&["GPU-b"]),
            "no allowed device fits: 1/1 CardInsufficientMemory",
            true,
        ),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            args(&["GPU-a-0", "GPU-a-1"]),
            "no allowed device fits: AllowedDeviceSetUnmatched",
            true,
        ),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            RefitArgs { pod_uid: "other-uid".into(), ..args(&["GPU-b"]) },
            "pod other-uid is not tracked by the scheduler",
            false,
        ),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            RefitArgs { pod_name: "other-name".into(), ..args(&["GPU-b"]) },
            "pod refit-pod-uid does not match default/other-name",
            false,
        ),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            RefitArgs { node_name: "node-2".into(), ..args(&["GPU-b"]) },
            "pod default/refit-pod is tracked on node node-1, not node-2",
            true,
        ),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            RefitArgs { device_type: "NoSuchVendor".into(), ..args(&["GPU-b"]) },
            "unknown device type \"NoSuchVendor\"",
            false,
        ),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            RefitArgs { device_type: "MLU".into(), ..args(&["GPU-b"]) },
            "device type \"MLU\" is not supported by the NUMA refit yet",
            false,
        ),
        (40000, "GPU-a,NVIDIA,20000,30:;", args(&[]), "refit request carries an empty allowed device set", false),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            RefitArgs { allowed_device_uuids: vec!["x".into(); 513], ..args(&[]) },
            "refit request carries 513 allowed devices, limit is 512",
            false,
        ),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            RefitArgs { container_index: 3, ..args(&["GPU-b"]) },
            "container index 3 is outside the pod's containers",
            true,
        ),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            RefitArgs { container_index: -1, ..args(&["GPU-b"]) },
            "container index -1 is outside the pod's containers",
            true,
        ),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            RefitArgs { pod_namespace: String::new(), ..args(&["GPU-b"]) },
            "incomplete refit request: pod UID, namespace, name, and node are required",
            false,
        ),
        (
            40000,
            "GPU-a,NVIDIA,20000,30:;",
            RefitArgs { container_name: "sidecar".into(), ..args(&["GPU-b"]) },
            "container index 0 is \"main\", not \"sidecar\"",
            true,
        ),
    ];
    for (b_mem, allocated, a, want, event) in cases {
        let (e, b) = setup(b_mem, &refit_pod(allocated)).await;
        let patches = b.pod_patches();
        let o = e.refit(a.clone()).await;
        assert_eq!(refused(&o), want, "{a:?}");
        assert_eq!(b.pod_patches(), patches, "{want}: no patch");
        assert_eq!(held(&e, "refit-pod").await, ["GPU-a:20000"], "{want}");
        let warned = b
            .events()
            .iter()
            .any(|e| e.reason == "NumaRefitFailed" && e.kind == EventType::Warning && e.message == want);
        assert_eq!(warned, event, "{want}: Warning Event");
    }
}

#[actix::test]
async fn a_consumed_pending_entry_cannot_be_refitted() {
    let p = refit_pod("GPU-a,NVIDIA,20000,30:;").annotation(keys::NVIDIA_TO_ALLOCATE, ";");
    let (e, _b) = setup(40000, &p).await;
    let o = e.refit(args(&["GPU-b"])).await;
    assert_eq!(refused(&o), "container 0 has no pending NVIDIA allocation to refit");
    assert_eq!(held(&e, "refit-pod").await, ["GPU-a:20000"]);
}

#[actix::test]
async fn a_failed_patch_rolls_the_move_back() {
    let (e, b) = setup(40000, &refit_pod("GPU-a,NVIDIA,20000,30:;")).await;
    b.fail_patches(true);
    let o = e.refit(args(&["GPU-b"])).await;
    assert!(refused(&o).starts_with("cannot patch pod annotations: "), "{o:?}");
    assert_eq!(held(&e, "refit-pod").await, ["GPU-a:20000"]);
    let s = e.snapshot("node-1").unwrap();
    assert_eq!((s.devices[0].used_mem.get(), s.devices[1].used_mem.get()), (20000, 0), "GPU-b released again");
    assert_eq!(anno(&b, "refit-pod", keys::NVIDIA_ALLOCATED), "GPU-a,NVIDIA,20000,30:;");
}

#[actix::test]
async fn a_stale_resource_version_fails_the_write_as_a_conflict() {
    let mut p = refit_pod("GPU-a,NVIDIA,20000,30:;");
    p.view.metadata.resource_version = Some("7".into());
    let (e, b) = setup(40000, &p).await;
    // The cache holds version 7; the write names it, so it goes through.
    assert!(matches!(e.refit(args(&["GPU-b"])).await, RefitOutcome::Moved(_)));
    // A copy the write's version no longer matches: refused, nothing kept.
    let mut q = refit_pod("GPU-b,NVIDIA,20000,30:;");
    q.view.metadata.resource_version = Some("8".into());
    b.insert_pod(q.view());
    let s = crate::backend::Backend::patch_pod(
        &b,
        &PodRef { namespace: "default".into(), name: "refit-pod".into(), uid: UID.into() },
        &PodPatch { at_version: Some("7".into()), ..PodPatch::default() },
    )
    .await;
    assert!(matches!(s, Err(crate::backend::Error::Status { code: 409, .. })), "{s:?}");
}

#[actix::test]
async fn the_refit_counts_the_pods_other_containers_and_keeps_their_entries() {
    let mut p = pod().name("refit-pod").uid(UID).bound_to("node-1");
    p.view.spec.containers[0].name = "first".into();
    let p = p
        .gpu(1)
        .mem_mib(5000)
        .cores(10)
        .container("second")
        .gpu(1)
        .mem_mib(20000)
        .cores(30)
        .annotation(keys::ASSIGNED_NODE, "node-1")
        .annotation(keys::NVIDIA_TO_ALLOCATE, ";GPU-a,NVIDIA,20000,30:;")
        .annotation(keys::NVIDIA_ALLOCATED, "GPU-a,NVIDIA,5000,10:;GPU-a,NVIDIA,20000,30:;");
    let (e, b) = setup(40000, &p).await;
    let o = e.refit(RefitArgs { container_index: 1, ..args(&["GPU-b"]) }).await;
    assert_eq!(o, RefitOutcome::Moved("GPU-b,NVIDIA,20000,30:".into()));
    assert_eq!(anno(&b, "refit-pod", keys::NVIDIA_TO_ALLOCATE), ";GPU-b,NVIDIA,20000,30:;");
    assert_eq!(anno(&b, "refit-pod", keys::NVIDIA_ALLOCATED), "GPU-a,NVIDIA,5000,10:;GPU-b,NVIDIA,20000,30:;");
    assert_eq!(held(&e, "refit-pod").await, ["GPU-a:5000", "GPU-b:20000"]);
}

#[actix::test]
async fn competing_refits_for_one_device_are_serialised_by_the_node() {
    let (e, b) = engine(&[node1(20000)]).await;
    for n in ["pod-1", "pod-2"] {
        let mut p = pod().name(n).bound_to("node-1");
        p.view.spec.containers[0].name = "main".into();
        observe(&e, &b, &p.gpu(1).mem_mib(15000).cores(10).placed("node-1", "GPU-a,NVIDIA,15000,10:;")).await;
    }
    let ask = |n: &str| RefitArgs { pod_uid: format!("uid-{n}"), pod_name: n.into(), ..args(&["GPU-b"]) };
    let (r1, r2) = futures::join!(e.refit(ask("pod-1")), e.refit(ask("pod-2")));
    let mut outcomes = [r1, r2];
    outcomes.sort_by_key(|o| o.as_str());
    assert_eq!(outcomes[0], RefitOutcome::Moved("GPU-b,NVIDIA,15000,10:".into()));
    assert_eq!(refused(&outcomes[1]), "no allowed device fits: 1/1 CardInsufficientMemory");
    let s = e.snapshot("node-1").unwrap();
    assert!(s.devices.iter().all(|d| d.within_capacity()));
    assert_eq!(s.devices[1].used_mem.get(), 15000);
}

#[actix::test]
async fn mig_devices_and_heterogeneous_reservations_are_refused() {
    let n = node("node-1")
        .gpu(gpu("GPU-a", 40000).count(10).cores(100).numa(1))
        .gpu(gpu("GPU-b", 40000).count(7).cores(100).numa(0).mode("mig").mig(a100_profiles()));
    let (e, b) = engine(&[n]).await;
    observe(&e, &b, &refit_pod("GPU-a,NVIDIA,20000,30:;")).await;
    let o = e.refit(args(&["GPU-b"])).await;
    assert_eq!(refused(&o), "allowed device GPU-b is in MIG mode; the NUMA refit does not support MIG");

    let n = node("node-1")
        .gpu(gpu("GPU-a", 40000).count(10).cores(100).numa(1))
        .gpu(gpu("GPU-b", 20000).count(10).cores(100).numa(1))
        .gpu(gpu("GPU-c", 40000).count(10).cores(100).numa(0))
        .gpu(gpu("GPU-d", 40000).count(10).cores(100).numa(0));
    let (e, b) = engine(&[n]).await;
    let mut p = pod().name("refit-pod").uid(UID).bound_to("node-1");
    p.view.spec.containers[0].name = "main".into();
    let p = p.gpu(2).mem_mib(20000).cores(30).placed("node-1", "GPU-a,NVIDIA,40000,30:GPU-b,NVIDIA,20000,30:;");
    observe(&e, &b, &p).await;
    let patches = b.pod_patches();
    let o = e.refit(args(&["GPU-c", "GPU-d"])).await;
    assert_eq!(
        refused(&o),
        "container 0 reserves differing amounts per device; the refit does not support heterogeneous reservations"
    );
    assert_eq!(b.pod_patches(), patches);
}

/// One init and two regular containers, 5000 MiB each on GPU-A, under a quota of `limit` MiB.
async fn init_and_two_apps(limit: i64) -> (Mem, MemoryBackend, SharedQuota) {
    let v = Arc::new(vendors());
    let book: SharedQuota = Arc::new(crate::sched::quota_book::QuotaBook::new(&v));
    book.set_quota("default", "q", &[("limits.nvidia.com/gpumem".into(), limit)]);
    let backend = MemoryBackend::new(Duration::from_secs(300));
    let e = Engine::start(EngineConfig { arbiters: 2, ..Default::default() }, v, backend.clone(), Some(book.clone()));
    let n = node("node-1").gpu(gpu("GPU-A", 40000).count(10).cores(100)).gpu(gpu("GPU-B", 40000).count(10).cores(100));
    backend.insert_node(n.view());
    e.register_node(Arc::new(n.view())).await;
    let mut p = pod().name("refit-pod").uid(UID).bound_to("node-1").init("init").gpu(1).mem_mib(5000);
    p.view.spec.containers.clear();
    let each = "GPU-A,NVIDIA,5000,0:;";
    let p =
        p.container("a1").gpu(1).mem_mib(5000).container("a2").gpu(1).mem_mib(5000).placed("node-1", &each.repeat(3));
    observe(&e, &backend, &p).await;
    (e, backend, book)
}

fn quota_used(book: &SharedQuota) -> i64 {
    book.entries().iter().find(|q| q.resource.ends_with("gpumem")).map_or(0, |q| q.used)
}

#[actix::test]
async fn a_refit_of_an_init_container_counts_the_quota_at_its_own_position() {
    // HAMi issue 2828: compacting the other containers' entries shifted a regular container into
    // the init range, so moving the init container away passed a quota it exceeds.
    let (e, b, book) = init_and_two_apps(12000).await;
    assert_eq!(quota_used(&book), 10000);
    let patches = b.pod_patches();
    let o = e.refit(args(&["GPU-B"])).await;
    assert_eq!(refused(&o), "refit would exceed the NVIDIA resource quota in namespace default");
    assert_eq!(b.pod_patches(), patches);
    assert_eq!(quota_used(&book), 10000, "quota restored");

    let (e, b, book) = init_and_two_apps(15000).await;
    let o = e.refit(args(&["GPU-B"])).await;
    assert_eq!(o, RefitOutcome::Moved("GPU-B,NVIDIA,5000,0:".into()));
    assert_eq!(
        anno(&b, "refit-pod", keys::NVIDIA_ALLOCATED),
        "GPU-B,NVIDIA,5000,0:;GPU-A,NVIDIA,5000,0:;GPU-A,NVIDIA,5000,0:;"
    );
    assert_eq!(quota_used(&book), 15000);
}

#[actix::test]
async fn concurrent_refits_and_filters_on_one_node_never_over_commit() {
    let n = node("node-1").gpu(gpu("GPU-a", 100000).count(10).cores(100)).gpu(gpu("GPU-b", 40000).count(10).cores(100));
    let (e, b) = engine(&[n]).await;
    for i in 0..6 {
        let mut p = pod().name(&format!("held-{i}")).bound_to("node-1");
        p.view.spec.containers[0].name = "main".into();
        observe(&e, &b, &p.gpu(1).mem_mib(15000).cores(10).placed("node-1", "GPU-a,NVIDIA,15000,10:;")).await;
    }
    let refits = (0..6).map(|i| {
        let n = format!("held-{i}");
        e.refit(RefitArgs { pod_uid: format!("uid-{n}"), pod_name: n, ..args(&["GPU-b"]) })
    });
    let fresh: Vec<PodBuilder> =
        (0..6).map(|i| pod().name(&format!("new-{i}")).gpu(1).mem_mib(15000).cores(10)).collect();
    for p in &fresh {
        b.insert_pod(p.view());
    }
    let filters = fresh.iter().map(|p| async { e.filter(&p.view(), &names(&["node-1"])).await });
    let (moved, _) = futures::join!(futures::future::join_all(refits), futures::future::join_all(filters));
    let s = e.snapshot("node-1").unwrap();
    assert!(s.devices.iter().all(|d| d.within_capacity()), "{:?}", s.devices);
    let n_moved = moved.iter().filter(|o| matches!(o, RefitOutcome::Moved(_))).count();
    assert!(n_moved <= 2, "GPU-b holds two of 15000 MiB at most: {moved:?}");
    // Every pod's usage, recomputed from what the actors hold, matches the snapshot.
    let total: u64 = e
        .reports()
        .await
        .iter()
        .flat_map(|r| r.allocs.iter())
        .flat_map(|a| a.devices.entries().map(|(_, _, d)| d.usedmem.get()).collect::<Vec<_>>())
        .sum();
    assert_eq!(total, s.devices.iter().map(|d| d.used_mem.get()).sum::<u64>());
}
