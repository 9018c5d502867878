//! HAMi's node locks on the API server: the shared lock taken by compare-and-swap on the node's
//! resourceVersion, with handover from a holder that no longer needs it, and Cambricon's own
//! blind-patched lock. Retries back off with jitter, as HAMi's do.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use crate::backend::{Backend, CAMBRICON_LOCK_TIMEOUT, Error, LockVerdict, PodRef, Result};
use crate::backend::{holder_needs_lock, judge_lock, lock_holder_to_ask};
use crate::model::annotations as keys;
use crate::model::codec;

use super::{KubeBackend, api_err, is_conflict, is_not_found, to_view};

/// Lock writes retried with backoff from 100 ms, factor 2, up to 5 attempts, as HAMi retries them.
const LOCK_ATTEMPTS: u32 = 5;

impl KubeBackend {
    /// Whether the lock's holder still needs it (see `holder_needs_lock`). The watcher's copy of
    /// the pod answers "yes" cheaply; a "no" is confirmed with a fresh read before a lock is broken.
    async fn holder_needs(&self, namespace: &str, name: &str, node: &str) -> Result<bool> {
        if self.pod(namespace, name).is_some_and(|p| holder_needs_lock(&p, node)) {
            return Ok(true);
        }
        match self.call("get", "pods", self.pods_api(namespace).get(name)).await {
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(api_err(e)),
            Ok(p) => Ok(holder_needs_lock(&to_view(&p), node)),
        }
    }

    pub(super) async fn lock_shared(&self, node: &str, pod: &PodRef) -> Result<()> {
        let timeout = self.inner.opts.lock_timeout;
        let contention = || Error::LockContention {
            node: node.to_owned(),
            within: crate::model::codec::format_go_duration(timeout),
        };
        let mut delay = Duration::from_millis(100);
        let mut last = contention();
        for attempt in 0..LOCK_ATTEMPTS {
            // The first attempt trusts the watcher's copy of the node; a conflict re-reads it.
            let (annos, rv) = match (attempt, self.node(node)) {
                (0, Some(v)) => (v.metadata.annotations.clone(), v.metadata.resource_version.clone()),
                _ => {
                    let n = self.get_node(node).await.map_err(|e| {
                        if is_not_found(&e) { Error::NodeNotFound(node.to_owned()) } else { api_err(e) }
                    })?;
                    (
                        n.metadata.annotations.clone().unwrap_or_default().into_iter().collect(),
                        n.metadata.resource_version.clone(),
                    )
                }
            };
            if let Some(v) = annos.get(keys::NODE_LOCK) {
                let l = codec::decode_node_lock(v)
                    .map_err(|e| Error::LockMalformed { node: node.to_owned(), why: e.to_string() })?;
                let needs = match lock_holder_to_ask(&l, pod) {
                    Some((ns, name)) => Some(self.holder_needs(ns, name, node).await?),
                    None => None,
                };
                match judge_lock(&l, pod, l.is_expired(Utc::now(), timeout), needs) {
                    LockVerdict::Mine => return Ok(()),
                    LockVerdict::Contention => return Err(contention()),
                    LockVerdict::Take { expired } => {
                        if expired {
                            crate::metrics::lock_handover();
                        }
                    }
                }
            }
            let value = codec::encode_node_lock(Utc::now(), &pod.namespace, &pod.name);
            match self.patch_node_annotations(node, &[(keys::NODE_LOCK, Some(&value))], rv.as_deref()).await {
                Ok(n) => {
                    self.cache_node(Arc::new(to_view(&n)));
                    return Ok(());
                }
                Err(e) if is_conflict(&e) => last = contention(),
                Err(e) => last = api_err(e),
            }
            tokio::time::sleep(jitter(delay)).await;
            delay *= 2;
        }
        Err(last)
    }

    pub(super) async fn unlock_shared(&self, node: &str, pod: &PodRef) -> Result<()> {
        let mut delay = Duration::from_millis(100);
        for _ in 0..LOCK_ATTEMPTS {
            let n = match self.get_node(node).await {
                Ok(n) => n,
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(api_err(e)),
            };
            let Some(v) = n.metadata.annotations.as_ref().and_then(|a| a.get(keys::NODE_LOCK)) else { return Ok(()) };
            if v.contains(',') && !v.ends_with(&format!(",{},{}", pod.namespace, pod.name)) {
                return Ok(());
            }
            match self
                .patch_node_annotations(node, &[(keys::NODE_LOCK, None)], n.metadata.resource_version.as_deref())
                .await
            {
                Ok(n) => {
                    self.cache_node(Arc::new(to_view(&n)));
                    return Ok(());
                }
                Err(e) if is_conflict(&e) => {}
                Err(e) => return Err(api_err(e)),
            }
            tokio::time::sleep(jitter(delay)).await;
            delay *= 2;
        }
        Err(Error::UnlockFailed { node: node.to_owned() })
    }

    /// Cambricon's lock: a bare time set by blind patch, 2-minute expiry, as HAMi and the MLU
    /// device plugin keep it.
    pub(super) async fn lock_cambricon(&self, node: &str) -> Result<()> {
        let cached = self.node(node);
        if let Some(v) = cached.as_ref().and_then(|n| n.annotation(keys::CAMBRICON_LOCK)) {
            let fresh = codec::decode_node_lock(v).is_ok_and(|l| !l.is_expired(Utc::now(), CAMBRICON_LOCK_TIMEOUT));
            if fresh {
                return Err(Error::CambriconLocked { node: node.to_owned() });
            }
        }
        let value = codec::encode_rfc3339(Utc::now());
        let mut last = None;
        for i in 0..6u64 {
            if i > 1 {
                let ms = (rand::random::<u64>() % i) * 10;
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            match self.patch_node_annotations(node, &[(keys::CAMBRICON_LOCK, Some(&value))], None).await {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(api_err(e)),
            }
        }
        Err(last.unwrap_or_else(|| Error::CambriconLocked { node: node.to_owned() }))
    }
}

fn jitter(d: Duration) -> Duration {
    let f = 1.0 + rand::random::<f64>() * 0.5;
    d.mul_f64(f)
}
