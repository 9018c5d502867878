//! The node book: every node the engine knows, by name (its actor, its published snapshot, its
//! bind state), the arbiters the actors run on, the board of snapshot generations Filter's answer
//! tables read, the candidate lists resolved lately, the nodes the cluster removed, and which node
//! holds each pod's allocation. Node actors write their own entries' snapshots and placements;
//! everything here is read without a message.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use actix::{Actor, Addr, Arbiter};
use dashmap::DashMap;

use crate::actor::books::read_side;
use crate::actor::books::recent::Recent;
use crate::actor::coordinator::Coordinator;
use crate::actor::filter::candidates::{Candidates, Directory, Resolution};
use crate::actor::filter::tables::Tables;
use crate::actor::messages::{NodeRemoved, NodeReport, Report, Settle};
use crate::actor::node::{self, Book, NodeActor, NodeAddr, NodeConfig, NodeEntry, SharedQuota, SnapCell};
use crate::devices::Vendors;
use crate::model::{NodeName, PodUid};
use crate::sched::NodeSnapshot;

/// Candidate lists kept resolved: kube-scheduler repeats one list while the nodes passing its own
/// filters stay the same; a few more cover pods with different node selectors taking turns.
const RESOLUTIONS_KEPT: usize = 4;

/// Coordinators one thread keeps, for the engines it filtered for last (a process runs one
/// engine; tests run many).
const LOCAL_COORDINATORS_KEPT: usize = 4;

/// Engines started in this process, numbered so a thread's coordinators can tell them apart.
static ENGINES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Coordinators started on this thread's arbiter, by engine (see `NodeBook::coordinator`).
    static COORDINATORS: std::cell::RefCell<VecDeque<(u64, Addr<Coordinator>)>> =
        const { std::cell::RefCell::new(VecDeque::new()) };
}

/// What a new node actor is given besides its name.
pub(in crate::actor) struct ActorParts {
    pub vendors: Arc<Vendors>,
    pub quota: Option<SharedQuota>,
    pub recent: Arc<Recent>,
}

pub(in crate::actor) struct NodeBook {
    pub book: Arc<Book>,
    /// Which node holds each pod's allocation (each node actor writes its own pods).
    pub placements: Arc<read_side::Placements>,
    /// Every node's snapshot generation, densely (Filter's answer tables read it).
    pub board: Arc<read_side::Board>,
    /// Bumped after a node joins or leaves: the directory and resolutions made before are stale.
    generation: AtomicU64,
    /// Every node in name order, as of a membership generation (rebuilt on the first filter
    /// after a node joined or left).
    directory: RwLock<Arc<Directory>>,
    /// Candidate lists Filter resolved lately, recognised when one comes again in the same text.
    resolved: RwLock<VecDeque<Arc<Resolution>>>,
    /// Filter's answers per pod shape and node.
    pub tables: Tables,
    /// Nodes the cluster deleted and has not shown again: pods still bound to them are not
    /// counted anywhere until the node comes back (then they are observed again).
    removed: DashMap<NodeName, ()>,
    pub arbiters: Vec<Arbiter>,
    /// The coordinator on the first arbiter, for callers on threads that run no arbiter.
    coordinator: Addr<Coordinator>,
    /// This engine's number among the process's (`ENGINES`).
    id: u64,
    parts: ActorParts,
    filter_deadline: std::time::Duration,
    reservation_ttl: std::time::Duration,
}

impl NodeBook {
    /// An empty book, its arbiters started and the shared coordinator on the first.
    pub fn start(
        arbiters: usize,
        filter_deadline: std::time::Duration,
        reservation_ttl: std::time::Duration,
        parts: ActorParts,
    ) -> NodeBook {
        let book: Arc<Book> = Arc::new(DashMap::new());
        let arbiters: Vec<Arbiter> = (0..arbiters.max(1)).map(|_| Arbiter::new()).collect();
        let coordinator = {
            let weak = Arc::downgrade(&book);
            let (deadline, ttl) = (filter_deadline, reservation_ttl);
            Coordinator::start_in_arbiter(&arbiters[0].handle(), move |_| Coordinator::new(weak, deadline, ttl))
        };
        let board = Arc::new(read_side::Board::default());
        NodeBook {
            book,
            placements: Arc::new(DashMap::new()),
            directory: RwLock::new(Arc::new(Directory::empty(board.clone()))),
            board,
            generation: AtomicU64::new(0),
            resolved: RwLock::new(VecDeque::new()),
            tables: Tables::default(),
            removed: DashMap::new(),
            arbiters,
            coordinator,
            id: ENGINES.fetch_add(1, Ordering::Relaxed),
            parts,
            filter_deadline,
            reservation_ttl,
        }
    }

    /// The node's actor, started on its arbiter (picked by hashing the name) when first seen.
    pub fn actor(&self, name: &str) -> NodeAddr {
        if let Some(e) = self.book.get(name) {
            return e.addr.clone();
        }
        let name = NodeName::new(name);
        let mut created = false;
        let addr = self
            .book
            .entry(name.clone())
            .or_insert_with(|| {
                created = true;
                let mut h = std::collections::hash_map::DefaultHasher::new();
                name.hash(&mut h);
                let arb = &self.arbiters[(h.finish() as usize) % self.arbiters.len()];
                let p = &self.parts;
                let snap = SnapCell::on_board(NodeActor::initial_snapshot(&name, &p.vendors), &self.board);
                let binds = Arc::new(node::BindState::default());
                let cfg = NodeConfig {
                    name: name.clone(),
                    vendors: p.vendors.clone(),
                    snap: snap.clone(),
                    placements: self.placements.clone(),
                    quota: p.quota.clone(),
                    binds: binds.clone(),
                    recent: p.recent.clone(),
                };
                NodeEntry { addr: NodeAddr::start(cfg, &arb.handle()), snap, binds }
            })
            .addr
            .clone();
        if created {
            // After the node is in the book: a resolution that missed it is then seen as stale.
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        addr
    }

    /// Outdates every resolution made so far, as a node joining or leaving does.
    #[cfg(test)]
    pub fn outdate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    #[cfg(test)]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The node's actor, if the node is known.
    pub fn addr(&self, name: &str) -> Option<NodeAddr> {
        self.book.get(name).map(|e| e.addr.clone())
    }

    /// The latest snapshot of a node, if known.
    pub fn snapshot(&self, name: &str) -> Option<Arc<NodeSnapshot>> {
        self.book.get(name).map(|e| e.snap.load())
    }

    /// Every node's published snapshot, in name order: one pass over the book.
    pub fn snapshots(&self) -> Vec<(NodeName, Arc<NodeSnapshot>)> {
        let mut v: Vec<(NodeName, Arc<NodeSnapshot>)> = Vec::with_capacity(self.book.len());
        v.extend(self.book.iter().map(|e| (e.key().clone(), e.snap.load())));
        v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Names of every node, sorted.
    pub fn names(&self) -> Vec<NodeName> {
        let mut v: Vec<NodeName> = self.book.iter().map(|e| e.key().clone()).collect();
        v.sort();
        v
    }

    /// The node holding the pod's allocation, if any.
    pub fn placement(&self, uid: &PodUid) -> Option<NodeName> {
        self.placements.get(uid).map(|n| n.clone())
    }

    /// Whether a bind of this scheduler holds, or waits to take, the lock of one of `nodes`.
    pub fn any_bind_busy(&self, nodes: &[NodeName]) -> bool {
        nodes.iter().any(|n| self.book.get(n.as_str()).is_some_and(|e| e.binds.locked() || e.binds.pending() > 0))
    }

    /// A node that joined again: its pods count once more.
    pub fn restored(&self, name: &str) {
        self.removed.remove(name);
    }

    /// The node is gone, with every allocation it held (see `Engine::remove_node`).
    pub fn remove(&self, name: &str) {
        self.removed.insert(NodeName::new(name), ());
        if let Some((_, e)) = self.book.remove(name) {
            self.generation.fetch_add(1, Ordering::SeqCst);
            e.addr.do_send(NodeRemoved);
        }
    }

    pub fn was_removed(&self, name: &str) -> bool {
        self.removed.contains_key(name)
    }

    /// The coordinator a filter on this thread asks: one started on this thread's own arbiter,
    /// so handing it the decision wakes no other core (only its Reserve goes to the node actor's
    /// arbiter); the engine's shared one where this thread runs no arbiter.
    pub fn coordinator(&self) -> Addr<Coordinator> {
        if Arbiter::try_current().is_none() {
            return self.coordinator.clone();
        }
        COORDINATORS.with(|c| {
            let mut c = c.borrow_mut();
            if let Some((_, a)) = c.iter().find(|(id, a)| *id == self.id && a.connected()) {
                return a.clone();
            }
            c.retain(|(id, a)| *id != self.id && a.connected());
            if c.len() >= LOCAL_COORDINATORS_KEPT {
                c.pop_front();
            }
            let a = Coordinator::new(Arc::downgrade(&self.book), self.filter_deadline, self.reservation_ttl).start();
            c.push_back((self.id, a.clone()));
            a
        })
    }

    /// Every node in name order as of the current membership generation.
    fn directory(&self) -> Arc<Directory> {
        let generation = self.generation.load(Ordering::SeqCst);
        {
            let d = self.directory.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if d.generation == generation {
                return d.clone();
            }
        }
        // Read after the generation: a node that joins meanwhile is in the book already or bumps
        // the generation again, and the next filter builds anew.
        let nodes = self.book.iter().map(|e| (e.key().clone(), e.snap.clone())).collect();
        let d = Arc::new(Directory::new(generation, nodes, self.board.clone()));
        let mut w = self.directory.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if w.generation == u64::MAX || w.generation < generation {
            *w = d.clone();
        }
        d
    }

    /// Each candidate's place in the directory, from the lists resolved lately when `names` is
    /// one of them and no node joined or left since.
    pub fn resolve(&self, names: &Candidates<'_>) -> Arc<Resolution> {
        let dir = self.directory();
        let (list, raw) = match names {
            Candidates::Known(r) if r.generation() == dir.generation => return r.clone(),
            // Resolved before a node joined or left: its names are resolved again.
            Candidates::Known(r) => (Cow::Owned(r.names()), r.raw()),
            // Names read from JSON text that was not recognised are a new list.
            Candidates::Names { names, raw: Some(raw) } => (Cow::Borrowed(&names[..]), Some(*raw)),
            Candidates::Names { names, raw: None } => {
                let recent = self.resolved.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(r) = recent.iter().find(|r| r.generation() == dir.generation && r.is_for(names)) {
                    return r.clone();
                }
                (Cow::Borrowed(&names[..]), None)
            }
        };
        self.remember(Arc::new(Resolution::new(dir, &list, raw)))
    }

    /// Keeps a list resolved just now among the recent ones.
    fn remember(&self, r: Arc<Resolution>) -> Arc<Resolution> {
        let mut recent = self.resolved.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        recent.retain(|old| old.generation() == r.generation());
        if recent.len() == RESOLUTIONS_KEPT {
            recent.pop_front();
        }
        recent.push_back(r.clone());
        r
    }

    /// The candidates in the JSON array `raw`: the list resolved lately from the same text, or
    /// the text read and resolved in one pass; `None` when it is not a plain array of strings
    /// (then it is read with the JSON parser).
    pub fn read_json<'a>(&self, raw: &str) -> Option<Candidates<'a>> {
        if let Some(known) = self.known(raw) {
            return Some(known);
        }
        let r = Resolution::from_json(self.directory(), raw)?;
        Some(Candidates::Known(self.remember(Arc::new(r))))
    }

    /// The list resolved lately from the JSON array `raw`, whose names then need not be read;
    /// `None` when no list came in that text lately.
    pub fn known<'a>(&self, raw: &str) -> Option<Candidates<'a>> {
        let recent = self.resolved.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        recent.iter().rev().find(|r| r.was_read_from(raw)).map(|r| Candidates::Known(r.clone()))
    }

    /// Waits until every node actor has applied what was sent to it before.
    pub async fn settle(&self) {
        let addrs: Vec<NodeAddr> = self.book.iter().map(|e| e.addr.clone()).collect();
        futures::future::join_all(addrs.iter().map(|a| a.send(Settle))).await;
    }

    /// The reports of every node, or of the named ones the engine knows, sorted by name.
    pub async fn reports(&self, names: Option<&[NodeName]>) -> Vec<NodeReport> {
        let addrs: Vec<NodeAddr> = match names {
            None => self.book.iter().map(|e| e.addr.clone()).collect(),
            Some(names) => names.iter().filter_map(|n| self.addr(n.as_str())).collect(),
        };
        let mut out: Vec<NodeReport> = futures::future::join_all(addrs.iter().map(|a| a.send(Report)))
            .await
            .into_iter()
            .filter_map(Result::ok)
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

impl Drop for NodeBook {
    fn drop(&mut self) {
        for a in &self.arbiters {
            a.stop();
        }
    }
}
