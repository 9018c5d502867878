//! The pod watcher: feeds the engine and the backend's pod cache with the pods that concern the
//! scheduler, never letting a stale state overwrite a newer one, and observes again the pods of a
//! node that came back.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use crate::backend::kube::{KubeBackend, to_view};
use crate::model::annotations as keys;
use crate::model::{PodUid, PodView};
use crate::port::Observer;

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

pub(super) async fn watch_pods<O: Observer>(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_versions_compare_as_numbers_and_only_then() {
        assert!(older(Some("999"), Some("1000")));
        assert!(!older(Some("1000"), Some("1000")));
        assert!(!older(Some("1001"), Some("1000")));
        assert!(!older(Some("abc"), Some("1000")), "opaque versions are never older");
        assert!(!older(None, Some("1000")));
        assert!(!older(Some("5"), None));
    }

    /// The watch reads pods through the typed API: a field the types do not know is dropped on
    /// the way to the view, and a native group member would never be linked to its group.
    #[test]
    fn a_watched_pod_keeps_its_scheduling_group() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": "m-0", "namespace": "ml", "uid": "u0" },
            "spec": { "containers": [{ "name": "c" }], "schedulingGroup": { "podGroupName": "train" } },
        }))
        .unwrap();
        let view: PodView = to_view(&pod);
        assert_eq!(view.spec.scheduling_group.and_then(|g| g.pod_group_name).as_deref(), Some("train"));
    }
}
