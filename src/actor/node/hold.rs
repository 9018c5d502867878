//! A node's hold for a preemptor: the devices its victims are freeing are kept from every other
//! pod until the preemptor reserves there, the hold is dropped, or it lapses. A hold only takes
//! capacity away from other pods (their view shows the held devices full); it never adds any and
//! never enters the ledger, so the node's usage and the invariant stay the ledger's alone.

use std::sync::Arc;

use crate::model::{DeviceUsage, DeviceUuid, PodUid};

use super::NodeCore;
pub use crate::actor::messages::Hold;

/// Shows each held device full: no slot, memory or core of it is left for another pod, so a fit
/// passes it over and a reservation charging it fails validation.
pub fn mask(devs: &mut [DeviceUsage], held: &[DeviceUuid]) {
    for d in devs.iter_mut().filter(|d| held.contains(&d.info.id)) {
        d.used = d.used.max(d.cap.count);
        d.used_mem = d.used_mem.max(d.cap.devmem);
        d.used_cores = d.used_cores.max(d.cap.devcore);
    }
}

impl NodeCore {
    /// Whether `uid` is the pod this node holds devices for.
    pub(super) fn holds_for(&self, uid: &PodUid) -> bool {
        self.hold.as_ref().is_some_and(|h| h.uid == *uid)
    }

    /// `devs` as a pod other than the holder sees them.
    pub(super) fn seen_by_others(&self, mut devs: Vec<DeviceUsage>) -> Vec<DeviceUsage> {
        if let Some(h) = &self.hold {
            mask(&mut devs, &h.devices);
        }
        devs
    }

    /// Holds `hold.devices` for `hold.uid`; false when the node already holds for another pod
    /// (one preemption at a time per node keeps two preemptors from counting the same victims).
    pub(super) fn set_hold(&mut self, hold: Arc<Hold>) -> bool {
        if self.hold.as_ref().is_some_and(|h| h.uid != hold.uid) {
            return false;
        }
        self.hold = Some(hold);
        self.publish();
        true
    }

    /// Drops the hold for `uid` (only hold `id` when given); whether there was one.
    pub(super) fn drop_hold(&mut self, uid: &PodUid, id: Option<u64>) -> bool {
        if !self.hold.as_ref().is_some_and(|h| h.uid == *uid && id.is_none_or(|id| h.id == id)) {
            return false;
        }
        self.hold = None;
        self.publish();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{gpu, node, vendors};

    #[test]
    fn a_held_device_shows_full_and_nothing_else_changes() {
        let snap = node("n")
            .gpu(gpu("GPU-a", 16384).used(2, 6000, 30))
            .gpu(gpu("GPU-b", 16384).used(1, 1000, 0))
            .snapshot(&vendors());
        let mut devs = snap.devices.clone();
        mask(&mut devs, &[DeviceUuid::new("GPU-a")]);
        let a = &devs[0];
        assert_eq!((a.used, a.used_mem.get(), a.used_cores), (a.cap.count, 16384, a.cap.devcore));
        let b = &devs[1];
        assert_eq!((b.used, b.used_mem.get(), b.used_cores), (1, 1000, 0), "an unheld device is as it was");
        // Never less than it was: a device over its count (a bound pod's truth) stays over.
        let mut over = snap.devices.clone();
        over[0].used = over[0].cap.count + 3;
        mask(&mut over, &[DeviceUuid::new("GPU-a")]);
        assert_eq!(over[0].used, over[0].cap.count + 3);
    }
}
