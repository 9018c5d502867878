//! Leadership, followed rather than campaigned for: the kube-scheduler sidecar's Lease decides,
//! and a change of leader wakes the registration round at once.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use crate::backend::Readiness;
use crate::backend::kube::KubeBackend;

use super::LeaderOptions;

/// Leader iff the Lease's holder starts with our identity and we saw it renewed within its
/// duration (observed time, not renewTime, as HAMi does).
pub(super) async fn follow_lease(
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
