//! The leader's registration round, every 15 s or when woken: HAMi's handshake and health rules
//! per vendor and node, the clean-up of dead vendors' annotations, and the leader/follower labels
//! on the scheduler's pods.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use crate::backend::kube::KubeBackend;
use crate::backend::{Backend, Readiness};
use crate::devices::{Cleanup, Discovery, HealthRule};
use crate::model::VendorId;
use crate::model::annotations as keys;
use crate::model::codec::{self, Handshake};
use crate::port::Observer;

use super::WatchOptions;

/// How often the registration round runs (HAMi: 15 s).
const ROUND: Duration = Duration::from_secs(15);
/// A `Requesting_…` handshake older than this needs the allocatable fallback (HAMi: 60 s).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// What the health check decided for one vendor on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Health {
    pub healthy: bool,
    /// Write `Requesting_<now>` to the handshake annotation.
    pub request: bool,
}

/// The generic handshake rule, pure: no `Requesting` value → write one, healthy; a `Requesting`
/// value under 60 s old or unreadable → healthy; older → healthy only while the count resource is
/// allocatable.
pub fn handshake_health(value: &str, now: chrono::NaiveDateTime, allocatable: i64) -> Health {
    match codec::decode_handshake(value) {
        Handshake::Other => Health { healthy: true, request: true },
        Handshake::Requesting(None) => Health { healthy: true, request: false },
        Handshake::Requesting(Some(t)) => {
            let fresh = now.signed_duration_since(t).to_std().map_or(true, |age| age < HANDSHAKE_TIMEOUT);
            Health { healthy: fresh || allocatable > 0, request: false }
        }
    }
}

/// NVIDIA's allocatable-count memory on top of the generic rule, as HAMi keeps it per node (lost on
/// restart).
pub fn nvidia_health(generic: Health, cur: i64, remembered: &mut i64) -> Health {
    let rep = *remembered;
    if cur == 0 && rep > 0 {
        *remembered = 0;
        return Health { healthy: false, ..generic };
    }
    if cur != rep && cur > 0 {
        *remembered = cur;
        return Health { healthy: true, ..generic };
    }
    generic
}

pub(super) async fn registration_loop<O: Observer>(
    engine: O,
    backend: KubeBackend,
    readiness: Readiness,
    opts: WatchOptions,
    mut kick: tokio::sync::mpsc::Receiver<()>,
) {
    let mut memory: HashMap<String, i64> = HashMap::new();
    let mut unhealthy: HashMap<String, Vec<VendorId>> = HashMap::new();
    let mut tick = tokio::time::interval(ROUND);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            Some(()) = kick.recv() => {}
        }
        if !readiness.leader.load(Ordering::SeqCst) {
            continue;
        }
        if let Some((ns, name)) = &opts.own_pod {
            label_roles(&backend, ns, name).await;
        }
        let now = chrono::Utc::now().naive_utc();
        for node in backend.cached_nodes() {
            let name = node.metadata.name.clone();
            let mut dead: Vec<VendorId> = Vec::new();
            for (id, v) in engine.vendors().iter() {
                let present = !matches!(v.discover(&node), Discovery::Absent);
                let healthy = match v.health_rule() {
                    HealthRule::AlwaysHealthy => true,
                    HealthRule::CapacityPositive { resource } => resource.is_empty() || node.capacity(&resource) > 0,
                    HealthRule::DevicesListed => present,
                    HealthRule::Handshake { key, count_resource } => {
                        // Handshakes are written only on nodes that register this vendor.
                        if !present {
                            continue;
                        }
                        let alloc = node.allocatable(&count_resource);
                        let mut h = handshake_health(node.annotation(&key).unwrap_or(""), now, alloc);
                        if v.name() == crate::devices::nvidia::WORD {
                            h = nvidia_health(h, alloc, memory.entry(name.clone()).or_insert(0));
                        }
                        if h.request {
                            let value = codec::encode_handshake_requesting(now);
                            if let Err(e) =
                                backend.patch_node_annotations(&name, &[(key.as_str(), Some(&value))], None).await
                            {
                                tracing::warn!(node = %name, error = %e, "handshake not written");
                            }
                        }
                        h.healthy
                    }
                };
                if !healthy && present {
                    dead.push(id);
                }
            }
            let before = unhealthy.get(&name).cloned().unwrap_or_default();
            if dead != before {
                for id in dead.iter().filter(|d| !before.contains(d)) {
                    let v = engine.vendors().get(*id);
                    tracing::warn!(node = %name, vendor = v.name(), "devices unhealthy; removing them");
                    if let Cleanup::RemoveAnnotation(k) = v.cleanup()
                        && let Err(e) = backend.patch_node_annotations(&name, &[(k.as_str(), None)], None).await
                    {
                        tracing::warn!(node = %name, error = %e, "clean-up not written");
                    }
                }
                engine.set_unhealthy(&name, dead.clone());
                unhealthy.insert(name.clone(), dead);
                engine.register_node(node.clone()).await;
            }
        }
        memory.retain(|n, _| backend.node(n).is_some());
        unhealthy.retain(|n, _| backend.node(n).is_some());
    }
}

/// Labels this replica's pod `leader` and the other scheduler pods `follower`; the chart's Service
/// targets the leader.
async fn label_roles(backend: &KubeBackend, namespace: &str, own: &str) {
    let api: Api<Pod> = Api::namespaced(backend.client(), namespace);
    let lp = ListParams::default().labels(&format!("{}=hami-scheduler", keys::SCHEDULER_COMPONENT_LABEL));
    let Ok(list) = api.list(&lp).await else { return };
    for p in list.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        let want = if name == own { "leader" } else { "follower" };
        let has = p.metadata.labels.as_ref().and_then(|l| l.get(keys::SCHEDULER_ROLE)).map(String::as_str);
        if has != Some(want) {
            let _ = backend.patch_pod_labels(namespace, &name, &[(keys::SCHEDULER_ROLE, want)]).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> chrono::NaiveDateTime {
        chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn handshake_follows_hamis_rules() {
        // Not Requesting → write Requesting, healthy.
        assert_eq!(handshake_health("", t("2026-08-21 06:20:39"), 0), Health { healthy: true, request: true });
        assert_eq!(
            handshake_health("Reported 2024-01-01", t("2026-08-21 06:20:39"), 0),
            Health { healthy: true, request: true }
        );
        // Requesting with an unparsable time: healthy forever, nothing written.
        assert_eq!(
            handshake_health("Requesting_2024.01.10 04:06:57", t("2026-08-21 06:20:39"), 0),
            Health { healthy: true, request: false }
        );
        // Under 60 s: healthy.
        assert!(handshake_health("Requesting_2026-08-21 06:20:00", t("2026-08-21 06:20:39"), 0).healthy);
        // Over 60 s: healthy only while the count resource is allocatable.
        assert!(handshake_health("Requesting_2026-08-21 06:10:00", t("2026-08-21 06:20:39"), 4).healthy);
        assert!(!handshake_health("Requesting_2026-08-21 06:10:00", t("2026-08-21 06:20:39"), 0).healthy);
    }

    #[test]
    fn nvidia_remembers_the_allocatable_count() {
        // HAMi's NVIDIA rule: the remembered allocatable count decides on top of the generic one.
        let sick = Health { healthy: false, request: false };
        let mut rep = 0;
        assert_eq!(nvidia_health(sick, 0, &mut rep), sick, "cur 0, rep 0: generic");
        assert!(nvidia_health(sick, 8, &mut rep).healthy, "count changed: healthy");
        assert_eq!(rep, 8);
        let fine = Health { healthy: true, request: false };
        assert!(!nvidia_health(fine, 0, &mut rep).healthy, "count dropped to 0: unhealthy");
        assert_eq!(rep, 0);
    }
}
