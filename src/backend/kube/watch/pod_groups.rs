//! The PodGroup watchers, one per kind with objects (`scheduling.k8s.io/v1beta1`,
//! `scheduling.x-k8s.io/v1alpha1`, `scheduling.volcano.sh/v1beta1`), read as dynamic objects:
//! each object's minimum, timeout and failure go to the engine, deletions too. A kind whose API
//! the cluster does not serve is told to the engine as unserved (its pods' links are ignored),
//! logged once, and looked for again now and then, so a CRD installed later is found.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use crate::backend::kube::KubeBackend;
use crate::model::group::{GroupId, GroupKind, PodGroupObject};
use crate::port::Observer;

/// How long a kind whose API is absent waits before it is looked for again.
const ABSENT_RETRY: Duration = Duration::from_secs(300);
/// How long a list that failed for another reason waits before it is tried again.
const RETRY: Duration = Duration::from_secs(10);

/// The API resource of `kind`'s PodGroups (`None` for a kind without objects).
pub fn resource(kind: GroupKind) -> Option<ApiResource> {
    let (group, version) = kind.api_version()?.split_once('/')?;
    Some(ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, "PodGroup"), "podgroups"))
}

fn object(o: &DynamicObject) -> Option<PodGroupObject> {
    let v = serde_json::to_value(o).ok()?;
    match PodGroupObject::from_value(&v) {
        Ok(g) => Some(g),
        Err(e) => {
            tracing::warn!(error = %e, "PodGroup skipped");
            None
        }
    }
}

/// Watches one kind's PodGroups; `known` turns true once the kind is known served or not, so
/// readiness can wait for every kind to be settled before a member is filtered.
pub(super) async fn watch_pod_groups<O: Observer>(
    engine: O,
    backend: KubeBackend,
    kind: GroupKind,
    known: Arc<AtomicBool>,
) {
    let Some(res) = resource(kind) else { return };
    let api: Api<DynamicObject> = Api::all_with(backend.client(), &res);
    let mut told_absent = false;
    loop {
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
                engine.set_group_kind_served(kind, false);
                known.store(true, Ordering::SeqCst);
                if !told_absent {
                    told_absent = true;
                    tracing::info!(
                        api = kind.api_version().unwrap_or(""),
                        code = s.code,
                        "PodGroups of this kind cannot be read: pods linked to them are placed one by one"
                    );
                }
                tokio::time::sleep(ABSENT_RETRY).await;
            }
            Err(e) => {
                tracing::warn!(api = kind.api_version().unwrap_or(""), error = %e, "listing PodGroups failed; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
    engine.set_group_kind_served(kind, true);
    tracing::info!(api = kind.api_version().unwrap_or(""), "watching PodGroups: their members are placed all or none");
    let mut known_ids: BTreeSet<GroupId> = BTreeSet::new();
    let mut seen: BTreeSet<GroupId> = BTreeSet::new();
    let mut stream = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Init)) => seen.clear(),
            Ok(Some(Event::InitApply(o))) => {
                if let Some(g) = object(&o) {
                    seen.insert(g.id.clone());
                    engine.observe_pod_group(&g);
                }
            }
            Ok(Some(Event::InitDone)) => {
                // Groups deleted while the watch was away.
                for gone in known_ids.difference(&seen) {
                    engine.delete_pod_group(gone);
                }
                known_ids = std::mem::take(&mut seen);
                known.store(true, Ordering::SeqCst);
            }
            Ok(Some(Event::Apply(o))) => {
                if let Some(g) = object(&o) {
                    known_ids.insert(g.id.clone());
                    engine.observe_pod_group(&g);
                }
            }
            Ok(Some(Event::Delete(o))) => {
                if let Some(g) = object(&o) {
                    known_ids.remove(&g.id);
                    engine.delete_pod_group(&g.id);
                }
            }
            Ok(None) => return,
            Err(e) => {
                crate::metrics::watch_restart("podgroups");
                tracing::warn!(api = kind.api_version().unwrap_or(""), error = %e, "podgroup watch failed; retrying");
            }
        }
    }
}
