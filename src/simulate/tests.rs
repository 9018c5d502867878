use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use clap::Parser;
use serde_json::Value;

use super::*;
use crate::config::{Cli, Command};
use crate::model::annotations as keys;
use crate::model::codec;
use crate::testing::*;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples").join(name)
}

/// `hami-rs simulate --cluster-file examples/cluster.json --pods examples/pods.yaml <extra>`.
fn args(extra: &[&str]) -> SimulateArgs {
    let (cluster, pods) = (example("cluster.json"), example("pods.yaml"));
    let mut v =
        vec!["hami-rs", "simulate", "--cluster-file", cluster.to_str().unwrap(), "--pods", pods.to_str().unwrap()];
    v.extend_from_slice(extra);
    match Cli::try_parse_from(v).unwrap().command {
        Command::Simulate(a) => *a,
        Command::Serve(_) => panic!("expected simulate"),
    }
}

/// The examples, through `memory_engine` and `simulate_pods`.
async fn simulate_examples() -> (Simulation, Vec<crate::model::PodView>) {
    let a = args(&["--arbiters=2"]);
    let cluster = ClusterObjects::load(&a.cluster_file).unwrap();
    let pods = ClusterObjects::load(&a.pods).unwrap().pods;
    let engine = crate::app::memory_engine(&a.sched, cluster).await.unwrap();
    (simulate_pods(&engine, pods.clone()).await.unwrap(), pods)
}

fn key_set(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

fn set<'a>(ks: &[&'a str]) -> BTreeSet<&'a str> {
    ks.iter().copied().collect()
}

fn pod_result<'a>(sim: &'a Simulation, ns: &str, name: &str) -> &'a PodResult {
    sim.pods.iter().find(|p| p.namespace == ns && p.name == name).unwrap()
}

#[actix::test]
async fn the_json_output_has_exactly_the_contract_shape() {
    // report.rs: the simulator's JSON is a contract (pods with their placement and annotations,
    // nodes with per-device usage); no key may be renamed, added or dropped silently.
    let (sim, _) = simulate_examples().await;
    let v = serde_json::to_value(&sim).unwrap();
    assert_eq!(key_set(&v), set(&["pods", "nodes"]));

    let pods = v["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 12);
    for p in pods {
        assert_eq!(
            key_set(p),
            set(&["namespace", "name", "uid", "node", "error", "failedNodes", "annotations"]),
            "{p}"
        );
        assert!(p["namespace"].is_string() && p["name"].is_string() && p["uid"].is_string());
        assert!(p["node"].is_string() != p["error"].is_string(), "either placed or an error: {p}");
        assert!(p["failedNodes"].is_object() && p["annotations"].is_object());
    }

    let nodes = v["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["node-a", "node-b", "node-c", "node-cpu"]);
    let device_keys = set(&[
        "vendor",
        "uuid",
        "type",
        "index",
        "numa",
        "healthy",
        "cordoned",
        "count",
        "used",
        "memTotal",
        "memUsed",
        "coresTotal",
        "coresUsed",
    ]);
    for n in nodes {
        assert_eq!(key_set(n), set(&["name", "devices"]), "no annotations or unusable in the simulator: {n}");
        for d in n["devices"].as_array().unwrap() {
            assert_eq!(key_set(d), device_keys, "{d}");
            assert_eq!(d["vendor"], "NVIDIA");
            assert!(d["healthy"].is_boolean() && d["cordoned"].is_boolean());
            for k in ["index", "numa", "count", "used", "memTotal", "memUsed", "coresTotal", "coresUsed"] {
                assert!(d[k].is_number(), "{k} in {d}");
            }
        }
    }
    assert!(nodes[3]["devices"].as_array().unwrap().is_empty(), "the CPU node has no devices");
    assert_eq!(nodes[1]["devices"][2]["uuid"], "GPU-b0000000-0000-4000-8000-000000000002");
    assert_eq!(nodes[1]["devices"][2]["type"], "NVIDIA-NVIDIA A10");
    assert_eq!(nodes[1]["devices"][2]["numa"], 1);
    assert_eq!(nodes[1]["devices"][2]["memTotal"], 23028);
}

#[actix::test]
async fn every_placed_pod_carries_its_node_and_a_decodable_allocation() {
    // As HAMi writes them: hami.io/vgpu-node equals the chosen node, and the allocated value
    // decodes to devices of that node, one entry per container.
    let (sim, pods) = simulate_examples().await;
    let uuids: HashMap<&str, BTreeSet<&str>> =
        sim.nodes.iter().map(|n| (n.name.as_str(), n.devices.iter().map(|d| d.uuid.as_str()).collect())).collect();
    let placed: Vec<&PodResult> = sim.pods.iter().filter(|p| p.node.is_some()).collect();
    assert!(placed.len() >= 8, "most example pods fit: {:?}", sim.pods);
    for p in placed {
        let node = p.node.as_deref().unwrap();
        assert_eq!(p.annotations.get(keys::ASSIGNED_NODE).map(String::as_str), Some(node), "{}", p.name);
        assert_eq!(p.annotations.get(keys::BIND_PHASE).map(String::as_str), Some(keys::BIND_PHASE_ALLOCATING));
        assert!(p.error.is_none());
        let allocated = &p.annotations[keys::NVIDIA_ALLOCATED];
        assert_eq!(&p.annotations[keys::NVIDIA_TO_ALLOCATE], allocated, "written identical");
        let cs = codec::decode_pod_devices(allocated).unwrap();
        let spec = &pods.iter().find(|v| v.metadata.name == p.name).unwrap().spec;
        // One entry per container (init containers first), then the empty piece after the last `;`.
        assert_eq!(cs.len(), spec.init_containers.len() + spec.containers.len() + 1, "{}: {allocated}", p.name);
        assert!(cs.last().unwrap().is_empty());
        assert!(cs.iter().flatten().count() > 0, "{}: {allocated}", p.name);
        for d in cs.iter().flatten() {
            assert!(uuids[node].contains(d.uuid.as_str()), "{}: {} is not on {node}", p.name, d.uuid);
            assert_eq!(&*d.ty, "NVIDIA");
        }
    }
    assert!(pod_result(&sim, "team-a", "whole-gpu").node.is_some());
}

#[actix::test]
async fn the_pod_that_fits_nowhere_says_why_for_every_gpu_node() {
    // As in HAMi, FailedNodes has one reason per candidate node.
    let (sim, _) = simulate_examples().await;
    let p = pod_result(&sim, "team-b", "too-big");
    assert_eq!(p.node, None);
    assert_eq!(p.error.as_deref(), Some("no node fits"));
    for n in ["node-a", "node-b", "node-c"] {
        let why = &p.failed_nodes[n];
        assert!(why.contains("CardInsufficientMemory"), "{n}: {why}");
        assert!(why.contains("requested 200000 MiB"), "{n}: {why}");
    }
    assert!(p.failed_nodes["node-b"].contains("1/4 CardCordoned"), "{}", p.failed_nodes["node-b"]);
    assert!(p.failed_nodes["node-cpu"].starts_with("node unregistered"));
    assert!(!p.annotations.contains_key(keys::ASSIGNED_NODE), "nothing written for a pod not placed");
    assert!(p.uid.starts_with("sim-team-b-too-big"), "a uid is made up for pods without one");
}

#[actix::test]
async fn no_device_in_the_output_exceeds_its_capacity() {
    // The invariant: every device stays within count, memory and cores.
    let (sim, _) = simulate_examples().await;
    for n in &sim.nodes {
        for d in &n.devices {
            assert!(d.used <= d.count, "{} {}: {} of {} slots", n.name, d.uuid, d.used, d.count);
            assert!(d.mem_used <= d.mem_total, "{} {}: {} of {} MiB", n.name, d.uuid, d.mem_used, d.mem_total);
            assert!(
                d.cores_used <= d.cores_total,
                "{} {}: {} of {} cores",
                n.name,
                d.uuid,
                d.cores_used,
                d.cores_total
            );
        }
    }
}

/// (slots, MiB, cores) on one device.
type Use = (u32, u64, u32);

/// Per device, as HAMi collapses a pod's usage (init containers at their peak, regular
/// containers summed), over the given (allocation, number of init containers).
/// `(allocated annotation, init containers that are not sidecars)`; sidecars come first in the
/// examples, so a native sidecar at position `i` is summed with the app containers.
fn collapsed(pods: &[(String, usize)]) -> HashMap<String, Use> {
    let mut out: HashMap<String, Use> = HashMap::new();
    for (allocated, n_init) in pods {
        // Per UUID: (init peak, regular sum).
        let mut per: HashMap<String, (Use, Use)> = HashMap::new();
        for (i, c) in codec::decode_pod_devices(allocated).unwrap().iter().enumerate() {
            for d in c {
                let (init, app) = per.entry(d.uuid.to_string()).or_default();
                if i < *n_init {
                    *init = (1, init.1.max(d.usedmem.get()), init.2.max(d.usedcores));
                } else {
                    *app = (app.0 + 1, app.1 + d.usedmem.get(), app.2 + d.usedcores);
                }
            }
        }
        for (uuid, (init, app)) in per {
            let o = out.entry(uuid).or_default();
            o.0 += init.0.max(app.0).max(1);
            o.1 += init.1.max(app.1);
            o.2 += init.2.max(app.2);
        }
    }
    out
}

#[actix::test]
async fn device_usage_is_the_running_pods_plus_the_placed_ones() {
    // As HAMi rebuilds usage from pods: the cluster file's running pods count, the Succeeded one
    // (done-0, a whole V100) does not, and each placed pod adds its collapsed usage.
    let (sim, pods) = simulate_examples().await;
    let cluster = ClusterObjects::load(&example("cluster.json")).unwrap();
    let mut allocations: Vec<(String, usize)> = cluster
        .pods
        .iter()
        .filter(|p| !p.is_finished())
        .map(|p| (p.annotation(keys::NVIDIA_ALLOCATED).unwrap().to_owned(), p.spec.init_containers.len()))
        .collect();
    assert_eq!(allocations.len(), 3);
    for p in sim.pods.iter().filter(|p| p.node.is_some()) {
        // Native sidecars add to the app containers, not the init peak (HAMi counts them as
        // ordinary init containers, a peak that is never released because sidecars never finish).
        let spec = &pods.iter().find(|v| v.metadata.name == p.name).unwrap().spec;
        let n_init = spec.init_containers.iter().filter(|c| !c.is_sidecar()).count();
        assert!(spec.init_containers.iter().take(n_init).all(|c| !c.is_sidecar()), "plain init containers first");
        allocations.push((p.annotations[keys::NVIDIA_ALLOCATED].clone(), n_init));
    }
    let want = collapsed(&allocations);
    for d in sim.nodes.iter().flat_map(|n| &n.devices) {
        let got = (d.used, d.mem_used, d.cores_used);
        assert_eq!(got, want.get(&d.uuid).copied().unwrap_or_default(), "{}", d.uuid);
    }
}

#[actix::test]
async fn the_table_mentions_every_pod_and_device() {
    // The human-readable report: each pod with its node or its reason, then each device.
    let (sim, _) = simulate_examples().await;
    let t = render_table(&sim);
    for p in &sim.pods {
        let id = format!("{}/{}", p.namespace, p.name);
        let line = t.lines().find(|l| l.contains(&id)).unwrap_or_else(|| panic!("{id} missing from\n{t}"));
        match &p.node {
            Some(n) => assert!(line.contains(&format!("-> {n}")), "{line}"),
            None => assert!(line.contains(p.error.as_deref().unwrap()), "{line}"),
        }
    }
    let placed = sim.pods.iter().filter(|p| p.node.is_some()).count();
    assert!(t.contains(&format!("{placed} of 12 pods placed")), "{t}");
    assert!(t.contains("requested 200000 MiB"), "reasons are listed under the pod");
    let device_lines = t.lines().filter(|l| l.contains(" #") && l.contains("NVIDIA-")).count();
    assert_eq!(device_lines, sim.nodes.iter().map(|n| n.devices.len()).sum::<usize>());
}

#[actix::test]
async fn run_reads_both_files_and_gives_the_same_answer() {
    // `hami-rs simulate` end to end: the same flags, the same cluster, the same placements.
    let sim = run(&args(&["--arbiters=2"])).await.unwrap();
    let (again, _) = simulate_examples().await;
    let placements = |s: &Simulation| -> Vec<(String, Option<String>)> {
        s.pods.iter().map(|p| (p.name.clone(), p.node.clone())).collect()
    };
    assert_eq!(placements(&sim), placements(&again));
    assert_eq!(sim.nodes, again.nodes);
}

/// A simulation over hand-made nodes and pods with the given scheduler flags.
async fn simulate(flags: &[&str], nodes: &[NodeBuilder], pods: &[PodBuilder]) -> Simulation {
    let mut a = args(flags);
    a.sched.arbiters = 2;
    let cluster = ClusterObjects { nodes: nodes.iter().map(NodeBuilder::view).collect(), ..Default::default() };
    let engine = crate::app::memory_engine(&a.sched, cluster).await.unwrap();
    simulate_pods(&engine, pods.iter().map(PodBuilder::view).collect()).await.unwrap()
}

/// The device UUID each pod got (its first device).
fn device_of(pods: &[PodResult]) -> Vec<String> {
    pods.iter()
        .map(|p| {
            let cs = codec::decode_pod_devices(&p.annotations[keys::NVIDIA_ALLOCATED]).unwrap();
            cs.iter().flatten().next().unwrap().uuid.to_string()
        })
        .collect()
}

fn two_small_pods() -> [PodBuilder; 2] {
    [pod().gpu(1).mem_mib(4096).cores(10).name("p1"), pod().gpu(1).mem_mib(4096).cores(10).name("p2")]
}

#[actix::test]
async fn gpu_binpack_puts_two_pods_on_one_gpu_and_spread_on_two() {
    // The GPU policy orders a node's devices (binpack: fullest first,
    // spread: emptiest first); --gpu-scheduler-policy reaches the engine through memory_engine.
    let nodes = [node("n").gpus(2, 16384)];
    let sim = simulate(&["--gpu-scheduler-policy=binpack"], &nodes, &two_small_pods()).await;
    let d = device_of(&sim.pods);
    assert_eq!(d[0], d[1], "binpack shares one GPU");
    let mut used: Vec<(u32, u64, u32)> =
        sim.nodes[0].devices.iter().map(|d| (d.used, d.mem_used, d.cores_used)).collect();
    used.sort();
    assert_eq!(used, [(0, 0, 0), (2, 8192, 20)]);

    let sim = simulate(&["--gpu-scheduler-policy=spread"], &nodes, &two_small_pods()).await;
    let d = device_of(&sim.pods);
    assert_ne!(d[0], d[1], "spread uses both GPUs");
    let used: Vec<(u32, u64, u32)> = sim.nodes[0].devices.iter().map(|d| (d.used, d.mem_used, d.cores_used)).collect();
    assert_eq!(used, [(1, 4096, 10), (1, 4096, 10)]);

    // The pod annotation overrides the flag, as in HAMi.
    let pods = two_small_pods().map(|p| p.annotation(keys::GPU_SCHEDULER_POLICY, "binpack"));
    let sim = simulate(&["--gpu-scheduler-policy=spread"], &nodes, &pods).await;
    let d = device_of(&sim.pods);
    assert_eq!(d[0], d[1]);
}

#[actix::test]
async fn node_binpack_puts_two_pods_on_one_node_and_spread_on_two() {
    // binpack picks the node with the highest score, spread the lowest; equal scores go to the
    // first node name in hami-rs (HAMi breaks node ties arbitrarily): binpack fills `x`, spread
    // takes `x` then the emptier `y`.
    let nodes = [node("y").gpus(1, 16384), node("x").gpus(1, 16384)];
    let sim = simulate(&["--node-scheduler-policy=binpack"], &nodes, &two_small_pods()).await;
    let placed: Vec<Option<&str>> = sim.pods.iter().map(|p| p.node.as_deref()).collect();
    assert_eq!(placed, [Some("x"), Some("x")]);
    assert_eq!(sim.pods[1].failed_nodes, BTreeMap::new());

    let sim = simulate(&["--node-scheduler-policy=spread"], &nodes, &two_small_pods()).await;
    let placed: Vec<Option<&str>> = sim.pods.iter().map(|p| p.node.as_deref()).collect();
    assert_eq!(placed, [Some("x"), Some("y")]);
    let mem: Vec<(&str, u64)> = sim.nodes.iter().map(|n| (n.name.as_str(), n.devices[0].mem_used)).collect();
    assert_eq!(mem, [("x", 4096), ("y", 4096)]);
}

#[actix::test]
async fn each_placement_counts_for_the_next_pod() {
    // The simulator binds each pod before the next: a third whole-memory pod finds no room.
    let nodes = [node("n").gpus(2, 16384)];
    let pods = [
        pod().gpu(1).mem_mib(16384).name("p1"),
        pod().gpu(1).mem_mib(16384).name("p2"),
        pod().gpu(1).mem_mib(16384).name("p3"),
        pod().name("cpu-only").limit("cpu", "1"),
    ];
    let sim = simulate(&[], &nodes, &pods).await;
    let placed: Vec<Option<&str>> = sim.pods.iter().map(|p| p.node.as_deref()).collect();
    assert_eq!(placed, [Some("n"), Some("n"), None, None]);
    let d = device_of(&sim.pods[..2]);
    assert_ne!(d[0], d[1]);
    let why = &sim.pods[2].failed_nodes["n"];
    assert!(why.starts_with("2/2 CardInsufficientMemory (GPU-n-"), "{why}");
    assert!(why.ends_with(": requested 16384 MiB, free 0 MiB)"), "{why}");
    assert_eq!(sim.pods[3].error.as_deref(), Some("pod requests no devices"));
    assert!(sim.pods[3].annotations.is_empty());
}

/// A preempting simulation: every pod with `--preemption=on`.
async fn simulate_preempting(nodes: &[NodeBuilder], pods: &[PodBuilder]) -> Simulation {
    let mut a = args(&[]);
    a.sched.arbiters = 2;
    let cluster = ClusterObjects { nodes: nodes.iter().map(NodeBuilder::view).collect(), ..Default::default() };
    let engine = crate::app::memory_engine(&a.sched, cluster).await.unwrap();
    let webhook = admission::Config { quota: engine.quota().cloned(), ..admission::Config::default() };
    simulate_pods_with(&engine, &webhook, pods.iter().map(PodBuilder::view).collect(), true).await.unwrap()
}

#[actix::test]
async fn with_preemption_a_pod_that_fits_nowhere_evicts_the_fewest_lowest_priority_pods() {
    let big = |n: &str, p: i32| pod().gpu(1).mem_mib(12000).name(n).priority(p);
    let pods = [
        big("low-a", 1).started("2026-01-01T10:00:00Z"),
        big("low-b", 1).started("2026-01-01T11:00:00Z"),
        big("low-c", 3),
        big("mid", 5),
        big("hi", 10),
        big("polite", 10).preemption_policy("Never"),
        big("peer", 3),
        pod().gpu(1).mem_mib(30000).name("huge").priority(100),
    ];
    let sim = simulate_preempting(&[node("n").gpus(2, 16384), node("m").gpus(1, 16384)], &pods).await;
    let got = |name: &str| sim.pods.iter().find(|p| p.name == name).unwrap();
    // Three devices, three 12 000 MiB pods; `mid` evicts low-b, the later started of the two
    // lowest, and `hi` then the other.
    assert!(["low-a", "low-b", "low-c"].iter().all(|n| got(n).node.is_some()));
    let evicted = |name: &str| {
        got(name)
            .preempted
            .as_ref()
            .map(|p| p.victims.iter().map(|v| (v.name.as_str(), v.priority)).collect::<Vec<_>>())
    };
    assert_eq!(evicted("mid"), Some(vec![("low-b", 1)]));
    assert!(got("mid").node.is_some(), "placed after the eviction");
    assert_eq!(evicted("hi"), Some(vec![("low-a", 1)]));
    assert!(got("hi").node.is_some());
    assert_eq!((got("polite").node.as_deref(), evicted("polite")), (None, None), "preemptionPolicy: Never");
    assert_eq!((got("peer").node.as_deref(), evicted("peer")), (None, None), "equal priority is never evicted");
    assert_eq!((got("huge").node.as_deref(), evicted("huge")), (None, None), "no eviction makes 30 000 MiB fit");
    let held: u64 = sim.nodes.iter().flat_map(|n| &n.devices).map(|d| d.mem_used).sum();
    assert_eq!(held, 3 * 12000, "the evicted pods' devices were freed");
    let table = render_table(&sim);
    assert!(table.contains("preempted on") && table.contains("default/low-b (priority 1)"), "{table}");
}
