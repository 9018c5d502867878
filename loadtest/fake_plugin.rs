//! A fake HAMi device plugin for tests and load: creates (or adopts) N fake GPU nodes with HAMi's
//! NVIDIA register annotation, optionally answers handshakes, and after a bind plays the plugin's
//! part of the protocol: finds the pod through the node lock, empties its to-allocate lists, sets
//! `hami.io/bind-phase: success` and releases the lock (owner-checked, compare-and-swap).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use hami_rs::model::DeviceInfo;
use hami_rs::model::annotations as keys;
use hami_rs::model::codec;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use serde_json::json;
use tokio::sync::Mutex;

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

/// Empties every served container entry of every `…-devices-to-allocate` value.
pub fn served(annotations: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    annotations
        .iter()
        .filter(|(k, _)| k.ends_with("-devices-to-allocate"))
        .map(|(k, v)| {
            let n = codec::decode_pod_devices(v).map(|c| c.len()).unwrap_or(1);
            (k.clone(), ";".repeat(n.max(1)))
        })
        .collect()
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
    let pods: Api<Pod> = Api::all(client.clone());
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
        let (client, nodes, locks, done, never_release) =
            (client.clone(), nodes.clone(), locks.clone(), done.clone(), a.never_release_lock);
        tokio::spawn(async move {
            let _turn = serial.lock().await;
            if !allocate(&client, &nodes, &locks, &p, &node, never_release).await {
                // Not this pod's turn yet (the lock names another pod): a later event retries it.
                done.lock().await.remove(&uid);
            }
        });
    }
    Ok(())
}

/// Plays the device plugin's Allocate for `p` on `node`: false when the node lock does not name
/// the pod (yet) or the pod could not be patched.
async fn allocate(
    client: &kube::Client,
    nodes: &Api<Node>,
    locks: &Mutex<HashMap<String, String>>,
    p: &Pod,
    node: &str,
    never_release: bool,
) -> bool {
    let (ns, name) = (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default());
    let annos: BTreeMap<String, String> = p.metadata.annotations.clone().unwrap_or_default();
    // The plugin finds "its" pod through the node lock; without a lock (legacy), any pending
    // pod on the node with bind-time and bind-phase allocating.
    let names_pod = |lock: Option<&str>| match lock.map(codec::decode_node_lock) {
        Some(Ok(l)) => l.owner.is_none() || l.is_held_by(&ns, &name),
        _ => annos.contains_key(keys::BIND_TIME),
    };
    let cached = locks.lock().await.get(node).cloned();
    // The node watch and the pod watch are separate streams: the cached lock may still be the
    // previous holder's (already released) when this pod's bind arrives, so read it afresh.
    let named = names_pod(cached.as_deref())
        || match nodes.get(node).await {
            Ok(n) => {
                names_pod(n.metadata.annotations.as_ref().and_then(|a| a.get(keys::NODE_LOCK)).map(String::as_str))
            }
            Err(_) => false,
        };
    if !named {
        return false;
    }
    let mut patch: serde_json::Map<String, serde_json::Value> =
        served(&annos).into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect();
    patch.insert(keys::BIND_PHASE.into(), keys::BIND_PHASE_SUCCESS.into());
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    if let Err(e) =
        api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": patch}}))).await
    {
        tracing::warn!(pod = %format_args!("{ns}/{name}"), error = %e, "allocation not recorded");
        return false;
    }
    if !never_release {
        release_lock(nodes, node, &ns, &name).await;
    }
    // What a device plugin reads at Allocate, for tests that compare scheduler modes.
    let saw: BTreeMap<&String, &String> = annos.iter().filter(|(k, _)| k.starts_with("hami.io/")).collect();
    let saw = serde_json::to_string(&saw).unwrap_or_default();
    tracing::info!(pod = %format_args!("{ns}/{name}"), %node, %saw, "allocated");
    true
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
