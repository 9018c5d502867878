//! kube-scheduler's filter call as one pipeline: read the pod's request, settle what an earlier
//! attempt left, evaluate every candidate, reserve on the best node whose bind is free, write the
//! decision onto the pod, and tell the pod's Events. Every exit is counted in the filter
//! histogram and the decisions counter. One call is a [`FilterCycle`]: the pod, its request and
//! its candidates, which every step reads from it (preemption's steps too, in `preemption.rs`).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::actor::coordinator::{Decide, Decision};
use crate::actor::filter::candidates::Candidates;
use crate::actor::filter::cycle::FilterCycle;
use crate::actor::filter::evaluate::Evaluation;
use crate::actor::messages::{Holding, Reserve, Reserved};
use crate::actor::{DecisionWrite, Failures, FilterError, FilterOutcome, FilterResult, Inner, RESERVE_CANDIDATES};
use crate::metrics::Outcome;
use crate::model::request::Error as RequestError;
use crate::model::{NodeName, PodRequest, PodView};
use crate::port::{self, Backend, EventType, PodRef, reasons};
use crate::sched::Rejection;
use crate::sched::claim::ClaimKey;

/// How far behind the API writes may be before Filter waits for them.
const MAX_WRITE_BACKLOG: Duration = Duration::from_millis(250);
/// The longest one filter waits for the writes.
const MAX_BACKLOG_WAIT: Duration = Duration::from_secs(5);
/// The longest one filter waits for a node whose bind is free.
pub(in crate::actor) const MAX_BUSY_WAIT: Duration = Duration::from_secs(2);
/// How often a waiting filter looks at the nodes' locks again.
const BUSY_POLL: Duration = Duration::from_millis(5);
/// How many fitting nodes the FilteringSucceed Event names.
const EVENT_FIT_NODES: usize = 10;
// The Event names the best nodes of those ranked first.
const _: () = assert!(crate::actor::filter::evaluate::RANKED_FIRST >= EVENT_FIT_NODES);

impl FilterOutcome {
    fn metric(&self) -> Outcome {
        match self {
            FilterOutcome::PassThrough => Outcome::PassThrough,
            FilterOutcome::Chosen { .. } => Outcome::Scheduled,
            FilterOutcome::NoFit { .. } => Outcome::NoFit,
            FilterOutcome::Error(_) => Outcome::Error,
        }
    }
}

impl<B: Backend> Inner<B> {
    /// kube-scheduler's filter call in live mode (`nodeCacheCapable`): decide one node for the
    /// pod among `names`, reserve it there and write the decision onto the pod.
    pub async fn filter(self: &Arc<Self>, pod: &PodView, names: &[Cow<'_, str>]) -> FilterOutcome {
        self.filter_candidates(pod, &Candidates::names(names)).await
    }

    /// [`Engine::filter`] over candidates as the extender read them (see
    /// [`Engine::read_candidates`]).
    pub async fn filter_candidates(self: &Arc<Self>, pod: &PodView, names: &Candidates<'_>) -> FilterOutcome {
        let (outcome, told) = self.filter_telling_later(pod, names).await;
        told.tell();
        outcome
    }

    /// [`Engine::filter_candidates`], with what it tells of a placed pod (its FilteringSucceed
    /// Event and the console's line) left to the caller, who tells it once the answer is on its
    /// way: nobody waits for either, and kube-scheduler waits for the answer.
    pub async fn filter_telling_later(
        self: &Arc<Self>,
        pod: &PodView,
        names: &Candidates<'_>,
    ) -> (FilterOutcome, Told) {
        let started = Instant::now();
        let (outcome, told) = match self.request_of(pod) {
            Err(e) => (FilterOutcome::Error(e), Told::NOTHING),
            Ok(req) if !req.requests_devices() => (FilterOutcome::PassThrough, Told::NOTHING),
            Ok(req) => FilterCycle { e: self, pod, pref: PodRef::of(pod), req, names }.run().await,
        };
        crate::metrics::filter_done(outcome.metric(), started);
        match &outcome {
            // An error leaves the pod pending too; the console shows it beside the no-fits.
            FilterOutcome::Error(e) => self.remember_error(&PodRef::of(pod), e.to_string()),
            FilterOutcome::Chosen { .. } | FilterOutcome::PassThrough => self.pods.pending.gone(&pod.metadata.uid),
            FilterOutcome::NoFit { .. } => {}
        }
        (outcome, told)
    }

    /// The pod's device request, with HAMi's error texts for what does not read.
    #[allow(clippy::result_large_err)]
    pub fn request_of(self: &Arc<Self>, pod: &PodView) -> Result<Arc<PodRequest>, FilterError> {
        let i = self;
        match i.vendors.pod_request(pod, &i.cfg.defaults) {
            Ok(r) => Ok(Arc::new(r)),
            Err(RequestError::Weights(e)) => Err(FilterError::Weights { pod: pod.metadata.name.clone(), source: e }),
            Err(e) => {
                let pod = format!("{}/{}", pod.metadata.namespace, pod.metadata.name);
                Err(FilterError::Request { pod, source: e })
            }
        }
    }
}

/// What a filter that placed its pod has still to tell (see [`Engine::filter_telling_later`]).
#[must_use = "a filter's Event and console line are told only by `tell`"]
pub struct Told(Option<Box<dyn FnOnce() + Send>>);

impl Told {
    pub(in crate::actor) const NOTHING: Told = Told(None);

    pub fn tell(self) {
        if let Some(tell) = self.0 {
            tell();
        }
    }
}

impl<B: Backend> FilterCycle<'_, '_, B> {
    async fn run(&self) -> (FilterOutcome, Told) {
        let i = self.e;
        if let Err(e) = self.settle_lost_binding().await {
            return (FilterOutcome::Error(e), Told::NOTHING);
        }
        self.drop_earlier_attempt().await;
        self.await_write_backlog().await;
        if let Some(answer) = self.gang().await {
            return answer;
        }
        if let Some(placed) = self.reserve_held().await {
            return placed;
        }
        if let Some(placed) = self.reserve_replacement().await {
            return placed;
        }
        let Some(mut eval) = self.evaluate().await else {
            return (FilterOutcome::Error(FilterError::Stopping), Told::NOTHING);
        };
        let all = i.cfg.filter_result == FilterResult::All;
        if all {
            eval.rank_all();
        }
        let n_fit = eval.n_fit;
        let (decision, fits, mut failed) = match self.reserve_best(eval).await {
            Ok(d) => d,
            Err(e) => return (FilterOutcome::Error(e), Told::NOTHING),
        };
        let (node, reserved) = match decision {
            Decision::Refused(refused) => {
                self.add_refused(&mut failed, refused);
                let counts = failed.counts();
                crate::metrics::rejections(&counts);
                self.tell_no_fit(&failed, &counts);
                if self.preempt(&failed).await.is_none() {
                    self.defragment(&failed).await;
                }
                return (FilterOutcome::NoFit { failed }, Told::NOTHING);
            }
            Decision::Reserved { node, reserved, refused } => {
                self.add_refused(&mut failed, refused);
                // Placed without its claim: what a node claimed for it is free again.
                self.e.give_back_claim(&ClaimKey::Pod(self.req.uid.clone()), None, "placed without its claim");
                (node, reserved)
            }
        };
        self.placed(node, &reserved, &fits, n_fit, failed).await
    }

    /// The pod reserved on `node`: the decision written (when the filter writes it), the Events
    /// to tell, the answer made (every fitting node with `FilterResult::All`).
    pub(in crate::actor) async fn placed(
        &self,
        node: NodeName,
        reserved: &Reserved,
        fits: &[(NodeName, f32, ())],
        n_fit: usize,
        failed: Failures,
    ) -> (FilterOutcome, Told) {
        if let Err(e) = self.write_decision(&node, reserved).await {
            return (FilterOutcome::Error(e), Told::NOTHING);
        }
        let told = self.tell_chosen(&node, fits, n_fit);
        let all = self.e.cfg.filter_result == FilterResult::All;
        let others = if all { self.answer_all(&node, fits, &failed) } else { Vec::new() };
        (FilterOutcome::Chosen { node, others, failed }, told)
    }

    /// Every other node that fits, for `FilterResult::All`, and the scores the prioritize call
    /// reads. A node that refused the reservation (its usage changed since its snapshot) no
    /// longer fits and is not answered.
    fn answer_all(&self, node: &NodeName, fits: &[(NodeName, f32, ())], failed: &Failures) -> Vec<NodeName> {
        let refused = failed.named();
        let fits: Vec<(NodeName, f32, ())> = fits.iter().filter(|(n, ..)| !refused.contains(&n)).cloned().collect();
        let scored = self.e.scored(&fits, Some(node.clone()), &self.pref, &self.req);
        self.e.pods.scores.note(self.req.uid.clone(), scored);
        fits.into_iter().map(|(n, ..)| n).filter(|n| n != node).collect()
    }

    /// A pod whose last Binding failed without an answer may be bound after all: it is read back
    /// before its devices go. Bound, it is counted from what it carries and the filter fails.
    async fn settle_lost_binding(&self) -> Result<(), FilterError> {
        let i = self.e;
        let pref = &self.pref;
        let Some((uid, node)) = i.pods.take_unsettled(&self.req.uid) else { return Ok(()) };
        let bound = match i.backend.pod_read(&pref.namespace, &pref.name).await {
            Ok(v) => v.and_then(|v| v.spec.node_name.clone()).filter(|n| !n.is_empty()),
            Err(e) => {
                i.pods.unsettle(uid, node);
                return Err(e.into());
            }
        };
        match bound {
            Some(n) => {
                self.e.observe_read(pref);
                Err(port::Error::AlreadyBound { pod: pref.to_string(), node: n }.into())
            }
            None => Ok(()),
        }
    }

    /// A repeated filter of the same pod drops what it holds from the earlier attempt, reserved
    /// or committed (a bind that failed after its commit), so the pod does not compete with
    /// itself, as HAMi does. A pod kube-scheduler filters is not bound; should one that is bound
    /// arrive all the same, its devices stay counted.
    async fn drop_earlier_attempt(&self) {
        if let Some(prev) = self.e.nodes.placement(&self.req.uid) {
            let bound = self.pod.spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
            let what = Holding::Reservation { uid: self.req.uid.clone(), only_reserved: bound };
            self.e.unreserve(prev.as_str(), what, "filtered again").await;
        }
    }

    /// Reserves on the best fitting node whose bind is free (the locked ones after), through
    /// this thread's coordinator. The best few are tried; beyond them a pod whose every choice
    /// was taken in the meantime is better filtered again by kube-scheduler than reserved on a
    /// poor node.
    async fn reserve_best(
        &self,
        mut eval: Evaluation,
    ) -> Result<(Decision, Vec<(NodeName, f32, ())>, Failures), FilterError> {
        let i = self.e;
        // The common case: the best node whose bind is free takes the reservation on this thread
        // when its actor is idle, and the locks of the nodes after it are never read.
        let reserve = Instant::now();
        let kinds = i.lock_kinds(&self.req);
        let first_free = eval.ranked.iter().find(|(n, ..)| i.lock_taken(n.as_str(), &self.pref, &kinds).is_none());
        let tried = match first_free.and_then(|(n, ..)| Some((n.clone(), self.reserve_here(n)?))) {
            Some((node, Ok(reserved))) => {
                crate::metrics::phase(crate::metrics::Phase::Reserve, reserve);
                let decision = Decision::Reserved { node, reserved, refused: Vec::new() };
                return Ok((decision, eval.ranked, eval.failed));
            }
            Some((node, Err(r))) => Some((node, r)),
            None => None,
        };
        let (mut ranked, mut free) = self.lock_aware(&eval.ranked);
        if free < RESERVE_CANDIDATES && eval.partly_ranked() {
            // Locks taken on most of the best: free nodes further down go before them.
            eval.rank_all();
            (ranked, free) = self.lock_aware(&eval.ranked);
        }
        if let Some((node, _)) = &tried {
            ranked.retain(|n| n != node);
        } else if free == 0 && !ranked.is_empty() {
            ranked = self.await_free_node(&eval.ranked, ranked).await;
        }
        let reserve = Instant::now();
        let here = if tried.is_none() { self.reserve_first_here(&mut ranked) } else { None };
        let (mut decision, first_refused) = match here {
            Some(Ok(d)) => (d, None),
            here => {
                let refused = tried.or_else(|| here.and_then(Result::err));
                let d = if ranked.is_empty() {
                    Decision::Refused(Vec::new())
                } else {
                    i.nodes
                        .coordinator()
                        .send(Decide { pod: self.req.clone(), ranked })
                        .await
                        .map_err(FilterError::Coordinator)?
                };
                (d, refused)
            }
        };
        if let Some(r) = first_refused {
            decision.refused_first(r);
        }
        crate::metrics::phase(crate::metrics::Phase::Reserve, reserve);
        Ok((decision, eval.ranked, eval.failed))
    }

    /// Every fitting node's bind is taken: holds the filter, for at most `MAX_BUSY_WAIT`, while
    /// one of them is busy with a bind of this scheduler (which lets go within moments), and
    /// answers the lock-aware order once a node is free. kube-scheduler filters one pod at a
    /// time and binds in the background, so without this hold a burst that outruns the device
    /// plugins queues several binds on each node, and those at the back of a queue fail after
    /// `--bind-lock-wait` and go round again. Locks held by others (a device plugin that never
    /// answers, another scheduler) do not hold the filter.
    async fn await_free_node(&self, fits: &[(NodeName, f32, ())], mut ranked: Vec<NodeName>) -> Vec<NodeName> {
        let nodes = &self.e.nodes;
        if !nodes.any_bind_busy(&ranked) {
            return ranked;
        }
        let started = Instant::now();
        while started.elapsed() < MAX_BUSY_WAIT && nodes.any_bind_busy(&ranked) {
            tokio::time::sleep(BUSY_POLL).await;
            let (again, free) = self.lock_aware(fits);
            ranked = again;
            if free > 0 {
                break;
            }
        }
        crate::metrics::phase(crate::metrics::Phase::BindBacklog, started);
        ranked
    }

    /// The best node takes the reservation on this thread when its actor is idle, so the common
    /// filter sends no message; a refusal leaves the rest of `ranked` to the coordinator. `None`
    /// when the best node's actor is busy (or gone): the coordinator then tries `ranked` whole.
    fn reserve_first_here(&self, ranked: &mut Vec<NodeName>) -> Option<Result<Decision, (NodeName, Rejection)>> {
        let answer = self.reserve_here(ranked.first()?)?;
        let node = ranked.remove(0);
        Some(match answer {
            Ok(reserved) => Ok(Decision::Reserved { node, reserved, refused: Vec::new() }),
            Err(r) => Err((node, r)),
        })
    }

    /// Reserves on `node` on this thread when its actor is idle; `None` when it is busy (or gone).
    fn reserve_here(&self, node: &NodeName) -> Option<Result<Reserved, Rejection>> {
        let i = self.e;
        let addr = i.nodes.addr(node.as_str())?;
        addr.reserve_here(Reserve { pod: self.req.clone(), exact: None, ttl: i.cfg.reservation_ttl, claim: None }).ok()
    }

    /// Nodes that refused the reservation join the failures, with their snapshots.
    fn add_refused(&self, failed: &mut Failures, refused: Vec<(NodeName, Rejection)>) {
        for (n, r) in refused {
            let snap = self.e.nodes.snapshot(n.as_str());
            failed.push(n, r, snap);
        }
    }

    /// Writes the decision onto the pod, unless it is written at bind (then the filter makes no
    /// API write). A failed write gives the reservation back.
    async fn write_decision(&self, node: &NodeName, reserved: &Reserved) -> Result<(), FilterError> {
        let i = self.e;
        if i.cfg.decision_write != DecisionWrite::Filter {
            return Ok(());
        }
        let mut patch = i.decision_patch(node, &self.req, &reserved.devices);
        patch.while_unbound = Some(self.pod.metadata.resource_version.clone().unwrap_or_default());
        let write = Instant::now();
        let patched = i.backend.patch_pod(&self.pref, &patch).await;
        crate::metrics::phase(crate::metrics::Phase::ApiWrite, write);
        let Err(e) = patched else { return Ok(()) };
        let what = Holding::Reservation { uid: self.req.uid.clone(), only_reserved: true };
        i.unreserve(node.as_str(), what, "decision not written").await;
        if let port::Error::AlreadyBound { .. } = e {
            // Its Binding took effect although its answer was lost: what it holds is counted
            // from the pod as read just now, not from a watch that may lag.
            self.e.observe_read(&self.pref);
        }
        i.event(&self.pref, reasons::FILTERING_FAILED, EventType::Warning, e.to_string());
        Err(e.into())
    }

    /// The FilteringSucceed Event and the status page's line, to tell. HAMi lists every fitting
    /// node with its score; the list is capped so one Event stays small on large clusters.
    fn tell_chosen(&self, node: &NodeName, fits: &[(NodeName, f32, ())], n_fit: usize) -> Told {
        let best: Vec<(NodeName, f32)> = fits.iter().take(EVENT_FIT_NODES).map(|(n, s, _)| (n.clone(), *s)).collect();
        let (i, pref, node, n) = (self.e.clone(), self.pref.clone(), node.clone(), self.names.len());
        Told(Some(Box::new(move || {
            let mut fit_list = String::with_capacity(32 * best.len());
            for (k, (name, s)) in best.iter().enumerate() {
                if k > 0 {
                    fit_list.push(',');
                }
                fit_list.push_str(name.as_str());
                fit_list.push(':');
                two_decimals(&mut fit_list, *s);
            }
            if n_fit > EVENT_FIT_NODES {
                let _ = write!(fit_list, ",…{} more", n_fit - EVENT_FIT_NODES);
            }
            let message = format!("find fit node({node}), {} nodes not fit, {n_fit} nodes fit({fit_list})", n - n_fit);
            i.event(&pref, reasons::FILTERING_SUCCEED, EventType::Normal, message);
            i.remember(&pref, Some(node.to_string()), "scheduled", format!("{n_fit} of {n} nodes fit"));
        })))
    }

    /// The FilteringFailed Events and the status page's line.
    fn tell_no_fit(&self, failed: &Failures, counts: &crate::metrics::RejectionCounts) {
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!(pod = %self.pref, failed = ?failed.render(), "no node fits");
        }
        let i = self.e;
        i.no_fit_events(&self.pref, failed, self.names.len());
        i.remember_no_fit(&self.pref, &self.req, failed, counts);
    }

    /// Holds the filter while the API writes already queued would delay this pod's bind by
    /// more than `MAX_WRITE_BACKLOG` (bounded by `MAX_BACKLOG_WAIT`). kube-scheduler filters one
    /// pod at a time and binds in the background: without this, a burst schedules faster than
    /// its binds can be written, bind latency grows without bound, node locks are held longer,
    /// and kube-scheduler's bind timeout sends pods round again.
    async fn await_write_backlog(&self) {
        let started = Instant::now();
        loop {
            let backlog = self.e.backend.write_backlog();
            if backlog <= MAX_WRITE_BACKLOG || started.elapsed() >= MAX_BACKLOG_WAIT {
                return;
            }
            tokio::time::sleep(backlog - MAX_WRITE_BACKLOG).await;
        }
    }

    /// The nodes the coordinator may reserve on, best first: the fitting nodes in rank order,
    /// those whose bind lock is taken (a bind of another pod holds the node's in-process lock, or
    /// HAMi's node lock is on the Node for a pod that still needs it) moved after the free ones,
    /// the locked ones with the fewest pods waiting for their bind first. A bind to a locked node
    /// waits for the device plugin of the holder, so under binpack a burst would queue on one
    /// node. With no lock taken this is the rank order, as HAMi chooses.
    /// Also returns how many of them are free.
    fn lock_aware(&self, fits: &[(NodeName, f32, ())]) -> (Vec<NodeName>, usize) {
        let i = self.e;
        let kinds = i.lock_kinds(&self.req);
        let mut free = Vec::with_capacity(RESERVE_CANDIDATES);
        let mut taken: Vec<(u32, &NodeName)> = Vec::new();
        for (n, _, _) in fits {
            if free.len() == RESERVE_CANDIDATES {
                break;
            }
            match i.lock_taken(n.as_str(), &self.pref, &kinds) {
                Some(pending) => taken.push((pending, n)),
                None => free.push(n.clone()),
            }
        }
        let n_free = free.len();
        if n_free < RESERVE_CANDIDATES {
            // Stable: equal queues keep the rank order.
            taken.sort_by_key(|(pending, _)| *pending);
            free.extend(taken.into_iter().take(RESERVE_CANDIDATES - n_free).map(|(_, n)| n.clone()));
        }
        (free, n_free)
    }
}

/// Writes `x` as `format!("{x:.2}")` does, without the general float formatter: an `f32` times
/// 100 is exact in an `f64` (24 + 7 bits), so rounding that product half to even is rounding the
/// exact decimal value of `x`, as the formatter does.
fn two_decimals(out: &mut String, x: f32) {
    let y = f64::from(x) * 100.0;
    if !y.is_finite() || y.abs() >= 1e15 {
        let _ = write!(out, "{x:.2}");
        return;
    }
    let q = y.round_ties_even();
    if q == 0.0 && x.is_sign_negative() {
        // -0.001 formats as "-0.00", and so does -0.0.
        out.push('-');
    }
    let q = q as i64;
    if q < 0 {
        out.push('-');
    }
    let a = q.unsigned_abs();
    let _ = write!(out, "{}.{:02}", a / 100, a % 100);
}

#[cfg(test)]
mod two_decimals_tests {
    use proptest::prelude::*;

    fn two(x: f32) -> String {
        let mut s = String::new();
        super::two_decimals(&mut s, x);
        s
    }

    #[test]
    fn scores_format_as_the_float_formatter_does_ties_and_signs_included() {
        for x in [
            0.0f32,
            -0.0,
            0.125,
            0.375,
            1.005,
            2.675,
            9.995,
            -0.001,
            -0.005,
            -1.5,
            10.0,
            123.456,
            f32::MIN,
            f32::NAN,
            f32::INFINITY,
        ] {
            assert_eq!(two(x), format!("{x:.2}"), "{x:?}");
        }
    }

    proptest! {
        #[test]
        fn any_f32_formats_as_the_float_formatter_does(bits in any::<u32>()) {
            let x = f32::from_bits(bits);
            prop_assert_eq!(two(x), format!("{x:.2}"));
        }

        #[test]
        fn scores_in_their_range_format_as_the_float_formatter_does(x in -1000.0f32..1000.0) {
            prop_assert_eq!(two(x), format!("{x:.2}"));
        }
    }
}
