//! Per pod shape, the answers kept per node ([`Table`], indexed by board slot, checked against
//! the board's generations), the tables kept for the shapes in flight ([`Tables`]), and a
//! filter's failed candidates as its table left them ([`Listed`]), with their rejections in
//! chunks shared copy-on-write ([`Rejections`]).

use std::sync::{Arc, Mutex};

use crate::model::NodeName;
use crate::model::request::FitKey;
use crate::sched::Rejection;

use crate::actor::filter::candidates::{NEVER, NO_SLOT, Resolution};
use crate::actor::node::SnapCell;

/// Answer tables kept: the pod shapes in flight at once each find theirs (the load test's
/// default mix draws 14), and filters of one shape running at once each take one.
const TABLES_KEPT: usize = 16;

/// One pod shape's answers per node, indexed by board slot: the answer and the generation of
/// the snapshot it was computed on. Slots are never reused, so an answer is never read for
/// another node. Scores sit apart from the much larger rejections, so reading a filter's
/// answers touches a few dense pages and a rejection only where a candidate failed.
pub(in crate::actor) struct Table {
    key: FitKey,
    generations: Vec<u64>,
    /// The score where the node fits, NaN where it does not (a score is never NaN).
    scores: Vec<f32>,
    rejections: Rejections,
}

impl Table {
    /// A table that knows no answer yet.
    pub(in crate::actor) fn fresh(key: FitKey) -> Table {
        Table { key, generations: Vec::new(), scores: Vec::new(), rejections: Rejections::default() }
    }
    /// Whether the answer kept for the node at `slot` is for the snapshot of `generation`.
    #[inline]
    pub(in crate::actor) fn current(&self, slot: u32, generation: u64) -> bool {
        slot != NO_SLOT && self.generations.get(slot as usize) == Some(&generation)
    }
    /// The score kept for the node at `slot` (NaN: it does not fit), for whatever snapshot it
    /// was computed on; `None` when the node was never answered here.
    #[inline]
    pub(in crate::actor) fn score(&self, slot: u32) -> Option<f32> {
        match self.generations.get(slot as usize) {
            None | Some(&NEVER) => None,
            Some(_) => Some(self.scores[slot as usize]),
        }
    }
    /// Why the node at `slot` does not fit, where its kept score says it does not.
    #[cfg(test)]
    pub(in crate::actor) fn rejection(&self, slot: u32) -> Rejection {
        self.rejections.get(slot)
    }
    /// The rejections as they are now, shared: later answers do not change them.
    pub(in crate::actor) fn rejections(&self) -> Rejections {
        self.rejections.clone()
    }
    /// Keeps the answer on the snapshot of `generation` for the node at `slot`.
    pub(in crate::actor) fn set(&mut self, slot: u32, generation: u64, answer: Result<f32, Rejection>) {
        if slot == NO_SLOT {
            return;
        }
        let s = slot as usize;
        if s >= self.generations.len() {
            self.generations.resize(s + 1, NEVER);
            self.scores.resize(s + 1, f32::NAN);
        }
        self.generations[s] = generation;
        match answer {
            // A NaN score (never computed) would read as a rejection: kept as the lowest.
            Ok(score) => self.scores[s] = if score.is_nan() { f32::MIN } else { score },
            Err(r) => {
                self.scores[s] = f32::NAN;
                self.rejections.set(slot, r);
            }
        }
    }
}

/// Rejections kept per chunk of this many slots. A filter's failures share their table's chunks
/// instead of copying each failed candidate's rejection (most of a full cluster's window fails,
/// and a rejection is about 90 bytes); an answer the table takes later copies its chunk only
/// while some filter's failures still hold it.
const REJECTION_CHUNK: usize = 64;

/// Rejections by board slot, in chunks shared copy-on-write (see `REJECTION_CHUNK`); the list
/// of chunks is shared too, so a filter's failures take it with one count, and a later answer
/// copies the list (a count per chunk) and its chunk only while they are held. A slot never set
/// reads as `NodeUnregistered`.
#[derive(Clone, Default)]
pub(in crate::actor) struct Rejections(Arc<Vec<Arc<[Rejection; REJECTION_CHUNK]>>>);

impl Rejections {
    pub(in crate::actor) fn get(&self, slot: u32) -> Rejection {
        let s = slot as usize;
        self.0.get(s / REJECTION_CHUNK).map_or(Rejection::NodeUnregistered, |c| c[s % REJECTION_CHUNK])
    }
    fn set(&mut self, slot: u32, r: Rejection) {
        let s = slot as usize;
        let c = s / REJECTION_CHUNK;
        let chunks = Arc::make_mut(&mut self.0);
        if c >= chunks.len() {
            chunks.resize_with(c + 1, || Arc::new([Rejection::NodeUnregistered; REJECTION_CHUNK]));
        }
        Arc::make_mut(&mut chunks[c])[s % REJECTION_CHUNK] = r;
    }
}

/// The answer tables the engine keeps, by pod shape. A filter takes its shape's table out while
/// it works on it; another filter of the same shape at the same time takes another or starts a
/// fresh one rather than wait, and both are kept.
#[derive(Default)]
pub(in crate::actor) struct Tables(Mutex<Vec<Table>>);

impl Tables {
    /// A table of `key`, the most recently used first; a new table knows no answer.
    pub(in crate::actor) fn take(&self, key: FitKey) -> Table {
        let mut tables = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match tables.iter().rposition(|t| t.key == key) {
            Some(p) => tables.remove(p),
            None => Table::fresh(key),
        }
    }

    /// Puts a table back as the most recently used, the least recently used making room.
    pub(in crate::actor) fn put(&self, table: Table) {
        let mut tables = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if tables.len() == TABLES_KEPT {
            tables.remove(0);
        }
        tables.push(table);
    }

    /// How many tables are kept.
    #[cfg(test)]
    pub(in crate::actor) fn len(&self) -> usize {
        self.0.lock().map_or(0, |t| t.len())
    }
}

/// Candidates of a resolved list that did not fit, as one filter answered them: names, reasons
/// and snapshots are looked up only when the reasons are rendered.
#[derive(Clone)]
pub struct Listed {
    list: Arc<Resolution>,
    /// Each known candidate that did not fit, by its place in the list and its board slot, in
    /// list order.
    failed: Arc<[(u32, u32)]>,
    /// Their rejections by slot, as the filter left its table.
    rejections: Rejections,
    /// The rejections of failed candidates without a slot, by place.
    slotless: Arc<[(u32, Rejection)]>,
}

impl Listed {
    pub(in crate::actor) fn new(
        list: Arc<Resolution>,
        failed: Vec<(u32, u32)>,
        rejections: Rejections,
        slotless: Vec<(u32, Rejection)>,
    ) -> Listed {
        Listed { list, failed: failed.into(), rejections, slotless: slotless.into() }
    }
    /// How many candidates did not fit, the unregistered ones included.
    pub(in crate::actor) fn len(&self) -> usize {
        self.failed.len() + self.list.unregistered()
    }
    fn rejection(&self, place: u32, slot: u32) -> Rejection {
        if slot != NO_SLOT {
            return self.rejections.get(slot);
        }
        match self.slotless.binary_search_by_key(&place, |(k, _)| *k) {
            Ok(i) => self.slotless[i].1,
            // Every failed candidate without a slot is listed: unreachable, but a reason is owed.
            Err(_) => Rejection::NodeUnregistered,
        }
    }
    /// Every failed candidate in list order: `(place, cell, rejection)`.
    fn failed(&self) -> impl Iterator<Item = (u32, Option<&Arc<SnapCell>>, Rejection)> + '_ {
        let mut known = self.failed.iter().peekable();
        let mut unknown = self.list.unknown.iter().peekable();
        std::iter::from_fn(move || match (known.peek(), unknown.peek()) {
            (Some((k, _)), Some((u, _))) if u < k => {
                unknown.next().map(|(u, _)| (*u, None, Rejection::NodeUnregistered))
            }
            (Some(_), _) => known.next().map(|&(k, slot)| (k, self.list.cell(k), self.rejection(k, slot))),
            (None, Some(_)) => unknown.next().map(|(u, _)| (*u, None, Rejection::NodeUnregistered)),
            (None, None) => None,
        })
    }
    /// Each failed candidate, its snapshot handle (`None`: not a node the engine knows) and its
    /// rejection, in list order.
    pub(in crate::actor) fn entries(
        &self,
    ) -> impl Iterator<Item = (&NodeName, Option<&Arc<SnapCell>>, Rejection)> + '_ {
        self.failed().map(|(k, cell, r)| (self.list.name(k), cell, r))
    }
    /// Each failed candidate and its rejection, without its snapshot (loading one is an atomic
    /// count on a handle every node actor writes, for each of what may be thousands of nodes).
    pub(in crate::actor) fn reasons(&self) -> impl Iterator<Item = (&NodeName, Rejection)> + '_ {
        self.failed().map(|(k, _, r)| (self.list.name(k), r))
    }
    /// Each failed candidate's text (see `failure_text`), its current snapshot loaded only when
    /// the text needs it. The detail names a device by its place in the snapshot; a snapshot
    /// newer than the answer names the same device unless the node registered again in between.
    pub(in crate::actor) fn texts(&self, detail: bool) -> impl Iterator<Item = (String, String)> + '_ {
        self.failed().map(move |(k, cell, rejection)| {
            let snap = cell.filter(|_| detail || rejection == Rejection::NodeUnusable).map(|c| c.load());
            (self.list.name(k).to_string(), crate::sched::failure_text(&rejection, snap.as_deref(), detail))
        })
    }
}

impl std::fmt::Debug for Listed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.reasons()).finish()
    }
}
