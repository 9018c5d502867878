//! Pieces of the `Vendor` impls that several vendors share: resource-name lists, the webhook's
//! "count in limits" rule, discovery from a register annotation or from node capacity, and the
//! type and UUID selections a pod makes. Pure, like the vendors; each piece is HAMi's rule for
//! every vendor that uses it, so a vendor that differs keeps its own code.

use crate::model::codec::{self, Selection, TypeList, UuidList};
use crate::model::edit::ContainerEdit;
use crate::model::pod::NodeView;
use crate::model::{DeviceInfo, DeviceUsage, PodView};

use super::Discovery;

/// The resource names that are set, in order (an empty name is a resource the device config
/// switched off).
pub fn names(list: &[&String]) -> Vec<String> {
    list.iter().filter(|n| !n.is_empty()).map(|n| (*n).clone()).collect()
}

/// HAMi's webhook rule for the vendors whose mutation changes nothing: a container is theirs iff
/// its count is in limits.
pub fn count_in_limits(c: &ContainerEdit<'_>, count_name: &str) -> bool {
    !count_name.is_empty() && c.has_limit(count_name)
}

/// The devices a node lists under a register annotation (JSON or colon form), handed to `found`.
pub fn registered(node: &NodeView, key: &str, found: impl FnOnce(Vec<DeviceInfo>) -> Discovery) -> Discovery {
    listed(node, key, codec::decode_node_devices, found)
}

/// The devices a node lists under annotation `key` in the vendor's own format, decoded by
/// `decode` and handed to `found`. An absent annotation or an empty list is no devices; any other
/// decoding error marks the annotation malformed.
pub fn listed(
    node: &NodeView,
    key: &str,
    decode: impl FnOnce(&str) -> codec::Result<Vec<DeviceInfo>>,
    found: impl FnOnce(Vec<DeviceInfo>) -> Discovery,
) -> Discovery {
    let Some(value) = node.annotation(key) else { return Discovery::Absent };
    match decode(value) {
        Ok(devices) if devices.is_empty() => Discovery::Absent,
        Ok(devices) => found(devices),
        Err(codec::Error::NoDevices) => Discovery::Absent,
        Err(error) => Discovery::Malformed { key: key.to_owned(), error },
    }
}

/// The node's capacity of `name` when positive (rounded up as Go's `Value`); `None` for an empty
/// name or a node without that capacity.
pub fn positive_capacity(node: &NodeView, name: &str) -> Option<i64> {
    if name.is_empty() {
        return None;
    }
    Some(node.capacity(name)).filter(|n| *n > 0)
}

/// More devices than any node carries: a capacity this large is a broken node status, and
/// synthesising it would flood the device list (whose positions are 16-bit).
const MAX_SYNTHESISED: i128 = 4096;

/// Devices HAMi builds from a node's core and memory capacity (Cambricon, Mthreads): one per
/// `cores_per_device` units of core capacity, each with `cores_per_device` cores, 100 slots, an
/// equal share of the memory capacity (in `memory_unit` MiB) and the id `<node>-<id_word>-<i>`.
pub struct FromCapacity<'a> {
    pub core_name: &'a str,
    pub memory_name: &'a str,
    pub cores_per_device: u32,
    pub memory_unit: u64,
    pub id_word: &'a str,
    pub word: &'a str,
}

impl FromCapacity<'_> {
    pub fn discover(&self, node: &NodeView) -> Discovery {
        let Some(cores) = positive_capacity(node, self.core_name) else { return Discovery::Absent };
        let mem = if self.memory_name.is_empty() { 0 } else { node.capacity(self.memory_name) };
        let per = i128::from(self.cores_per_device);
        let devmem = i128::from(mem.max(0)) * i128::from(self.memory_unit) * per / i128::from(cores);
        // HAMi stores this in an int32; a capacity that overflows it is not a real node.
        let Ok(devmem) = i32::try_from(devmem) else {
            let why = format!("capacity {mem} gives {devmem} MiB per device, beyond int32");
            return Discovery::Malformed {
                key: self.memory_name.to_owned(),
                error: codec::Error::Field { device: 0, field: "devmem", why },
            };
        };
        // In i128: a capacity near i64::MAX must not overflow the rounding up.
        let n = (i128::from(cores) + per - 1) / per;
        if n > MAX_SYNTHESISED {
            let why = format!("capacity {cores} means more than {MAX_SYNTHESISED} devices");
            return Discovery::Malformed {
                key: self.core_name.to_owned(),
                error: codec::Error::Field { device: 0, field: "count", why },
            };
        }
        let devices = (0..n)
            .map(|i| {
                let id = format!("{}-{}-{i}", node.name(), self.id_word);
                let mem = devmem.unsigned_abs().into();
                DeviceInfo::new(&id, i as u32, 100, mem, self.cores_per_device, self.word)
            })
            .collect();
        Discovery::devices(devices)
    }
}

/// The type and UUID selections a pod's annotations make for one vendor, parsed once per pod.
/// Blank or absent values select every device.
#[derive(Debug, Default)]
pub struct Selections {
    pub types: Selection<TypeList>,
    pub uuids: Selection<UuidList>,
}

impl Selections {
    /// Both selections, from the vendor's use/no-use type keys and use/no-use UUID keys.
    pub fn from_pod(pod: &PodView, types: [&str; 2], uuids: [&str; 2]) -> Selections {
        let a = |k: &str| pod.annotation(k);
        Selections {
            types: Selection::types(a(types[0]), a(types[1])),
            uuids: Selection::uuids(a(uuids[0]), a(uuids[1])),
        }
    }

    /// The UUID selection only, for vendors whose type keys HAMi never reads.
    pub fn uuids_only(pod: &PodView, uuids: [&str; 2]) -> Selections {
        let a = |k: &str| pod.annotation(k);
        Selections { types: Selection::default(), uuids: Selection::uuids(a(uuids[0]), a(uuids[1])) }
    }

    /// The walk's type check: the device's type passes the pod's selection, if it made one.
    pub fn type_check(this: Option<&Selections>) -> impl Fn(&DeviceUsage) -> bool + '_ {
        move |d| this.is_none_or(|p| p.types.allows(&d.info.ty))
    }

    /// The walk's UUID check: the device's id passes the pod's selection, if it made one.
    pub fn uuid_check(this: Option<&Selections>) -> impl Fn(&DeviceUsage) -> bool + '_ {
        move |d| this.is_none_or(|p| p.uuids.allows(d.info.id.as_str()))
    }
}
