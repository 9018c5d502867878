//! From a pod's per-container allocation to what it holds on each device, and from those holdings
//! to device usage. Plain init containers count as a peak (each beside the native sidecars
//! declared before it) until they have all succeeded, regular containers and native sidecars as
//! a sum, as HAMi does (docs/compat.md, "Native sidecars").

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::devices::Vendors;
use crate::model::device::{MigSlot, TaskClass};
use crate::model::reason::{Need, Reason, Rejection, Tally};
use crate::model::{ContainerDevices, DeviceInfo, DeviceUsage, DeviceUuid, MemMiB, PodDevices, VendorId};

/// What one pod holds on one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Charge {
    pub uuid: DeviceUuid,
    pub vendor: VendorId,
    pub slots: u32,
    pub mem: MemMiB,
    pub cores: u32,
    pub mig: Vec<MigSlot>,
    pub class: TaskClass,
    pub qos: Option<Arc<str>>,
    /// Where the device sits in the node's list, when the caller resolved it (a hint: `apply`
    /// checks the id there before trusting it).
    pub pos: Option<u16>,
    /// Only MIG placements the pod still holds beyond its device entries: no slot, memory or
    /// cores.
    pub placements_only: bool,
}

/// How a pod's containers are laid out: which leading entries are init containers and which of
/// those are sidecars, and whether the init containers have all finished.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub n_init: usize,
    pub sidecars: Vec<bool>,
    /// Once every init container has succeeded, only regular containers (and sidecars) hold devices.
    pub init_released: bool,
}

/// The layout of a pod without init containers, the usual one.
pub static NO_INIT: Layout = Layout { n_init: 0, sidecars: Vec::new(), init_released: false };

impl Layout {
    fn is_plain_init(&self, i: usize) -> bool {
        i < self.n_init && !self.sidecars.get(i).copied().unwrap_or(false)
    }
}

#[derive(Default, Clone, Copy)]
struct Acc {
    slots: u32,
    mem: u64,
    cores: u32,
}

/// Collapses a pod's devices into one charge per device (sorted by vendor, then UUID).
/// `effective = max(peak over init containers, sum over regular containers and sidecars)`; a plain
/// init container's peak includes the sidecars started before it. Slots are at least 1.
pub fn collapse(
    devices: &PodDevices,
    layout: &Layout,
    vendors: &Vendors,
    info: &dyn Fn(&DeviceUuid) -> Option<Arc<DeviceInfo>>,
) -> Vec<Charge> {
    let mut out = Vec::new();
    for (v, containers) in &devices.0 {
        let vendor = vendors.get(*v);
        let mut app: BTreeMap<&DeviceUuid, Acc> = BTreeMap::new();
        let mut peak: BTreeMap<&DeviceUuid, Acc> = BTreeMap::new();
        let mut side: BTreeMap<&DeviceUuid, Acc> = BTreeMap::new();
        let mut mig: BTreeMap<&DeviceUuid, Vec<MigSlot>> = BTreeMap::new();
        for (i, c) in containers.iter().enumerate() {
            let plain_init = layout.is_plain_init(i);
            if plain_init && layout.init_released {
                continue;
            }
            let mut this: BTreeMap<&DeviceUuid, Acc> = BTreeMap::new();
            for d in c {
                let slots = vendor.entry_slots(d, info(&d.uuid).as_deref());
                let a = this.entry(&d.uuid).or_default();
                if plain_init {
                    // HAMi takes an init container's entries on one device entry by entry, the
                    // largest of each: several MIG instances of one init container on one GPU
                    // count as one (their placements stay taken all the same).
                    a.slots = a.slots.max(slots);
                    a.mem = a.mem.max(d.usedmem.get());
                    a.cores = a.cores.max(d.usedcores);
                } else {
                    a.slots = a.slots.saturating_add(slots);
                    a.mem = a.mem.saturating_add(d.usedmem.get());
                    a.cores = a.cores.saturating_add(d.usedcores);
                }
                if let Some(s) = &d.mig {
                    mig.entry(&d.uuid).or_default().push(s.clone());
                }
            }
            if plain_init {
                for (u, a) in this {
                    let s = side.get(u).copied().unwrap_or_default();
                    let p = peak.entry(u).or_default();
                    p.slots = p.slots.max(a.slots.saturating_add(s.slots));
                    p.mem = p.mem.max(a.mem.saturating_add(s.mem));
                    p.cores = p.cores.max(a.cores.saturating_add(s.cores));
                }
            } else {
                let is_sidecar = i < layout.n_init;
                for (u, a) in this {
                    let t = app.entry(u).or_default();
                    t.slots = t.slots.saturating_add(a.slots);
                    t.mem = t.mem.saturating_add(a.mem);
                    t.cores = t.cores.saturating_add(a.cores);
                    if is_sidecar {
                        let s = side.entry(u).or_default();
                        s.slots = s.slots.saturating_add(a.slots);
                        s.mem = s.mem.saturating_add(a.mem);
                        s.cores = s.cores.saturating_add(a.cores);
                    }
                }
            }
        }
        let mut uuids: Vec<&DeviceUuid> = app.keys().chain(peak.keys()).copied().collect();
        uuids.sort();
        uuids.dedup();
        for u in uuids {
            let a = app.get(u).copied().unwrap_or_default();
            let p = peak.get(u).copied().unwrap_or_default();
            out.push(Charge {
                uuid: u.clone(),
                vendor: *v,
                slots: a.slots.max(p.slots).max(1),
                mem: MemMiB(a.mem.max(p.mem)),
                cores: a.cores.max(p.cores),
                mig: mig.remove(u).unwrap_or_default(),
                class: TaskClass::Plain,
                qos: None,
                pos: None,
                placements_only: false,
            });
        }
    }
    out.sort_by(|a, b| (a.vendor, &a.uuid).cmp(&(b.vendor, &b.uuid)));
    out
}

/// Adds MIG placements a pod holds beyond its device entries (reservations in
/// `hami.io/vgpu-mig-allocations` that no entry consumed): onto the charge of their GPU, or as
/// a charge of placements alone. They keep those placements taken, as HAMi restores them.
pub fn add_held(charges: &mut Vec<Charge>, held: &[(VendorId, DeviceUuid, MigSlot)]) {
    if held.is_empty() {
        return;
    }
    for (v, uuid, slot) in held {
        match charges.iter_mut().find(|c| c.vendor == *v && c.uuid == *uuid) {
            Some(c) => c.mig.push(slot.clone()),
            None => charges.push(Charge {
                uuid: uuid.clone(),
                vendor: *v,
                slots: 0,
                mem: MemMiB::ZERO,
                cores: 0,
                mig: vec![slot.clone()],
                class: TaskClass::Plain,
                qos: None,
                pos: None,
                placements_only: true,
            }),
        }
    }
    charges.sort_by(|a, b| (a.vendor, &a.uuid).cmp(&(b.vendor, &b.uuid)));
}

/// The task class and QoS of a pod per vendor (Metax sGPU co-locates by them).
pub type Tags = Vec<Tag>;
pub type Tag = (VendorId, TaskClass, Option<Arc<str>>);

/// Asks every vendor the pod holds devices of (`holds`) what its part of the pod's allocation is
/// tagged with. Tags only ever apply to charges of their own vendor, so the others are not kept
/// (they would be kept for every running pod).
pub fn tags_of(
    vendors: &Vendors,
    annotations: &crate::model::pod::Annotations,
    holds: impl Fn(VendorId) -> bool,
) -> Tags {
    vendors
        .iter()
        .filter(|(id, _)| holds(*id))
        .filter_map(|(id, v)| v.task_tag(annotations).map(|(c, q)| (id, c, q)))
        .collect()
}

/// Sets each charge's class and QoS from the pod's tags.
pub fn tag(charges: &mut [Charge], tags: &[Tag]) {
    for c in charges.iter_mut() {
        if let Some((_, class, qos)) = tags.iter().find(|(v, _, _)| *v == c.vendor) {
            c.class = *class;
            c.qos.clone_from(qos);
        }
    }
}

/// Per device, the larger of two charge lists of one pod: what covers the pod before and after
/// a move whose outcome is not known yet (sorted by vendor, then UUID).
pub fn cover(a: &[Charge], b: &[Charge]) -> Vec<Charge> {
    let mut out: Vec<Charge> = a.to_vec();
    for c in b {
        match out.iter_mut().find(|o| o.vendor == c.vendor && o.uuid == c.uuid) {
            Some(o) => {
                o.slots = o.slots.max(c.slots);
                o.mem = o.mem.max(c.mem);
                o.cores = o.cores.max(c.cores);
                if c.mig.len() > o.mig.len() {
                    o.mig.clone_from(&c.mig);
                }
                o.placements_only &= c.placements_only;
            }
            None => out.push(c.clone()),
        }
    }
    out.sort_by(|x, y| (x.vendor, &x.uuid).cmp(&(y.vendor, &y.uuid)));
    out
}

/// Devices whose usage a charge could not be applied to (unknown UUID), for logging.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unmatched(pub Vec<DeviceUuid>);

/// Adds charges to device usage. Every device whose id equals the charge's UUID is charged (ids
/// are unique per node in practice). A MIG instance on a non-MIG device, or a charge without an
/// instance on a MIG device, marks that device unhealthy in this view, as HAMi does.
pub fn apply(devs: &mut [DeviceUsage], charges: &[Charge]) -> Unmatched {
    let mut unmatched = Unmatched::default();
    for c in charges {
        let matches = |d: &DeviceUsage| d.vendor == c.vendor && d.info.id == c.uuid;
        // A resolved position spares the scan (ids are unique per node in practice; the caller
        // resolves positions only then).
        if let Some(p) = c.pos.map(usize::from)
            && devs.get(p).is_some_and(matches)
        {
            charge_device(&mut devs[p], c);
            continue;
        }
        let mut hit = false;
        for d in devs.iter_mut().filter(|d| matches(d)) {
            hit = true;
            charge_device(d, c);
        }
        if !hit {
            unmatched.0.push(c.uuid.clone());
        }
    }
    unmatched
}

fn charge_device(d: &mut DeviceUsage, c: &Charge) {
    if c.placements_only {
        // HAMi marks a non-MIG device named by a MIG reservation unhealthy in its view.
        if d.info.is_mig() {
            d.mig_used.extend(c.mig.iter().cloned());
        } else {
            d.health = false;
        }
        return;
    }
    d.used = d.used.saturating_add(c.slots.max(1));
    d.used_mem += c.mem;
    d.used_cores = d.used_cores.saturating_add(c.cores);
    if d.info.is_mig() {
        if c.mig.is_empty() {
            d.health = false;
        }
        d.mig_used.extend(c.mig.iter().cloned());
    } else if !c.mig.is_empty() {
        d.health = false;
    }
    let k = &mut d.classes[c.class as usize];
    *k = k.saturating_add(1);
    if c.qos.is_some() {
        d.qos.clone_from(&c.qos);
    }
}

/// Maps a vendor's decoded entries onto the pod's containers. HAMi writes NVIDIA and AMD lists
/// without the empty entries of device-less containers; when the list is shorter than the
/// container list but its non-empty entries match the containers that request the vendor
/// one-to-one, they are placed on those containers. Otherwise the list is taken positionally.
pub fn align(mut list: Vec<ContainerDevices>, requesting: &[bool]) -> Vec<ContainerDevices> {
    while list.last().is_some_and(|c| c.is_empty()) {
        list.pop();
    }
    let n = requesting.len();
    if list.len() >= n {
        return list;
    }
    let non_empty: Vec<ContainerDevices> = list.iter().filter(|c| !c.is_empty()).cloned().collect();
    let wanted = requesting.iter().filter(|r| **r).count();
    if non_empty.len() == wanted && wanted > 0 {
        let mut it = non_empty.into_iter();
        return requesting
            .iter()
            .map(|r| if *r { it.next().unwrap_or_default() } else { ContainerDevices::new() })
            .collect();
    }
    list
}

/// Applies `charges` on top of `devs` (a node's usage without the pod) and checks every device
/// they touch stays within its count, memory and cores: the invariant, checked on every
/// reservation a node accepts. `Ok` holds the resulting usage; a rejection gives the figures the
/// filter's reasons give (the pod's own request and what the device had free before it).
pub fn validate(mut devs: Vec<DeviceUsage>, charges: &[Charge]) -> Result<Vec<DeviceUsage>, Rejection> {
    let n = devs.len();
    let um = apply(&mut devs, charges);
    if !um.0.is_empty() {
        let mut t = Tally::new(n);
        t.add(Reason::CardUuidMismatch, um.0.len());
        return Err(Rejection::Devices(t));
    }
    for (pos, d) in devs.iter().enumerate() {
        let on_d = |c: &&Charge| c.uuid == d.info.id && c.vendor == d.vendor;
        if d.within_capacity() || !charges.iter().any(|c| on_d(&c)) {
            continue;
        }
        let (mut slots, mut mem, mut cores) = (0u32, 0u64, 0u32);
        for c in charges.iter().filter(on_d) {
            slots = slots.saturating_add(c.slots.max(1));
            mem += c.mem.get();
            cores = cores.saturating_add(c.cores);
        }
        let mut t = Tally::new(n);
        if d.used_mem > d.info.devmem {
            let free = d.info.devmem.get().saturating_sub(d.used_mem.get().saturating_sub(mem));
            t.reject(Reason::CardInsufficientMemory, pos, Need::Memory { requested: mem, free });
        } else if d.used_cores > d.info.devcore && !d.info.is_mig() {
            let free = d.info.devcore.saturating_sub(d.used_cores.saturating_sub(cores));
            t.reject(Reason::CardInsufficientCore, pos, Need::Cores { requested: cores, free });
        } else {
            let used = d.used.saturating_sub(slots);
            t.reject(Reason::CardTimeSlicingExhausted, pos, Need::Slots { used, count: d.info.count });
        }
        return Err(Rejection::Devices(t));
    }
    Ok(devs)
}

#[cfg(test)]
mod tests;
