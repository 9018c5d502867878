//! Scenario o: end-to-end scheduling throughput. P pods of one GPU each on N fake GPU nodes (8
//! GPUs each), once through kube-scheduler with hami-rs as its extender (webhook, filter, bind and
//! the fake device plugin's allocation) and once through kube-scheduler's default profile with no
//! extender, each on a fresh control plane; both timed from the first create to the last pod
//! bound (spec.nodeName set, seen on a watch). Not part of the regular run: it is skipped unless
//! `HAMI_E2E_THROUGHPUT` is set. Sizes: `HAMI_E2E_TPUT_NODES` (1000), `HAMI_E2E_TPUT_PODS` (5000);
//! `HAMI_E2E_TPUT_CREATORS` pod creations in flight (32); `HAMI_E2E_TPUT_SCHED_QPS` sets both
//! kube-schedulers' client QPS (burst twice that; kube-scheduler's 50/100 when unset);
//! `HAMI_E2E_TPUT_TIMEOUT` bounds each run's wait for the binds in seconds (300);
//! `HAMI_NODE_SCHEDULER_POLICY` (read by hami-rs itself) picks binpack (the default) or spread;
//! `HAMI_E2E_TPUT_FLAGS` are hami-rs's extra flags, whitespace-separated (`--decision-write=bind`,
//! the chart's, when unset; set it empty for a build without that flag); with
//! `--filter-result=all` among them kube-scheduler calls hami-rs's prioritize verb too.
//!
//! With binpack, the fullest node that fits comes first, so consecutive pods would go to the same
//! node, each bind there waiting for the node lock the previous bind's allocation holds until the
//! device plugin releases it. hami-rs passes over such a node while a free one fits; the binds that
//! still failed on a lock are printed (`lock timeouts`) from hami-rs's metrics.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::cluster::*;
use crate::harness::*;

const GPUS_PER_NODE: usize = 8;
/// Device memory each pod asks for (MiB): four of them fit a 16384 MiB GPU with four slots.
const POD_GPUMEM: &str = "1024";

fn env_num<T: std::str::FromStr>(k: &str, default: T) -> T {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// What one run measured.
struct Run {
    created_s: f64,
    /// From the first create until the last pod was seen bound.
    bound_s: f64,
    /// From the first create until half the pods were bound.
    half_s: f64,
    pods: usize,
}

impl Run {
    fn rate(&self) -> f64 {
        self.pods as f64 / self.bound_s
    }
}

fn tput_pods(prefix: &str, n: usize, scheduler: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            pod(
                &format!("{prefix}-{i:05}"),
                &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", POD_GPUMEM)],
                &[],
                Some(scheduler),
            )
        })
        .collect()
}

/// Watches the test's pods from before the first create; returns once `expected` distinct pods
/// have been seen with a nodeName: the instants of the bind that made half and all of them.
fn watch_binds(client: &kube::Client, expected: usize) -> tokio::task::JoinHandle<(Instant, Instant)> {
    let api = pods_api(client);
    tokio::spawn(async move {
        let cfg = watcher::Config::default().labels("e2e=gpu");
        let mut s = Box::pin(watcher::watcher(api, cfg).default_backoff().applied_objects());
        let mut bound: HashSet<String> = HashSet::new();
        let mut half = None;
        while let Ok(Some(p)) = s.try_next().await {
            if node_name(&p).is_some() && bound.insert(name(&p).to_owned()) {
                if bound.len() * 2 >= expected && half.is_none() {
                    half = Some(Instant::now());
                }
                if bound.len() >= expected {
                    let now = Instant::now();
                    return (half.unwrap_or(now), now);
                }
            }
        }
        panic!("e2e[o]: the pod watch ended with {} of {expected} pods bound", bound.len());
    })
}

/// Creates the pods with `creators` requests in flight and waits for all of them to be bound.
async fn burst_and_time(client: &kube::Client, pods: Vec<Pod>, creators: usize, timeout: Duration) -> Run {
    let n = pods.len();
    let watch = watch_binds(client, n);
    // Let the watch's initial list finish before the clock starts.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = Instant::now();
    futures::stream::iter(pods)
        .map(|p| {
            let client = client.clone();
            async move {
                create(&client, &p).await;
            }
        })
        .buffer_unordered(creators)
        .collect::<Vec<()>>()
        .await;
    let created_s = start.elapsed().as_secs_f64();
    let (half, all) = match tokio::time::timeout(timeout, watch).await {
        Ok(r) => r.unwrap(),
        Err(_) => {
            let pods = list_pods(client).await;
            panic!("e2e[o]: {} of {n} pods bound after {timeout:?}", bound_count(&pods));
        }
    };
    Run { created_s, bound_s: (all - start).as_secs_f64(), half_s: (half - start).as_secs_f64(), pods: n }
}

/// Per node, the bound pods' `nvidia.com/gpu` limits stay within the node's allocatable.
async fn check_gpu_counts(client: &kube::Client) {
    let nodes = Api::<Node>::all(client.clone()).list(&ListParams::default()).await.unwrap().items;
    let alloc: BTreeMap<String, i64> = nodes
        .iter()
        .filter_map(|n| {
            let q = n.status.as_ref()?.allocatable.as_ref()?.get("nvidia.com/gpu")?;
            Some((n.metadata.name.clone()?, q.0.parse().ok()?))
        })
        .collect();
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for p in list_pods_checked(client).await {
        let Some(node) = node_name(&p) else { continue };
        let gpus: i64 = p
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .filter_map(|c| c.resources.as_ref()?.limits.as_ref()?.get("nvidia.com/gpu").map(|q: &Quantity| &q.0))
            .filter_map(|q| q.parse::<i64>().ok())
            .sum();
        *used.entry(node.to_owned()).or_insert(0) += gpus;
    }
    let over: Vec<String> = used
        .iter()
        .filter(|(n, u)| **u > alloc.get(*n).copied().unwrap_or(0))
        .map(|(n, u)| format!("{n}: {u} > {:?}", alloc.get(n)))
        .collect();
    assert!(over.is_empty(), "e2e[o]: nvidia.com/gpu over-committed on {over:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn o_throughput_of_kube_scheduler_with_hami_rs_against_kube_scheduler_alone() {
    if std::env::var_os("HAMI_E2E_THROUGHPUT").is_none() {
        println!("e2e[o]: skipped (set HAMI_E2E_THROUGHPUT=1 to measure throughput)");
        return;
    }
    let n_nodes: usize = env_num("HAMI_E2E_TPUT_NODES", 1000);
    let n_pods: usize = env_num("HAMI_E2E_TPUT_PODS", 5000);
    let creators: usize = env_num("HAMI_E2E_TPUT_CREATORS", 32);
    let qps: Option<u32> = std::env::var("HAMI_E2E_TPUT_SCHED_QPS").ok().and_then(|v| v.parse().ok());
    let timeout = Duration::from_secs(env_num("HAMI_E2E_TPUT_TIMEOUT", 300));
    let nodes = FakeNodes::new("gpu-o-", n_nodes, GPUS_PER_NODE);
    let slots = n_nodes * GPUS_PER_NODE * nodes.split as usize;
    assert!(n_pods <= slots, "e2e[o]: {n_pods} pods do not fit {slots} GPU slots");
    let qps_note = qps.map_or("kube-scheduler's default client QPS".to_owned(), |q| format!("client QPS {q}"));
    // hami-rs reads its node policy from this variable too (binpack unless set).
    let policy = std::env::var("HAMI_NODE_SCHEDULER_POLICY").unwrap_or_else(|_| "binpack".to_owned());
    let qps_note = format!("{qps_note}, hami-rs node policy {policy}");

    // 1. kube-scheduler with hami-rs as its extender.
    let with = {
        let cp = ControlPlane::start("o-hami").await;
        let t = Instant::now();
        let mut plugin = FakePlugin::start(&cp, &nodes).await;
        let setup_s = t.elapsed().as_secs_f64();
        let flags = std::env::var("HAMI_E2E_TPUT_FLAGS").unwrap_or_else(|_| "--decision-write=bind".to_owned());
        let flags: Vec<&str> = flags.split_whitespace().collect();
        let mut hami = Hami::start(&cp, "hami-rs", &flags).await;
        hami.wait_ready(Duration::from_secs(60)).await;
        wait_nodes_registered(&hami, &nodes.names(), nodes.gpus).await;
        cp.apply_webhook(&hami.url()).await;
        // Every fitting node answered: kube-scheduler scores them through hami-rs's prioritize.
        let prioritize = flags.contains(&"--filter-result=all");
        let opts = SchedulerOpts { client_qps: qps, prioritize, ..SchedulerOpts::default() };
        let _ks = KubeScheduler::start(&cp, "kube-scheduler", &hami.url(), opts).await;
        println!("e2e[o]: {n_nodes} nodes set up in {setup_s:.1} s; hami-rs run, {qps_note}");
        let run = burst_and_time(&cp.client, tput_pods("tput", n_pods, SCHEDULER_NAME), creators, timeout).await;
        hami.assert_running();
        plugin.assert_running();
        let t = Instant::now();
        wait_for("every bound pod to be allocated by the plugin", Duration::from_secs(300), || async {
            let pods = list_pods(&cp.client).await;
            let left = pods.iter().filter(|p| annotation(p, BIND_PHASE) != Some("success")).count();
            if left == 0 { Ok(()) } else { Err(format!("{left} pods not allocated")) }
        })
        .await;
        let alloc_s = run.bound_s + t.elapsed().as_secs_f64();
        let s = check_invariants(&cp.client).await;
        assert_eq!(s.bound, n_pods, "every pod bound: {}", s.line());
        check_gpu_counts(&cp.client).await;
        let m = hami.metrics().await.unwrap_or_default();
        let bind_errors = metric(&m, "hami_scheduler_decisions_total", &["request=\"bind\"", "outcome=\"error\""]);
        let api: Vec<String> = ["get", "patch", "create", "list"]
            .iter()
            .map(|v| format!("{v} {}", metric(&m, "hami_scheduler_api_requests_total", &[&format!("verb=\"{v}\"")])))
            .collect();
        println!(
            "e2e[o]: hami-rs API requests: {} ({:.2} per pod)",
            api.join(", "),
            metric(&m, "hami_scheduler_api_requests_total", &[]) / n_pods as f64
        );
        let filters = metric(&m, "hami_scheduler_decisions_total", &["request=\"filter\""]);
        let unwatched = metric(&m, "hami_scheduler_filter_unwatched_pods_total", &[]);
        println!(
            "e2e[o]: filters of a pod hami-rs's watch had not delivered yet: {unwatched} of {filters} ({:.2} %)",
            100.0 * unwatched / filters.max(1.0)
        );
        println!(
            "e2e[o]: binds to another node than the filter's: {} placed, {} no longer fitting ({:.2} % of pods)",
            metric(&m, "hami_scheduler_binds_elsewhere_total", &["outcome=\"placed\""]),
            metric(&m, "hami_scheduler_binds_elsewhere_total", &["outcome=\"no_longer_fits\""]),
            100.0 * metric(&m, "hami_scheduler_binds_elsewhere_total", &["outcome=\"no_longer_fits\""]) / n_pods as f64
        );
        println!(
            "e2e[o]: with hami-rs ({flags:?}): created in {:.1} s, half bound at {:.1} s, all bound at {:.1} s, all allocated by {alloc_s:.1} s; binds failed {bind_errors}, lock timeouts {}, lock waits {}; {}",
            run.created_s,
            run.half_s,
            run.bound_s,
            metric(&m, "hami_scheduler_node_lock_timeouts_total", &[]),
            metric(&m, "hami_scheduler_node_lock_waits_total", &[]),
            s.line()
        );
        run
    };

    // 2. The reference: kube-scheduler's default profile, no extender, no webhook, no plugin.
    let alone = {
        let cp = ControlPlane::start("o-alone").await;
        let _setup = FakePlugin::start_with(&cp, &nodes, "fake-plugin-setup", &["--setup-only"]).await;
        let _ks = KubeScheduler::start_default(&cp, "kube-scheduler-default", qps).await;
        let run = burst_and_time(&cp.client, tput_pods("tput", n_pods, "default-scheduler"), creators, timeout).await;
        let pods = list_pods_checked(&cp.client).await;
        assert_eq!(bound_count(&pods), n_pods, "every pod bound");
        check_gpu_counts(&cp.client).await;
        println!(
            "e2e[o]: kube-scheduler alone: created in {:.1} s, half bound at {:.1} s, all bound at {:.1} s",
            run.created_s, run.half_s, run.bound_s
        );
        run
    };

    let (x, y) = (with.rate(), alone.rate());
    println!(
        "e2e summary o: {n_nodes} nodes, {n_pods} pods: with hami-rs {x:.1} pods/s ({:.1} s), kube-scheduler alone {y:.1} pods/s ({:.1} s), ratio X/Y = {:.2} ({qps_note}; pods created {creators} at a time in {:.1} s and {:.1} s)",
        with.bound_s,
        alone.bound_s,
        x / y,
        with.created_s,
        alone.created_s
    );
}
