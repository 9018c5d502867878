//! Concurrent filter+bind over real HTTP (STYLE.md, "Actors": the allocation invariant under
//! concurrency). A real server on a loopback port serves an in-memory cluster of known capacity;
//! 64 clients filter and bind random pods at once. At the end `/usage` must keep every device
//! within its count, memory and cores (concurrent filters must not pick the same capacity twice,
//! which HAMi can do because it stores a reservation without re-checking capacity), agree with
//! the usage recomputed from the pods' own `hami.io/vgpu-devices-allocated` annotations
//! (`uuid,vendor,mem,cores:` per device, `;` after each container), and show every pod the
//! server placed as committed on that node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpServer, web};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use hami_rs::actor::{Engine, EngineConfig, FilterMode};
use hami_rs::backend::memory::MemoryBackend;
use hami_rs::http::{AppState, Readiness, routes};
use hami_rs::model::annotations as keys;
use hami_rs::model::codec::decode_pod_devices;
use hami_rs::testing::{NodeBuilder, PodBuilder, gpu, node, pod, vendors};

const NODES: usize = 8;
const GPUS_PER_NODE: usize = 4;
const SLOTS: u32 = 4;
const MEM_MIB: u64 = 16384;
const CORES: u32 = 100;
const CLIENTS: u64 = 64;
const ROUNDS: u64 = 4;

fn cluster() -> Vec<NodeBuilder> {
    (0..NODES)
        .map(|n| {
            let name = format!("n{n}");
            (0..GPUS_PER_NODE).fold(node(&name), |b, i| {
                b.gpu(gpu(&format!("GPU-{name}-{i}"), MEM_MIB).count(SLOTS).cores(CORES).index(i as u32))
            })
        })
        .collect()
}

/// A pod with one container: 1–2 GPUs, memory in MiB (1000–12000) or as a percentage, and
/// 0–60 cores (0: no cores limit). Name and uid are random.
fn random_pod(rng: &mut StdRng, seed: u64, client: u64, round: u64) -> PodBuilder {
    let tag: u32 = rng.random();
    let name = format!("s{seed}-c{client}-r{round}-{tag:08x}");
    let mut p = pod().name(&name).uid(&format!("{:016x}-{tag:08x}", rng.random::<u64>())).gpu(rng.random_range(1..=2));
    p = if rng.random_bool(0.7) {
        p.mem_mib(rng.random_range(1000..=12000))
    } else {
        p.mem_pct(rng.random_range(5..=75))
    };
    let cores = rng.random_range(0..=60);
    if cores > 0 {
        p = p.cores(cores);
    }
    p
}

/// What one client saw: pods the server placed (and bound) with their node, and how many pods
/// found no node.
#[derive(Default)]
struct Seen {
    bound: Vec<(String, String)>,
    no_fit: usize,
}

async fn client(base: String, http: reqwest::Client, seed: u64, id: u64, names: Arc<Vec<String>>) -> Seen {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(id));
    let mut seen = Seen::default();
    for round in 0..ROUNDS {
        let p = random_pod(&mut rng, seed, id, round);
        let view = p.view();
        let args = json!({ "Pod": view, "Nodes": null, "NodeNames": names.as_slice() });
        let res: Value = http
            .post(format!("{base}/filter"))
            .json(&args)
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(res["Error"], "", "{res}");
        match res["NodeNames"].as_array() {
            Some(chosen) => {
                // As in HAMi, a successful filter answers exactly one node: the extender picks it.
                assert_eq!(chosen.len(), 1, "{res}");
                assert_eq!(res["FailedNodes"], Value::Null, "{res}");
                let node = chosen[0].as_str().unwrap().to_owned();
                let bind = json!({
                    "PodName": view.metadata.name,
                    "PodNamespace": view.metadata.namespace,
                    "PodUID": view.metadata.uid,
                    "Node": node,
                });
                let b: Value = http
                    .post(format!("{base}/bind"))
                    .json(&bind)
                    .send()
                    .await
                    .unwrap()
                    .error_for_status()
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert_eq!(b, json!({ "Error": "" }), "bind of {} to {node}", view.metadata.name);
                seen.bound.push((view.metadata.name.clone(), node));
            }
            None => {
                // No fit: FailedNodes holds a reason for every candidate node, as HAMi answers.
                let failed = res["FailedNodes"].as_object().unwrap();
                assert_eq!(failed.len(), names.len(), "{res}");
                assert!(failed.values().all(|r| !r.as_str().unwrap().is_empty()), "{res}");
                seen.no_fit += 1;
            }
        }
    }
    seen
}

/// Per-device usage: (slots, MiB, cores).
type Usage = BTreeMap<String, (u64, u64, u64)>;

async fn run_seed(seed: u64, filter_mode: FilterMode) {
    let backend = MemoryBackend::new(Duration::from_secs(300));
    let cfg = EngineConfig { filter_mode, ..EngineConfig::default() };
    let engine = Engine::start(cfg, Arc::new(vendors()), backend.clone(), None);
    let nodes = cluster();
    for n in &nodes {
        let v = n.view();
        backend.insert_node(v.clone());
        engine.register_node(Arc::new(v)).await;
    }
    let names: Arc<Vec<String>> = Arc::new(nodes.iter().map(|n| n.name.clone()).collect());

    let state = web::Data::new(AppState::new(engine, 1 << 20, Readiness::ready()));
    let st = state.clone();
    let server = HttpServer::new(move || App::new().app_data(st.clone()).configure(routes::<MemoryBackend>))
        .workers(4)
        .disable_signals()
        .bind(("127.0.0.1", 0))
        .unwrap();
    let addr = server.addrs()[0];
    let server = server.run();
    let handle = server.handle();
    let running = actix_web::rt::spawn(server);
    let base = format!("http://{addr}");
    let http = reqwest::Client::new();

    let seen: Vec<Seen> = futures::future::join_all(
        (0..CLIENTS).map(|id| actix_web::rt::spawn(client(base.clone(), http.clone(), seed, id, names.clone()))),
    )
    .await
    .into_iter()
    .map(Result::unwrap)
    .collect();

    let usage: Value = http.get(format!("{base}/usage")).send().await.unwrap().json().await.unwrap();
    handle.stop(true).await;
    running.await.unwrap().unwrap();

    let bound: BTreeMap<String, String> = seen.iter().flat_map(|s| s.bound.iter().cloned()).collect();
    let no_fit: usize = seen.iter().map(|s| s.no_fit).sum();
    assert_eq!(bound.len() + no_fit, (CLIENTS * ROUNDS) as usize, "seed {seed}: every pod has one outcome");
    assert!(!bound.is_empty(), "seed {seed}: some pods fit");

    // Every device within its capacity, and the engine's figures kept for the comparison.
    let mut reported = Usage::new();
    let mut device_node: BTreeMap<String, String> = BTreeMap::new();
    let nodes_json = usage["nodes"].as_array().unwrap();
    assert_eq!(nodes_json.len(), NODES);
    for n in nodes_json {
        let devices = n["devices"].as_array().unwrap();
        assert_eq!(devices.len(), GPUS_PER_NODE);
        for d in devices {
            let f = |k: &str| d[k].as_u64().unwrap();
            assert!(f("used") <= f("count"), "seed {seed}: {d}");
            assert!(f("memUsed") <= f("memTotal"), "seed {seed}: {d}");
            assert!(f("coresUsed") <= f("coresTotal"), "seed {seed}: {d}");
            let uuid = d["uuid"].as_str().unwrap().to_owned();
            reported.insert(uuid.clone(), (f("used"), f("memUsed"), f("coresUsed")));
            device_node.insert(uuid, n["name"].as_str().unwrap().to_owned());
        }
    }

    // Every pod the server placed is committed on that node, with annotations naming it; and
    // no other pod holds anything.
    let pods = usage["pods"].as_array().unwrap();
    let listed: BTreeSet<&str> = pods.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(listed, bound.keys().map(String::as_str).collect(), "seed {seed}: /usage pods are the bound pods");
    let mut recomputed: Usage = reported.keys().map(|k| (k.clone(), (0, 0, 0))).collect();
    for p in pods {
        let name = p["name"].as_str().unwrap();
        let node = &bound[name];
        assert_eq!(p["state"], "committed", "seed {seed}: {p}");
        assert_eq!(p["node"], node.as_str(), "seed {seed}: {p}");
        assert_eq!(p["nodeName"], node.as_str(), "seed {seed}: {p}");
        assert_eq!(p["annotations"][keys::ASSIGNED_NODE], node.as_str(), "seed {seed}: {p}");
        assert_eq!(p["annotations"][keys::BIND_PHASE], keys::BIND_PHASE_SUCCESS, "seed {seed}: {p}");
        assert_eq!(p["labels"][keys::ASSIGNED_NODE], node.as_str(), "seed {seed}: {p}");
        let allocated = p["annotations"][keys::NVIDIA_ALLOCATED].as_str().unwrap();
        let containers = decode_pod_devices(allocated).unwrap();
        // One container; the trailing `;` decodes as an empty entry after it.
        assert!(matches!(containers[0].len(), 1..=2), "seed {seed}: {allocated}");
        assert!(containers[1..].iter().all(Vec::is_empty), "seed {seed}: one container: {allocated}");
        for d in containers.iter().flatten() {
            let uuid = d.uuid.as_str();
            assert_eq!(device_node.get(uuid), Some(node), "seed {seed}: {name} holds {uuid} of another node");
            let u = recomputed.get_mut(uuid).unwrap();
            u.0 += 1;
            u.1 += d.usedmem.get();
            u.2 += u64::from(d.usedcores);
        }
    }
    assert_eq!(recomputed, reported, "seed {seed}: usage recomputed from the pods' annotations");
}

#[actix_web::test]
async fn concurrent_filter_and_bind_keep_every_device_within_capacity_and_match_the_annotations() {
    for seed in [1, 7, 2024] {
        run_seed(seed, FilterMode::Snapshot).await;
    }
}

#[actix_web::test]
async fn concurrent_filter_and_bind_through_node_actor_messages_keep_the_same_invariants() {
    // `--filter-mode messages`: the fit runs in each node actor instead of over snapshots.
    for seed in [3, 11] {
        run_seed(seed, FilterMode::Messages).await;
    }
}

/// Pod groups racing over HTTP: `GROUPS` coscheduling groups of `MEMBERS` members, each member a
/// whole node's GPUs, over `NODES` nodes (room for two groups at a time), with the server's four
/// workers answering `CLIENTS` members' filters and binds at once (each member filtered until it
/// binds or its rounds run out) beside clients placing fractional pods. Once it settles: every
/// group is bound whole or not at all, no device is over-committed, and once the groups are
/// deleted no claim is left anywhere.
#[actix_web::test]
async fn racing_pod_groups_are_bound_whole_or_not_at_all_and_leave_no_claim() {
    use hami_rs::model::group::{COSCHEDULING_LABEL, GroupId, GroupKind, GroupSpec, PodGroupObject};
    const GROUPS: usize = 6;
    const MEMBERS: usize = 4;
    let backend = MemoryBackend::new(Duration::from_secs(300));
    let engine = Engine::start(EngineConfig::default(), Arc::new(vendors()), backend.clone(), None);
    let nodes = cluster();
    for n in &nodes {
        let v = n.view();
        backend.insert_node(v.clone());
        engine.register_node(Arc::new(v)).await;
    }
    let names: Arc<Vec<String>> = Arc::new(nodes.iter().map(|n| n.name.clone()).collect());
    let mut members = Vec::new();
    for g in 0..GROUPS {
        let name = format!("job-{g}");
        let id = GroupId { kind: GroupKind::Coscheduling, namespace: "ml".into(), name: name.as_str().into() };
        let spec = GroupSpec { min: MEMBERS as u32, timeout: None, failed: false };
        engine.observe_pod_group(&PodGroupObject { id, spec: Some(spec) });
        for k in 0..MEMBERS {
            let p = pod()
                .name(&format!("{name}-{k}"))
                .namespace("ml")
                .uid(&format!("uid-{name}-{k}"))
                .label(COSCHEDULING_LABEL, &name)
                .gpu(GPUS_PER_NODE as u32)
                .mem_mib(MEM_MIB);
            backend.insert_pod(p.view());
            engine.observe_pod(&p.view());
            members.push((g, p));
        }
    }
    let state = web::Data::new(AppState::new(engine.clone(), 1 << 20, Readiness::ready()));
    let st = state.clone();
    let server = HttpServer::new(move || App::new().app_data(st.clone()).configure(routes::<MemoryBackend>))
        .workers(4)
        .disable_signals()
        .bind(("127.0.0.1", 0))
        .unwrap();
    let addr = server.addrs()[0];
    let server = server.run();
    let handle = server.handle();
    let running = actix_web::rt::spawn(server);
    let base = format!("http://{addr}");
    let http = reqwest::Client::new();
    let member_task = |g: usize, p: PodBuilder| {
        let (base, http, names) = (base.clone(), http.clone(), names.clone());
        actix_web::rt::spawn(async move {
            let view = p.view();
            for _ in 0..6 {
                let args = json!({ "Pod": view, "Nodes": null, "NodeNames": names.as_slice() });
                let res: Value =
                    http.post(format!("{base}/filter")).json(&args).send().await.unwrap().json().await.unwrap();
                if let Some(node) = res["NodeNames"].as_array().and_then(|a| a.first()).and_then(Value::as_str) {
                    let bind = json!({
                        "PodName": view.metadata.name, "PodNamespace": "ml", "PodUID": view.metadata.uid, "Node": node,
                    });
                    let b: Value =
                        http.post(format!("{base}/bind")).json(&bind).send().await.unwrap().json().await.unwrap();
                    if b == json!({ "Error": "" }) {
                        return Some((g, node.to_owned()));
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            None
        })
    };
    let tasks: Vec<_> = members.into_iter().map(|(g, p)| member_task(g, p)).collect();
    let others = futures::future::join_all(
        (0..8).map(|id| actix_web::rt::spawn(client(base.clone(), http.clone(), 99, id, names.clone()))),
    );
    let (bound, _) = futures::join!(futures::future::join_all(tasks), others);
    let mut per_group: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (g, node) in bound.into_iter().filter_map(Result::unwrap) {
        per_group.entry(g).or_default().push(node);
    }
    for (g, nodes) in &per_group {
        assert_eq!(nodes.len(), MEMBERS, "job-{g} is bound whole or not at all: {nodes:?}");
    }
    // The fractional pods take some GPUs; room for at least one whole group remains at first.
    assert!(!per_group.is_empty(), "some group is bound");
    let usage: Value = http.get(format!("{base}/usage")).send().await.unwrap().json().await.unwrap();
    for n in usage["nodes"].as_array().unwrap() {
        for d in n["devices"].as_array().unwrap() {
            let f = |k: &str| d[k].as_u64().unwrap();
            assert!(
                f("used") <= f("count") && f("memUsed") <= f("memTotal") && f("coresUsed") <= f("coresTotal"),
                "{d}"
            );
        }
    }
    for g in 0..GROUPS {
        let id =
            GroupId { kind: GroupKind::Coscheduling, namespace: "ml".into(), name: format!("job-{g}").as_str().into() };
        engine.delete_pod_group(&id);
    }
    let claims: usize = engine.reports().await.iter().map(|r| r.claims.len()).sum();
    assert_eq!(claims, 0, "no claim outlives its group");
    handle.stop(true).await;
    running.await.unwrap().unwrap();
}
