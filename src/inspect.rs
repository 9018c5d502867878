//! What `kubectl hami` shows, from the API server with the user's own credentials: the cluster
//! read once (nodes, pods, ResourceQuotas), accounted by the scheduler's own engine in memory, so
//! the figures are the ones hami-rs decides by; nothing is written to the cluster.

use std::fmt::Write;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, Node, Pod, ResourceQuota};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::actor::Engine;
use crate::backend::memory::{ClusterObjects, MemoryBackend};
use crate::config::SchedulerFlags;
use crate::port::dra::{DeviceClassView, DraBook, DraClass};
use crate::report::node_json;
use crate::sched::report::NodeReport;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {what} from the API server: {source}")]
    Api {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("the cluster's objects: {0}")]
    Load(#[from] crate::backend::memory::LoadError),
    #[error(transparent)]
    Engine(#[from] crate::app::Error),
    #[error("pod {0} not found")]
    NoPod(String),
    #[error("the scheduler's flags: {0}")]
    Flags(String),
    #[error("pod {name} is in several namespaces ({namespaces}): name one with -n")]
    Ambiguous { name: String, namespaces: String },
    #[error("pod {pod} does not read: {source}")]
    Pod {
        pod: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Every object of `K` in the cluster, as JSON with its kind, as a cluster file holds it.
async fn list_all<K>(client: &kube::Client, kind: &str, what: &'static str) -> Result<Vec<Value>, Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    let items = Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Api { what, source })?
        .items;
    Ok(items.into_iter().map(|o| with_kind(serde_json::to_value(o).unwrap_or_default(), kind)).collect())
}

/// A list's items carry no kind; a cluster file's do.
fn with_kind(mut v: Value, kind: &str) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.insert("kind".into(), kind.into());
        m.insert("apiVersion".into(), "v1".into());
    }
    v
}

/// The cluster as it is now: nodes, pods and ResourceQuotas, one list call each.
pub async fn read_cluster(client: &kube::Client) -> Result<ClusterObjects, Error> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Api { what: "nodes", source })?
        .items;
    let mut items: Vec<Value> =
        nodes.into_iter().map(|n| with_kind(serde_json::to_value(n).unwrap_or_default(), "Node")).collect();
    items.extend(list_all::<Pod>(client, "Pod", "pods").await?);
    items.extend(list_all::<ResourceQuota>(client, "ResourceQuota", "resourcequotas").await?);
    let text = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    Ok(ClusterObjects::parse(&text)?)
}

/// The DeviceClasses that let DRA serve one of `served` (every vendor's resource names), read
/// once; none when the cluster has no `resource.k8s.io/v1` (before Kubernetes 1.34) or the user
/// may not list them, since they only add a note.
pub async fn dra_classes(client: &kube::Client, served: &[String]) -> Vec<DraClass> {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let gvk = GroupVersionKind::gvk("resource.k8s.io", "v1", "DeviceClass");
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "deviceclasses"));
    let Ok(list) = api.list(&ListParams::default()).await else { return Vec::new() };
    let book = DraBook::default();
    for o in &list.items {
        if let Some(c) = serde_json::to_value(o).ok().and_then(|v| serde_json::from_value::<DeviceClassView>(v).ok()) {
            book.apply(&c, served);
        }
    }
    book.list()
}

/// The note `kubectl hami top` ends with when DRA may serve a resource hami-rs serves; empty when
/// none may.
pub fn dra_note(classes: &[DraClass]) -> String {
    let mut s = String::new();
    if classes.is_empty() {
        return s;
    }
    let _ = writeln!(s, "\nDeviceClasses with an extendedResourceName hami-rs serves:");
    for c in classes {
        let _ = writeln!(s, "  {} -> {}", c.class, c.resource);
    }
    let _ = writeln!(s, "Their {}.", crate::port::dra::MEANING);
    s
}

/// The scheduler's engine over `cluster`, in memory.
pub async fn engine(flags: &SchedulerFlags, cluster: ClusterObjects) -> Result<Engine<MemoryBackend>, Error> {
    Ok(crate::app::memory_engine(flags, cluster).await?)
}

/// The scheduler's configuration as the cluster runs it: the arguments of the hami-rs container of
/// the Deployment labelled `app.kubernetes.io/name=hami-rs` (in `namespace`, or the first found in
/// any), with its device config read from the ConfigMap mounted where `--device-config-file`
/// points. `why` fits with it, so its answer is the scheduler's.
pub struct SchedulerConfig {
    pub flags: SchedulerFlags,
    /// Where the flags came from, for the reader.
    pub source: String,
    /// The device config, written where `flags` point, kept while the flags are used.
    _device_config: Option<tempfile::NamedTempFile>,
}

/// `hami-rs serve`'s arguments, as the plugin reads a Deployment's.
#[derive(clap::Parser, Debug)]
#[command(name = "hami-rs")]
struct Deployed {
    #[command(flatten)]
    serve: crate::config::ServeArgs,
}

impl SchedulerConfig {
    /// The defaults (and the HAMI_* environment), saying why; an error only when the
    /// environment holds a value that does not read.
    pub fn defaults(why: &str) -> Result<SchedulerConfig, Error> {
        let flags = <Deployed as clap::Parser>::try_parse_from(["hami-rs"])
            .map_err(|e| Error::Flags(e.to_string().lines().next().unwrap_or_default().to_owned()))?
            .serve
            .sched;
        Ok(SchedulerConfig { flags, source: format!("the scheduler's defaults ({why})"), _device_config: None })
    }
}

/// Reads the scheduler's configuration from its Deployment (see [`SchedulerConfig`]); the
/// defaults, saying why, when there is none or it cannot be read.
pub async fn scheduler_config(client: &kube::Client, namespace: Option<&str>) -> Result<SchedulerConfig, Error> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: Api<Deployment> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let lp = ListParams::default().labels("app.kubernetes.io/name=hami-rs");
    let list = match api.list(&lp).await {
        Ok(l) => l.items,
        Err(e) => return SchedulerConfig::defaults(&format!("the hami-rs Deployment could not be read: {e}")),
    };
    let Some(d) = list.into_iter().next() else {
        return SchedulerConfig::defaults("no Deployment labelled app.kubernetes.io/name=hami-rs");
    };
    let ns = d.metadata.namespace.clone().unwrap_or_default();
    let name = format!("{ns}/{}", d.metadata.name.clone().unwrap_or_default());
    let spec = d.spec.template.spec;
    let Some(c) = spec.as_ref().and_then(|s| s.containers.iter().find(|c| c.name == "hami-rs")) else {
        return SchedulerConfig::defaults(&format!("Deployment {name} has no hami-rs container"));
    };
    let args: Vec<&str> = c.args.iter().flatten().map(String::as_str).skip_while(|a| *a == "serve").collect();
    let deployed = match <Deployed as clap::Parser>::try_parse_from(std::iter::once("hami-rs").chain(args)) {
        Ok(d) => d,
        Err(e) => {
            let first = e.to_string().lines().next().unwrap_or_default().to_owned();
            return SchedulerConfig::defaults(&format!("Deployment {name}'s arguments do not read: {first}"));
        }
    };
    let mut flags = deployed.serve.sched;
    let mut file = None;
    if let Some(path) = flags.device_config_file.clone() {
        // The ConfigMap volume mounted at that path, or at its directory.
        let mounted = c.volume_mounts.iter().flatten().find_map(|m| {
            let at = std::path::Path::new(&m.mount_path);
            let key = match &m.sub_path {
                Some(k) if at == path => Some(k.clone()),
                None if path.parent() == Some(at) => path.file_name().map(|f| f.to_string_lossy().into_owned()),
                _ => None,
            }?;
            let vol = spec.as_ref()?.volumes.iter().flatten().find(|v| v.name == m.name)?;
            Some((vol.config_map.as_ref()?.name.clone(), key))
        });
        let text = match mounted {
            Some((cm, key)) => Api::<ConfigMap>::namespaced(client.clone(), &ns)
                .get(&cm)
                .await
                .ok()
                .and_then(|c| c.data)
                .and_then(|mut d| d.remove(&key)),
            None => None,
        };
        match text.map(|t| write_temp(&t)) {
            Some(Ok(f)) => {
                flags.device_config_file = Some(f.path().to_path_buf());
                file = Some(f);
            }
            _ => {
                flags.device_config_file = None;
                return Ok(SchedulerConfig {
                    flags,
                    source: format!("Deployment {name} (its device config could not be read: the chart's defaults)"),
                    _device_config: None,
                });
            }
        }
    }
    Ok(SchedulerConfig { flags, source: format!("Deployment {name}"), _device_config: file })
}

fn write_temp(text: &str) -> std::io::Result<tempfile::NamedTempFile> {
    use std::io::Write as _;
    let mut f = tempfile::NamedTempFile::new()?;
    f.write_all(text.as_bytes())?;
    Ok(f)
}

fn pct(used: u64, total: u64) -> String {
    (used.saturating_mul(100)).checked_div(total).map_or_else(|| "-".into(), |p| format!("{p}%"))
}

/// Which pods and nodes `top` shows, and in what order.
#[derive(Debug, Default)]
pub struct TopFilter {
    /// Only this node.
    pub node: Option<String>,
    /// Only pods of this namespace in the pod lists and counts.
    pub namespace: Option<String>,
    /// `name` (default), `memory` (most allocated first), `free` (most free first), `pods`.
    pub sort_by: Option<String>,
}

/// The orders `--sort-by` takes.
pub const SORT_KEYS: [&str; 4] = ["name", "memory", "free", "pods"];

/// One node, as `top nodes` shows it.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    pub node: String,
    pub devices: usize,
    pub types: Vec<String>,
    #[serde(rename = "memoryUsedMiB")]
    pub memory_used_mib: u64,
    #[serde(rename = "memoryTotalMiB")]
    pub memory_total_mib: u64,
    pub cores_used: u64,
    pub cores_total: u64,
    pub slots_used: u64,
    pub slots_total: u64,
    pub pods: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unusable: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_for: Option<String>,
}

/// One device, as `top gpus` shows it.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuRow {
    pub node: String,
    pub index: u32,
    pub uuid: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub numa: i32,
    pub state: &'static str,
    #[serde(rename = "memoryUsedMiB")]
    pub memory_used_mib: u64,
    #[serde(rename = "memoryTotalMiB")]
    pub memory_total_mib: u64,
    pub cores_used: u32,
    pub cores_total: u32,
    pub slots_used: u32,
    pub slots_total: u32,
    pub pods: Vec<PodOnGpu>,
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodOnGpu {
    pub pod: String,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: u64,
    pub cores: u32,
}

/// An unknown node or order.
#[derive(Debug, thiserror::Error)]
pub enum TopError {
    #[error("node {0} not found")]
    NoNode(String),
    #[error("--sort-by {0:?}: one of {keys}", keys = SORT_KEYS.join(", "))]
    SortKey(String),
}

fn in_namespace(pod: &str, ns: Option<&str>) -> bool {
    ns.is_none_or(|ns| pod.split_once('/').is_some_and(|(p, _)| p == ns))
}

fn check(reports: &[NodeReport], f: &TopFilter) -> Result<(), TopError> {
    if let Some(n) = &f.node
        && !reports.iter().any(|r| r.name.as_str() == n)
    {
        return Err(TopError::NoNode(n.clone()));
    }
    match f.sort_by.as_deref() {
        Some(k) if !SORT_KEYS.contains(&k) => Err(TopError::SortKey(k.to_owned())),
        _ => Ok(()),
    }
}

/// Orders `rows` by `--sort-by`, each row read as (memory used, memory total, pods); name order
/// (the reports') stays for `name`, and for equal keys.
fn sort_rows<R>(rows: &mut [R], f: &TopFilter, key: impl Fn(&R) -> (u64, u64, usize)) {
    let by = |r: &R| {
        let (used, total, pods) = key(r);
        match f.sort_by.as_deref() {
            Some("memory") => used,
            Some("free") => total.saturating_sub(used),
            Some("pods") => pods as u64,
            _ => 0,
        }
    };
    rows.sort_by_key(|r| std::cmp::Reverse(by(r)));
}

/// One row per node with devices, or whose devices are unusable (it registered something that
/// does not read); nodes without devices otherwise are left out.
pub fn node_rows(
    engine: &Engine<MemoryBackend>,
    reports: &[NodeReport],
    f: &TopFilter,
) -> Result<Vec<NodeRow>, TopError> {
    check(reports, f)?;
    let mut rows = Vec::new();
    for r in reports.iter().filter(|r| f.node.as_deref().is_none_or(|n| r.name.as_str() == n)) {
        let n = node_json(r, engine.vendors());
        if n.devices.is_empty() && n.unusable.is_none() && f.node.is_none() {
            continue;
        }
        let sum = |g: fn(&crate::report::DeviceJson) -> u64| n.devices.iter().map(g).sum::<u64>();
        let mut types: Vec<String> = n.devices.iter().map(|d| d.ty.clone()).collect();
        types.dedup();
        let mut pods: Vec<String> = r
            .allocs
            .iter()
            .map(|a| format!("{}/{}", a.namespace, a.name))
            .filter(|p| in_namespace(p, f.namespace.as_deref()))
            .collect();
        pods.sort();
        rows.push(NodeRow {
            node: n.name.clone(),
            devices: n.devices.len(),
            types,
            memory_used_mib: sum(|d| d.mem_used),
            memory_total_mib: sum(|d| d.mem_total),
            cores_used: sum(|d| d.cores_used.into()),
            cores_total: sum(|d| d.cores_total.into()),
            slots_used: sum(|d| d.used.into()),
            slots_total: sum(|d| d.count.into()),
            pods,
            unusable: n.unusable.clone(),
            held_for: n.held_for.clone(),
        });
    }
    sort_rows(&mut rows, f, |r| (r.memory_used_mib, r.memory_total_mib, r.pods.len()));
    Ok(rows)
}

/// One row per device.
pub fn gpu_rows(
    engine: &Engine<MemoryBackend>,
    reports: &[NodeReport],
    f: &TopFilter,
) -> Result<Vec<GpuRow>, TopError> {
    check(reports, f)?;
    let mut rows = Vec::new();
    for r in reports.iter().filter(|r| f.node.as_deref().is_none_or(|n| r.name.as_str() == n)) {
        let on = crate::report::pods_on_devices(r);
        let n = node_json(r, engine.vendors());
        for d in &n.devices {
            let state = crate::report::DeviceState::of(&n, d).word();
            let pods = on
                .get(&d.uuid)
                .into_iter()
                .flatten()
                .filter(|(p, _, _)| in_namespace(p, f.namespace.as_deref()))
                .map(|(p, m, c)| PodOnGpu { pod: p.clone(), memory_mib: *m, cores: *c })
                .collect();
            rows.push(GpuRow {
                node: n.name.clone(),
                index: d.index,
                uuid: d.uuid.clone(),
                ty: d.ty.clone(),
                numa: d.numa,
                state,
                memory_used_mib: d.mem_used,
                memory_total_mib: d.mem_total,
                cores_used: d.cores_used,
                cores_total: d.cores_total,
                slots_used: d.used,
                slots_total: d.count,
                pods,
            });
        }
    }
    sort_rows(&mut rows, f, |r| (r.memory_used_mib, r.memory_total_mib, r.pods.len()));
    Ok(rows)
}

/// `top nodes` as a table; `wide` adds the device types and the pods.
pub fn node_table(rows: &[NodeRow], wide: bool) -> String {
    let mut head = vec!["NODE", "DEVICES", "MEMORY (MiB)", "CORES", "SLOTS", "PODS"];
    if wide {
        head.extend(["TYPES", "POD NAMES"]);
    }
    let mut t = vec![head.into_iter().map(str::to_owned).collect::<Vec<_>>()];
    for r in rows {
        let name = match (&r.unusable, &r.held_for) {
            (Some(why), _) => format!("{} (unusable: {why})", r.node),
            (None, Some(uid)) => format!("{} (held for {uid})", r.node),
            (None, None) => r.node.clone(),
        };
        let mut row = vec![
            name,
            r.devices.to_string(),
            format!("{}/{} {}", r.memory_used_mib, r.memory_total_mib, pct(r.memory_used_mib, r.memory_total_mib)),
            format!("{}/{}", r.cores_used, r.cores_total),
            format!("{}/{}", r.slots_used, r.slots_total),
            r.pods.len().to_string(),
        ];
        if wide {
            row.extend([r.types.join(","), r.pods.join(",")]);
        }
        t.push(row);
    }
    table(&t)
}

/// `top gpus` as a table; `wide` adds the NUMA node and each pod's share.
pub fn gpu_table(rows: &[GpuRow], wide: bool) -> String {
    let mut head = vec!["NODE", "INDEX", "UUID", "TYPE", "STATE", "MEMORY (MiB)", "CORES", "SLOTS", "PODS"];
    if wide {
        head.insert(5, "NUMA");
    }
    let mut t = vec![head.into_iter().map(str::to_owned).collect::<Vec<_>>()];
    for r in rows {
        let pods: Vec<String> = if wide {
            r.pods.iter().map(|p| format!("{} ({} MiB, {} cores)", p.pod, p.memory_mib, p.cores)).collect()
        } else {
            r.pods.iter().map(|p| p.pod.clone()).collect()
        };
        let mut row = vec![
            r.node.clone(),
            r.index.to_string(),
            r.uuid.clone(),
            r.ty.clone(),
            r.state.to_owned(),
            format!("{}/{} {}", r.memory_used_mib, r.memory_total_mib, pct(r.memory_used_mib, r.memory_total_mib)),
            format!("{}/{}", r.cores_used, r.cores_total),
            format!("{}/{}", r.slots_used, r.slots_total),
            pods.join(", "),
        ];
        if wide {
            row.insert(5, r.numa.to_string());
        }
        t.push(row);
    }
    table(&t)
}

/// Columns padded to their widest cell, as kubectl prints them.
fn table(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0usize; n];
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}   ", w = width[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Finds the pod: in `namespace`, or with `all_namespaces` in whichever namespace has one of
/// that name (an error when several do).
pub async fn find_pod(client: &kube::Client, namespace: &str, all_namespaces: bool, name: &str) -> Result<Pod, Error> {
    if !all_namespaces {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        return pods
            .get_opt(name)
            .await
            .map_err(|source| Error::Api { what: "the pod", source })?
            .ok_or_else(|| Error::NoPod(format!("{namespace}/{name}")));
    }
    let lp = ListParams::default().fields(&format!("metadata.name={name}"));
    let mut found =
        Api::<Pod>::all(client.clone()).list(&lp).await.map_err(|source| Error::Api { what: "pods", source })?.items;
    match found.len() {
        0 => Err(Error::NoPod(format!("{name} (in any namespace)"))),
        1 => Ok(found.remove(0)),
        _ => {
            let all: Vec<String> = found.iter().map(|p| p.metadata.namespace.clone().unwrap_or_default()).collect();
            Err(Error::Ambiguous { name: name.to_owned(), namespaces: all.join(", ") })
        }
    }
}

/// What `why` found, as `-o json|yaml` prints it.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Why {
    pub pod: String,
    pub phase: String,
    /// The node it is bound to, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_to: Option<String>,
    /// A bound pod's devices, as the scheduler recorded them (`uuid (MiB, cores)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
    /// Where the scheduler's configuration came from.
    pub configuration: String,
    pub events: Vec<WhyEvent>,
    /// For a pod not bound: the fit against the cluster as it is now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fit>,
    /// The pod's group (gang), when it belongs to one: placed all or none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<WhyGroup>,
}

/// A member's group as the cluster has it.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhyGroup {
    pub group: String,
    pub kind: &'static str,
    /// The minimum of members placed together (`None`: no PodGroup object found, or no gang).
    pub minimum: Option<u32>,
    pub members: usize,
    pub bound: usize,
    /// What the group waits for, in a few words.
    pub state: String,
}

#[derive(Debug, serde::Serialize)]
pub struct WhyEvent {
    #[serde(rename = "type")]
    pub kind: String,
    pub reason: String,
    pub source: String,
    pub message: String,
}

#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fit {
    /// The node hami-rs would choose now, if any fits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_choose: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// On how many nodes each reason was given, most first.
    pub reasons: Vec<(String, usize)>,
    /// The nodes that came closest, with what they lack.
    pub closest: Vec<Closest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<Preemption>,
    /// Every node that did not fit, with its reason.
    pub nodes: BTreeMap<String, String>,
}

#[derive(Debug, serde::Serialize)]
pub struct Closest {
    pub node: String,
    pub reason: String,
    /// How much of what the pod asks of one device the closest device lacks, when the reason says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub short: Option<String>,
}

#[derive(Debug, serde::Serialize)]
pub struct Preemption {
    pub node: String,
    pub victims: Vec<String>,
}

/// How many nodes the summary names as the closest.
const CLOSEST: usize = 3;

/// The reason words of one node's text (`1/4 CardCordoned, 3/4 CardInsufficientMemory (…)` or
/// `node unregistered (…)`).
fn reason_words(text: &str) -> Vec<String> {
    let head = text.split(" (").next().unwrap_or(text);
    let words: Vec<String> = head
        .split(", ")
        .filter_map(|item| {
            let (count, word) = item.split_once(' ')?;
            count.contains('/').then(|| word.trim().to_owned())
        })
        .collect();
    if words.is_empty() { vec![head.trim().to_owned()] } else { words }
}

/// What one device was asked, how much of it was missing, and the unit.
type Shortfall = (u64, u64, String);

/// What the detail says the device lacked: `requested R <unit>, free F <unit>` read as R - F.
fn shortfall(text: &str) -> Option<Shortfall> {
    let at = text.find("requested ")?;
    let rest = &text[at + "requested ".len()..];
    let mut it = rest.split([' ', ',', ')']).filter(|w| !w.is_empty());
    let asked: u64 = it.next()?.parse().ok()?;
    let unit = it.next()?.to_owned();
    let free_at = rest.find("free ")?;
    let free: u64 = rest[free_at + 5..].split([' ', ',', ')']).next()?.parse().ok()?;
    Some((asked, asked.saturating_sub(free), unit))
}

/// The summary of the failed nodes: reasons counted, and the nodes closest to fitting (the
/// smallest shortfall relative to what was asked; nodes whose reason says no amount come last).
pub fn summarize(failed: &BTreeMap<String, String>) -> (Vec<(String, usize)>, Vec<Closest>) {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for text in failed.values() {
        for w in reason_words(text) {
            *by.entry(w).or_default() += 1;
        }
    }
    let mut reasons: Vec<(String, usize)> = by.into_iter().collect();
    reasons.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let mut ranked: Vec<(&String, &String, Option<Shortfall>)> =
        failed.iter().map(|(n, t)| (n, t, shortfall(t))).collect();
    ranked.sort_by(|a, b| {
        let key = |s: &Option<Shortfall>| s.as_ref().map(|(asked, short, _)| *short as f64 / (*asked).max(1) as f64);
        match (key(&a.2), key(&b.2)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        }
        .then_with(|| a.0.cmp(b.0))
    });
    let closest = ranked
        .into_iter()
        .take(CLOSEST)
        .map(|(n, t, s)| Closest {
            node: n.clone(),
            reason: t.clone(),
            short: s.map(|(_, short, unit)| format!("{short} {unit} short")),
        })
        .collect();
    (reasons, closest)
}

/// Why `namespace/name` is where it is, or pending: its Events and, when it is not bound, the fit
/// run afresh against the cluster as read with the scheduler's configuration, summarized.
pub async fn why(client: &kube::Client, cfg: &SchedulerConfig, pod: &Pod) -> Result<Why, Error> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
    let mut out = Why {
        pod: format!("{namespace}/{name}"),
        phase: pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default(),
        bound_to: node.clone(),
        configuration: cfg.source.clone(),
        ..Why::default()
    };

    let events: Api<Event> = Api::namespaced(client.clone(), &namespace);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let mut events = events.list(&lp).await.map_err(|source| Error::Api { what: "events", source })?.items;
    events.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0).or(e.event_time.clone().map(|t| t.0)));
    out.events = events
        .iter()
        .rev()
        .take(12)
        .rev()
        .map(|e| WhyEvent {
            kind: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            source: e
                .source
                .as_ref()
                .and_then(|s| s.component.clone())
                .filter(|c| !c.is_empty())
                .or_else(|| e.reporting_component.clone())
                .unwrap_or_default(),
            message: e.message.clone().unwrap_or_default().replace('\n', " "),
        })
        .collect();

    let mut view: crate::model::PodView = serde_json::to_value(pod)
        .and_then(serde_json::from_value)
        .map_err(|source| Error::Pod { pod: out.pod.clone(), source })?;
    let group = match crate::model::group::group_of(&view) {
        Some((id, inline)) => Some((read_group(client, &id).await?.or(inline), id)),
        None => None,
    };
    if node.is_some() {
        if let Some((spec, id)) = &group {
            out.group = Some(group_state(id, *spec, &read_cluster(client).await?.pods));
        }
        // Bound: what it holds, as the scheduler recorded it; no fit to run.
        let vendors = crate::app::vendors_from(&cfg.flags)?;
        if let Ok(devices) = vendors.decode_allocation(&view) {
            for (_, containers) in &devices.0 {
                for d in containers.iter().flatten() {
                    out.holds.push(format!("{} ({} MiB, {} cores)", d.uuid, d.usedmem.0, d.usedcores));
                }
            }
        }
        return Ok(out);
    }
    let mut cluster = read_cluster(client).await?;
    if let Some((spec, id)) = &group {
        out.group = Some(group_state(id, *spec, &cluster.pods));
        if spec.is_some() && id.kind != crate::model::group::GroupKind::Koordinator {
            cluster.groups.push(crate::model::group::PodGroupObject { id: id.clone(), spec: *spec });
        }
    }
    // The pod is fitted as if it were new: whatever it holds now is left out of the cluster.
    cluster.pods.retain(|p| !(p.metadata.namespace == namespace && p.metadata.name == name));
    let engine = engine(&cfg.flags, cluster).await?;
    view.spec.node_name = None;
    // What the scheduler wrote on it goes too, as on a pod being created.
    for k in engine.vendors().scheduler_keys() {
        view.metadata.annotations.remove(k.as_str());
    }
    let webhook = crate::admission::Config { quota: engine.quota().cloned(), ..Default::default() };
    let sim = crate::simulate::simulate_pods_with(&engine, &webhook, vec![view], true).await?;
    if let Some(r) = sim.pods.into_iter().next() {
        let (reasons, closest) = summarize(&r.failed_nodes);
        let preemption = match (&r.node, r.preempted) {
            (Some(_), Some(plan)) => Some(Preemption {
                node: plan.node.clone(),
                victims: plan.victims.iter().map(ToString::to_string).collect(),
            }),
            _ => None,
        };
        out.fit = Some(Fit {
            would_choose: r.node.filter(|_| preemption.is_none()),
            error: r.error,
            reasons,
            closest,
            preemption,
            nodes: r.failed_nodes,
        });
    }
    Ok(out)
}

/// The PodGroup object of `id`'s kind and name; `None` when the API or the object is absent.
async fn read_group(
    client: &kube::Client,
    id: &crate::model::group::GroupId,
) -> Result<Option<crate::model::group::GroupSpec>, Error> {
    use kube::api::DynamicObject;
    let Some(res) = crate::backend::kube::watch::pod_groups::resource(id.kind) else { return Ok(None) };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &id.namespace, &res);
    match api.get_opt(&id.name).await {
        Ok(Some(o)) => Ok(serde_json::to_value(&o)
            .ok()
            .and_then(|v| crate::model::group::PodGroupObject::from_value(&v).ok())
            .and_then(|g| g.spec)),
        Ok(None) => Ok(None),
        // The kind's API is not served: its pods are placed one by one.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(source) => Err(Error::Api { what: "podgroups", source }),
    }
}

/// The group's members as the cluster has them, against its minimum.
fn group_state(
    id: &crate::model::group::GroupId,
    spec: Option<crate::model::group::GroupSpec>,
    pods: &[crate::model::PodView],
) -> WhyGroup {
    let members: Vec<&crate::model::PodView> = pods
        .iter()
        .filter(|p| !p.is_finished() && crate::model::group::group_of(p).is_some_and(|(g, _)| g == *id))
        .collect();
    let bound = members.iter().filter(|p| p.spec.node_name.as_deref().is_some_and(|n| !n.is_empty())).count();
    let state = match spec {
        None => "no PodGroup object found (or it is no gang): its pods are placed one by one".to_owned(),
        Some(s) if bound >= s.min as usize => "placed: its minimum of members is bound".to_owned(),
        Some(s) if members.len() < s.min as usize => format!("waiting for {} of {} members", members.len(), s.min),
        Some(s) => format!("{} of {} members exist; placed all or none", members.len(), s.min),
    };
    WhyGroup {
        group: id.to_string(),
        kind: id.kind.as_str(),
        minimum: spec.map(|s| s.min),
        members: members.len(),
        bound,
        state,
    }
}

/// `why` as text: the pod, its group, its Events, and for a pending pod the summary (all nodes
/// with `all`).
pub fn why_text(w: &Why, all: bool) -> String {
    let mut out = String::new();
    if let Some(g) = &w.group {
        let min = g.minimum.map_or_else(|| "?".to_owned(), |m| m.to_string());
        let _ = writeln!(
            out,
            "Group {} ({}): {} members, {} bound, minimum {min}: {}",
            g.group, g.kind, g.members, g.bound, g.state
        );
    }
    let _ = writeln!(
        out,
        "Pod {}: {}, {}",
        w.pod,
        w.phase,
        w.bound_to.as_deref().map_or("not bound".into(), |n| format!("bound to {n}"))
    );
    if !w.holds.is_empty() {
        let _ = writeln!(out, "  holds: {}", w.holds.join(", "));
    }
    let _ = writeln!(out, "\nEvents:");
    if w.events.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for e in &w.events {
        let _ = writeln!(out, "  {:<8} {:<24} {:<16} {}", e.kind, e.reason, e.source, e.message);
    }
    let Some(f) = &w.fit else {
        if w.bound_to.is_some() {
            let _ = writeln!(out, "\nIt is placed: nothing pending to explain.");
        }
        return out;
    };
    let _ = writeln!(out, "\nFit against the cluster as it is now (read-only, with {}):", w.configuration);
    match (&f.would_choose, &f.preemption, &f.error) {
        (_, Some(p), _) => {
            let _ = writeln!(
                out,
                "  no node fits; evicting these pods of lower priority on {} would let it fit there: {}",
                p.node,
                p.victims.join(", ")
            );
        }
        (Some(n), None, _) => {
            let _ = writeln!(out, "  fits now: hami-rs would choose {n} (kube-scheduler has not filtered it since)");
        }
        (None, None, e) => {
            let _ = writeln!(out, "  {}", e.as_deref().unwrap_or("no node fits"));
        }
    }
    if !f.reasons.is_empty() {
        let counted: Vec<String> = f.reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        let _ = writeln!(out, "  {} nodes do not fit: {}", f.nodes.len(), counted.join(", "));
    }
    if !f.closest.is_empty() {
        let _ = writeln!(out, "  closest:");
        for c in &f.closest {
            let short = c.short.as_deref().map_or(String::new(), |s| format!(" [{s}]"));
            let _ = writeln!(out, "    {}: {}{short}", c.node, c.reason);
        }
    }
    if all {
        let _ = writeln!(out, "  every node:");
        for (node, reason) in &f.nodes {
            let _ = writeln!(out, "    {node}: {reason}");
        }
    } else if f.nodes.len() > f.closest.len() {
        let _ = writeln!(out, "  (--all lists every node)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_every_column_but_the_last_to_its_widest_cell() {
        let rows = [
            vec!["NODE".to_owned(), "MEMORY".into(), "PODS".into()],
            vec!["gpu-long-name".to_owned(), "1/2".into(), "a, b".into()],
        ];
        assert_eq!(table(&rows), "NODE            MEMORY   PODS\ngpu-long-name   1/2      a, b\n");
    }

    #[test]
    fn the_summary_counts_reasons_by_node_and_names_the_closest_nodes_first() {
        let failed: BTreeMap<String, String> = [
            ("a", "1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory (GPU-a: requested 30000 MiB, free 24768 MiB)"),
            ("b", "1/4 CardCordoned, 3/4 CardInsufficientMemory (GPU-b: requested 30000 MiB, free 29000 MiB)"),
            ("c", "2/2 CardInsufficientCore (GPU-c: requested 60 cores, free 10 cores)"),
            ("cpu", "node unregistered (no devices registered)"),
            ("d", "1/1 CardInsufficientMemory"),
        ]
        .into_iter()
        .map(|(n, t)| (n.to_owned(), t.to_owned()))
        .collect();
        let (reasons, closest) = summarize(&failed);
        assert_eq!(
            reasons,
            [
                ("CardInsufficientMemory".to_owned(), 3),
                ("AllocatedCardsInsufficientRequest".to_owned(), 1),
                ("CardCordoned".to_owned(), 1),
                ("CardInsufficientCore".to_owned(), 1),
                ("node unregistered".to_owned(), 1),
            ]
        );
        let names: Vec<(&str, Option<&str>)> = closest.iter().map(|c| (c.node.as_str(), c.short.as_deref())).collect();
        assert_eq!(
            names,
            [("b", Some("1000 MiB short")), ("a", Some("5232 MiB short")), ("c", Some("50 cores short"))]
        );
    }

    #[test]
    fn a_pending_pods_text_leads_with_the_summary_and_lists_every_node_only_when_asked() {
        let failed: BTreeMap<String, String> =
            (0..50).map(|k| (format!("n{k:02}"), "1/1 CardInsufficientMemory".to_owned())).collect();
        let (reasons, closest) = summarize(&failed);
        let w = Why {
            pod: "team/huge".into(),
            phase: "Pending".into(),
            configuration: "Deployment kube-system/hami-rs".into(),
            fit: Some(Fit { reasons, closest, nodes: failed, ..Fit::default() }),
            ..Why::default()
        };
        let text = why_text(&w, false);
        assert!(text.contains("  50 nodes do not fit: 50 CardInsufficientMemory\n"), "{text}");
        assert!(text.contains("(read-only, with Deployment kube-system/hami-rs)"), "{text}");
        assert_eq!(text.matches("CardInsufficientMemory").count(), 4, "the count and the three closest: {text}");
        assert!(text.contains("(--all lists every node)"), "{text}");
        assert_eq!(why_text(&w, true).matches("1/1 CardInsufficientMemory").count(), 53, "and every node");
    }

    #[test]
    fn a_bound_pod_is_described_as_bound_with_what_it_holds_and_no_fit() {
        let w = Why {
            pod: "team/web".into(),
            phase: "Running".into(),
            bound_to: Some("gpu-7".into()),
            holds: vec!["GPU-1 (3000 MiB, 30 cores)".into()],
            ..Why::default()
        };
        let text = why_text(&w, true);
        assert!(
            text.starts_with("Pod team/web: Running, bound to gpu-7\n  holds: GPU-1 (3000 MiB, 30 cores)\n"),
            "{text}"
        );
        assert!(!text.contains("would choose") && text.contains("It is placed"), "{text}");
    }

    #[test]
    fn top_ends_with_a_note_only_when_dra_may_serve_a_resource_of_hami_rs() {
        assert_eq!(dra_note(&[]), "");
        let c = crate::port::dra::DraClass { class: "gpu.example.com".into(), resource: "nvidia.com/gpu".into() };
        let note = dra_note(&[c]);
        assert!(note.contains("  gpu.example.com -> nvidia.com/gpu\n"), "{note}");
        assert!(note.contains("hami-rs does not see or count those devices"), "{note}");
    }

    #[test]
    fn percentages_round_down_and_say_so_when_there_is_nothing() {
        assert_eq!(pct(3000, 32768), "9%");
        assert_eq!(pct(0, 0), "-");
        assert_eq!(pct(16384, 16384), "100%");
    }
}
