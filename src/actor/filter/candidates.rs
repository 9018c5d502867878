//! Filter's candidates: every known node in name order (the [`Directory`]) and a filter's
//! candidate list resolved against it (a [`Resolution`]); per pod shape the answers kept per
//! node are the answer tables' (`tables.rs`).
//!
//! kube-scheduler sends each pod a new window of nodes: it stops after the share of the cluster
//! `percentageOfNodesToScore` asks for and starts the next pod where this one stopped. So the
//! per-node path carries the filter: a name is found in one hash lookup in the directory, which
//! holds each node's snapshot handle, its slot on the engine's dense board of snapshot
//! generations and its place in name order; per pod shape ([`FitKey`]), a table keeps each
//! node's answer with the generation of the snapshot it came from, indexed by board slot, so a
//! filter reads a candidate's current generation and its kept answer from two dense arrays and
//! fits only the candidates whose generation moved. Answers are a function of the snapshot and
//! the shape alone (a pod under a namespace quota is never answered from a table), so an answer
//! whose generation is still current is exactly what fitting again would give.
//!
//! A list that comes again in the same JSON text (a small cluster, or `percentageOfNodesToScore`
//! at 100) is recognised by that text and its names are not read again.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::model::NodeName;

use crate::actor::books::read_side::{Board, Reader};
use crate::actor::node::SnapCell;

/// A fitting candidate: its key in rank order (`score::rank_key`), score, and place in its
/// resolved list.
pub(in crate::actor) type Placed = (u64, f32, u32);

/// A generation no snapshot has: the node was never answered in a table, or the directory was
/// built for no membership yet.
pub(in crate::actor) const NEVER: u64 = u64::MAX;

/// A node without a slot on the board (it joined after every slot was handed out).
pub(in crate::actor) const NO_SLOT: u32 = u32::MAX;

/// A candidate that is not a node the engine knows.
const UNKNOWN: u32 = u32::MAX;

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
            Candidates::Known(r) => Box::new((0..r.len() as u32).map(|k| r.name(k).as_str())),
            Candidates::Names { names, .. } => Box::new(names.iter().map(|n| n.as_ref())),
        }
    }
    pub fn contains(&self, name: &str) -> bool {
        self.iter().any(|n| n == name)
    }
}

/// Node names to their rank in name order: open addressing over one array of (hash, rank)
/// pairs, the names end to end in one buffer. A lookup reads a few neighbouring words and
/// compares the name against contiguous bytes, where a map of reference-counted names would
/// follow a pointer to each name on the heap, a thousand times per filter.
struct NameIndex {
    /// Power-of-two sized, at most half full; `EMPTY` marks a free place.
    places: Vec<(u32, u32)>,
    text: String,
    /// Where each rank's name ends in `text`.
    ends: Vec<u32>,
}

const EMPTY: u32 = u32::MAX;

impl NameIndex {
    /// The index of `names`, in rank order.
    fn new(names: &[NodeName]) -> NameIndex {
        let size = (names.len() * 2).next_power_of_two().max(8);
        let mut index = NameIndex {
            places: vec![(0, EMPTY); size],
            text: String::with_capacity(names.iter().map(|n| n.as_str().len()).sum()),
            ends: Vec::with_capacity(names.len()),
        };
        for (rank, name) in names.iter().enumerate() {
            index.text.push_str(name.as_str());
            index.ends.push(u32::try_from(index.text.len()).unwrap_or(u32::MAX));
            let (mut at, tag) = index.start(name.as_str());
            while index.places[at].1 != EMPTY {
                at = (at + 1) & (size - 1);
            }
            index.places[at] = (tag, rank as u32);
        }
        index
    }

    /// Where a name's probe starts, and the hash bits kept beside its rank.
    #[inline]
    fn start(&self, name: &str) -> (usize, u32) {
        let h = hash_name(name.as_bytes());
        ((h as usize) & (self.places.len() - 1), (h >> 32) as u32)
    }

    fn name(&self, rank: u32) -> &str {
        let r = rank as usize;
        let start = if r == 0 { 0 } else { self.ends[r - 1] as usize };
        self.text.get(start..self.ends[r] as usize).unwrap_or("")
    }

    #[inline]
    fn find(&self, name: &str) -> Option<u32> {
        let (mut at, tag) = self.start(name);
        loop {
            let (t, rank) = self.places[at];
            if rank == EMPTY {
                return None;
            }
            if t == tag && self.name(rank) == name {
                return Some(rank);
            }
            at = (at + 1) & (self.places.len() - 1);
        }
    }
}

/// A word-at-a-time multiplicative hash with a final fold: node names are the cluster's own (no
/// tenant chooses them), so a keyed hash buys nothing here, and a name costs a few
/// multiplications instead of SipHash's rounds.
#[inline]
fn hash_name(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    // The multiply leaves the low bits depending only on low input bytes, and names that differ
    // only in their last digits would share places: fold the high bits down.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// Every node the engine knows as of one membership generation, in name order: a node's place
/// in this order is its rank (ties in score go to the smaller name), and its snapshot handle and
/// board slot sit at that place.
pub struct Directory {
    pub(in crate::actor) generation: u64,
    names: Vec<NodeName>,
    cells: Vec<Arc<SnapCell>>,
    slots: Vec<u32>,
    index: NameIndex,
    board: Arc<Board>,
    /// Per rank, the rank of the name that followed it in the last list read from JSON (the
    /// last place: the first name of that list); `UNKNOWN` where none did. kube-scheduler sends
    /// windows of one node order, so the next name is most often the one that followed last
    /// time, and is recognised by one comparison of bytes instead of a lookup. A stale guess
    /// is only a miss: it is always compared.
    next: Vec<AtomicU32>,
}

impl Directory {
    /// The directory of `nodes` (each name once), as of membership `generation`.
    pub(in crate::actor) fn new(
        generation: u64,
        mut nodes: Vec<(NodeName, Arc<SnapCell>)>,
        board: Arc<Board>,
    ) -> Directory {
        nodes.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        nodes.dedup_by(|a, b| a.0 == b.0);
        let (mut names, mut cells, mut slots) =
            (Vec::with_capacity(nodes.len()), Vec::with_capacity(nodes.len()), Vec::with_capacity(nodes.len()));
        for (name, cell) in nodes {
            slots.push(cell.slot_on(&board).unwrap_or(NO_SLOT));
            names.push(name);
            cells.push(cell);
        }
        let next = (0..=names.len()).map(|_| AtomicU32::new(UNKNOWN)).collect();
        Directory { generation, index: NameIndex::new(&names), names, cells, slots, board, next }
    }

    /// The empty directory before any node is known; `generation` no book has, so the first
    /// look at the book replaces it.
    pub(in crate::actor) fn empty(board: Arc<Board>) -> Directory {
        Directory::new(NEVER, Vec::new(), board)
    }

    /// The node's place in name order.
    fn rank(&self, name: &str) -> Option<u32> {
        self.index.find(name)
    }

    /// The rank of candidate `k`, `name`; `UNKNOWN`, with the name kept in `unknown`, when it is
    /// not a node the engine knows.
    fn rank_or_unknown(&self, name: &str, k: usize, unknown: &mut Vec<(u32, NodeName)>) -> u32 {
        self.rank(name).unwrap_or_else(|| {
            unknown.push((k as u32, NodeName::new(name)));
            UNKNOWN
        })
    }

    /// The generation of the snapshot the node at `rank` holds now, and its board slot.
    #[inline]
    fn generation_at(&self, board: &mut Reader<'_>, rank: u32) -> (u64, u32) {
        let r = rank as usize;
        match self.slots[r] {
            NO_SLOT => (self.cells[r].generation(), NO_SLOT),
            s => (board.get(s), s),
        }
    }
}

/// A filter's candidate list resolved against the directory: each candidate's rank there.
pub struct Resolution {
    dir: Arc<Directory>,
    /// The JSON array the names were read from, when they came in one.
    raw: Option<Box<str>>,
    /// Per candidate, its rank in the directory (`UNKNOWN`: not a node the engine knows).
    ranks: Vec<u32>,
    /// The names of the unknown candidates, by their place in the list.
    pub(in crate::actor) unknown: Vec<(u32, NodeName)>,
}

impl Resolution {
    pub(in crate::actor) fn new(dir: Arc<Directory>, names: &[Cow<'_, str>], raw: Option<&str>) -> Self {
        let mut unknown = Vec::new();
        let ranks = names.iter().enumerate().map(|(k, n)| dir.rank_or_unknown(n, k, &mut unknown)).collect();
        Resolution { dir, raw: raw.map(Box::from), ranks, unknown }
    }

    /// The list in the JSON array `raw`, read and resolved in one pass, when it is a plain
    /// array of strings without escapes (node names never need one); `None` when it is anything
    /// else, and the caller reads it with a JSON parser, which says what is wrong with it.
    pub(in crate::actor) fn from_json(dir: Arc<Directory>, raw: &str) -> Option<Self> {
        let b = raw.as_bytes();
        let ws = |mut i: usize| {
            while b.get(i).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) {
                i += 1;
            }
            i
        };
        let mut i = ws(0);
        if b.get(i) != Some(&b'[') {
            return None;
        }
        i = ws(i + 1);
        let mut ranks = Vec::with_capacity(dir.names.len().min(b.len() / 3));
        let mut unknown = Vec::new();
        // The place whose successor guess the next name reads: the list's start first.
        let mut prev = dir.names.len();
        if b.get(i) == Some(&b']') {
            i += 1;
        } else {
            loop {
                if b.get(i) != Some(&b'"') {
                    return None;
                }
                let start = i + 1;
                let guess = dir.next[prev].load(Ordering::Relaxed);
                let guessed = (guess != UNKNOWN)
                    .then(|| dir.index.name(guess).as_bytes())
                    .filter(|n| b.get(start..start + n.len()) == Some(n) && b.get(start + n.len()) == Some(&b'"'));
                let (rank, end) = match guessed {
                    Some(n) => (guess, start + n.len()),
                    None => {
                        let len = b.get(start..)?.iter().position(|c| matches!(c, b'"' | b'\\' | 0..=0x1f))?;
                        if b[start + len] != b'"' {
                            return None;
                        }
                        let name = raw.get(start..start + len)?;
                        let rank = dir.rank_or_unknown(name, ranks.len(), &mut unknown);
                        if rank != UNKNOWN {
                            dir.next[prev].store(rank, Ordering::Relaxed);
                        }
                        (rank, start + len)
                    }
                };
                ranks.push(rank);
                if rank != UNKNOWN {
                    prev = rank as usize;
                }
                i = ws(end + 1);
                match b.get(i) {
                    Some(b',') => i = ws(i + 1),
                    Some(b']') => {
                        i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        if ws(i) != b.len() {
            return None;
        }
        Some(Resolution { dir, raw: Some(Box::from(raw)), ranks, unknown })
    }

    /// The membership generation the list was resolved at.
    pub(in crate::actor) fn generation(&self) -> u64 {
        self.dir.generation
    }

    /// Whether this list was read from the JSON array `raw` (byte for byte: one comparison of
    /// contiguous text).
    pub(in crate::actor) fn was_read_from(&self, raw: &str) -> bool {
        self.raw.as_deref() == Some(raw)
    }

    /// The names, borrowed.
    pub(in crate::actor) fn names(&self) -> Vec<Cow<'_, str>> {
        (0..self.len() as u32).map(|k| Cow::Borrowed(self.name(k).as_str())).collect()
    }

    pub(in crate::actor) fn raw(&self) -> Option<&str> {
        self.raw.as_deref()
    }

    /// Whether the list is `names`, in the same order.
    pub(in crate::actor) fn is_for(&self, names: &[Cow<'_, str>]) -> bool {
        names.len() == self.len() && names.iter().enumerate().all(|(k, n)| self.name(k as u32).as_str() == n)
    }

    pub(in crate::actor) fn len(&self) -> usize {
        self.ranks.len()
    }
    pub(in crate::actor) fn name(&self, k: u32) -> &NodeName {
        match self.ranks[k as usize] {
            UNKNOWN => match self.unknown.binary_search_by_key(&k, |(at, _)| *at) {
                Ok(i) => &self.unknown[i].1,
                // Every unknown candidate is listed: unreachable, but a name is owed.
                Err(_) => &self.unknown[0].1,
            },
            r => &self.dir.names[r as usize],
        }
    }
    /// Candidate `k`'s rank in name order, when it is a node the engine knows.
    pub(in crate::actor) fn rank(&self, k: u32) -> Option<u32> {
        Some(self.ranks[k as usize]).filter(|r| *r != UNKNOWN)
    }
    pub(in crate::actor) fn cell(&self, k: u32) -> Option<&Arc<SnapCell>> {
        self.rank(k).map(|r| &self.dir.cells[r as usize])
    }
    /// The generation of candidate `k`'s current snapshot (`None`: not a node the engine knows).
    #[cfg(test)]
    pub(in crate::actor) fn generation_of(&self, k: u32) -> Option<u64> {
        let mut board = self.dir.board.reader();
        self.rank(k).map(|r| self.dir.generation_at(&mut board, r).0)
    }
    pub(in crate::actor) fn unregistered(&self) -> usize {
        self.unknown.len()
    }

    /// Each known candidate's place in the list, rank and board slot, in list order.
    #[cfg(test)]
    pub(in crate::actor) fn known(&self) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
        self.ranks
            .iter()
            .enumerate()
            .filter(|(_, r)| **r != UNKNOWN)
            .map(|(k, &r)| (k as u32, r, self.dir.slots[r as usize]))
    }

    /// Each known candidate's place in the list, rank, current generation and board slot, in
    /// list order; one pass over the board.
    pub(in crate::actor) fn current(&self) -> impl Iterator<Item = (u32, u32, u64, u32)> + '_ {
        let mut board = self.dir.board.reader();
        self.ranks.iter().enumerate().filter(|(_, r)| **r != UNKNOWN).map(move |(k, &r)| {
            let (g, slot) = self.dir.generation_at(&mut board, r);
            (k as u32, r, g, slot)
        })
    }
}
