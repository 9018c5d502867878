//! The read side: what node actors publish for everyone else to read without a message, and
//! why no read can over-commit a device. Node actors own and write; Filter, binds, the status
//! page and metrics read:
//!
//! - [`SnapCell`]: a node's latest immutable snapshot, swapped by its actor after every change.
//!   Filter fits on it only to propose; the reservation fits again on the actor's live usage.
//! - [`Board`]: every snapshot's generation in one dense array, set under the cell's write lock.
//!   Generations only grow, so an answer tagged with the current generation is an answer on the
//!   snapshot held (Filter's answer tables rest on this).
//! - [`BindState`]: whether a bind holds the node's in-process lock and how many reservations
//!   wait for their bind. Filter reads it to prefer free nodes among those that fit, nothing more.
//! - [`Placements`]: which node holds each pod's allocation. A pointer to the actor to ask; that
//!   actor decides from what it holds.
//!
//! Filter's answer tables keep an answer only with the generation of the snapshot it was
//! computed on and use it only while that generation is current, and the namespace quota book is
//! checked and taken in one step per namespace, so neither can let two reservations through
//! where one fits. docs/architecture.md draws the whole read side.
//!
//! The board lets Filter read the generations of a thousand candidates in order from a few
//! contiguous pages instead of following a pointer to each handle on the heap.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use dashmap::DashMap;

use crate::model::{NodeName, PodUid};
use crate::sched::NodeSnapshot;

/// A node's latest snapshot, replaced by its actor only. Filter keeps these handles for the
/// candidate lists it resolved before, so reading a candidate's snapshot needs no lookup by name,
/// and publishing one takes no lock on the address book.
pub struct SnapCell {
    snap: RwLock<Arc<NodeSnapshot>>,
    /// The handle's slot on the engine's board, which holds the generation of the snapshot held.
    board: Option<(Arc<Board>, u32)>,
}

impl SnapCell {
    /// A handle with no slot on a board (its generation is read from the snapshot).
    pub fn new(snap: Arc<NodeSnapshot>) -> Arc<SnapCell> {
        Arc::new(SnapCell { snap: RwLock::new(snap), board: None })
    }
    /// A handle whose generation is kept in `board` (unless the board is full).
    pub fn on_board(snap: Arc<NodeSnapshot>, board: &Arc<Board>) -> Arc<SnapCell> {
        let slot = board.slot(snap.generation).map(|s| (board.clone(), s));
        Arc::new(SnapCell { snap: RwLock::new(snap), board: slot })
    }
    pub fn load(&self) -> Arc<NodeSnapshot> {
        // A writer cannot panic while holding the lock (it only swaps an Arc), so a poisoned lock
        // still holds a whole snapshot.
        match self.snap.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
    /// The generation of the snapshot `load` returns now, from the board (a load, no lock, no
    /// reference count) when the handle has a slot. Generations only grow, so an answer computed
    /// at this generation is an answer on this very snapshot.
    pub fn generation(&self) -> u64 {
        match &self.board {
            Some((b, s)) => b.get(*s),
            None => self.load().generation,
        }
    }
    /// The handle's slot in `board`, if it has one there.
    pub fn slot_on(&self, board: &Arc<Board>) -> Option<u32> {
        self.board.as_ref().filter(|(b, _)| Arc::ptr_eq(b, board)).map(|(_, s)| *s)
    }
    pub(in crate::actor) fn store(&self, snap: Arc<NodeSnapshot>) {
        let generation = snap.generation;
        let mut g = match self.snap.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *g = snap;
        // Under the lock, so a reader that sees the new generation loads this snapshot or a newer.
        if let Some((b, s)) = &self.board {
            b.set(*s, generation);
        }
    }
}

impl std::fmt::Debug for SnapCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SnapCell(generation {})", self.generation())
    }
}

/// Which node holds each pod's allocation: written by that node's actor only.
pub type Placements = DashMap<PodUid, NodeName>;

/// What Filter may read of a node's binds without a message; written by the node's actor only.
#[derive(Debug, Default)]
pub struct BindState {
    /// A bind holds the node's in-process lock.
    locked: AtomicBool,
    /// Pods reserved here that have not been bound yet (their binds are coming or waiting).
    pending: AtomicU32,
}

impl BindState {
    pub fn locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
    pub fn pending(&self) -> u32 {
        self.pending.load(Ordering::Relaxed)
    }
    pub(in crate::actor) fn set_locked(&self, locked: bool) {
        self.locked.store(locked, Ordering::Relaxed);
    }
    pub(in crate::actor) fn set_pending(&self, n: usize) {
        self.pending.store(u32::try_from(n).unwrap_or(u32::MAX), Ordering::Relaxed);
    }
}

/// Slots per chunk; chunks are allocated as nodes join.
const CHUNK: usize = 1024;
/// Chunks at most: 4 Mi slots. Slots are never reused (a reused slot could show another node's
/// generation to a list resolved before), so a cluster that has seen more nodes than this has its
/// later handles read their generation from the handle itself.
const CHUNKS: usize = 4096;

pub struct Board {
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
    next: AtomicUsize,
}

impl Default for Board {
    fn default() -> Self {
        Board { chunks: (0..CHUNKS).map(|_| OnceLock::new()).collect(), next: AtomicUsize::new(0) }
    }
}

impl Board {
    /// A new slot holding `generation`, or `None` when every slot has been handed out.
    pub fn slot(&self, generation: u64) -> Option<u32> {
        let s = self.next.fetch_add(1, Ordering::Relaxed);
        if s >= CHUNK * CHUNKS {
            return None;
        }
        let slot = u32::try_from(s).ok()?;
        self.cell(slot).store(generation, Ordering::Release);
        Some(slot)
    }

    #[inline]
    pub fn get(&self, slot: u32) -> u64 {
        self.cell(slot).load(Ordering::Acquire)
    }

    pub fn set(&self, slot: u32, generation: u64) {
        self.cell(slot).store(generation, Ordering::Release);
    }

    /// A reader of many slots in a row (see [`Reader`]).
    pub fn reader(&self) -> Reader<'_> {
        Reader { board: self, chunk: usize::MAX, cells: &[] }
    }

    fn cell(&self, slot: u32) -> &AtomicU64 {
        let (c, i) = (slot as usize / CHUNK, slot as usize % CHUNK);
        &self.chunks[c].get_or_init(|| (0..CHUNK).map(|_| AtomicU64::new(0)).collect())[i]
    }
}

/// Reads slots one after another, finding a chunk once per run of slots in it (a list's nodes
/// mostly joined in a row, so their slots are neighbours).
pub struct Reader<'a> {
    board: &'a Board,
    chunk: usize,
    cells: &'a [AtomicU64],
}

impl Reader<'_> {
    #[inline]
    pub fn get(&mut self, slot: u32) -> u64 {
        let (c, i) = (slot as usize / CHUNK, slot as usize % CHUNK);
        if c != self.chunk {
            self.chunk = c;
            self.cells = self.board.chunks.get(c).and_then(OnceLock::get).map_or(&[], |b| &b[..]);
        }
        match self.cells.get(i) {
            Some(a) => a.load(Ordering::Acquire),
            None => self.board.get(slot),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_handed_out_once_across_chunks_and_hold_what_was_set() {
        let b = Board::default();
        let slots: Vec<u32> = (0..CHUNK as u64 + 3).map(|g| b.slot(g).unwrap()).collect();
        assert_eq!(slots, (0..CHUNK as u32 + 3).collect::<Vec<_>>());
        assert_eq!(b.get(CHUNK as u32 + 1), CHUNK as u64 + 1);
        b.set(5, 99);
        assert_eq!((b.get(4), b.get(5), b.get(6)), (4, 99, 6));
    }

    #[test]
    fn a_reader_sees_what_single_reads_see_across_chunks_and_in_any_order() {
        let b = Board::default();
        let slots: Vec<u32> = (0..2 * CHUNK as u64 + 5).map(|g| b.slot(g * 3).unwrap()).collect();
        b.set(CHUNK as u32, 7);
        let mut r = b.reader();
        let order = [0, 1, CHUNK as u32 + 2, 3, CHUNK as u32, 2 * CHUNK as u32 + 4, CHUNK as u32 - 1, 5];
        for s in order {
            assert_eq!(r.get(s), b.get(s), "slot {s}");
        }
        assert_eq!(r.get(CHUNK as u32), 7);
        assert_eq!(
            slots.iter().map(|s| r.get(*s)).collect::<Vec<_>>(),
            slots.iter().map(|s| b.get(*s)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_full_board_hands_out_no_slot() {
        let b = Board::default();
        b.next.store(CHUNK * CHUNKS, Ordering::Relaxed);
        assert_eq!(b.slot(1), None);
        assert_eq!(b.slot(1), None, "still none, and no wrap-around");
    }
}
