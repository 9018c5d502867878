//! Kunlun XPU (HAMi's "kunlun"): whole P800 devices synthesised from node capacity as HAMi does,
//! chosen by the two-wing topology selector, and the bubble node score. The selector is shared with
//! Kunlun vXPU (`kunlun_vxpu.rs`). No lock, always healthy.

use super::Unusable;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::annotations::{kunlun as keys, kunlun_vxpu as xpu_keys};
use crate::model::codec::{self, Selection, UuidList};
use crate::model::pod::NodeView;
use crate::model::reason::{Reason, Rejection, Tally};
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerDevice, ContainerView, DeviceInfo, DeviceUsage, PodRequest, PodView, VendorId};

use super::walk;
use super::{Discovery, FitCx, LockKind, Names, Pick, ScoreCx, Vendor, WriteCx, quantities};

// The tests read these through `use super::*`.
#[cfg(test)]
use crate::model::edit::{ContainerEdit, PodContext};

pub const WORD: &str = "kunlun";

/// A P800's memory in MiB, as HAMi registers it (and the vXPU whole-device size).
pub const DEVICE_MEM: u64 = 98304;

/// The device config's `kunlun` section, read by Kunlun XPU and Kunlun vXPU.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct KunlunConfig {
    pub resource_count_name: String,
    pub resource_v_count_name: String,
    pub resource_v_memory_name: String,
}

impl KunlunConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        KunlunConfig {
            resource_count_name: "kunlunxin.com/xpu".into(),
            resource_v_count_name: "kunlunxin.com/vxpu".into(),
            resource_v_memory_name: "kunlunxin.com/vxpu-memory".into(),
        }
    }
}

pub struct KunlunXpu {
    count_name: String,
    word: Arc<str>,
}

impl KunlunXpu {
    pub fn new(cfg: &KunlunConfig) -> KunlunXpu {
        KunlunXpu { count_name: cfg.resource_count_name.clone(), word: Arc::from(WORD) }
    }
}

/// Both UUID selections every Kunlun vendor checks: `hami.io/use-xpu-uuid` / `no-use-xpu-uuid`
/// and `baidu.com/use-gpuuuid` / `nouse-gpuuuid`; a device must pass both.
#[derive(Debug, Default)]
pub struct Params {
    pub hami: Selection<UuidList>,
    pub baidu: Selection<UuidList>,
}

impl Params {
    pub fn from_pod(pod: &PodView) -> Params {
        let a = |k: &str| pod.annotation(k);
        Params {
            hami: Selection::uuids(a(xpu_keys::USE_UUID), a(xpu_keys::NOUSE_UUID)),
            baidu: Selection::uuids(a(keys::BAIDU_USE_UUID), a(keys::BAIDU_NOUSE_UUID)),
        }
    }
    pub fn allows(&self, id: &str) -> bool {
        self.hami.allows(id) && self.baidu.allows(id)
    }
}

/// The two-wing topology of an 8-device Kunlun node. Device indexes 0–3 form the left wing and 4–7
/// the right one; the pair and group tables are HAMi's.
///
/// HAMi counts wings by position in the policy-sorted device list but answers device indexes, so
/// once busy devices sort elsewhere the wings no longer match the hardware (docs/compat.md, "Kunlun
/// XPU"). hami-rs counts, picks and answers by device index throughout; devices whose index is 8 or
/// more are outside the topology and never chosen. The GPU policy therefore decides only between
/// devices that share an index.
pub mod topology {
    /// Cross-wing links, in HAMi's order.
    pub const CROSS_PAIRS: [[usize; 2]; 4] = [[0, 4], [1, 5], [2, 6], [3, 7]];
    /// Links inside a wing.
    pub const WING_PAIRS: [[usize; 2]; 12] =
        [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3], [4, 5], [4, 6], [4, 7], [5, 6], [5, 7], [6, 7]];
    /// Fully connected groups of four, in HAMi's order of preference.
    pub const GROUPS: [[usize; 4]; 6] =
        [[0, 1, 4, 5], [2, 3, 6, 7], [0, 2, 4, 6], [1, 3, 5, 7], [0, 3, 4, 7], [1, 2, 5, 6]];
    /// Preferred number of fitting devices in a wing, for a one-device request: fill a lone hole
    /// first, keep whole wings for last.
    const ODD_ORDER: [usize; 4] = [1, 3, 2, 4];

    /// Device indexes (0–7) to take for `n` devices, given which indexes fit; `None` when the
    /// topology cannot serve the request.
    pub fn choose(fits: &[bool; 8], n: u32) -> Option<Vec<usize>> {
        let left = fits[..4].iter().filter(|f| **f).count();
        let right = fits[4..].iter().filter(|f| **f).count();
        let pick = |start: usize, n: usize| {
            let v: Vec<usize> = (start..8).filter(|&i| fits[i]).take(n).collect();
            (v.len() == n).then_some(v)
        };
        match n {
            8 => (left + right == 8).then(|| (0..8).collect()),
            1 | 2 | 4 => {
                let n = n as usize;
                if left >= n || right >= n {
                    for slots in n..=4 {
                        let num = if n % 2 == 1 { ODD_ORDER[slots - 1] } else { slots };
                        if left == num {
                            return pick(0, n);
                        }
                        if right == num {
                            return pick(4, n);
                        }
                    }
                }
                interconnect(fits, n)
            }
            _ => None,
        }
    }

    fn all(fits: &[bool; 8], set: &[usize]) -> bool {
        set.iter().all(|&i| fits[i])
    }

    /// Across the wings: a linked pair for two devices; a connected group for four.
    fn interconnect(fits: &[bool; 8], n: usize) -> Option<Vec<usize>> {
        if n == 2 {
            // The first linked pair scanning the devices in index order.
            for a in (0..8).filter(|&i| fits[i]) {
                for b in (0..8).filter(|&i| fits[i] && i != a) {
                    if CROSS_PAIRS.iter().any(|p| (p[0] == a && p[1] == b) || (p[0] == b && p[1] == a)) {
                        return Some(vec![a, b]);
                    }
                }
            }
            return None;
        }
        if n != 4 {
            return None;
        }
        let fitting = fits.iter().filter(|f| **f).count();
        match fitting {
            4 | 5 => GROUPS.iter().find(|g| all(fits, &g[..])).map(|g| g.to_vec()),
            6 => {
                // Prefer a group whose two leftover devices are still linked; else the last
                // group that fits.
                let mut last = None;
                for g in GROUPS.iter().filter(|g| all(fits, &g[..])) {
                    last = Some(g);
                    let mut rest = *fits;
                    for &i in g {
                        rest[i] = false;
                    }
                    if CROSS_PAIRS.iter().chain(WING_PAIRS.iter()).any(|p| all(&rest, &p[..])) {
                        return Some(g.to_vec());
                    }
                }
                last.map(|g| g.to_vec())
            }
            _ => None,
        }
    }

    /// HAMi's bubble count of a set of device indexes: 1 for the empty set, else the sum over
    /// both wings of 0 for a full wing, 2 for a lone device and 1 otherwise (an empty wing too).
    pub fn bubbles(indexes: &[u32]) -> u32 {
        let left = indexes.iter().filter(|&&i| i < 4).count();
        let right = indexes.len() - left;
        if indexes.is_empty() {
            return 1;
        }
        let v = |n: usize| match n {
            4 => 0,
            1 => 2,
            _ => 1,
        };
        v(left) + v(right)
    }

    /// The bubble node score: the pod's own bubbles against the busy devices' bubbles (HAMi
    /// compares the two sets, not the busy set with the pod's devices added).
    pub fn bubble_score(busy: &[u32], mine: &[u32]) -> f32 {
        match i64::from(bubbles(mine)) - i64::from(bubbles(busy)) {
            -1 => 3000.0,
            0 => 2000.0,
            1 => 1000.0,
            2 => 0.0,
            _ => 1000.0,
        }
    }
}

/// Runs the selector over the candidates: `fits` decides each device that passed the UUID
/// selections. Returns the chosen positions in the selector's order, or on failure the number of
/// devices the UUID selections excluded (for [`selector_failure`]).
pub fn select(cx: &FitCx<'_>, uuids: Option<&Params>, fits: &dyn Fn(&DeviceUsage) -> bool) -> Result<Vec<u16>, u16> {
    let mut slot: [Option<u16>; 8] = [None; 8];
    let mut mismatched = 0u16;
    for &pos in cx.order {
        let d = &cx.devs[usize::from(pos)];
        if uuids.is_some_and(|u| !u.allows(d.info.id.as_str())) {
            mismatched = mismatched.saturating_add(1);
            continue;
        }
        let i = d.info.index as usize;
        // A duplicated index keeps the first fitting device in policy order.
        if i < 8 && slot[i].is_none() && fits(d) {
            slot[i] = Some(pos);
        }
    }
    let fits_by_index = slot.map(|s| s.is_some());
    match topology::choose(&fits_by_index, cx.req.nums) {
        Some(idx) => Ok(idx.into_iter().filter_map(|i| slot[i]).collect()),
        None => Err(mismatched),
    }
}

/// HAMi's failure reason of the selector when `tally` holds nothing yet: the UUID mismatches if
/// any device failed the selections, else one `NumaNotFit`.
pub fn selector_failure(mut tally: Tally, mismatched: u16) -> Rejection {
    if tally.is_empty() {
        if mismatched > 0 {
            tally.add(Reason::CardUuidMismatch, usize::from(mismatched));
        } else {
            tally.add(Reason::NumaNotFit, 1);
        }
    }
    Rejection::Devices(tally)
}

impl Vendor for KunlunXpu {
    fn names(&self) -> Names<'_> {
        Names::count_only(WORD, &self.count_name)
    }

    /// As HAMi derives it: the count (limits, else requests); whole devices (percentage 100, cores
    /// 0).
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        let Some(nums) = quantities::count(c, &self.count_name)? else { return Ok(None) };
        Ok(Some(ContainerRequest::new(id, nums, 0, 100, 0)))
    }

    fn selects(&self, params: Option<&VendorParams>, _ty: &str, uuid: &str) -> bool {
        super::params_allow(params, |p: &Params| p.allows(uuid))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        Some(Arc::new(Params::from_pod(pod)))
    }

    /// Id `<node>-kunlun-<i>`, 100 slots, 98304 MiB, 100 cores, NUMA 1 for the upper half: HAMi's
    /// devices, so pods HAMi placed are counted.
    fn discover(&self, node: &NodeView) -> Discovery {
        if self.count_name.is_empty() {
            return Discovery::Absent;
        }
        // Devices are addressed by u16 positions; an absurd capacity is capped, not wrapped.
        let n = node.capacity(&self.count_name).min(i64::from(u16::MAX));
        if n <= 0 {
            return Discovery::Absent;
        }
        let devices = (0..n)
            .map(|i| {
                let mut d =
                    DeviceInfo::new(&format!("{}-{WORD}-{i}", node.name()), i as u32, 100, DEVICE_MEM, 100, WORD);
                d.numa = i32::from(i >= n / 2);
                d
            })
            .collect();
        Discovery::Devices { devices, extra: None }
    }

    /// The topology selector over unused, healthy devices that pass both UUID selections; each
    /// chosen entry takes the device's whole memory and cores.
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let fits = |d: &DeviceUsage| d.used == 0 && d.health;
        let chosen =
            select(cx, cx.params_as::<Params>(), &fits).map_err(|m| selector_failure(Tally::new(cx.order.len()), m))?;
        for pos in chosen {
            let d = &cx.devs[usize::from(pos)];
            out.push(walk::pick(pos, d, &self.word, d.info.devmem, d.info.devcore));
        }
        Ok(())
    }

    /// HAMi counts only the slot while fitting (the entry's memory and cores are charged when usage
    /// is rebuilt from the pod).
    fn charge(&self, dev: &mut DeviceUsage, _entry: &mut ContainerDevice, _pod: &PodRequest) {
        dev.used = dev.used.saturating_add(1);
    }

    /// HAMi's bubble score: 0 when any device on the node, or any of the pod's, is not a `kunlun`
    /// device.
    fn node_score(&self, cx: &ScoreCx<'_>) -> f32 {
        let mut busy: Vec<u32> = Vec::new();
        for d in cx.before {
            if !d.info.ty.contains(WORD) {
                return 0.0;
            }
            if d.used > 0 && !busy.contains(&d.info.index) {
                busy.push(d.info.index);
            }
        }
        let mut mine: Vec<u32> = Vec::new();
        for e in cx.devices.iter().flatten() {
            if !e.ty.contains(WORD) {
                return 0.0;
            }
            if !mine.contains(&e.idx) {
                mine.push(e.idx);
            }
        }
        topology::bubble_score(&busy, &mine)
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::ALLOCATED, keys::DEVICE_IDX].map(String::from).to_vec()
    }

    /// What the XPU device plugin reads: the allocated key, and `BAIDU_COM_DEVICE_IDX` with the
    /// indexes of the last container holding devices.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        out.push((keys::ALLOCATED.into(), codec::encode_pod_devices(cx.devices)));
        if let Some(last) = cx.devices.iter().rev().find(|c| !c.is_empty()) {
            let idx: Vec<String> = last.iter().map(|d| d.idx.to_string()).collect();
            out.push((keys::DEVICE_IDX.into(), idx.join(",")));
        }
    }

    fn lock(&self) -> LockKind {
        LockKind::None
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
