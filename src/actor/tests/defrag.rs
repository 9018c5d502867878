//! Defragmentation through the filter: a whole-GPU pod placed by moving one fractional pod whose
//! ReplicaSet makes a replacement, the replacement placed on the device claimed for it; budgets,
//! pods that may not move, and the dry run.

use crate::actor::tests::*;
use crate::model::pod::OwnerRefView;

fn defragmenting(mode: Defragment) -> EngineConfig {
    EngineConfig { arbiters: 2, defragment: mode, ..Default::default() }
}

/// A 12000 MiB pod bound to `node`'s GPU `gpu`, owned by ReplicaSet `rs` when given.
fn running(name: &str, node: &str, gpu: &str, rs: Option<&str>) -> PodBuilder {
    let mut p = pod()
        .name(name)
        .namespace("web")
        .uid(&format!("uid-{name}"))
        .label("app", name)
        .gpu(1)
        .mem_mib(12000)
        .placed(node, &format!("{gpu},NVIDIA,12000,0:;"))
        // What a bound pod carries beside its decision: when it was decided and bound, and the
        // devices the plugin has taken (none left to allocate).
        .annotation(keys::ASSIGNED_TIME, "1796683415")
        .annotation(keys::BIND_TIME, "1796683415")
        .annotation(keys::NVIDIA_TO_ALLOCATE, ";;")
        .bound_to(node)
        .phase("Running");
    if let Some(rs) = rs {
        p.view.metadata.owner_references = vec![OwnerRefView {
            kind: "ReplicaSet".into(),
            name: rs.into(),
            uid: format!("uid-{rs}"),
            controller: Some(true),
        }];
    }
    p
}

/// Two nodes fa, fb x 2 GPUs x 24000 MiB, each GPU running one 12000 MiB pod; only web/a1 (on
/// fa's second GPU) is owned by a ReplicaSet.
async fn fragmented(mode: Defragment) -> (Mem, MemoryBackend, PodBuilder) {
    let nodes = [
        node("fa").gpu(gpu("GPU-fa-0", 24000)).gpu(gpu("GPU-fa-1", 24000)),
        node("fb").gpu(gpu("GPU-fb-0", 24000)).gpu(gpu("GPU-fb-1", 24000)),
    ];
    let (e, b) = engine_with(defragmenting(mode), &nodes).await;
    let a1 = running("a1", "fa", "GPU-fa-1", Some("web-rs"));
    for p in [
        running("a0", "fa", "GPU-fa-0", None),
        a1.clone(),
        running("b0", "fb", "GPU-fb-0", None),
        running("b1", "fb", "GPU-fb-1", None),
    ] {
        observe(&e, &b, &p).await;
    }
    (e, b, a1)
}

fn booked(reports: &[NodeReport]) -> u64 {
    reports.iter().flat_map(|r| &r.snapshot.devices).map(|d| d.used_mem.get()).sum()
}

#[actix::test]
async fn a_whole_gpu_pod_gets_its_gpu_by_moving_one_pod_whose_controller_replaces_it() {
    let (e, b, a1) = fragmented(Defragment::On).await;
    let whole = pod().name("whole").uid("uid-whole").gpu(1).mem_mib(24000);
    assert!(matches!(filter(&e, &b, &whole, &["fa", "fb"]).await, FilterOutcome::NoFit { .. }));
    assert!(crate::port::Backend::pod(&b, "web", "a1").is_none(), "a1 was moved");
    let _ = e.reports().await;
    assert_eq!(chosen(&filter(&e, &b, &whole, &["fa", "fb"]).await), "fa", "the next filter takes the freed GPU");
    e.bind(&pref(&whole), "fa").await.unwrap();
    // a1's ReplicaSet makes a new pod of the same shape: it is placed where its room was claimed.
    let mut next = pod().name("a1-next").namespace("web").uid("uid-a1-next").label("app", "a1").gpu(1).mem_mib(12000);
    next.view.metadata.owner_references = a1.view.metadata.owner_references.clone();
    let node = chosen(&filter(&e, &b, &next, &["fa", "fb"]).await).to_owned();
    e.bind(&pref(&next), &node).await.unwrap();
    let reports = e.reports().await;
    assert_eq!(booked(&reports), 72000, "a1 gone, its replacement and the whole-GPU pod placed");
    for r in &reports {
        for d in &r.snapshot.devices {
            assert!(d.used_mem <= d.info.devmem && d.used <= d.info.count, "{}: {d:?}", r.name);
        }
        assert!(r.claims.is_empty(), "every claim was taken: {:?}", r.claims);
    }
    assert_eq!(messages(&b, &a1, reasons::PREEMPTED).len(), 1, "the moved pod is told why");
}

#[actix::test]
async fn a_disruption_budget_keeps_every_pod_where_it_is() {
    let (e, b, _) = fragmented(Defragment::On).await;
    b.add_budget(crate::backend::memory::BudgetObject {
        namespace: "web".into(),
        name: "a1-pdb".into(),
        match_labels: vec![("app".into(), "a1".into())],
        max_unavailable: Some("0".into()),
        min_available: None,
    });
    let whole = pod().name("whole").uid("uid-whole").gpu(1).mem_mib(24000);
    for _ in 0..2 {
        assert!(matches!(filter(&e, &b, &whole, &["fa", "fb"]).await, FilterOutcome::NoFit { .. }));
    }
    assert!(crate::port::Backend::pod(&b, "web", "a1").is_some(), "nothing moves");
    let pending = e.pending_pods();
    let entry = pending.iter().find(|p| p.pod == "default/whole").expect("pending");
    assert!(entry.detail.contains("disruption"), "{}", entry.detail);
    assert!(e.reports().await.iter().all(|r| r.claims.is_empty()), "nothing is held");
}

#[actix::test]
async fn a_dry_run_shows_the_plan_and_moves_nothing_and_off_plans_nothing() {
    let (e, b, _) = fragmented(Defragment::DryRun).await;
    let whole = pod().name("whole").uid("uid-whole").gpu(1).mem_mib(24000);
    assert!(matches!(filter(&e, &b, &whole, &["fa", "fb"]).await, FilterOutcome::NoFit { .. }));
    assert!(crate::port::Backend::pod(&b, "web", "a1").is_some(), "nothing moves");
    let entry = e.pending_pods().into_iter().find(|p| p.pod == "default/whole").expect("pending");
    assert!(entry.detail.contains("would move web/a1 from fa to fa"), "{}", entry.detail);
    assert!(e.reports().await.iter().all(|r| r.claims.is_empty()));

    let (e, b, _) = fragmented(Defragment::Off).await;
    assert!(matches!(filter(&e, &b, &whole, &["fa", "fb"]).await, FilterOutcome::NoFit { .. }));
    let entry = e.pending_pods().into_iter().find(|p| p.pod == "default/whole").expect("pending");
    assert!(!entry.detail.contains("defragmentation"), "{}", entry.detail);
}

#[actix::test]
async fn pods_without_a_replacing_controller_or_of_higher_priority_never_move() {
    let (e, b, a1) = fragmented(Defragment::On).await;
    // a1 outranks the pending pod now.
    let mut higher = a1.clone();
    higher.view.spec.priority = Some(10);
    observe(&e, &b, &higher).await;
    let whole = pod().name("whole").uid("uid-whole").gpu(1).mem_mib(24000);
    assert!(matches!(filter(&e, &b, &whole, &["fa", "fb"]).await, FilterOutcome::NoFit { .. }));
    assert!(crate::port::Backend::pod(&b, "web", "a1").is_some());
    // Annotated not to move.
    let (e, b, a1) = fragmented(Defragment::On).await;
    observe(&e, &b, &a1.clone().annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "false")).await;
    assert!(matches!(filter(&e, &b, &whole, &["fa", "fb"]).await, FilterOutcome::NoFit { .. }));
    assert!(crate::port::Backend::pod(&b, "web", "a1").is_some());
}

#[actix::test]
async fn the_console_figure_counts_the_whole_devices_pods_that_may_move_could_free() {
    // Only a1 may move: one GPU (its own) could be freed, onto fa-0's room.
    let (e, b, a1) = fragmented(Defragment::Off).await;
    let ty = "NVIDIA-Tesla V100-PCIE-32GB".to_owned();
    assert_eq!(e.defrag_freeable(&e.reports().await), [(("NVIDIA".to_owned(), ty.clone()), 1)]);
    // Kept a while: the same figure at once, whatever changed.
    observe(&e, &b, &a1.clone().annotation("hami.io/movable", "false")).await;
    assert_eq!(e.defrag_freeable(&e.reports().await), [(("NVIDIA".to_owned(), ty.clone()), 1)]);
    // Annotated not to move: none.
    let (e, b, a1) = fragmented(Defragment::Off).await;
    observe(&e, &b, &a1.clone().annotation("hami.io/movable", "false")).await;
    assert_eq!(e.defrag_freeable(&e.reports().await), []);
    // Every pod owned by a ReplicaSet: each node's two halves pack onto one GPU.
    let (e, b, _) = fragmented(Defragment::Off).await;
    for (name, node, gpu) in [("a0", "fa", "GPU-fa-0"), ("b0", "fb", "GPU-fb-0"), ("b1", "fb", "GPU-fb-1")] {
        observe(&e, &b, &running(name, node, gpu, Some(&format!("rs-{name}")))).await;
    }
    assert_eq!(e.defrag_freeable(&e.reports().await), [(("NVIDIA".to_owned(), ty), 2)]);
}
