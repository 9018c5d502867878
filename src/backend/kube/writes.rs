//! The Kubernetes backend's side of the `Backend` trait: reads past the cache, Filter's and Bind's
//! pod writes (retried against a fresh resource version while the pod stays unbound), the
//! Binding, and the node and label patches the lock and the registration round make.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};

use crate::backend::access::{PodPlacement, RequestUser, TokenIdentity};
use crate::backend::{Backend, Error, Event, Evicted, PodPatch, PodRef, Result, unpacked};
use crate::devices::LockKind;
use crate::model::PodView;
use crate::model::annotations as keys;
use crate::model::pod::NodeView;

use super::{KubeBackend, api_err, is_conflict, is_not_found, to_view};

/// Writes meant for an unbound pod made again after the pod changed under them.
const UNBOUND_WRITE_ATTEMPTS: u32 = 3;

impl KubeBackend {
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

    /// The resource version of the pod as the API server holds it now, if it is still the same
    /// pod and unbound.
    async fn unbound_version(&self, pod: &PodRef) -> Result<String> {
        let Some(now) = Backend::pod_read(self, &pod.namespace, &pod.name).await? else {
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
}

impl Backend for KubeBackend {
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodView>> {
        self.inner.pods.get(&(namespace.to_owned(), name.to_owned())).and_then(|e| unpacked(e.value()))
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

    async fn evict(&self, pod: &PodRef) -> Result<Evicted> {
        self.evict_pod(pod).await
    }

    fn watched(&self, namespace: &str, name: &str, uid: &str) -> bool {
        self.inner.pods.get(&(namespace.to_owned(), name.to_owned())).is_some_and(|p| p.uid() == uid)
    }

    /// The watch's cache: a pending pod a filter named that the watch never delivered (or has
    /// deleted since) leaves the pending book at its next sweep; a real one is back at its next
    /// filter.
    fn holds_pod(&self, namespace: &str, name: &str, uid: &str) -> bool {
        self.watched(namespace, name, uid)
    }

    async fn pod_of_record(&self, namespace: &str, name: &str) -> Result<Option<Arc<PodView>>> {
        // The cache holds only what the watch delivered: the API server's copies.
        self.pod_fresh(namespace, name).await
    }

    async fn review_token(&self, token: &str) -> Result<Option<TokenIdentity>> {
        self.token_review(token).await
    }

    async fn permits(&self, user: &RequestUser, verb: &str, resource: &str) -> Result<bool> {
        self.access_review(user, verb, resource).await
    }

    async fn pod_placement(&self, namespace: &str, name: &str) -> Result<Option<PodPlacement>> {
        self.read_placement(namespace, name).await
    }

    async fn disruption_blocked(&self, pods: &[PodRef]) -> Result<Vec<PodRef>> {
        self.blocked_by_budgets(pods).await
    }

    fn record_event(&self, event: Event) {
        let _ = self.inner.events.try_send(event);
    }

    fn dra_classes(&self) -> Vec<crate::port::dra::DraClass> {
        self.inner.dra.list()
    }
}
