//! Pod groups through the filter: all or none, one decision per group, members answered from
//! their claims, claims given back, and groups racing for room for fewer of them.

use crate::actor::tests::*;
use crate::model::group::{COSCHEDULING_LABEL, GroupId, GroupKind, GroupSpec, PodGroupObject};
use crate::model::pod::SchedulingGroupView;

const NODES: [&str; 4] = ["n1", "n2", "n3", "n4"];

fn cluster() -> Vec<NodeBuilder> {
    NODES.iter().map(|n| node(n).gpus(4, 16384)).collect()
}

fn group(kind: GroupKind, name: &str, min: u32) -> PodGroupObject {
    let id = GroupId { kind, namespace: "ml".into(), name: name.into() };
    PodGroupObject { id, spec: Some(GroupSpec { min, timeout: None, failed: false }) }
}

/// A coscheduling member asking `gpus` whole GPUs.
fn member(group: &str, name: &str, gpus: u32) -> PodBuilder {
    pod().name(name).namespace("ml").uid(&format!("uid-{name}")).gpu(gpus).label(COSCHEDULING_LABEL, group)
}

/// A native member (`spec.schedulingGroup`).
fn native(group: &str, name: &str, gpus: u32) -> PodBuilder {
    let mut p = pod().name(name).namespace("ml").uid(&format!("uid-{name}")).gpu(gpus);
    p.view.spec.scheduling_group = Some(SchedulingGroupView { pod_group_name: Some(group.into()) });
    p
}

async fn create(e: &Mem, b: &MemoryBackend, pods: &[PodBuilder]) {
    for p in pods {
        b.insert_pod(p.view());
        e.observe_pod(&p.view());
    }
}

async fn filter_all_nodes(e: &Mem, p: &PodBuilder) -> FilterOutcome {
    e.filter(&p.view(), &names(&NODES)).await
}

fn group_text(o: &FilterOutcome) -> String {
    group_text_on(o, NODES.len())
}

/// The group's reason, the same on each of the `n` candidates.
fn group_text_on(o: &FilterOutcome, n: usize) -> String {
    match o {
        FilterOutcome::NoFit { failed } => {
            let texts = failed.hami();
            assert_eq!(texts.len(), n, "every candidate is answered: {texts:?}");
            texts.values().next().cloned().unwrap_or_default()
        }
        other => panic!("expected no node, got {other:?}"),
    }
}

async fn claims(e: &Mem) -> usize {
    e.reports().await.iter().map(|r| r.claims.len()).sum()
}

#[actix::test]
async fn groups_that_cannot_start_hold_nothing_and_a_group_that_fits_is_placed_whole() {
    let (e, b) = engine(&cluster()).await;
    for g in [
        group(GroupKind::Coscheduling, "train-q", 3),
        group(GroupKind::Coscheduling, "train-big", 5),
        group(GroupKind::Coscheduling, "train-a", 4),
        group(GroupKind::Native, "train-b", 2),
    ] {
        e.observe_pod_group(&g);
    }
    let q: Vec<PodBuilder> = (0..2).map(|k| member("train-q", &format!("q-{k}"), 1)).collect();
    let big: Vec<PodBuilder> = (0..5).map(|k| member("train-big", &format!("big-{k}"), 4)).collect();
    let a: Vec<PodBuilder> = (0..4).map(|k| member("train-a", &format!("a-{k}"), 4)).collect();
    let bb: Vec<PodBuilder> = (0..2).map(|k| native("train-b", &format!("b-{k}"), 4)).collect();
    for pods in [&q, &big, &a, &bb] {
        create(&e, &b, pods).await;
    }

    assert_eq!(group_text(&filter_all_nodes(&e, &q[0]).await), "train-q: waiting for 2 of 3 members");
    assert_eq!(claims(&e).await, 0, "a group short of members holds nothing");
    assert_eq!(
        group_text(&filter_all_nodes(&e, &big[0]).await),
        "train-big: 4 of 5 members fit; 1 needs 4 × NVIDIA whole"
    );
    assert_eq!(claims(&e).await, 0, "a group that cannot fit holds nothing");

    let a0 = chosen(&filter_all_nodes(&e, &a[0]).await).to_owned();
    assert_eq!(claims(&e).await, 3, "the other three members of train-a are claimed for");
    let b0 = group_text(&filter_all_nodes(&e, &bb[0]).await);
    assert!(b0.starts_with("train-b: 0 of 2 members fit"), "{b0}");
    let a1 = chosen(&filter_all_nodes(&e, &a[1]).await).to_owned();
    assert_eq!(chosen(&filter_all_nodes(&e, &a[1]).await), a1, "a member filtered again gets its claimed node");
    let a2 = chosen(&filter_all_nodes(&e, &a[2]).await).to_owned();
    let a3 = chosen(&filter_all_nodes(&e, &a[3]).await).to_owned();
    let mut placed = vec![a0.clone(), a1.clone(), a2.clone(), a3.clone()];
    placed.sort();
    assert_eq!(placed, NODES, "four distinct nodes");
    for (p, n) in a.iter().zip([&a0, &a1, &a2, &a3]) {
        e.bind(&pref(p), n).await.unwrap();
    }
    assert_eq!(claims(&e).await, 0, "bound members' claims end");
    for n in NODES {
        let s = e.snapshot(n).unwrap();
        assert!(s.devices.iter().all(|d| d.used == 1 && d.used_mem.get() == 16384), "{n}: every GPU used");
    }
    let reports = e.group_reports();
    let a_report = reports.iter().find(|r| r.group == "ml/train-a").unwrap();
    assert_eq!((a_report.state, a_report.bound, a_report.members), ("bound", 4, 4));
    let q_report = reports.iter().find(|r| r.group == "ml/train-q").unwrap();
    assert_eq!(q_report.state, "waiting");
    assert_eq!(q_report.waiting.as_deref(), Some("train-q: waiting for 2 of 3 members"));
}

#[actix::test]
async fn members_sharing_gpus_on_one_node_are_placed_whole() {
    let (e, b) = engine(&[node("n1").gpus(2, 16384)]).await;
    e.observe_pod_group(&group(GroupKind::Coscheduling, "share", 4));
    let m: Vec<PodBuilder> = (0..4).map(|k| member("share", &format!("s-{k}"), 1).mem_mib(8000)).collect();
    create(&e, &b, &m).await;
    for p in &m {
        let out = e.filter(&p.view(), &names(&["n1"])).await;
        assert_eq!(chosen(&out), "n1");
        e.bind(&pref(p), "n1").await.unwrap();
    }
    let s = e.snapshot("n1").unwrap();
    assert_eq!(s.devices.iter().map(|d| d.used_mem.get()).collect::<Vec<_>>(), [16000, 16000]);
}

#[actix::test]
async fn claims_go_back_when_a_member_is_deleted_below_the_minimum_or_the_group_is_deleted() {
    let (e, b) = engine(&cluster()).await;
    e.observe_pod_group(&group(GroupKind::Coscheduling, "g", 3));
    let m: Vec<PodBuilder> = (0..3).map(|k| member("g", &format!("m-{k}"), 4)).collect();
    create(&e, &b, &m).await;
    chosen(&filter_all_nodes(&e, &m[0]).await);
    assert_eq!(claims(&e).await, 2);
    // A member deleted half-way: the group is below its minimum, so every claim goes back, and
    // the reservation of the member filtered first with them when it is deleted too.
    b.remove_pod("ml", "m-1");
    e.delete_pod(&PodUid::new("uid-m-1"));
    let _ = e.reports().await;
    assert_eq!(claims(&e).await, 0);
    // Back to three members: planned again, whole.
    let again = member("g", "m-3", 4);
    create(&e, &b, std::slice::from_ref(&again)).await;
    chosen(&filter_all_nodes(&e, &again).await);
    assert_eq!(claims(&e).await, 1, "m-0 keeps its reservation; m-2 is claimed for");
    e.delete_pod_group(&group(GroupKind::Coscheduling, "g", 3).id);
    let _ = e.reports().await;
    assert_eq!(claims(&e).await, 0, "a deleted PodGroup gives everything back");
}

#[actix::test]
async fn a_member_whose_bind_failed_is_placed_on_its_claimed_node_again() {
    let (e, b) = engine(&cluster()).await;
    e.observe_pod_group(&group(GroupKind::Coscheduling, "g", 2));
    let m: Vec<PodBuilder> = (0..2).map(|k| member("g", &format!("m-{k}"), 4)).collect();
    create(&e, &b, &m).await;
    let first = chosen(&filter_all_nodes(&e, &m[0]).await).to_owned();
    // Its reservation let go unbound (as a failed bind does): the claim comes back at once.
    let what = Holding::Reservation { uid: PodUid::new("uid-m-0"), only_reserved: true };
    assert!(e.inner.unreserve(&first, what, "bind failed").await);
    assert_eq!(claims(&e).await, 2);
    assert_eq!(chosen(&filter_all_nodes(&e, &m[0]).await), first);
    // Another pod cannot take the room meanwhile.
    let other = pod().name("other").gpu(4);
    b.insert_pod(other.view());
    let out = e.filter(&other.view(), &names(&NODES)).await;
    assert_ne!(chosen(&out), first, "the claimed node is not offered to another pod");
}

#[actix::test]
async fn a_group_over_its_namespace_quota_is_refused_whole() {
    let backend = MemoryBackend::new(Duration::from_secs(300));
    let quota = Arc::new(crate::sched::quota_book::QuotaBook::new(&vendors()));
    quota.set_quota("ml", "q", &[("limits.nvidia.com/gpumem".into(), 40000)]);
    let e = Engine::start(EngineConfig::default(), Arc::new(vendors()), backend.clone(), Some(quota));
    for n in cluster() {
        backend.insert_node(n.view());
        e.register_node(Arc::new(n.view())).await;
    }
    e.observe_pod_group(&group(GroupKind::Coscheduling, "q", 3));
    let m: Vec<PodBuilder> = (0..3).map(|k| member("q", &format!("m-{k}"), 1).mem_mib(16000)).collect();
    create(&e, &backend, &m).await;
    let text = group_text(&filter_all_nodes(&e, &m[0]).await);
    assert!(text.contains("exceed the device quota of namespace ml"), "{text}");
    assert_eq!(claims(&e).await, 0);
}

#[actix::test]
async fn groups_racing_for_room_for_fewer_of_them_are_each_placed_whole_or_not_at_all() {
    // Eight groups of four whole-node members over four nodes: room for one group at a time.
    // Their members' filters and binds interleave from many tasks (the engine's arbiters fit
    // and reserve on their own threads); once it settles no group has
    // claimed-or-bound members short of its minimum, no claim outlives its group, and no device
    // is over-committed.
    let (e, b) = engine(&cluster()).await;
    let groups: Vec<String> = (0..8).map(|g| format!("g{g}")).collect();
    let mut all = Vec::new();
    for g in &groups {
        e.observe_pod_group(&group(GroupKind::Coscheduling, g, 4));
        let m: Vec<PodBuilder> = (0..4).map(|k| member(g, &format!("{g}-{k}"), 4)).collect();
        create(&e, &b, &m).await;
        all.extend(m);
    }
    let mut tasks = Vec::new();
    for (k, p) in all.into_iter().enumerate() {
        let e = e.clone();
        tasks.push(actix::spawn(async move {
            for round in 0..3 {
                if (k + round) % 3 == 0 {
                    tokio::task::yield_now().await;
                }
                if let FilterOutcome::Chosen { node, .. } = e.filter(&p.view(), &names(&NODES)).await
                    && e.bind(&pref(&p), node.as_str()).await.is_ok()
                {
                    return Some(node.to_string());
                }
            }
            None
        }));
    }
    let mut bound: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, t) in tasks.into_iter().enumerate() {
        if let Some(n) = t.await.unwrap() {
            bound.entry(format!("g{}", k / 4)).or_default().push(n);
        }
    }
    assert!(!bound.is_empty(), "some group is placed");
    for (g, nodes) in &bound {
        assert_eq!(nodes.len(), 4, "{g} is bound whole or not at all: {nodes:?}");
    }
    for r in e.reports().await {
        for d in &r.snapshot.devices {
            assert!(d.used <= d.info.count && d.used_mem <= d.info.devmem, "{}: {d:?}", r.name);
        }
    }
    // Claims of groups that were not bound whole lapse or stay with a group that fits whole
    // once the others are gone; none is held for a bound group.
    for r in e.group_reports() {
        if r.state == "bound" {
            assert_eq!(r.claimed, 0, "{r:?}");
        }
    }
}

/// Binds `p` to `node` as kube-scheduler would after filtering it there.
async fn bound(e: &Mem, b: &MemoryBackend, p: &PodBuilder, node: &'static str) {
    assert_eq!(chosen(&filter(e, b, p, &[node]).await), node);
    e.bind(&pref(p), node).await.expect("bound");
    let view = crate::port::Backend::pod(b, &p.view.metadata.namespace, &p.view.metadata.name).expect("in the cluster");
    e.observe_pod(&view);
    let _ = e.reports().await;
}

#[actix::test]
async fn a_group_that_fits_only_by_evicting_evicts_for_all_its_members_or_none() {
    let cfg = EngineConfig { arbiters: 2, preemption_hold: Some(Duration::from_secs(60)), ..Default::default() };
    let (e, b) = engine_with(cfg, &[node("n1").gpus(1, 16384), node("n2").gpus(1, 16384)]).await;
    let low: Vec<PodBuilder> =
        ["low-1", "low-2"].iter().map(|n| pod().name(n).gpu(1).mem_mib(16384).priority(1)).collect();
    bound(&e, &b, &low[0], "n1").await;
    bound(&e, &b, &low[1], "n2").await;
    e.observe_pod_group(&group(GroupKind::Coscheduling, "urgent", 2));
    let m: Vec<PodBuilder> =
        (0..2).map(|k| member("urgent", &format!("u-{k}"), 1).mem_mib(16384).priority(100)).collect();
    create(&e, &b, &m).await;
    let gone =
        |p: &PodBuilder| crate::port::Backend::pod(&b, &p.view.metadata.namespace, &p.view.metadata.name).is_none();
    let text = group_text_on(&e.filter(&m[0].view(), &names(&["n1", "n2"])).await, 2);
    assert!(text.starts_with("urgent: evicting 2 pods of lower priority"), "{text}");
    assert!(gone(&low[0]) && gone(&low[1]), "both victims go, for both members");
    let _ = e.reports().await;
    let a = chosen(&e.filter(&m[0].view(), &names(&["n1", "n2"])).await).to_owned();
    let c = chosen(&e.filter(&m[1].view(), &names(&["n1", "n2"])).await).to_owned();
    assert_ne!(a, c);

    // A group whose second member could only evict a pod it may not (equal priority) evicts no one.
    let (e, b) = engine_with(
        EngineConfig { arbiters: 2, preemption_hold: Some(Duration::from_secs(60)), ..Default::default() },
        &[node("n1").gpus(1, 16384), node("n2").gpus(1, 16384)],
    )
    .await;
    let low = pod().name("low").gpu(1).mem_mib(16384).priority(1);
    let peer = pod().name("peer").gpu(1).mem_mib(16384).priority(100);
    bound(&e, &b, &low, "n1").await;
    bound(&e, &b, &peer, "n2").await;
    e.observe_pod_group(&group(GroupKind::Coscheduling, "urgent", 2));
    create(&e, &b, &m).await;
    let text = group_text_on(&e.filter(&m[0].view(), &names(&["n1", "n2"])).await, 2);
    assert!(text.starts_with("urgent: 0 of 2 members fit"), "{text}");
    assert!(crate::port::Backend::pod(&b, "default", "low").is_some(), "nobody is evicted for half a group");
}

#[actix::test]
async fn a_member_of_a_group_is_never_a_victim_on_its_own() {
    let cfg = EngineConfig { arbiters: 2, preemption_hold: Some(Duration::from_secs(60)), ..Default::default() };
    let (e, b) = engine_with(cfg, &[node("n1").gpus(1, 16384)]).await;
    e.observe_pod_group(&group(GroupKind::Coscheduling, "job", 1));
    let worker = member("job", "w-0", 1).mem_mib(16384).priority(1);
    create(&e, &b, std::slice::from_ref(&worker)).await;
    bound(&e, &b, &worker, "n1").await;
    let urgent = pod().name("urgent").gpu(1).mem_mib(16384).priority(100);
    assert!(matches!(filter(&e, &b, &urgent, &["n1"]).await, FilterOutcome::NoFit { .. }));
    assert!(crate::port::Backend::pod(&b, "ml", "w-0").is_some(), "the group's member stays");
}

#[actix::test]
async fn a_member_filtered_before_the_others_are_observed_waits_a_moment_for_them() {
    // kube-scheduler's informer may show the members before this scheduler's watch does.
    let (e, b) = engine(&cluster()).await;
    e.observe_pod_group(&group(GroupKind::Coscheduling, "late", 3));
    let pods: Vec<PodBuilder> = (0..3).map(|k| member("late", &format!("late-{k}"), 4)).collect();
    create(&e, &b, &pods[..1]).await;
    let rest = pods[1..].to_vec();
    let (e2, b2) = (e.clone(), b.clone());
    let shown = actix::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
        create(&e2, &b2, &rest).await;
    });
    let first = filter_all_nodes(&e, &pods[0]).await;
    assert!(matches!(first, FilterOutcome::Chosen { .. }), "placed once the others were shown: {first:?}");
    shown.await.unwrap();
    assert_eq!(claims(&e).await, 2, "the other two members' room is claimed");
    // A group that stays short is still refused, after that moment.
    e.observe_pod_group(&group(GroupKind::Coscheduling, "short", 2));
    let alone = member("short", "short-0", 1);
    create(&e, &b, std::slice::from_ref(&alone)).await;
    assert_eq!(group_text(&filter_all_nodes(&e, &alone).await), "short: waiting for 1 of 2 members");
}
