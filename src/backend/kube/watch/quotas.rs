//! The ResourceQuota watcher: keeps the quota book's hard limits as the cluster sets them.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use crate::backend::kube::KubeBackend;
use crate::sched::quota_book::QuotaBook;

pub(super) async fn watch_quotas(
    backend: KubeBackend,
    quota: Arc<QuotaBook>,
    synced: Arc<std::sync::atomic::AtomicBool>,
) {
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
