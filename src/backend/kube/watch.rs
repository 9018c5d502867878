//! Watchers and the registration loop of the Kubernetes backend: nodes (label selector), pods,
//! ResourceQuotas and the kube-scheduler sidecar's Lease feed the engine; every 15 s the leader
//! runs HAMi's handshake/health round and labels scheduler pods leader/follower. None of this runs
//! on the filter path, and nothing here holds what the filter path waits on.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use kube::api::{Api, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use crate::backend::Backend;
use crate::backend::Readiness;
use crate::model::annotations as keys;
use crate::model::codec::{self, Handshake};
use crate::model::pod::NodeView;
use crate::model::{PodUid, PodView, VendorId};
use crate::port::Observer;
use crate::sched::quota_book::QuotaBook;
use crate::vendor::{Cleanup, Discovery, HealthRule};

use super::{KubeBackend, to_view};

/// How often the registration round runs (HAMi: 15 s).
const ROUND: Duration = Duration::from_secs(15);
/// A `Requesting_…` handshake older than this needs the allocatable fallback (HAMi: 60 s).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// Following the kube-scheduler sidecar's Lease: HAMi does not campaign, it leads while the Lease's
/// holder starts with its hostname and has not expired.
#[derive(Clone, Debug)]
pub struct LeaderOptions {
    pub lease_name: String,
    pub lease_namespace: String,
    /// This replica's identity prefix (the hostname, as kube-scheduler writes `<hostname>_<uuid>`).
    pub identity: String,
}

#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    pub node_selector: Option<String>,
    pub leader: Option<LeaderOptions>,
    /// Namespace and name of this scheduler's own pod (`POD_NAMESPACE`, `POD_NAME`).
    pub own_pod: Option<(String, String)>,
}

/// Starts every watcher and the registration loop on the current runtime.
pub fn start<O: Observer>(
    engine: O,
    backend: KubeBackend,
    readiness: Readiness,
    quota: Arc<QuotaBook>,
    opts: WatchOptions,
) {
    let nodes_synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pods_synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let quota_synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (kick_tx, kick_rx) = tokio::sync::mpsc::channel::<()>(16);
    let (returned_tx, returned_rx) = tokio::sync::mpsc::unbounded_channel::<String>();

    tokio::spawn(watch_nodes(
        engine.clone(),
        backend.clone(),
        opts.node_selector.clone(),
        nodes_synced.clone(),
        kick_tx.clone(),
        returned_tx,
    ));
    tokio::spawn(watch_pods(engine.clone(), backend.clone(), pods_synced.clone(), returned_rx));
    tokio::spawn(watch_quotas(backend.clone(), quota, quota_synced.clone()));
    match &opts.leader {
        Some(l) => {
            tokio::spawn(follow_lease(backend.clone(), l.clone(), readiness.clone(), kick_tx.clone()));
        }
        None => readiness.leader.store(true, Ordering::SeqCst),
    }
    {
        let r = readiness.clone();
        tokio::spawn(async move {
            while !(nodes_synced.load(Ordering::SeqCst)
                && pods_synced.load(Ordering::SeqCst)
                && quota_synced.load(Ordering::SeqCst))
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            r.synced.store(true, Ordering::SeqCst);
            tracing::info!("caches synced");
        });
    }
    tokio::spawn(registration_loop(engine, backend, readiness, opts, kick_rx));
}

/// Labels and annotations (lock values aside) and capacity decide devices; status heartbeats do not.
fn registration_changed(old: Option<&NodeView>, new: &NodeView) -> bool {
    let Some(old) = old else { return true };
    let strip = |v: &NodeView| {
        let mut a = v.metadata.annotations.clone();
        a.remove(keys::NODE_LOCK);
        a.remove(keys::CAMBRICON_LOCK);
        a
    };
    old.metadata.labels != new.metadata.labels || strip(old) != strip(new) || old.status.capacity != new.status.capacity
}

async fn watch_nodes<O: Observer>(
    engine: O,
    backend: KubeBackend,
    selector: Option<String>,
    synced: Arc<std::sync::atomic::AtomicBool>,
    kick: tokio::sync::mpsc::Sender<()>,
    returned: tokio::sync::mpsc::UnboundedSender<String>,
) {
    let api: Api<Node> = Api::all(backend.client());
    let mut cfg = watcher::Config::default();
    if let Some(s) = &selector {
        cfg = cfg.labels(s);
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut stream = watcher::watcher(api, cfg).default_backoff().boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(ev)) => match ev {
                Event::Init => seen.clear(),
                Event::InitApply(n) | Event::Apply(n) => {
                    let view: Arc<NodeView> = Arc::new(to_view(&n));
                    let name = view.metadata.name.clone();
                    seen.insert(name.clone());
                    let old = backend.cache_node(view.clone());
                    if registration_changed(old.as_deref(), &view) {
                        let came_back = engine.was_removed(&name);
                        engine.register_node(view).await;
                        if old.is_none() {
                            let _ = kick.try_send(());
                        }
                        // A node deleted and created again under its name: the pods still bound
                        // to it hold its devices again (the pod watcher observes them anew).
                        if came_back {
                            let _ = returned.send(name);
                        }
                    }
                }
                Event::Delete(n) => {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    backend.uncache_node(&name);
                    engine.remove_node(&name);
                }
                Event::InitDone => {
                    for v in backend.cached_nodes() {
                        if !seen.contains(&v.metadata.name) {
                            backend.uncache_node(&v.metadata.name);
                            engine.remove_node(&v.metadata.name);
                        }
                    }
                    synced.store(true, Ordering::SeqCst);
                }
            },
            Ok(None) => return,
            Err(e) => {
                crate::metrics::watch_restart("nodes");
                tracing::warn!(error = %e, "node watch failed; retrying");
            }
        }
    }
}

/// Whether resourceVersion `a` is older than `b`. The API server's versions are etcd revisions
/// (decimal integers, increasing with every write); anything else is never called older.
fn older(a: Option<&str>, b: Option<&str>) -> bool {
    match (a.and_then(|v| v.parse::<u64>().ok()), b.and_then(|v| v.parse::<u64>().ok())) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    }
}

/// Whether a pod concerns the scheduler: annotated by it, or requesting a managed resource.
fn concerns_us(p: &PodView, managed: &HashSet<String>) -> bool {
    p.annotation(keys::ASSIGNED_NODE).is_some()
        || p.all_containers()
            .any(|c| c.resources.limits.keys().chain(c.resources.requests.keys()).any(|k| managed.contains(k)))
}

async fn watch_pods<O: Observer>(
    engine: O,
    backend: KubeBackend,
    synced: Arc<std::sync::atomic::AtomicBool>,
    mut returned: tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let api: Api<Pod> = Api::all(backend.client());
    let managed: HashSet<String> = engine.vendors().resource_names().into_iter().collect();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut stream = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
    loop {
        let next = tokio::select! {
            ev = stream.try_next() => ev,
            Some(node) = returned.recv() => {
                // Observed here, between pod events, so the cache is what the engine last saw.
                for p in backend.cached_pods_on(&node) {
                    engine.observe_pod(&p);
                }
                continue;
            }
        };
        match next {
            Ok(Some(ev)) => match ev {
                Event::Init => seen.clear(),
                Event::InitApply(p) | Event::Apply(p) => {
                    let view: PodView = to_view(&p);
                    if !concerns_us(&view, &managed) {
                        continue;
                    }
                    seen.insert((view.metadata.namespace.clone(), view.metadata.name.clone()));
                    // A state older than the cached one (the answer to this process's own patch,
                    // or a newer event) is left out: a re-list served from a snapshot taken before
                    // a filter or bind, or an event that was in flight during one, would otherwise
                    // move the pod back to an earlier decision and drop what it holds now.
                    if backend
                        .cached_resource_version(&view.metadata.namespace, &view.metadata.name)
                        .is_some_and(|c| older(view.metadata.resource_version.as_deref(), c.as_deref()))
                    {
                        continue;
                    }
                    engine.observe_pod(&view);
                    backend.cache_pod(&view);
                }
                Event::Delete(p) => {
                    let view: PodView = to_view(&p);
                    backend.uncache_pod(&view.metadata.namespace, &view.metadata.name);
                    engine.delete_pod(&PodUid::new(&view.metadata.uid));
                }
                Event::InitDone => {
                    // Pods deleted while the watch was down are gone now.
                    for (ns, name, uid) in backend.cached_pod_keys() {
                        if !seen.contains(&(ns.clone(), name.clone())) {
                            backend.uncache_pod(&ns, &name);
                            engine.delete_pod(&PodUid::new(&uid));
                        }
                    }
                    synced.store(true, Ordering::SeqCst);
                }
            },
            Ok(None) => return,
            Err(e) => {
                crate::metrics::watch_restart("pods");
                tracing::warn!(error = %e, "pod watch failed; retrying");
            }
        }
    }
}

async fn watch_quotas(backend: KubeBackend, quota: Arc<QuotaBook>, synced: Arc<std::sync::atomic::AtomicBool>) {
    let api: Api<ResourceQuota> = Api::all(backend.client());
    let mut stream = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
    let hard = |q: &ResourceQuota| -> Vec<(String, i64)> {
        q.spec
            .as_ref()
            .and_then(|s| s.hard.as_ref())
            .map(|h| {
                h.iter()
                    .filter_map(|(k, v)| {
                        Some((k.clone(), crate::model::quantity::Quantity::parse(&v.0).ok()?.as_i64_exact()?))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    loop {
        match stream.try_next().await {
            Ok(Some(Event::InitApply(q) | Event::Apply(q))) => {
                let (ns, name) =
                    (q.metadata.namespace.clone().unwrap_or_default(), q.metadata.name.clone().unwrap_or_default());
                quota.set_quota(&ns, &name, &hard(&q));
            }
            Ok(Some(Event::Delete(q))) => {
                quota.remove_quota(
                    &q.metadata.namespace.clone().unwrap_or_default(),
                    &q.metadata.name.clone().unwrap_or_default(),
                );
            }
            Ok(Some(Event::InitDone)) => synced.store(true, Ordering::SeqCst),
            Ok(Some(Event::Init)) => {}
            Ok(None) => return,
            Err(e) => {
                crate::metrics::watch_restart("resourcequotas");
                tracing::warn!(error = %e, "resourcequota watch failed; retrying");
            }
        }
    }
}

/// Leader iff the Lease's holder starts with our identity and we saw it renewed within its
/// duration (observed time, not renewTime, as HAMi does).
async fn follow_lease(
    backend: KubeBackend,
    l: LeaderOptions,
    readiness: Readiness,
    kick: tokio::sync::mpsc::Sender<()>,
) {
    let api: Api<Lease> = Api::namespaced(backend.client(), &l.lease_namespace);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={}", l.lease_name));
    let mut stream = watcher::watcher(api, cfg).default_backoff().boxed();
    let mut holder: Option<(String, Instant, Duration)> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            ev = stream.try_next() => match ev {
                Ok(Some(Event::Apply(lease) | Event::InitApply(lease))) => {
                    let spec = lease.spec.unwrap_or_default();
                    let dur = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(15).max(1) as u64);
                    holder = spec.holder_identity.map(|h| (h, Instant::now(), dur));
                }
                Ok(Some(Event::Delete(_))) => holder = None,
                Ok(Some(_)) => {}
                Ok(None) => return,
                Err(e) => {
                    crate::metrics::watch_restart("leases");
                    tracing::warn!(error = %e, "lease watch failed; retrying");
                }
            },
            _ = tick.tick() => {}
        }
        let lead = holder.as_ref().is_some_and(|(h, seen, dur)| h.starts_with(&l.identity) && seen.elapsed() < *dur);
        let was = readiness.leader.swap(lead, Ordering::SeqCst);
        if lead != was {
            tracing::info!(
                leader = lead,
                holder = holder.as_ref().map(|h| h.0.as_str()).unwrap_or(""),
                "leadership changed"
            );
            crate::metrics::leader(lead);
            if lead {
                let _ = kick.try_send(());
            }
        }
    }
}

/// What the health check decided for one vendor on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Health {
    pub healthy: bool,
    /// Write `Requesting_<now>` to the handshake annotation.
    pub request: bool,
}

/// The generic handshake rule, pure: no `Requesting` value → write one, healthy; a `Requesting`
/// value under 60 s old or unreadable → healthy; older → healthy only while the count resource is
/// allocatable.
pub fn handshake_health(value: &str, now: chrono::NaiveDateTime, allocatable: i64) -> Health {
    match codec::decode_handshake(value) {
        Handshake::Other => Health { healthy: true, request: true },
        Handshake::Requesting(None) => Health { healthy: true, request: false },
        Handshake::Requesting(Some(t)) => {
            let fresh = now.signed_duration_since(t).to_std().map_or(true, |age| age < HANDSHAKE_TIMEOUT);
            Health { healthy: fresh || allocatable > 0, request: false }
        }
    }
}

/// NVIDIA's allocatable-count memory on top of the generic rule, as HAMi keeps it per node (lost on
/// restart).
pub fn nvidia_health(generic: Health, cur: i64, remembered: &mut i64) -> Health {
    let rep = *remembered;
    if cur == 0 && rep > 0 {
        *remembered = 0;
        return Health { healthy: false, ..generic };
    }
    if cur != rep && cur > 0 {
        *remembered = cur;
        return Health { healthy: true, ..generic };
    }
    generic
}

async fn registration_loop<O: Observer>(
    engine: O,
    backend: KubeBackend,
    readiness: Readiness,
    opts: WatchOptions,
    mut kick: tokio::sync::mpsc::Receiver<()>,
) {
    let mut memory: HashMap<String, i64> = HashMap::new();
    let mut unhealthy: HashMap<String, Vec<VendorId>> = HashMap::new();
    let mut tick = tokio::time::interval(ROUND);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            Some(()) = kick.recv() => {}
        }
        if !readiness.leader.load(Ordering::SeqCst) {
            continue;
        }
        if let Some((ns, name)) = &opts.own_pod {
            label_roles(&backend, ns, name).await;
        }
        let now = chrono::Utc::now().naive_utc();
        for node in backend.cached_nodes() {
            let name = node.metadata.name.clone();
            let mut dead: Vec<VendorId> = Vec::new();
            for (id, v) in engine.vendors().iter() {
                let present = !matches!(v.discover(&node), Discovery::Absent);
                let healthy = match v.health_rule() {
                    HealthRule::AlwaysHealthy => true,
                    HealthRule::CapacityPositive { resource } => resource.is_empty() || node.capacity(&resource) > 0,
                    HealthRule::DevicesListed => present,
                    HealthRule::Handshake { key, count_resource } => {
                        // Handshakes are written only on nodes that register this vendor.
                        if !present {
                            continue;
                        }
                        let alloc = node.allocatable(&count_resource);
                        let mut h = handshake_health(node.annotation(&key).unwrap_or(""), now, alloc);
                        if v.name() == crate::vendor::nvidia::WORD {
                            h = nvidia_health(h, alloc, memory.entry(name.clone()).or_insert(0));
                        }
                        if h.request {
                            let value = codec::encode_handshake_requesting(now);
                            if let Err(e) =
                                backend.patch_node_annotations(&name, &[(key.as_str(), Some(&value))], None).await
                            {
                                tracing::warn!(node = %name, error = %e, "handshake not written");
                            }
                        }
                        h.healthy
                    }
                };
                if !healthy && present {
                    dead.push(id);
                }
            }
            let before = unhealthy.get(&name).cloned().unwrap_or_default();
            if dead != before {
                for id in dead.iter().filter(|d| !before.contains(d)) {
                    let v = engine.vendors().get(*id);
                    tracing::warn!(node = %name, vendor = v.name(), "devices unhealthy; removing them");
                    if let Cleanup::RemoveAnnotation(k) = v.cleanup()
                        && let Err(e) = backend.patch_node_annotations(&name, &[(k.as_str(), None)], None).await
                    {
                        tracing::warn!(node = %name, error = %e, "clean-up not written");
                    }
                }
                engine.set_unhealthy(&name, dead.clone());
                unhealthy.insert(name.clone(), dead);
                engine.register_node(node.clone()).await;
            }
        }
        memory.retain(|n, _| backend.node(n).is_some());
        unhealthy.retain(|n, _| backend.node(n).is_some());
    }
}

/// Labels this replica's pod `leader` and the other scheduler pods `follower`; the chart's Service
/// targets the leader.
async fn label_roles(backend: &KubeBackend, namespace: &str, own: &str) {
    let api: Api<Pod> = Api::namespaced(backend.client(), namespace);
    let lp = ListParams::default().labels(&format!("{}=hami-scheduler", keys::SCHEDULER_COMPONENT_LABEL));
    let Ok(list) = api.list(&lp).await else { return };
    for p in list.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        let want = if name == own { "leader" } else { "follower" };
        let has = p.metadata.labels.as_ref().and_then(|l| l.get(keys::SCHEDULER_ROLE)).map(String::as_str);
        if has != Some(want) {
            let _ = backend.patch_pod_labels(namespace, &name, &[(keys::SCHEDULER_ROLE, want)]).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> chrono::NaiveDateTime {
        chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn handshake_follows_hamis_rules() {
        // Not Requesting → write Requesting, healthy.
        assert_eq!(handshake_health("", t("2026-08-21 06:20:39"), 0), Health { healthy: true, request: true });
        assert_eq!(
            handshake_health("Reported 2024-01-01", t("2026-08-21 06:20:39"), 0),
            Health { healthy: true, request: true }
        );
        // Requesting with an unparsable time: healthy forever, nothing written.
        assert_eq!(
            handshake_health("Requesting_2024.01.10 04:06:57", t("2026-08-21 06:20:39"), 0),
            Health { healthy: true, request: false }
        );
        // Under 60 s: healthy.
        assert!(handshake_health("Requesting_2026-08-21 06:20:00", t("2026-08-21 06:20:39"), 0).healthy);
        // Over 60 s: healthy only while the count resource is allocatable.
        assert!(handshake_health("Requesting_2026-08-21 06:10:00", t("2026-08-21 06:20:39"), 4).healthy);
        assert!(!handshake_health("Requesting_2026-08-21 06:10:00", t("2026-08-21 06:20:39"), 0).healthy);
    }

    #[test]
    fn nvidia_remembers_the_allocatable_count() {
        // HAMi's NVIDIA rule: the remembered allocatable count decides on top of the generic one.
        let sick = Health { healthy: false, request: false };
        let mut rep = 0;
        assert_eq!(nvidia_health(sick, 0, &mut rep), sick, "cur 0, rep 0: generic");
        assert!(nvidia_health(sick, 8, &mut rep).healthy, "count changed: healthy");
        assert_eq!(rep, 8);
        let fine = Health { healthy: true, request: false };
        assert!(!nvidia_health(fine, 0, &mut rep).healthy, "count dropped to 0: unhealthy");
        assert_eq!(rep, 0);
    }

    #[test]
    fn resource_versions_compare_as_numbers_and_only_then() {
        assert!(older(Some("999"), Some("1000")));
        assert!(!older(Some("1000"), Some("1000")));
        assert!(!older(Some("1001"), Some("1000")));
        assert!(!older(Some("abc"), Some("1000")), "opaque versions are never older");
        assert!(!older(None, Some("1000")));
        assert!(!older(Some("5"), None));
    }

    #[test]
    fn only_label_annotation_and_capacity_changes_count() {
        let mut a = NodeView::default();
        a.metadata.name = "n".into();
        let mut b = a.clone();
        assert!(!registration_changed(Some(&a), &b));
        b.metadata.annotations.insert(keys::NODE_LOCK.into(), "x".into());
        assert!(!registration_changed(Some(&a), &b), "a lock change does not change devices");
        b.metadata.annotations.insert(keys::NVIDIA_REGISTER.into(), "[]".into());
        assert!(registration_changed(Some(&a), &b));
        a = b.clone();
        b.metadata.labels.insert("gpu".into(), "on".into());
        assert!(registration_changed(Some(&a), &b));
        assert!(registration_changed(None, &b));
    }
}
