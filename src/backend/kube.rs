//! The Kubernetes backend: the only holder of a `kube::Client`. Caches of pods and nodes fed by
//! the watchers (backend/kube/watch.rs); HAMi's node lock with compare-and-swap on
//! resourceVersion and safe handover; Filter's and Bind's writes; Events; a client-side rate
//! limit (`--kube-qps`/`--kube-burst`). Tested against a real API server only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use dashmap::DashMap;
use k8s_openapi::api::core::v1::{Binding, Event as KEvent, EventSource, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::{Mutex as AsyncMutex, mpsc};

use crate::model::PodView;
use crate::model::annotations as keys;
use crate::model::codec;
use crate::model::packed::PackedPod;
use crate::model::pod::NodeView;
use crate::vendor::LockKind;

use super::{
    Backend, CAMBRICON_LOCK_TIMEOUT, Error, Event, EventType, LockVerdict, ObjectKind, PodPatch, PodRef, Result,
};

pub mod watch;

/// Lock writes retried with backoff from 100 ms, factor 2, up to 5 attempts, as HAMi retries them.
const LOCK_ATTEMPTS: u32 = 5;
/// Writes meant for an unbound pod made again after the pod changed under them.
const UNBOUND_WRITE_ATTEMPTS: u32 = 3;
const EVENT_QUEUE: usize = 4096;

/// Options of the Kubernetes backend, from the flags.
#[derive(Clone, Debug)]
pub struct KubeOptions {
    pub qps: f32,
    pub burst: u32,
    pub timeout: Option<Duration>,
    /// Event source component (`--scheduler-name`, or `hami-scheduler` when empty).
    pub component: String,
    pub lock_timeout: Duration,
}

/// A token bucket: `qps` tokens a second, at most `burst` saved up.
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: AsyncMutex<(f64, Instant)>,
}

impl RateLimiter {
    pub fn new(qps: f32, burst: u32) -> RateLimiter {
        let burst = f64::from(burst.max(1));
        RateLimiter { qps: f64::from(qps).max(0.1), burst, state: AsyncMutex::new((burst, Instant::now())) }
    }
    /// Waits for one token.
    pub async fn acquire(&self) {
        let wait = {
            let mut s = self.state.lock().await;
            let now = Instant::now();
            let refill = now.duration_since(s.1).as_secs_f64() * self.qps;
            s.0 = (s.0 + refill).min(self.burst);
            s.1 = now;
            s.0 -= 1.0;
            if s.0 >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-s.0 / self.qps) }
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// How long a request asked for now would wait for its token: the backlog of requests
    /// already granted a turn. Zero when the state is busy being updated.
    pub fn backlog(&self) -> Duration {
        let Ok(s) = self.state.try_lock() else { return Duration::ZERO };
        let tokens = s.0 + s.1.elapsed().as_secs_f64() * self.qps;
        if tokens >= 1.0 { Duration::ZERO } else { Duration::from_secs_f64((1.0 - tokens) / self.qps) }
    }
}

struct Inner {
    client: kube::Client,
    limiter: RateLimiter,
    /// Events have their own, smaller budget: a flood of them never delays a bind's writes.
    event_limiter: RateLimiter,
    opts: KubeOptions,
    /// Each pod packed: one allocation a pod, unpacked for the reader that needs it.
    pods: DashMap<(String, String), PackedPod>,
    nodes: DashMap<String, Arc<NodeView>>,
    events: mpsc::Sender<Event>,
}

/// Why no client to the API server could be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("kubeconfig: {0}")]
    Config(#[from] kube::config::InferConfigError),
    #[error("kube client: {0}")]
    Client(#[from] kube::Error),
}

/// The Kubernetes backend. Clones share the client and caches.
#[derive(Clone)]
pub struct KubeBackend {
    inner: Arc<Inner>,
}

fn api_err(e: kube::Error) -> Error {
    match e {
        kube::Error::Api(s) => Error::Status { code: s.code, message: s.message, reason: s.reason },
        other => Error::Transport(with_causes(&other)),
    }
}

/// The error and its causes, `: `-separated (a transport error's own text, such as "client error
/// (Connect)", does not say that the API server refused the connection; its causes do).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cause = c.source();
    }
    s
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Converts an API object into the scheduler's view (managed fields and everything else the
/// view does not name are dropped on the way).
pub fn to_view<K: serde::Serialize, V: serde::de::DeserializeOwned + Default>(obj: &K) -> V {
    serde_json::to_value(obj).ok().and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default()
}

impl KubeBackend {
    /// Connects with the usual kubeconfig inference (KUBECONFIG, ~/.kube/config, in-cluster).
    pub async fn connect(opts: KubeOptions) -> std::result::Result<KubeBackend, ConnectError> {
        let mut cfg = kube::Config::infer().await?;
        if let Some(t) = opts.timeout {
            cfg.read_timeout = Some(t);
            cfg.write_timeout = Some(t);
        }
        let client = kube::Client::try_from(cfg)?;
        Ok(KubeBackend::with_client(client, opts))
    }

    /// Wraps an existing client (created inside the runtime that will drive it).
    pub fn with_client(client: kube::Client, opts: KubeOptions) -> KubeBackend {
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        let b = KubeBackend {
            inner: Arc::new(Inner {
                client,
                limiter: RateLimiter::new(opts.qps, opts.burst),
                event_limiter: RateLimiter::new(opts.qps / 4.0, (opts.burst / 4).max(1)),
                opts,
                pods: DashMap::new(),
                nodes: DashMap::new(),
                events: tx,
            }),
        };
        tokio::spawn(b.clone().write_events(rx));
        b
    }

    pub fn client(&self) -> kube::Client {
        self.inner.client.clone()
    }

    /// One API call: waits for the rate limiter, counts the request by verb and result.
    async fn call<T>(
        &self,
        verb: &'static str,
        resource: &'static str,
        f: impl std::future::Future<Output = kube::Result<T>>,
    ) -> kube::Result<T> {
        self.call_within(&self.inner.limiter, verb, resource, f).await
    }

    /// `call` under the given budget.
    async fn call_within<T>(
        &self,
        limiter: &RateLimiter,
        verb: &'static str,
        resource: &'static str,
        f: impl std::future::Future<Output = kube::Result<T>>,
    ) -> kube::Result<T> {
        limiter.acquire().await;
        let r = f.await;
        crate::metrics::api_request(verb, resource, r.is_ok());
        r
    }

    pub(crate) fn cache_pod(&self, pod: &PodView) {
        self.inner.pods.insert((pod.metadata.namespace.clone(), pod.metadata.name.clone()), PackedPod::pack(pod));
    }
    /// The cached pod's resource version, read without unpacking it.
    pub(crate) fn cached_resource_version(&self, namespace: &str, name: &str) -> Option<Option<String>> {
        self.inner.pods.get(&(namespace.to_owned(), name.to_owned())).map(|p| p.resource_version().map(str::to_owned))
    }
    pub(crate) fn uncache_pod(&self, namespace: &str, name: &str) {
        self.inner.pods.remove(&(namespace.to_owned(), name.to_owned()));
    }
    pub(crate) fn cache_node(&self, node: Arc<NodeView>) -> Option<Arc<NodeView>> {
        self.inner.nodes.insert(node.metadata.name.clone(), node)
    }
    pub(crate) fn uncache_node(&self, name: &str) {
        self.inner.nodes.remove(name);
    }
    pub(crate) fn cached_nodes(&self) -> Vec<Arc<NodeView>> {
        self.inner.nodes.iter().map(|e| e.value().clone()).collect()
    }
    /// The cached pods whose `hami.io/vgpu-node` names `node`.
    pub(crate) fn cached_pods_on(&self, node: &str) -> Vec<Arc<PodView>> {
        self.inner
            .pods
            .iter()
            .filter(|e| e.value().annotation(keys::ASSIGNED_NODE) == Some(node))
            .filter_map(|e| super::unpacked(e.value()))
            .collect()
    }

    pub(crate) fn cached_pod_keys(&self) -> Vec<(String, String, String)> {
        self.inner.pods.iter().map(|e| (e.key().0.clone(), e.key().1.clone(), e.value().uid().to_owned())).collect()
    }

    fn nodes_api(&self) -> Api<Node> {
        Api::all(self.inner.client.clone())
    }
    fn pods_api(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.inner.client.clone(), ns)
    }

    async fn get_node(&self, name: &str) -> kube::Result<Node> {
        self.call("get", "nodes", self.nodes_api().get(name)).await
    }

    /// Merge-patches node annotations (set or remove), optionally as a compare-and-swap.
    pub async fn patch_node_annotations(
        &self,
        name: &str,
        annos: &[(&str, Option<&str>)],
        resource_version: Option<&str>,
    ) -> kube::Result<Node> {
        let map: serde_json::Map<String, serde_json::Value> = annos
            .iter()
            .map(|(k, v)| {
                ((*k).to_owned(), v.map_or(serde_json::Value::Null, |s| serde_json::Value::String(s.to_owned())))
            })
            .collect();
        let mut meta = serde_json::json!({ "annotations": map });
        if let Some(rv) = resource_version {
            meta["resourceVersion"] = serde_json::Value::String(rv.to_owned());
        }
        let body = serde_json::json!({ "metadata": meta });
        self.call("patch", "nodes", self.nodes_api().patch(name, &PatchParams::default(), &Patch::Merge(&body))).await
    }

    /// Patches labels of a pod (scheduler role labels).
    pub async fn patch_pod_labels(&self, namespace: &str, name: &str, labels: &[(&str, &str)]) -> kube::Result<Pod> {
        let map: serde_json::Map<String, serde_json::Value> =
            labels.iter().map(|(k, v)| ((*k).to_owned(), serde_json::Value::String((*v).to_owned()))).collect();
        let body = serde_json::json!({ "metadata": { "labels": map } });
        self.call("patch", "pods", self.pods_api(namespace).patch(name, &PatchParams::default(), &Patch::Merge(&body)))
            .await
    }

    /// Whether the lock's holder still needs it (see `holder_needs_lock`). The watcher's copy of
    /// the pod answers "yes" cheaply; a "no" is confirmed with a fresh read before a lock is broken.
    async fn holder_needs(&self, namespace: &str, name: &str, node: &str) -> Result<bool> {
        if self.pod(namespace, name).is_some_and(|p| super::holder_needs_lock(&p, node)) {
            return Ok(true);
        }
        match self.call("get", "pods", self.pods_api(namespace).get(name)).await {
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(api_err(e)),
            Ok(p) => Ok(super::holder_needs_lock(&to_view(&p), node)),
        }
    }

    /// The resource version of the pod as the API server holds it now, if it is still the same
    /// pod and unbound.
    async fn unbound_version(&self, pod: &PodRef) -> Result<String> {
        let Some(now) = super::Backend::pod_read(self, &pod.namespace, &pod.name).await? else {
            return Err(Error::PodNotFound(pod.to_string()));
        };
        if !pod.uid.is_empty() && now.metadata.uid != pod.uid {
            return Err(Error::PodNotFound(pod.to_string()));
        }
        if let Some(node) = now.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
            return Err(Error::AlreadyBound { pod: pod.to_string(), node: node.to_owned() });
        }
        Ok(now.metadata.resource_version.clone().unwrap_or_default())
    }

    async fn lock_shared(&self, node: &str, pod: &PodRef) -> Result<()> {
        let timeout = self.inner.opts.lock_timeout;
        let contention = || Error::LockContention {
            node: node.to_owned(),
            within: crate::model::codec::format_go_duration(timeout),
        };
        let mut delay = Duration::from_millis(100);
        let mut last = contention();
        for attempt in 0..LOCK_ATTEMPTS {
            // The first attempt trusts the watcher's copy of the node; a conflict re-reads it.
            let (annos, rv) = match (attempt, self.node(node)) {
                (0, Some(v)) => (v.metadata.annotations.clone(), v.metadata.resource_version.clone()),
                _ => {
                    let n = self.get_node(node).await.map_err(|e| {
                        if is_not_found(&e) { Error::NodeNotFound(node.to_owned()) } else { api_err(e) }
                    })?;
                    (
                        n.metadata.annotations.clone().unwrap_or_default().into_iter().collect(),
                        n.metadata.resource_version.clone(),
                    )
                }
            };
            if let Some(v) = annos.get(keys::NODE_LOCK) {
                let l = codec::decode_node_lock(v)
                    .map_err(|e| Error::LockMalformed { node: node.to_owned(), why: e.to_string() })?;
                let needs = match super::lock_holder_to_ask(&l, pod) {
                    Some((ns, name)) => Some(self.holder_needs(ns, name, node).await?),
                    None => None,
                };
                match super::judge_lock(&l, pod, l.is_expired(Utc::now(), timeout), needs) {
                    LockVerdict::Mine => return Ok(()),
                    LockVerdict::Contention => return Err(contention()),
                    LockVerdict::Take { expired } => {
                        if expired {
                            crate::metrics::lock_handover();
                        }
                    }
                }
            }
            let value = codec::encode_node_lock(Utc::now(), &pod.namespace, &pod.name);
            match self.patch_node_annotations(node, &[(keys::NODE_LOCK, Some(&value))], rv.as_deref()).await {
                Ok(n) => {
                    self.cache_node(Arc::new(to_view(&n)));
                    return Ok(());
                }
                Err(e) if is_conflict(&e) => last = contention(),
                Err(e) => last = api_err(e),
            }
            tokio::time::sleep(jitter(delay)).await;
            delay *= 2;
        }
        Err(last)
    }

    async fn unlock_shared(&self, node: &str, pod: &PodRef) -> Result<()> {
        let mut delay = Duration::from_millis(100);
        for _ in 0..LOCK_ATTEMPTS {
            let n = match self.get_node(node).await {
                Ok(n) => n,
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(api_err(e)),
            };
            let Some(v) = n.metadata.annotations.as_ref().and_then(|a| a.get(keys::NODE_LOCK)) else { return Ok(()) };
            if v.contains(',') && !v.ends_with(&format!(",{},{}", pod.namespace, pod.name)) {
                return Ok(());
            }
            match self
                .patch_node_annotations(node, &[(keys::NODE_LOCK, None)], n.metadata.resource_version.as_deref())
                .await
            {
                Ok(n) => {
                    self.cache_node(Arc::new(to_view(&n)));
                    return Ok(());
                }
                Err(e) if is_conflict(&e) => {}
                Err(e) => return Err(api_err(e)),
            }
            tokio::time::sleep(jitter(delay)).await;
            delay *= 2;
        }
        Err(Error::UnlockFailed { node: node.to_owned() })
    }

    /// Cambricon's lock: a bare time set by blind patch, 2-minute expiry, as HAMi and the MLU
    /// device plugin keep it.
    async fn lock_cambricon(&self, node: &str) -> Result<()> {
        let cached = self.node(node);
        if let Some(v) = cached.as_ref().and_then(|n| n.annotation(keys::CAMBRICON_LOCK)) {
            let fresh = codec::decode_node_lock(v).is_ok_and(|l| !l.is_expired(Utc::now(), CAMBRICON_LOCK_TIMEOUT));
            if fresh {
                return Err(Error::CambriconLocked { node: node.to_owned() });
            }
        }
        let value = codec::encode_rfc3339(Utc::now());
        let mut last = None;
        for i in 0..6u64 {
            if i > 1 {
                let ms = (rand::random::<u64>() % i) * 10;
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            match self.patch_node_annotations(node, &[(keys::CAMBRICON_LOCK, Some(&value))], None).await {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(api_err(e)),
            }
        }
        Err(last.unwrap_or_else(|| Error::CambriconLocked { node: node.to_owned() }))
    }

    /// Writes queued Events; a full queue drops Events rather than slowing scheduling.
    async fn write_events(self, mut rx: mpsc::Receiver<Event>) {
        let component = self.inner.opts.component.clone();
        let mut budget = super::EventBudget::new();
        while let Some(e) = rx.recv().await {
            let key = format!("{:?}/{}/{}", e.object, e.pod.namespace, e.pod.name);
            if !budget.allow(&key, std::time::Instant::now()) {
                continue;
            }
            let (ns, kind) = match e.object {
                ObjectKind::Pod => (e.pod.namespace.clone(), "Pod"),
                ObjectKind::Node => ("default".to_owned(), "Node"),
            };
            let ev = KEvent {
                metadata: ObjectMeta {
                    generate_name: Some(format!("{}.", e.pod.name)),
                    namespace: Some(ns.clone()),
                    ..Default::default()
                },
                involved_object: ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some(kind.into()),
                    name: Some(e.pod.name.clone()),
                    namespace: (e.object == ObjectKind::Pod).then(|| e.pod.namespace.clone()),
                    uid: (!e.pod.uid.is_empty()).then(|| e.pod.uid.clone()),
                    ..Default::default()
                },
                reason: Some(e.reason.to_owned()),
                message: Some(e.message.clone()),
                type_: Some(match e.kind {
                    EventType::Normal => "Normal".into(),
                    EventType::Warning => "Warning".into(),
                }),
                source: Some(EventSource { component: Some(component.clone()), host: None }),
                reporting_component: Some(component.clone()),
                reporting_instance: Some(component.clone()),
                first_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
                last_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
                event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
                action: Some("Scheduling".into()),
                count: Some(1),
                ..Default::default()
            };
            let api: Api<KEvent> = Api::namespaced(self.inner.client.clone(), &ns);
            let params = PostParams::default();
            let created = api.create(&params, &ev);
            if let Err(err) = self.call_within(&self.inner.event_limiter, "create", "events", created).await {
                tracing::debug!(error = %err, reason = e.reason, "event not recorded");
            }
        }
    }
}

fn jitter(d: Duration) -> Duration {
    let f = 1.0 + rand::random::<f64>() * 0.5;
    d.mul_f64(f)
}

impl Backend for KubeBackend {
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodView>> {
        self.inner.pods.get(&(namespace.to_owned(), name.to_owned())).and_then(|e| super::unpacked(e.value()))
    }

    fn node(&self, name: &str) -> Option<Arc<NodeView>> {
        self.inner.nodes.get(name).map(|e| e.value().clone())
    }

    fn write_backlog(&self) -> Duration {
        self.inner.limiter.backlog()
    }

    async fn pod_fresh(&self, namespace: &str, name: &str) -> Result<Option<Arc<PodView>>> {
        if let Some(p) = self.pod(namespace, name) {
            return Ok(Some(p));
        }
        self.pod_read(namespace, name).await
    }

    async fn pod_read(&self, namespace: &str, name: &str) -> Result<Option<Arc<PodView>>> {
        match self.call("get", "pods", self.pods_api(namespace).get(name)).await {
            Ok(p) => {
                let view: PodView = to_view(&p);
                self.cache_pod(&view);
                Ok(Some(Arc::new(view)))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(api_err(e)),
        }
    }

    async fn patch_pod(&self, pod: &PodRef, patch: &PodPatch) -> Result<()> {
        let api = self.pods_api(&pod.namespace);
        if let Some(rv) = patch.at_version.as_deref() {
            // One try: a conflict means the pod changed since the caller read it.
            let body = patch.to_merge_patch(Some(rv));
            return match self
                .call("patch", "pods", api.patch(&pod.name, &PatchParams::default(), &Patch::Merge(&body)))
                .await
            {
                Ok(p) => {
                    self.cache_pod(&to_view(&p));
                    Ok(())
                }
                Err(e) if is_not_found(&e) => Err(Error::PodNotFound(pod.to_string())),
                Err(e) => Err(api_err(e)),
            };
        }
        // A write for an unbound pod names the resource version of a copy that showed it so; when
        // the pod changed since (often only its status), it is read again and, still unbound, the
        // write is made against the new version. `Some("")`: read it first.
        let mut rv = patch.while_unbound.clone();
        let mut conflict = None;
        for _ in 0..UNBOUND_WRITE_ATTEMPTS {
            if rv.as_deref() == Some("") {
                rv = Some(self.unbound_version(pod).await?);
            }
            let body = patch.to_merge_patch(rv.as_deref());
            match self.call("patch", "pods", api.patch(&pod.name, &PatchParams::default(), &Patch::Merge(&body))).await
            {
                Ok(p) => {
                    self.cache_pod(&to_view(&p));
                    return Ok(());
                }
                Err(e) if is_not_found(&e) => return Err(Error::PodNotFound(pod.to_string())),
                Err(e) if rv.is_some() && is_conflict(&e) => {
                    conflict = Some(api_err(e));
                    rv = Some(String::new());
                }
                Err(e) => return Err(api_err(e)),
            }
        }
        Err(conflict.unwrap_or_else(|| Error::Transport("pod write kept conflicting".into())))
    }

    async fn lock_node(&self, node: &str, pod: &PodRef, kind: LockKind) -> Result<()> {
        match kind {
            LockKind::Shared => self.lock_shared(node, pod).await,
            LockKind::Cambricon => self.lock_cambricon(node).await,
            LockKind::None => Ok(()),
        }
    }

    async fn unlock_node(&self, node: &str, pod: &PodRef, kind: LockKind) -> Result<()> {
        match kind {
            LockKind::Shared => self.unlock_shared(node, pod).await,
            LockKind::Cambricon => self
                .patch_node_annotations(node, &[(keys::CAMBRICON_LOCK, None)], None)
                .await
                .map(|_| ())
                .map_err(api_err),
            LockKind::None => Ok(()),
        }
    }

    async fn bind(&self, pod: &PodRef, node: &str, patch: &PodPatch) -> Result<()> {
        self.patch_pod(pod, patch).await?;
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(pod.name.clone()),
                uid: (!pod.uid.is_empty()).then(|| pod.uid.clone()),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.to_owned()),
                ..Default::default()
            },
        };
        let api = self.pods_api(&pod.namespace);
        self.call(
            "create",
            "pods/binding",
            api.create_subresource::<_, serde_json::Value>("binding", &pod.name, &PostParams::default(), &binding),
        )
        .await
        .map(|_| ())
        .map_err(api_err)
    }

    fn record_event(&self, event: Event) {
        let _ = self.inner.events.try_send(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_rate_limiters_backlog_is_the_wait_a_new_request_would_have() {
        let l = RateLimiter::new(10.0, 2);
        assert_eq!(l.backlog(), Duration::ZERO, "a full bucket");
        for _ in 0..2 {
            l.acquire().await;
        }
        // The bucket is empty: the next request waits for one token, 100 ms.
        let b = l.backlog().as_secs_f64();
        assert!((b - 0.1).abs() < 0.01, "{b}");
        // Three more asked for and not yet served (each reserves its token on the first poll):
        // a new request waits behind them, 400 ms.
        for _ in 0..3 {
            let _ = futures::FutureExt::now_or_never(l.acquire());
        }
        let b = l.backlog().as_secs_f64();
        assert!((b - 0.4).abs() < 0.01, "{b}");
        // The bucket refills in real time: 100 ms later one request fewer is ahead.
        std::thread::sleep(Duration::from_millis(100));
        let b = l.backlog().as_secs_f64();
        assert!(b < 0.3 + 1e-3 && b > 0.2, "{b}");
    }
}
