//! Watchers and the registration loop of the Kubernetes backend: nodes (label selector), pods,
//! ResourceQuotas, PodGroups and the kube-scheduler sidecar's Lease feed the engine, DeviceClasses
//! the DRA book; every 15 s the leader
//! runs HAMi's handshake/health round and labels scheduler pods leader/follower. None of this runs
//! on the filter path, and nothing here holds what the filter path waits on.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::backend::Readiness;
use crate::port::Observer;
use crate::sched::quota_book::QuotaBook;

use super::KubeBackend;

mod device_classes;
mod lease;
mod nodes;
mod options;
pub mod pod_groups;
mod pods;
mod quotas;
mod registration;

use device_classes::watch_device_classes;
use lease::follow_lease;
use nodes::watch_nodes;
use pods::watch_pods;
use quotas::watch_quotas;
use registration::registration_loop;

pub use options::{LeaderOptions, WatchOptions};
pub use registration::{Health, handshake_health, nvidia_health};

/// Starts every watcher and the registration loop on the current runtime.
pub fn start<O: Observer>(
    engine: O,
    backend: KubeBackend,
    readiness: Readiness,
    quota: Arc<QuotaBook>,
    opts: WatchOptions,
) {
    let nodes_synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pods_synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let quota_synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (kick_tx, kick_rx) = tokio::sync::mpsc::channel::<()>(16);
    let (returned_tx, returned_rx) = tokio::sync::mpsc::unbounded_channel::<String>();

    tokio::spawn(watch_nodes(
        engine.clone(),
        backend.clone(),
        opts.node_selector.clone(),
        nodes_synced.clone(),
        kick_tx.clone(),
        returned_tx,
    ));
    tokio::spawn(watch_pods(engine.clone(), backend.clone(), pods_synced.clone(), returned_rx));
    tokio::spawn(watch_quotas(backend.clone(), quota, quota_synced.clone()));
    // Not waited for by readiness: DeviceClasses change no decision, and the API may be absent.
    tokio::spawn(watch_device_classes(backend.clone(), opts.served_resources.clone()));
    // Readiness waits until each PodGroup kind is known served or not: a member filtered before
    // would be placed on its own.
    let groups_known: Vec<Arc<std::sync::atomic::AtomicBool>> = crate::model::group::GroupKind::WITH_OBJECTS
        .into_iter()
        .map(|kind| {
            let known = Arc::new(std::sync::atomic::AtomicBool::new(false));
            tokio::spawn(pod_groups::watch_pod_groups(engine.clone(), backend.clone(), kind, known.clone()));
            known
        })
        .collect();
    match &opts.leader {
        Some(l) => {
            tokio::spawn(follow_lease(backend.clone(), l.clone(), readiness.clone(), kick_tx.clone()));
        }
        None => readiness.leader.store(true, Ordering::SeqCst),
    }
    {
        let r = readiness.clone();
        tokio::spawn(async move {
            while !(nodes_synced.load(Ordering::SeqCst)
                && pods_synced.load(Ordering::SeqCst)
                && quota_synced.load(Ordering::SeqCst)
                && groups_known.iter().all(|k| k.load(Ordering::SeqCst)))
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            r.synced.store(true, Ordering::SeqCst);
            tracing::info!("caches synced");
        });
    }
    tokio::spawn(registration_loop(engine, backend, readiness, opts, kick_rx));
}
