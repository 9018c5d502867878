//! A node's ledger: every allocation on the node (reserved or committed), when each reservation
//! lapses, the tombstones of those released lately, and the words the allocation records share.
//! Pure bookkeeping with no clock, actor or cluster of its own: the node actor drives it and
//! owns its side effects (quota, placements, snapshots, timers).
//!
//! ```text
//! Free ──try_reserve──▶ Reserved ──commit──▶ Committed ──remove──▶ Free
//!                          └──remove / due──▶ Free        (hold: what the cluster shows)
//! ```
//!
//! The invariant lives here: `try_reserve` accepts a reservation only if every device it touches
//! stays within its count, memory and cores on top of everything else held.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::Instant as Deadline;

use crate::actor::node::record::{Parts, Record};
use crate::actor::node::tombstones::Tombstones;
use crate::model::{DeviceUsage, PodDevices, PodUid};
use crate::sched::Rejection;
use crate::sched::accounting::{self, Charge, Layout, Tag};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Expires unless committed; `seq` tells a stale deadline from the current reservation. Never
    /// zero, so the state fits one word.
    Reserved {
        seq: NonZeroU64,
    },
    Committed,
}

/// One pod's allocation on the node. A node of a large cluster holds dozens, so everything but
/// what rebuilding usage reads (the charges) is one compact buffer ([`Record`]).
#[derive(Clone, Debug)]
pub(super) struct Alloc {
    pub state: State,
    pub charges: Box<[Charge]>,
    pub record: Record,
}

// What a running pod costs each node actor rests on this size (docs/performance.md).
const _: () = assert!(std::mem::size_of::<Alloc>() == 40);

/// What a record is written from.
pub(super) struct Written<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub devices: &'a PodDevices,
    pub layout: &'a Layout,
    pub tags: &'a [Tag],
}

#[derive(Default)]
pub(super) struct Ledger {
    allocs: HashMap<PodUid, Alloc>,
    /// When each reservation lapses, by (deadline on tokio's clock, which the timers run on and
    /// tests pause; sequence number): the node arms one timer for the earliest.
    expiries: BTreeMap<(Deadline, u64), PodUid>,
    /// Reservations released recently: an echo of the pod's old annotations must not revive them.
    released: Tombstones,
    /// The one counter reservations and published snapshots share.
    seq: u64,
    /// Type words, namespaces and QoS names of the pods seen here, which records name by place
    /// (only ever added to).
    words: Vec<Arc<str>>,
}

/// What a reservation asks of the ledger: for which pod, the charges, the pod's annotations as
/// written, and until when it holds unless committed.
pub struct Reservation<'a> {
    pub uid: &'a PodUid,
    pub charges: Vec<Charge>,
    pub pod: &'a Written<'a>,
    pub deadline: Deadline,
}

impl Ledger {
    pub fn get(&self, uid: &PodUid) -> Option<&Alloc> {
        self.allocs.get(uid)
    }
    pub fn get_mut(&mut self, uid: &PodUid) -> Option<&mut Alloc> {
        self.allocs.get_mut(uid)
    }
    pub fn contains(&self, uid: &PodUid) -> bool {
        self.allocs.contains_key(uid)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&PodUid, &Alloc)> {
        self.allocs.iter()
    }
    pub fn is_committed(&self, uid: &PodUid) -> bool {
        matches!(self.allocs.get(uid), Some(Alloc { state: State::Committed, .. }))
    }
    /// How many reservations wait for their bind.
    pub fn reserved(&self) -> usize {
        self.allocs.values().filter(|a| matches!(a.state, State::Reserved { .. })).count()
    }

    /// Usage = registered devices + every allocation but those of `skip`, built from scratch so
    /// it can never drift.
    pub fn usage(&self, base: &[DeviceUsage], skip: &[PodUid]) -> Vec<DeviceUsage> {
        let mut devs = base.to_vec();
        for (uid, a) in &self.allocs {
            if !skip.contains(uid) {
                accounting::apply(&mut devs, &a.charges);
            }
        }
        devs
    }

    /// The next number of the counter; the last one given is the node's snapshot generation.
    pub fn next_seq(&mut self) -> NonZeroU64 {
        self.seq += 1;
        NonZeroU64::new(self.seq).unwrap_or(NonZeroU64::MAX)
    }
    pub fn generation(&self) -> u64 {
        self.seq
    }

    /// Writes a pod's record against the node's devices and these words.
    pub fn record(&mut self, base: &[DeviceUsage], w: &Written) -> Record {
        Record::write(w.namespace, w.name, w.devices, w.layout, w.tags, base, &mut self.words)
    }
    /// Reads an allocation's record; `None` only through a bug (the caller logs and refuses).
    pub fn parts(&self, base: &[DeviceUsage], a: &Alloc) -> Option<Parts> {
        a.record.read(base, &self.words)
    }
    pub fn namespace(&self, a: &Alloc) -> Option<Arc<str>> {
        a.record.namespace(&self.words)
    }

    /// Reserves `r.charges` for `r.uid` until `r.deadline` if they fit on `without` (the node's
    /// usage without whatever the pod holds) and `admit` (the namespace quota, given what the pod
    /// held before) agrees. Replaces what the pod held. `Ok` holds the node's usage with the pod.
    pub fn try_reserve(
        &mut self,
        base: &[DeviceUsage],
        without: Vec<DeviceUsage>,
        r: Reservation<'_>,
        admit: impl FnOnce(Option<&[Charge]>, &[Charge]) -> Result<(), Rejection>,
    ) -> Result<Vec<DeviceUsage>, Rejection> {
        let Reservation { uid, charges, pod, deadline } = r;
        let after = accounting::validate(without, &charges)?;
        admit(self.allocs.get(uid).map(|a| &*a.charges), &charges)?;
        let seq = self.next_seq();
        let record = self.record(base, pod);
        self.allocs.insert(uid.clone(), Alloc { state: State::Reserved { seq }, charges: charges.into(), record });
        self.expiries.insert((deadline, seq.get()), uid.clone());
        self.released.forget(uid);
        Ok(after)
    }

    /// Holds what the cluster shows a pod holds, unchecked: a bound pod's devices are the truth.
    /// An unbound pod is held as a reservation until `deadline`.
    pub fn hold(&mut self, uid: &PodUid, committed: bool, alloc: (Box<[Charge]>, Record), deadline: Deadline) {
        let state = match self.allocs.get(uid).map(|a| a.state) {
            _ if committed => State::Committed,
            Some(s) => s,
            None => {
                let seq = self.next_seq();
                self.expiries.insert((deadline, seq.get()), uid.clone());
                State::Reserved { seq }
            }
        };
        let (charges, record) = alloc;
        self.allocs.insert(uid.clone(), Alloc { state, charges, record });
        self.released.forget(uid);
    }

    /// Makes a reservation binding (it no longer lapses); false when there is none.
    pub fn commit(&mut self, uid: &PodUid) -> bool {
        match self.allocs.get_mut(uid) {
            Some(a) => {
                a.state = State::Committed;
                true
            }
            None => false,
        }
    }

    /// Drops a pod's allocation and buries its tombstone.
    pub fn remove(&mut self, uid: &PodUid, now: Instant) -> Option<Alloc> {
        let a = self.allocs.remove(uid)?;
        self.released.bury(uid, now);
        Some(a)
    }

    /// Drops every allocation (the node left the cluster), returning them.
    pub fn clear(&mut self) -> HashMap<PodUid, Alloc> {
        self.expiries.clear();
        std::mem::take(&mut self.allocs)
    }

    /// The reservations whose deadline passed by `now` and that are still the ones that deadline
    /// was set for; the caller removes them.
    pub fn due(&mut self, now: Deadline) -> Vec<PodUid> {
        let mut due = Vec::new();
        while let Some(e) = self.expiries.first_entry() {
            if e.key().0 > now {
                break;
            }
            let ((_, seq), uid) = e.remove_entry();
            if matches!(self.allocs.get(&uid), Some(Alloc { state: State::Reserved { seq: s }, .. }) if s.get() == seq)
            {
                due.push(uid);
            }
        }
        due
    }

    /// The earliest deadline still set.
    pub fn next_deadline(&self) -> Option<Deadline> {
        self.expiries.keys().next().map(|(at, _)| *at)
    }

    /// Whether `uid` was released lately (its echo must not come back).
    pub fn was_released(&self, uid: &PodUid) -> bool {
        self.released.holds(uid)
    }
    pub fn forget_released_older_than(&mut self, age: Duration, now: Instant) {
        self.released.forget_older_than(age, now);
    }
}

#[cfg(test)]
mod tests;
