//! `NodeCore`: everything a node actor owns and every change it makes, made of named parts: the
//! node's registered devices, the [`Ledger`] of allocations, the [`BindQueue`], the refits held
//! until their write settles, and the snapshot it publishes after each change. Only the node's
//! actor runs it, one message at a time, or a sender on its own thread while the actor is idle
//! (see `NodeAddr`); either way under the one lock that makes it a single executor.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tokio::time::Instant as Deadline;

use crate::log_writer::RateLimit;

/// Reservation lapses logged at INFO, at most so many a second across the process; the others at
/// DEBUG, counted into the next INFO line.
static EXPIRY_LINES: RateLimit = RateLimit::per_second(20);

use crate::actor::books::read_side::SnapCell;
use crate::actor::books::read_side::{BindState, Placements};
use crate::actor::messages::{AllocReport, AllocState, Holding, NodeReport, NotReserved, Reserve, Reserved, TakeClaim};
use crate::actor::node::bind_queue::BindQueue;
use crate::actor::node::claims::{Claim, Claims};
use crate::actor::node::ledger::{Alloc, Ledger, Reservation, State, Written};
use crate::actor::node::record::{Parts, Record};
use crate::actor::quota::{QuotaBook, usage_of};
use crate::actor::scratch::with_scratch;
use crate::devices::{NoQuota, NodeExtra, QuotaCheck, Vendors};
use crate::model::device::MigSlot;
use crate::model::pod::NodeView;
use crate::model::{DeviceUsage, DeviceUuid, NodeName, PodDevices, PodRequest, PodUid, VendorId};
use crate::sched::accounting::{self, Charge, Layout, Tag};
use crate::sched::claim::ClaimKey;
use crate::sched::reason::{Reason, Tally};
use crate::sched::{NodeSnapshot, Rejection, fit};

/// The namespace quota book, shared by every node actor.
pub type SharedQuota = Arc<QuotaBook>;

/// What a node actor is built from: its name and the engine's parts it writes to.
#[derive(Clone)]
pub struct NodeConfig {
    pub name: NodeName,
    pub vendors: Arc<Vendors>,
    /// Where the actor publishes its snapshots.
    pub snap: Arc<SnapCell>,
    /// Which node holds each pod's allocation (the engine reads it; each actor writes its own).
    pub placements: Arc<Placements>,
    pub quota: Option<SharedQuota>,
    /// What Filter reads of the node's binds.
    pub binds: Arc<BindState>,
    /// Where an expired reservation is told, beside the filters' decisions.
    pub recent: Arc<crate::actor::books::recent::Recent>,
}

/// The node's registered devices as the cluster shows them.
#[derive(Default)]
pub(super) struct Devices {
    pub base: Vec<DeviceUsage>,
    pub extras: Vec<Option<NodeExtra>>,
    /// Why the node's devices cannot be used (a malformed annotation), when they cannot.
    pub unusable: Option<Arc<str>>,
    pub registered: bool,
    /// The last node object seen, to re-read devices when vendor health changes.
    pub last_view: Option<Arc<NodeView>>,
    pub unhealthy: Vec<VendorId>,
    /// No two registered devices share an id, so a charge's device position can be resolved once.
    pub unique_ids: bool,
}

/// Reservation timers fire on ticks this far apart, counted from one instant for every node, so
/// the nodes of an arbiter whose reservations lapse within one tick share one wake-up. Filters
/// whose binds never come (a load test, a scheduler that gave up) each leave a reservation that
/// lapses on its own: without the ticks every lapse would wake an arbiter on the cores the
/// filters need. A reservation lapses at most one tick after its deadline.
pub(super) const EXPIRY_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// The first expiry tick at or after `at`.
pub(super) fn on_tick(at: Deadline) -> Deadline {
    static BASE: std::sync::OnceLock<Deadline> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(Deadline::now);
    let tick = EXPIRY_TICK.as_nanos();
    let nanos = |ticks: u128| std::time::Duration::from_nanos(u64::try_from(ticks * tick).unwrap_or(u64::MAX));
    // Before the base (a test's clock may run behind another's), the ticks count back from it.
    let rounded = match at.checked_duration_since(base) {
        Some(after) => base.checked_add(nanos(after.as_nanos().div_ceil(tick))),
        None => base.checked_sub(nanos(base.duration_since(at).as_nanos() / tick)),
    };
    rounded.filter(|r| *r >= at).unwrap_or(at)
}

/// The one timer a node keeps, for its earliest reservation deadline (on the expiry tick after
/// it): actix polls every timer an actor holds on each of its messages, so a timer per
/// reservation would make every message cost one poll per reservation of the last TTL.
#[derive(Default)]
pub(super) struct Timer {
    /// The tick the armed timer fires at.
    pub at: Option<Deadline>,
    /// A sender that changed the ledger on its own thread asked the actor to arm it.
    pub asked: bool,
}

pub struct NodeCore {
    pub(super) cfg: NodeConfig,
    pub(super) devices: Devices,
    pub(super) ledger: Ledger,
    pub(super) binds: BindQueue,
    /// NUMA refits held until their annotation write settles.
    pub(super) refits: HashMap<PodUid, PendingRefit>,
    pub(super) timer: Timer,
    /// Messages sent through `NodeAddr` that were applied (see `NodeAddr::idle`).
    pub(super) done: u64,
    /// The node left the cluster: its actor stopped, and nothing more is applied.
    pub(super) stopped: bool,
    /// Capacity kept for pods not placed yet (a preemptor whose victims terminate, say).
    pub(super) claims: Claims,
}

/// A move whose annotation write is not settled. The allocation meanwhile holds what covers both
/// the old and the new devices.
pub(super) struct PendingRefit {
    pub(super) old: (Box<[Charge]>, Record),
    pub(super) new: (Box<[Charge]>, Record),
    /// What the cluster showed of the pod meanwhile: the truth if the write fails.
    pub(super) observed: Option<(Box<[Charge]>, Record)>,
}

impl PendingRefit {
    /// Notes an observation of the pod that arrived while its move was held.
    pub(super) fn observe(&mut self, charges: Box<[Charge]>, record: Record) {
        self.observed = Some((charges, record));
    }
}

/// Points each charge at its device in `base`, the node's list: the node's own copy of the id,
/// not one per pod decoded from its annotations, and, when ids are unique, its position, so
/// rebuilding usage costs one lookup per charge, not a scan (a position is only a hint; usage
/// falls back to the id).
pub(super) fn place(base: &[DeviceUsage], unique_ids: bool, charges: &mut [Charge]) {
    for c in charges {
        let pos = base.iter().position(|d| d.vendor == c.vendor && d.info.id == c.uuid);
        if let Some(p) = pos {
            c.uuid = base[p].info.id.clone();
        }
        c.pos = pos.filter(|_| unique_ids).map(|p| p as u16);
    }
}

impl NodeCore {
    pub fn new(cfg: NodeConfig) -> NodeCore {
        let devices = Devices { extras: vec![None; cfg.vendors.len()], unique_ids: true, ..Devices::default() };
        NodeCore {
            binds: BindQueue::new(cfg.binds.clone()),
            cfg,
            devices,
            ledger: Ledger::default(),
            refits: HashMap::new(),
            timer: Timer::default(),
            done: 0,
            stopped: false,
            claims: Claims::default(),
        }
    }

    /// Writes a pod's record against this node's devices and words.
    pub(super) fn record(
        &mut self,
        namespace: &str,
        name: &str,
        devices: &PodDevices,
        layout: &Layout,
        tags: &[Tag],
    ) -> crate::actor::node::record::Record {
        let w = Written { namespace, name, devices, layout, tags };
        self.ledger.record(&self.devices.base, &w)
    }

    /// Reads an allocation's record. One that does not read is a bug in this node: it is logged,
    /// and the caller refuses what needed it rather than guess.
    pub(super) fn parts(&self, uid: &PodUid, a: &Alloc) -> Option<Parts> {
        let parts = self.ledger.parts(&self.devices.base, a);
        if parts.is_none() {
            tracing::error!(node = %self.cfg.name, pod = %uid, bytes = a.record.len(), "allocation record does not read");
        }
        parts
    }

    /// Takes an allocation's usage out of its namespace's quota.
    pub(super) fn unquote(&self, q: &SharedQuota, uid: &PodUid, a: &Alloc) {
        match self.ledger.namespace(a) {
            Some(ns) => q.remove(&ns, &usage_of(&a.charges)),
            // Left counted: the namespace then has less room, never more.
            None => {
                tracing::error!(node = %self.cfg.name, pod = %uid, "allocation record does not read; its quota stays taken")
            }
        }
    }

    /// Usage = registered devices + every allocation (but `skip`'s).
    pub(super) fn usage(&self, skip: Option<&PodUid>) -> Vec<DeviceUsage> {
        self.ledger.usage(&self.devices.base, skip.map(std::slice::from_ref).unwrap_or_default())
    }

    pub(super) fn snapshot_of(&self, devices: Vec<DeviceUsage>) -> NodeSnapshot {
        NodeSnapshot {
            name: self.cfg.name.clone(),
            devices,
            extras: self.devices.extras.clone(),
            unusable: self.devices.unusable.clone(),
            generation: self.ledger.generation(),
        }
    }

    pub(super) fn publish(&mut self) {
        let devs = self.usage(None);
        self.publish_devices(devs);
    }

    /// Publishes usage the caller already built (a reservation applied on top of the snapshot),
    /// as the pods that read it see it: every claim taken.
    pub(super) fn publish_devices(&mut self, devs: Vec<DeviceUsage>) {
        self.count_pending();
        self.ledger.next_seq();
        let devs = self.claims.charged(devs, None);
        self.cfg.snap.store(Arc::new(self.snapshot_of(devs)));
    }

    pub(super) fn count_pending(&self) {
        self.binds.set_pending(self.ledger.reserved());
    }

    pub(super) fn current(&self) -> Arc<NodeSnapshot> {
        self.cfg.snap.load()
    }

    pub(super) fn collapse(&self, devices: &PodDevices, layout: &Layout, tags: &[Tag]) -> Vec<Charge> {
        self.collapse_held(devices, &[], layout, tags)
    }

    /// `collapse`, plus placements the pod holds beyond its entries.
    pub(super) fn collapse_held(
        &self,
        devices: &PodDevices,
        held: &[(VendorId, DeviceUuid, MigSlot)],
        layout: &Layout,
        tags: &[Tag],
    ) -> Vec<Charge> {
        let base = &self.devices.base;
        let info = |u: &DeviceUuid| base.iter().find(|d| d.info.id == *u).map(|d| d.info.clone());
        let mut charges = accounting::collapse(devices, layout, &self.cfg.vendors, &info);
        accounting::add_held(&mut charges, held);
        accounting::tag(&mut charges, tags);
        place(base, self.devices.unique_ids, &mut charges);
        // Kept with the allocation for as long as the pod holds its devices.
        charges.shrink_to_fit();
        charges
    }

    /// What `devices` charge each device of this node when `pod` holds them, as its ledger keeps
    /// them (the pod's layout, its vendors' task tags), with the tags.
    pub(super) fn charges_for(
        &self,
        pod: &PodRequest,
        devices: &PodDevices,
        layout: &Layout,
    ) -> (Vec<Charge>, Vec<Tag>) {
        let tags = accounting::tags_of(&self.cfg.vendors, &pod.annotations, |v| devices.vendor(v).is_some());
        (self.collapse(devices, layout, &tags), tags)
    }

    pub(super) fn layout_of(pod: &PodRequest) -> Layout {
        Layout { n_init: pod.n_init, sidecars: pod.sidecars.clone(), init_released: false }
    }

    /// The earliest deadline of a reservation or a claim.
    pub(super) fn next_deadline(&self) -> Option<Deadline> {
        match (self.ledger.next_deadline(), self.claims.earliest()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the timer must be armed (again) for the earliest deadline.
    pub(super) fn timer_needed(&self) -> bool {
        match (self.next_deadline(), self.timer.at) {
            (Some(next), Some(at)) => on_tick(next) < at,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Drops every reservation whose deadline passed and that is still the one it was set for.
    pub(super) fn expire_due(&mut self) {
        let due = self.ledger.due(Deadline::now());
        for uid in &due {
            crate::metrics::reservation_expired();
            let pod = self
                .ledger
                .get(uid)
                .and_then(|a| self.parts(uid, a))
                .map_or_else(|| uid.to_string(), |p| format!("{}/{}", p.namespace, p.name));
            // An operator asks where a pod's devices went: each lapse is a line of its own, up to
            // a rate that a flood of lapses (filters whose binds never come) cannot exceed.
            match EXPIRY_LINES.admit(crate::clock::unix_now().0) {
                Some(skipped) => {
                    tracing::info!(node = %self.cfg.name, %pod, uid = %uid, outcome = "expired", not_logged_before = skipped, "reservation expired without a bind; its devices are free again")
                }
                None => {
                    tracing::debug!(node = %self.cfg.name, %pod, uid = %uid, outcome = "expired", "reservation expired without a bind")
                }
            }
            self.drop_alloc(uid);
            self.claims.restore(uid, Deadline::now());
            self.cfg.recent.push(crate::actor::books::recent::RecentDecision {
                pod,
                node: Some(self.cfg.name.to_string()),
                outcome: "expired",
                detail: "the reservation lapsed without a bind (--reservation-ttl); its devices are free again".into(),
                unix_s: crate::clock::unix_now().0,
                ..Default::default()
            });
        }
        if !due.is_empty() {
            self.publish();
        }
        for key in self.expire_claims(Deadline::now()) {
            tracing::info!(node = %self.cfg.name, claim = %key, outcome = "expired", "claim lapsed before its pod came; its capacity is free again");
        }
    }

    pub(super) fn drop_alloc(&mut self, uid: &PodUid) -> bool {
        self.refits.remove(uid);
        let Some(a) = self.ledger.remove(uid, Instant::now()) else { return false };
        if let Some(q) = &self.cfg.quota {
            self.unquote(q, uid, &a);
        }
        self.cfg.placements.remove_if(uid, |_, n| *n == self.cfg.name);
        if self.binds.holder() == Some(uid) {
            self.binds.pass();
        }
        true
    }

    /// The pod's fit on the published snapshot, which already counts live reservations, so
    /// Filter sees what Reserve will.
    pub(super) fn filter(&mut self, pod: &PodRequest) -> Result<f32, Rejection> {
        let snap = self.current();
        let view = self.cfg.quota.as_ref().and_then(|q| q.view(&pod.namespace));
        let quota: &dyn QuotaCheck = match &view {
            Some(v) => v,
            None => &NoQuota,
        };
        with_scratch(|s| fit::fit_pod_score(&snap, pod, &self.cfg.vendors, quota, s))
    }

    /// Fits the pod again on live usage (or takes the exact devices asked for), checks the
    /// invariant and the namespace quota, and holds the devices until `msg.ttl` unless committed.
    pub(super) fn reserve(&mut self, msg: Reserve) -> Result<Reserved, Rejection> {
        let uid = &msg.pod.uid;
        if let Some(a) = self.ledger.get(uid).filter(|a| a.state == State::Committed) {
            // Already bound here: reserving again changes nothing.
            return match self.parts(uid, a) {
                Some(p) => Ok(Reserved { devices: p.devices, score: 0.0 }),
                None => Err(Rejection::NodeUnusable),
            };
        }
        let layout = Self::layout_of(&msg.pod);
        // Against usage without this pod's own earlier reservation (the published snapshot is
        // exactly that when the pod holds nothing here), every claim taken but the pod's own.
        let claim = msg.claim.as_ref().filter(|k| self.claims.get(k).is_some());
        let snap = if claim.is_some() || self.ledger.contains(uid) {
            Arc::new(self.snapshot_of(self.claims.charged(self.usage(Some(uid)), claim)))
        } else {
            self.current()
        };
        let (devices, score) = match msg.exact {
            Some(d) => (d, 0.0),
            None => {
                // The pod's own earlier reservation must not count against its quota either.
                let own = self.ledger.get(uid).map(|a| usage_of(&a.charges));
                let ns = &msg.pod.namespace;
                let view = self.cfg.quota.as_ref().and_then(|q| q.view(ns)).map(|v| match &own {
                    Some(u) => v.without(ns, u),
                    None => v,
                });
                let quota: &dyn QuotaCheck = match &view {
                    Some(v) => v,
                    None => &NoQuota,
                };
                let fitted = with_scratch(|s| {
                    fit::fit_pod(&snap, &msg.pod, &self.cfg.vendors, quota, s).map(|score| (s.result.clone(), score))
                });
                fitted?
            }
        };
        let (charges, tags) = self.charges_for(&msg.pod, &devices, &layout);
        let (pod, quota, n) = (&msg.pod, self.cfg.quota.clone(), self.devices.base.len());
        // Quota is checked and taken in one step per namespace, so reservations racing on other
        // nodes cannot exceed a limit together.
        let admit = |old: Option<&[Charge]>, new: &[Charge]| match &quota {
            Some(q) if !q.try_replace(&pod.namespace, old.map(usage_of).as_ref(), &usage_of(new)) => {
                let mut t = Tally::new(n);
                t.add(Reason::ResourceQuotaNotFit, 1);
                Err(Rejection::Devices(t))
            }
            _ => Ok(()),
        };
        let written =
            Written { namespace: &pod.namespace, name: &pod.name, devices: &devices, layout: &layout, tags: &tags };
        let deadline = Deadline::now() + msg.ttl;
        let base = &self.devices.base;
        let r = Reservation { uid, charges, pod: &written, deadline };
        let after = self.ledger.try_reserve(base, snap.devices.clone(), r, admit)?;
        // A refit held for the pod is superseded: its settlement finds nothing to settle.
        self.refits.remove(uid);
        self.cfg.placements.insert(uid.clone(), self.cfg.name.clone());
        if let Some(key) = claim.cloned() {
            // The pod has what was claimed for it: the claim ends with the reservation (a group
            // member's is lent to it, to come back should the reservation go unbound), and the
            // usage published must not count it any more.
            self.claims.lend(&key, uid);
            self.publish();
        } else {
            self.publish_devices(after);
        }
        Ok(Reserved { devices, score })
    }

    /// Makes the reservation binding, returning the devices the bind writes.
    pub(super) fn commit(&mut self, uid: &PodUid) -> Result<PodDevices, NotReserved> {
        let a = self.ledger.get(uid).ok_or(NotReserved)?;
        // Read before committing: a bind must not go ahead without the devices it writes.
        let devices = self.parts(uid, a).ok_or(NotReserved)?.devices;
        self.ledger.commit(uid);
        self.count_pending();
        Ok(devices)
    }

    /// Gives back what `what` names: the one release path of reservations and claims.
    pub(super) fn unreserve(&mut self, what: &Holding) -> bool {
        match what {
            Holding::Reservation { uid, only_reserved } => {
                if *only_reserved && self.ledger.is_committed(uid) {
                    return false;
                }
                let removed = self.drop_alloc(uid);
                // A group member's claim lent to the reservation comes back: the member is
                // placed there again.
                let restored = removed && self.claims.restore(uid, Deadline::now());
                if removed || restored {
                    self.publish();
                }
                removed
            }
            Holding::Claim { key, id } => self.give_back_claim(key, *id),
            Holding::Pod { uid } => {
                let removed = self.drop_alloc(uid);
                self.claims.forget_lent(uid);
                let claimed = self.claims_taken(&ClaimKey::Pod(uid.clone()));
                if removed || claimed {
                    self.publish();
                }
                removed || claimed
            }
        }
    }

    pub(super) fn report(&self) -> NodeReport {
        let mut allocs: Vec<AllocReport> = self
            .ledger
            .iter()
            .map(|(uid, a)| {
                // A record that does not read is reported under the uid, holding nothing listed.
                let (namespace, name, devices) = match self.parts(uid, a) {
                    Some(p) => (p.namespace, p.name, p.devices),
                    None => (Arc::from(""), Arc::from(uid.as_str()), PodDevices::default()),
                };
                let state = match a.state {
                    State::Reserved { .. } => AllocState::Reserved,
                    State::Committed => AllocState::Committed,
                };
                AllocReport { uid: uid.clone(), namespace, name, state, devices, charges: a.charges.to_vec() }
            })
            .collect();
        allocs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        // Readers of a report want the node's usage, and the claims beside it.
        let snapshot =
            if self.claims.is_empty() { self.current() } else { Arc::new(self.snapshot_of(self.usage(None))) };
        let claims = self.claims.reports();
        NodeReport {
            name: self.cfg.name.clone(),
            snapshot,
            allocs,
            locked_by: self.binds.holder().cloned(),
            held_for: claims.iter().find_map(|c| c.key.pod().cloned()),
            claims,
        }
    }
}

impl NodeCore {
    /// Takes the claim `msg` asks for if it fits on the node's usage without the pods of
    /// `msg.gone` and beside every other claim: each touched device within its count, memory and
    /// cores. A claim with the same key is replaced.
    pub(super) fn take_claim(&mut self, msg: TakeClaim) -> Result<(), Rejection> {
        if self.devices.unusable.is_some() {
            return Err(Rejection::NodeUnusable);
        }
        let (charges, _) = self.charges_for(&msg.pod, &msg.devices, &Self::layout_of(&msg.pod));
        let claim = Claim { key: msg.key, id: msg.id, charges: charges.into(), deadline: Deadline::now() + msg.ttl };
        let without_gone = self.ledger.usage(&self.devices.base, &msg.gone);
        let devs = self.claims.charged(without_gone, Some(&claim.key));
        accounting::validate(devs, &claim.charges)?;
        self.claims.put(claim);
        self.publish();
        Ok(())
    }

    /// Gives back the claim for `key` (only claim `id` when given); whether there was one.
    pub(super) fn give_back_claim(&mut self, key: &ClaimKey, id: Option<u64>) -> bool {
        let given = self.claims.take(key, id).is_some();
        if given {
            self.publish();
        }
        given
    }

    /// The claim for `key` is used up (its pod reserved, or is gone); the caller publishes.
    pub(super) fn claims_taken(&mut self, key: &ClaimKey) -> bool {
        self.claims.take(key, None).is_some()
    }

    /// Gives back the claims whose deadline passed, with the keys given back.
    pub(super) fn expire_claims(&mut self, now: Deadline) -> Vec<ClaimKey> {
        let due = self.claims.due(now);
        if !due.is_empty() {
            self.publish();
        }
        due.into_iter().map(|c| c.key).collect()
    }
}
