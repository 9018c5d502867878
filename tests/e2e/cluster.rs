//! What the tests read from and write to the API server: pods, Events, bounded waits, and the
//! allocation invariants checked from the pods' own annotations (never from hami-rs's state).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use crate::harness::{Hami, NS};

pub const ASSIGNED_NODE: &str = "hami.io/vgpu-node";
pub const ASSIGNED_TIME: &str = "hami.io/vgpu-time";
pub const ALLOCATED: &str = "hami.io/vgpu-devices-allocated";
pub const TO_ALLOCATE: &str = "hami.io/vgpu-devices-to-allocate";
pub const BIND_PHASE: &str = "hami.io/bind-phase";
pub const BIND_TIME: &str = "hami.io/bind-time";
pub const NODE_LOCK: &str = "hami.io/mutex.lock";
pub const REGISTER: &str = "hami.io/node-nvidia-register";
pub const HANDSHAKE: &str = "hami.io/node-handshake";

/// Polls `f` every 250 ms until it returns `Ok`, for at most `timeout` (each call is bounded by
/// the remaining time too); panics with `what` and the last `Err` otherwise.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    let mut last = String::from("(no answer yet)");
    loop {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(50));
        match tokio::time::timeout(left, f()).await {
            Ok(Ok(v)) => return v,
            Ok(Err(e)) => last = e,
            Err(_) => last = format!("{last} (last check did not finish)"),
        }
        if Instant::now() >= deadline {
            panic!("e2e: timed out after {timeout:?} waiting for {what}; last state: {last}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A pod with one container `main` (never run: there is no kubelet) with these limits.
pub fn pod(name: &str, limits: &[(&str, &str)], annotations: &[(&str, &str)], scheduler_name: Option<&str>) -> Pod {
    let limits: BTreeMap<&str, &str> = limits.iter().copied().collect();
    let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    let mut spec = json!({
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "registry.invalid/e2e:never-pulled", "resources": {"limits": limits}}],
    });
    if let Some(s) = scheduler_name {
        spec["schedulerName"] = json!(s);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"e2e": "gpu"}, "annotations": annotations},
        "spec": spec,
    }))
    .unwrap()
}

pub fn pods_api(client: &kube::Client) -> Api<Pod> {
    Api::namespaced(client.clone(), NS)
}

pub async fn get_pod(client: &kube::Client, pod: &str) -> Pod {
    pods_api(client).get(pod).await.unwrap_or_else(|e| panic!("e2e: get pod {pod}: {e}"))
}

pub async fn create(client: &kube::Client, p: &Pod) -> Pod {
    let name = p.metadata.name.clone().unwrap_or_default();
    pods_api(client).create(&PostParams::default(), p).await.unwrap_or_else(|e| panic!("e2e: creating pod {name}: {e}"))
}

/// Creates every pod, up to 32 requests at a time.
pub async fn create_all(client: &kube::Client, pods: Vec<Pod>) {
    futures::stream::iter(pods)
        .map(|p| {
            let client = client.clone();
            async move {
                create(&client, &p).await;
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

pub fn annotations(p: &Pod) -> BTreeMap<String, String> {
    p.metadata.annotations.clone().unwrap_or_default()
}

pub fn annotation<'a>(p: &'a Pod, k: &str) -> Option<&'a str> {
    p.metadata.annotations.as_ref().and_then(|a| a.get(k)).map(String::as_str)
}

pub fn node_name(p: &Pod) -> Option<&str> {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
}

pub fn name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap_or("")
}

/// PodScheduled=False with reason Unschedulable (a scheduling cycle found no node).
pub fn unschedulable(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
        cs.iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    })
}

/// Waits until the pod is bound and the device plugin reported `bind-phase: success`.
pub async fn wait_allocated(client: &kube::Client, pod: &str, timeout: Duration) -> Pod {
    let api = pods_api(client);
    wait_for(&format!("pod {pod} to be bound and allocated"), timeout, || {
        let api = api.clone();
        async move {
            let p = api.get(pod).await.map_err(|e| e.to_string())?;
            match (node_name(&p), annotation(&p, BIND_PHASE)) {
                (Some(_), Some("success")) => Ok(p),
                (n, ph) => Err(format!(
                    "nodeName {n:?}, bind-phase {ph:?}, status {:?}",
                    p.status.as_ref().map(|s| &s.conditions)
                )),
            }
        }
    })
    .await
}

/// Events whose involved object is the pod `pod`.
pub async fn events_of(client: &kube::Client, pod: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

pub fn event_summary(evs: &[Event]) -> String {
    evs.iter()
        .map(|e| {
            format!(
                "[{} {} {}]",
                e.reason.as_deref().unwrap_or(""),
                e.type_.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An Event reason and a test on its message.
pub type WantEvent<'a> = (&'a str, &'a dyn Fn(&str) -> bool);

/// Waits until every `(reason, message predicate)` is matched by some Event of the pod.
pub async fn wait_events(client: &kube::Client, pod: &str, want: &[WantEvent<'_>], timeout: Duration) -> Vec<Event> {
    wait_for(&format!("Events of pod {pod}"), timeout, || async {
        let evs = events_of(client, pod).await;
        let missing: Vec<&str> = want
            .iter()
            .filter(|(reason, ok)| {
                !evs.iter().any(|e| e.reason.as_deref() == Some(reason) && ok(e.message.as_deref().unwrap_or("")))
            })
            .map(|(r, _)| *r)
            .collect();
        if missing.is_empty() { Ok(evs) } else { Err(format!("missing {missing:?}; have {}", event_summary(&evs))) }
    })
    .await
}

/// Counts Events in the namespace by reason.
pub async fn event_reasons(client: &kube::Client) -> BTreeMap<String, usize> {
    let api: Api<Event> = Api::namespaced(client.clone(), NS);
    let mut out = BTreeMap::new();
    for e in api.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
        *out.entry(e.reason.unwrap_or_default()).or_insert(0) += e.count.unwrap_or(1).max(1) as usize;
    }
    out
}

// --- the pod device encoding, parsed here independently of hami-rs -----------------------------

/// One device entry `uuid,type,mem,cores`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceUse {
    pub uuid: String,
    pub ty: String,
    pub mem: u64,
    pub cores: u32,
}

/// Containers separated by `;`, devices by `:`, fields by `,`.
pub fn parse_pod_devices(v: &str) -> Result<Vec<Vec<DeviceUse>>, String> {
    v.split(';')
        .map(|c| {
            c.split(':')
                .filter(|d| d.contains(','))
                .map(|d| {
                    let f: Vec<&str> = d.split(',').collect();
                    if f.len() < 4 {
                        return Err(format!("device entry {d:?} has {} fields", f.len()));
                    }
                    Ok(DeviceUse {
                        uuid: f[0].to_owned(),
                        ty: f[1].to_owned(),
                        mem: f[2].parse().map_err(|e| format!("{d:?}: memory: {e}"))?,
                        cores: f[3].parse().map_err(|e| format!("{d:?}: cores: {e}"))?,
                    })
                })
                .collect()
        })
        .collect()
}

/// A registered device (from the node's `hami.io/node-nvidia-register` JSON).
#[derive(Clone, Debug)]
pub struct DeviceCap {
    pub node: String,
    pub count: u64,
    pub mem: u64,
    pub cores: u64,
}

pub fn registered_devices(n: &Node) -> BTreeMap<String, DeviceCap> {
    let node = n.metadata.name.clone().unwrap_or_default();
    let raw = n.metadata.annotations.as_ref().and_then(|a| a.get(REGISTER)).cloned().unwrap_or_default();
    let list: Vec<Value> = serde_json::from_str(&raw).unwrap_or_default();
    list.iter()
        .map(|d| {
            let u = |k: &str| d[k].as_u64().unwrap_or(0);
            (
                d["id"].as_str().unwrap_or("").to_owned(),
                DeviceCap { node: node.clone(), count: u("count"), mem: u("devmem"), cores: u("devcore") },
            )
        })
        .collect()
}

/// Per-device use summed over bound pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Used {
    pub slots: u64,
    pub mem: u64,
    pub cores: u64,
}

/// What the invariant check saw.
#[derive(Debug, Default)]
pub struct Summary {
    pub pods: usize,
    pub bound: usize,
    pub unbound: usize,
    /// Bound pods whose plugin has not (yet) answered.
    pub bound_not_success: usize,
    /// Pods bound to nodes that no longer exist ([`Allow::gone_nodes`]).
    pub on_gone_nodes: usize,
    pub usage: BTreeMap<String, Used>,
    pub locks: Vec<(String, String)>,
    /// Locks let pass by [`Allow::stale_elsewhere`].
    pub stale_locks: usize,
}

impl Summary {
    pub fn line(&self) -> String {
        format!(
            "{} pods: {} bound, {} unbound; {} bound pods without bind-phase success; {} node locks held{}",
            self.pods,
            self.bound,
            self.unbound,
            self.bound_not_success,
            self.locks.len(),
            if self.stale_locks > 0 {
                format!(" ({} naming a pod bound elsewhere)", self.stale_locks)
            } else {
                String::new()
            }
        )
    }
}

/// What [`check_invariants_with`] lets pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allow<'a> {
    /// Nodes deleted from the API: pods still bound to them are counted apart (`on_gone_nodes`)
    /// and their devices left out.
    pub gone_nodes: &'a [String],
    /// A node lock may be held by any existing Pending pod, whatever its bind-phase: the states a
    /// SIGKILL inside a bind leaves (lock taken, bind-phase not written yet, or no Binding yet).
    pub lenient_locks: bool,
    /// Nodes whose lock is not checked (a device plugin that never releases it).
    pub unchecked_locks: &'a [String],
    /// A node lock may name a pod bound to another node whose plugin answered: what a SIGKILL
    /// between taking the lock and creating the Binding leaves when the pod is bound elsewhere
    /// after the restart. It protects nothing, and the next bind to the node takes it over
    /// (scenario f); such locks are counted in `stale_locks`.
    pub stale_elsewhere: bool,
}

/// Checks, from the API's pods and nodes only: every bound pod's `hami.io/vgpu-node` equals its
/// nodeName and its allocated devices exist on that node; per device, the bound pods use at most
/// `count` slots, `devmem` MiB and `devcore` cores; and every node lock is held by a pending pod
/// whose bind-phase is `allocating`. Panics listing every violation.
pub async fn check_invariants(client: &kube::Client) -> Summary {
    check_invariants_with(client, Allow::default()).await
}

/// How long a node lock held by a pod whose plugin has answered may take to go: the plugin writes
/// bind-phase success first and releases the lock after it, so a check can land in between.
const LOCK_RELEASE_GRACE: Duration = Duration::from_secs(10);

/// [`check_invariants`] with the exceptions in `allow`. When the only violations are node locks,
/// the check is taken again until they are gone or `LOCK_RELEASE_GRACE` has passed; any other
/// violation fails at once.
pub async fn check_invariants_with(client: &kube::Client, allow: Allow<'_>) -> Summary {
    let deadline = Instant::now() + LOCK_RELEASE_GRACE;
    loop {
        let (s, bad) = invariants_once(client, allow).await;
        let only_locks = !bad.is_empty() && bad.iter().all(|b| b.starts_with("node ") && b.contains(" is locked "));
        if !only_locks || Instant::now() >= deadline {
            assert!(bad.is_empty(), "e2e: allocation invariants violated ({}):\n  {}", s.line(), bad.join("\n  "));
            return s;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One reading of the invariants: the summary and every violation found.
async fn invariants_once(client: &kube::Client, allow: Allow<'_>) -> (Summary, Vec<String>) {
    let pods = list_pods_checked(client).await;
    let nodes = Api::<Node>::all(client.clone()).list(&ListParams::default()).await.unwrap().items;
    let mut caps: BTreeMap<String, DeviceCap> = BTreeMap::new();
    for n in &nodes {
        caps.extend(registered_devices(n));
    }
    let mut bad: Vec<String> = Vec::new();
    let mut s = Summary { pods: pods.len(), ..Summary::default() };
    for p in &pods {
        let Some(node) = node_name(p) else {
            s.unbound += 1;
            continue;
        };
        if allow.gone_nodes.iter().any(|g| g == node) {
            s.on_gone_nodes += 1;
            continue;
        }
        s.bound += 1;
        if annotation(p, BIND_PHASE) != Some("success") {
            s.bound_not_success += 1;
        }
        if annotation(p, ASSIGNED_NODE) != Some(node) {
            bad.push(format!(
                "pod {} is bound to {node} but hami.io/vgpu-node is {:?}",
                name(p),
                annotation(p, ASSIGNED_NODE)
            ));
        }
        let Some(v) = annotation(p, ALLOCATED) else {
            bad.push(format!("bound pod {} has no {ALLOCATED}", name(p)));
            continue;
        };
        let containers = match parse_pod_devices(v) {
            Ok(c) => c,
            Err(e) => {
                bad.push(format!("pod {}: {ALLOCATED} {v:?}: {e}", name(p)));
                continue;
            }
        };
        for d in containers.iter().flatten() {
            match caps.get(&d.uuid) {
                Some(c) if c.node == node => {}
                Some(c) => bad.push(format!("pod {} on {node} holds {} which is on node {}", name(p), d.uuid, c.node)),
                None => bad.push(format!("pod {} holds unknown device {}", name(p), d.uuid)),
            }
            let u = s.usage.entry(d.uuid.clone()).or_default();
            u.slots += 1;
            u.mem += d.mem;
            u.cores += u64::from(d.cores);
        }
    }
    for (uuid, u) in &s.usage {
        let Some(c) = caps.get(uuid) else { continue };
        if u.slots > c.count || u.mem > c.mem || u.cores > c.cores {
            bad.push(format!(
                "device {uuid} on {} over-committed: {} slots / {} MiB / {} cores used of {} / {} / {}",
                c.node, u.slots, u.mem, u.cores, c.count, c.mem, c.cores
            ));
        }
    }
    let by_name: BTreeMap<(String, String), &Pod> =
        pods.iter().map(|p| ((p.metadata.namespace.clone().unwrap_or_default(), name(p).to_owned()), p)).collect();
    for n in &nodes {
        let node = n.metadata.name.clone().unwrap_or_default();
        let Some(lock) = n.metadata.annotations.as_ref().and_then(|a| a.get(NODE_LOCK)) else { continue };
        s.locks.push((node.clone(), lock.clone()));
        if allow.unchecked_locks.contains(&node) {
            continue;
        }
        let parts: Vec<&str> = lock.split(',').collect();
        if parts.len() != 3 {
            bad.push(format!("node {node} has a lock without owner: {lock:?}"));
            continue;
        }
        match by_name.get(&(parts[1].to_owned(), parts[2].to_owned())) {
            None => bad.push(format!("node {node} is locked by {}/{}, which does not exist", parts[1], parts[2])),
            Some(p) => {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
                let bind_phase = annotation(p, BIND_PHASE);
                let ok = phase == "Pending" && (allow.lenient_locks || bind_phase == Some("allocating"));
                let stale = allow.stale_elsewhere
                    && phase == "Pending"
                    && bind_phase == Some("success")
                    && node_name(p).is_some_and(|n| n != node);
                if stale {
                    s.stale_locks += 1;
                } else if !ok {
                    bad.push(format!(
                        "node {node} is locked ({lock}) by pod {} in phase {phase} with bind-phase {bind_phase:?}, bound to {:?}",
                        name(p),
                        node_name(p)
                    ));
                }
            }
        }
    }
    (s, bad)
}

/// Waits until hami-rs's `/usage` holds no reservation and agrees, device by device, with the
/// usage summed from the bound pods' annotations.
pub async fn wait_usage_matches(hami: &Hami, api: &Summary, timeout: Duration) {
    wait_for(&format!("{}'s /usage to match the API's pods", hami.name), timeout, || usage_matches(hami, api)).await;
}

/// Waits like [`wait_usage_matches`], but answers the last difference instead of failing.
pub async fn usage_matches_within(hami: &Hami, api: &Summary, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let r = usage_matches(hami, api).await;
        if r.is_ok() || Instant::now() >= deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Whether hami-rs's `/usage` holds no reservation and agrees, device by device, with the usage
/// summed from the bound pods' annotations; the differences otherwise.
pub async fn usage_matches(hami: &Hami, api: &Summary) -> Result<(), String> {
    {
        let u = hami.usage().await?;
        let reserved: Vec<&str> = u["pods"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["state"] == "reserved")
            .map(|p| p["name"].as_str().unwrap_or(""))
            .collect();
        if !reserved.is_empty() {
            return Err(format!("pods still reserved: {reserved:?}"));
        }
        let mut diff = Vec::new();
        let mut seen = BTreeSet::new();
        for d in u["nodes"].as_array().into_iter().flatten().flat_map(|n| n["devices"].as_array().into_iter().flatten())
        {
            let uuid = d["uuid"].as_str().unwrap_or("").to_owned();
            let got = Used {
                slots: d["used"].as_u64().unwrap_or(0),
                mem: d["memUsed"].as_u64().unwrap_or(0),
                cores: d["coresUsed"].as_u64().unwrap_or(0),
            };
            let want = api.usage.get(&uuid).copied().unwrap_or_default();
            if got != want {
                diff.push(format!("{uuid}: hami-rs {got:?}, pods {want:?}"));
            }
            seen.insert(uuid);
        }
        for uuid in api.usage.keys().filter(|k| !seen.contains(*k)) {
            diff.push(format!("{uuid}: used by pods but unknown to hami-rs"));
        }
        if diff.is_empty() { Ok(()) } else { Err(diff.join("; ")) }
    }
}

/// Waits until hami-rs knows every node in `names`, each with `gpus` devices.
pub async fn wait_nodes_registered(hami: &Hami, names: &[String], gpus: usize) {
    wait_for(&format!("{} to register {} nodes", hami.name, names.len()), Duration::from_secs(60), || async {
        let u = hami.usage().await?;
        let have: BTreeMap<String, usize> = u["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| (n["name"].as_str().unwrap_or("").to_owned(), n["devices"].as_array().map_or(0, Vec::len)))
            .collect();
        let missing: Vec<&String> = names.iter().filter(|n| have.get(*n) != Some(&gpus)).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("not registered (with {gpus} devices): {missing:?}; have {have:?}"))
        }
    })
    .await;
}

/// Lists the test's pods, failing the test when the API server does not answer within 60 s.
pub async fn list_pods_checked(client: &kube::Client) -> Vec<Pod> {
    wait_for("the API server to list the test's pods", Duration::from_secs(60), || async {
        pods_api(client)
            .list(&ListParams::default().labels("e2e=gpu"))
            .await
            .map(|l| l.items)
            .map_err(|e| e.to_string())
    })
    .await
}

/// Lists the test's pods.
pub async fn list_pods(client: &kube::Client) -> Vec<Pod> {
    pods_api(client).list(&ListParams::default().labels("e2e=gpu")).await.map(|l| l.items).unwrap_or_default()
}

pub fn bound_count(pods: &[Pod]) -> usize {
    pods.iter().filter(|p| node_name(p).is_some()).count()
}

/// The outcome of waiting for a burst to settle.
pub struct Settled {
    /// Seconds from `start` until the last pod was seen bound.
    pub last_bind_s: f64,
    pub bound: usize,
    pub unbound: usize,
}

/// Waits until every test pod is bound or Unschedulable and the bound count has not changed for
/// `quiet`. `start` is when the burst began.
pub async fn wait_settled(
    client: &kube::Client,
    expected: usize,
    start: Instant,
    quiet: Duration,
    timeout: Duration,
) -> Settled {
    let mut last_bound = 0usize;
    let mut last_change = Instant::now();
    let mut last_bind_s = 0.0;
    let deadline = Instant::now() + timeout;
    loop {
        let pods = list_pods(client).await;
        let bound = bound_count(&pods);
        if bound != last_bound {
            last_bound = bound;
            last_change = Instant::now();
            last_bind_s = start.elapsed().as_secs_f64();
        }
        let waiting: Vec<&str> =
            pods.iter().filter(|p| node_name(p).is_none() && !unschedulable(p)).map(name).collect();
        if pods.len() == expected && waiting.is_empty() && last_change.elapsed() >= quiet {
            return Settled { last_bind_s, bound, unbound: pods.len() - bound };
        }
        if Instant::now() >= deadline {
            panic!(
                "e2e: burst did not settle within {timeout:?}: {} pods, {bound} bound, {} neither bound nor Unschedulable (e.g. {:?})",
                pods.len(),
                waiting.len(),
                &waiting[..waiting.len().min(10)]
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A deterministic mix of GPU pods: 1 GPU with 2000–8000 MiB and 10–40 cores (60 %), 1 GPU with
/// 25–50 % of the memory (15 %), 2 GPUs with 2000–8000 MiB each (15 %), 1 whole GPU (10 %).
pub fn burst(prefix: &str, n: usize, seed: u64) -> Vec<Pod> {
    let mut x = seed;
    let mut next = move |m: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    (0..n)
        .map(|i| {
            let name = format!("{prefix}-{i:03}");
            let kind = next(100);
            let mem = (2000 + 500 * next(13)).to_string();
            let cores = (10 + 5 * next(7)).to_string();
            let pct = (25 + 5 * next(6)).to_string();
            let limits: Vec<(&str, &str)> = match kind {
                0..60 => vec![("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", &mem), ("nvidia.com/gpucores", &cores)],
                60..75 => vec![
                    ("nvidia.com/gpu", "1"),
                    ("nvidia.com/gpumem-percentage", &pct),
                    ("nvidia.com/gpucores", &cores),
                ],
                75..90 => vec![("nvidia.com/gpu", "2"), ("nvidia.com/gpumem", &mem), ("nvidia.com/gpucores", &cores)],
                _ => vec![("nvidia.com/gpu", "1")],
            };
            pod(&name, &limits, &[], None)
        })
        .collect()
}

/// Waits until every bound pod has been allocated by the device plugin (bind-phase `success`).
pub async fn wait_bound_allocated(client: &kube::Client, timeout: Duration) {
    wait_for("every bound pod to be allocated by the plugin", timeout, || async {
        let pods = list_pods(client).await;
        let stuck: Vec<&str> = pods
            .iter()
            .filter(|p| node_name(p).is_some() && annotation(p, BIND_PHASE) != Some("success"))
            .map(name)
            .collect();
        if stuck.is_empty() { Ok(()) } else { Err(format!("bound but not allocated: {stuck:?}")) }
    })
    .await;
}

/// The sum of a Prometheus text exposition's samples of `name` whose labels contain all of `labels`.
pub fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, b| a + b)
}
