//! `--kubeconfig`: the synthetic cluster in a real API server, so an extender that reads the API
//! server is measured the same way. Nodes come from the fake device plugin's setup; the running
//! pods are created bound (with HAMi's annotations); each load pod is created just before its
//! filter, and the filter carries the pod as the API server returned it (its real UID).

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::cluster::{RUNNING_NAMESPACE, Synthetic};
use crate::driver::{Before, Prepared};
use crate::fake_plugin;

/// Label on every pod this tool creates.
pub const LABEL: &str = "app.kubernetes.io/name=hami-loadtest";

/// API calls in flight while setting up.
const SETUP_PARALLEL: usize = 32;

fn api_err(what: &str, e: kube::Error) -> anyhow::Error {
    anyhow::anyhow!("{what}: {e}")
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(api_err(&format!("creating namespace {name}"), e)),
    }
}

/// Creates the nodes (through the fake plugin's setup), the namespaces and the running pods
/// (idempotent: existing pods are left as they are). Returns how many running pods were created.
pub async fn setup(
    client: &kube::Client,
    s: &Synthetic,
    load_namespace: &str,
    scheduler_name: &str,
) -> anyhow::Result<usize> {
    let args = s.spec.plugin_args();
    fake_plugin::setup_nodes(client, &args).await?;
    ensure_namespace(client, RUNNING_NAMESPACE).await?;
    ensure_namespace(client, load_namespace).await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), RUNNING_NAMESPACE);
    let now = chrono::Utc::now().timestamp();
    let results: Vec<anyhow::Result<bool>> = futures::stream::iter(s.running.iter())
        .map(|p| {
            let api = api.clone();
            async move {
                let v = Synthetic::running_pod_json(p, scheduler_name, now);
                let mut pod: Pod = serde_json::from_value(v)?;
                pod.metadata.uid = None;
                let created = match api.create(&PostParams::default(), &pod).await {
                    Ok(_) => true,
                    Err(kube::Error::Api(e)) if e.code == 409 => false,
                    Err(e) => return Err(api_err(&format!("creating pod {}", p.id.name), e)),
                };
                // Status is ignored on create; no kubelet runs on fake nodes to set it.
                let status = json!({"status": {"phase": "Running"}});
                if let Err(e) = api.patch_status(&p.id.name, &PatchParams::default(), &Patch::Merge(&status)).await {
                    tracing::warn!(pod = %p.id.name, error = %e, "status not set to Running");
                }
                Ok(created)
            }
        })
        .buffer_unordered(SETUP_PARALLEL)
        .collect()
        .await;
    let mut created = 0;
    for r in results {
        if r? {
            created += 1;
        }
    }
    Ok(created)
}

/// Creates each load pod before its filter and sends the created object.
pub struct CreatePods {
    pub api: Api<Pod>,
}

impl Before for CreatePods {
    fn before<'a>(&'a self, p: &'a mut Prepared) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mut pod: Pod = serde_json::from_value(p.pod.clone()).map_err(|e| e.to_string())?;
            pod.metadata.uid = None;
            pod.status = None;
            let created = self.api.create(&PostParams::default(), &pod).await.map_err(|e| e.to_string())?;
            let uid = created.metadata.uid.clone().unwrap_or_default();
            let mut v = serde_json::to_value(&created).map_err(|e| e.to_string())?;
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
            p.pod = v;
            p.id.uid = uid;
            Ok(())
        })
    }
}

async fn list_all<K>(api: Api<K>) -> anyhow::Result<Vec<Value>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let mut out = Vec::new();
    let mut lp = ListParams::default().limit(2000);
    for _ in 0..100_000 {
        let page = api.list(&lp).await.map_err(|e| api_err("listing", e))?;
        let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        for item in page.items {
            out.push(serde_json::to_value(&item)?);
        }
        match next {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    Ok(out)
}

/// Nodes and pods of the whole cluster, for the invariant check.
pub async fn snapshot(client: &kube::Client) -> anyhow::Result<(Vec<Value>, Vec<Value>)> {
    let nodes = list_all(Api::<Node>::all(client.clone())).await?;
    let pods = list_all(Api::<Pod>::all(client.clone())).await?;
    Ok((nodes, pods))
}

/// Deletes every pod this tool created, at once (no kubelet confirms a graceful deletion).
pub async fn cleanup(client: &kube::Client, load_namespace: &str) -> anyhow::Result<()> {
    for ns in [RUNNING_NAMESPACE, load_namespace] {
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        api.delete_collection(&DeleteParams::default().grace_period(0), &ListParams::default().labels(LABEL))
            .await
            .map_err(|e| api_err(&format!("deleting pods in {ns}"), e))?;
    }
    Ok(())
}

/// The fake device plugin serving binds on the synthetic nodes while the load runs.
pub fn start_plugin(s: &Synthetic, kubeconfig: &std::path::Path) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    let mut a = s.spec.plugin_args();
    a.kubeconfig = Some(kubeconfig.to_owned());
    a.create_nodes = false;
    a.setup_only = false;
    fake_plugin::spawn_forever(a)
}
