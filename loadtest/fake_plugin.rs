//! A fake HAMi device plugin for tests and load: creates (or adopts) N fake GPU nodes with HAMi's
//! NVIDIA register annotation, optionally answers handshakes, and after a bind plays kubelet and
//! the device plugin as HAMi's plugin (HAMi 4707fb02) does them: one Allocate per container that
//! asks for a device, each taking one entry of the to-allocate list (`crate::allocate`) and
//! writing the list back, `hami.io/bind-phase: success` after the last and then the node lock
//! released (owner-checked, compare-and-swap); a failed check writes `bind-phase: failed` and
//! releases the lock. Every call is logged on one line (`allocate …` or `allocation failed …`,
//! with a `step=` JSON object) for tests to read.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::TryStreamExt;
use hami_rs::model::DeviceInfo;
use hami_rs::model::annotations as keys;
use hami_rs::model::codec;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use serde_json::json;
use tokio::sync::Mutex;

use crate::allocate::{self, Call, Table, kubelet_calls};

#[derive(Clone, Debug, clap::Args)]
pub struct FakePluginArgs {
    /// Kubeconfig of an identity allowed to create nodes and patch pods and nodes.
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Number of fake GPU nodes.
    #[arg(long, default_value = "4")]
    pub nodes: usize,
    /// Node names are <prefix><index>.
    #[arg(long, default_value = "fake-gpu-")]
    pub name_prefix: String,
    #[arg(long, default_value = "4")]
    pub gpus_per_node: usize,
    /// Device memory in MiB.
    #[arg(long, default_value = "16384")]
    pub gpu_mem: u64,
    #[arg(long, default_value = "NVIDIA-Tesla T4")]
    pub gpu_model: String,
    /// Tasks per GPU (the split count).
    #[arg(long, default_value = "10")]
    pub split: u32,
    /// Create the nodes (with status) instead of adopting existing ones.
    #[arg(long)]
    pub create_nodes: bool,
    /// Answer `Requesting_…` handshakes with `Reported …`, as older device plugins did.
    #[arg(long)]
    pub answer_handshake: bool,
    /// Never release the node lock (a stuck plugin, for fault tests).
    #[arg(long)]
    pub never_release_lock: bool,
    /// Exit after setting the nodes up (no watching).
    #[arg(long)]
    pub setup_only: bool,
}

/// The register annotation of fake node `node`.
pub fn register_value(a: &FakePluginArgs, node: &str) -> String {
    let devs: Vec<DeviceInfo> = (0..a.gpus_per_node)
        .map(|i| {
            let mut d = DeviceInfo::new(&format!("GPU-{node}-{i}"), i as u32, a.split, a.gpu_mem, 100, &a.gpu_model);
            d.numa = if i < a.gpus_per_node / 2 { 0 } else { 1 };
            d.mode = Arc::from("hami-core");
            d
        })
        .collect();
    codec::encode_node_devices_json(&devs)
}

pub fn node_names(a: &FakePluginArgs) -> Vec<String> {
    (0..a.nodes).map(|i| format!("{}{i}", a.name_prefix)).collect()
}

/// The Node object a fake plugin node starts as (allocatable cpu, memory, pods and GPUs; no taints).
pub fn node_object(a: &FakePluginArgs, name: &str) -> Node {
    let gpus = (a.gpus_per_node as u32 * a.split).to_string();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "gpu": "on"},
            "annotations": {keys::NVIDIA_REGISTER: register_value(a, name)}
        },
        "status": {
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "250", "nvidia.com/gpu": gpus},
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "250", "nvidia.com/gpu": gpus},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake"}]
        }
    }))
    .unwrap_or_default()
}

pub async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let cfg = match kubeconfig {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(cfg)?)
}

/// Creates the nodes (idempotent), removes the taint admission adds, writes the annotations.
pub async fn setup_nodes(client: &kube::Client, a: &FakePluginArgs) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    for name in node_names(a) {
        if a.create_nodes {
            match api.create(&PostParams::default(), &node_object(a, &name)).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            // The TaintNodesByCondition admission plugin taints new nodes; nothing else removes it.
            api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"taints": null}}))).await?;
        }
        let body = json!({"metadata": {"annotations": {keys::NVIDIA_REGISTER: register_value(a, &name)}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&body)).await?;
    }
    Ok(())
}

/// How long a lock release keeps trying while the API server does not answer: a lock left behind
/// holds its node until a later bind takes it over or it expires.
const RELEASE_PATIENCE: Duration = Duration::from_secs(120);
/// The pause between two tries of a release the API server did not answer.
const RELEASE_RETRY: Duration = Duration::from_millis(500);

/// Releases the node lock if `ns/name` holds it, retrying a conflict at once and an API server
/// that does not answer or is unavailable (down, restarting) for `RELEASE_PATIENCE`.
async fn release_lock(nodes: &Api<Node>, node: &str, ns: &str, name: &str) {
    let deadline = tokio::time::Instant::now() + RELEASE_PATIENCE;
    loop {
        let (e, pause) = match try_release(nodes, node, ns, name).await {
            Ok(()) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => (kube::Error::Api(e), Duration::ZERO),
            // An answer that will not change by asking again (the node is gone, not allowed).
            Err(kube::Error::Api(e)) if e.code < 500 && e.code != 429 => {
                tracing::warn!(%node, error = %e, "lock not released");
                return;
            }
            Err(e) => (e, RELEASE_RETRY),
        };
        if tokio::time::Instant::now() + pause > deadline {
            tracing::warn!(%node, error = %e, "lock not released");
            return;
        }
        if !pause.is_zero() {
            tracing::debug!(%node, error = %e, "lock release failed; trying again");
            tokio::time::sleep(pause).await;
        }
    }
}

/// One try: `Ok` when the lock is gone or is not this pod's.
async fn try_release(nodes: &Api<Node>, node: &str, ns: &str, name: &str) -> Result<(), kube::Error> {
    let n = nodes.get(node).await?;
    let Some(v) = n.metadata.annotations.as_ref().and_then(|a| a.get(keys::NODE_LOCK)) else { return Ok(()) };
    if v.contains(',') && !v.ends_with(&format!(",{ns},{name}")) {
        return Ok(());
    }
    let body =
        json!({"metadata": {"annotations": {keys::NODE_LOCK: null}, "resourceVersion": n.metadata.resource_version}});
    nodes.patch(node, &PatchParams::default(), &Patch::Merge(&body)).await.map(|_| ())
}

/// Serves allocations until the process is stopped.
pub async fn run(a: FakePluginArgs) -> anyhow::Result<()> {
    let client = client(a.kubeconfig.as_deref()).await?;
    setup_nodes(&client, &a).await?;
    if a.setup_only {
        return Ok(());
    }
    let ours: Arc<HashSet<String>> = Arc::new(node_names(&a).into_iter().collect());
    let locks: Arc<Mutex<HashMap<String, String>>> = Arc::new(Mutex::new(HashMap::new()));
    let nodes: Api<Node> = Api::all(client.clone());
    {
        let (nodes, ours, locks, answer) = (nodes.clone(), ours.clone(), locks.clone(), a.answer_handshake);
        tokio::spawn(async move {
            let mut s = Box::pin(
                watcher::watcher(nodes.clone(), watcher::Config::default()).default_backoff().applied_objects(),
            );
            while let Ok(Some(n)) = s.try_next().await {
                let name = n.metadata.name.clone().unwrap_or_default();
                if !ours.contains(&name) {
                    continue;
                }
                let annos = n.metadata.annotations.clone().unwrap_or_default();
                match annos.get(keys::NODE_LOCK) {
                    Some(v) => locks.lock().await.insert(name.clone(), v.clone()),
                    None => locks.lock().await.remove(&name),
                };
                if answer && annos.get(keys::NVIDIA_HANDSHAKE).is_some_and(|h| h.starts_with("Requesting")) {
                    let v = format!("Reported {}", chrono::Utc::now().to_rfc3339());
                    let body = json!({"metadata": {"annotations": {keys::NVIDIA_HANDSHAKE: v}}});
                    let _ = nodes.patch(&name, &PatchParams::default(), &Patch::Merge(&body)).await;
                }
            }
        });
    }
    let plugin = Arc::new(Plugin {
        client: client.clone(),
        nodes: nodes.clone(),
        locks: locks.clone(),
        table: Table { gpu_mem: a.gpu_mem, ..Table::chart() },
        never_release: a.never_release_lock,
    });
    let pods: Api<Pod> = Api::all(client.clone());
    // The pods bound to our nodes are found through the label hami-rs writes with its decision;
    // HAMi's plugin, called by kubelet, lists the node's pods instead. Which pod a call serves is
    // then decided as HAMi's plugin decides it (`Plugin::pending_pod`).
    let cfg = watcher::Config::default().labels(keys::ASSIGNED_NODE);
    let mut s = Box::pin(watcher::watcher(pods, cfg).default_backoff().applied_objects());
    // A real cluster runs one device plugin per node: allocations on different nodes go on at the
    // same time, those on one node one after another.
    let done: Arc<Mutex<HashSet<String>>> = Arc::new(Mutex::new(HashSet::new()));
    let mut per_node: HashMap<String, Arc<Mutex<()>>> = HashMap::new();
    while let Some(p) = s.try_next().await? {
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else { continue };
        let allocating = p.metadata.annotations.as_ref().and_then(|a| a.get(keys::BIND_PHASE)).map(String::as_str)
            == Some(keys::BIND_PHASE_ALLOCATING);
        if !ours.contains(&node) || !allocating || !done.lock().await.insert(uid.clone()) {
            continue;
        }
        let serial = per_node.entry(node.clone()).or_default().clone();
        let (plugin, done) = (plugin.clone(), done.clone());
        tokio::spawn(async move {
            let _turn = serial.lock().await;
            // The calls made so far are read back from the pod, so serving it again goes on where
            // the API server stopped answering; this pod's own writes may have been its last events.
            let deadline = tokio::time::Instant::now() + RELEASE_PATIENCE;
            loop {
                match plugin.serve(&p, &node).await {
                    Served::Done => return,
                    Served::NotNow => break,
                    Served::Unanswered if tokio::time::Instant::now() >= deadline => break,
                    Served::Unanswered => tokio::time::sleep(RELEASE_RETRY).await,
                }
            }
            // Not this pod's turn yet (the lock names another pod): a later event retries it.
            done.lock().await.remove(&uid);
        });
    }
    Ok(())
}

/// Allocations the plugin failed since it started (each logged as `allocation failed`).
static FAILURES: AtomicU64 = AtomicU64::new(0);

/// What every Allocate needs.
struct Plugin {
    client: kube::Client,
    nodes: Api<Node>,
    /// The node lock of each of our nodes, as the node watch last saw it.
    locks: Arc<Mutex<HashMap<String, String>>>,
    table: Table,
    never_release: bool,
}

/// How serving a pod ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Served {
    /// Every call made, or the allocation failed and said so.
    Done,
    /// Not the pod the plugin serves now (the node lock names another).
    NotNow,
    /// The API server did not answer (or refused a write); worth trying again soon.
    Unanswered,
}

/// Where the pod is in kubelet's calls.
enum Next {
    /// The next call, and whether it is the vendor's first (its value untouched so far).
    Call(Call, bool),
    /// Every call has been made.
    Done,
    /// The pod cannot be allocated before any call is made.
    Fail(String, String),
}

impl Plugin {
    /// The pod an Allocate on `node` serves, found as HAMi's plugin finds it: the pod a node lock
    /// `<time>,<ns>,<name>` names, read with no further check; without a lock (or with the legacy
    /// timestamp-only one) the first of the node's pods, in namespace/name order, that is Pending,
    /// has a bind time, bind-phase `allocating` or `success` and `hami.io/vgpu-node` naming the
    /// node. `Err` for an unreadable lock or an API server that did not answer.
    async fn pending_pod(&self, node: &str, ns: &str, name: &str) -> Result<Option<Pod>, String> {
        let holder = |lock: Option<&str>| match lock.map(codec::decode_node_lock) {
            None => Ok(None),
            Some(Ok(l)) => Ok(l.owner),
            Some(Err(e)) => Err(e.to_string()),
        };
        // HAMi's plugin reads the node every call. The node watch's copy is used when it names
        // this pod (only this plugin releases that lock); otherwise the node is read afresh, as
        // the watch may lag behind the bind that took the lock.
        let cached = self.locks.lock().await.get(node).cloned();
        let owner = match holder(cached.as_deref()) {
            Ok(Some((n, p))) if n == ns && p == name => Some((n, p)),
            _ => {
                let n = self.nodes.get(node).await.map_err(|e| e.to_string())?;
                holder(n.metadata.annotations.as_ref().and_then(|a| a.get(keys::NODE_LOCK)).map(String::as_str))?
            }
        };
        if let Some((n, p)) = owner {
            return Api::<Pod>::namespaced(self.client.clone(), &n).get(&p).await.map(Some).map_err(|e| e.to_string());
        }
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let mut list = Api::<Pod>::all(self.client.clone()).list(&lp).await.map_err(|e| e.to_string())?.items;
        list.sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));
        Ok(list.into_iter().find(|p| {
            let a = p.metadata.annotations.clone().unwrap_or_default();
            let phase = a.get(keys::BIND_PHASE).map(String::as_str);
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
                && a.contains_key(keys::BIND_TIME)
                && matches!(phase, Some(keys::BIND_PHASE_ALLOCATING | keys::BIND_PHASE_SUCCESS))
                && a.get(keys::ASSIGNED_NODE).map(String::as_str) == Some(node)
        }))
    }

    /// kubelet's next Allocate call for the pod as it is now: the calls of a vendor that are made
    /// already are those whose entries are emptied (the last `pending` calls are left).
    fn next(&self, p: &Pod) -> Next {
        let annos = p.metadata.annotations.clone().unwrap_or_default();
        let calls = kubelet_calls(&self.table, p);
        // Per vendor: the calls kubelet makes, and the entries still holding devices.
        let mut left: Vec<(usize, usize)> = Vec::new();
        for (i, v) in self.table.vendors.iter().enumerate() {
            let planned = calls.iter().filter(|c| c.vendor == i).count();
            let pending = annos.get(&v.to_allocate).map_or(planned, |x| allocate::pending_entries(x));
            if pending > planned {
                let why = format!(
                    "{} holds {pending} device entries, but only {planned} containers ask for {}",
                    v.to_allocate, v.count
                );
                return Next::Fail(v.word.clone(), why);
            }
            left.push((planned, pending));
        }
        let mut made = vec![0usize; left.len()];
        for c in calls {
            let (planned, pending) = left[c.vendor];
            made[c.vendor] += 1;
            if made[c.vendor] > planned - pending {
                return Next::Call(c, pending == planned);
            }
        }
        Next::Done
    }

    /// Plays kubelet's Allocate calls for `watched`, bound to `node`, one after the other, from
    /// the first not yet made.
    async fn serve(&self, watched: &Pod, node: &str) -> Served {
        let ns = watched.metadata.namespace.clone().unwrap_or_default();
        let name = watched.metadata.name.clone().unwrap_or_default();
        let uid = watched.metadata.uid.clone();
        let pod = format!("{ns}/{name}");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let mut saw: Option<String> = None;
        let mut calls = 0usize;
        loop {
            let cur = match self.pending_pod(node, &ns, &name).await {
                Ok(Some(p)) if p.metadata.uid == uid => p,
                Ok(_) => return Served::NotNow,
                Err(e) => {
                    tracing::debug!(%pod, %node, error = %e, "no pod to allocate yet");
                    return Served::Unanswered;
                }
            };
            let annos: BTreeMap<String, String> = cur.metadata.annotations.clone().unwrap_or_default();
            // What a device plugin reads at its first Allocate, for tests that compare scheduler modes.
            let saw = saw.get_or_insert_with(|| {
                let hami: BTreeMap<&String, &String> =
                    annos.iter().filter(|(k, _)| k.starts_with("hami.io/")).collect();
                serde_json::to_string(&hami).unwrap_or_default()
            });
            let (call, first) = match self.next(&cur) {
                Next::Call(c, first) => (c, first),
                Next::Fail(vendor, why) => {
                    let c = Call { vendor: 0, container: String::new(), ids: 0 };
                    return self.fail(&api, &cur, node, &c, &vendor, &why).await;
                }
                Next::Done => {
                    let phase = annos.get(keys::BIND_PHASE).map(String::as_str);
                    if calls == 0 && kubelet_calls(&self.table, &cur).is_empty() {
                        // No container asks for a device: kubelet never calls the plugin.
                        tracing::info!(%pod, %node, "no device container; nothing to allocate");
                        return Served::Done;
                    }
                    if phase == Some(keys::BIND_PHASE_ALLOCATING) {
                        // Every entry was taken but the success was not written (the API server
                        // did not answer it): write it now.
                        if !self.succeed(&api, &name, node, &ns).await {
                            return Served::Unanswered;
                        }
                    }
                    tracing::info!(%pod, %node, calls, %saw, "allocated");
                    return Served::Done;
                }
            };
            let vendor = self.table.vendors[call.vendor].clone();
            let step = match allocate::allocate(&self.table, &cur, &call, first) {
                Ok(s) => s,
                Err(f) => return self.fail(&api, &cur, node, &call, &vendor.word, &f.to_string()).await,
            };
            // The entry taken is written back at once, the success (if this was the last entry)
            // in a patch of its own after it.
            let body = json!({"metadata": {"annotations": {&vendor.to_allocate: &step.after}}});
            let after = match api.patch(&name, &PatchParams::default(), &Patch::Merge(&body)).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(%pod, %node, error = %e, "allocation not recorded");
                    return Served::Unanswered;
                }
            };
            calls += 1;
            let mut line = serde_json::to_value(&step).unwrap_or_default();
            if step.last {
                if !self.succeed(&api, &name, node, &ns).await {
                    return Served::Unanswered;
                }
                line["phase"] = keys::BIND_PHASE_SUCCESS.into();
                line["lock"] = if self.never_release { "kept".into() } else { "released".into() };
                tracing::info!(%pod, %node, step = %line, "allocate");
                // kubelet makes no call after the last: looking the node's pod up again would
                // only load the API server (a list of the node's pods once the lock is gone).
                tracing::info!(%pod, %node, calls, %saw, "allocated");
                return Served::Done;
            } else {
                // More entries to go: the pod stays allocating and the lock stays with it.
                let phase = after.metadata.annotations.as_ref().and_then(|a| a.get(keys::BIND_PHASE)).cloned();
                let lock =
                    self.nodes.get(node).await.ok().and_then(|n| n.metadata.annotations?.get(keys::NODE_LOCK).cloned());
                line["phase"] = phase.into();
                line["lock"] = lock.into();
            }
            tracing::info!(%pod, %node, step = %line, "allocate");
        }
    }

    /// `bind-phase: success`, then the node lock released: true when the phase was written.
    async fn succeed(&self, api: &Api<Pod>, name: &str, node: &str, ns: &str) -> bool {
        let body = json!({"metadata": {"annotations": {keys::BIND_PHASE: keys::BIND_PHASE_SUCCESS}}});
        if let Err(e) = api.patch(name, &PatchParams::default(), &Patch::Merge(&body)).await {
            tracing::warn!(pod = %format_args!("{ns}/{name}"), %node, error = %e, "allocation not recorded");
            return false;
        }
        if !self.never_release {
            release_lock(&self.nodes, node, ns, name).await;
        }
        true
    }

    /// A failed Allocate as HAMi's plugin answers it: `bind-phase: failed`, then the node lock
    /// released; the to-allocate value stays as it was.
    async fn fail(&self, api: &Api<Pod>, p: &Pod, node: &str, call: &Call, vendor: &str, why: &str) -> Served {
        let (ns, name) =
            (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default());
        let body = json!({"metadata": {"annotations": {keys::BIND_PHASE: keys::BIND_PHASE_FAILED}}});
        if let Err(e) = api.patch(&name, &PatchParams::default(), &Patch::Merge(&body)).await {
            tracing::warn!(pod = %format_args!("{ns}/{name}"), %node, error = %e, "allocation failure not recorded");
            return Served::Unanswered;
        }
        if !self.never_release {
            release_lock(&self.nodes, node, &ns, &name).await;
        }
        let failures = FAILURES.fetch_add(1, Ordering::Relaxed) + 1;
        let value = self
            .table
            .vendors
            .iter()
            .find(|v| v.word == vendor)
            .and_then(|v| p.metadata.annotations.as_ref()?.get(&v.to_allocate));
        let line = json!({"vendor": vendor, "kubelet": call.container, "ids": call.ids, "why": why, "value": value, "phase": keys::BIND_PHASE_FAILED});
        tracing::warn!(pod = %format_args!("{ns}/{name}"), %node, failures, step = %line, "allocation failed");
        Served::Done
    }
}

/// Keeps the process alive on a runtime until the plugin stops.
pub fn spawn_forever(a: FakePluginArgs) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    tokio::spawn(async move {
        loop {
            match run(a.clone()).await {
                Ok(()) if a.setup_only => return Ok(()),
                Ok(()) => {}
                Err(e) => tracing::warn!(error = %e, "fake plugin restarting"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}
