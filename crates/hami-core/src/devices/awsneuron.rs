//! AWS Neuron (HAMi's "AWSNeuron"): devices synthesised from node capacity and the instance-type
//! label, as HAMi does; requests by device or by NeuronCore, contiguous device blocks chosen by
//! device index, per-core bitmasks, and the `AWS_NEURON_IDS` / `NEURON_*` pod keys. No lock, always
//! healthy.
//!
//! The number of cores per device is learned from the first node that reports any (as HAMi does)
//! and then used for every node and every request; it lives in a `OnceLock`, the one piece of
//! state a vendor keeps. Until a node has been seen, core requests are split by two cores per
//! device, HAMi's cap.

use crate::model::request::Unusable;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;

use serde_json::{Map, Value};

use crate::model::annotations::awsneuron as keys;
use crate::model::codec;
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::quantity::Quantity;
use crate::model::reason::{Need, Reason, Rejection, Tally};
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, DeviceInfo, DeviceUsage, MemMiB, PodView, VendorId};

use super::common::{self, Selections};
use super::walk::{self, Rules};
use super::{Discovery, FitCx, LockKind, Names, Pick, Vendor, WriteCx};

pub const WORD: &str = "AWSNeuron";

/// `ContainerRequest::mode` of a request by device count (`aws.amazon.com/neuron`).
pub const MODE_DEVICES: i32 = 1;
/// `ContainerRequest::mode` of a request by NeuronCore count (`aws.amazon.com/neuroncore`).
pub const MODE_CORES: i32 = 2;

/// The custom-info key that carries the node's instance type on every device.
pub const NODE_TYPE: &str = "AWSNodeType";

const MAX_DEVICES: i64 = i32::MAX as i64;
/// HAMi splits core requests by at most two cores per device.
const MAX_CORES_PER_DEVICE: u32 = 2;

/// The device config's `awsneuron` section.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct AwsNeuronConfig {
    pub resource_count_name: String,
    pub resource_core_name: String,
}

impl AwsNeuronConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        AwsNeuronConfig {
            resource_count_name: "aws.amazon.com/neuron".into(),
            resource_core_name: "aws.amazon.com/neuroncore".into(),
        }
    }
}

pub struct AwsNeuron {
    count_name: String,
    core_name: String,
    word: Arc<str>,
    /// Cores per device, learned from the first node that reports a positive figure.
    cores_per_device: OnceLock<u32>,
}

impl AwsNeuron {
    pub fn new(cfg: &AwsNeuronConfig) -> AwsNeuron {
        AwsNeuron {
            count_name: cfg.resource_count_name.clone(),
            core_name: cfg.resource_core_name.clone(),
            word: Arc::from(WORD),
            cores_per_device: OnceLock::new(),
        }
    }

    /// The learned cores per device, if a node has been seen.
    pub fn learned_cores(&self) -> Option<u32> {
        self.cores_per_device.get().copied()
    }

    /// How a core request is split: `(devices, cores each)`. A count up to the cores per device
    /// (capped at two) is one device with that many cores; a multiple of it is that many whole
    /// devices; anything else is refused with HAMi's message.
    pub fn split_cores(&self, cores: i64) -> Result<(u32, u32), Unusable> {
        let per = i64::from(
            self.learned_cores().filter(|c| *c > 0).map_or(MAX_CORES_PER_DEVICE, |c| c.min(MAX_CORES_PER_DEVICE)),
        );
        if cores <= per {
            return Ok((1, cores.max(0) as u32));
        }
        if cores % per != 0 {
            return Err(format!("{} must be 1 or a multiple of {per}, got {cores}", self.core_name).into());
        }
        let nums = cores / per;
        if nums > MAX_DEVICES {
            return Err(
                format!("{} needs {nums} devices, which exceeds the maximum of {MAX_DEVICES}", self.core_name).into()
            );
        }
        Ok((nums as u32, per as u32))
    }
}

/// A positive integer no larger than `max`, with HAMi's messages.
fn validate(text: &str, name: &str, max: i64) -> Result<i64, Unusable> {
    let v = Quantity::parse(text)
        .ok()
        .and_then(|q| q.as_i64_exact())
        .ok_or_else(|| format!("{name} must be an integer"))?;
    if v <= 0 {
        return Err(format!("{name} must be greater than 0").into());
    }
    if v > max {
        return Err(format!("{name} must not exceed {max}").into());
    }
    Ok(v)
}

/// The pod's UUID selection (used for single-device requests only, as in HAMi).
pub type Params = Selections;

/// The lowest `n` bits of `free`, or `None` when it has fewer.
fn lowest_bits(free: u32, n: u32) -> Option<u32> {
    if free.count_ones() < n {
        return None;
    }
    let mut mask = 0u32;
    let mut rest = free;
    for _ in 0..n {
        let bit = rest & rest.wrapping_neg();
        mask |= bit;
        rest &= !bit;
    }
    Some(mask)
}

/// A block of `n` device indexes starting at `start`, every one present, idle and healthy.
fn block(free: &[Option<u16>], start: usize, n: usize) -> Option<Vec<u16>> {
    let slice = free.get(start..start.checked_add(n)?)?;
    slice.iter().copied().collect()
}

impl Vendor for AwsNeuron {
    fn names(&self) -> Names<'_> {
        Names::new(WORD, &self.count_name, "", &self.core_name, 1)
    }

    /// As HAMi derives it: a device count (limits, else requests) asks for that many devices with
    /// all their cores; otherwise a core count is split by [`AwsNeuron::split_cores`]. HAMi drops
    /// requests the webhook would refuse; hami-rs refuses them with the webhook's message.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        let q = |name: &str| Some(name).filter(|n| !n.is_empty()).and_then(|n| c.quantity(n));
        if let Some(count) = q(&self.count_name) {
            let n = validate(&count.0, &self.count_name, MAX_DEVICES)?;
            let cores = self.learned_cores().unwrap_or(0);
            return Ok(Some(ContainerRequest {
                mode: MODE_DEVICES,
                ..ContainerRequest::new(id, n as u32, 0, 0, cores)
            }));
        }
        let Some(cores) = q(&self.core_name) else { return Ok(None) };
        let n = validate(&cores.0, &self.core_name, MAX_DEVICES * i64::from(MAX_CORES_PER_DEVICE))?;
        let (nums, each) = self.split_cores(n)?;
        Ok(Some(ContainerRequest { mode: MODE_CORES, ..ContainerRequest::new(id, nums, 0, 0, each) }))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        Some(Arc::new(Params::uuids_only(pod, [keys::USE_UUID, keys::NOUSE_UUID])))
    }

    /// HAMi's webhook rules: the count (limits, else requests), else the cores, must be a positive
    /// integer within range, and cores must split into devices.
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, Unusable> {
        if !self.count_name.is_empty()
            && let Some(count) = c.quantity(&self.count_name)
        {
            validate(&count, &self.count_name, MAX_DEVICES)?;
            return Ok(true);
        }
        if self.core_name.is_empty() {
            return Ok(false);
        }
        let Some(cores) = c.quantity(&self.core_name) else { return Ok(false) };
        let n = validate(&cores, &self.core_name, MAX_DEVICES * i64::from(MAX_CORES_PER_DEVICE))?;
        self.split_cores(n)?;
        Ok(true)
    }

    /// One device per unit of `aws.amazon.com/neuron`, id `<node>-AWSNeuron-<i>` as in HAMi, a slot
    /// per core, no memory, a core bitmask, and the instance type in the custom info.
    fn discover(&self, node: &NodeView) -> Discovery {
        let Some(n) = common::positive_capacity(node, &self.count_name) else { return Discovery::Absent };
        let here = if self.core_name.is_empty() { 0 } else { node.capacity(&self.core_name).max(0) / n };
        let here = u32::try_from(here).unwrap_or(u32::MAX);
        if here > 0 {
            // Only the first node's figure counts; later ones are ignored, as in HAMi.
            let _ = self.cores_per_device.set(here);
        }
        let per = self.learned_cores().unwrap_or(here);
        let mask = if per >= 32 { u32::MAX } else { (1u32 << per) - 1 };
        let mut custom = Map::new();
        let instance = node.metadata.labels.get(keys::INSTANCE_TYPE_LABEL).cloned().unwrap_or_default();
        custom.insert(NODE_TYPE.into(), Value::String(instance));
        let custom = Arc::new(custom);
        // Devices are addressed by u16 positions; an absurd capacity is capped, not wrapped.
        let devices = (0..n.min(i64::from(u16::MAX)) as u32)
            .map(|i| {
                let mut d = DeviceInfo::new(&format!("{}-{WORD}-{i}", node.name()), i, per, 0, mask, WORD);
                d.custom = Some(custom.clone());
                d
            })
            .collect();
        Discovery::Devices { devices, extra: None }
    }

    /// More than one device: a block of consecutive device indexes that are all idle and healthy:
    /// anywhere on `inf` instances, aligned to the block size (only 4, 8 or 16) elsewhere; UUID
    /// selections do not apply. HAMi checks list positions and then allocates the devices whose
    /// index equals them (docs/compat.md, "AWS Neuron"); hami-rs checks and allocates by index. One
    /// device: healthy, type, UUID, a free slot, mutex, enough free core bits; the entry's cores
    /// become the bits it takes.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let mut tally = Tally::new(cx.order.len());
        if cx.req.nums > 1 {
            let n = cx.req.nums as usize;
            let node_type = cx.order.first().and_then(|&p| cx.devs[usize::from(p)].info.custom_str(NODE_TYPE));
            let max_index = cx.order.iter().map(|&p| cx.devs[usize::from(p)].info.index as usize).max().unwrap_or(0);
            // Position of the idle, healthy device with each index (a duplicate keeps the first).
            let mut free: Vec<Option<u16>> = vec![None; max_index + 1];
            for &p in cx.order {
                let d = &cx.devs[usize::from(p)];
                let i = d.info.index as usize;
                // hami-rs also needs a slot: a device registered with no cores has none.
                if d.used == 0 && d.health && d.info.count > 0 && free[i].is_none() {
                    free[i] = Some(p);
                }
            }
            let chosen = match node_type {
                None => None,
                Some(t) if t.contains("inf") || t.contains("Inf") => (0..free.len()).find_map(|s| block(&free, s, n)),
                Some(_) if matches!(n, 4 | 8 | 16) => (0..free.len()).step_by(n).find_map(|s| block(&free, s, n)),
                Some(_) => None,
            };
            let Some(chosen) = chosen else {
                tally.add(Reason::NumaNotFit, 1);
                return Err(Rejection::Devices(tally));
            };
            for pos in chosen {
                let d = &cx.devs[usize::from(pos)];
                out.push(walk::pick(pos, d, &self.word, d.info.devmem, d.info.devcore));
            }
            return Ok(());
        }
        let p = cx.params_as::<Params>();
        let type_ok = |d: &DeviceUsage| d.info.ty.contains(WORD);
        let uuid_ok = Params::uuid_check(p);
        // A device request takes every core of the device; a core request its count. The bits
        // taken are the lowest free ones, which for HAMi's one- and two-core devices is exactly
        // its rule (idle: 1 or 3; otherwise the complement of the used mask).
        let take = |d: &DeviceUsage| {
            let need = if cx.req.mode == MODE_DEVICES { d.info.devcore.count_ones() } else { cx.req.cores };
            let free_bits = d.info.devcore & !d.used_cores;
            match lowest_bits(free_bits, need) {
                Some(mask) => Ok((MemMiB::ZERO, mask)),
                None => {
                    Err((Reason::CardInsufficientCore, Need::Cores { requested: need, free: free_bits.count_ones() }))
                }
            }
        };
        let rules = Rules { type_ok: &type_ok, uuid_ok: &uuid_ok, take: Some(&take), ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn pod_keys(&self) -> Vec<String> {
        [
            keys::ALLOCATED,
            keys::NEURON_IDS,
            keys::RESOURCE_TYPE,
            keys::ALLOC_TIME,
            keys::ALLOCATED_FLAG,
            keys::PREDICATE_NODE,
        ]
        .map(String::from)
        .to_vec()
    }

    /// What the Neuron device plugin reads: the allocated key, and `AWS_NEURON_IDS` accumulated
    /// over the containers: device indexes for device requests, core indexes (`cores per device ×
    /// index + bit`) for core requests, which also set `NEURON_RESOURCE_TYPE`. HAMi decides the
    /// form by whether the count is in the container's limits; hami-rs by how the request was read,
    /// which agrees for every pod the API server admits (extended resources need limits).
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        out.push((keys::ALLOCATED.into(), codec::encode_pod_devices(cx.devices)));
        let vendor = cx.vendor();
        let mut ids: Vec<String> = Vec::new();
        let mut core_mode = false;
        for (ci, c) in cx.devices.iter().enumerate() {
            let mode = cx
                .pod
                .containers
                .get(ci)
                .and_then(|rs| rs.iter().find(|r| Some(r.vendor) == vendor))
                .map_or(MODE_DEVICES, |r| r.mode);
            for e in c {
                if mode == MODE_DEVICES {
                    ids.push(e.idx.to_string());
                    continue;
                }
                let per = self.learned_cores().unwrap_or_else(|| cx.device(e).map_or(0, |d| d.info.count));
                for bit in (0..32).filter(|b| e.usedcores & (1 << b) != 0) {
                    ids.push((u64::from(per) * u64::from(e.idx) + bit).to_string());
                    core_mode = true;
                }
            }
        }
        if ids.is_empty() {
            return;
        }
        out.push((keys::NEURON_IDS.into(), ids.join(",")));
        if core_mode {
            out.push((keys::RESOURCE_TYPE.into(), self.core_name.clone()));
        }
        out.push((keys::ALLOC_TIME.into(), cx.unix_ns.to_string()));
        out.push((keys::ALLOCATED_FLAG.into(), "false".into()));
        out.push((keys::PREDICATE_NODE.into(), cx.node.to_string()));
    }

    fn lock(&self) -> LockKind {
        LockKind::None
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
