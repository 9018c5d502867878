//! The Kubernetes backend: the only holder of a `kube::Client`. Caches of pods and nodes fed by
//! the watchers (backend/kube/watch.rs); HAMi's node lock with compare-and-swap on
//! resourceVersion and safe handover; Filter's and Bind's writes; Events; a client-side rate
//! limit (`--kube-qps`/`--kube-burst`). Tested against a real API server only.

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use tokio::sync::mpsc;

use crate::model::PodView;
use crate::model::annotations as keys;
use crate::model::packed::PackedPod;
use crate::model::pod::NodeView;

use super::{Error, Event};

mod access;
mod events;
mod evict;
mod limit;
mod lock;
pub mod watch;
mod writes;

pub use limit::RateLimiter;

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
    /// DeviceClasses mapping a served resource name, as the DeviceClass watcher last saw them.
    dra: crate::port::dra::DraBook,
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
        other => Error::Transport(crate::error_text::one_line(&other)),
    }
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
                dra: Default::default(),
                events: tx,
            }),
        };
        tokio::spawn(b.clone().write_events(rx));
        b
    }

    pub fn client(&self) -> kube::Client {
        self.inner.client.clone()
    }

    /// The DeviceClass book the watcher keeps.
    pub(super) fn dra(&self) -> &crate::port::dra::DraBook {
        &self.inner.dra
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
}
