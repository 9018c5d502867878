//! HAMi's node locks as both backends judge them: who holds a lock, whether its holder still
//! needs it, and whether a bind may take it over. One table, so the in-memory backend and the
//! Kubernetes backend cannot drift apart.

use std::sync::Arc;

use crate::model::PodView;
use crate::model::pod::NodeView;

use super::PodRef;

/// What a bind may do with the node lock it finds on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockVerdict {
    /// This pod holds it already.
    Mine,
    /// It may be taken over: it names a holder that no longer needs it (expired or not), or it
    /// is a legacy lock naming nobody that expired. `expired` says which, for the handover metric.
    Take { expired: bool },
    /// Another pod still needs it, or a legacy lock is still fresh.
    Contention,
}

/// The pod named in `lock` whose need of it decides the verdict, if any: not this pod, and not
/// a legacy lock naming nobody.
pub fn lock_holder_to_ask<'a>(lock: &'a crate::model::codec::NodeLock, pod: &PodRef) -> Option<(&'a str, &'a str)> {
    if lock.is_held_by(&pod.namespace, &pod.name) {
        return None;
    }
    lock.owner.as_ref().map(|(ns, name)| (ns.as_str(), name.as_str()))
}

/// The lock decision both backends take. `holder_needs` answers for the pod
/// [`lock_holder_to_ask`] named (ignored when it named none): a lock whose holder still waits
/// for its device plugin's Allocate is never taken, even expired, since the plugin finds its pod
/// through the lock; one whose holder is gone, bound elsewhere or done is taken at once, fresh or
/// not, so a failed bind does not block the node for the whole lock timeout.
pub fn judge_lock(
    lock: &crate::model::codec::NodeLock,
    pod: &PodRef,
    expired: bool,
    holder_needs: Option<bool>,
) -> LockVerdict {
    if lock.is_held_by(&pod.namespace, &pod.name) {
        return LockVerdict::Mine;
    }
    let free = match &lock.owner {
        None => expired,
        Some(_) => holder_needs == Some(false),
    };
    if free { LockVerdict::Take { expired } } else { LockVerdict::Contention }
}

/// How long Cambricon's own node lock holds (its device plugin's rule).
pub const CAMBRICON_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Whether a bind of `pod` would now find HAMi's `kind` lock on `node` held by someone else, as
/// the caches show it (no API call): the same verdict as [`judge_lock`], with a holder the cache
/// does not know taken as gone. Filter uses it only to prefer nodes whose lock is free; the bind
/// still decides with fresh reads.
pub fn lock_taken(
    node: &NodeView,
    pod: &PodRef,
    kind: crate::devices::LockKind,
    timeout: std::time::Duration,
    holder: impl Fn(&str, &str) -> Option<Arc<PodView>>,
) -> bool {
    use crate::devices::LockKind;
    use crate::model::annotations as keys;
    use crate::model::codec;
    match kind {
        LockKind::Shared => {
            let Some(v) = node.annotation(keys::NODE_LOCK) else { return false };
            // A malformed lock fails every bind until someone fixes it.
            let Ok(l) = codec::decode_node_lock(v) else { return true };
            let needs = lock_holder_to_ask(&l, pod)
                .map(|(ns, name)| holder(ns, name).is_some_and(|p| holder_needs_lock(&p, &node.metadata.name)));
            judge_lock(&l, pod, l.is_expired(chrono::Utc::now(), timeout), needs) == LockVerdict::Contention
        }
        LockKind::Cambricon => node.annotation(keys::CAMBRICON_LOCK).is_some_and(|v| {
            codec::decode_node_lock(v).is_ok_and(|l| !l.is_expired(chrono::Utc::now(), CAMBRICON_LOCK_TIMEOUT))
        }),
        LockKind::None => false,
    }
}

/// Whether the pod a node lock names still needs the lock on `node`: it is headed for the node
/// and its device plugin has not answered yet. A lock whose holder does not need it any more (gone,
/// finished, terminating, answered, moved elsewhere, or never got as far as writing its bind-phase)
/// may be taken over, expired or not; one whose holder still waits for its Allocate may not, even
/// when it expired, since the plugin finds "its" pod through the lock (HAMi issue 3096).
pub fn holder_needs_lock(p: &PodView, node: &str) -> bool {
    use crate::model::annotations as keys;
    if p.is_terminating() || p.is_finished() {
        return false;
    }
    if p.status.phase.as_deref().is_some_and(|ph| ph != "Pending") {
        return false;
    }
    let phase = p.annotation(keys::BIND_PHASE);
    if matches!(phase, Some(keys::BIND_PHASE_SUCCESS) | Some(keys::BIND_PHASE_FAILED)) {
        return false;
    }
    if p.annotation(keys::ASSIGNED_NODE) != Some(node) {
        return false;
    }
    match p.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        Some(n) => n == node,
        // Between the bind-phase patch and the Binding: its bind will be retried.
        None => phase == Some(keys::BIND_PHASE_ALLOCATING),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_decision_is_one_table_for_both_backends() {
        use crate::model::codec::NodeLock;
        let me = PodRef { namespace: "default".into(), name: "me".into(), uid: "uid-me".into() };
        let named =
            |who: &str| NodeLock { time: chrono::Utc::now().into(), owner: Some(("default".into(), who.into())) };
        let legacy = NodeLock { time: chrono::Utc::now().into(), owner: None };
        // (lock, expired, does the named holder still need it, verdict)
        let rows = [
            (named("me"), false, None, LockVerdict::Mine),
            (named("me"), true, None, LockVerdict::Mine),
            (named("other"), false, Some(true), LockVerdict::Contention),
            // Expired but its pod still waits for Allocate: the plugin finds the pod through it.
            (named("other"), true, Some(true), LockVerdict::Contention),
            // Fresh, but its pod no longer needs it: taken at once.
            (named("other"), false, Some(false), LockVerdict::Take { expired: false }),
            (named("other"), true, Some(false), LockVerdict::Take { expired: true }),
            // A legacy lock names nobody: only its age frees it.
            (legacy.clone(), false, None, LockVerdict::Contention),
            (legacy, true, None, LockVerdict::Take { expired: true }),
        ];
        for (lock, expired, needs, want) in rows {
            assert_eq!(judge_lock(&lock, &me, expired, needs), want, "{lock:?} expired={expired} needs={needs:?}");
        }
        assert_eq!(lock_holder_to_ask(&named("me"), &me), None);
        assert_eq!(lock_holder_to_ask(&named("other"), &me), Some(("default", "other")));
    }

    use crate::model::annotations as keys;
    use crate::testing::pod;

    fn holder(f: impl FnOnce(&mut PodView)) -> PodView {
        let mut p = pod()
            .name("holder")
            .annotation(keys::ASSIGNED_NODE, "n1")
            .annotation(keys::BIND_PHASE, "allocating")
            .view();
        p.spec.node_name = Some("n1".into());
        f(&mut p);
        p
    }

    #[test]
    fn a_holder_bound_here_and_waiting_for_its_plugin_needs_the_lock() {
        // HAMi issue 3096: handing the lock over now would let the plugin serve the wrong pod.
        assert!(holder_needs_lock(&holder(|_| {}), "n1"));
        // Between the bind-phase patch and the Binding, the bind will be retried.
        assert!(holder_needs_lock(&holder(|p| p.spec.node_name = None), "n1"));
    }

    #[test]
    fn a_holder_that_is_done_or_elsewhere_does_not() {
        let cases: Vec<(&str, PodView)> = vec![
            (
                "plugin answered",
                holder(|p| {
                    p.metadata.annotations.insert(keys::BIND_PHASE.into(), "success".into());
                }),
            ),
            (
                "plugin failed",
                holder(|p| {
                    p.metadata.annotations.insert(keys::BIND_PHASE.into(), "failed".into());
                }),
            ),
            ("running", holder(|p| p.status.phase = Some("Running".into()))),
            ("finished", holder(|p| p.status.phase = Some("Succeeded".into()))),
            ("terminating", holder(|p| p.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into()))),
            ("bound elsewhere", holder(|p| p.spec.node_name = Some("n2".into()))),
            (
                "filtered elsewhere",
                holder(|p| {
                    p.metadata.annotations.insert(keys::ASSIGNED_NODE.into(), "n2".into());
                }),
            ),
            (
                "never wrote bind-phase",
                holder(|p| {
                    p.spec.node_name = None;
                    p.metadata.annotations.remove(keys::BIND_PHASE);
                }),
            ),
        ];
        for (why, p) in cases {
            assert!(!holder_needs_lock(&p, "n1"), "{why}");
        }
    }
}
