//! Filter's evaluation of the candidates: each candidate's answer for the pod, from the answer
//! table kept for its shape where the node's snapshot has not changed since, fitted afresh (in
//! slices on every arbiter for long lists) where it has; or, in message mode, from every node
//! actor. The fitting nodes come out ranked by the pod's node policy, the best first.

use std::sync::Arc;
use std::time::Instant;

use crate::actor::coordinator::FanOut;
use crate::actor::filter::candidates::{NO_SLOT, Placed, Resolution};
use crate::actor::filter::cycle::FilterCycle;
use crate::actor::filter::tables::{Listed, Table};
use crate::actor::quota::QuotaBook;
use crate::actor::{Failures, FilterMode, RESERVE_CANDIDATES, SCRATCH};
use crate::devices::{NoQuota, QuotaCheck, Vendors};
use crate::model::request::NodePolicy;
use crate::model::{NodeName, PodRequest};
use crate::port::Backend;
use crate::sched::{NodeSnapshot, Rejection, fit, score};

impl<B: Backend> FilterCycle<'_, '_, B> {
    /// Every candidate's answer, the fitting ones ranked; `None` when an arbiter is gone (the
    /// engine is stopping).
    pub(in crate::actor) async fn evaluate(&self) -> Option<Evaluation> {
        let fan_out = Instant::now();
        let eval = match self.e.cfg.filter_mode {
            FilterMode::Snapshot => self.evaluate_snapshots().await?,
            FilterMode::Messages => self.evaluate_messages().await,
        };
        crate::metrics::phase(crate::metrics::Phase::FanOut, fan_out);
        Some(eval)
    }

    /// Fits the pod on the candidates whose snapshot changed since a pod of its shape was last
    /// answered there, and answers the others from the shape's table. A pod under a namespace
    /// quota is fitted on every candidate. `None` when an arbiter is gone (the engine is
    /// stopping).
    async fn evaluate_snapshots(&self) -> Option<Evaluation> {
        let (i, req) = (self.e, &self.req);
        let list = i.nodes.resolve(self.names);
        // A namespace quota changes with allocations on other nodes: such answers are not kept.
        let keep = i.quota.as_deref().is_none_or(|q| q.view(&req.namespace).is_none());
        let mut table = if keep { i.nodes.tables.take(req.fit_key) } else { Table::fresh(req.fit_key) };
        let policy = req.node_policy;
        let mut fits = Vec::with_capacity(list.len());
        // Failed candidates answered from the table, by place and slot, in list order: their
        // rejections are read once the table is complete. Sized for the whole list, so a window
        // where most candidates are full never grows it.
        let mut failed_at: Vec<(u32, u32)> = Vec::with_capacity(list.len());
        let mut moved = Vec::new();
        let mut snaps = Vec::new();
        // One pass: a candidate whose answer is current is placed now, the others are fitted
        // after it. This filter holds the table, so the answers read here stay as they are.
        for (k, r, g, slot) in list.current() {
            if table.current(slot, g) {
                let score = table.score(slot).unwrap_or(f32::NAN);
                if score.is_nan() {
                    failed_at.push((k, slot));
                } else {
                    fits.push((score::rank_key(policy, score, r), score, k));
                }
            } else if let Some(c) = list.cell(k) {
                moved.push((k, r, slot));
                snaps.push(c.load());
            }
        }
        let kept = fits.len() + failed_at.len();
        let fresh = self.fit_all(snaps).await?;
        let (mut failed_moved, mut slotless) = (Vec::new(), Vec::new());
        for ((k, r, slot), (g, answer)) in moved.iter().zip(&fresh) {
            table.set(*slot, *g, *answer);
            match answer {
                Ok(score) => {
                    // As the table keeps it: a NaN score (never computed) ranks lowest.
                    let score = if score.is_nan() { f32::MIN } else { *score };
                    fits.push((score::rank_key(policy, score, *r), score, *k));
                }
                Err(why) => {
                    failed_moved.push((*k, *slot));
                    if *slot == NO_SLOT {
                        slotless.push((*k, *why));
                    }
                }
            }
        }
        // The failures keep the table's rejections as they are now, shared, not copied.
        let failed = Listed::new(list.clone(), merge_by_place(&failed_at, &failed_moved), table.rejections(), slotless);
        if keep {
            i.nodes.tables.put(table);
        }
        crate::metrics::nodes_evaluated(moved.len() as u64, kept as u64);
        Some(Evaluation::of_list(list, fits, failed))
    }

    /// Answers the pod on each snapshot, with the generation it was answered at. Long lists (at
    /// least `EngineConfig::slice_min`) are cut into one slice per arbiter: this thread fits the
    /// first, the arbiters the others, at the same time, each on its own core.
    async fn fit_all(&self, mut snaps: Vec<Arc<NodeSnapshot>>) -> Option<Vec<(u64, Result<f32, Rejection>)>> {
        let (i, req) = (self.e, &self.req);
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
                let _ = tx.send(fit_slice(&vendors, quota.as_deref(), &req, tail));
            });
            pending.push(rx);
        }
        let mut answers = fit_slice(&i.vendors, i.quota.as_deref(), req, snaps);
        // Spawned last slice first: taken back in list order.
        for rx in pending.into_iter().rev() {
            answers.extend(rx.await.ok()?);
        }
        Some(answers)
    }

    /// Sends `Filter` to every candidate node actor through the coordinator.
    async fn evaluate_messages(&self) -> Evaluation {
        let i = self.e;
        let ids: Vec<NodeName> = self.names.iter().map(NodeName::new).collect();
        let answers =
            i.nodes.coordinator().send(FanOut { pod: self.req.clone(), names: ids }).await.unwrap_or_default();
        let mut fits = Vec::with_capacity(answers.len());
        let mut failed = Failures::default();
        for (n, r) in answers {
            match r {
                Ok(s) => fits.push((n, s, ())),
                Err(r) => {
                    // A name the engine does not know reads as in snapshot mode: HAMi's bare text.
                    let snap = i.nodes.snapshot(n.as_str());
                    failed.push(n, r, snap);
                }
            }
        }
        Evaluation::of_nodes(fits, failed, self.req.node_policy)
    }
}

/// Two runs of failed candidates, `(place, slot)`, each in list order, as one in list order:
/// merged, not sorted.
fn merge_by_place(a: &[(u32, u32)], b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut b = b.iter().copied().peekable();
    for &x in a {
        while let Some(y) = b.next_if(|y| y.0 < x.0) {
            out.push(y);
        }
        out.push(x);
    }
    out.extend(b);
    out
}

/// Fitting nodes ranked first from a resolved list; the rest are ranked only when binds hold some
/// of these (see `FilterCycle::reserve_best`). The best node whose bind is free takes nearly
/// every reservation, and each node ranked costs a count on its name, which on a large cluster
/// is a cache miss: as many as the coordinator may try, and the FilteringSucceed Event's list.
pub(in crate::actor) const RANKED_FIRST: usize = RESERVE_CANDIDATES;

/// What evaluating the candidates came to.
pub(in crate::actor) struct Evaluation {
    /// Fitting nodes, best first: every one, or the best `RANKED_FIRST` while `rest` is set.
    pub(in crate::actor) ranked: Vec<(NodeName, f32, ())>,
    /// How many candidates fit.
    pub(in crate::actor) n_fit: usize,
    /// Every fitting candidate of a resolved list, the best `RANKED_FIRST` first, when `ranked`
    /// holds only those.
    rest: Option<(Arc<Resolution>, Vec<Placed>)>,
    pub(in crate::actor) failed: Failures,
}

impl Evaluation {
    fn of_nodes(mut fits: Vec<(NodeName, f32, ())>, failed: Failures, policy: NodePolicy) -> Evaluation {
        score::rank_nodes(&mut fits, policy);
        Evaluation { n_fit: fits.len(), ranked: fits, rest: None, failed }
    }

    /// Puts the best `RANKED_FIRST` of `fits` first, in `score::rank_nodes`'s order (selected,
    /// not sorted, from the rest); returns how many that is.
    pub(in crate::actor) fn select_best(fits: &mut [Placed]) -> usize {
        // Keys are unique (no two candidates share a place in name order): unstable is exact.
        let first = RANKED_FIRST.min(fits.len());
        if first < fits.len() {
            fits.select_nth_unstable_by_key(first, |p| p.0);
        }
        fits[..first].sort_unstable_by_key(|p| p.0);
        first
    }

    /// A list's evaluation from the fitting candidates (`fits`, in any order) and the failed
    /// ones (by place in the list, in list order).
    pub(in crate::actor) fn of_list(list: Arc<Resolution>, mut fits: Vec<Placed>, failed: Listed) -> Evaluation {
        let n_fit = fits.len();
        let first = Evaluation::select_best(&mut fits);
        let ranked = fits[..first].iter().map(|(_, s, k)| (list.name(*k).clone(), *s, ())).collect();
        let failed = Failures::of_list(failed);
        let rest = (n_fit > first).then_some((list, fits));
        Evaluation { ranked, n_fit, rest, failed }
    }

    /// Whether only the best fitting candidates are ranked yet.
    pub(in crate::actor) fn partly_ranked(&self) -> bool {
        self.rest.is_some()
    }

    /// Ranks every fitting candidate, when only the best were.
    pub(in crate::actor) fn rank_all(&mut self) {
        if let Some((list, mut fits)) = self.rest.take() {
            fits.sort_unstable_by_key(|p| p.0);
            self.ranked = fits.iter().map(|(_, s, k)| (list.name(*k).clone(), *s, ())).collect();
        }
    }
}

/// Answers the pod on each snapshot with this thread's buffers, with the generation of the
/// snapshot each answer is for.
fn fit_slice(
    vendors: &Vendors,
    quota: Option<&QuotaBook>,
    req: &PodRequest,
    snaps: Vec<Arc<NodeSnapshot>>,
) -> Vec<(u64, Result<f32, Rejection>)> {
    let view = quota.and_then(|q| q.view(&req.namespace));
    let quota: &dyn QuotaCheck = match &view {
        Some(v) => v,
        None => &NoQuota,
    };
    SCRATCH.with(|s| {
        let s = &mut *s.borrow_mut();
        snaps.iter().map(|snap| (snap.generation, fit::fit_pod_score(snap, req, vendors, quota, s))).collect()
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn merging_two_runs_in_list_order_is_sorting_them(
            places in proptest::collection::btree_set(0u32..500, 0..60),
            split in proptest::collection::vec(any::<bool>(), 60),
        ) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for (k, p) in places.iter().enumerate() {
                if split[k] { a.push((*p, *p + 1)) } else { b.push((*p, *p + 1)) }
            }
            let merged = super::merge_by_place(&a, &b);
            prop_assert_eq!(merged, places.iter().map(|p| (*p, *p + 1)).collect::<Vec<_>>());
        }
    }
}
