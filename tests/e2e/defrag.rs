//! Scenarios z and z2: defragmentation through the real kube-apiserver and kube-scheduler.
//!
//! - z (`--defragment=on`): one node of two 16384 MiB GPUs, each running one 8192 MiB pod of a
//!   ReplicaSet (spread over the GPUs, so that neither has room for a whole-GPU pod). A pod asking
//!   a whole GPU's memory arrives: hami-rs claims the GPU it frees and the other GPU's room for
//!   the moved pod's replacement, then evicts one ReplicaSet pod; the replacement (made as the
//!   ReplicaSet controller makes it: same template, same owner) is placed on the planned GPU and
//!   the whole-GPU pod on the freed one, each GPU within its memory. Then, with a second
//!   ReplicaSet fragmenting the GPUs the same way under a PodDisruptionBudget of
//!   `maxUnavailable: 0`, a second whole-GPU pod moves nothing, stays pending, and
//!   `kubectl hami why` says a disruption budget blocked it.
//! - z2 (`--defragment=dry-run`): the same fragmented GPUs and whole-GPU pod: the plan is counted
//!   and told, nothing is evicted, the pod stays pending.
//!
//! The control plane has no controller-manager: the test creates the ReplicaSets as objects and
//! stands in for their controller, creating each pod with the ReplicaSet as its controlling owner
//! and, when one is evicted, its replacement from the same template.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::cluster::*;
use crate::harness::*;

/// The counter of defragmentation plans by outcome.
const PLANS: &str = "hami_scheduler_defrag_plans_total";
/// The counter of pods moved.
const MOVED: &str = "hami_scheduler_defrag_pods_moved_total";
/// Half a fake GPU's memory: two such pods spread over two GPUs leave no GPU whole.
const HALF: &str = "8192";
const WHOLE: &str = "16384";

/// A ReplicaSet object for `app` (its pods are made by the test); its UID.
async fn replica_set(cp: &ControlPlane, app: &str) -> String {
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": app, "namespace": NS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/e2e:never-pulled"}]},
            },
        },
    }))
    .expect("a ReplicaSet");
    let made = Api::<ReplicaSet>::namespaced(cp.client.clone(), NS)
        .create(&PostParams::default(), &rs)
        .await
        .expect("the ReplicaSet is created");
    made.metadata.uid.expect("the ReplicaSet has a UID")
}

/// One pod of the ReplicaSet `app` (UID `rs_uid`): half a GPU's memory, spread over the GPUs.
fn replica(name: &str, app: &str, rs_uid: &str) -> Pod {
    let mut p = pod(
        name,
        &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", HALF)],
        &[("hami.io/gpu-scheduler-policy", "spread")],
        None,
    );
    p.metadata.labels.get_or_insert_default().insert("app".into(), app.into());
    p.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app, "uid": rs_uid,
            "controller": true, "blockOwnerDeletion": true,
        }))
        .expect("an owner reference"),
    ]);
    p
}

fn whole(name: &str) -> Pod {
    pod(name, &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", WHOLE)], &[], None)
}

/// The UUID of the one device a bound pod was allocated.
fn device_of(p: &Pod) -> String {
    let raw = annotation(p, ALLOCATED).or_else(|| annotation(p, TO_ALLOCATE)).unwrap_or("");
    let devices = parse_pod_devices(raw).unwrap_or_else(|e| panic!("e2e: {}'s devices {raw:?}: {e}", name(p)));
    let all: Vec<&DeviceUse> = devices.iter().flatten().collect();
    assert_eq!(all.len(), 1, "e2e: {} holds one device: {raw:?}", name(p));
    all[0].uuid.clone()
}

/// Two pods of a fresh ReplicaSet `app`, bound one on each GPU; their names by device.
async fn fragment(cp: &ControlPlane, app: &str) -> (String, BTreeMap<String, String>) {
    let uid = replica_set(cp, app).await;
    let mut by_device = BTreeMap::new();
    for i in 0..2 {
        let name = format!("{app}-{i}");
        create(&cp.client, &replica(&name, app, &uid)).await;
        let p = wait_allocated(&cp.client, &name, Duration::from_secs(90)).await;
        by_device.insert(device_of(&p), name);
    }
    assert_eq!(by_device.len(), 2, "e2e: {app}'s two pods are spread over both GPUs: {by_device:?}");
    (uid, by_device)
}

async fn exists(cp: &ControlPlane, name: &str) -> bool {
    pods_api(&cp.client).get_opt(name).await.expect("the pod is read").is_some()
}

/// Waits until `still` (pods that may be moved) are all there and `pending` unbound, for `hold`.
async fn nothing_moves(cp: &ControlPlane, still: &[&str], pending: &str, hold: Duration) {
    let until = Instant::now() + hold;
    while Instant::now() < until {
        for p in still {
            assert!(exists(cp, p).await, "e2e: {p} was moved");
        }
        assert_eq!(node_name(&get_pod(&cp.client, pending).await), None, "e2e: {pending} stays pending");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn z_defragmentation_moves_one_replica_set_pod_and_a_budget_of_no_disruption_blocks_it() {
    let cp = ControlPlane::start("z").await;
    let nodes = FakeNodes::new("gpu-z-", 1, 2);
    let (_plugin, hami, _ks) = crate::single(&cp, &nodes, &["--defragment=on"]).await;

    // 1. Fragmented: each GPU half used by a ReplicaSet pod; a whole-GPU pod arrives.
    let (uid, by_device) = fragment(&cp, "z-web").await;
    let asked = Instant::now();
    create(&cp.client, &whole("z-whole")).await;
    let moved = wait_for("one of z-web's pods to be moved", Duration::from_secs(120), || async {
        let gone: Vec<&String> = {
            let mut g = Vec::new();
            for n in by_device.values() {
                if !exists(&cp, n).await {
                    g.push(n);
                }
            }
            g
        };
        match gone.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err("none moved yet".to_owned()),
            more => panic!("e2e: more than one pod moved: {more:?}"),
        }
    })
    .await;
    let stayed = by_device.values().find(|n| **n != moved).cloned().expect("the other pod");
    let planned = by_device.iter().find(|(_, n)| **n == stayed).map(|(d, _)| d.clone()).expect("its device");
    let freed = by_device.iter().find(|(_, n)| **n == moved).map(|(d, _)| d.clone()).expect("the freed device");
    // The ReplicaSet controller's part: a new pod from the same template.
    create(&cp.client, &replica("z-web-2", "z-web", &uid)).await;
    let replacement = wait_allocated(&cp.client, "z-web-2", Duration::from_secs(120)).await;
    let placed = wait_allocated(&cp.client, "z-whole", Duration::from_secs(120)).await;
    let took = asked.elapsed();
    assert_eq!(device_of(&replacement), planned, "e2e: the replacement is placed on the device claimed for it");
    assert_eq!(device_of(&placed), freed, "e2e: the whole-GPU pod gets the device the move freed");
    let said = wait_events(
        &cp.client,
        &moved,
        &[("Preempted", &|m: &str| m.contains("default/z-whole"))],
        Duration::from_secs(30),
    )
    .await;
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(60)).await;
    let m = hami.metrics().await.expect("metrics");
    assert_eq!(metric(&m, PLANS, &["outcome=\"placed\""]), 1.0, "{m}");
    assert_eq!(metric(&m, MOVED, &[]), 1.0, "{m}");

    // 2. A second ReplicaSet under a budget that allows no disruption: nothing moves.
    for p in [&stayed, "z-web-2", "z-whole"] {
        pods_api(&cp.client)
            .delete(p, &kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
            .await
            .expect("deleted");
    }
    wait_for("the first round's pods to be gone", Duration::from_secs(30), || async {
        let left = list_pods(&cp.client).await.len();
        if left == 0 { Ok(()) } else { Err(format!("{left} left")) }
    })
    .await;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "z-api", "namespace": NS},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "z-api"}}},
    }))
    .expect("a PodDisruptionBudget");
    Api::<PodDisruptionBudget>::namespaced(cp.client.clone(), NS)
        .create(&PostParams::default(), &pdb)
        .await
        .expect("the budget is created");
    let (_, kept) = fragment(&cp, "z-api").await;
    create(&cp.client, &whole("z-whole-2")).await;
    crate::plugin::filtering_failed(&cp, "z-whole-2").await;
    let still: Vec<&str> = kept.values().map(String::as_str).collect();
    nothing_moves(&cp, &still, "z-whole-2", Duration::from_secs(15)).await;
    let why = crate::plugin::kubectl_hami(&cp, &["why", "z-whole-2", "-n", NS]).await;
    assert!(why.contains("disruption"), "e2e: `kubectl hami why` says a disruption budget blocked it:\n{why}");
    let m = hami.metrics().await.expect("metrics");
    assert!(metric(&m, PLANS, &["outcome=\"blocked\""]) >= 1.0, "{m}");
    assert_eq!(metric(&m, MOVED, &[]), 1.0, "e2e: nothing more moved: {m}");
    let s = check_invariants(&cp.client).await;
    println!(
        "e2e summary z: --defragment=on, 1 node x 2 GPUs each half used by a ReplicaSet pod: {moved} moved ({}), its replacement placed on the planned GPU and z-whole on the freed one {:.1} s after z-whole was created; with a maxUnavailable: 0 budget nothing moved and `why` says so; {}",
        event_summary(&said),
        took.as_secs_f64(),
        s.line()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn z2_a_dry_run_defragmentation_tells_its_plan_and_moves_nothing() {
    let cp = ControlPlane::start("z2").await;
    let nodes = FakeNodes::new("gpu-z2-", 1, 2);
    let (_plugin, hami, _ks) = crate::single(&cp, &nodes, &["--defragment=dry-run"]).await;
    let (_, kept) = fragment(&cp, "z2-web").await;
    create(&cp.client, &whole("z2-whole")).await;
    crate::plugin::filtering_failed(&cp, "z2-whole").await;
    let still: Vec<&str> = kept.values().map(String::as_str).collect();
    nothing_moves(&cp, &still, "z2-whole", Duration::from_secs(15)).await;
    let m = hami.metrics().await.expect("metrics");
    let dry = metric(&m, PLANS, &["outcome=\"dry_run\""]);
    assert!(dry >= 1.0, "e2e: the plan was made and counted: {m}");
    assert_eq!(metric(&m, MOVED, &[]), 0.0, "{m}");
    let status = hami.get("/").await.expect("the console");
    assert!(status.1.contains("dry run"), "e2e: the console tells the plan: {}", status.1);
    let s = check_invariants(&cp.client).await;
    println!("e2e summary z2: --defragment=dry-run: {dry} plans told, nothing moved, z2-whole pending; {}", s.line());
}
