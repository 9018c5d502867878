//! `Record`: what a node actor keeps of one pod beyond its state and charges (the pod's
//! namespace and name, its decoded device entries, its containers' layout and its task tags) as
//! one buffer. Only reports, commits, a bind of a pod already bound and a change of the node's
//! devices read it, a few times in a pod's life; rebuilding usage reads the charges alone.
//!
//! Written against the node: a device id as its position in the node's device list, type words,
//! namespaces and QoS names as their place among the node's shared words (which only grow), so a
//! usual pod takes 17 bytes beside the text of its name, where its decoded form took six
//! allocations and some 300 bytes.
//! A change of the node's devices reads every record against the old list and writes it again
//! against the new one.

use std::sync::Arc;

use crate::model::bytes::{Reader, Writer};
use crate::model::device::{MigPlacement, MigSlot, TaskClass};
use crate::model::{ContainerDevice, DeviceUsage, DeviceUuid, MemMiB, PodDevices, VendorId};
use crate::sched::accounting::{Layout, Tag};

/// Words one node keeps for sharing at most (a node sees few distinct ones).
const WORDS_KEPT: usize = 64;

/// A pod's allocation as the node actor's reports, commits and recomputations need it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Parts {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub devices: PodDevices,
    pub layout: Layout,
    pub tags: Vec<Tag>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Record(Box<[u8]>);

impl Record {
    /// Writes the pod against the node's devices (`base`) and shared `words`, which it may add to.
    pub fn write(
        namespace: &str,
        name: &str,
        devices: &PodDevices,
        layout: &Layout,
        tags: &[Tag],
        base: &[DeviceUsage],
        words: &mut Vec<Arc<str>>,
    ) -> Record {
        let mut w = Writer(Vec::with_capacity(32));
        word(&mut w, namespace, words);
        w.str(name);
        w.list(&devices.0, |w, (vendor, containers)| {
            w.byte(vendor.0);
            w.list(containers, |w, entries| {
                w.list(entries, |w, d| entry(w, d, base, words));
            });
        });
        w.varint(layout.n_init as u64);
        w.list(&layout.sidecars, |w, s| w.byte(u8::from(*s)));
        w.byte(u8::from(layout.init_released));
        w.list(tags, |w, (vendor, class, qos)| {
            w.byte(vendor.0);
            w.byte(match class {
                TaskClass::Plain => 0,
                TaskClass::Online => 1,
                TaskClass::Offline => 2,
            });
            match qos {
                None => w.byte(0),
                Some(q) => {
                    w.byte(1);
                    word(w, q, words);
                }
            }
        });
        Record(w.0.into_boxed_slice())
    }

    /// A record that never reads: what an allocation keeps once its own record stopped reading.
    pub fn unreadable() -> Record {
        Record(Box::default())
    }

    /// Reads the record back against the `base` and `words` it was written with (or written
    /// again with); `None` when it does not read, which only a bug can cause.
    pub fn read(&self, base: &[DeviceUsage], words: &[Arc<str>]) -> Option<Parts> {
        let mut r = Reader(&self.0);
        let namespace = read_word(&mut r, words)?;
        let name = Arc::from(r.str()?);
        let devices = PodDevices(r.list(|r| {
            let vendor = VendorId(r.byte()?);
            let containers = r.list(|r| r.list(|r| read_entry(r, base, words)))?;
            Some((vendor, containers))
        })?);
        let n_init = usize::try_from(r.varint()?).ok()?;
        let sidecars = r.list(|r| flag(r.byte()?))?;
        let init_released = flag(r.byte()?)?;
        let tags = r.list(|r| {
            let vendor = VendorId(r.byte()?);
            let class = match r.byte()? {
                0 => TaskClass::Plain,
                1 => TaskClass::Online,
                2 => TaskClass::Offline,
                _ => return None,
            };
            let qos = match r.byte()? {
                0 => None,
                1 => Some(read_word(r, words)?),
                _ => return None,
            };
            Some((vendor, class, qos))
        })?;
        if !r.is_empty() {
            return None;
        }
        Some(Parts { namespace, name, devices, layout: Layout { n_init, sidecars, init_released }, tags })
    }

    /// The pod's namespace alone, read without the rest.
    pub fn namespace(&self, words: &[Arc<str>]) -> Option<Arc<str>> {
        read_word(&mut Reader(&self.0), words)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// A word's place among `words` plus one (added when new and there is room), or 0 and the text.
fn word(w: &mut Writer, text: &str, words: &mut Vec<Arc<str>>) {
    let at = words.iter().position(|k| **k == *text).or_else(|| {
        (words.len() < WORDS_KEPT).then(|| {
            words.push(Arc::from(text));
            words.len() - 1
        })
    });
    match at {
        Some(i) => w.varint(i as u64 + 1),
        None => {
            w.byte(0);
            w.str(text);
        }
    }
}

fn read_word(r: &mut Reader<'_>, words: &[Arc<str>]) -> Option<Arc<str>> {
    match r.varint()? {
        0 => r.str().map(Arc::from),
        i => words.get(usize::try_from(i - 1).ok()?).cloned(),
    }
}

fn entry(w: &mut Writer, d: &ContainerDevice, base: &[DeviceUsage], words: &mut Vec<Arc<str>>) {
    match base.iter().position(|b| b.info.id == d.uuid) {
        Some(p) => w.varint(p as u64 + 1),
        None => {
            w.byte(0);
            w.str(d.uuid.as_str());
        }
    }
    word(w, &d.ty, words);
    w.varint(d.usedmem.get());
    w.varint(u64::from(d.usedcores));
    w.varint(u64::from(d.idx));
    match &d.mig {
        None => w.byte(0),
        Some(m) => {
            w.byte(1);
            w.str(&m.profile);
            w.varint(u64::from(m.placement.start));
            w.varint(u64::from(m.placement.size));
        }
    }
}

fn read_entry(r: &mut Reader<'_>, base: &[DeviceUsage], words: &[Arc<str>]) -> Option<ContainerDevice> {
    let uuid = match r.varint()? {
        0 => DeviceUuid::new(r.str()?),
        p => base.get(usize::try_from(p - 1).ok()?)?.info.id.clone(),
    };
    let ty = read_word(r, words)?;
    let usedmem = MemMiB(r.varint()?);
    let usedcores = r.u32()?;
    let idx = r.u32()?;
    let mig = match r.byte()? {
        0 => None,
        1 => {
            let profile = Arc::from(r.str()?);
            let (start, size) = (r.u32()?, r.u32()?);
            Some(MigSlot { profile, placement: MigPlacement { start, size } })
        }
        _ => return None,
    };
    Some(ContainerDevice { uuid, ty, usedmem, usedcores, idx, mig })
}

fn flag(b: u8) -> Option<bool> {
    match b {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
