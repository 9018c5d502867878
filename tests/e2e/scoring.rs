//! Scenario r: kube-scheduler's own scoring for device pods with `--filter-result=all` (every
//! fitting node answered, hami-rs's prioritize verb at weight 1): a preferred node affinity wins
//! where the pod fits and binpack's node is taken where it does not; ten pods with a zone spread
//! constraint (ScheduleAnyway) split evenly over two zones. With `one`, the same affinity pod
//! keeps HAMi's choice.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::cluster::*;
use crate::harness::*;

const ZONE: &str = "topology.kubernetes.io/zone";

/// Four nodes of two GPUs, the first two in zone-a and the others in zone-b; hami-rs with binpack
/// and the given result mode; kube-scheduler calling prioritize when `all`.
async fn zoned(tag: &str, all: bool) -> (ControlPlane, FakeNodes, FakePlugin, Hami, KubeScheduler) {
    let cp = ControlPlane::start(tag).await;
    let nodes = FakeNodes::new(&format!("gpu-{tag}-"), 4, 2);
    let plugin = FakePlugin::start(&cp, &nodes).await;
    let mode = if all { "--filter-result=all" } else { "--decision-write=bind" };
    let mut hami = Hami::start(&cp, "hami-rs", &["--node-scheduler-policy", "binpack", mode]).await;
    hami.wait_ready(Duration::from_secs(60)).await;
    wait_nodes_registered(&hami, &nodes.names(), nodes.gpus).await;
    let api: Api<Node> = Api::all(cp.client.clone());
    for (k, n) in nodes.names().iter().enumerate() {
        let zone = if k < 2 { "zone-a" } else { "zone-b" };
        let patch = json!({"metadata": {"labels": {ZONE: zone}}});
        api.patch(n, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap_or_else(|e| panic!("label {n}: {e}"));
    }
    cp.apply_webhook(&hami.url()).await;
    let opts = SchedulerOpts { prioritize: all, ..SchedulerOpts::default() };
    let ks = KubeScheduler::start(&cp, "kube-scheduler", &hami.url(), opts).await;
    (cp, nodes, plugin, hami, ks)
}

fn gpu(mem: &str) -> [(&'static str, String); 2] {
    [("nvidia.com/gpu", "1".to_owned()), ("nvidia.com/gpumem", mem.to_owned())]
}

/// A pod of one GPU with `mem` MiB, with `affinity` and `spread` (raw JSON) set when given.
fn scored_pod(
    name: &str,
    limits: &[(&str, String)],
    affinity: Option<serde_json::Value>,
    labels: &[(&str, &str)],
) -> Pod {
    let limits: Vec<(&str, &str)> = limits.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut p = pod(name, &limits, &[], None);
    let spec = p.spec.as_mut().unwrap();
    if let Some(a) = affinity {
        spec.affinity = Some(serde_json::from_value(a).unwrap());
    }
    let l = p.metadata.labels.get_or_insert_with(BTreeMap::new);
    for (k, v) in labels {
        l.insert((*k).to_owned(), (*v).to_owned());
    }
    p
}

fn prefer(node: &str) -> serde_json::Value {
    json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}}
    ]}})
}

fn require(node: &str) -> serde_json::Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    ]}}})
}

async fn placed(cp: &ControlPlane, p: Pod) -> String {
    let name = p.metadata.name.clone().unwrap_or_default();
    create(&cp.client, &p).await;
    let p = wait_allocated(&cp.client, &name, Duration::from_secs(90)).await;
    node_name(&p).unwrap_or_default().to_owned()
}

/// The seed pod makes its node binpack's choice; then a pod preferring another node. Returns
/// (binpack's node, where the preferring pod went, the node it preferred).
async fn seed_and_prefer(cp: &ControlPlane, nodes: &FakeNodes) -> (String, String, String) {
    let seed = placed(cp, scored_pod("seed", &gpu("4000"), None, &[])).await;
    let other = nodes.names().into_iter().rev().find(|n| *n != seed).unwrap_or_default();
    let went = placed(cp, scored_pod("prefers", &gpu("2000"), Some(prefer(&other)), &[])).await;
    (seed, went, other)
}

#[tokio::test(flavor = "multi_thread")]
async fn r_with_every_fitting_node_answered_a_preferred_node_affinity_wins_where_the_pod_fits() {
    let (cp, nodes, _plugin, hami, _ks) = zoned("r", true).await;

    // Preferred node affinity for a node binpack would not pick: it lands there.
    let (seed, went, other) = seed_and_prefer(&cp, &nodes).await;
    println!("e2e[r]: seed on {seed}; the pod preferring {other} went to {went}");
    assert_eq!(went, other, "the preferred node fits, so kube-scheduler's NodeAffinity score takes it");

    // The preferred node full: binpack's node (the seed's, the fullest that fits) is taken.
    let full = nodes.names().into_iter().find(|n| *n != seed && *n != other).unwrap_or_default();
    for k in 0..2 {
        let big = scored_pod(&format!("fill-{k}"), &gpu("16384"), Some(require(&full)), &[]);
        assert_eq!(placed(&cp, big).await, full);
    }
    let p = scored_pod("prefers-full", &gpu("1000"), Some(prefer(&full)), &[]);
    let went = placed(&cp, p).await;
    println!("e2e[r]: the pod preferring the full node {full} went to {went}");
    assert_eq!(went, seed, "the preferred node does not fit: binpack's node");

    let m = hami.metrics().await.unwrap_or_default();
    let moved = metric(&m, "hami_scheduler_binds_elsewhere_total", &["outcome=\"placed\""]);
    let stale = metric(&m, "hami_scheduler_binds_elsewhere_total", &["outcome=\"no_longer_fits\""]);
    println!(
        "e2e summary r: preferred node affinity honoured with --filter-result=all; binds elsewhere: {moved} placed, {stale} no longer fitting"
    );
    check_invariants(&cp.client).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn r_with_every_fitting_node_answered_ten_pods_spread_evenly_over_two_zones() {
    // On an empty cluster, so kube-scheduler's other scores treat both zones alike.
    let (cp, nodes, _plugin, hami, _ks) = zoned("r2", true).await;
    let spread = json!([{ "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                          "labelSelector": {"matchLabels": {"app": "spread"}} }]);
    let zone_of =
        |n: &str| if nodes.names().iter().position(|x| x == n).unwrap_or(0) < 2 { "zone-a" } else { "zone-b" };
    let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    // Each pod is placed before the next is created, so it is scored against pods already bound
    // (created all at once, the split depended on which binds kube-scheduler still had in flight:
    // 6/4 once on a loaded machine).
    for k in 0..10 {
        let mut p = scored_pod(&format!("spread-{k}"), &gpu("1000"), None, &[("app", "spread")]);
        p.spec.as_mut().unwrap().topology_spread_constraints = Some(serde_json::from_value(spread.clone()).unwrap());
        let node = placed(&cp, p).await;
        *per_zone.entry(zone_of(&node)).or_default() += 1;
        *per_node.entry(node).or_default() += 1;
    }
    let m = hami.metrics().await.unwrap_or_default();
    let moved = metric(&m, "hami_scheduler_binds_elsewhere_total", &["outcome=\"placed\""]);
    println!(
        "e2e summary r2: ten pods with a zone spread constraint: {per_zone:?}, by node {per_node:?}; {moved} bound elsewhere than reserved"
    );
    assert_eq!(per_zone.values().copied().collect::<Vec<_>>(), [5, 5], "{per_zone:?}");
    check_invariants(&cp.client).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn r_with_one_node_answered_the_affinity_pod_keeps_hamis_choice() {
    let (cp, nodes, _plugin, _hami, _ks) = zoned("r1", false).await;
    let (seed, went, other) = seed_and_prefer(&cp, &nodes).await;
    println!("e2e[r1]: seed on {seed}; the pod preferring {other} went to {went}");
    assert_eq!(went, seed, "one node answered: binpack's, whatever the pod prefers");
    check_invariants(&cp.client).await;
}
