//! kube-scheduler's filter call: fit the pod on every candidate, rank, reserve on the best
//! through the coordinator, write the decision onto the pod, and tell the pod's Events.

use super::*;
use crate::model::request::NodePolicy;
use candidates::{Listed, Resolution, Table};
use quota::QuotaBook;

/// How far behind the API writes may be before Filter waits for them.
const MAX_WRITE_BACKLOG: Duration = Duration::from_millis(250);
/// The longest one filter waits for the writes.
const MAX_BACKLOG_WAIT: Duration = Duration::from_secs(5);

impl<B: Backend> Engine<B> {
    /// kube-scheduler's filter call in live mode (`nodeCacheCapable`): decide one node for the
    /// pod among `names`, reserve it there and write the decision onto the pod.
    pub async fn filter(&self, pod: &PodView, names: &[Cow<'_, str>]) -> FilterOutcome {
        let started = Instant::now();
        let i = &*self.inner;
        let req = match i.vendors.pod_request(pod, &i.cfg.defaults) {
            Ok(r) => Arc::new(r),
            Err(crate::model::request::Error::Weights(e)) => {
                return FilterOutcome::Error(FilterError::Weights { pod: pod.metadata.name.clone(), source: e });
            }
            Err(e) => {
                let pod = format!("{}/{}", pod.metadata.namespace, pod.metadata.name);
                return FilterOutcome::Error(FilterError::Request { pod, source: e });
            }
        };
        if !req.requests_devices() {
            return FilterOutcome::PassThrough;
        }
        let pref = PodRef {
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
        };
        if let Some((uid, node)) = i.unsettled.remove(&req.uid) {
            // Its last Binding may have taken effect: the pod is read back before its devices go.
            let bound = match i.backend.pod_read(&pref.namespace, &pref.name).await {
                Ok(v) => v.and_then(|v| v.spec.node_name.clone()).filter(|n| !n.is_empty()),
                Err(e) => {
                    i.unsettled.insert(uid, node);
                    crate::metrics::filter_done(crate::metrics::Outcome::Error, started);
                    return FilterOutcome::Error(e.into());
                }
            };
            if let Some(n) = bound {
                self.observe_read(&pref);
                crate::metrics::filter_done(crate::metrics::Outcome::Error, started);
                return FilterOutcome::Error(port::Error::AlreadyBound { pod: pref.to_string(), node: n }.into());
            }
        }
        // A repeated filter of the same pod drops what it holds from the earlier attempt, reserved
        // or committed (a bind that failed after its commit), so the pod does not compete with
        // itself, as HAMi does. A pod kube-scheduler filters is not bound; should one that is
        // bound arrive all the same, its devices stay counted.
        if let Some(prev) = i.placements.get(&req.uid).map(|p| p.clone())
            && let Some(addr) = i.book.get(prev.as_str()).map(|e| e.addr.clone())
        {
            let bound = pod.spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
            let _ = addr.release(req.uid.clone(), bound).await;
        }

        self.await_write_backlog().await;
        let fan_out = Instant::now();
        let mut eval = match i.cfg.filter_mode {
            FilterMode::Snapshot => match self.evaluate_snapshots(&req, names).await {
                Some(e) => e,
                None => return FilterOutcome::Error(FilterError::Stopping),
            },
            FilterMode::Messages => self.evaluate_messages(&req, names).await,
        };
        crate::metrics::phase(crate::metrics::Phase::FanOut, fan_out);
        let n_candidates = names.len();
        let n_fit = eval.n_fit;
        // The best few go to the coordinator; beyond them a pod whose every choice was taken
        // in the meantime is better filtered again by kube-scheduler than reserved on a poor node.
        let (mut ranked, free) = self.lock_aware(&eval.ranked, &pref, &req);
        if free < RESERVE_CANDIDATES && eval.rest.is_some() {
            // Locks taken on most of the best: free nodes further down go before them.
            eval.rank_all();
            ranked = self.lock_aware(&eval.ranked, &pref, &req).0;
        }
        let (fits, mut failed) = (eval.ranked, eval.failed);

        let reserve = Instant::now();
        let decision = if ranked.is_empty() {
            Decision::Refused(Vec::new())
        } else {
            match self.coordinator().send(Decide { pod: req.clone(), ranked }).await {
                Ok(d) => d,
                Err(e) => return FilterOutcome::Error(FilterError::Coordinator(e)),
            }
        };
        crate::metrics::phase(crate::metrics::Phase::Reserve, reserve);
        let (node, reserved, refused) = match decision {
            Decision::Reserved { node, reserved, refused } => (node, reserved, refused),
            Decision::Refused(refused) => {
                for (n, r) in refused {
                    let snap = self.snapshot(n.as_str());
                    failed.push(n, r, snap);
                }
                if tracing::enabled!(tracing::Level::DEBUG) {
                    tracing::debug!(pod = %pref, failed = ?failed.render(), "no node fits");
                }
                self.no_fit_events(&pref, &failed, n_candidates);
                self.remember(&pref, None, "no-fit", format!("{} nodes do not meet", failed.len()));
                crate::metrics::filter_done(crate::metrics::Outcome::NoFit, started);
                return FilterOutcome::NoFit { failed };
            }
        };
        for (n, r) in refused {
            let snap = self.snapshot(n.as_str());
            failed.push(n, r, snap);
        }

        // Written at bind instead, when so configured: then the filter makes no API write.
        let patched = if i.cfg.decision_write == DecisionWrite::Filter {
            let mut patch = self.decision_patch(&node, &req, &reserved.devices);
            patch.while_unbound = Some(pod.metadata.resource_version.clone().unwrap_or_default());
            let write = Instant::now();
            let patched = i.backend.patch_pod(&pref, &patch).await;
            crate::metrics::phase(crate::metrics::Phase::ApiWrite, write);
            patched
        } else {
            Ok(())
        };
        if let Err(e) = patched {
            if let Some(a) = i.book.get(node.as_str()).map(|e| e.addr.clone()) {
                let _ = a.release(req.uid.clone(), true).await;
            }
            if let port::Error::AlreadyBound { .. } = e {
                // Its Binding took effect although its answer was lost: what it holds is counted
                // from the pod as read just now, not from a watch that may lag.
                self.observe_read(&pref);
            }
            self.event(&pref, reasons::FILTERING_FAILED, EventType::Warning, e.to_string());
            crate::metrics::filter_done(crate::metrics::Outcome::Error, started);
            return FilterOutcome::Error(e.into());
        }
        // HAMi lists every fitting node with its score; the list is capped so one Event stays small
        // on large clusters.
        let mut fit_list = String::new();
        for (k, (n, s, _)) in fits.iter().take(EVENT_FIT_NODES).enumerate() {
            if k > 0 {
                fit_list.push(',');
            }
            let _ = write!(fit_list, "{n}:{s:.2}");
        }
        if n_fit > EVENT_FIT_NODES {
            let _ = write!(fit_list, ",…{} more", n_fit - EVENT_FIT_NODES);
        }
        self.event(
            &pref,
            reasons::FILTERING_SUCCEED,
            EventType::Normal,
            format!("find fit node({node}), {} nodes not fit, {n_fit} nodes fit({fit_list})", n_candidates - n_fit),
        );
        self.remember(&pref, Some(node.to_string()), "scheduled", format!("{n_fit} of {n_candidates} nodes fit"));
        crate::metrics::filter_done(crate::metrics::Outcome::Scheduled, started);
        FilterOutcome::Chosen { node, failed }
    }

    /// Holds the filter while the API writes already queued would delay this pod's bind by
    /// more than `MAX_WRITE_BACKLOG` (bounded by `MAX_BACKLOG_WAIT`). kube-scheduler filters one
    /// pod at a time and binds in the background: without this, a burst schedules faster than
    /// its binds can be written, bind latency grows without bound, node locks are held longer,
    /// and kube-scheduler's bind timeout sends pods round again.
    async fn await_write_backlog(&self) {
        let started = Instant::now();
        loop {
            let backlog = self.inner.backend.write_backlog();
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
    fn lock_aware(&self, fits: &[(NodeName, f32, ())], pod: &PodRef, req: &PodRequest) -> (Vec<NodeName>, usize) {
        let kinds = self.lock_kinds(req);
        let mut free = Vec::with_capacity(RESERVE_CANDIDATES);
        let mut taken: Vec<(u32, &NodeName)> = Vec::new();
        for (n, _, _) in fits {
            if free.len() == RESERVE_CANDIDATES {
                break;
            }
            match self.lock_taken(n.as_str(), pod, &kinds) {
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

    /// Whether a bind of `pod` on `node` would now wait for a lock another pod holds: if so, how
    /// many pods reserved there still wait for their bind.
    pub(super) fn lock_taken(&self, node: &str, pod: &PodRef, kinds: &[LockKind]) -> Option<u32> {
        let i = &*self.inner;
        let (locked, pending) = i.book.get(node).map_or((false, 0), |e| (e.binds.locked(), e.binds.pending()));
        if locked {
            return Some(pending);
        }
        let view = i.backend.node(node).filter(|_| !kinds.is_empty())?;
        let timeout = i.cfg.node_lock_timeout;
        kinds
            .iter()
            .any(|k| port::lock_taken(&view, pod, *k, timeout, |ns, name| i.backend.pod(ns, name)))
            .then_some(pending)
    }

    /// Fits the pod on the candidates whose snapshot changed since a pod of its shape was last
    /// answered over this list, and answers the others from the list's table. A pod under a
    /// namespace quota is fitted on every candidate. `None` when an arbiter is gone (the engine is
    /// stopping).
    pub(super) async fn evaluate_snapshots(&self, req: &Arc<PodRequest>, names: &[Cow<'_, str>]) -> Option<Evaluation> {
        let i = &*self.inner;
        let list = self.resolve(names);
        // A namespace quota changes with allocations on other nodes: such answers are not kept.
        let keep = i.quota.as_deref().is_none_or(|q| q.view(&req.namespace).is_none());
        let mut table = if keep {
            i.shapes.note(req);
            list.take_table(req.fit_key)
        } else {
            Table::fresh(req.fit_key, list.len())
        };
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
        let (fitted, remembered) = self.fit_all(req, snaps, keep, &moved, &mut table).await?;
        let mut counts = *table.counts();
        let answers = table.answers();
        if keep {
            list.put_table(table);
        }
        let mut fits = Vec::with_capacity(list.len());
        let mut failed = 0;
        for (k, score) in answers.scores().iter().enumerate() {
            let k = k as u32;
            if list.cell(k).is_none() {
                counts.add(&Rejection::NodeUnregistered);
                failed += 1;
                continue;
            }
            match score {
                Some(score) => fits.push((score::rank_key(req.node_policy, *score, list.name_rank(k)), *score, k)),
                None => failed += 1,
            }
        }
        crate::metrics::rejections(&counts);
        crate::metrics::nodes_evaluated(fitted, remembered + kept);
        let failed = Failures { nodes: Vec::new(), listed: Some(Listed::new(list.clone(), answers, failed)) };
        Some(Evaluation::of_list(list, fits, failed))
    }

    /// Answers the pod on each snapshot (from its memo when `memo`) into `table` at `places`.
    /// Long lists (at least `EngineConfig::slice_min`) are cut into one slice per arbiter: this
    /// thread fits the first, the arbiters the others, at the same time, each on its own core.
    /// Returns how many were fitted and how many answered from memos.
    async fn fit_all(
        &self,
        req: &Arc<PodRequest>,
        mut snaps: Vec<Arc<NodeSnapshot>>,
        memo: bool,
        places: &[u32],
        table: &mut Table,
    ) -> Option<(u64, u64)> {
        let i = &*self.inner;
        let slices = if snaps.len() >= i.cfg.slice_min { i.arbiters.len().max(1) } else { 1 };
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
            i.arbiters[k].spawn(async move {
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
                table.set(places[start + n], &snap, answer);
            }
        }
        Some((fitted, remembered))
    }

    /// Each candidate's snapshot handle (`None`: not a node the engine knows), from the lists
    /// resolved lately when `names` is one of them and no node joined or left since.
    fn resolve(&self, names: &[Cow<'_, str>]) -> Arc<Resolution> {
        let i = &*self.inner;
        let generation = i.book_generation.load(Ordering::SeqCst);
        {
            let recent = i.resolved.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(r) = recent.iter().find(|r| r.generation == generation && r.is_for(names)) {
                return r.clone();
            }
        }
        let r =
            Arc::new(Resolution::new(generation, names, i.board.clone(), |n| i.book.get(n).map(|e| e.snap.clone())));
        let mut recent = i.resolved.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        recent.retain(|old| old.generation == generation);
        if recent.len() == RESOLUTIONS_KEPT {
            recent.pop_front();
        }
        recent.push_back(r.clone());
        r
    }

    /// Sends `Filter` to every candidate node actor through the coordinator.
    pub(super) async fn evaluate_messages(&self, req: &Arc<PodRequest>, names: &[Cow<'_, str>]) -> Evaluation {
        let ids: Vec<NodeName> = names.iter().map(|n| NodeName::new(n)).collect();
        let answers = self.coordinator().send(FanOut { pod: req.clone(), names: ids }).await.unwrap_or_default();
        let mut fits = Vec::with_capacity(answers.len());
        let mut failed = Failures::default();
        let mut counts = crate::metrics::RejectionCounts::default();
        for (n, r) in answers {
            match r {
                Ok(s) => fits.push((n, s, ())),
                Err(r) => {
                    counts.add(&r);
                    // A name the engine does not know reads as in snapshot mode: HAMi's bare text.
                    let snap = self.snapshot(n.as_str());
                    failed.push(n, r, snap);
                }
            }
        }
        crate::metrics::rejections(&counts);
        Evaluation::of_nodes(fits, failed, req.node_policy)
    }

    /// The one merge patch Filter writes, as HAMi's: node, time, every chosen vendor's keys, the
    /// node label, and `null` for keys of vendors not chosen this time.
    pub(super) fn decision_patch(&self, node: &NodeName, req: &PodRequest, devices: &PodDevices) -> PodPatch {
        let (unix_s, unix_ns) = unix_now();
        let mut annotations: Vec<(String, String)> =
            vec![(keys::ASSIGNED_NODE.into(), node.to_string()), (keys::ASSIGNED_TIME.into(), unix_s.to_string())];
        let snap = self.snapshot(node.as_str());
        let devs = snap.as_ref().map_or(&[][..], |s| &s.devices);
        for (v, cs) in &devices.0 {
            self.inner
                .vendors
                .get(*v)
                .annotations(&WriteCx { node, devs, devices: cs, pod: req, unix_s, unix_ns }, &mut annotations);
        }
        let mut patch = PodPatch {
            annotations: annotations.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            ..PodPatch::default()
        };
        for k in self.inner.vendors.pod_keys() {
            if req.annotations.contains_key(k) && !patch.annotations.iter().any(|(w, _)| w == k) {
                patch.annotations.push((k.clone(), None));
            }
        }
        if node.as_str().len() <= MAX_LABEL_VALUE {
            patch.labels.push((keys::ASSIGNED_NODE.into(), node.to_string()));
        }
        patch
    }

    pub(super) fn no_fit_events(&self, pod: &PodRef, failed: &super::Failures, candidates: usize) {
        // One Event per reason word of the `<n>/<m> <Reason>` items, as HAMi records them.
        for (reason, nodes) in failed.nodes_by_reason() {
            self.event(
                pod,
                reasons::FILTERING_FAILED,
                EventType::Warning,
                format!("{} nodes {reason}({})", nodes.len(), nodes.join(",")),
            );
        }
        self.event(
            pod,
            reasons::FILTERING_FAILED,
            EventType::Warning,
            format!("no available node, {candidates} nodes do not meet"),
        );
    }
}

/// Candidate lists kept resolved: kube-scheduler repeats one list while the nodes passing its own
/// filters stay the same; a few more cover pods with different node selectors taking turns.
const RESOLUTIONS_KEPT: usize = 4;

/// Fitting nodes ranked first from a resolved list; the rest are ranked only when the coordinator
/// needs more of them (see `Engine::filter`).
pub(super) const RANKED_FIRST: usize = 4 * RESERVE_CANDIDATES;

/// A fitting candidate: its key in rank order (`score::rank_key`), score, and place in its
/// resolved list.
pub(super) type Placed = (u64, f32, u32);

/// What evaluating the candidates came to.
pub(super) struct Evaluation {
    /// Fitting nodes, best first: every one, or the best `RANKED_FIRST` while `rest` is set.
    pub(super) ranked: Vec<(NodeName, f32, ())>,
    /// How many candidates fit.
    pub(super) n_fit: usize,
    /// Every fitting candidate of a resolved list, by place, when `ranked` holds only the best.
    rest: Option<(Arc<Resolution>, Vec<Placed>)>,
    failed: Failures,
}

impl Evaluation {
    fn of_nodes(mut fits: Vec<(NodeName, f32, ())>, failed: Failures, policy: NodePolicy) -> Evaluation {
        score::rank_nodes(&mut fits, policy);
        Evaluation { n_fit: fits.len(), ranked: fits, rest: None, failed }
    }

    /// Ranks the best `RANKED_FIRST` of a list's fitting candidates (selected, not sorted, from
    /// the rest), in `score::rank_nodes`'s order.
    pub(super) fn of_list(list: Arc<Resolution>, mut fits: Vec<Placed>, failed: Failures) -> Evaluation {
        let n_fit = fits.len();
        // Keys are unique (no two candidates share a place in name order): unstable is exact.
        let first = RANKED_FIRST.min(n_fit);
        if first < n_fit {
            fits.select_nth_unstable_by_key(first, |p| p.0);
        }
        fits[..first].sort_unstable_by_key(|p| p.0);
        let ranked = fits[..first].iter().map(|(_, s, k)| (list.name(*k).clone(), *s, ())).collect();
        let rest = (first < n_fit).then_some((list, fits));
        Evaluation { ranked, n_fit, rest, failed }
    }

    /// Ranks every fitting candidate, when only the best were.
    pub(super) fn rank_all(&mut self) {
        if let Some((list, mut fits)) = self.rest.take() {
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
