//! The claims a node keeps: capacity (slots, memory and cores per device) set aside for a pod
//! that is not placed yet, each keyed by what will use it (`sched::claim::ClaimKey`), each with
//! an expiry. A node carries any number. Every other pod sees the node with all of them taken
//! (the published snapshot counts them); the claim's own pod sees it without its own. Claims
//! never enter the ledger, so the node's usage stays the ledger's, and the node accepts one only
//! when it fits beside the ledger and every other claim (the pods it assumes gone left out), so
//! no two claims can count the same free capacity.

use tokio::time::Instant as Deadline;

use crate::model::{DeviceUsage, PodUid};
use crate::sched::accounting::{self, Charge};
use crate::sched::claim::ClaimKey;
use crate::sched::report::ClaimReport;

/// One claim as the node keeps it.
#[derive(Clone, Debug)]
pub struct Claim {
    pub key: ClaimKey,
    /// Tells this claim from a later one with the same key (a lapse gives back only its own).
    pub id: u64,
    /// What the devices the claim's pod is to take charge each device.
    pub charges: Box<[Charge]>,
    pub deadline: Deadline,
}

/// The node's claims, in the order they were taken, and the group members' claims lent to their
/// pod's reservation: a member's claim comes back when its reservation is let go unbound (its
/// bind failed, it was filtered again, the reservation lapsed), so the member finds its place
/// again and the group is never left short by one failed bind.
#[derive(Default)]
pub struct Claims(Vec<Claim>, Vec<(PodUid, Claim)>);

impl Claims {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Lends the claim for `key` to `uid`'s reservation made from it: a group member's claim is
    /// kept aside to come back, any other claim ends.
    pub(super) fn lend(&mut self, key: &ClaimKey, uid: &PodUid) {
        let Some(claim) = self.take(key, None) else { return };
        if matches!(claim.key, ClaimKey::Member { .. }) {
            self.1.retain(|(u, _)| u != uid);
            self.1.push((uid.clone(), claim));
        }
    }

    /// The claim lent to `uid`'s reservation comes back (before its deadline only); whether it did.
    pub(super) fn restore(&mut self, uid: &PodUid, now: Deadline) -> bool {
        let Some(at) = self.1.iter().position(|(u, _)| u == uid) else { return false };
        let (_, claim) = self.1.remove(at);
        if claim.deadline <= now {
            return false;
        }
        self.put(claim);
        true
    }

    /// The pod is gone: what was lent to it ends.
    pub(super) fn forget_lent(&mut self, uid: &PodUid) {
        self.1.retain(|(u, _)| u != uid);
    }

    pub fn get(&self, key: &ClaimKey) -> Option<&Claim> {
        self.0.iter().find(|c| c.key == *key)
    }

    /// `devs` with every claim but `except`'s charged.
    pub fn charged(&self, mut devs: Vec<DeviceUsage>, except: Option<&ClaimKey>) -> Vec<DeviceUsage> {
        for c in self.0.iter().filter(|c| Some(&c.key) != except) {
            accounting::apply(&mut devs, &c.charges);
        }
        devs
    }

    /// Keeps `claim`, replacing one with the same key.
    pub(super) fn put(&mut self, claim: Claim) {
        self.0.retain(|c| c.key != claim.key);
        self.0.push(claim);
    }

    /// Gives back the claim for `key` (only claim `id` when given); whether there was one. A
    /// claim lent to a reservation with that key will not come back either.
    pub(super) fn take(&mut self, key: &ClaimKey, id: Option<u64>) -> Option<Claim> {
        let matches = |c: &Claim| c.key == *key && id.is_none_or(|id| c.id == id);
        self.1.retain(|(_, c)| !matches(c));
        let at = self.0.iter().position(matches)?;
        Some(self.0.remove(at))
    }

    /// Gives back every claim whose deadline passed.
    pub(super) fn due(&mut self, now: Deadline) -> Vec<Claim> {
        self.1.retain(|(_, c)| c.deadline > now);
        let (due, kept) = std::mem::take(&mut self.0).into_iter().partition(|c| c.deadline <= now);
        self.0 = kept;
        due
    }

    pub fn earliest(&self) -> Option<Deadline> {
        self.0.iter().map(|c| c.deadline).min()
    }

    pub fn reports(&self) -> Vec<ClaimReport> {
        self.0.iter().map(|c| ClaimReport { key: c.key.clone(), charges: c.charges.to_vec() }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DeviceUuid;
    use crate::testing::{charge, gpu, node, vendors};

    fn claim(key: &str, id: u64, charges: Vec<Charge>) -> Claim {
        Claim { key: ClaimKey::Pod(PodUid::new(key)), id, charges: charges.into(), deadline: Deadline::now() }
    }

    #[test]
    fn claims_charge_every_pod_but_their_own() {
        let snap = node("n").gpu(gpu("GPU-a", 16384).used(1, 6000, 30)).gpu(gpu("GPU-b", 16384)).snapshot(&vendors());
        let mut claims = Claims::default();
        claims.put(claim("p", 1, vec![charge("GPU-a", 1, 4000, 20)]));
        claims.put(claim("q", 2, vec![charge("GPU-b", 1, 16384, 100)]));
        let others = claims.charged(snap.devices.clone(), None);
        assert_eq!((others[0].used, others[0].used_mem.get(), others[0].used_cores), (2, 10000, 50));
        assert_eq!(others[1].used_mem.get(), 16384);
        // The claim's own pod sees the node without it, and with the others.
        let own = claims.charged(snap.devices.clone(), Some(&ClaimKey::Pod(PodUid::new("p"))));
        assert_eq!((own[0].used_mem.get(), own[1].used_mem.get()), (6000, 16384));
        // A claim with the same key replaces the old; a lapse of the old id gives nothing back.
        claims.put(claim("p", 3, vec![charge("GPU-a", 1, 1000, 0)]));
        assert_eq!(claims.take(&ClaimKey::Pod(PodUid::new("p")), Some(1)).map(|c| c.id), None);
        assert_eq!(claims.take(&ClaimKey::Pod(PodUid::new("p")), Some(3)).map(|c| c.id), Some(3));
        assert!(claims.get(&ClaimKey::Pod(PodUid::new("q"))).is_some());
        assert_eq!(claims.reports()[0].charges[0].uuid, DeviceUuid::new("GPU-b"));
    }

    #[test]
    fn claims_lapse_at_their_deadline_only() {
        let mut claims = Claims::default();
        let mut late = claim("late", 1, Vec::new());
        late.deadline = Deadline::now() + std::time::Duration::from_secs(60);
        claims.put(late);
        claims.put(claim("now", 2, Vec::new()));
        let due = claims.due(Deadline::now());
        assert_eq!(due.iter().map(|c| c.id).collect::<Vec<_>>(), [2]);
        assert_eq!(claims.earliest(), claims.get(&ClaimKey::Pod(PodUid::new("late"))).map(|c| c.deadline));
    }
}
