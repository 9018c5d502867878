//! The in-memory backend: a cluster loaded from a file (see `load`), kept in concurrent maps. It
//! stands in for the API server in the simulator, `serve --cluster-file` and unit tests, and plays
//! the device plugin's part after a bind (bind-phase `success`, node lock released) because no
//! plugin runs behind it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use dashmap::DashMap;

use crate::devices::LockKind;
use crate::model::PodView;
use crate::model::annotations as keys;
use crate::model::codec;
use crate::model::packed::PackedPod;
use crate::model::pod::NodeView;
use crate::model::vec_map::VecMap;

use super::access::{PodPlacement, RequestUser, TokenIdentity};
use super::{Backend, CAMBRICON_LOCK_TIMEOUT, Error, Event, Evicted, LockVerdict, PodPatch, PodRef, Result};

mod load;
mod port;
pub use load::{ClusterObjects, LoadError, PackedCluster, QuotaObject, parse_objects};

const EVENTS_KEPT: usize = 2000;
/// Pods learned from filter requests (not in the cluster file) that are kept while never bound.
/// There is no API server to delete them, so an abandoned pending pod would otherwise stay for
/// good; past this many the oldest unbound ones are forgotten, as if their owner deleted them.
const LEARNED_UNBOUND_KEPT: usize = 10_000;

/// A merge patch applied to a pod's annotations and labels (all a scheduler's patch touches),
/// and to the record of what the scheduler wrote.
fn apply_meta(
    annotations: &mut VecMap<String>,
    labels: &mut VecMap<String>,
    written: &mut BTreeMap<String, String>,
    patch: &PodPatch,
) {
    for (k, val) in &patch.annotations {
        match val {
            Some(s) => {
                annotations.insert(k.clone(), s.clone());
                written.insert(k.clone(), s.clone());
            }
            None => {
                annotations.remove(k);
                written.remove(k);
            }
        }
    }
    for (k, val) in &patch.labels {
        labels.insert(k.clone(), val.clone());
    }
}

/// The API server's answer to a write whose resource version is no longer the pod's.
fn conflict(name: &str) -> Error {
    Error::Status {
        code: 409,
        message: format!(
            "Operation cannot be fulfilled on pods \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        ),
        reason: "Conflict".into(),
    }
}

/// The pods map's key for a pod.
fn pod_key(namespace: &str, name: &str) -> Box<str> {
    let mut k = String::with_capacity(namespace.len() + 1 + name.len());
    k.push_str(namespace);
    k.push('/');
    k.push_str(name);
    k.into_boxed_str()
}

struct PodEntry {
    /// The pod packed (one allocation); readers get their own unpacked copy.
    view: PackedPod,
    /// What the scheduler wrote on the pod, key by key, before the emulated plugin changed anything;
    /// boxed, since most pods of a loaded cluster were never written and the table keeps a slot for
    /// every pod.
    #[allow(clippy::box_collection)] // one word in the slot instead of three, for the pods never written
    written: Option<Box<BTreeMap<String, String>>>,
}

impl PodEntry {
    /// Puts the pod `edit` makes of the packed one in its place, with what the scheduler wrote
    /// kept beside it (`None` when nothing is); a copy that does not unpack refuses the edit.
    fn edit(
        &mut self,
        pod: &PodRef,
        edit: impl FnOnce(&PackedPod, &mut BTreeMap<String, String>) -> Option<PackedPod>,
    ) -> Result<()> {
        let written = self.written.get_or_insert_default();
        let edited = edit(&self.view, written);
        if written.is_empty() {
            self.written = None;
        }
        self.view = edited.ok_or_else(|| Error::Refused(format!("pod {pod}: the cached copy is unreadable")))?;
        Ok(())
    }
}

// A slot in the pods' table per pod: what a cluster of 100,000 pods costs rests on it.
const _: () = assert!(std::mem::size_of::<PodEntry>() == 24);

struct Inner {
    nodes: DashMap<String, Arc<NodeView>>,
    /// Keyed `namespace/name` (neither may contain a `/`): one allocation a key, not two.
    pods: DashMap<Box<str>, PodEntry>,
    events: Mutex<VecDeque<Event>>,
    /// Pods added by `learn_pod`, oldest first (see `LEARNED_UNBOUND_KEPT`).
    learned: Mutex<VecDeque<Box<str>>>,
    /// The pods known only from request bodies: never the cluster's record of a pod
    /// ([`Backend::pod_of_record`]) until something inserts them as the cluster's.
    hearsay: DashMap<Box<str>, ()>,
    /// Bearer tokens a test lets authenticate; nothing loaded from a file adds one, so with
    /// `serve --cluster-file` no caller authenticates.
    tokens: DashMap<String, TokenIdentity>,
    /// `(user, verb, resource)` a test lets through; everything else is refused.
    permitted: DashMap<(String, String, String), ()>,
    lock_timeout: Duration,
    /// Which pod took each node's Cambricon lock (the lock value itself names no owner).
    cambricon_holders: DashMap<String, (String, String)>,
    /// Make writes fail, for tests of failure paths.
    fail_patch: std::sync::atomic::AtomicBool,
    /// Pod patches written (Filter's and Bind's), for tests that count API writes.
    pod_patches: std::sync::atomic::AtomicUsize,
    fail_bind: std::sync::atomic::AtomicBool,
    /// Binds take effect but answer with a transport error, as when the connection drops.
    lose_bind_answers: std::sync::atomic::AtomicBool,
    /// Reads past the cache fail with a transport error.
    fail_read: std::sync::atomic::AtomicBool,
    /// Pods a PodDisruptionBudget keeps from eviction (`namespace/name`), for tests.
    protected: DashMap<Box<str>, ()>,
    /// Evictions refused although no budget was seen to protect the pod (one that changed
    /// after it was read).
    refuse_evictions: std::sync::atomic::AtomicBool,
    /// DeviceClasses of the cluster file that map a served resource name.
    dra: crate::port::dra::DraBook,
    /// The cluster file's PodDisruptionBudgets.
    budgets: Mutex<Vec<BudgetObject>>,
}

/// A PodDisruptionBudget as the in-memory cluster needs it: its namespace, its `matchLabels`,
/// and `maxUnavailable` or `minAvailable` as written (a number or a percentage).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetObject {
    pub namespace: String,
    pub name: String,
    pub match_labels: Vec<(String, String)>,
    pub max_unavailable: Option<String>,
    pub min_available: Option<String>,
}

impl BudgetObject {
    fn selects(&self, labels: &crate::model::vec_map::VecMap<String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k).is_some_and(|x| x == v))
    }

    /// Disruptions allowed with `matching` pods healthy.
    fn allowed(&self, matching: usize) -> usize {
        let count = |t: &str, up: bool| match t.strip_suffix('%') {
            Some(p) => {
                let p: usize = p.trim().parse().unwrap_or(0);
                if up { (matching * p).div_ceil(100) } else { matching * p / 100 }
            }
            None => t.trim().parse().unwrap_or(0),
        };
        match (&self.max_unavailable, &self.min_available) {
            (Some(m), _) => count(m, false),
            (None, Some(m)) => matching.saturating_sub(count(m, true)),
            (None, None) => matching,
        }
    }
}

/// The in-memory cluster. Clones share the same cluster.
#[derive(Clone)]
pub struct MemoryBackend {
    inner: Arc<Inner>,
}

impl MemoryBackend {
    pub fn new(lock_timeout: Duration) -> MemoryBackend {
        MemoryBackend {
            inner: Arc::new(Inner {
                nodes: DashMap::new(),
                pods: DashMap::new(),
                events: Mutex::new(VecDeque::new()),
                learned: Mutex::new(VecDeque::new()),
                hearsay: DashMap::new(),
                tokens: DashMap::new(),
                permitted: DashMap::new(),
                cambricon_holders: DashMap::new(),
                lock_timeout,
                fail_patch: false.into(),
                pod_patches: 0.into(),
                fail_bind: false.into(),
                lose_bind_answers: false.into(),
                fail_read: false.into(),
                protected: DashMap::new(),
                refuse_evictions: false.into(),
                dra: Default::default(),
                budgets: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The DeviceClass book, filled from the cluster file.
    pub fn dra(&self) -> &crate::port::dra::DraBook {
        &self.inner.dra
    }

    pub fn insert_node(&self, node: NodeView) {
        self.inner.nodes.insert(node.metadata.name.clone(), Arc::new(node));
    }

    pub fn remove_node(&self, name: &str) {
        self.inner.nodes.remove(name);
    }

    /// Adds or replaces a pod; the scheduler's record of its writes is kept. Answers the stored pod.
    pub fn insert_pod(&self, pod: PodView) -> Arc<PodView> {
        self.insert_packed(PackedPod::pack(&pod));
        Arc::new(pod)
    }

    /// Adds or replaces a pod already packed (see [`PackedCluster`]).
    pub fn insert_packed(&self, packed: PackedPod) {
        let key = pod_key(packed.namespace(), packed.name());
        self.inner.hearsay.remove(&key);
        match self.inner.pods.entry(key) {
            dashmap::Entry::Occupied(mut e) => e.get_mut().view = packed,
            dashmap::Entry::Vacant(e) => {
                e.insert(PodEntry { view: packed, written: None });
            }
        }
    }

    /// Adds or replaces a node, shared with whoever else holds it.
    pub fn insert_node_shared(&self, node: Arc<NodeView>) {
        self.inner.nodes.insert(node.metadata.name.clone(), node);
    }

    pub fn remove_pod(&self, namespace: &str, name: &str) -> Option<Arc<PodView>> {
        let key = pod_key(namespace, name);
        self.inner.hearsay.remove(&key);
        self.inner.pods.remove(&key).and_then(|(_, e)| super::unpacked(&e.view))
    }

    pub fn nodes(&self) -> Vec<Arc<NodeView>> {
        let mut v: Vec<Arc<NodeView>> = self.inner.nodes.iter().map(|e| e.value().clone()).collect();
        v.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        v
    }

    pub fn pods(&self) -> Vec<Arc<PodView>> {
        let mut v: Vec<Arc<PodView>> = self.inner.pods.iter().filter_map(|e| super::unpacked(&e.view)).collect();
        v.sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));
        v
    }

    /// The annotations the scheduler wrote on a pod, as it wrote them.
    pub fn written(&self, namespace: &str, name: &str) -> BTreeMap<String, String> {
        self.inner.pods.get(&pod_key(namespace, name)).and_then(|e| e.written.as_deref().cloned()).unwrap_or_default()
    }

    pub fn events(&self) -> Vec<Event> {
        self.inner.events.lock().map(|e| e.iter().cloned().collect()).unwrap_or_default()
    }

    pub fn events_for(&self, pod: &PodRef) -> Vec<Event> {
        self.events().into_iter().filter(|e| e.pod.namespace == pod.namespace && e.pod.name == pod.name).collect()
    }

    /// How many pod patches were written so far.
    pub fn pod_patches(&self) -> usize {
        self.inner.pod_patches.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Makes every later pod patch (or bind) fail, to exercise failure paths.
    pub fn fail_patches(&self, on: bool) {
        self.inner.fail_patch.store(on, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn fail_binds(&self, on: bool) {
        self.inner.fail_bind.store(on, std::sync::atomic::Ordering::SeqCst);
    }
    /// Makes later binds take effect and then fail as if the answer was lost on the way.
    pub fn lose_bind_answers(&self, on: bool) {
        self.inner.lose_bind_answers.store(on, std::sync::atomic::Ordering::SeqCst);
    }
    /// Lets no eviction take the pod, as a PodDisruptionBudget that allows no disruption would.
    pub fn protect(&self, namespace: &str, name: &str) {
        self.inner.protected.insert(pod_key(namespace, name), ());
    }

    /// A PodDisruptionBudget of the cluster.
    pub fn add_budget(&self, b: BudgetObject) {
        if let Ok(mut v) = self.inner.budgets.lock() {
            v.push(b);
        }
    }

    /// Of `pods`, those a budget keeps from eviction now (evicting them all at once): a budget
    /// allows as many disruptions as `maxUnavailable`, or as its pods above `minAvailable`.
    pub fn budget_blocked(&self, pods: &[crate::port::PodRef]) -> Vec<crate::port::PodRef> {
        let Ok(budgets) = self.inner.budgets.lock() else { return pods.to_vec() };
        if budgets.is_empty() {
            return Vec::new();
        }
        let all = self.pods();
        let mut out = Vec::new();
        for b in budgets.iter() {
            let covers = |p: &PodView| p.metadata.namespace == b.namespace && b.selects(&p.metadata.labels);
            let matching = all.iter().filter(|p| covers(p) && !p.is_terminating() && !p.is_finished()).count();
            let asked: Vec<&crate::port::PodRef> = pods
                .iter()
                .filter(|r| {
                    all.iter().any(|p| p.metadata.namespace == r.namespace && p.metadata.name == r.name && covers(p))
                })
                .collect();
            if asked.len() > b.allowed(matching) {
                out.extend(asked.into_iter().cloned());
            }
        }
        out
    }

    /// Refuses every eviction, as a budget tightened after it was read would.
    pub fn refuse_evictions(&self, on: bool) {
        self.inner.refuse_evictions.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Lets `token` authenticate as `who` ([`Backend::review_token`]), for tests.
    pub fn accept_token(&self, token: &str, who: TokenIdentity) {
        self.inner.tokens.insert(token.to_owned(), who);
    }

    /// Lets `username` do `verb` on `resource` ([`Backend::permits`]), for tests.
    pub fn permit(&self, username: &str, verb: &str, resource: &str) {
        self.inner.permitted.insert((username.to_owned(), verb.to_owned(), resource.to_owned()), ());
    }

    /// Makes later reads past the cache ([`Backend::pod_read`]) fail.
    pub fn fail_reads(&self, on: bool) {
        self.inner.fail_read.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Changes the pod in place. With `only_unbound`, a bound pod is left as it is and the edit
    /// fails with `AlreadyBound`.
    fn edit_pod(
        &self,
        pod: &PodRef,
        only_unbound: bool,
        f: impl FnOnce(&mut PodView, &mut BTreeMap<String, String>),
    ) -> Result<()> {
        let mut e = self.entry_to_edit(pod, None, only_unbound)?;
        e.edit(pod, |view, written| {
            let mut v = view.unpack()?;
            f(&mut v, written);
            Some(PackedPod::pack(&v))
        })
    }

    /// The pod's entry, for an edit whose preconditions hold: at `at_version` when one is given
    /// (else a conflict), the uid asked for, and unbound with `only_unbound` (else `AlreadyBound`).
    fn entry_to_edit(
        &self,
        pod: &PodRef,
        at_version: Option<&str>,
        only_unbound: bool,
    ) -> Result<dashmap::mapref::one::RefMut<'_, Box<str>, PodEntry>> {
        let e = self
            .inner
            .pods
            .get_mut(&pod_key(&pod.namespace, &pod.name))
            .ok_or_else(|| Error::PodNotFound(pod.to_string()))?;
        if let Some(rv) = at_version.filter(|rv| !rv.is_empty())
            && e.view.resource_version() != Some(rv)
        {
            return Err(conflict(&pod.name));
        }
        if !pod.uid.is_empty() && e.view.uid() != pod.uid {
            return Err(Error::Refused(format!("pod {pod}: uid precondition failed")));
        }
        if let Some(node) = e.view.node_name()
            && only_unbound
        {
            return Err(Error::AlreadyBound { pod: pod.to_string(), node: node.to_owned() });
        }
        Ok(e)
    }

    fn edit_node(&self, node: &str, f: impl FnOnce(&mut NodeView) -> Result<()>) -> Result<()> {
        let mut e = self.inner.nodes.get_mut(node).ok_or_else(|| Error::NodeNotFound(node.to_owned()))?;
        let mut v = (**e).clone();
        f(&mut v)?;
        *e = Arc::new(v);
        Ok(())
    }

    /// The device plugin's part after Allocate: every to-allocate list emptied, bind-phase
    /// `success`, the node lock released by its owner.
    fn play_plugin(&self, pod: &PodRef, node: &str) {
        let _ = self.edit_pod(pod, false, |v, _| {
            for (k, val) in v.metadata.annotations.iter_mut() {
                if k.ends_with("-devices-to-allocate") {
                    let n = val.matches(';').count();
                    *val = ";".repeat(n + 1);
                }
            }
            v.metadata.annotations.insert(keys::BIND_PHASE.into(), keys::BIND_PHASE_SUCCESS.into());
        });
        let _ = self.release(node, pod, LockKind::Shared);
        // Cambricon's lock names no owner; its plugin releases it after serving the pod that took it.
        let took =
            self.inner.cambricon_holders.remove_if(node, |_, h| h.0 == pod.namespace && h.1 == pod.name).is_some();
        if took {
            let _ = self.release(node, pod, LockKind::Cambricon);
        }
    }

    fn release(&self, node: &str, pod: &PodRef, kind: LockKind) -> Result<()> {
        let key = match kind {
            LockKind::Shared => keys::NODE_LOCK,
            LockKind::Cambricon => keys::CAMBRICON_LOCK,
            LockKind::None => return Ok(()),
        };
        self.edit_node(node, |n| {
            if let Some(v) = n.metadata.annotations.get(key) {
                let ours = match codec::decode_node_lock(v) {
                    Ok(l) => l.owner.is_none() || l.is_held_by(&pod.namespace, &pod.name),
                    Err(_) => false,
                };
                if ours {
                    n.metadata.annotations.remove(key);
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    #[tokio::test]
    async fn learned_pods_that_never_bind_are_forgotten_oldest_first_and_bound_ones_stay() {
        let b = MemoryBackend::new(Duration::from_secs(300));
        b.insert_node(node("n1").gpus(1, 16384).view());
        b.insert_pod(pod().gpu(1).name("from-file").view());
        let name = |i: usize| format!("learned-{i}");
        b.learn_pod(&pod().gpu(1).name(&name(0)).uid("u0").view());
        let first = PodRef { namespace: "default".into(), name: name(0), uid: "u0".into() };
        b.bind(&first, "n1", &PodPatch::bind_phase(1)).await.expect("binds");
        for i in 1..=LEARNED_UNBOUND_KEPT + 5 {
            b.learn_pod(&pod().gpu(1).name(&name(i)).view());
        }
        let names: std::collections::BTreeSet<String> = b.pods().iter().map(|p| p.metadata.name.clone()).collect();
        assert!(names.contains("from-file"), "pods of the cluster file are never forgotten");
        assert!(names.contains(&name(0)), "a bound pod stays");
        assert!(!names.contains(&name(1)) && !names.contains(&name(5)), "the oldest unbound ones go");
        assert!(names.contains(&name(6)) && names.contains(&name(LEARNED_UNBOUND_KEPT + 5)));
        assert_eq!(names.len(), 2 + LEARNED_UNBOUND_KEPT);
    }
}
