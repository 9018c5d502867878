//! The node watcher: keeps the backend's node cache, registers a node with the engine when what
//! decides its devices changes (not on every status heartbeat), and tells the pod watcher when a
//! deleted node comes back under its name.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use crate::backend::kube::{KubeBackend, to_view};
use crate::model::annotations as keys;
use crate::model::pod::NodeView;
use crate::port::Observer;

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

pub(super) async fn watch_nodes<O: Observer>(
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

#[cfg(test)]
mod tests {
    use super::*;

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
