//! `NodeActor`: one per node, the only writer of that node's device usage, reservations and
//! in-process bind lock. Handlers are synchronous and short; they call `sched` and never await the
//! cluster. After every change the actor publishes an immutable snapshot for Filter to read.
//!
//! ```text
//! Free ──Reserve──▶ Reserved ──Commit──▶ Committed ──PodDeleted──▶ Free
//!                      └──Release / TTL──▶ Free     (restart: PodObserved rebuilds both)
//! ```

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use actix::{Actor, AsyncContext, Context, Handler, MessageResult};
use dashmap::DashMap;
use tokio::sync::oneshot;

use crate::model::{DeviceUsage, NodeName, PodDevices, PodRequest, PodUid};
use crate::sched::accounting::{self, Charge, Layout};
use crate::sched::reason::{Need, Reason, Tally};
use crate::sched::{NodeSnapshot, Rejection, Scratch, fit};
use crate::vendor::{NoQuota, NodeExtra, QuotaCheck, Vendors};

/// Points each charge at its device in `base`, the node's list: the node's own copy of the id,
/// not one per pod decoded from its annotations, and, when ids are unique, its position, so
/// rebuilding usage costs one lookup per charge, not a scan (a position is only a hint; usage
/// falls back to the id).
fn place(base: &[DeviceUsage], unique_ids: bool, charges: &mut [Charge]) {
    for c in charges {
        let pos = base.iter().position(|d| d.vendor == c.vendor && d.info.id == c.uuid);
        if let Some(p) = pos {
            c.uuid = base[p].info.id.clone();
        }
        c.pos = pos.filter(|_| unique_ids).map(|p| p as u16);
    }
}

pub use super::board::SnapCell;
use super::messages::*;
use record::{Parts, Record};
use tombstones::{TOMBSTONE_AGE, Tombstones};

/// The shared address book entry of a node: its actor, its latest snapshot, and the state of its
/// binds (written by the actor only; Filter reads it to prefer nodes no bind is busy with).
pub struct NodeEntry {
    pub addr: actix::Addr<NodeActor>,
    pub snap: Arc<SnapCell>,
    pub binds: Arc<BindState>,
}

/// What Filter may read of a node's binds without a message.
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
}

pub type Book = DashMap<NodeName, NodeEntry>;

#[derive(Clone, Copy, Debug)]
enum State {
    /// Expires unless committed; `seq` tells a stale timer from the current reservation. Never
    /// zero, so the state fits one word.
    Reserved {
        seq: NonZeroU64,
    },
    Committed,
}

/// One pod's allocation on the node. A node of a large cluster holds dozens, so everything but
/// what rebuilding usage reads (the charges) is one compact buffer ([`Record`]).
#[derive(Clone, Debug)]
struct Alloc {
    state: State,
    charges: Box<[Charge]>,
    record: Record,
}

// What a running pod costs each node actor rests on this size (docs/performance.md).
const _: () = assert!(std::mem::size_of::<Alloc>() == 40);

/// The namespace quota book, shared by every node actor.
pub type SharedQuota = Arc<super::quota::QuotaBook>;

pub struct NodeActor {
    name: NodeName,
    vendors: Arc<Vendors>,
    snap: Arc<SnapCell>,
    placements: Arc<DashMap<PodUid, NodeName>>,
    quota: Option<SharedQuota>,
    base: Vec<DeviceUsage>,
    extras: Vec<Option<NodeExtra>>,
    unusable: Option<Arc<str>>,
    allocs: HashMap<PodUid, Alloc>,
    /// Reservations released recently: an echo of the pod's old annotations must not revive them.
    released: Tombstones,
    lock: Option<PodUid>,
    /// `lock.is_some()` and the reservations not yet bound, published for Filter.
    binds: Arc<BindState>,
    /// Binds waiting for `lock`, in arrival order.
    waiters: VecDeque<(PodUid, oneshot::Sender<()>)>,
    seq: u64,
    scratch: Scratch,
    registered: bool,
    /// The last node object seen, to re-read devices when vendor health changes.
    last_view: Option<Arc<crate::model::pod::NodeView>>,
    unhealthy: Vec<crate::model::VendorId>,
    /// No two registered devices share an id, so a charge's device position can be resolved once.
    unique_ids: bool,
    /// Type words, namespaces and QoS names of the pods seen here, which their records name by
    /// place (only ever added to).
    words: Vec<Arc<str>>,
    /// When each reservation lapses, by (deadline on tokio's clock, which the timers run on and
    /// tests pause; sequence number), with one timer armed for the earliest: actix polls every
    /// timer an actor holds on each of its messages, so a timer per reservation would make every
    /// message cost one poll per reservation of the last TTL.
    expiries: BTreeMap<(tokio::time::Instant, u64), PodUid>,
    armed: Option<(tokio::time::Instant, actix::SpawnHandle)>,
    /// The shapes filtered lately, answered ahead on each new snapshot (`Prefill`).
    shapes: Arc<super::shapes::Shapes>,
    /// This actor's own address, weak so it never keeps the actor alive, for `Prefill`.
    me: Option<actix::WeakAddr<NodeActor>>,
    prefill_queued: bool,
    /// NUMA refits held until their annotation write settles.
    refits: HashMap<PodUid, refit::PendingRefit>,
}

impl Actor for NodeActor {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Context<Self>) {
        self.me = Some(ctx.address().downgrade());
    }
}

impl NodeActor {
    pub fn new(
        name: NodeName,
        vendors: Arc<Vendors>,
        snap: Arc<SnapCell>,
        placements: Arc<DashMap<PodUid, NodeName>>,
        quota: Option<SharedQuota>,
        binds: Arc<BindState>,
        shapes: Arc<super::shapes::Shapes>,
    ) -> NodeActor {
        let extras = vec![None; vendors.len()];
        NodeActor {
            name,
            vendors,
            snap,
            placements,
            quota,
            base: Vec::new(),
            extras,
            unusable: None,
            allocs: HashMap::new(),
            released: Tombstones::default(),
            lock: None,
            binds,
            waiters: VecDeque::new(),
            seq: 0,
            scratch: Scratch::default(),
            registered: false,
            last_view: None,
            unhealthy: Vec::new(),
            unique_ids: true,
            words: Vec::new(),
            expiries: BTreeMap::new(),
            armed: None,
            shapes,
            me: None,
            prefill_queued: false,
            refits: HashMap::new(),
        }
    }

    /// The empty snapshot a node starts with, before its actor has read any device.
    pub fn initial_snapshot(name: &NodeName, vendors: &Vendors) -> Arc<NodeSnapshot> {
        Arc::new(NodeSnapshot::new(name.clone(), Vec::new(), vec![None; vendors.len()]))
    }

    /// Writes a pod's record against this node's devices and words.
    fn record(
        &mut self,
        namespace: &str,
        name: &str,
        devices: &PodDevices,
        layout: &Layout,
        tags: &[accounting::Tag],
    ) -> Record {
        Record::write(namespace, name, devices, layout, tags, &self.base, &mut self.words)
    }

    /// Reads an allocation's record. One that does not read is a bug in this actor: it is logged,
    /// and the caller refuses what needed it rather than guess.
    fn parts(&self, uid: &PodUid, a: &Alloc) -> Option<Parts> {
        let parts = a.record.read(&self.base, &self.words);
        if parts.is_none() {
            tracing::error!(node = %self.name, pod = %uid, bytes = a.record.len(), "allocation record does not read");
        }
        parts
    }

    /// Takes an allocation's usage out of its namespace's quota.
    fn unquote(&self, q: &SharedQuota, uid: &PodUid, a: &Alloc) {
        match a.record.namespace(&self.words) {
            Some(ns) => q.remove(&ns, &super::quota::usage_of(&a.charges)),
            // Left counted: the namespace then has less room, never more.
            None => {
                tracing::error!(node = %self.name, pod = %uid, "allocation record does not read; its quota stays taken")
            }
        }
    }

    /// Usage = registered devices + every allocation, built from scratch so it can never drift.
    fn usage(&self, skip: Option<&PodUid>) -> Vec<DeviceUsage> {
        let mut devs = self.base.clone();
        for (uid, a) in &self.allocs {
            if Some(uid) != skip {
                accounting::apply(&mut devs, &a.charges);
            }
        }
        devs
    }

    fn snapshot_of(&self, devices: Vec<DeviceUsage>) -> NodeSnapshot {
        NodeSnapshot {
            name: self.name.clone(),
            devices,
            extras: self.extras.clone(),
            unusable: self.unusable.clone(),
            generation: self.seq,
            memo: crate::sched::FitMemo::default(),
        }
    }

    fn publish(&mut self) {
        let devs = self.usage(None);
        self.publish_devices(devs);
    }

    /// Publishes usage the caller already built (a reservation applied on top of the snapshot).
    fn publish_devices(&mut self, devs: Vec<DeviceUsage>) {
        self.count_pending();
        self.next_seq();
        self.snap.store(Arc::new(self.snapshot_of(devs)));
        if !self.prefill_queued
            && let Some(me) = self.me.as_ref().and_then(actix::WeakAddr::upgrade)
        {
            self.prefill_queued = true;
            me.do_send(Prefill);
        }
    }

    fn count_pending(&self) {
        let n = self.allocs.values().filter(|a| matches!(a.state, State::Reserved { .. })).count();
        self.binds.pending.store(u32::try_from(n).unwrap_or(u32::MAX), Ordering::Relaxed);
    }

    fn current(&self) -> Arc<NodeSnapshot> {
        self.snap.load()
    }

    fn collapse(&self, devices: &PodDevices, layout: &Layout, tags: &[accounting::Tag]) -> Vec<Charge> {
        self.collapse_held(devices, &[], layout, tags)
    }

    /// `collapse`, plus placements the pod holds beyond its entries.
    fn collapse_held(
        &self,
        devices: &PodDevices,
        held: &[(crate::model::VendorId, crate::model::DeviceUuid, crate::model::device::MigSlot)],
        layout: &Layout,
        tags: &[accounting::Tag],
    ) -> Vec<Charge> {
        let base = &self.base;
        let info = |u: &crate::model::DeviceUuid| base.iter().find(|d| d.info.id == *u).map(|d| d.info.clone());
        let mut charges = accounting::collapse(devices, layout, &self.vendors, &info);
        accounting::add_held(&mut charges, held);
        accounting::tag(&mut charges, tags);
        place(&self.base, self.unique_ids, &mut charges);
        // Kept with the allocation for as long as the pod holds its devices.
        charges.shrink_to_fit();
        charges
    }

    /// Applies `charges` on top of the current usage and checks every touched device stays
    /// within its count, memory and cores: the invariant, checked on every reservation accepted.
    /// Applies `charges` on top of `devs` (usage without the pod) and checks every touched device
    /// stays within its count, memory and cores. `Ok` holds the resulting usage.
    fn validate(&self, mut devs: Vec<DeviceUsage>, charges: &[Charge]) -> Result<Vec<DeviceUsage>, Rejection> {
        let um = accounting::apply(&mut devs, charges);
        if !um.0.is_empty() {
            let mut t = Tally::new(self.base.len());
            t.add(Reason::CardUuidMismatch, um.0.len());
            return Err(Rejection::Devices(t));
        }
        for (pos, d) in devs.iter().enumerate() {
            let touched = charges.iter().any(|c| c.uuid == d.info.id && c.vendor == d.vendor);
            if touched && !d.within_capacity() {
                // `d` already carries this pod's charges: the figures are the pod's own request and
                // what the device had free before it, as the filter's reasons give them.
                let (mut slots, mut mem, mut cores) = (0u32, 0u64, 0u32);
                for c in charges.iter().filter(|c| c.uuid == d.info.id && c.vendor == d.vendor) {
                    slots = slots.saturating_add(c.slots.max(1));
                    mem += c.mem.get();
                    cores = cores.saturating_add(c.cores);
                }
                let mut t = Tally::new(self.base.len());
                if d.used_mem > d.info.devmem {
                    let free = d.info.devmem.get().saturating_sub(d.used_mem.get().saturating_sub(mem));
                    t.reject(Reason::CardInsufficientMemory, pos, Need::Memory { requested: mem, free });
                } else if d.used_cores > d.info.devcore {
                    let free = d.info.devcore.saturating_sub(d.used_cores.saturating_sub(cores));
                    t.reject(Reason::CardInsufficientCore, pos, Need::Cores { requested: cores, free });
                } else {
                    let used = d.used.saturating_sub(slots);
                    t.reject(Reason::CardTimeSlicingExhausted, pos, Need::Slots { used, count: d.info.count });
                }
                return Err(Rejection::Devices(t));
            }
        }
        Ok(devs)
    }

    fn layout_of(pod: &PodRequest) -> Layout {
        Layout { n_init: pod.n_init, sidecars: pod.sidecars.clone(), init_released: false }
    }

    /// The next number of the one counter reservations and published snapshots share.
    fn next_seq(&mut self) -> NonZeroU64 {
        self.seq += 1;
        NonZeroU64::new(self.seq).unwrap_or(NonZeroU64::MAX)
    }

    /// The reservation `seq` of `uid` lapses after `ttl` unless something replaced it by then.
    fn arm_ttl(&mut self, uid: PodUid, seq: u64, ttl: Duration, ctx: &mut Context<Self>) {
        self.expiries.insert((tokio::time::Instant::now() + ttl, seq), uid);
        self.arm_timer(ctx);
    }

    /// Keeps one timer armed, for the earliest deadline.
    fn arm_timer(&mut self, ctx: &mut Context<Self>) {
        let Some(&(at, _)) = self.expiries.keys().next() else { return };
        if self.armed.is_some_and(|(armed, _)| armed <= at) {
            return;
        }
        if let Some((_, h)) = self.armed.take() {
            ctx.cancel_future(h);
        }
        let h = ctx.run_later(at.saturating_duration_since(tokio::time::Instant::now()), |act, ctx| {
            act.armed = None;
            act.expire_due(ctx);
        });
        self.armed = Some((at, h));
    }

    /// Drops every reservation whose deadline passed and that is still the one armed (sequence
    /// number), then arms the timer for the next.
    fn expire_due(&mut self, ctx: &mut Context<Self>) {
        let now = tokio::time::Instant::now();
        let mut changed = false;
        while let Some(e) = self.expiries.first_entry() {
            if e.key().0 > now {
                break;
            }
            let ((_, seq), uid) = e.remove_entry();
            let expired = matches!(self.allocs.get(&uid), Some(Alloc { state: State::Reserved { seq: g }, .. }) if g.get() == seq);
            if expired {
                tracing::debug!(node = %self.name, pod = %uid, "reservation expired without a bind");
                crate::metrics::reservation_expired();
                self.drop_alloc(&uid);
                changed = true;
            }
        }
        if changed {
            self.publish();
        }
        self.arm_timer(ctx);
    }

    fn drop_alloc(&mut self, uid: &PodUid) -> bool {
        let removed = self.allocs.remove(uid);
        self.refits.remove(uid);
        if let (Some(a), Some(q)) = (&removed, &self.quota) {
            self.unquote(q, uid, a);
        }
        let removed = removed.is_some();
        if removed {
            self.placements.remove_if(uid, |_, n| *n == self.name);
            self.released.bury(uid, Instant::now());
            if self.lock.as_ref() == Some(uid) {
                self.pass_lock();
            }
        }
        removed
    }
}

impl Handler<Filter> for NodeActor {
    type Result = MessageResult<Filter>;
    fn handle(&mut self, msg: Filter, _: &mut Context<Self>) -> Self::Result {
        // The published snapshot already counts live reservations, so Filter sees what Reserve will.
        let snap = self.current();
        let view = self.quota.as_ref().and_then(|q| q.view(&msg.pod.namespace));
        let quota: &dyn QuotaCheck = match &view {
            Some(v) => v,
            None => &NoQuota,
        };
        MessageResult(fit::fit_pod_score(&snap, &msg.pod, &self.vendors, quota, &mut self.scratch))
    }
}

impl Handler<Reserve> for NodeActor {
    type Result = MessageResult<Reserve>;
    fn handle(&mut self, msg: Reserve, ctx: &mut Context<Self>) -> Self::Result {
        let uid = msg.pod.uid.clone();
        if let Some(a @ Alloc { state: State::Committed, .. }) = self.allocs.get(&uid) {
            // Already bound here: reserving again changes nothing.
            return MessageResult(match self.parts(&uid, a) {
                Some(p) => Ok(Reserved { devices: p.devices, score: 0.0 }),
                None => Err(Rejection::NodeUnusable),
            });
        }
        let layout = Self::layout_of(&msg.pod);
        // Re-run the fit against usage without this pod's own earlier reservation (the published
        // snapshot is exactly that when the pod holds nothing here).
        let snap = if self.allocs.contains_key(&uid) {
            Arc::new(self.snapshot_of(self.usage(Some(&uid))))
        } else {
            self.current()
        };
        let (devices, score) = match msg.exact {
            Some(d) => (d, 0.0),
            None => {
                // The pod's own earlier reservation must not count against its quota either.
                let own = self.allocs.get(&uid).map(|a| super::quota::usage_of(&a.charges));
                let view = self.quota.as_ref().and_then(|q| q.view(&msg.pod.namespace)).map(|v| match &own {
                    Some(u) => v.without(&msg.pod.namespace, u),
                    None => v,
                });
                let quota: &dyn QuotaCheck = match &view {
                    Some(v) => v,
                    None => &NoQuota,
                };
                match fit::fit_pod(&snap, &msg.pod, &self.vendors, quota, &mut self.scratch) {
                    Ok(score) => (self.scratch.result.clone(), score),
                    Err(r) => return MessageResult(Err(r)),
                }
            }
        };
        let tags = accounting::tags_of(&self.vendors, &msg.pod.annotations, |v| devices.vendor(v).is_some());
        let charges = self.collapse(&devices, &layout, &tags);
        let after = match self.validate(snap.devices.clone(), &charges) {
            Ok(d) => d,
            Err(r) => return MessageResult(Err(r)),
        };
        // Quota is checked and taken in one step per namespace, so reservations racing on other
        // nodes cannot exceed a limit together.
        if let Some(q) = &self.quota {
            let old = self.allocs.get(&uid).map(|a| super::quota::usage_of(&a.charges));
            if !q.try_replace(&msg.pod.namespace, old.as_ref(), &super::quota::usage_of(&charges)) {
                let mut t = Tally::new(self.base.len());
                t.add(Reason::ResourceQuotaNotFit, 1);
                return MessageResult(Err(Rejection::Devices(t)));
            }
        }
        let seq = self.next_seq();
        let record = self.record(&msg.pod.namespace, &msg.pod.name, &devices, &layout, &tags);
        self.allocs
            .insert(uid.clone(), Alloc { state: State::Reserved { seq }, charges: charges.into_boxed_slice(), record });
        // A refit held for the pod is superseded: its settlement finds nothing to settle.
        self.refits.remove(&uid);
        self.released.forget(&uid);
        self.placements.insert(uid.clone(), self.name.clone());
        self.arm_ttl(uid, seq.get(), msg.ttl, ctx);
        self.publish_devices(after);
        MessageResult(Ok(Reserved { devices, score }))
    }
}

impl Handler<Prefill> for NodeActor {
    type Result = ();
    /// Answers of a shape depend on the snapshot and the shape alone, and no namespace quota
    /// applies to the shapes noted, so these are the answers a filter would compute.
    fn handle(&mut self, _: Prefill, _: &mut Context<Self>) {
        self.prefill_queued = false;
        let snap = self.current();
        let (vendors, scratch) = (&self.vendors, &mut self.scratch);
        for req in self.shapes.recent() {
            let _ = snap.memo.answer(req.fit_key, || fit::fit_pod_score(&snap, &req, vendors, &NoQuota, scratch));
        }
    }
}

impl Handler<Commit> for NodeActor {
    type Result = Result<PodDevices, NotReserved>;
    fn handle(&mut self, msg: Commit, _: &mut Context<Self>) -> Self::Result {
        let a = self.allocs.get(&msg.uid).ok_or(NotReserved)?;
        // Read before committing: a bind must not go ahead without the devices it writes.
        let devices = self.parts(&msg.uid, a).ok_or(NotReserved)?.devices;
        if let Some(a) = self.allocs.get_mut(&msg.uid) {
            a.state = State::Committed;
        }
        self.count_pending();
        Ok(devices)
    }
}

impl Handler<Release> for NodeActor {
    type Result = bool;
    fn handle(&mut self, msg: Release, _: &mut Context<Self>) -> bool {
        let committed = matches!(self.allocs.get(&msg.uid), Some(Alloc { state: State::Committed, .. }));
        if msg.only_reserved && committed {
            return false;
        }
        let removed = self.drop_alloc(&msg.uid);
        if removed {
            self.publish();
        }
        removed
    }
}

impl Handler<Settle> for NodeActor {
    type Result = ();
    fn handle(&mut self, _: Settle, _: &mut Context<Self>) {}
}

impl Handler<Report> for NodeActor {
    type Result = MessageResult<Report>;
    fn handle(&mut self, _: Report, _: &mut Context<Self>) -> Self::Result {
        let mut allocs: Vec<AllocReport> = self
            .allocs
            .iter()
            .map(|(uid, a)| {
                // A record that does not read is reported under the uid, holding nothing listed.
                let p = self.parts(uid, a);
                let (namespace, name, devices) = match p {
                    Some(p) => (p.namespace, p.name, p.devices),
                    None => (Arc::from(""), Arc::from(uid.as_str()), PodDevices::default()),
                };
                AllocReport {
                    uid: uid.clone(),
                    namespace,
                    name,
                    state: match a.state {
                        State::Reserved { .. } => AllocState::Reserved,
                        State::Committed => AllocState::Committed,
                    },
                    devices,
                }
            })
            .collect();
        allocs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        MessageResult(NodeReport {
            name: self.name.clone(),
            snapshot: self.current(),
            allocs,
            locked_by: self.lock.clone(),
        })
    }
}

mod cluster;
mod lock;
mod record;
mod refit;
mod tombstones;

#[cfg(test)]
mod tests;
