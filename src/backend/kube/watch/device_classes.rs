//! The DeviceClass watcher (`resource.k8s.io/v1`, read as dynamic objects since the generated
//! API types this build uses may not have that version): keeps the DRA book and tells of each
//! class that lets DRA serve a resource name hami-rs serves. A cluster without the API is noted
//! once and not asked again.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use crate::backend::kube::KubeBackend;
use crate::port::dra::{DeviceClassView, DraBook};

/// How long a list that failed for another reason than a missing API waits before it is tried
/// again.
const RETRY: Duration = Duration::from_secs(60);

fn device_classes() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("resource.k8s.io", "v1", "DeviceClass"), "deviceclasses")
}

fn view(o: &DynamicObject) -> Option<DeviceClassView> {
    serde_json::to_value(o).ok().and_then(|v| serde_json::from_value(v).ok())
}

pub(super) async fn watch_device_classes(backend: KubeBackend, served: Vec<String>) {
    let api: Api<DynamicObject> = Api::all_with(backend.client(), &device_classes());
    // One list first, so a cluster without the API (before Kubernetes 1.34, or DRA turned off)
    // is told once instead of on every retry of a watch.
    loop {
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
                tracing::info!(
                    code = s.code,
                    "DeviceClasses (resource.k8s.io/v1) cannot be read: DRA's claims on resource names hami-rs serves are not watched"
                );
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "listing DeviceClasses failed; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
    let book: DraBook = backend.dra().clone();
    let mut seen: Vec<String> = Vec::new();
    let mut stream = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
    let apply = |o: &DynamicObject| {
        let Some(c) = view(o) else { return };
        let change = book.apply(&c, &served);
        crate::backend::tell_dra_change(&backend, &book, &served, &change, &c.metadata.uid);
    };
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Init)) => seen.clear(),
            Ok(Some(Event::InitApply(o))) => {
                seen.push(o.metadata.name.clone().unwrap_or_default());
                apply(&o);
            }
            Ok(Some(Event::InitDone)) => {
                for c in book.retain(&seen) {
                    let change = crate::port::dra::Change::Gone(c);
                    crate::backend::tell_dra_change(&backend, &book, &served, &change, "");
                }
                crate::metrics::dra_extended_resource_classes(&book.counts(&served));
            }
            Ok(Some(Event::Apply(o))) => apply(&o),
            Ok(Some(Event::Delete(o))) => {
                let change = book.remove(o.metadata.name.as_deref().unwrap_or_default());
                crate::backend::tell_dra_change(&backend, &book, &served, &change, "");
            }
            Ok(None) => return,
            Err(e) => {
                crate::metrics::watch_restart("deviceclasses");
                tracing::warn!(error = %e, "deviceclass watch failed; retrying");
            }
        }
    }
}
