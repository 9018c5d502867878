//! Live GPU-aware preemption: victims evicted through the backend, the devices the preemptor
//! will take claimed for it until its next filter reserves them, budgets, `Never`, equal
//! priority, lapse, deletion, two preemptors' claims side by side.

use crate::actor::tests::*;

fn preempting(hold: Duration) -> EngineConfig {
    EngineConfig { arbiters: 2, preemption_hold: Some(hold), ..Default::default() }
}

/// Filters and binds the pod, as kube-scheduler would, and waits until the engine counts it.
async fn place(e: &Mem, b: &MemoryBackend, p: &PodBuilder) -> String {
    let node = chosen(&filter(e, b, p, &["n"]).await).to_owned();
    e.bind(&pref(p), &node).await.expect("bound");
    let view = crate::port::Backend::pod(b, &p.view.metadata.namespace, &p.view.metadata.name).expect("in the cluster");
    e.observe_pod(&view);
    let _ = e.reports().await;
    node
}

fn gone(b: &MemoryBackend, p: &PodBuilder) -> bool {
    crate::port::Backend::pod(b, &p.view.metadata.namespace, &p.view.metadata.name).is_none()
}

/// One 16 384 MiB GPU holding two priority-1 pods of 6 000 MiB, `b` started last.
async fn full_node(cfg: EngineConfig) -> (Mem, MemoryBackend, PodBuilder, PodBuilder) {
    let (e, b) = engine_with(cfg, &[node("n").gpus(1, 16384)]).await;
    let low = |n: &str, at: &str| pod().gpu(1).mem_mib(6000).name(n).priority(1).started(at);
    let (a, bb) = (low("low-a", "2026-01-01T10:00:00Z"), low("low-b", "2026-01-01T11:00:00Z"));
    place(&e, &b, &a).await;
    place(&e, &b, &bb).await;
    (e, b, a, bb)
}

#[actix::test]
async fn a_preemptor_evicts_the_latest_started_victim_and_takes_the_devices_held_for_it() {
    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);
    // The filter that preempts still answers "no node"; kube-scheduler comes back when the
    // victim's deletion arrives.
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &low_b) && !gone(&b, &a), "only the later started victim goes");
    assert_eq!(messages(&b, &low_b, reasons::PREEMPTED).len(), 1);
    let said = messages(&b, &urgent, reasons::PREEMPTING);
    assert!(said.len() == 1 && said[0].contains("default/low-b (priority 1)"), "{said:?}");
    // Claimed: a pod that would fit in what low-b freed but not beside the claim (6000 used,
    // 8000 claimed, 2384 MiB left) is kept out.
    let big = pod().gpu(1).mem_mib(3000).name("big").priority(1);
    assert!(matches!(filter(&e, &b, &big, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a), "the pod evicts nothing: it only waits");
    let small = pod().gpu(1).mem_mib(2000).name("small").priority(1);
    let report = e.reports().await;
    assert_eq!(report[0].held_for.as_ref().map(|u| u.as_str()), Some(urgent.view.metadata.uid.as_str()));
    assert_eq!(report[0].snapshot.devices[0].used_mem.get(), 6000, "reports show the node's real usage");
    let claimed: u64 = report[0].claims.iter().flat_map(|c| &c.charges).map(|c| c.mem.get()).sum();
    assert_eq!(claimed, 8000, "and what is claimed beside it, as much as the pod asks");
    let json = crate::report::node_json(&report[0], e.vendors());
    assert_eq!((json.held_for.as_deref(), json.devices[0].mem_used), (Some(urgent.view.metadata.uid.as_str()), 6000));
    // The preemptor's next filter reserves the held devices; the hold is gone with it.
    assert_eq!(chosen(&filter(&e, &b, &urgent, &["n"]).await), "n");
    assert_eq!(used(&e, "n"), (2, 14000, 0));
    assert!(e.reports().await[0].held_for.is_none());
    assert_eq!(chosen(&filter(&e, &b, &small, &["n"]).await), "n", "what is left is anyone's");
}

#[actix::test]
async fn a_victim_protected_by_a_disruption_budget_is_spared_for_another_or_none() {
    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    b.protect("default", "low-b");
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &a) && !gone(&b, &low_b), "the budget sends the eviction to low-a");

    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    b.protect("default", "low-a");
    b.protect("default", "low-b");
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a) && !gone(&b, &low_b), "every possible victim is protected: none is evicted");
    assert!(messages(&b, &urgent, reasons::PREEMPTING).is_empty());
    assert!(e.reports().await[0].held_for.is_none(), "nothing is held");
}

#[actix::test]
async fn when_every_eviction_is_refused_nothing_is_held() {
    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    b.refuse_evictions(true);
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a) && !gone(&b, &low_b));
    let failed = messages(&b, &urgent, reasons::PREEMPTION_FAILED);
    assert!(failed.len() == 1 && failed[0].contains("could not evict default/low-b"), "{failed:?}");
    assert!(messages(&b, &urgent, reasons::PREEMPTING).is_empty());
    assert!(e.reports().await[0].held_for.is_none(), "no hold for evictions that did not happen");
    // Its next filter may try again.
    b.refuse_evictions(false);
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &low_b));
}

#[actix::test]
async fn never_equal_priority_and_preemption_off_evict_nothing() {
    let cases: [(&str, EngineConfig, PodBuilder); 3] = [
        (
            "preemptionPolicy: Never",
            preempting(Duration::from_secs(60)),
            pod().gpu(1).mem_mib(8000).name("p").priority(100).preemption_policy("Never"),
        ),
        ("equal priority", preempting(Duration::from_secs(60)), pod().gpu(1).mem_mib(8000).name("p").priority(1)),
        (
            "--preemption=off",
            EngineConfig { arbiters: 2, ..Default::default() },
            pod().gpu(1).mem_mib(8000).name("p").priority(100),
        ),
    ];
    for (what, cfg, p) in cases {
        let (e, b, a, low_b) = full_node(cfg).await;
        assert!(matches!(filter(&e, &b, &p, &["n"]).await, FilterOutcome::NoFit { .. }), "{what}");
        assert!(!gone(&b, &a) && !gone(&b, &low_b), "{what}: nothing evicted");
        assert!(e.reports().await[0].held_for.is_none(), "{what}");
    }
}

#[actix::test]
async fn a_hold_ends_when_it_lapses_or_its_preemptor_is_deleted() {
    // 3000 MiB fits in what the victim freed but not beside the 8000 MiB claim.
    let small = pod().gpu(1).mem_mib(3000).name("small").priority(1);
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);

    let (e, b, _, _) = full_node(preempting(Duration::from_millis(100))).await;
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(matches!(filter(&e, &b, &small, &["n"]).await, FilterOutcome::NoFit { .. }), "claimed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(e.reports().await[0].held_for.is_none(), "lapsed");
    assert_eq!(messages(&b, &urgent, reasons::PREEMPTION_FAILED).len(), 1, "and the preemptor is told");
    assert_eq!(chosen(&filter(&e, &b, &small, &["n"]).await), "n");

    let (e, b, _, _) = full_node(preempting(Duration::from_secs(60))).await;
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    e.delete_pod(&PodUid::new(&urgent.view.metadata.uid));
    assert!(e.reports().await[0].held_for.is_none(), "the preemptor is gone: so is its hold");
    assert_eq!(chosen(&filter(&e, &b, &small, &["n"]).await), "n");
}

#[actix::test]
async fn a_second_preemptor_counts_the_first_ones_claim() {
    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &low_b));
    // Its second filter, victims not all released yet in its eyes, takes no one more.
    assert!(!gone(&b, &a));
    // A second preemptor of 8000 MiB fits beside the first one's claim only once low-a goes
    // too: it takes low-a, and the two claims together stay within the device.
    let other = pod().gpu(1).mem_mib(8000).name("other").priority(100);
    assert!(matches!(filter(&e, &b, &other, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &a), "the second preemptor's victim");
    let report = e.reports().await;
    assert_eq!(report[0].claims.len(), 2);
    let claimed: u64 = report[0].claims.iter().flat_map(|c| &c.charges).map(|c| c.mem.get()).sum();
    assert!(claimed <= 16384, "two claims never count the same room: {claimed}");
    // A third finds nothing left to evict, and claims nothing.
    let third = pod().gpu(1).mem_mib(8000).name("third").priority(100);
    assert!(matches!(filter(&e, &b, &third, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(messages(&b, &third, reasons::PREEMPTING).is_empty());
    assert_eq!(e.reports().await[0].claims.len(), 2);
    // Both preemptors then reserve what was claimed for them.
    assert_eq!(chosen(&filter(&e, &b, &urgent, &["n"]).await), "n");
    assert_eq!(chosen(&filter(&e, &b, &other, &["n"]).await), "n");
    assert_eq!(used(&e, "n"), (2, 16000, 0));
    assert!(e.reports().await[0].claims.is_empty());
}

/// One case of victim selection: nodes, pods placed first (in order, on the named candidates),
/// the preemptor, and whom it must evict.
struct Case {
    what: &'static str,
    nodes: Vec<NodeBuilder>,
    placed: Vec<(PodBuilder, &'static [&'static str])>,
    preemptor: PodBuilder,
    evicted: &'static [&'static str],
}

fn low(name: &str, mem: u64, started: &str) -> PodBuilder {
    pod().gpu(1).mem_mib(mem).name(name).priority(1).started(&format!("2026-01-01T{started}:00Z"))
}

fn on(p: PodBuilder, uuid: &str) -> PodBuilder {
    p.annotation(keys::NVIDIA_USE_UUID, uuid)
}

/// A bound MIG pod on GPU-aa11 holding one 1g.5gb instance at `slot`.
fn mig_pod(name: &str, slot: u32, started: &str) -> PodBuilder {
    let mig = format!(
        r#"[{{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-aa11","profile":"1g.5gb","placement":{{"start":{slot},"size":1}}}}]"#
    );
    low(name, 4864, started)
        .placed("a", "GPU-aa11,NVIDIA,4864,15:;")
        .annotation(keys::NVIDIA_MIG_ALLOCATIONS, &mig)
        .bound_to("a")
}

#[actix::test]
async fn victims_are_chosen_by_the_filters_own_fit() {
    let numa_node = || {
        node("n")
            .gpu(gpu("GPU-n-0", 16384).numa(0))
            .gpu(gpu("GPU-n-1", 16384).numa(0))
            .gpu(gpu("GPU-n-2", 16384).numa(1))
            .gpu(gpu("GPU-n-3", 16384).numa(1))
    };
    let numa_lows = || {
        vec![
            (on(low("a", 12000, "10:00"), "GPU-n-0"), &["n"][..]),
            (on(low("b", 12000, "11:00"), "GPU-n-2"), &["n"][..]),
            (on(low("c", 12000, "09:00"), "GPU-n-3"), &["n"][..]),
        ]
    };
    let cases = vec![
        Case {
            what: "a two-GPU pod needs both GPUs' big pods gone, not the small one beside them",
            nodes: vec![node("n").gpus(2, 16384)],
            placed: vec![
                (on(low("a", 12000, "10:00"), "GPU-n-0"), &["n"]),
                (on(low("b", 12000, "10:00"), "GPU-n-1"), &["n"]),
                (on(low("c", 2000, "11:00"), "GPU-n-1"), &["n"]),
            ],
            preemptor: pod().gpu(2).mem_mib(12000).name("p").priority(10),
            evicted: &["a", "b"],
        },
        Case {
            what: "one two-GPU victim rather than two single ones",
            nodes: vec![node("m").gpus(2, 16384), node("n").gpus(2, 16384)],
            placed: vec![
                (low("s1", 12000, "10:00").annotation(keys::NVIDIA_USE_UUID, "GPU-m-0"), &["m"]),
                (low("s2", 12000, "10:00").annotation(keys::NVIDIA_USE_UUID, "GPU-m-1"), &["m"]),
                (pod().gpu(2).mem_mib(12000).name("pair").priority(1), &["n"]),
            ],
            preemptor: pod().gpu(2).mem_mib(12000).name("p").priority(10),
            evicted: &["pair"],
        },
        Case {
            what: "an init container is fitted alone: evicting the 8 000 MiB pod makes room for its 12 000",
            nodes: vec![node("n").gpus(1, 16384)],
            placed: vec![(low("a", 8000, "10:00"), &["n"]), (low("b", 4000, "11:00"), &["n"])],
            preemptor: pod().gpu(1).mem_mib(4000).name("p").priority(10).init("warm").gpu(1).mem_mib(12000).main(),
            evicted: &["a"],
        },
        Case {
            what: "without NUMA binding, one victim beside the free GPU: the latest started",
            nodes: vec![numa_node()],
            placed: numa_lows(),
            preemptor: pod().gpu(2).mem_mib(12000).name("p").priority(10),
            evicted: &["b"],
        },
        Case {
            what: "with NUMA binding, the victim that frees a GPU on the free GPU's NUMA node",
            nodes: vec![numa_node()],
            placed: numa_lows(),
            preemptor: pod().gpu(2).mem_mib(12000).name("p").priority(10).annotation(keys::NVIDIA_NUMA_BIND, "true"),
            evicted: &["a"],
        },
    ];
    for c in cases {
        let (e, b) = engine_with(preempting(Duration::from_secs(60)), &c.nodes).await;
        for (p, candidates) in &c.placed {
            let node = chosen(&filter(&e, &b, p, candidates).await).to_owned();
            e.bind(&pref(p), &node).await.expect("bound");
            let view = crate::port::Backend::pod(&b, "default", &p.view.metadata.name).expect("in the cluster");
            e.observe_pod(&view);
            let _ = e.reports().await;
        }
        let names: Vec<&'static str> = c.nodes.iter().map(|n| &*n.name.clone().leak()).collect();
        assert!(matches!(filter(&e, &b, &c.preemptor, &names).await, FilterOutcome::NoFit { .. }), "{}", c.what);
        let mut evicted: Vec<String> =
            c.placed.iter().filter(|(p, _)| gone(&b, p)).map(|(p, _)| p.view.metadata.name.clone()).collect();
        evicted.sort();
        assert_eq!(evicted, c.evicted, "{}", c.what);
        assert!(!chosen(&filter(&e, &b, &c.preemptor, &names).await).is_empty(), "{}: placed after", c.what);
    }
}

#[actix::test]
async fn mig_placements_decide_the_victim_where_memory_alone_would_not() {
    // Two 1g.5gb instances at slots 0 and 4 leave 31 232 MiB free, yet no 3g.20gb placement (start
    // 0 or 4) is whole: one of them must go, the later started.
    let n = node("a").gpu(gpu("GPU-aa11", 40960).mig(a100_profiles()));
    let (e, b) = engine_with(preempting(Duration::from_secs(60)), &[n]).await;
    let (x, y) = (mig_pod("x", 0, "10:00"), mig_pod("y", 4, "11:00"));
    observe(&e, &b, &x).await;
    observe(&e, &b, &y).await;
    let p = pod().gpu(1).mem_mib(19968).name("p").priority(10);
    assert!(matches!(filter(&e, &b, &p, &["a"]).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &y) && !gone(&b, &x));
    assert_eq!(chosen(&filter(&e, &b, &p, &["a"]).await), "a");
}

#[actix::test]
async fn a_namespace_quota_that_refuses_the_pod_is_not_lifted_by_evictions() {
    let v = Arc::new(vendors());
    let book = Arc::new(quota::QuotaBook::new(&v));
    book.set_quota("default", "q", &[("limits.nvidia.com/gpumem".into(), 17_000)]);
    let b = MemoryBackend::new(Duration::from_secs(300));
    let e = Engine::start(preempting(Duration::from_secs(60)), v, b.clone(), Some(book));
    let n = node("n").gpus(1, 16384);
    b.insert_node(n.view());
    e.register_node(Arc::new(n.view())).await;
    let a = low("a", 10000, "10:00");
    let other = low("o", 6000, "11:00").namespace("other");
    place(&e, &b, &a).await;
    place(&e, &b, &other).await;
    // 10 000 + 8 000 is over the quota of 17 000 whoever goes: nothing is evicted.
    let p = pod().gpu(1).mem_mib(8000).name("p").priority(10);
    assert!(matches!(filter(&e, &b, &p, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a) && !gone(&b, &other));
    // 10 000 + 6 000 is within it: either pod's release makes room on the device, and the later
    // started goes.
    let q = pod().gpu(1).mem_mib(6000).name("q").priority(10);
    assert!(matches!(filter(&e, &b, &q, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &other) && !gone(&b, &a));
    assert_eq!(chosen(&filter(&e, &b, &q, &["n"]).await), "n");
}

#[actix::test]
async fn preemptors_and_small_pods_racing_never_overcommit_a_device() {
    let nodes: Vec<NodeBuilder> = (0..4).map(|k| node(&format!("n{k}")).gpus(2, 16384)).collect();
    let names: Vec<&'static str> = nodes.iter().map(|n| &*n.name.clone().leak()).collect();
    let (e, b) = engine_with(preempting(Duration::from_secs(60)), &nodes).await;
    for k in 0..16 {
        let p = low(&format!("low-{k}"), 8000, &format!("{:02}:00", k % 24));
        let node = chosen(&filter(&e, &b, &p, &names).await).to_owned();
        e.bind(&pref(&p), &node).await.expect("bound");
        e.observe_pod(&p.view());
    }
    let racers: Vec<PodBuilder> = (0..8)
        .flat_map(|k| {
            [
                pod().gpu(1).mem_mib(12000).name(&format!("hi-{k}")).priority(10),
                pod().gpu(1).mem_mib(4000).name(&format!("small-{k}")).priority(1),
            ]
        })
        .collect();
    let runs = racers.iter().map(|p| {
        let (e, b, names) = (e.clone(), b.clone(), names.clone());
        async move {
            for _ in 0..6 {
                if let FilterOutcome::Chosen { node, .. } = filter(&e, &b, p, &names).await
                    && e.bind(&pref(p), node.as_str()).await.is_ok()
                {
                    return true;
                }
                tokio::task::yield_now().await;
            }
            false
        }
    });
    let placed = futures::future::join_all(runs).await;
    for r in e.reports().await {
        for d in &r.snapshot.devices {
            assert!(
                d.used <= d.cap.count && d.used_mem <= d.cap.devmem && d.used_cores <= d.cap.devcore,
                "{}: {d:?}",
                r.name
            );
        }
    }
    let hi_placed = placed.iter().step_by(2).filter(|p| **p).count();
    assert!(hi_placed > 0, "some preemptor was placed");
}

#[actix::test]
async fn kube_schedulers_preemption_evicts_no_one_more_for_a_pod_a_node_holds_for() {
    let (e, b, a, _) = full_node(preempting(Duration::from_secs(60))).await;
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);
    b.insert_pod(urgent.view());
    let proposal: std::collections::BTreeMap<String, Vec<String>> =
        [("n".to_owned(), vec![a.view.metadata.uid.clone()])].into();
    // Before: the proposed victim's release makes room, so kube-scheduler may evict it.
    assert_eq!(e.preempt_proposals(&urgent.view(), &proposal).await.unwrap(), proposal);
    assert!(matches!(filter(&e, &b, &urgent, &["n"]).await, FilterOutcome::NoFit { .. }));
    assert!(e.preempt_proposals(&urgent.view(), &proposal).await.unwrap().is_empty(), "held: no one else goes");
}

/// Who preempts is the cluster's word: a request body that names a pod the cluster does not have,
/// or claims a priority its pod does not have, evicts no one.
#[actix::test]
async fn a_filter_for_a_pod_the_cluster_does_not_have_evicts_no_one_whatever_priority_it_claims() {
    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    // Never inserted into the cluster: the request body is all there is of it.
    let phantom = pod().gpu(1).mem_mib(8000).name("phantom").namespace("attacker").priority(2_000_000_000);
    assert!(matches!(e.filter(&phantom.view(), &names(&["n"])).await, FilterOutcome::NoFit { .. }));
    // Known only from an earlier request body (as serve --cluster-file learns pods): still no one's word.
    b.learn_pod(&phantom.view());
    assert!(matches!(e.filter(&phantom.view(), &names(&["n"])).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a) && !gone(&b, &low_b), "nobody evicted");
    let proposal: std::collections::BTreeMap<String, Vec<String>> =
        [("n".to_owned(), vec![a.view.metadata.uid.clone()])].into();
    assert!(
        e.preempt_proposals(&phantom.view(), &proposal).await.unwrap().is_empty(),
        "kube-scheduler evicts no one for it"
    );

    // The cluster's pod at priority 0, its body claiming more: the cluster's priority holds.
    let lowly = pod().gpu(1).mem_mib(8000).name("lowly").priority(0);
    b.insert_pod(lowly.view());
    let claimed = lowly.clone().priority(2_000_000_000);
    assert!(matches!(e.filter(&claimed.view(), &names(&["n"])).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a) && !gone(&b, &low_b), "priority 0 outranks no one");

    // The cluster's pod under another UID (deleted and made again): not the pod the filter named.
    let urgent = pod().gpu(1).mem_mib(8000).name("urgent").priority(100);
    b.insert_pod(urgent.clone().uid("uid-the-real-one").view());
    assert!(matches!(e.filter(&urgent.view(), &names(&["n"])).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a) && !gone(&b, &low_b), "a stale UID evicts no one");

    // A preemptor the cluster has, at the priority it has, still preempts; the body's word on its
    // policy does not stop it either.
    let said_never = urgent.clone().preemption_policy("Never");
    b.insert_pod(urgent.view());
    assert!(matches!(e.filter(&said_never.view(), &names(&["n"])).await, FilterOutcome::NoFit { .. }));
    assert!(gone(&b, &low_b) && !gone(&b, &a), "the real preemption evicts the later started victim");
}

#[actix::test]
async fn a_preemptor_the_cluster_says_may_not_preempt_does_not_whatever_its_body_says() {
    let (e, b, a, low_b) = full_node(preempting(Duration::from_secs(60))).await;
    let never = pod().gpu(1).mem_mib(8000).name("polite").priority(100).preemption_policy("Never");
    b.insert_pod(never.view());
    let body = pod().gpu(1).mem_mib(8000).name("polite").priority(100);
    assert!(matches!(e.filter(&body.view(), &names(&["n"])).await, FilterOutcome::NoFit { .. }));
    assert!(!gone(&b, &a) && !gone(&b, &low_b), "the cluster's preemptionPolicy: Never holds");
}
