//! Filter's evaluation of the candidates: each candidate's answer for the pod, from the answer
//! table kept for its candidate list and shape where the node's snapshot has not changed since,
//! fitted afresh (in slices on every arbiter for long lists) where it has; or, in message mode,
//! from every node actor. The fitting nodes come out ranked by the pod's node policy.

use std::sync::Arc;
use std::time::Instant;

use super::candidates::{Answers, Listed, Placed, Resolution, Table};
use super::coordinator::FanOut;
use super::cycle::FilterCycle;
use super::quota::QuotaBook;
use super::{Failures, FilterMode, RESERVE_CANDIDATES, SCRATCH};
use crate::devices::{NoQuota, QuotaCheck, Vendors};
use crate::model::request::NodePolicy;
use crate::model::{NodeName, PodRequest};
use crate::port::Backend;
use crate::sched::{NodeSnapshot, Rejection, fit, score};

impl<B: Backend> FilterCycle<'_, '_, B> {
    /// Every candidate's answer, the fitting ones ranked; `None` when an arbiter is gone (the
    /// engine is stopping).
    pub(super) async fn evaluate(&self) -> Option<Evaluation> {
        let fan_out = Instant::now();
        let eval = match self.e.inner.cfg.filter_mode {
            FilterMode::Snapshot => self.evaluate_snapshots().await?,
            FilterMode::Messages => self.evaluate_messages().await,
        };
        crate::metrics::phase(crate::metrics::Phase::FanOut, fan_out);
        Some(eval)
    }

    /// Fits the pod on the candidates whose snapshot changed since a pod of its shape was last
    /// answered over this list, and answers the others from the list's table. A pod under a
    /// namespace quota is fitted on every candidate. `None` when an arbiter is gone (the engine is
    /// stopping).
    async fn evaluate_snapshots(&self) -> Option<Evaluation> {
        let (i, req) = (&*self.e.inner, &self.req);
        let list = i.nodes.resolve(self.names);
        // A namespace quota changes with allocations on other nodes: such answers are not kept.
        let keep = i.quota.as_deref().is_none_or(|q| q.view(&req.namespace).is_none());
        let mut table = if keep { list.take_table(req.fit_key) } else { Table::fresh(req.fit_key, list.len()) };
        let mut moved = Vec::new();
        let mut snaps = Vec::new();
        let mut kept = 0;
        for (k, g) in list.generations().enumerate() {
            let (k, Some(g)) = (k as u32, g) else { continue };
            if table.current(k, g) {
                kept += 1;
            } else if let Some(c) = list.cell(k) {
                moved.push(k);
                snaps.push(c.load());
            }
        }
        let (fitted, remembered) = self.fit_all(&list, snaps, keep, &moved, &mut table).await?;
        let mut counts = *table.counts();
        counts.unregistered += list.unregistered() as u64;
        let answers = table.answers();
        let policy = req.node_policy;
        let (best, n_fit) = if keep {
            let best = table.best(&list, policy, RANKED_FIRST);
            list.put_table(table);
            best
        } else {
            let fits = list.placed(&answers, policy);
            let n_fit = fits.len();
            (Evaluation::select_best(fits), n_fit)
        };
        crate::metrics::rejections(&counts);
        crate::metrics::nodes_evaluated(fitted, remembered + kept);
        Some(Evaluation::of_list(list, answers, best, n_fit, policy))
    }

    /// Answers the pod on each snapshot (from its memo when `memo`) into `table` at `places`.
    /// Long lists (at least `EngineConfig::slice_min`) are cut into one slice per arbiter: this
    /// thread fits the first, the arbiters the others, at the same time, each on its own core.
    /// Returns how many were fitted and how many answered from memos.
    async fn fit_all(
        &self,
        list: &Resolution,
        mut snaps: Vec<Arc<NodeSnapshot>>,
        memo: bool,
        places: &[u32],
        table: &mut Table,
    ) -> Option<(u64, u64)> {
        let (i, req) = (&*self.e.inner, &self.req);
        let arbiters = &i.nodes.arbiters;
        let slices = if snaps.len() >= i.cfg.slice_min { arbiters.len().max(1) } else { 1 };
        let per = snaps.len().div_ceil(slices).max(1);
        let mut pending = Vec::with_capacity(slices.saturating_sub(1));
        for k in (1..slices).rev() {
            let start = (k * per).min(snaps.len());
            let tail = snaps.split_off(start);
            if tail.is_empty() {
                continue;
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (vendors, quota, req) = (i.vendors.clone(), i.quota.clone(), req.clone());
            arbiters[k].spawn(async move {
                let _ = tx.send(fit_slice(&vendors, quota.as_deref(), &req, memo, tail));
            });
            pending.push((start, rx));
        }
        let mut parts = vec![(0, fit_slice(&i.vendors, i.quota.as_deref(), req, memo, snaps))];
        for (start, rx) in pending {
            parts.push((start, rx.await.ok()?));
        }
        let (mut fitted, mut remembered) = (0, 0);
        for (start, part) in parts {
            fitted += part.fitted;
            remembered += part.remembered;
            for (n, (snap, answer)) in part.answers.into_iter().enumerate() {
                let k = places[start + n];
                table.set(k, &snap, answer, list.name_rank(k));
            }
        }
        Some((fitted, remembered))
    }

    /// Sends `Filter` to every candidate node actor through the coordinator.
    async fn evaluate_messages(&self) -> Evaluation {
        let i = &*self.e.inner;
        let ids: Vec<NodeName> = self.names.iter().map(NodeName::new).collect();
        let answers =
            i.nodes.coordinator().send(FanOut { pod: self.req.clone(), names: ids }).await.unwrap_or_default();
        let mut fits = Vec::with_capacity(answers.len());
        let mut failed = Failures::default();
        let mut counts = crate::metrics::RejectionCounts::default();
        for (n, r) in answers {
            match r {
                Ok(s) => fits.push((n, s, ())),
                Err(r) => {
                    counts.add(&r);
                    // A name the engine does not know reads as in snapshot mode: HAMi's bare text.
                    let snap = i.nodes.snapshot(n.as_str());
                    failed.push(n, r, snap);
                }
            }
        }
        crate::metrics::rejections(&counts);
        Evaluation::of_nodes(fits, failed, self.req.node_policy)
    }
}

/// Fitting nodes ranked first from a resolved list; the rest are ranked only when the coordinator
/// needs more of them (see `Engine::filter`).
pub(super) const RANKED_FIRST: usize = 4 * RESERVE_CANDIDATES;

/// What evaluating the candidates came to.
pub(super) struct Evaluation {
    /// Fitting nodes, best first: every one, or the best `RANKED_FIRST` while `rest` is set.
    pub(super) ranked: Vec<(NodeName, f32, ())>,
    /// How many candidates fit.
    pub(super) n_fit: usize,
    /// Where the other fitting candidates of a resolved list are read from, when `ranked` holds
    /// only the best.
    rest: Option<Rest>,
    pub(super) failed: Failures,
}

/// A list's answers as one filter read them, ranked whole only when needed.
struct Rest {
    list: Arc<Resolution>,
    answers: Arc<Answers>,
    policy: NodePolicy,
}

impl Evaluation {
    fn of_nodes(mut fits: Vec<(NodeName, f32, ())>, failed: Failures, policy: NodePolicy) -> Evaluation {
        score::rank_nodes(&mut fits, policy);
        Evaluation { n_fit: fits.len(), ranked: fits, rest: None, failed }
    }

    /// The best `RANKED_FIRST` of `fits` (selected, not sorted, from the rest), in
    /// `score::rank_nodes`'s order.
    pub(super) fn select_best(mut fits: Vec<Placed>) -> Vec<Placed> {
        // Keys are unique (no two candidates share a place in name order): unstable is exact.
        let first = RANKED_FIRST.min(fits.len());
        if first < fits.len() {
            fits.select_nth_unstable_by_key(first, |p| p.0);
            fits.truncate(first);
        }
        fits.sort_unstable_by_key(|p| p.0);
        fits
    }

    /// A list's evaluation from its answers: `best`, the best fitting candidates in rank order,
    /// and how many fit.
    pub(super) fn of_list(
        list: Arc<Resolution>,
        answers: Arc<Answers>,
        best: Vec<Placed>,
        n_fit: usize,
        policy: NodePolicy,
    ) -> Evaluation {
        let listed = Listed::new(list.clone(), answers.clone(), list.len() - n_fit);
        let failed = Failures::of_list(listed);
        let ranked = best.iter().map(|(_, s, k)| (list.name(*k).clone(), *s, ())).collect();
        let rest = (n_fit > best.len()).then_some(Rest { list, answers, policy });
        Evaluation { ranked, n_fit, rest, failed }
    }

    /// Whether only the best fitting candidates are ranked yet.
    pub(super) fn partly_ranked(&self) -> bool {
        self.rest.is_some()
    }

    /// Ranks every fitting candidate, when only the best were.
    pub(super) fn rank_all(&mut self) {
        if let Some(Rest { list, answers, policy }) = self.rest.take() {
            let mut fits = list.placed(&answers, policy);
            fits.sort_unstable_by_key(|p| p.0);
            self.ranked = fits.iter().map(|(_, s, k)| (list.name(*k).clone(), *s, ())).collect();
        }
    }
}

/// What one slice of the snapshots came to.
struct Part {
    /// Per snapshot, in order.
    answers: Vec<(Arc<NodeSnapshot>, Result<f32, Rejection>)>,
    /// Snapshots fitted, and answered from a memo.
    fitted: u64,
    remembered: u64,
}

/// Answers the pod on each snapshot with this thread's buffers (from the snapshot's memo when
/// `memo`, which the caller sets only for a pod no namespace quota applies to).
fn fit_slice(
    vendors: &Vendors,
    quota: Option<&QuotaBook>,
    req: &PodRequest,
    memo: bool,
    snaps: Vec<Arc<NodeSnapshot>>,
) -> Part {
    let view = quota.and_then(|q| q.view(&req.namespace));
    let quota: &dyn QuotaCheck = match &view {
        Some(v) => v,
        None => &NoQuota,
    };
    let mut part = Part { answers: Vec::with_capacity(snaps.len()), fitted: 0, remembered: 0 };
    SCRATCH.with(|s| {
        let s = &mut *s.borrow_mut();
        for snap in snaps {
            let mut fitted = false;
            let mut fit = || {
                fitted = true;
                fit::fit_pod_score(&snap, req, vendors, quota, s)
            };
            let answer = if memo { snap.memo.answer(req.fit_key, fit) } else { fit() };
            if fitted {
                part.fitted += 1;
            } else {
                part.remembered += 1;
            }
            part.answers.push((snap, answer));
        }
    });
    part
}
