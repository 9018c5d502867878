//! `Engine`, the handle the HTTP layer, the backends and the tools hold: every call the engine
//! answers, each one line into the state and the pipeline that serves it (filter, bind, observe,
//! refit, preemption, prioritize, simulate), so the engine's whole surface reads in this file.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::devices::Vendors;
use crate::model::group::{GroupId, GroupKind, PodGroupObject};
use crate::model::pod::NodeView;
use crate::model::{NodeName, PodRequest, PodUid, PodView};
use crate::port::{Backend, Observer, PodRef};
use crate::sched::NodeSnapshot;

use crate::actor::config::{EngineConfig, FilterResult};
use crate::actor::error::{BindError, FilterError};
use crate::actor::filter::candidates::Candidates;
use crate::actor::filter::failures::Failures;
use crate::actor::filter::run::Told;
use crate::actor::messages::{NodeReport, Registration};
use crate::actor::node::SharedQuota;

use crate::actor::books::pending::{PendingCounts, PendingPod};
use crate::actor::filter::outcome::FilterOutcome;

use crate::actor::books::groups::GroupReport;
use crate::actor::books::recent::RecentDecision;
use crate::actor::preemption::plan::Plan;
use crate::actor::refit::{RefitArgs, RefitOutcome};
use crate::actor::simulate::Simulation;
use crate::actor::state::Inner;

/// The engine handle. Cheap to clone; create it inside a running actix System.
pub struct Engine<B: Backend> {
    pub(super) inner: Arc<Inner<B>>,
}

impl<B: Backend> Clone for Engine<B> {
    fn clone(&self) -> Self {
        Engine { inner: self.inner.clone() }
    }
}

impl<B: Backend> Engine<B> {
    /// Starts the arbiters, the coordinator and an empty address book.
    pub fn start(cfg: EngineConfig, vendors: Arc<Vendors>, backend: B, quota: Option<SharedQuota>) -> Engine<B> {
        Engine { inner: Arc::new(Inner::start(cfg, vendors, backend, quota)) }
    }

    pub fn backend(&self) -> &B {
        &self.inner.backend
    }

    /// Whether `/filter` answers every fitting node (`FilterResult::All`).
    pub fn answers_all(&self) -> bool {
        self.inner.cfg.filter_result == FilterResult::All
    }

    pub fn vendors(&self) -> &Arc<Vendors> {
        &self.inner.vendors
    }
    pub fn config(&self) -> &EngineConfig {
        &self.inner.cfg
    }
    /// The namespace quota book, when quota is enforced.
    pub fn quota(&self) -> Option<&SharedQuota> {
        self.inner.quota.as_ref()
    }

    /// The latest snapshot of a node, if known.
    pub fn snapshot(&self, name: &str) -> Option<Arc<NodeSnapshot>> {
        self.inner.nodes.snapshot(name)
    }

    /// Names of every node the engine knows, sorted.
    pub fn node_names(&self) -> Vec<NodeName> {
        self.inner.nodes.names()
    }

    /// The list resolved lately from the JSON array `raw`, whose names then need not be read;
    /// `None` when no list came in that text lately.
    #[cfg(test)]
    pub(crate) fn known_candidates<'a>(&self, raw: &str) -> Option<Candidates<'a>> {
        self.inner.nodes.known(raw)
    }

    /// The candidates in kube-scheduler's `NodeNames` array `raw`, read and resolved in one pass
    /// (or recognised, when the same text came lately); `None` when the text is not a plain
    /// array of strings, which the caller then reads with the JSON parser.
    pub fn read_candidates<'a>(&self, raw: &str) -> Option<Candidates<'a>> {
        self.inner.nodes.read_json(raw)
    }

    /// The last decisions, newest last.
    pub fn recent_decisions(&self) -> Vec<RecentDecision> {
        self.inner.recent.list()
    }

    /// Every pod the last filter left pending, longest pending first.
    pub fn pending_pods(&self) -> Vec<PendingPod> {
        self.inner.pods.pending.list()
    }

    /// The pending pods by outcome and reason (the pending-pods gauges).
    pub fn pending_counts(&self) -> PendingCounts {
        self.inner.pods.pending.counts()
    }

    // --- reporting ----------------------------------------------------------------------------

    /// Waits until every node actor has applied what was sent to it before (observations
    /// included).
    pub async fn settle(&self) {
        self.inner.nodes.settle().await;
    }

    /// Every node's allocations (for `/usage`, the simulator and the status page).
    pub async fn reports(&self) -> Vec<NodeReport> {
        self.inner.nodes.reports(None).await
    }

    /// The reports of the named nodes the engine knows, sorted by name.
    pub async fn reports_of(&self, names: &[NodeName]) -> Vec<NodeReport> {
        self.inner.nodes.reports(Some(names)).await
    }

    /// kube-scheduler's bind call: lock, write bind-phase and the Binding, commit. On any failure
    /// the locks and the reservation are released, a BindingFailed Event is recorded and the
    /// error is returned. Binding a pod that is already bound to that node succeeds without
    /// doing anything.
    pub async fn bind(&self, pod: &PodRef, node: &str) -> Result<(), BindError> {
        self.inner.bind(pod, node).await
    }

    /// kube-scheduler's filter call in live mode (`nodeCacheCapable`): decide one node for the
    /// pod among `names`, reserve it there and write the decision onto the pod.
    pub async fn filter(&self, pod: &PodView, names: &[Cow<'_, str>]) -> FilterOutcome {
        self.inner.filter(pod, names).await
    }

    /// [`Engine::filter`] over candidates as the extender read them (see
    /// [`Engine::read_candidates`]).
    pub async fn filter_candidates(&self, pod: &PodView, names: &Candidates<'_>) -> FilterOutcome {
        self.inner.filter_candidates(pod, names).await
    }

    /// [`Engine::filter_candidates`], with what it tells of a placed pod (its FilteringSucceed
    /// Event and the console's line) left to the caller, who tells it once the answer is on its
    /// way: nobody waits for either, and kube-scheduler waits for the answer.
    pub async fn filter_telling_later(&self, pod: &PodView, names: &Candidates<'_>) -> (FilterOutcome, Told) {
        self.inner.filter_telling_later(pod, names).await
    }

    /// The pod's device request, with HAMi's error texts for what does not read.
    #[allow(clippy::result_large_err)]
    pub fn request_of(&self, pod: &PodView) -> Result<Arc<PodRequest>, FilterError> {
        self.inner.request_of(pod)
    }

    /// A node was added or its labels/annotations changed. A malformed registration marks the
    /// node's devices unusable, logs why and records an Event; other nodes are unaffected.
    pub async fn register_node(&self, node: Arc<NodeView>) -> Registration {
        self.inner.register_node(node).await
    }

    /// Vendors whose devices the health round found dead on `node` (empty: all alive).
    pub fn set_unhealthy(&self, node: &str, unhealthy: Vec<crate::model::VendorId>) {
        self.inner.set_unhealthy(node, unhealthy)
    }

    /// The node is gone, with every allocation it held. Until it is registered again, pods that
    /// name it are not counted (they would bring back a node nobody registered); whoever
    /// registers it again observes the pods still bound to it once more ([`Engine::was_removed`]).
    pub fn remove_node(&self, name: &str) {
        self.inner.remove_node(name)
    }

    /// Whether the node was removed and not registered since: its pods need observing again once
    /// it is registered.
    pub fn was_removed(&self, name: &str) -> bool {
        self.inner.was_removed(name)
    }

    /// A pod as the cluster shows it. Pods without `hami.io/vgpu-node` are ignored; finished
    /// pods release what they held; terminating pods keep their devices until deleted.
    pub fn observe_pod(&self, pod: &PodView) {
        self.inner.observe_pod(pod)
    }

    /// The pod is gone (deleted, or finished).
    pub fn delete_pod(&self, uid: &PodUid) {
        self.inner.delete_pod(uid)
    }

    /// A PodGroup object (native, coscheduling or Volcano) as the cluster shows it.
    pub fn observe_pod_group(&self, group: &PodGroupObject) {
        self.inner.observe_pod_group(group)
    }

    /// The PodGroup object is gone: its members' claims go back.
    pub fn delete_pod_group(&self, id: &GroupId) {
        self.inner.delete_pod_group(id)
    }

    /// Whether the cluster serves `kind`'s PodGroup API; the links of a kind it does not serve
    /// are ignored, so their pods are placed one by one.
    pub fn set_group_kind_served(&self, kind: GroupKind, served: bool) {
        self.inner.pods.groups.set_served(kind, served)
    }

    /// Whole devices a defragmentation could free now, by (vendor, device type), on `reports`
    /// (computed again at most every 30 s).
    pub fn defrag_freeable(&self, reports: &[NodeReport]) -> Vec<((String, String), usize)> {
        self.inner.defrag_freeable(reports)
    }

    /// Every pod group: members existing, minimum, claimed, bound, state and why it waits.
    pub fn group_reports(&self) -> Vec<GroupReport> {
        self.inner.group_reports()
    }

    /// The preemption that would place `pod`, or `None`: the pod may not preempt
    /// (`preemptionPolicy: Never`), or on no candidate that failed for its devices (others failed
    /// for reasons no eviction changes: unregistered, unusable, locked) does any set of
    /// lower-priority pods free enough. Nodes are ranked by their victims (fewest, then lowest priorities,
    /// then the most recently started), then by name.
    pub async fn preemption_plan(&self, pod: &PodView, req: &PodRequest, failed: &Failures) -> Option<Plan> {
        self.inner.preemption_plan(pod, req, failed).await
    }

    /// kube-scheduler's preemption verb: for each node it proposes victims on (by UID), whether
    /// their release lets the pod's devices fit. Where it does, the node keeps those victims;
    /// where it does not, the fewest more bound pods of lower priority are added when they
    /// suffice; otherwise the node is dropped, so kube-scheduler never evicts for devices that
    /// would still be missing. A pod asking for no device keeps every proposal; a pod a node
    /// already holds devices for (`--preemption=on`) keeps none.
    pub async fn preempt_proposals(
        &self,
        pod: &PodView,
        proposals: &BTreeMap<String, Vec<String>>,
    ) -> Result<BTreeMap<String, Vec<String>>, FilterError> {
        self.inner.preempt_proposals(pod, proposals).await
    }

    /// kube-scheduler's prioritize call: each of `names` scored for the pod (see
    /// [`extender_scores`]). A pod that asks for no device scores 0 everywhere, leaving the
    /// choice to kube-scheduler's own plugins.
    pub async fn prioritize(&self, pod: &PodView, names: &[Cow<'_, str>]) -> Result<Vec<(String, i64)>, FilterError> {
        self.inner.prioritize(pod, names).await
    }

    /// Moves one container's devices onto `allowed_device_uuids` (HAMi's `/refit`). Answers every
    /// outcome as a value; never retries. Serialised with the node's reservations by its actor,
    /// and the move is held until the annotation write settles, so a failed write gives back
    /// exactly what the pod held.
    pub async fn refit(&self, args: RefitArgs) -> RefitOutcome {
        self.inner.refit(args).await
    }

    /// Fits the pod on each node sent (`Err`: a node that did not read, ending the simulation)
    /// and picks the best.
    pub fn simulate(&self, pod: &PodView, nodes: impl IntoIterator<Item = Result<NodeView, String>>) -> Simulation {
        self.inner.simulate(pod, nodes)
    }
}

/// The watchers' view of the engine.
impl<B: Backend> Observer for Engine<B> {
    fn vendors(&self) -> &Vendors {
        Engine::vendors(self)
    }
    async fn register_node(&self, node: Arc<NodeView>) {
        // The outcome is logged and recorded as an Event by the engine; watchers need nothing back.
        Engine::register_node(self, node).await;
    }
    fn set_unhealthy(&self, node: &str, unhealthy: Vec<crate::model::VendorId>) {
        Engine::set_unhealthy(self, node, unhealthy);
    }
    fn remove_node(&self, name: &str) {
        Engine::remove_node(self, name);
    }
    fn was_removed(&self, name: &str) -> bool {
        Engine::was_removed(self, name)
    }
    fn observe_pod(&self, pod: &PodView) {
        Engine::observe_pod(self, pod);
    }
    fn delete_pod(&self, uid: &PodUid) {
        Engine::delete_pod(self, uid);
    }
    fn observe_pod_group(&self, group: &PodGroupObject) {
        Engine::observe_pod_group(self, group);
    }
    fn delete_pod_group(&self, id: &GroupId) {
        Engine::delete_pod_group(self, id);
    }
    fn set_group_kind_served(&self, kind: GroupKind, served: bool) {
        Engine::set_group_kind_served(self, kind, served);
    }
}
