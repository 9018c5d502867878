//! Scenario o: end-to-end scheduling throughput. P GPU pods on N fake GPU nodes (8 GPUs each),
//! through kube-scheduler with hami-rs as its extender (webhook, filter, bind and the fake device
//! plugin's allocation), through kube-scheduler with HAMi's own scheduler in hami-rs's place (when
//! `HAMI_E2E_UPSTREAM_BIN` names its binary), and through kube-scheduler's default profile with no
//! extender, each on a fresh control plane; each timed from the first create to the last pod bound
//! (spec.nodeName set, seen on a watch). Not part of the regular run: it is skipped unless
//! `HAMI_E2E_THROUGHPUT` is set.
//!
//! Per run it prints one `e2e summary o:` line: pods/s, the p50 and p99 of each pod's time from
//! its create to its bind, kube-apiserver's requests per pod (`apiserver_request_total`, before
//! the burst and after the last allocation, all clients together: the test's creates and lists,
//! kube-scheduler, the scheduler under test and the fake plugin), the devices over-committed at the
//! end (from the pods' `hami.io/vgpu-devices-allocated` against the nodes' registered devices), and
//! how the pods were packed: GPUs and nodes left idle, GPUs shared (some pod on them, room left)
//! and the memory free on those (the console's "free on shared devices"; with no pod left pending
//! it is all fragmented, in the console's sense), and GPUs full.
//!
//! Settings: `HAMI_E2E_TPUT_NODES` (1000), `HAMI_E2E_TPUT_PODS` (5000); `HAMI_E2E_TPUT_WORKLOAD`
//! `one` (the default: one GPU, 1024 MiB) or `mixed` (whole GPUs, fractional memory, memory
//! percentages and two-GPU pods, as scenario c's burst); `HAMI_E2E_TPUT_RUNS`, a comma-separated
//! subset of `hami-rs,hami,alone` (all three by default, `hami` only with an upstream binary);
//! `HAMI_E2E_TPUT_CREATORS` pod creations in flight (32); `HAMI_E2E_TPUT_SCHED_QPS` sets every
//! kube-scheduler's client QPS (burst twice that; kube-scheduler's 50/100 when unset);
//! `HAMI_E2E_TPUT_PERCENTAGE` sets kube-scheduler's `percentageOfNodesToScore` (its adaptive
//! default when unset); `HAMI_E2E_TPUT_TIMEOUT` bounds each run's wait for the binds in seconds
//! (300); `HAMI_NODE_SCHEDULER_POLICY` and `HAMI_GPU_SCHEDULER_POLICY` (read by hami-rs itself,
//! passed to HAMi as flags) pick binpack or spread (binpack and spread when unset);
//! `HAMI_E2E_TPUT_FLAGS` are hami-rs's extra flags, whitespace-separated (`--decision-write=bind`,
//! the chart's, when unset; set it empty for a build without that flag); with `--filter-result=all`
//! among them kube-scheduler calls hami-rs's prioritize verb too. `HAMI_E2E_UPSTREAM_FLAGS` are
//! HAMi's extra flags (`--kube-qps=200 --kube-burst=400`, hami-rs's own client limits, when unset:
//! at HAMi's default of 5 QPS a run of thousands of pods takes hours).
//!
//! HAMi runs with the test's serving certificate, the admin kubeconfig (so RBAC is not in the
//! way), and a device config of the NVIDIA section alone; kube-scheduler calls it with the same
//! extender settings as hami-rs (those of both charts: filter and bind, `nodeCacheCapable`, 30 s,
//! the managed resources ignored by the scheduler). Its binds that fail, and the fake plugin's
//! failed allocations, are counted, not asserted.
//!
//! With binpack, the fullest node that fits comes first, so consecutive pods would go to the same
//! node, each bind there waiting for the node lock the previous bind's allocation holds until the
//! device plugin releases it. hami-rs passes over such a node while a free one fits; the binds that
//! still failed on a lock are printed (`lock timeouts`) from hami-rs's metrics.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::cluster::*;
use crate::harness::*;

const GPUS_PER_NODE: usize = 8;
/// Device memory each pod of the `one` workload asks for (MiB): four of them fit a 16384 MiB GPU
/// with four slots.
const POD_GPUMEM: &str = "1024";
/// The seed of the `mixed` workload.
const MIXED_SEED: u64 = 42;

/// HAMi's device config for the upstream run: the NVIDIA section only, with the resource names
/// both charts use; the per-device split and scaling come from the nodes' register annotations.
const UPSTREAM_DEVICE_CONFIG: &str = "nvidia:
  resourceCountName: nvidia.com/gpu
  resourceMemoryName: nvidia.com/gpumem
  resourceMemoryPercentageName: nvidia.com/gpumem-percentage
  resourceCoreName: nvidia.com/gpucores
  resourcePriorityName: nvidia.com/priority
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  memoryFactor: 1
  deviceSplitCount: 4
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
";

pub(crate) fn env_num<T: std::str::FromStr>(k: &str, default: T) -> T {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    /// One GPU, 1024 MiB each.
    One,
    /// Scenario c's mix: 1 GPU with 2000–8000 MiB and 10–40 cores (60 %), 1 GPU with 25–50 % of
    /// the memory (15 %), 2 GPUs (15 %), 1 whole GPU (10 %).
    Mixed,
}

impl Workload {
    fn word(self) -> &'static str {
        match self {
            Workload::One => "one-GPU 1024 MiB",
            Workload::Mixed => "mixed",
        }
    }
}

/// Which scheduler a run times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    HamiRs,
    Upstream,
    Alone,
}

impl Who {
    fn word(self) -> &'static str {
        match self {
            Who::HamiRs => "with hami-rs",
            Who::Upstream => "with HAMi",
            Who::Alone => "kube-scheduler alone",
        }
    }
}

/// The scenario's settings, read once from the environment.
struct Tput {
    nodes: FakeNodes,
    pods: usize,
    creators: usize,
    qps: Option<u32>,
    percentage: Option<u32>,
    timeout: Duration,
    node_policy: String,
    gpu_policy: String,
    workload: Workload,
    upstream: Option<PathBuf>,
}

impl Tput {
    fn from_env() -> Tput {
        let n_nodes: usize = env_num("HAMI_E2E_TPUT_NODES", 1000);
        let workload = match std::env::var("HAMI_E2E_TPUT_WORKLOAD").as_deref() {
            Ok("mixed") => Workload::Mixed,
            Ok("one") | Ok("") | Err(_) => Workload::One,
            Ok(w) => panic!("e2e[o]: HAMI_E2E_TPUT_WORKLOAD={w:?}: one or mixed"),
        };
        let env_or = |k: &str, d: &str| std::env::var(k).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| d.to_owned());
        Tput {
            nodes: FakeNodes::new("gpu-o-", n_nodes, GPUS_PER_NODE),
            pods: env_num("HAMI_E2E_TPUT_PODS", 5000),
            creators: env_num("HAMI_E2E_TPUT_CREATORS", 32),
            qps: std::env::var("HAMI_E2E_TPUT_SCHED_QPS").ok().and_then(|v| v.parse().ok()),
            percentage: std::env::var("HAMI_E2E_TPUT_PERCENTAGE").ok().and_then(|v| v.parse().ok()),
            timeout: Duration::from_secs(env_num("HAMI_E2E_TPUT_TIMEOUT", 300)),
            node_policy: env_or("HAMI_NODE_SCHEDULER_POLICY", "binpack"),
            gpu_policy: env_or("HAMI_GPU_SCHEDULER_POLICY", "spread"),
            workload,
            upstream: std::env::var_os("HAMI_E2E_UPSTREAM_BIN").filter(|v| !v.is_empty()).map(PathBuf::from),
        }
    }

    /// The runs asked for, in order.
    fn runs(&self) -> Vec<Who> {
        let asked = std::env::var("HAMI_E2E_TPUT_RUNS").unwrap_or_default();
        if asked.trim().is_empty() {
            let mut v = vec![Who::HamiRs];
            if self.upstream.is_some() {
                v.push(Who::Upstream);
            }
            v.push(Who::Alone);
            return v;
        }
        asked
            .split(',')
            .map(|w| match w.trim() {
                "hami-rs" => Who::HamiRs,
                "hami" | "HAMi" | "upstream" => {
                    assert!(self.upstream.is_some(), "e2e[o]: a HAMi run needs HAMI_E2E_UPSTREAM_BIN");
                    Who::Upstream
                }
                "alone" => Who::Alone,
                w => panic!("e2e[o]: HAMI_E2E_TPUT_RUNS: unknown run {w:?} (hami-rs, hami, alone)"),
            })
            .collect()
    }

    fn sched_opts(&self) -> SchedulerOpts<'static> {
        SchedulerOpts {
            client_qps: self.qps,
            percentage_of_nodes_to_score: self.percentage,
            ..SchedulerOpts::default()
        }
    }

    /// The test's pods, for the scheduler named `scheduler`.
    fn pods(&self, scheduler: &str) -> Vec<Pod> {
        match self.workload {
            Workload::One => (0..self.pods)
                .map(|i| {
                    pod(
                        &format!("tput-{i:05}"),
                        &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", POD_GPUMEM)],
                        &[],
                        Some(scheduler),
                    )
                })
                .collect(),
            Workload::Mixed => {
                let mut pods = burst("tput", self.pods, MIXED_SEED);
                for p in &mut pods {
                    p.spec.as_mut().expect("a pod spec").scheduler_name = Some(scheduler.to_owned());
                }
                pods
            }
        }
    }

    /// How the run was set up, for its lines.
    fn note(&self) -> String {
        let qps = self.qps.map_or("kube-scheduler's default client QPS".to_owned(), |q| format!("client QPS {q}"));
        let pct = self.percentage.map_or("adaptive".to_owned(), |p| format!("{p}"));
        format!(
            "{} pods; node policy {}, GPU policy {}; percentageOfNodesToScore {pct}; {qps}",
            self.workload.word(),
            self.node_policy,
            self.gpu_policy
        )
    }
}

/// What one run measured.
struct Run {
    created_s: f64,
    /// From the first create until the last pod was seen bound (the time box when not all were).
    bound_s: f64,
    /// From the first create until half the pods were bound.
    half_s: Option<f64>,
    pods: usize,
    bound: usize,
    /// Each bound pod's time from the start of its create to its first sighting with a nodeName,
    /// sorted.
    latencies: Vec<f64>,
}

impl Run {
    fn rate(&self) -> f64 {
        self.bound as f64 / self.bound_s
    }
    fn complete(&self) -> bool {
        self.bound == self.pods
    }
    fn quantile(&self, q: f64) -> f64 {
        quantile(&self.latencies, q)
    }
}

/// The `q` quantile of sorted figures (NaN for none).
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Pod name → the instant it was first seen bound.
pub(crate) type Seen = Arc<Mutex<HashMap<String, Instant>>>;

/// Watches the test's pods from before the first create, recording when each is first seen with
/// a nodeName; ends once `expected` pods have been.
pub(crate) fn watch_binds(client: &kube::Client, expected: usize, seen: Seen) -> tokio::task::JoinHandle<()> {
    let api = pods_api(client);
    tokio::spawn(async move {
        let cfg = watcher::Config::default().labels("e2e=gpu");
        let mut s = Box::pin(watcher::watcher(api, cfg).default_backoff().applied_objects());
        while let Ok(Some(p)) = s.try_next().await {
            if node_name(&p).is_some() {
                let mut m = seen.lock().unwrap();
                m.entry(name(&p).to_owned()).or_insert_with(Instant::now);
                if m.len() >= expected {
                    return;
                }
            }
        }
        panic!("e2e[o]: the pod watch ended with {} of {expected} pods bound", seen.lock().unwrap().len());
    })
}

/// Creates the pods with `creators` requests in flight and waits, at most `timeout`, for all of
/// them to be bound.
async fn burst_and_time(client: &kube::Client, pods: Vec<Pod>, creators: usize, timeout: Duration) -> Run {
    let n = pods.len();
    let seen: Seen = Arc::default();
    let watch = watch_binds(client, n, seen.clone());
    // Let the watch's initial list finish before the clock starts.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let start = Instant::now();
    futures::stream::iter(pods)
        .map(|p| {
            let (client, started) = (client.clone(), started.clone());
            async move {
                started.lock().unwrap().insert(name(&p).to_owned(), Instant::now());
                create(&client, &p).await;
            }
        })
        .buffer_unordered(creators)
        .collect::<Vec<()>>()
        .await;
    let created_s = start.elapsed().as_secs_f64();
    let left = timeout.saturating_sub(start.elapsed());
    let done = tokio::time::timeout(left, watch).await;
    if let Ok(r) = done {
        r.unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    let started = started.lock().unwrap();
    let mut times: Vec<Instant> = seen.values().copied().collect();
    times.sort();
    let mut latencies: Vec<f64> =
        seen.iter().filter_map(|(p, at)| Some(at.saturating_duration_since(*started.get(p)?).as_secs_f64())).collect();
    latencies.sort_by(f64::total_cmp);
    let bound = seen.len();
    let bound_s = if bound == n { (times[n - 1] - start).as_secs_f64() } else { timeout.as_secs_f64() };
    let half_s = (bound * 2 >= n && n > 0).then(|| (times[n.div_ceil(2) - 1] - start).as_secs_f64());
    Run { created_s, bound_s, half_s, pods: n, bound, latencies }
}

/// Per node, the bound pods' `nvidia.com/gpu` limits against the node's allocatable: the nodes
/// over it.
async fn gpu_count_excess(client: &kube::Client) -> Vec<String> {
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
    used.iter()
        .filter(|(n, u)| **u > alloc.get(*n).copied().unwrap_or(0))
        .map(|(n, u)| format!("{n}: {u} > {:?}", alloc.get(n)))
        .collect()
}

/// The devices at the end of a run, from the pods' allocated annotations and the nodes'
/// registered devices only.
#[derive(Debug, Default)]
struct Devices {
    gpus: usize,
    /// No pod on them.
    idle: usize,
    /// Nodes with every GPU idle.
    idle_nodes: usize,
    /// Some pod on them, a slot, memory and cores left (the console's "shared").
    shared: usize,
    /// Memory free on the shared GPUs (MiB).
    shared_free_mib: u64,
    /// Every slot, all memory or all cores taken.
    full: usize,
    mem_used_mib: u64,
    mem_total_mib: u64,
    /// Devices with more slots, memory or cores booked than registered, described.
    over: Vec<String>,
    /// Device entries naming a device that is not registered on the pod's node.
    misplaced: usize,
    /// Bound pods whose `hami.io/vgpu-node` is not their nodeName.
    wrong_node: usize,
}

impl Devices {
    fn line(&self) -> String {
        format!(
            "{} devices over-committed, {} pods bound to another node than their devices'; packing: {} of {} GPUs idle ({} nodes all idle), {} shared with {} MiB free on them, {} full; {:.1} % of GPU memory booked",
            self.over.len(),
            self.wrong_node,
            self.idle,
            self.gpus,
            self.idle_nodes,
            self.shared,
            self.shared_free_mib,
            self.full,
            100.0 * self.mem_used_mib as f64 / self.mem_total_mib.max(1) as f64
        )
    }
}

async fn devices(client: &kube::Client) -> Devices {
    let nodes = Api::<Node>::all(client.clone()).list(&ListParams::default()).await.unwrap().items;
    let mut caps: BTreeMap<String, DeviceCap> = BTreeMap::new();
    for n in &nodes {
        caps.extend(registered_devices(n));
    }
    let mut used: BTreeMap<String, Used> = BTreeMap::new();
    let mut d = Devices::default();
    for p in list_pods_checked(client).await {
        let Some(node) = node_name(&p) else { continue };
        if annotation(&p, ASSIGNED_NODE).is_some_and(|n| n != node) {
            d.wrong_node += 1;
        }
        let Some(v) = annotation(&p, ALLOCATED) else { continue };
        for dev in parse_pod_devices(v).unwrap_or_default().iter().flatten() {
            if caps.get(&dev.uuid).is_none_or(|c| c.node != node) {
                d.misplaced += 1;
            }
            let u = used.entry(dev.uuid.clone()).or_default();
            u.slots += 1;
            u.mem += dev.mem;
            u.cores += u64::from(dev.cores);
        }
    }
    let mut busy_nodes: HashSet<&str> = HashSet::new();
    for (uuid, c) in &caps {
        let u = used.get(uuid).copied().unwrap_or_default();
        d.gpus += 1;
        d.mem_total_mib += c.mem;
        d.mem_used_mib += u.mem;
        if u.slots > c.count || u.mem > c.mem || u.cores > c.cores {
            d.over.push(format!(
                "{uuid} on {}: {} slots / {} MiB / {} cores of {} / {} / {}",
                c.node, u.slots, u.mem, u.cores, c.count, c.mem, c.cores
            ));
        }
        if u.slots == 0 {
            d.idle += 1;
        } else {
            busy_nodes.insert(c.node.as_str());
            if u.slots >= c.count || u.mem >= c.mem || u.cores >= c.cores {
                d.full += 1;
            } else {
                d.shared += 1;
                d.shared_free_mib += c.mem - u.mem;
            }
        }
    }
    let all_nodes: HashSet<&str> = caps.values().map(|c| c.node.as_str()).collect();
    d.idle_nodes = all_nodes.len() - busy_nodes.len();
    d
}

/// kube-apiserver's `apiserver_request_total`, summed by `VERB resource[/subresource]`, read with
/// the admin kubeconfig's token.
async fn apiserver_requests(cp: &ControlPlane) -> BTreeMap<String, f64> {
    let kc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(cp.kubeconfig("admin")).unwrap()).expect("the admin kubeconfig");
    let server = kc["clusters"][0]["cluster"]["server"].as_str().expect("a server").to_owned();
    let token = kc["users"][0]["user"]["token"].as_str().expect("a token").to_owned();
    let ca = reqwest::Certificate::from_pem(&std::fs::read(cp.ca()).unwrap()).unwrap();
    let http = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(ca)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let text = http
        .get(format!("{server}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("e2e[o]: kube-apiserver /metrics: {e}"));
    let text = text.text().await.unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let Some((labels, value)) = line.rsplit_once(' ') else { continue };
        let labels = labels.trim_start_matches("apiserver_request_total{").trim_end_matches('}');
        let get = |k: &str| {
            labels
                .split("\",")
                .filter_map(|kv| kv.split_once('='))
                .find(|(key, _)| key.trim() == k)
                .map(|(_, v)| v.trim_matches('"').to_owned())
                .unwrap_or_default()
        };
        let (resource, sub) = (get("resource"), get("subresource"));
        let key = if sub.is_empty() {
            format!("{} {resource}", get("verb"))
        } else {
            format!("{} {resource}/{sub}", get("verb"))
        };
        *out.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    out
}

/// The requests between two readings, per pod: the total and the kinds of at least 0.05 per pod,
/// most first.
fn per_pod(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, pods: usize) -> (f64, String) {
    let mut delta: Vec<(String, f64)> = after
        .iter()
        .map(|(k, v)| (k.clone(), (v - before.get(k).copied().unwrap_or(0.0)) / pods.max(1) as f64))
        .filter(|(_, v)| *v > 0.0)
        .collect();
    let total = delta.iter().map(|(_, v)| v).sum();
    delta.sort_by(|a, b| b.1.total_cmp(&a.1));
    let kinds: Vec<String> = delta.iter().filter(|(_, v)| *v >= 0.05).map(|(k, v)| format!("{k} {v:.2}")).collect();
    (total, kinds.join(", "))
}

/// HAMi's own scheduler (webhook and extender) on the test's control plane.
struct Upstream {
    proc: Proc,
    port: u16,
}

impl Upstream {
    /// Starts the binary with the test's serving certificate, the admin kubeconfig, a device
    /// config of the NVIDIA section alone, the policies and `extra` flags, and waits for its
    /// `/healthz`.
    async fn start(cp: &ControlPlane, bin: &Path, t: &Tput, extra: &[&str]) -> Upstream {
        assert!(bin.is_file(), "e2e[o]: HAMI_E2E_UPSTREAM_BIN {} is not a file", bin.display());
        let (port, metrics_port) = (free_port(), free_port());
        let pki = cp.dir.join("pki");
        let config = cp.dir.join("hami-device-config.yaml");
        std::fs::write(&config, UPSTREAM_DEVICE_CONFIG).unwrap();
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--http_bind=127.0.0.1:{port}"))
            .arg(format!("--cert_file={}", pki.join("hami.crt").display()))
            .arg(format!("--key_file={}", pki.join("hami.key").display()))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .arg(format!("--scheduler-name={SCHEDULER_NAME}"))
            .arg(format!("--node-scheduler-policy={}", t.node_policy))
            .arg(format!("--gpu-scheduler-policy={}", t.gpu_policy))
            .arg(format!("--device-config-file={}", config.display()))
            .args(extra)
            .env("KUBECONFIG", cp.kubeconfig("admin"))
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE");
        let mut proc = Proc::spawn("hami-upstream", cmd, cp.log("hami-upstream")).tracked(&cp.pids());
        let ca = reqwest::Certificate::from_pem(&std::fs::read(cp.ca()).unwrap()).unwrap();
        let http = reqwest::Client::builder()
            .use_rustls_tls()
            .add_root_certificate(ca)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            proc.assert_running();
            let r = http.get(format!("https://127.0.0.1:{port}/healthz")).send().await;
            if r.is_ok_and(|r| r.status().is_success()) {
                return Upstream { proc, port };
            }
            assert!(
                Instant::now() < deadline,
                "e2e[o]: HAMi did not answer /healthz within 60 s:\n{}",
                tail(&proc.log, 40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Waits until HAMi has logged every node in `names` as registered ("Node device added").
    async fn wait_registered(&mut self, names: &[String], timeout: Duration) {
        let want: HashSet<&str> = names.iter().map(String::as_str).collect();
        let deadline = Instant::now() + timeout;
        loop {
            self.proc.assert_running();
            let log = plain_log(&self.proc.log);
            let have: HashSet<&str> = log
                .lines()
                .filter(|l| l.contains("\"Node device added\""))
                .filter_map(|l| l.split_once("nodeName=\"")?.1.split('"').next())
                .filter(|n| want.contains(n))
                .collect();
            if have.len() == want.len() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "e2e[o]: HAMi registered {} of {} nodes within {timeout:?}:\n{}",
                have.len(),
                want.len(),
                tail(&self.proc.log, 40)
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Log lines of HAMi's that contain `what`.
    fn count(&self, what: &str) -> usize {
        plain_log(&self.proc.log).lines().filter(|l| l.contains(what)).count()
    }
}

/// What a run printed, for the closing line.
struct Outcome {
    who: Who,
    run: Run,
    /// What hami-rs broke (over-commits, invariants): the test fails with these once every run
    /// has been measured.
    violations: Vec<String>,
}

/// [`check_invariants`], with its panic caught and returned as the message, so that the runs
/// after this one are still measured.
async fn invariants(client: &kube::Client) -> Result<Summary, String> {
    let c = client.clone();
    tokio::spawn(async move { check_invariants(&c).await }).await.map_err(|e| match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "(a panic without a message)".to_owned()),
        Err(e) => e.to_string(),
    })
}

/// Waits until every bound pod is allocated by the fake plugin, for at most `timeout` and for at
/// most 60 s without progress: the seconds waited, or how many bound pods it had not allocated by
/// then. On two shared cores the binds of a thousand nodes can outlast kube-scheduler's 30 s
/// extender timeout and be retried, and some pods bound that way are never served by the fake
/// plugin; that is reported with the run, not asserted.
async fn wait_all_allocated(client: &kube::Client, timeout: Duration) -> Result<f64, usize> {
    let t = Instant::now();
    let (mut last, mut since) = (usize::MAX, Instant::now());
    loop {
        let pods = list_pods(client).await;
        let left =
            pods.iter().filter(|p| node_name(p).is_some() && annotation(p, BIND_PHASE) != Some("success")).count();
        if left == 0 {
            return Ok(t.elapsed().as_secs_f64());
        }
        if left != last {
            (last, since) = (left, Instant::now());
        }
        if t.elapsed() >= timeout || since.elapsed() >= Duration::from_secs(60) {
            return Err(left);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// "all allocated by N s" or what the plugin had left.
fn allocated_note(bound_s: f64, waited: Result<f64, usize>, timeout: Duration) -> String {
    match waited {
        Ok(w) => format!("all allocated by {:.1} s", bound_s + w),
        Err(left) => format!(
            "{left} bound pods NOT allocated by the fake plugin (waited up to {timeout:?}, stopped after 60 s without progress)"
        ),
    }
}

/// The run's `e2e summary o:` line.
fn summary(t: &Tput, who: Who, run: &Run, api: f64, devices: Option<&Devices>) {
    let bound = if run.complete() {
        format!("{:.1} pods/s ({:.1} s)", run.rate(), run.bound_s)
    } else {
        format!(
            "INCOMPLETE: {} of {} pods bound in {:.0} s ({:.1} pods/s)",
            run.bound,
            run.pods,
            run.bound_s,
            run.rate()
        )
    };
    println!(
        "e2e summary o: {}: {} nodes, {} {}: {bound}; create to bound p50 {:.2} s, p99 {:.2} s; {api:.2} API requests per pod; {}",
        who.word(),
        t.nodes.nodes,
        t.pods,
        t.note(),
        run.quantile(0.5),
        run.quantile(0.99),
        devices
            .map_or_else(|| "no device annotations (nvidia.com/gpu counted per node only)".to_owned(), Devices::line),
    );
}

async fn run_hami_rs(t: &Tput) -> (Run, Vec<String>) {
    let cp = ControlPlane::start("o-hami").await;
    let tm = Instant::now();
    let mut plugin = FakePlugin::start(&cp, &t.nodes).await;
    let setup_s = tm.elapsed().as_secs_f64();
    let flags = std::env::var("HAMI_E2E_TPUT_FLAGS").unwrap_or_else(|_| "--decision-write=bind".to_owned());
    let flags: Vec<&str> = flags.split_whitespace().collect();
    let mut hami = Hami::start(&cp, "hami-rs", &flags).await;
    hami.wait_ready(Duration::from_secs(60)).await;
    wait_nodes_registered(&hami, &t.nodes.names(), t.nodes.gpus).await;
    cp.apply_webhook(&hami.url()).await;
    // Every fitting node answered: kube-scheduler scores them through hami-rs's prioritize.
    let prioritize = flags.contains(&"--filter-result=all");
    let opts = SchedulerOpts { prioritize, ..t.sched_opts() };
    let _ks = KubeScheduler::start(&cp, "kube-scheduler", &hami.url(), opts).await;
    println!("e2e[o]: {} nodes set up in {setup_s:.1} s; hami-rs run, {}", t.nodes.nodes, t.note());
    let before = apiserver_requests(&cp).await;
    let run = burst_and_time(&cp.client, t.pods(SCHEDULER_NAME), t.creators, t.timeout).await;
    assert!(run.complete(), "e2e[o]: with hami-rs {} of {} pods bound within {:?}", run.bound, run.pods, t.timeout);
    hami.assert_running();
    plugin.assert_running();
    let allocated = allocated_note(run.bound_s, wait_all_allocated(&cp.client, t.timeout).await, t.timeout);
    let after = apiserver_requests(&cp).await;
    let mut violations = Vec::new();
    let line = match invariants(&cp.client).await {
        Ok(s) => s.line(),
        Err(e) => {
            violations.push(e);
            "INVARIANTS VIOLATED (above)".to_owned()
        }
    };
    let excess = gpu_count_excess(&cp.client).await;
    if !excess.is_empty() {
        violations.push(format!("nvidia.com/gpu over-committed on {excess:?}"));
    }
    let d = devices(&cp.client).await;
    if !d.over.is_empty() {
        violations.push(format!("devices over-committed: {:?}", d.over));
    }
    let m = hami.metrics().await.unwrap_or_default();
    let bind_errors = metric(&m, "hami_scheduler_decisions_total", &["request=\"bind\"", "outcome=\"error\""]);
    let api: Vec<String> = ["get", "patch", "create", "list"]
        .iter()
        .map(|v| format!("{v} {}", metric(&m, "hami_scheduler_api_requests_total", &[&format!("verb=\"{v}\"")])))
        .collect();
    println!(
        "e2e[o]: hami-rs API requests: {} ({:.2} per pod)",
        api.join(", "),
        metric(&m, "hami_scheduler_api_requests_total", &[]) / t.pods as f64
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
        100.0 * metric(&m, "hami_scheduler_binds_elsewhere_total", &["outcome=\"no_longer_fits\""]) / t.pods as f64
    );
    let (per, kinds) = per_pod(&before, &after, t.pods);
    println!("e2e[o]: with hami-rs: kube-apiserver requests per pod {per:.2}: {kinds}");
    println!(
        "e2e[o]: with hami-rs ({flags:?}): created in {:.1} s, half bound at {:.1} s, all bound at {:.1} s, {allocated}; binds failed {bind_errors}, lock timeouts {}, lock waits {}; {}",
        run.created_s,
        run.half_s.unwrap_or(f64::NAN),
        run.bound_s,
        metric(&m, "hami_scheduler_node_lock_timeouts_total", &[]),
        metric(&m, "hami_scheduler_node_lock_waits_total", &[]),
        line
    );
    summary(t, Who::HamiRs, &run, per, Some(&d));
    (run, violations)
}

async fn run_upstream(t: &Tput, bin: &Path) -> Run {
    let cp = ControlPlane::start("o-upstream").await;
    let tm = Instant::now();
    let mut plugin = FakePlugin::start(&cp, &t.nodes).await;
    let setup_s = tm.elapsed().as_secs_f64();
    let flags =
        std::env::var("HAMI_E2E_UPSTREAM_FLAGS").unwrap_or_else(|_| "--kube-qps=200 --kube-burst=400".to_owned());
    let flags: Vec<&str> = flags.split_whitespace().collect();
    let tm = Instant::now();
    let mut hami = Upstream::start(&cp, bin, t, &flags).await;
    // HAMi registers nodes in rounds (on a node event and every 15 s), patching each node's
    // handshake annotations through its client's rate limit.
    hami.wait_registered(&t.nodes.names(), Duration::from_secs(600)).await;
    let reg_s = tm.elapsed().as_secs_f64();
    cp.apply_webhook(&hami.url()).await;
    let _ks = KubeScheduler::start(&cp, "kube-scheduler", &hami.url(), t.sched_opts()).await;
    println!(
        "e2e[o]: {} nodes set up in {setup_s:.1} s, registered by HAMi {reg_s:.1} s after its start; HAMi run ({flags:?}), {}",
        t.nodes.nodes,
        t.note()
    );
    let before = apiserver_requests(&cp).await;
    let run = burst_and_time(&cp.client, t.pods(SCHEDULER_NAME), t.creators, t.timeout).await;
    hami.proc.assert_running();
    plugin.assert_running();
    let allocated = if run.complete() {
        allocated_note(run.bound_s, wait_all_allocated(&cp.client, t.timeout).await, t.timeout)
    } else {
        "not all bound".to_owned()
    };
    let after = apiserver_requests(&cp).await;
    let pods = list_pods_checked(&cp.client).await;
    let not_success =
        pods.iter().filter(|p| node_name(p).is_some() && annotation(p, BIND_PHASE) != Some("success")).count();
    let excess = gpu_count_excess(&cp.client).await;
    let d = devices(&cp.client).await;
    let failed_allocs = plugin.log_lines().iter().filter(|l| l.contains(" allocation failed ")).count();
    // Counted and reported: the fake plugin's drop would otherwise fail the test on them.
    plugin.expect_failures(failed_allocs);
    let (per, kinds) = per_pod(&before, &after, run.bound.max(1));
    println!("e2e[o]: with HAMi: kube-apiserver requests per pod {per:.2}: {kinds}");
    println!(
        "e2e[o]: with HAMi: created in {:.1} s, half bound at {:.1} s, all bound at {:.1} s, {allocated}; {} bound pods without bind-phase success; HAMi logged {} failed binds and {} failed node locks; the plugin failed {failed_allocs} Allocate calls; nvidia.com/gpu over allocatable on {} nodes; {} device entries on a device not of their node",
        run.created_s,
        run.half_s.unwrap_or(f64::NAN),
        run.bound_s,
        not_success,
        hami.count("\"Release node locks\""),
        hami.count("\"Failed to lock node\""),
        excess.len(),
        d.misplaced,
    );
    if !d.over.is_empty() {
        println!("e2e[o]: with HAMi: over-committed devices (first 10): {:?}", &d.over[..d.over.len().min(10)]);
    }
    summary(t, Who::Upstream, &run, per, Some(&d));
    run
}

async fn run_alone(t: &Tput) -> Run {
    let cp = ControlPlane::start("o-alone").await;
    let _setup = FakePlugin::start_with(&cp, &t.nodes, "fake-plugin-setup", &["--setup-only"]).await;
    let _ks = KubeScheduler::start_default(&cp, "kube-scheduler-default", t.sched_opts()).await;
    let before = apiserver_requests(&cp).await;
    let run = burst_and_time(&cp.client, t.pods("default-scheduler"), t.creators, t.timeout).await;
    assert!(run.complete(), "e2e[o]: alone {} of {} pods bound within {:?}", run.bound, run.pods, t.timeout);
    let after = apiserver_requests(&cp).await;
    let pods = list_pods_checked(&cp.client).await;
    assert_eq!(bound_count(&pods), t.pods, "every pod bound");
    let excess = gpu_count_excess(&cp.client).await;
    assert!(excess.is_empty(), "e2e[o]: nvidia.com/gpu over-committed on {excess:?}");
    let (per, kinds) = per_pod(&before, &after, t.pods);
    println!("e2e[o]: kube-scheduler alone: kube-apiserver requests per pod {per:.2}: {kinds}");
    println!(
        "e2e[o]: kube-scheduler alone: created in {:.1} s, half bound at {:.1} s, all bound at {:.1} s",
        run.created_s,
        run.half_s.unwrap_or(f64::NAN),
        run.bound_s
    );
    summary(t, Who::Alone, &run, per, None);
    run
}

#[tokio::test(flavor = "multi_thread")]
async fn o_throughput_of_kube_scheduler_with_hami_rs_against_kube_scheduler_alone() {
    if std::env::var_os("HAMI_E2E_THROUGHPUT").is_none() {
        println!("e2e[o]: skipped (set HAMI_E2E_THROUGHPUT=1 to measure throughput)");
        return;
    }
    let t = Tput::from_env();
    let slots = t.nodes.nodes * GPUS_PER_NODE * t.nodes.split as usize;
    assert!(t.pods <= slots, "e2e[o]: {} pods do not fit {slots} GPU slots", t.pods);
    let mut outcomes = Vec::new();
    for who in t.runs() {
        let (run, violations) = match who {
            Who::HamiRs => run_hami_rs(&t).await,
            Who::Upstream => (run_upstream(&t, t.upstream.as_deref().expect("checked in runs()")).await, Vec::new()),
            Who::Alone => (run_alone(&t).await, Vec::new()),
        };
        outcomes.push(Outcome { who, run, violations });
    }
    let alone = outcomes.iter().find(|o| o.who == Who::Alone).map(|o| o.run.rate());
    let parts: Vec<String> = outcomes
        .iter()
        .map(|o| {
            let ratio = match alone {
                Some(y) if o.who != Who::Alone => format!(", {:.2} of alone", o.run.rate() / y),
                _ => String::new(),
            };
            let incomplete = if o.run.complete() { "" } else { " INCOMPLETE" };
            format!(
                "{} {:.1} pods/s ({:.1} s{incomplete}{ratio}; created in {:.1} s)",
                o.who.word(),
                o.run.rate(),
                o.run.bound_s,
                o.run.created_s
            )
        })
        .collect();
    println!(
        "e2e summary o: {} nodes, {} pods: {} ({}; pods created {} at a time)",
        t.nodes.nodes,
        t.pods,
        parts.join(", "),
        t.note(),
        t.creators
    );
    let broken: Vec<&String> = outcomes.iter().flat_map(|o| &o.violations).collect();
    assert!(
        broken.is_empty(),
        "e2e[o]: with hami-rs:\n  {}",
        broken.iter().map(|v| v.as_str()).collect::<Vec<_>>().join("\n  ")
    );
}
