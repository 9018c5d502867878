//! What the cluster tells a node: its registration and vendor health, its removal, and the pods
//! observed on it (how a restart rebuilds the node's usage from the pods' annotations).

use std::sync::Arc;
use std::time::Instant;

use crate::actor::messages::{PodObserved, Registration};
use crate::actor::node::core::{NodeCore, place};
use crate::actor::node::record::{Parts, Record};
use crate::actor::node::tombstones::TOMBSTONE_AGE;
use crate::actor::quota::usage_of;
use crate::model::pod::NodeView;
use crate::model::{DeviceUuid, PodUid, VendorId};
use crate::sched::accounting;

impl NodeCore {
    /// Reads the node's devices (without the vendors found dead) and publishes them.
    pub(super) fn register(&mut self, node: Arc<NodeView>) -> Registration {
        let mut nd = self.cfg.vendors.discover(&node);
        nd.devices.retain(|d| !self.devices.unhealthy.contains(&d.vendor));
        self.devices.last_view = Some(node);
        if let Some((id, key, err)) = nd.malformed.first() {
            let reason = format!("{} annotation {key} is malformed: {err}", self.cfg.vendors.get(*id).name());
            let changed = self.devices.unusable.as_deref() != Some(reason.as_str());
            self.devices.unusable = Some(Arc::from(reason.as_str()));
            if changed {
                self.publish();
            }
            return Registration::Malformed { reason };
        }
        let same = self.devices.registered
            && self.devices.unusable.is_none()
            && nd.devices.len() == self.devices.base.len()
            && nd.devices.iter().zip(self.devices.base.iter()).all(|(a, b)| a.info == b.info && a.vendor == b.vendor);
        let extras_changed = nd.extras.len() != self.devices.extras.len() || !self.devices.registered;
        self.devices.registered = true;
        self.devices.unusable = None;
        let n = nd.devices.len();
        if !same {
            // Records name devices by position: read them against the old list, write them again
            // against the new one. One that does not read (logged) keeps its state and charges,
            // and its record is emptied: left as it was it could read against the new list,
            // naming devices the pod never had.
            let mut parts: Vec<(PodUid, Parts)> = Vec::new();
            let mut unreadable = Vec::new();
            for (u, a) in self.ledger.iter() {
                match self.parts(u, a) {
                    Some(p) => parts.push((u.clone(), p)),
                    None => unreadable.push(u.clone()),
                }
            }
            self.devices.base = nd.devices;
            self.devices.unique_ids = {
                let mut ids: Vec<(&DeviceUuid, VendorId)> =
                    self.devices.base.iter().map(|d| (&d.info.id, d.vendor)).collect();
                ids.sort();
                ids.windows(2).all(|w| w[0] != w[1])
            };
            // Charges may depend on the devices (slices per entry), so recompute them. Those of a
            // record that does not read cannot be: they are kept, placed on the new list.
            for u in unreadable {
                if let Some(a) = self.ledger.get_mut(&u) {
                    place(&self.devices.base, self.devices.unique_ids, &mut a.charges);
                    a.record = Record::unreadable();
                }
            }
            for (u, p) in parts {
                let held = self.refits.contains_key(&u);
                let record = self.record(&p.namespace, &p.name, &p.devices, &p.layout, &p.tags);
                // A held refit keeps covering both its old and new devices: its pending records
                // named the old list, so the move is dropped and its settlement finds nothing; the
                // pod's next observation gives its devices.
                let charges = (!held).then(|| self.collapse(&p.devices, &p.layout, &p.tags).into_boxed_slice());
                if let Some(a) = self.ledger.get_mut(&u) {
                    match charges {
                        Some(c) => a.charges = c,
                        None => place(&self.devices.base, self.devices.unique_ids, &mut a.charges),
                    }
                    a.record = record;
                }
            }
            self.refits.clear();
        }
        // Node extras (cordon list, pair scores) are re-read on every change of the node, so
        // Filter always sees the current annotations.
        self.devices.extras = nd.extras;
        self.ledger.forget_released_older_than(TOMBSTONE_AGE, Instant::now());
        self.publish();
        Registration::Ok { devices: n, changed: !same || extras_changed }
    }

    /// Reads the devices again without the vendors now found dead.
    pub(super) fn vendor_health(&mut self, unhealthy: Vec<VendorId>) {
        if unhealthy != self.devices.unhealthy {
            self.devices.unhealthy = unhealthy;
            if let Some(v) = self.devices.last_view.clone() {
                self.register(v);
            }
        }
    }

    /// The node left the cluster: what its pods held leaves the quota and the placements.
    pub(super) fn remove_node(&mut self) {
        for (uid, a) in self.ledger.clear() {
            self.cfg.placements.remove_if(&uid, |_, n| *n == self.cfg.name);
            if let Some(q) = &self.cfg.quota {
                self.unquote(q, &uid, &a);
            }
        }
        self.stopped = true;
    }

    /// A pod the cluster shows on this node, bound or not: what it holds per its annotations.
    pub(super) fn observe(&mut self, msg: PodObserved) {
        let charges = self.collapse_held(&msg.devices, &msg.held, &msg.layout, &msg.tags);
        if self.refits.contains_key(&msg.uid) {
            // A refit of the pod is being written: its allocation keeps holding both the old and
            // the new devices until the write settles, which then takes this as the truth if it
            // failed.
            let record = self.record(&msg.namespace, &msg.name, &msg.devices, &msg.layout, &msg.tags);
            if let Some(p) = self.refits.get_mut(&msg.uid) {
                p.observe(charges.into_boxed_slice(), record);
            }
            return;
        }
        if charges.is_empty() && msg.devices.is_empty() {
            return;
        }
        if !msg.bound && !self.ledger.contains(&msg.uid) {
            // An unbound pod we released (or that expired) must not come back from an echo of
            // its annotations; one we never saw (a restart) is held provisionally.
            if self.ledger.was_released(&msg.uid) {
                return;
            }
            // Held only if it fits beside what is held already: after a restart the annotations
            // of pods whose reservation had lapsed can name devices another pod got since, and a
            // bind of a held pod is not checked again.
            if accounting::validate(self.usage(None), &charges).is_err() {
                tracing::debug!(node = %self.cfg.name, pod = %msg.name, "unbound pod's annotated devices are taken; not held");
                return;
            }
        }
        if let Some(q) = &self.cfg.quota {
            // A pod the cluster shows holds its devices whatever the limits say.
            let old = self.ledger.get(&msg.uid).map(|a| usage_of(&a.charges));
            q.replace(&msg.namespace, old.as_ref(), &usage_of(&charges));
        }
        let record = self.record(&msg.namespace, &msg.name, &msg.devices, &msg.layout, &msg.tags);
        let deadline = tokio::time::Instant::now() + msg.ttl;
        self.ledger.hold(&msg.uid, msg.bound, (charges.into_boxed_slice(), record), deadline);
        self.cfg.placements.insert(msg.uid, self.cfg.name.clone());
        self.publish();
    }
}
