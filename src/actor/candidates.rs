//! Candidate lists Filter resolved to node handles, and per pod shape the answers over each list.
//!
//! kube-scheduler sends the same `NodeNames` pod after pod while the nodes passing its own filters
//! stay the same. Such a list is resolved once to each node's snapshot handle. Beside it, per pod
//! shape ([`FitKey`]), a table keeps every candidate's answer with the generation of the snapshot
//! it came from: a filter reads each candidate's current generation from the engine's dense board
//! (one load, no lock, no reference count) and fits only the candidates whose generation moved.
//! Answers are a function of the snapshot and the shape alone (a pod under a namespace quota is
//! never answered from a table), so an answer whose generation is still current is exactly what
//! fitting again would give.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::metrics::RejectionCounts;
use crate::model::NodeName;
use crate::model::request::{FitKey, NodePolicy};
use crate::sched::{NodeSnapshot, Rejection, score};

use super::node::SnapCell;
use super::read_side::Board;

/// A fitting candidate: its key in rank order (`score::rank_key`), score, and place in its
/// resolved list.
pub(super) type Placed = (u64, f32, u32);

/// Tables kept per list: the pod shapes in flight at once each find theirs (the load test's
/// default mix draws 14).
const TABLES_KEPT: usize = 16;

/// A generation no snapshot has: the candidate was never answered in this table.
const NEVER: u64 = u64::MAX;

/// A candidate without a slot on the board.
const NO_SLOT: u32 = u32::MAX;

/// The candidate names of one filter call.
pub enum Candidates<'a> {
    /// A list resolved before, recognised by the text of the JSON array kube-scheduler sent: its
    /// names need not be read again.
    Known(Arc<Resolution>),
    /// Names read from the request; `raw`, the array's text they were read from, recognises the
    /// list when it comes again.
    Names { names: Cow<'a, [Cow<'a, str>]>, raw: Option<&'a str> },
}

impl<'a> Candidates<'a> {
    /// Names read from a request (`raw`: the JSON array they were read from, when there was one).
    pub fn read(names: Vec<Cow<'a, str>>, raw: Option<&'a str>) -> Candidates<'a> {
        Candidates::Names { names: Cow::Owned(names), raw }
    }
    /// Names given as a slice (no JSON text to recognise them by).
    pub fn names(names: &'a [Cow<'a, str>]) -> Candidates<'a> {
        Candidates::Names { names: Cow::Borrowed(names), raw: None }
    }
    pub fn len(&self) -> usize {
        match self {
            Candidates::Known(r) => r.len(),
            Candidates::Names { names, .. } => names.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn iter(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match self {
            Candidates::Known(r) => Box::new(r.names.iter().map(|n| n.as_str())),
            Candidates::Names { names, .. } => Box::new(names.iter().map(|n| n.as_ref())),
        }
    }
    pub fn contains(&self, name: &str) -> bool {
        self.iter().any(|n| n == name)
    }
}

/// A candidate list with each name's snapshot handle, as of one address book generation.
pub struct Resolution {
    pub(super) generation: u64,
    /// The JSON array the names were read from, when they came in one.
    raw: Option<Box<str>>,
    names: Vec<NodeName>,
    /// The names again, end to end, and where each ends: a repeated list is recognised by one
    /// pass over contiguous bytes rather than a pointer chase per name.
    text: String,
    ends: Vec<usize>,
    cells: Vec<Option<Arc<SnapCell>>>,
    /// Each candidate's slot on `board` (`NO_SLOT`: read the handle's own generation).
    slots: Vec<u32>,
    board: Arc<Board>,
    /// Each candidate's place in name order: ties in score go to the smaller name, as in
    /// `score::rank_nodes`, without comparing strings on every filter.
    by_name: Vec<u32>,
    /// Each place in name order's candidate (the inverse of `by_name`).
    by_rank: Vec<u32>,
    /// How many candidates are not nodes the engine knows.
    unregistered: usize,
    /// Answer tables by pod shape, most recently used last.
    tables: Mutex<Vec<Table>>,
}

impl Resolution {
    pub(super) fn new(
        generation: u64,
        names: &[Cow<'_, str>],
        raw: Option<&str>,
        board: Arc<Board>,
        cell: impl Fn(&str) -> Option<Arc<SnapCell>>,
    ) -> Self {
        let mut order: Vec<u32> = (0..names.len() as u32).collect();
        order.sort_by(|a, b| names[*a as usize].cmp(&names[*b as usize]));
        let mut by_name = vec![0; names.len()];
        for (rank, i) in order.iter().enumerate() {
            by_name[*i as usize] = rank as u32;
        }
        let cells: Vec<Option<Arc<SnapCell>>> = names.iter().map(|n| cell(n)).collect();
        let unregistered = cells.iter().filter(|c| c.is_none()).count();
        let slots = cells.iter().map(|c| c.as_ref().and_then(|c| c.slot_on(&board)).unwrap_or(NO_SLOT)).collect();
        let mut text = String::with_capacity(names.iter().map(|n| n.len()).sum());
        let ends = names
            .iter()
            .map(|n| {
                text.push_str(n);
                text.len()
            })
            .collect();
        Resolution {
            generation,
            raw: raw.map(Box::from),
            names: names.iter().map(|n| NodeName::new(n)).collect(),
            text,
            ends,
            cells,
            slots,
            board,
            by_name,
            by_rank: order,
            unregistered,
            tables: Mutex::new(Vec::new()),
        }
    }

    /// Whether this list was read from the JSON array `raw` (byte for byte: one comparison of
    /// contiguous text).
    pub(super) fn was_read_from(&self, raw: &str) -> bool {
        self.raw.as_deref() == Some(raw)
    }

    /// The names, borrowed.
    pub(super) fn names(&self) -> Vec<Cow<'_, str>> {
        self.names.iter().map(|n| Cow::Borrowed(n.as_str())).collect()
    }

    pub(super) fn raw(&self) -> Option<&str> {
        self.raw.as_deref()
    }

    pub(super) fn is_for(&self, names: &[Cow<'_, str>]) -> bool {
        if names.len() != self.ends.len() {
            return false;
        }
        let text = self.text.as_bytes();
        let mut start = 0;
        for (n, &end) in names.iter().zip(&self.ends) {
            if text.get(start..end) != Some(n.as_bytes()) {
                return false;
            }
            start = end;
        }
        true
    }

    pub(super) fn len(&self) -> usize {
        self.names.len()
    }
    pub(super) fn name(&self, i: u32) -> &NodeName {
        &self.names[i as usize]
    }
    pub(super) fn cell(&self, i: u32) -> Option<&Arc<SnapCell>> {
        self.cells[i as usize].as_ref()
    }
    /// The generation of candidate `i`'s current snapshot (`None`: not a node the engine knows).
    #[cfg(test)]
    pub(super) fn generation(&self, i: u32) -> Option<u64> {
        self.generations().nth(i as usize).flatten()
    }
    /// Every candidate's current generation, in list order (`None`: not a node the engine knows);
    /// one pass over the board.
    pub(super) fn generations(&self) -> impl Iterator<Item = Option<u64>> + '_ {
        let mut board = self.board.reader();
        self.slots.iter().zip(&self.cells).map(move |(&s, c)| match s {
            NO_SLOT => c.as_ref().map(|c| c.generation()),
            s => Some(board.get(s)),
        })
    }
    pub(super) fn name_rank(&self, i: u32) -> u32 {
        self.by_name[i as usize]
    }
    /// The candidate at place `rank` in name order.
    pub(super) fn at_name_rank(&self, rank: u32) -> u32 {
        self.by_rank[rank as usize]
    }
    pub(super) fn unregistered(&self) -> usize {
        self.unregistered
    }

    /// Every registered candidate that fits by `answers`, with its rank key under `policy`, in
    /// list order.
    pub(super) fn placed(&self, answers: &Answers, policy: NodePolicy) -> Vec<Placed> {
        let mut fits = Vec::with_capacity(self.len());
        for (k, score) in answers.scores.iter().enumerate() {
            let k = k as u32;
            if let (Some(score), Some(_)) = (score, self.cell(k)) {
                fits.push((score::rank_key(policy, *score, self.name_rank(k)), *score, k));
            }
        }
        fits
    }

    /// The table of `key`, taken out while one filter works on it (another filter of the same
    /// shape at the same time starts a fresh one rather than wait). A new table knows no answer.
    pub(super) fn take_table(&self, key: FitKey) -> Table {
        let mut tables = self.tables.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match tables.iter().position(|t| t.key == key) {
            Some(p) => tables.remove(p),
            None => Table::fresh(key, self.len()),
        }
    }

    /// Puts a table back as the most recently used, the least recently used making room.
    pub(super) fn put_table(&self, table: Table) {
        let mut tables = self.tables.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tables.retain(|t| t.key != table.key);
        if tables.len() == TABLES_KEPT {
            tables.remove(0);
        }
        tables.push(table);
    }
}

/// One pod shape's answers over a list: per candidate, the answer and the generation of the
/// snapshot it was computed on.
pub(super) struct Table {
    key: FitKey,
    generations: Vec<u64>,
    /// Shared with the failures of the filters answered from this table while they are held; a
    /// change then copies them first, so what a filter answered stays as it was.
    answers: Arc<Answers>,
    /// The rejections among the answers, kept as answers change (a filter reports them all).
    counts: RejectionCounts,
    /// Once built, the fitting candidates in rank order, kept as answers change: a filter reads
    /// the best without going over every candidate.
    ranked: Option<Ranked>,
}

/// The rank keys (`score::rank_key`) of a table's fitting candidates under one node policy. A
/// key's low half is the candidate's place in name order, so keys are unique.
struct Ranked {
    policy: NodePolicy,
    keys: BTreeSet<u64>,
}

/// Per candidate, the score when it fits (`None`: it does not) and, only then read, why not.
/// Scores sit apart from the much larger rejections, so collecting a filter's fitting candidates
/// reads a few pages instead of every rejection.
#[derive(Clone)]
pub(super) struct Answers {
    scores: Vec<Option<f32>>,
    rejections: Vec<Rejection>,
}

impl Answers {
    #[cfg(test)]
    pub(super) fn scores(&self) -> &[Option<f32>] {
        &self.scores
    }
}

impl Table {
    /// A table that knows no answer yet.
    pub(super) fn fresh(key: FitKey, len: usize) -> Table {
        let answers = Answers { scores: vec![Some(0.0); len], rejections: vec![Rejection::NodeUnregistered; len] };
        Table {
            key,
            generations: vec![NEVER; len],
            answers: Arc::new(answers),
            counts: RejectionCounts::default(),
            ranked: None,
        }
    }
    /// Whether candidate `i`'s answer is for the snapshot of `generation`.
    pub(super) fn current(&self, i: u32, generation: u64) -> bool {
        self.generations[i as usize] == generation
    }
    /// Candidate `i`'s answer on `snap`; `name_rank`: its place in its list's name order.
    pub(super) fn set(&mut self, i: u32, snap: &NodeSnapshot, answer: Result<f32, Rejection>, name_rank: u32) {
        let i = i as usize;
        let a = Arc::make_mut(&mut self.answers);
        if self.generations[i] != NEVER {
            match (a.scores[i], &mut self.ranked) {
                (None, _) => self.counts.remove(&a.rejections[i]),
                (Some(old), Some(r)) => {
                    r.keys.remove(&score::rank_key(r.policy, old, name_rank));
                }
                (Some(_), None) => {}
            }
        }
        match answer {
            Ok(score) => {
                a.scores[i] = Some(score);
                if let Some(r) = &mut self.ranked {
                    r.keys.insert(score::rank_key(r.policy, score, name_rank));
                }
            }
            Err(r) => {
                self.counts.add(&r);
                a.scores[i] = None;
                a.rejections[i] = r;
            }
        }
        self.generations[i] = snap.generation;
    }
    /// The rejections among the answers set.
    pub(super) fn counts(&self) -> &RejectionCounts {
        &self.counts
    }
    #[cfg(test)]
    pub(super) fn answer(&self, i: u32) -> Result<f32, Rejection> {
        let i = i as usize;
        self.answers.scores[i].ok_or(self.answers.rejections[i])
    }
    /// Every answer as it stands now (shared, not copied).
    pub(super) fn answers(&self) -> Arc<Answers> {
        self.answers.clone()
    }

    /// The best `n` fitting candidates of `list` under `policy`, best first, and how many fit.
    /// Every registered candidate must have been answered. The order is built on the first call
    /// (or for another policy) and kept from then on as answers change.
    pub(super) fn best(&mut self, list: &Resolution, policy: NodePolicy, n: usize) -> (Vec<Placed>, usize) {
        let r = match &mut self.ranked {
            Some(r) if r.policy == policy => r,
            slot => {
                let mut keys: Vec<u64> = list.placed(&self.answers, policy).into_iter().map(|p| p.0).collect();
                keys.sort_unstable();
                slot.insert(Ranked { policy, keys: keys.into_iter().collect() })
            }
        };
        let mut best = Vec::with_capacity(n.min(r.keys.len()));
        for key in r.keys.iter().take(n) {
            let k = list.at_name_rank(*key as u32);
            if let Some(s) = self.answers.scores[k as usize] {
                best.push((*key, s, k));
            }
        }
        (best, r.keys.len())
    }
}

/// Candidates of a resolved list that did not fit, as the list's table answered them for one
/// filter: names, reasons and snapshots are looked up only when the reasons are rendered.
#[derive(Clone)]
pub struct Listed {
    list: Arc<Resolution>,
    answers: Arc<Answers>,
    failed: usize,
}

impl Listed {
    /// `failed`: how many candidates did not fit (the unregistered ones included).
    pub(super) fn new(list: Arc<Resolution>, answers: Arc<Answers>, failed: usize) -> Listed {
        Listed { list, answers, failed }
    }
    pub(super) fn len(&self) -> usize {
        self.failed
    }
    /// Candidate `k`'s cell and rejection, when it failed.
    fn failed_at(&self, k: u32) -> Option<(Option<&Arc<SnapCell>>, Rejection)> {
        let cell = self.list.cell(k);
        let rejection = match cell {
            None => Rejection::NodeUnregistered,
            Some(_) if self.answers.scores[k as usize].is_some() => return None,
            Some(_) => self.answers.rejections[k as usize],
        };
        Some((cell, rejection))
    }
    /// Each failed candidate and its rejection, without its snapshot (loading one is an atomic
    /// count on a handle every node actor writes, for each of what may be thousands of nodes).
    pub(super) fn reasons(&self) -> impl Iterator<Item = (&NodeName, Rejection)> + '_ {
        (0..self.list.len() as u32).filter_map(move |k| self.failed_at(k).map(|(_, r)| (self.list.name(k), r)))
    }
    /// Each failed candidate's text (see `failure_text`), its current snapshot loaded only when
    /// the text needs it. The detail names a device by its place in the snapshot; a snapshot
    /// newer than the answer names the same device unless the node registered again in between.
    pub(super) fn texts(&self, detail: bool) -> impl Iterator<Item = (String, String)> + '_ {
        (0..self.list.len() as u32).filter_map(move |k| {
            let (cell, rejection) = self.failed_at(k)?;
            let snap = cell.filter(|_| detail || rejection == Rejection::NodeUnusable).map(|c| c.load());
            Some((self.list.name(k).to_string(), crate::sched::failure_text(&rejection, snap.as_deref(), detail)))
        })
    }
}

impl std::fmt::Debug for Listed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.reasons()).finish()
    }
}
