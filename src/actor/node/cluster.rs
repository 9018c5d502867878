//! What the cluster tells a node actor: its registration and vendor health, its removal, and the
//! pods observed on it (how a restart rebuilds the node's usage from the pods' annotations).

use super::*;

impl NodeActor {
    /// Reads the node's devices (without the vendors found dead) and publishes them.
    pub(super) fn register(&mut self, node: Arc<crate::model::pod::NodeView>) -> Registration {
        let mut nd = self.vendors.discover(&node);
        nd.devices.retain(|d| !self.unhealthy.contains(&d.vendor));
        self.last_view = Some(node);
        if let Some((id, key, err)) = nd.malformed.first() {
            let reason = format!("{} annotation {key} is malformed: {err}", self.vendors.get(*id).name());
            let changed = self.unusable.as_deref() != Some(reason.as_str());
            self.unusable = Some(Arc::from(reason.as_str()));
            if changed {
                self.publish();
            }
            return Registration::Malformed { reason };
        }
        let same = self.registered
            && self.unusable.is_none()
            && nd.devices.len() == self.base.len()
            && nd.devices.iter().zip(self.base.iter()).all(|(a, b)| a.info == b.info && a.vendor == b.vendor);
        let extras_changed = nd.extras.len() != self.extras.len() || !self.registered;
        self.registered = true;
        self.unusable = None;
        let n = nd.devices.len();
        if !same {
            // Records name devices by position: read them against the old list, write them again
            // against the new one. One that does not read (logged) keeps its state and charges,
            // and its record is emptied: left as it was it could read against the new list,
            // naming devices the pod never had.
            let mut parts: Vec<(PodUid, Parts)> = Vec::with_capacity(self.allocs.len());
            let mut unreadable = Vec::new();
            for (u, a) in &self.allocs {
                match self.parts(u, a) {
                    Some(p) => parts.push((u.clone(), p)),
                    None => unreadable.push(u.clone()),
                }
            }
            self.base = nd.devices;
            self.unique_ids = {
                let mut ids: Vec<(&crate::model::DeviceUuid, crate::model::VendorId)> =
                    self.base.iter().map(|d| (&d.info.id, d.vendor)).collect();
                ids.sort();
                ids.windows(2).all(|w| w[0] != w[1])
            };
            // Charges may depend on the devices (slices per entry), so recompute them. Those of a
            // record that does not read cannot be: they are kept, placed on the new list.
            for u in unreadable {
                if let Some(a) = self.allocs.get_mut(&u) {
                    place(&self.base, self.unique_ids, &mut a.charges);
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
                if let Some(a) = self.allocs.get_mut(&u) {
                    match charges {
                        Some(c) => a.charges = c,
                        None => place(&self.base, self.unique_ids, &mut a.charges),
                    }
                    a.record = record;
                }
            }
            self.refits.clear();
        }
        // Node extras (cordon list, pair scores) are re-read on every change of the node, so
        // Filter always sees the current annotations.
        self.extras = nd.extras;
        self.released.forget_older_than(TOMBSTONE_AGE, Instant::now());
        self.publish();
        Registration::Ok { devices: n, changed: !same || extras_changed }
    }
}

impl Handler<NodeRegistered> for NodeActor {
    type Result = MessageResult<NodeRegistered>;
    fn handle(&mut self, msg: NodeRegistered, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.register(msg.node))
    }
}

impl Handler<VendorHealth> for NodeActor {
    type Result = ();
    fn handle(&mut self, msg: VendorHealth, _: &mut Context<Self>) {
        if msg.unhealthy != self.unhealthy {
            self.unhealthy = msg.unhealthy;
            if let Some(v) = self.last_view.clone() {
                self.register(v);
            }
        }
    }
}

impl Handler<NodeRemoved> for NodeActor {
    type Result = ();
    fn handle(&mut self, _: NodeRemoved, ctx: &mut Context<Self>) {
        for (uid, a) in &self.allocs {
            self.placements.remove_if(uid, |_, n| *n == self.name);
            if let Some(q) = &self.quota {
                self.unquote(q, uid, a);
            }
        }
        self.allocs.clear();
        actix::ActorContext::stop(ctx);
    }
}

impl Handler<PodObserved> for NodeActor {
    type Result = ();
    fn handle(&mut self, msg: PodObserved, ctx: &mut Context<Self>) {
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
        let state = match self.allocs.get(&msg.uid).map(|a| a.state) {
            Some(State::Committed) => State::Committed,
            _ if msg.bound => State::Committed,
            Some(s @ State::Reserved { .. }) => s,
            None => {
                // An unbound pod we released (or that expired) must not come back from an echo of
                // its annotations; one we never saw (a restart) is held provisionally.
                if self.released.holds(&msg.uid) {
                    return;
                }
                // Held only if it fits beside what is held already: after a restart the
                // annotations of pods whose reservation had lapsed can name devices another pod
                // got since, and a bind of a held pod is not checked again.
                if self.validate(self.usage(None), &charges).is_err() {
                    tracing::debug!(node = %self.name, pod = %msg.name, "unbound pod's annotated devices are taken; not held");
                    return;
                }
                let seq = self.next_seq();
                self.arm_ttl(msg.uid.clone(), seq.get(), msg.ttl, ctx);
                State::Reserved { seq }
            }
        };
        if charges.is_empty() && msg.devices.is_empty() {
            return;
        }
        if let Some(q) = &self.quota {
            // A pod the cluster shows holds its devices whatever the limits say.
            let old = self.allocs.get(&msg.uid).map(|a| crate::actor::quota::usage_of(&a.charges));
            q.replace(&msg.namespace, old.as_ref(), &crate::actor::quota::usage_of(&charges));
        }
        let record = self.record(&msg.namespace, &msg.name, &msg.devices, &msg.layout, &msg.tags);
        self.allocs.insert(msg.uid.clone(), Alloc { state, charges: charges.into_boxed_slice(), record });
        self.released.forget(&msg.uid);
        self.placements.insert(msg.uid, self.name.clone());
        self.publish();
    }
}

impl Handler<PodDeleted> for NodeActor {
    type Result = bool;
    fn handle(&mut self, msg: PodDeleted, _: &mut Context<Self>) -> bool {
        let removed = self.drop_alloc(&msg.uid);
        if removed {
            self.publish();
        }
        removed
    }
}
