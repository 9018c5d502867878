//! Scenarios x, x2, y and y2: pod groups (gangs) placed all or none at hami-rs's filter.
//!
//! - x: Kubernetes 1.37's native gang (kube-apiserver and kube-scheduler with the feature gate
//!   `GenericWorkload`, `scheduling.k8s.io/v1beta1` served): a PodGroup of `minCount: 4` and four
//!   members of two whole GPUs on two nodes of four GPUs all bind, two per node, each GPU once.
//! - x2: two such groups created together on the same room for one: one binds whole, the other
//!   binds nothing and hami-rs holds nothing for it for 20 s; once the first group's pods are
//!   deleted the second binds whole.
//! - y: Kubernetes 1.34 with only coscheduling's PodGroup CRD (`scheduling.x-k8s.io/v1alpha1`)
//!   and no coscheduling plugin in kube-scheduler, which places the members one by one: two groups
//!   of `minMember: 3` whole-GPU members created together on four GPUs (one by one, each group
//!   would take part of the room): one binds whole, the other nothing; once the first group's pods
//!   are deleted the second binds whole. Then a group half-way placed (one member bound, the two
//!   others held back by a scheduling gate, their room claimed) keeps two plain pods out of its
//!   room, and when one of its waiting members is deleted its claims go back
//!   (`hami_scheduler_pod_group_claims_released_total`) and the plain pods take that room.
//! - y2: a coscheduling group of four whole-GPU members on four GPUs; hami-rs is killed with
//!   SIGKILL after the first member is bound and before the others are (they are held back by a
//!   scheduling gate, their room claimed), started again, and the group completes whole with no
//!   device over-committed.
//!
//! Each prints one `e2e summary <letter>:` line with the time from the group's creation to its
//! members all bound.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::cluster::*;
use crate::harness::*;

/// The label that links a pod to its coscheduling PodGroup.
const COSCHEDULING_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// The scheduling gate that holds a member back from kube-scheduler until the test lifts it.
const GATE: &str = "e2e.hami-rs.io/later";
/// The counter of group members' claims given back unused.
const RELEASED: &str = "hami_scheduler_pod_group_claims_released_total";
/// The counter of group plans by outcome.
const DECISIONS: &str = "hami_scheduler_pod_group_decisions_total";

/// How a member names its group.
#[derive(Clone, Copy)]
enum Link<'a> {
    /// `spec.schedulingGroup.podGroupName` (a `scheduling.k8s.io/v1beta1` PodGroup).
    Native(&'a str),
    /// The label `scheduling.x-k8s.io/pod-group` (a `scheduling.x-k8s.io/v1alpha1` PodGroup).
    Coscheduling(&'a str),
}

/// A pod of `gpus` whole GPUs for the hami-rs-extended kube-scheduler, linked to its group, held
/// back by [`GATE`] when `gated`. As JSON: the pod type the tests are built with predates
/// `spec.schedulingGroup`.
fn member(name: &str, gpus: u32, link: Link<'_>, gated: bool) -> Value {
    let gpus = gpus.to_string();
    let mut p = serde_json::to_value(pod(name, &[("nvidia.com/gpu", &gpus)], &[], Some(SCHEDULER_NAME))).unwrap();
    match link {
        Link::Native(g) => p["spec"]["schedulingGroup"] = json!({"podGroupName": g}),
        Link::Coscheduling(g) => p["metadata"]["labels"][COSCHEDULING_LABEL] = json!(g),
    }
    if gated {
        p["spec"]["schedulingGates"] = json!([{"name": GATE}]);
    }
    p
}

/// Creates the pods, all at once.
pub(crate) async fn create_pods(client: &kube::Client, pods: Vec<Value>) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ApiResource::erase::<Pod>(&()));
    futures::stream::iter(pods)
        .map(|p| {
            let api = api.clone();
            async move {
                let name = p["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                let obj: DynamicObject = serde_json::from_value(p).unwrap();
                let made = api.create(&PostParams::default(), &obj).await;
                made.unwrap_or_else(|e| panic!("e2e: creating pod {name}: {e}"));
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

/// The PodGroups of one kind, in the test namespace.
fn pod_groups(client: &kube::Client, api_version: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap();
    let res = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, "PodGroup"), "podgroups");
    Api::namespaced_with(client.clone(), NS, &res)
}

async fn create_pod_group(client: &kube::Client, api_version: &str, name: &str, spec: Value) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": api_version, "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))
    .unwrap();
    pod_groups(client, api_version)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("e2e: creating {api_version} PodGroup {name}: {e}"));
}

/// A native PodGroup (`scheduling.k8s.io/v1beta1`) of the gang policy with `min` members.
pub(crate) async fn native_group(client: &kube::Client, name: &str, min: u32) {
    create_pod_group(
        client,
        "scheduling.k8s.io/v1beta1",
        name,
        json!({"schedulingPolicy": {"gang": {"minCount": min}}}),
    )
    .await;
}

/// A coscheduling PodGroup (`scheduling.x-k8s.io/v1alpha1`) of `min` members.
async fn coscheduling_group(client: &kube::Client, name: &str, min: u32, timeout_s: Option<u64>) {
    let mut spec = json!({"minMember": min});
    if let Some(t) = timeout_s {
        spec["scheduleTimeoutSeconds"] = json!(t);
    }
    create_pod_group(client, "scheduling.x-k8s.io/v1alpha1", name, spec).await;
}

/// Installs a minimal CRD for coscheduling's PodGroup (`podgroups.scheduling.x-k8s.io`,
/// v1alpha1) and waits until it is established and served.
async fn install_coscheduling_crd(client: &kube::Client) {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
        "spec": {
            "group": "scheduling.x-k8s.io",
            "names": {"kind": "PodGroup", "listKind": "PodGroupList", "plural": "podgroups", "singular": "podgroup", "shortNames": ["pg", "pgs"]},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": open, "status": open}}},
            }],
        },
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.expect("the coscheduling PodGroup CRD is created");
    let groups = pod_groups(client, "scheduling.x-k8s.io/v1alpha1");
    wait_for("the coscheduling PodGroup CRD to be established and served", Duration::from_secs(60), || async {
        let c = crds.get("podgroups.scheduling.x-k8s.io").await.map_err(|e| e.to_string())?;
        let established = c
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"));
        if !established {
            return Err(format!("not established: {:?}", c.status));
        }
        groups.list(&Default::default()).await.map(|_| ()).map_err(|e| format!("listing PodGroups: {e}"))
    })
    .await;
}

/// Lifts [`GATE`] from the pods, all at once (kube-scheduler takes them up from then on).
async fn ungate(client: &kube::Client, names: &[String]) {
    let api = pods_api(client);
    futures::stream::iter(names)
        .map(|n| {
            let api = api.clone();
            async move {
                let body = json!({"spec": {"schedulingGates": null}});
                api.patch(n, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .unwrap_or_else(|e| panic!("e2e: lifting the scheduling gate of {n}: {e}"));
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

/// Deletes the pods at once (grace period 0: there is no kubelet to confirm) and waits until the
/// API server has none of them.
async fn delete_pods(client: &kube::Client, names: &[String]) {
    let api = pods_api(client);
    let dp = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    for n in names {
        api.delete(n, &dp).await.unwrap_or_else(|e| panic!("e2e: deleting pod {n}: {e}"));
    }
    wait_for(&format!("pods {names:?} to be gone from the API server"), Duration::from_secs(30), || async {
        let left: Vec<String> = pods_named(client, names).await.iter().map(|p| name(p).to_owned()).collect();
        if left.is_empty() { Ok(()) } else { Err(format!("still there: {left:?}")) }
    })
    .await;
}

/// The `PodScheduled` condition's message, if the pod has one.
fn scheduled_message(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

/// The test's pods named in `names`, as the API server has them now.
async fn pods_named(client: &kube::Client, names: &[String]) -> Vec<Pod> {
    list_pods(client).await.into_iter().filter(|p| names.iter().any(|n| n == name(p))).collect()
}

/// Whether every pod of `names` exists, is bound and allocated by the plugin; the ones that are
/// not otherwise.
async fn all_bound(client: &kube::Client, names: &[String]) -> Result<Vec<Pod>, String> {
    let pods = pods_named(client, names).await;
    let waiting: Vec<String> = names
        .iter()
        .filter(|n| {
            !pods.iter().any(|p| {
                name(p) == n.as_str() && node_name(p).is_some() && annotation(p, BIND_PHASE) == Some("success")
            })
        })
        .map(|n| {
            let p = pods.iter().find(|p| name(p) == n.as_str());
            let why = p.map(scheduled_message).unwrap_or_else(|| "missing".into());
            format!("{n} ({why:.200})")
        })
        .collect();
    if waiting.is_empty() { Ok(pods) } else { Err(format!("not bound and allocated: {waiting:?}")) }
}

/// Waits until every pod of `names` is bound and allocated by the plugin.
async fn wait_bound(client: &kube::Client, names: &[String], timeout: Duration) -> Vec<Pod> {
    wait_for(&format!("pods {names:?} to be bound and allocated"), timeout, || all_bound(client, names)).await
}

/// The GPU UUIDs a pod was allocated.
fn gpus_of(p: &Pod) -> Vec<String> {
    let v = annotation(p, ALLOCATED).unwrap_or_default();
    parse_pod_devices(v).unwrap_or_default().into_iter().flatten().map(|d| d.uuid).collect()
}

/// Checks that the pods, together, hold each GPU of `nodes` exactly once, and answers how many
/// of them each node has.
fn each_gpu_once(pods: &[Pod], nodes: &FakeNodes) -> BTreeMap<String, usize> {
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    let mut held: Vec<String> = Vec::new();
    for p in pods {
        *per_node.entry(node_name(p).unwrap_or_default().to_owned()).or_default() += 1;
        held.extend(gpus_of(p));
    }
    held.sort();
    let all: Vec<String> =
        nodes.names().iter().flat_map(|n| (0..nodes.gpus).map(move |i| format!("GPU-{n}-{i}"))).collect();
    let mut want = all.clone();
    want.sort();
    let detail: Vec<String> =
        pods.iter().map(|p| format!("{} on {:?}: {:?}", name(p), node_name(p), gpus_of(p))).collect();
    assert_eq!(held, want, "e2e: the pods hold each GPU exactly once: {detail:?}");
    per_node
}

/// The pods of `names` that hami-rs's `/usage` lists (reserved or committed).
async fn in_usage(hami: &Hami, names: &[String]) -> Vec<String> {
    let u = hami.usage().await.unwrap_or_else(|e| panic!("e2e: {} /usage: {e}", hami.name));
    u["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let n = p["name"].as_str()?;
            names.iter().any(|x| x == n).then(|| format!("{n} ({} on {})", p["state"], p["node"]))
        })
        .collect()
}

/// For `hold`, once a second: none of `names` is bound and hami-rs holds nothing for them (no
/// reservation, no allocation). Answers their `PodScheduled` messages at the end.
async fn stays_unplaced(cp: &ControlPlane, hami: &Hami, names: &[String], hold: Duration) -> Vec<String> {
    let until = Instant::now() + hold;
    loop {
        let pods = pods_named(&cp.client, names).await;
        let bound: Vec<String> =
            pods.iter().filter_map(|p| node_name(p).map(|n| format!("{} on {n}", name(p)))).collect();
        assert!(bound.is_empty(), "e2e: pods of the group that has no room were bound: {bound:?}");
        let held = in_usage(hami, names).await;
        assert!(held.is_empty(), "e2e: hami-rs holds devices for the group that has no room: {held:?}");
        if Instant::now() >= until {
            return pods.iter().map(|p| format!("{}: {}", name(p), scheduled_message(p))).collect();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until every pod of one of the two groups is bound; answers (winner, loser) by index.
async fn one_group_bound(client: &kube::Client, groups: [&[String]; 2], timeout: Duration) -> (usize, usize) {
    wait_for("the pods of one of the two groups to be bound and allocated", timeout, || async {
        let a = all_bound(client, groups[0]).await;
        let b = all_bound(client, groups[1]).await;
        match (a, b) {
            (Ok(_), Ok(_)) => Ok((0, 1)),
            (Ok(_), Err(_)) => Ok((0, 1)),
            (Err(_), Ok(_)) => Ok((1, 0)),
            (Err(a), Err(b)) => Err(format!("first group: {a}; second group: {b}")),
        }
    })
    .await
}

/// hami-rs's `/metrics` text.
async fn metrics_of(hami: &Hami) -> String {
    hami.metrics().await.unwrap_or_else(|e| panic!("e2e: {} /metrics: {e}", hami.name))
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// The invariants over the API's pods, and hami-rs's `/usage` agreeing with them (no
/// reservation left).
async fn settled_and_checked(cp: &ControlPlane, hami: &Hami) -> Summary {
    wait_bound_allocated(&cp.client, Duration::from_secs(60)).await;
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(hami, &s, Duration::from_secs(60)).await;
    s
}

// --- x: the native gang -------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn x_gang_a_native_pod_group_of_four_two_gpu_members_binds_whole_two_per_node() {
    let cp = ControlPlane::start_flavor("x", Flavor::NativeGang).await;
    let nodes = FakeNodes::new("gpu-x-", 2, 4);
    let (_plugin, hami, _ks) = crate::single(&cp, &nodes, &[]).await;

    let members = names("x-m", 4);
    let start = Instant::now();
    native_group(&cp.client, "x-group", 4).await;
    create_pods(&cp.client, members.iter().map(|m| member(m, 2, Link::Native("x-group"), false)).collect()).await;
    let pods = wait_bound(&cp.client, &members, Duration::from_secs(120)).await;
    let took = start.elapsed();
    let per_node = each_gpu_once(&pods, &nodes);
    assert!(per_node.values().all(|n| *n == 2), "e2e: two members per node: {per_node:?}");
    let s = settled_and_checked(&cp, &hami).await;
    let m = metrics_of(&hami).await;
    let claimed = metric(&m, DECISIONS, &["outcome=\"claimed\""]);
    assert!(claimed >= 1.0, "e2e: hami-rs planned the group whole at least once: {claimed}");
    println!(
        "e2e summary x: Kubernetes {} native PodGroup (minCount 4) of 4 members x 2 GPUs on 2 nodes x 4 GPUs: all bound {:.1} s after the group was created, per node {per_node:?}, each GPU once; group plans claimed {claimed}, waiting {}, short {}; {}",
        cp.k8s_version,
        took.as_secs_f64(),
        metric(&m, DECISIONS, &["outcome=\"waiting\""]),
        metric(&m, DECISIONS, &["outcome=\"short\""]),
        s.line()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn x2_gang_two_native_pod_groups_with_room_for_one_bind_one_whole_and_then_the_other() {
    let cp = ControlPlane::start_flavor("x2", Flavor::NativeGang).await;
    let nodes = FakeNodes::new("gpu-x2-", 2, 4);
    let (_plugin, hami, _ks) = crate::single(&cp, &nodes, &[]).await;

    let groups = ["x2-a", "x2-b"];
    let members = [names("x2-a", 4), names("x2-b", 4)];
    let start = Instant::now();
    for g in groups {
        native_group(&cp.client, g, 4).await;
    }
    // Interleaved, so that pod by pod each group would get part of the room.
    let pods: Vec<Value> = (0..4)
        .flat_map(|i| groups.iter().zip(&members).map(move |(g, m)| member(&m[i], 2, Link::Native(g), false)))
        .collect();
    create_pods(&cp.client, pods).await;
    let (w, l) = one_group_bound(&cp.client, [&members[0], &members[1]], Duration::from_secs(120)).await;
    let first_s = start.elapsed().as_secs_f64();
    let winners = wait_bound(&cp.client, &members[w], Duration::from_secs(10)).await;
    each_gpu_once(&winners, &nodes);
    let hold = Duration::from_secs(20);
    let why = stays_unplaced(&cp, &hami, &members[l], hold).await;
    println!("e2e[x2]: {} bound whole in {first_s:.1} s; {} none for {hold:?}: {why:?}", groups[w], groups[l]);
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(30)).await;

    let freed = Instant::now();
    delete_pods(&cp.client, &members[w]).await;
    let second = wait_bound(&cp.client, &members[l], Duration::from_secs(120)).await;
    let second_s = freed.elapsed().as_secs_f64();
    let per_node = each_gpu_once(&second, &nodes);
    let s = settled_and_checked(&cp, &hami).await;
    let m = metrics_of(&hami).await;
    println!(
        "e2e summary x2: Kubernetes {} two native PodGroups of 4 x 2 GPUs created together on 2 nodes x 4 GPUs: {} bound whole {first_s:.1} s after the groups were created, {} bound nothing and hami-rs held nothing for it for {} s; after {}'s pods were deleted {} bound whole in {second_s:.1} s ({per_node:?}); group plans claimed {}, short {}, waiting {}; {}",
        cp.k8s_version,
        groups[w],
        groups[l],
        hold.as_secs(),
        groups[w],
        groups[l],
        metric(&m, DECISIONS, &["outcome=\"claimed\""]),
        metric(&m, DECISIONS, &["outcome=\"short\""]),
        metric(&m, DECISIONS, &["outcome=\"waiting\""]),
        s.line()
    );
}

// --- y: coscheduling's PodGroup, kube-scheduler placing members one by one ---------------------------

/// A Kubernetes 1.34 control plane with coscheduling's PodGroup CRD (installed before hami-rs
/// starts, so hami-rs finds the kind served), the fake plugin, hami-rs and kube-scheduler.
async fn coscheduling_cluster(tag: &str, nodes: &FakeNodes) -> (ControlPlane, FakePlugin, Hami, KubeScheduler) {
    let cp = ControlPlane::start(tag).await;
    install_coscheduling_crd(&cp.client).await;
    let (plugin, hami, ks) = crate::single(&cp, nodes, &[]).await;
    (cp, plugin, hami, ks)
}

#[tokio::test(flavor = "multi_thread")]
async fn y_gang_coscheduling_groups_one_by_one_bind_all_or_none_and_a_deleted_member_gives_its_claim_back() {
    let nodes = FakeNodes::new("gpu-y-", 2, 2);
    let (cp, _plugin, hami, _ks) = coscheduling_cluster("y", &nodes).await;

    // 1. Two groups of three whole-GPU members on four GPUs, created together.
    let groups = ["y-a", "y-b"];
    let members = [names("y-a", 3), names("y-b", 3)];
    let start = Instant::now();
    for g in groups {
        coscheduling_group(&cp.client, g, 3, None).await;
    }
    let pods: Vec<Value> = (0..3)
        .flat_map(|i| groups.iter().zip(&members).map(move |(g, m)| member(&m[i], 1, Link::Coscheduling(g), false)))
        .collect();
    create_pods(&cp.client, pods).await;
    let (w, l) = one_group_bound(&cp.client, [&members[0], &members[1]], Duration::from_secs(120)).await;
    let first_s = start.elapsed().as_secs_f64();
    let hold = Duration::from_secs(15);
    let why = stays_unplaced(&cp, &hami, &members[l], hold).await;
    println!("e2e[y]: {} bound whole in {first_s:.1} s; {} none for {hold:?}: {why:?}", groups[w], groups[l]);
    assert!(
        why.iter().any(|m| m.contains(&format!("{}: ", groups[l]))),
        "e2e: the waiting group's pods say why, naming their group: {why:?}"
    );
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(30)).await;

    // 2. The first group's pods deleted: the second binds whole.
    let freed = Instant::now();
    delete_pods(&cp.client, &members[w]).await;
    wait_bound(&cp.client, &members[l], Duration::from_secs(120)).await;
    let second_s = freed.elapsed().as_secs_f64();
    settled_and_checked(&cp, &hami).await;
    delete_pods(&cp.client, &members[l]).await;

    // 3. A group half-way placed: y-c-0 bound, y-c-1 and y-c-2 held back by a gate, their room
    //    claimed. Of two plain pods one finds room and the other none; when y-c-1 is deleted the
    //    group is below its minimum: both claims go back and a third plain pod, then the second,
    //    take that room.
    let before = metrics_of(&hami).await;
    let c = names("y-c", 3);
    let c_start = Instant::now();
    coscheduling_group(&cp.client, "y-c", 3, Some(600)).await;
    create_pods(
        &cp.client,
        c.iter().enumerate().map(|(i, m)| member(m, 1, Link::Coscheduling("y-c"), i > 0)).collect(),
    )
    .await;
    wait_bound(&cp.client, &c[..1], Duration::from_secs(120)).await;
    let c_first_s = c_start.elapsed().as_secs_f64();
    let plain = names("y-plain", 3);
    let plain_pod =
        |n: &str| serde_json::to_value(pod(n, &[("nvidia.com/gpu", "1")], &[], Some(SCHEDULER_NAME))).unwrap();
    create_pods(&cp.client, plain[..2].iter().map(|n| plain_pod(n)).collect()).await;
    let (placed, refused) = wait_for("one plain pod bound, the other refused", Duration::from_secs(60), || async {
        let pods = pods_named(&cp.client, &plain[..2]).await;
        let placed: Vec<String> = pods.iter().filter(|p| node_name(p).is_some()).map(|p| name(p).to_owned()).collect();
        let refused: Vec<&Pod> = pods.iter().filter(|p| node_name(p).is_none() && unschedulable(p)).collect();
        if placed.len() == 1 && refused.len() == 1 {
            Ok((placed[0].clone(), name(refused[0]).to_owned()))
        } else {
            Err(format!("{:?}", pods.iter().map(|p| (name(p), node_name(p), scheduled_message(p))).collect::<Vec<_>>()))
        }
    })
    .await;
    // Stays refused: the group's claims keep it out.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let p = get_pod(&cp.client, &refused).await;
    assert_eq!(
        node_name(&p),
        None,
        "e2e: {refused} was bound into the room claimed for y-c: {}",
        scheduled_message(&p)
    );
    let refused_why = scheduled_message(&p);
    let released_before = metric(&before, RELEASED, &[]);

    let deleted = Instant::now();
    delete_pods(&cp.client, &c[1..2]).await;
    let m = wait_for("y-c's two claims to be given back", Duration::from_secs(30), || async {
        let m = metrics_of(&hami).await;
        let by = |r: &str| {
            metric(&m, RELEASED, &[&format!("reason=\"{r}\"")])
                - metric(&before, RELEASED, &[&format!("reason=\"{r}\"")])
        };
        let (member, below) = (by("member_deleted"), by("below_minimum"));
        if member == 1.0 && below == 1.0 {
            Ok(m)
        } else {
            Err(format!("member_deleted +{member}, below_minimum +{below}"))
        }
    })
    .await;
    let released_s = deleted.elapsed().as_secs_f64();
    create_pods(&cp.client, vec![plain_pod(&plain[2])]).await;
    let all = [c[0].clone(), plain[0].clone(), plain[1].clone(), plain[2].clone()];
    let pods = wait_bound(&cp.client, &all, Duration::from_secs(120)).await;
    let plain_s = deleted.elapsed().as_secs_f64();
    each_gpu_once(&pods, &nodes);
    let s = settled_and_checked(&cp, &hami).await;
    println!(
        "e2e summary y: Kubernetes {} with coscheduling's PodGroup CRD only, two groups of 3 x 1 GPU created together on 2 nodes x 2 GPUs: {} bound whole {first_s:.1} s after creation, {} nothing for {} s (\"{}\"), then whole {second_s:.1} s after {}'s pods were deleted; a group half-way placed (1 of 3 bound in {c_first_s:.1} s, 2 gated with claims) kept {refused} out (\"{refused_why}\") while {placed} took the last free GPU; deleting a gated member gave both claims back in {released_s:.1} s (claims released {} -> {}), and the plain pods took that room {plain_s:.1} s after the deletion; {}",
        cp.k8s_version,
        groups[w],
        groups[l],
        hold.as_secs(),
        why.first().map(String::as_str).unwrap_or_default(),
        groups[w],
        released_before,
        metric(&m, RELEASED, &[]),
        s.line()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn y2_gang_a_coscheduling_group_completes_whole_after_a_sigkill_of_hami_rs_between_its_binds() {
    let nodes = FakeNodes::new("gpu-y2-", 2, 2);
    let (cp, mut plugin, mut hami, _ks) = coscheduling_cluster("y2", &nodes).await;

    // y2-0 is placed first; the other three wait behind their gate with their room claimed.
    let members = names("y2", 4);
    let start = Instant::now();
    coscheduling_group(&cp.client, "y2", 4, None).await;
    create_pods(
        &cp.client,
        members.iter().enumerate().map(|(i, m)| member(m, 1, Link::Coscheduling("y2"), i > 0)).collect(),
    )
    .await;
    let first = wait_bound(&cp.client, &members[..1], Duration::from_secs(120)).await;
    let first_s = start.elapsed().as_secs_f64();
    let m = metrics_of(&hami).await;
    assert!(metric(&m, DECISIONS, &["outcome=\"claimed\""]) >= 1.0, "e2e: the group was planned whole: {m}");
    let others = pods_named(&cp.client, &members[1..]).await;
    assert!(others.iter().all(|p| node_name(p).is_none()), "e2e: only y2-0 is bound before the SIGKILL");

    hami.kill9();
    let killed = Instant::now();
    hami.restart().await;
    hami.wait_ready(Duration::from_secs(60)).await;
    let back_s = killed.elapsed().as_secs_f64();
    // What was bound before the SIGKILL is what the new process counts.
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(60)).await;

    ungate(&cp.client, &members[1..]).await;
    let pods = wait_bound(&cp.client, &members, Duration::from_secs(120)).await;
    let took = start.elapsed().as_secs_f64();
    let rest_s = killed.elapsed().as_secs_f64();
    let per_node = each_gpu_once(&pods, &nodes);
    hami.assert_running();
    plugin.assert_running();
    let s = settled_and_checked(&cp, &hami).await;
    println!(
        "e2e summary y2: Kubernetes {} coscheduling group of 4 x 1 GPU on 2 nodes x 2 GPUs: y2-0 bound on {} {first_s:.1} s after the group was created; hami-rs SIGKILLed with the other three's room claimed and ready again in {back_s:.1} s; the three bound {rest_s:.1} s after the SIGKILL, the group whole {took:.1} s after its creation ({per_node:?}), each GPU once; {}",
        cp.k8s_version,
        node_name(&first[0]).unwrap_or_default(),
        s.line()
    );
}
