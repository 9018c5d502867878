//! End-to-end tests: hami-rs as HAMi's admission webhook and kube-scheduler extender, against a
//! real etcd, kube-apiserver and kube-scheduler, with a fake device plugin standing in for the
//! kubelet side of the protocol. Each test has its own control plane on free loopback ports.
//!
//! Run with `tests/e2e/run.sh` (builds the control-plane binaries once, then runs
//! `cargo test --features e2e --test e2e -- --test-threads=1 --nocapture`). A test that fails
//! prints the tail of every process log and keeps its directory; `HAMI_E2E_KEEP=1` keeps it always.
//! Scenarios a–f, and p (scenario a with the decision written at bind), are here; the fault
//! scenarios g–n (SIGKILLs, an API server outage, expired and raced binds, deleted and malformed
//! nodes, stuck locks, leader failover) are in `faults.rs`, each
//! printing one `e2e summary <letter>:` line with its figures. Scenario o (`throughput.rs`) times
//! kube-scheduler with hami-rs against kube-scheduler alone; it runs only with
//! `HAMI_E2E_THROUGHPUT` set. Scenario q (`writes.rs`) checks the Kubernetes backend's writes for
//! unbound pods against the API server alone. Scenario v (`security.rs`) has a tenant try every
//! door from a network namespace of its own (root and iproute2 needed). Scenario w (`families.rs`)
//! places Hygon HCU and DCU pods side by side and MIG instances in a shape HAMi books past 100 cores.
//! Scenarios x and x2 (`gangs.rs`) place Kubernetes 1.37's native PodGroups all or none (that
//! version's control plane, with its native gang on), y and y2 coscheduling's PodGroups on 1.34
//! with kube-scheduler placing members one by one (y2 across a SIGKILL of hami-rs). Scenarios z and
//! z2 (`defrag.rs`) defragment two GPUs: one ReplicaSet pod moved for a whole-GPU pod, a budget of no
//! disruption blocking it, and a dry run that moves nothing. Scenario x3 (`gang_throughput.rs`, only
//! with `HAMI_E2E_THROUGHPUT`) times native gangs through hami-rs against the native gang alone.

mod cluster;
mod defrag;
mod families;
mod faults;
mod gang_throughput;
mod gangs;
mod harness;
mod plugin;
mod preemption;
mod scoring;
mod security;
mod throughput;
mod writes;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use cluster::*;
use harness::*;

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// API writes (verbs patch and create) by resource.
fn writes(m: &BTreeMap<(String, String), f64>) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for ((verb, resource), v) in m {
        if verb == "patch" || verb == "create" {
            *out.entry(format!("{verb} {resource}")).or_insert(0.0) += v;
        }
    }
    out
}

/// Waits until hami-rs's API request counters have not moved for 2 s (start-up writes such as the
/// first handshake round are over).
async fn quiet_counters(hami: &Hami) -> BTreeMap<(String, String), f64> {
    let mut last = hami.api_requests().await;
    let mut since = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(40);
    while since.elapsed() < Duration::from_secs(2) {
        assert!(Instant::now() < deadline, "e2e: {}'s API request counters kept moving for 40 s", hami.name);
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = hami.api_requests().await;
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
    last
}

/// Starts the fake plugin, one hami-rs (with `extra` flags), the webhook and one kube-scheduler.
async fn single(cp: &ControlPlane, nodes: &FakeNodes, extra: &[&str]) -> (FakePlugin, Hami, KubeScheduler) {
    let plugin = FakePlugin::start(cp, nodes).await;
    let mut hami = Hami::start(cp, "hami-rs", extra).await;
    hami.wait_ready(Duration::from_secs(60)).await;
    wait_nodes_registered(&hami, &nodes.names(), nodes.gpus).await;
    cp.apply_webhook(&hami.url()).await;
    // Every fitting node answered: kube-scheduler scores them through hami-rs's prioritize.
    let opts = SchedulerOpts { prioritize: extra.contains(&"--filter-result=all"), ..SchedulerOpts::default() };
    let ks = KubeScheduler::start(cp, "kube-scheduler", &hami.url(), opts).await;
    (plugin, hami, ks)
}

/// What one GPU pod's way through the webhook, kube-scheduler, hami-rs and the fake plugin left.
struct OneGpuPod {
    node: String,
    events: Vec<k8s_openapi::api::core::v1::Event>,
    /// hami-rs's API writes for the pod, by verb and resource.
    writes: BTreeMap<String, f64>,
}

/// The hami.io annotations the fake plugin read when it allocated `pod`, from its log.
fn plugin_saw(cp: &ControlPlane, pod: &str) -> BTreeMap<String, String> {
    let log = plain_log(&cp.log("fake-plugin"));
    let needle = format!("pod={NS}/{pod} ");
    let line = log
        .lines()
        .find(|l| l.contains(&needle) && l.contains("saw="))
        .unwrap_or_else(|| panic!("e2e: the fake plugin logged no allocation of {pod}:\n{log}"));
    let json = line.split_once("saw=").map(|(_, j)| j.trim()).unwrap_or_default();
    serde_json::from_str(json).unwrap_or_else(|e| panic!("e2e: the plugin's view of {pod} is not JSON ({e}): {line}"))
}

/// A pod of GPU and GPU-less containers: `(name, GPUs)` per init and app container, each GPU
/// with 2000 MiB and 10 cores.
fn containers_pod(name: &str, init: &[(&str, u32)], app: &[(&str, u32)], annotations: &[(&str, &str)]) -> Pod {
    let ctr = |(n, g): &(&str, u32)| {
        let limits = if *g > 0 {
            json!({"nvidia.com/gpu": g.to_string(), "nvidia.com/gpumem": "2000", "nvidia.com/gpucores": "10"})
        } else {
            json!({})
        };
        json!({"name": n, "image": "registry.invalid/e2e:never-pulled", "resources": {"limits": limits}})
    };
    let mut p = pod(name, &[], annotations, None);
    let spec = p.spec.as_mut().unwrap();
    spec.containers = app.iter().map(|c| serde_json::from_value(ctr(c)).unwrap()).collect();
    let init: Vec<_> = init.iter().map(|c| serde_json::from_value(ctr(c)).unwrap()).collect();
    spec.init_containers = (!init.is_empty()).then_some(init);
    p
}

/// The plugin's `allocate` steps for `pod` once it has logged `n` of them (the last is logged
/// after its lock release, so after the pod shows `success`), at most 20 s later.
async fn wait_steps(plugin: &FakePlugin, pod: &str, n: usize) -> Vec<serde_json::Value> {
    wait_for(&format!("the plugin to log {n} Allocate steps of {pod}"), Duration::from_secs(20), || async {
        let steps = plugin.steps(pod);
        if steps.len() >= n { Ok(steps) } else { Err(format!("{steps:?}")) }
    })
    .await
}

/// Waits until neither node holds a node lock.
async fn wait_no_locks(client: &kube::Client, nodes: &FakeNodes) {
    let api: Api<Node> = Api::all(client.clone());
    wait_for("every node lock to be released", Duration::from_secs(30), || async {
        let mut held = Vec::new();
        for n in nodes.names() {
            let node = api.get(&n).await.map_err(|e| e.to_string())?;
            if let Some(v) = node.metadata.annotations.as_ref().and_then(|a| a.get(NODE_LOCK)) {
                held.push(format!("{n}: {v}"));
            }
        }
        if held.is_empty() { Ok(()) } else { Err(held.join(", ")) }
    })
    .await;
}

/// A pod's name, its init and app containers (name, GPUs), and the (container, entry position)
/// of each Allocate it is due.
type Case<'a> = (&'a str, &'a [(&'a str, u32)], &'a [(&'a str, u32)], &'a [(&'a str, usize)]);

/// Pods of several containers, allocated the way kubelet calls HAMi's device plugin: one
/// Allocate per GPU container, init containers first, each taking the first entry of the
/// to-allocate list that still holds devices. Per pod: the containers the entries went to, in
/// order, and the entry positions; checks each step's devices and the value it wrote back (one
/// `;` longer each time), bind-phase `allocating` and the node lock held between steps, `success`
/// after the last and the lock released. Last, a pod whose kubelet sends two device ids for a
/// one-GPU container: its Allocate fails, bind-phase `failed`, the lock is released and the
/// to-allocate value is left as the scheduler wrote it.
async fn containers_allocated(test: &str, cp: &ControlPlane, nodes: &FakeNodes, plugin: &mut FakePlugin) {
    let cases: [Case; 4] = [
        ("two-gpu", &[], &[("c0", 1), ("c1", 1)], &[("c0", 0), ("c1", 1)]),
        ("gpu-then-none", &[], &[("c0", 1), ("c1", 0)], &[("c0", 0)]),
        ("none-then-gpu", &[], &[("c0", 0), ("c1", 1)], &[("c1", 1)]),
        ("init-gpu", &[("init0", 1)], &[("app0", 1)], &[("init0", 0), ("app0", 1)]),
    ];
    for (name, init, app, _) in &cases {
        create(&cp.client, &containers_pod(name, init, app, &[])).await;
    }
    for (name, _, _, want) in &cases {
        let p = wait_allocated(&cp.client, name, Duration::from_secs(90)).await;
        let annos = annotations(&p);
        let alloc = annos[ALLOCATED].clone();
        let steps = wait_steps(plugin, name, want.len()).await;
        let got: Vec<(String, usize)> = steps
            .iter()
            .map(|s| (s["container"].as_str().unwrap_or("").to_owned(), s["index"].as_u64().unwrap_or(99) as usize))
            .collect();
        let want_v: Vec<(String, usize)> = want.iter().map(|(c, i)| ((*c).to_owned(), *i)).collect();
        assert_eq!(got, want_v, "e2e[{test}]: {name}: the containers its entries went to ({alloc:?}): {steps:?}");
        // The value each step writes back: the one before with that entry emptied, one `;` more.
        let mut value = alloc.clone();
        let entries = parse_pod_devices(&alloc).unwrap();
        for (k, s) in steps.iter().enumerate() {
            let (ctr, i) = &want_v[k];
            let devices: Vec<String> = entries[*i].iter().map(|d| d.uuid.clone()).collect();
            assert_eq!(s["devices"], json!(devices), "e2e[{test}]: {name}: {ctr} gets entry {i} of {alloc:?}");
            assert_eq!(s["kubelet"], json!(ctr), "e2e[{test}]: {name}: kubelet's call for {ctr}");
            let mut pieces: Vec<&str> = value.split(';').collect();
            pieces[*i] = "";
            let after: String = pieces.iter().map(|p| format!("{p};")).collect();
            assert_eq!(s["after"], json!(after), "e2e[{test}]: {name}: value after {ctr}'s Allocate");
            value = after.clone();
            if k + 1 < steps.len() {
                assert_eq!(s["phase"], "allocating", "e2e[{test}]: {name}: between calls: {s}");
                let lock = s["lock"].as_str().unwrap_or_default();
                assert!(lock.ends_with(&format!(",{NS},{name}")), "e2e[{test}]: {name}: lock kept between calls: {s}");
                assert_eq!(s["last"], false, "{s}");
            } else {
                assert_eq!(s["phase"], "success", "e2e[{test}]: {name}: after the last call: {s}");
                assert_eq!(s["lock"], "released", "{s}");
                assert_eq!(s["last"], true, "{s}");
                assert_eq!(annos[TO_ALLOCATE], after, "e2e[{test}]: {name}: what the pod keeps");
            }
        }
        assert_eq!(annos[BIND_PHASE], "success");
        println!("e2e[{test}]: {name}: {alloc:?} allocated as {got:?}, leaving {:?}", annos[TO_ALLOCATE]);
    }
    wait_no_locks(&cp.client, nodes).await;

    // kubelet sends 2 device ids for the first of two one-GPU containers.
    let skew = [("loadtest.hami-rs.io/kubelet-device-ids", "2")];
    create(&cp.client, &containers_pod("miscount", &[], &[("c0", 1), ("c1", 1)], &skew)).await;
    let p = wait_for("pod miscount to fail its allocation", Duration::from_secs(90), || async {
        let p = get_pod(&cp.client, "miscount").await;
        match annotation(&p, BIND_PHASE) {
            Some("failed") => Ok(p),
            ph => Err(format!("bind-phase {ph:?}")),
        }
    })
    .await;
    plugin.expect_failures(1);
    let annos = annotations(&p);
    assert_eq!(annos[TO_ALLOCATE], annos[ALLOCATED], "e2e[{test}]: a failed Allocate leaves to-allocate as it was");
    assert!(plugin.steps("miscount").is_empty(), "e2e[{test}]: no step taken: {:?}", plugin.steps("miscount"));
    let f = plugin.failures("miscount");
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0]["why"].as_str().unwrap_or("").starts_with("device number not matched"), "{f:?}");
    assert_eq!(f[0]["value"], json!(annos[ALLOCATED]), "{f:?}");
    wait_no_locks(&cp.client, nodes).await;
    println!("e2e[{test}]: miscount: kubelet sent 2 ids for 1 device: bind-phase failed, lock released, value kept");
}

/// One GPU pod without a schedulerName, created and followed until its device plugin allocated
/// it, with hami-rs started with `extra` flags. Checks what every mode must give: the webhook's
/// mutation, HAMi's exact annotation set and values, what the plugin saw before its Allocate, and
/// the node lock released.
async fn one_gpu_pod(test: &str, extra: &[&str], reasons: &[&str]) -> OneGpuPod {
    let cp = ControlPlane::start(test).await;
    let nodes = FakeNodes::new(&format!("gpu-{test}-"), 2, 2);
    let (mut plugin, hami, _ks) = single(&cp, &nodes, extra).await;
    // Let the first registration round write its handshakes before counting.
    let node_api: Api<Node> = Api::all(cp.client.clone());
    let _ = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let list = node_api.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
            if list
                .iter()
                .filter(|n| n.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(HANDSHAKE)))
                .count()
                >= nodes.nodes
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    let before = quiet_counters(&hami).await;

    let t0 = unix_now();
    let created = create(&cp.client, &pod("gpu-pod", &[("nvidia.com/gpu", "1")], &[], None)).await;
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(spec.scheduler_name.as_deref(), Some(SCHEDULER_NAME), "the webhook sets schedulerName");
    let limits = spec.containers[0].resources.as_ref().and_then(|r| r.limits.clone()).unwrap_or_default();
    assert_eq!(
        limits.get("nvidia.com/gpucores").map(|q| q.0.as_str()),
        Some("100"),
        "exclusive-core default: {limits:?}"
    );
    assert_eq!(limits.get("nvidia.com/gpu").map(|q| q.0.as_str()), Some("1"));

    let p = wait_allocated(&cp.client, "gpu-pod", Duration::from_secs(90)).await;
    let node = node_name(&p).unwrap().to_owned();
    assert!(nodes.names().contains(&node), "bound to a fake node, got {node}");

    let annos = annotations(&p);
    let hami_keys: Vec<&str> = annos.keys().filter(|k| k.starts_with("hami.io/")).map(String::as_str).collect();
    let mut want = vec![ALLOCATED, TO_ALLOCATE, ASSIGNED_NODE, ASSIGNED_TIME, BIND_PHASE, BIND_TIME];
    want.sort();
    assert_eq!(hami_keys, want, "exactly HAMi's pod annotations: {annos:?}");
    assert_eq!(annos[ASSIGNED_NODE], node);
    let vgpu_time: i64 =
        annos[ASSIGNED_TIME].parse().unwrap_or_else(|_| panic!("{ASSIGNED_TIME} is unix seconds: {annos:?}"));
    let bind_time: i64 = annos[BIND_TIME].parse().unwrap_or_else(|_| panic!("{BIND_TIME} is unix seconds: {annos:?}"));
    let t1 = unix_now();
    assert!((t0 - 2..=t1 + 2).contains(&vgpu_time), "vgpu-time {vgpu_time} within [{t0}, {t1}]");
    assert!((vgpu_time..=t1 + 2).contains(&bind_time), "bind-time {bind_time} not before vgpu-time {vgpu_time}");
    let alloc = &annos[ALLOCATED];
    let devs = parse_pod_devices(alloc).unwrap();
    assert_eq!(devs.len(), 2, "one container entry plus the trailing empty one: {alloc:?}");
    assert_eq!(devs[0].len(), 1, "one device: {alloc:?}");
    let d = &devs[0][0];
    assert!(d.uuid.starts_with(&format!("GPU-{node}-")), "device of node {node}: {alloc:?}");
    assert_eq!(alloc, &format!("{},NVIDIA,16384,100:;", d.uuid), "whole 16384 MiB GPU, 100 cores");
    let to_alloc = &annos[TO_ALLOCATE];
    assert!(!to_alloc.is_empty() && to_alloc.chars().all(|c| c == ';'), "the plugin emptied to-allocate: {to_alloc:?}");
    assert_eq!(annos[BIND_PHASE], "success");
    let labels = p.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get(ASSIGNED_NODE), Some(&node), "label hami.io/vgpu-node: {labels:?}");

    wait_for(&format!("the node lock on {node} to be released"), Duration::from_secs(30), || async {
        let n = node_api.get(&node).await.map_err(|e| e.to_string())?;
        match n.metadata.annotations.as_ref().and_then(|a| a.get(NODE_LOCK)) {
            None => Ok(()),
            Some(v) => Err(format!("{NODE_LOCK}: {v}")),
        }
    })
    .await;

    // The device plugin's view at Allocate: the decision, bind-phase allocating and the bind
    // time, to-allocate naming the same devices as allocated.
    let saw = plugin_saw(&cp, "gpu-pod");
    let saw_keys: Vec<&str> = saw.keys().map(String::as_str).collect();
    assert_eq!(saw_keys, want, "what the plugin read: {saw:?}");
    assert_eq!(saw[BIND_PHASE], "allocating");
    assert_eq!(saw[ASSIGNED_NODE], node);
    assert_eq!(&saw[TO_ALLOCATE], alloc, "the plugin is told to allocate what was allocated");
    assert_eq!(&saw[ALLOCATED], alloc);
    assert_eq!(saw[ASSIGNED_TIME], annos[ASSIGNED_TIME]);
    assert_eq!(saw[BIND_TIME], annos[BIND_TIME]);
    let steps = wait_steps(&plugin, "gpu-pod", 1).await;
    let one = json!([{"vendor": "NVIDIA", "kubelet": "main", "index": 0, "container": "main", "devices": [d.uuid],
        "after": to_alloc, "last": true, "phase": "success", "lock": "released"}]);
    assert_eq!(json!(steps), one, "one Allocate, for its one container");

    let any = |_: &str| true;
    let want_events: Vec<WantEvent<'_>> = reasons.iter().map(|r| (*r, &any as &dyn Fn(&str) -> bool)).collect();
    let evs = wait_events(&cp.client, "gpu-pod", &want_events, Duration::from_secs(30)).await;
    assert!(
        !evs.iter().any(|e| matches!(e.reason.as_deref(), Some("BindingFailed" | "FilteringFailed"))),
        "no failure Events: {}",
        event_summary(&evs)
    );
    let after = quiet_counters(&hami).await;
    let (b, a) = (writes(&before), writes(&after));
    let delta: BTreeMap<String, f64> =
        a.iter().map(|(k, v)| (k.clone(), v - b.get(k).copied().unwrap_or(0.0))).filter(|(_, v)| *v > 0.0).collect();
    let total: f64 = delta.values().sum();
    println!("e2e[{test}]: API writes by hami-rs for one GPU pod: {total} ({delta:?})");
    assert_eq!(delta.get("create pods/binding").copied(), Some(1.0), "one Binding: {delta:?}");
    assert_eq!(delta.get("patch nodes").copied(), Some(1.0), "one node lock: {delta:?}");
    containers_allocated(test, &cp, &nodes, &mut plugin).await;
    OneGpuPod { node, events: evs, writes: delta }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gpu_pod_without_scheduler_name_is_mutated_filtered_bound_and_allocated() {
    // HAMi's way: the filter writes the decision, the bind writes bind-phase; HAMi's two Events.
    let r = one_gpu_pod("a", &[], &["Scheduled", "FilteringSucceed", "BindingSucceed"]).await;
    let bind_msg = format!("Successfully binding node [{}] to {NS}/gpu-pod", r.node);
    let filter_prefix = format!("find fit node({}), 0 nodes not fit, 2 nodes fit(", r.node);
    let is_bind = |m: &str| m == bind_msg;
    let is_filter = |m: &str| m.starts_with(&filter_prefix) && m.contains(&format!("{}:", r.node)) && m.ends_with(')');
    for (reason, want) in [("BindingSucceed", &is_bind as &dyn Fn(&str) -> bool), ("FilteringSucceed", &is_filter)] {
        let e = r.events.iter().find(|e| e.reason.as_deref() == Some(reason));
        let e = e.unwrap_or_else(|| panic!("no {reason} Event: {}", event_summary(&r.events)));
        assert!(want(e.message.as_deref().unwrap_or_default()), "{e:?}");
        assert_eq!(e.type_.as_deref(), Some("Normal"), "{e:?}");
        assert_eq!(e.source.as_ref().and_then(|s| s.component.as_deref()), Some(SCHEDULER_NAME), "{e:?}");
    }
    assert_eq!(r.writes.get("patch pods").copied(), Some(2.0), "decision, then bind-phase: {:?}", r.writes);
    assert_eq!(r.writes.values().sum::<f64>(), 6.0, "{:?}", r.writes);
}

#[tokio::test(flavor = "multi_thread")]
async fn p_with_the_decision_written_at_bind_the_plugin_sees_the_same_and_a_pod_costs_four_writes() {
    // The chart's fast path: no write in the filter; the decision goes with bind-phase in one
    // patch before the Binding; kube-scheduler's Scheduled Event stands for BindingSucceed.
    let r = one_gpu_pod("p", &["--decision-write=bind"], &["Scheduled", "FilteringSucceed"]).await;
    let filter_prefix = format!("find fit node({}), 0 nodes not fit, 2 nodes fit(", r.node);
    let reasons: Vec<&str> = r.events.iter().filter_map(|e| e.reason.as_deref()).collect();
    assert!(!reasons.contains(&"BindingSucceed"), "{}", event_summary(&r.events));
    let f = r.events.iter().find(|e| e.reason.as_deref() == Some("FilteringSucceed"));
    let f = f.unwrap_or_else(|| panic!("no FilteringSucceed Event: {}", event_summary(&r.events)));
    assert!(f.message.as_deref().unwrap_or_default().starts_with(&filter_prefix), "{f:?}");
    let scheduled = r.events.iter().find(|e| e.reason.as_deref() == Some("Scheduled")).unwrap();
    assert!(scheduled.message.as_deref().unwrap_or_default().ends_with(&format!(" to {}", r.node)), "{scheduled:?}");
    assert_eq!(r.writes.get("patch pods").copied(), Some(1.0), "one pod patch: {:?}", r.writes);
    let total: f64 = r.writes.values().sum();
    assert!(total <= 4.0, "at most 4 API writes per pod, got {total}: {:?}", r.writes);
    println!("e2e summary p: {total} API writes for one GPU pod with the decision written at bind ({:?})", r.writes);
}

#[tokio::test(flavor = "multi_thread")]
async fn p_with_every_fitting_node_answered_a_pod_costs_the_same_four_writes() {
    // --filter-result=all writes the decision at bind: the same writes as the chart's fast path.
    let r = one_gpu_pod("p2", &["--filter-result=all"], &["Scheduled", "FilteringSucceed"]).await;
    assert_eq!(r.writes.get("patch pods").copied(), Some(1.0), "one pod patch: {:?}", r.writes);
    let total: f64 = r.writes.values().sum();
    assert!(total <= 4.0, "at most 4 API writes per pod, got {total}: {:?}", r.writes);
    println!("e2e summary p2: {total} API writes for one GPU pod with every fitting node answered ({:?})", r.writes);
}

#[tokio::test(flavor = "multi_thread")]
async fn fractional_pods_pack_or_spread_per_policy_and_a_pod_that_cannot_fit_stays_pending_with_reasons() {
    let cp = ControlPlane::start("b").await;
    let nodes = FakeNodes::new("gpu-b-", 3, 2);
    let (_plugin, _hami, _ks) =
        single(&cp, &nodes, &["--node-scheduler-policy", "binpack", "--gpu-scheduler-policy", "binpack"]).await;
    let frac = [("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "4000"), ("nvidia.com/gpucores", "20")];
    let device = |p: &k8s_openapi::api::core::v1::Pod| {
        parse_pod_devices(annotation(p, ALLOCATED).unwrap()).unwrap()[0][0].uuid.clone()
    };

    let mut placed = Vec::new();
    for n in ["binpack-1", "binpack-2"] {
        create(&cp.client, &pod(n, &frac, &[], None)).await;
        let p = wait_allocated(&cp.client, n, Duration::from_secs(90)).await;
        placed.push((node_name(&p).unwrap().to_owned(), device(&p)));
    }
    println!("e2e[b]: binpack pods on {placed:?}");
    assert_eq!(placed[0].0, placed[1].0, "binpack: same node");
    assert_eq!(placed[0].1, placed[1].1, "GPU binpack: same GPU");

    let spread = [("hami.io/node-scheduler-policy", "spread"), ("hami.io/gpu-scheduler-policy", "spread")];
    let mut spread_nodes = Vec::new();
    for n in ["spread-1", "spread-2"] {
        create(&cp.client, &pod(n, &frac, &spread, None)).await;
        let p = wait_allocated(&cp.client, n, Duration::from_secs(90)).await;
        spread_nodes.push(node_name(&p).unwrap().to_owned());
    }
    println!("e2e[b]: spread pods on {spread_nodes:?}");
    assert_ne!(spread_nodes[0], spread_nodes[1], "spread: different nodes");
    assert!(!spread_nodes.contains(&placed[0].0), "spread avoids the busiest node {}", placed[0].0);

    let huge = [("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "20000"), ("nvidia.com/gpucores", "10")];
    create(&cp.client, &pod("too-big", &huge, &[], None)).await;
    let all_nodes = nodes.names().join(",");
    let per_reason = format!("3 nodes CardInsufficientMemory({all_nodes})");
    let ks_reason = |m: &str| m.contains("CardInsufficientMemory") && m.contains("0/3 nodes are available");
    let hami_reason = |m: &str| m == per_reason;
    let hami_summary = |m: &str| m == "no available node, 3 nodes do not meet";
    let evs = wait_events(
        &cp.client,
        "too-big",
        &[("FailedScheduling", &ks_reason), ("FilteringFailed", &hami_reason), ("FilteringFailed", &hami_summary)],
        Duration::from_secs(60),
    )
    .await;
    let failed: Vec<&str> = evs
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
        .filter_map(|e| e.message.as_deref())
        .collect();
    println!("e2e[b]: too-big: {failed:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let p = pods_api(&cp.client).get("too-big").await.unwrap();
    assert_eq!(node_name(&p), None, "the pod that cannot fit stays unbound");
    assert!(unschedulable(&p), "PodScheduled=False/Unschedulable: {:?}", p.status);
    assert_eq!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Pending"));
    check_invariants(&cp.client).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_200_pods_on_20_nodes_binds_all_that_fit_without_over_commit() {
    let cp = ControlPlane::start("c").await;
    let nodes = FakeNodes::new("gpu-c-", 20, 4);
    let (mut plugin, mut hami, _ks) = single(&cp, &nodes, &[]).await;

    let before = writes(&quiet_counters(&hami).await);
    let start = Instant::now();
    create_all(&cp.client, burst("burst", 200, 7)).await;
    let created_s = start.elapsed().as_secs_f64();
    let settled = wait_settled(&cp.client, 200, start, Duration::from_secs(20), Duration::from_secs(600)).await;
    hami.assert_running();
    plugin.assert_running();
    wait_bound_allocated(&cp.client, Duration::from_secs(60)).await;
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(90)).await;
    let reasons = event_reasons(&cp.client).await;
    let after = writes(&hami.api_requests().await);
    let delta: BTreeMap<String, f64> = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect();
    println!(
        "e2e[c]: burst of 200 pods on 20x4 GPUs: {} bound, {} unbound; created in {created_s:.1} s, last bind {:.1} s after the first create; {}; Events {reasons:?}; API writes by hami-rs {delta:?}",
        settled.bound,
        settled.unbound,
        settled.last_bind_s,
        s.line()
    );
    assert!(settled.bound > 0, "some pods bound");
}

/// Polls until some node lock is held by a pod that is not bound yet (a bind between its lock and
/// its Binding), for at most `timeout`; returns that node and lock.
async fn mid_bind(client: &kube::Client, timeout: Duration) -> Option<(String, String)> {
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let list = nodes.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
        let locks: Vec<(String, String)> = list
            .iter()
            .filter_map(|n| Some((n.metadata.name.clone()?, n.metadata.annotations.as_ref()?.get(NODE_LOCK)?.clone())))
            .collect();
        if !locks.is_empty() {
            let pods = list_pods(client).await;
            for (node, lock) in locks {
                let holder = lock.rsplit(',').next().unwrap_or("");
                if pods.iter().any(|p| name(p) == holder && node_name(p).is_none()) {
                    return Some((node, lock));
                }
            }
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_hami_rs_mid_burst_rebuilds_usage_and_keeps_scheduling() {
    let cp = ControlPlane::start("d").await;
    let nodes = FakeNodes::new("gpu-d-", 20, 4);
    let (mut plugin, mut hami, _ks) = single(&cp, &nodes, &[]).await;

    let start = Instant::now();
    create_all(&cp.client, burst("kill", 100, 11)).await;
    wait_for("a third of the pods to be bound", Duration::from_secs(300), || async {
        let n = bound_count(&list_pods(&cp.client).await);
        if n >= 34 { Ok(()) } else { Err(format!("{n} bound")) }
    })
    .await;
    // Kill inside a bind when possible: a node lock taken for a pod that is not bound yet.
    let in_bind = mid_bind(&cp.client, Duration::from_secs(5)).await;
    hami.kill9();
    let killed_at = start.elapsed().as_secs_f64();
    match &in_bind {
        Some((node, lock)) => println!("e2e[d]: SIGKILL while binding: {node} locked ({lock}) for a pod not bound yet"),
        None => println!("e2e[d]: SIGKILL with no bind caught between its node lock and its Binding"),
    }
    // A Binding already sent may still land; count after the process is gone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = bound_count(&list_pods(&cp.client).await);
    hami.restart().await;
    hami.wait_ready(Duration::from_secs(60)).await;
    let settled = wait_settled(&cp.client, 100, start, Duration::from_secs(20), Duration::from_secs(600)).await;
    hami.assert_running();
    plugin.assert_running();
    wait_bound_allocated(&cp.client, Duration::from_secs(60)).await;
    // The killed bind's node lock stays when its pod is bound elsewhere after the restart and no
    // later bind comes to that node, as in scenarios f and g.
    let s = check_invariants_with(&cp.client, Allow { stale_elsewhere: true, ..Allow::default() }).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(90)).await;
    let reasons = event_reasons(&cp.client).await;
    println!(
        "e2e[d]: SIGKILL at {killed_at:.1} s with {before} of 100 bound; after the restart {} more bound ({} unbound), last bind at {:.1} s; {}; Events {reasons:?}",
        settled.bound - before,
        settled.unbound,
        settled.last_bind_s,
        s.line()
    );
    assert!(
        settled.bound > before,
        "scheduling continued after the restart: {before} bound before the SIGKILL, {} in the end",
        settled.bound
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_have_one_leader_and_fail_over_without_double_allocation() {
    let cp = ControlPlane::start("e").await;
    let nodes = FakeNodes::new("gpu-e-", 4, 4);
    let _plugin = FakePlugin::start(&cp, &nodes).await;
    let ids = ["replica-a", "replica-b"];
    let mut pairs = replica_pairs(&cp, &ids).await;
    let leases: Api<Lease> = Api::namespaced(cp.client.clone(), LEASE_NAMESPACE);
    let holder = || async {
        leases.get(LEASE_NAME).await.ok().and_then(|l| l.spec.and_then(|s| s.holder_identity)).unwrap_or_default()
    };

    let leader = wait_for("exactly one hami-rs to be ready", Duration::from_secs(90), || async {
        let codes = (pairs[0].0.readyz().await, pairs[1].0.readyz().await);
        match codes {
            (Some(200), Some(503)) => Ok(0usize),
            (Some(503), Some(200)) => Ok(1usize),
            other => Err(format!("/readyz: {other:?}, lease holder {:?}", holder().await)),
        }
    })
    .await;
    let follower = 1 - leader;
    let h = holder().await;
    assert!(h.starts_with(&format!("{}_", ids[leader])), "Lease holder {h:?} is {}'s kube-scheduler", ids[leader]);
    // Stays so: still one leader a moment later.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(pairs[leader].0.readyz().await, Some(200));
    assert_eq!(pairs[follower].0.readyz().await, Some(503));

    let mut probe = serde_json::to_value(pod(
        "probe",
        &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "1000")],
        &[],
        Some(SCHEDULER_NAME),
    ))
    .unwrap();
    probe["metadata"]["uid"] = json!("00000000-0000-0000-0000-00000000e2e0");
    let t = Instant::now();
    let answer = pairs[follower]
        .0
        .post("/filter", &json!({"Pod": probe, "Nodes": null, "NodeNames": [format!("{}0", nodes.prefix)]}))
        .await
        .unwrap();
    let waited = t.elapsed();
    let err = answer["Error"].as_str().unwrap_or("");
    assert!(!err.is_empty(), "the follower's /filter answers with an error: {answer}");
    assert!(answer["NodeNames"].is_null(), "the follower chooses no node: {answer}");
    println!("e2e[e]: leader {} (lease holder {h}); follower /filter answered in {waited:?}: {err}", ids[leader]);

    wait_nodes_registered(&pairs[leader].0, &nodes.names(), nodes.gpus).await;
    wait_nodes_registered(&pairs[follower].0, &nodes.names(), nodes.gpus).await;
    cp.apply_webhook(&pairs[leader].0.url()).await;
    let frac = [("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "4000"), ("nvidia.com/gpucores", "25")];
    let batch =
        |from: usize| (from..from + 12).map(|i| pod(&format!("lead-{i:02}"), &frac, &[], None)).collect::<Vec<_>>();
    let start = Instant::now();
    create_all(&cp.client, batch(0)).await;
    let first = wait_settled(&cp.client, 12, start, Duration::from_secs(5), Duration::from_secs(180)).await;
    assert_eq!(first.bound, 12, "all of the first batch fit");
    check_invariants(&cp.client).await;

    {
        let (hami, ks) = &mut pairs[leader];
        ks.kill9();
        hami.kill9();
    }
    let killed = Instant::now();
    pairs[follower].0.wait_ready(Duration::from_secs(90)).await;
    let failover = killed.elapsed();
    let h2 = holder().await;
    assert!(h2.starts_with(&format!("{}_", ids[follower])), "Lease now held by {}: {h2:?}", ids[follower]);
    println!("e2e[e]: {} took over {failover:?} after the leader pair was killed (lease holder {h2})", ids[follower]);

    cp.apply_webhook(&pairs[follower].0.url()).await;
    let start = Instant::now();
    create_all(&cp.client, batch(12)).await;
    let second = wait_settled(&cp.client, 24, start, Duration::from_secs(5), Duration::from_secs(180)).await;
    assert_eq!(second.bound, 24, "the second batch is scheduled by the new leader");
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&pairs[follower].0, &s, Duration::from_secs(60)).await;
    println!("e2e[e]: after the switch: {}", s.line());
}

/// `POST /filter` for one pod over `nodes` (as kube-scheduler sends it); the chosen node.
async fn filter_on(hami: &Hami, client: &kube::Client, pod: &str, nodes: &[&str]) -> String {
    let p = pods_api(client).get(pod).await.unwrap();
    let answer = hami.post("/filter", &json!({"Pod": p, "Nodes": null, "NodeNames": nodes})).await.unwrap();
    assert_eq!(answer["Error"], "", "filter {pod}: {answer}");
    answer["NodeNames"][0].as_str().unwrap_or_else(|| panic!("filter {pod} chose no node: {answer}")).to_owned()
}

/// `POST /bind` as kube-scheduler sends it; the answer's `Error` and how long it took.
async fn bind_on(http: reqwest::Client, url: String, pod: Pod, node: String) -> (String, Duration) {
    let t = Instant::now();
    let body = json!({"PodName": name(&pod), "PodNamespace": NS, "PodUID": pod.metadata.uid, "Node": node});
    let r: serde_json::Value = http.post(format!("{url}/bind")).json(&body).send().await.unwrap().json().await.unwrap();
    (r["Error"].as_str().unwrap_or("(no Error field)").to_owned(), t.elapsed())
}

/// The node lock a scheduler killed inside a bind leaves behind: `<now>,<ns>,<pod>`.
async fn leave_lock(client: &kube::Client, node: &str, pod: &str) -> String {
    let value = format!("{},{NS},{pod}", chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ"));
    let body = json!({"metadata": {"annotations": {NODE_LOCK: value}}});
    Api::<Node>::all(client.clone()).patch(node, &PatchParams::default(), &Patch::Merge(&body)).await.unwrap();
    value
}

/// Waits until hami-rs's node cache shows `value` as the node's lock.
async fn wait_lock_seen(hami: &Hami, node: &str, value: &str) {
    wait_for(&format!("{} to see the lock on {node}", hami.name), Duration::from_secs(20), || async {
        let u = hami.usage().await?;
        let seen = u["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|n| n["name"] == node)
            .map(|n| n["annotations"][NODE_LOCK].clone());
        if seen.as_ref().and_then(|v| v.as_str()) == Some(value) { Ok(()) } else { Err(format!("lock seen: {seen:?}")) }
    })
    .await;
}

/// What a SIGKILL inside a bind leaves (scenario d hits it by chance), set up by hand so it is
/// deterministic: the node lock names a pod whose Binding was never created.
#[tokio::test(flavor = "multi_thread")]
async fn f_a_node_lock_left_by_a_killed_bind_neither_blocks_its_owner_nor_outlives_it() {
    let cp = ControlPlane::start("f").await;
    let nodes = FakeNodes::new("gpu-f-", 3, 1);
    let (_plugin, hami, _ks) = single(&cp, &nodes, &[]).await;
    let [n0, n1, n2] = [0, 1, 2].map(|i| format!("{}{i}", nodes.prefix));
    // Pods of another scheduler: kube-scheduler leaves them alone, the test calls the extender.
    let small = [("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "2000"), ("nvidia.com/gpucores", "10")];
    for p in ["owner", "waiter", "moved", "next"] {
        create(&cp.client, &pod(p, &small, &[], Some("e2e-by-hand"))).await;
    }
    let mut problems: Vec<String> = Vec::new();

    // 1. `owner` was filtered onto n0 and its bind took n0's lock; then the scheduler died. After the
    //    restart `waiter` binds to n0 first and waits for the lock; `owner`'s own bind must go
    //    through, since it holds that lock.
    assert_eq!(filter_on(&hami, &cp.client, "owner", &[&n0]).await, n0);
    let lock = leave_lock(&cp.client, &n0, "owner").await;
    wait_lock_seen(&hami, &n0, &lock).await;
    assert_eq!(filter_on(&hami, &cp.client, "waiter", &[&n0]).await, n0);
    let get = |n: &str| {
        let api = pods_api(&cp.client);
        let n = n.to_owned();
        async move { api.get(&n).await.unwrap() }
    };
    let (http, url) = hami.client();
    let waiter = tokio::spawn(bind_on(http.clone(), url.clone(), get("waiter").await, n0.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (owner_err, owner_took) = bind_on(http.clone(), url.clone(), get("owner").await, n0.clone()).await;
    let (waiter_err, waiter_took) = tokio::time::timeout(Duration::from_secs(60), waiter).await.unwrap().unwrap();
    println!(
        "e2e[f]: owner of n0's lock bound in {owner_took:?}: {owner_err:?}; waiter in {waiter_took:?}: {waiter_err:?}"
    );
    if !owner_err.is_empty() {
        problems.push(format!(
            "the pod named by {n0}'s lock could not bind to {n0} while another bind waited for that lock: {owner_err:?} after {owner_took:?}"
        ));
    }
    if !waiter_err.is_empty() {
        problems.push(format!(
            "the bind waiting for {n0}'s lock failed after {waiter_took:?}: {waiter_err:?}; the lock's owner, whose bind \
             would have released it through the plugin, waited {owner_took:?} behind that bind"
        ));
    }

    // 2. `moved` took n2's lock, the scheduler died, and after the restart `moved` went to n1 and was
    //    allocated there. n2's lock now names a pod bound elsewhere whose plugin has answered: it
    //    protects nothing, and must not keep n2 from binding until it expires (5 min).
    assert_eq!(filter_on(&hami, &cp.client, "moved", &[&n1]).await, n1);
    let (moved_err, _) = bind_on(http.clone(), url.clone(), get("moved").await, n1.clone()).await;
    assert_eq!(moved_err, "", "moved binds to n1");
    wait_allocated(&cp.client, "moved", Duration::from_secs(30)).await;
    let stale = leave_lock(&cp.client, &n2, "moved").await;
    wait_lock_seen(&hami, &n2, &stale).await;
    assert_eq!(filter_on(&hami, &cp.client, "next", &[&n2]).await, n2);
    let (next_err, next_took) = bind_on(http, url, get("next").await, n2.clone()).await;
    println!("e2e[f]: bind to {n2} under a lock of a pod allocated on {n1}: {next_err:?} after {next_took:?}");
    if !next_err.is_empty() {
        problems.push(format!(
            "{n2} stays locked ({stale}) by pod moved, which is bound to {n1} with bind-phase success: {next_err:?} after {next_took:?}"
        ));
    }
    assert!(problems.is_empty(), "e2e: node locks left by a killed bind:\n  {}", problems.join("\n  "));
}
