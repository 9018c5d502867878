//! The device walk most vendors share, HAMi's per-device fit: candidates are tried from the end of
//! the policy-sorted list, each check in HAMi's order; the first failing check counts one device
//! for its reason. Vendors switch checks on and off through [`Rules`], and a vendor whose capacity
//! rule is its own (AMD's compute units, Enflame DRS profiles, AWS Neuron core masks, the
//! count-only vendors' empty entries) supplies it as [`Rules::take`].

use std::sync::Arc;

use crate::model::reason::{Need, Reason, Tally};
use crate::model::request::MEMPCT_UNSET;
use crate::model::{ContainerDevice, DeviceUsage, DeviceUuid, MemMiB};

use super::{FitCx, Pick};

/// A check that may reject a device with a reason.
pub type Check<'a> = &'a dyn Fn(&DeviceUsage) -> bool;

/// A vendor rule that may reject a device with its own reason.
pub type CustomRule<'a> = &'a dyn Fn(&DeviceUsage) -> Option<Reason>;

/// Whether a MIG device can host one more instance of `mem`, given this walk's earlier picks on it.
pub type MigCheck<'a> = &'a dyn Fn(&DeviceUsage, MemMiB, &[&Pick]) -> bool;

/// A vendor's own capacity rule: the memory and cores the device's entry takes, or why the device
/// cannot serve the request.
pub type Take<'a> = &'a dyn Fn(&DeviceUsage) -> Result<(MemMiB, u32), (Reason, Need)>;

fn always(_: &DeviceUsage) -> bool {
    true
}

/// Which checks a vendor's walk runs, and with what.
pub struct Rules<'a> {
    /// The vendor word written into each entry's type field (shared, so picks do not allocate).
    pub word: &'a Arc<str>,
    /// Write the device's own type string instead (AMD's product names).
    pub entry_uses_device_type: bool,
    /// Check 2: devices that take no new allocations (`CardCordoned`).
    pub cordon: &'a [String],
    /// Check 3: type and mode selection (`CardTypeMismatch`).
    pub type_ok: Check<'a>,
    /// Check 4: all devices of one request on one NUMA node.
    pub numa_bind: bool,
    /// Check 5: UUID selection (`CardUuidMismatch`).
    pub uuid_ok: Check<'a>,
    /// Under the mutex policy, devices that count as busy although nothing runs on them (a Vastai
    /// die whose card is busy).
    pub also_busy: Option<Check<'a>>,
    /// A vendor rule run after the UUID check (same-device rules: `CardNotFoundCustomFilterRule`).
    pub custom: Option<CustomRule<'a>>,
    /// Run `custom` after the capacity checks instead, where HAMi's Metax GPU and Mthreads run their
    /// same-device rule (so a busy device counts as `CardTimeSlicingExhausted`, not as the rule).
    pub custom_after_capacity: bool,
    /// Check 10: namespace quota.
    pub quota: bool,
    /// Checks 11–14: memory, cores, exclusive 100 cores, no core-less task on a full device.
    pub capacity: bool,
    /// Cores are clamped to 100 (percent of one device) before the capacity checks.
    pub clamp_cores: bool,
    /// The device's core total for checks 12–14, when it differs from the registered one.
    pub core_total: Option<u32>,
    /// Check 15 for `mig`-mode devices; a MIG device is visited again after a pick.
    pub mig: Option<MigCheck<'a>>,
    /// The vendor's own capacity rule, run after the mutex check in place of checks 9–15: it
    /// rejects the device or says what the entry takes.
    pub take: Option<Take<'a>>,
    /// Collect every fitting device instead of stopping at `nums` (topology-aware choice).
    pub collect_all: bool,
}

impl<'a> Rules<'a> {
    /// Health, UUID, count, mutex and the capacity checks; no type, NUMA, quota or MIG rules.
    pub fn basic(word: &'a Arc<str>) -> Rules<'a> {
        Rules {
            word,
            entry_uses_device_type: false,
            cordon: &[],
            type_ok: &always,
            numa_bind: false,
            uuid_ok: &always,
            also_busy: None,
            custom: None,
            custom_after_capacity: false,
            quota: false,
            capacity: true,
            clamp_cores: true,
            core_total: None,
            mig: None,
            take: None,
            collect_all: false,
        }
    }
}

/// The pick of device `d` at position `pos`, its entry typed `ty` and taking `mem` and `cores`.
pub fn pick(pos: u16, d: &DeviceUsage, ty: &Arc<str>, mem: MemMiB, cores: u32) -> Pick {
    let dev = ContainerDevice {
        uuid: d.info.id.clone(),
        ty: ty.clone(),
        usedmem: mem,
        usedcores: cores,
        idx: d.cap.index,
        mig: None,
    };
    Pick { pos, dev }
}

/// Memory a request reserves on device `d` (check 9): the memory asked, else the percentage of
/// the device. A container that asks both is given the smaller: HAMi's device plugin (since PR
/// 3075) refuses an allocation above the percentage of the card, and later plugins one above the
/// memory asked, so only the smaller is allocated on either (HAMi writes the memory asked, and the
/// pod then fails at its node when that is more). The plugin leaves MIG instances unchecked, and
/// a MIG profile is chosen by the memory asked, as in HAMi.
pub fn memory_for(memreq: MemMiB, mempct: u32, d: &DeviceUsage) -> MemMiB {
    let of_device = || MemMiB(d.cap.devmem.get() * u64::from(mempct) / 100);
    if memreq.get() > 0 {
        if (1..=100).contains(&mempct) && !d.info.is_mig() { memreq.min(of_device()) } else { memreq }
    } else if mempct != MEMPCT_UNSET {
        of_device()
    } else {
        MemMiB::ZERO
    }
}

/// The pod's memory and cores of this vendor if the current container also took `cores` and `m` on
/// device `cand` after `picks`, collapsed as accounting stores them and as quota counts them: per
/// device, the larger of the init-container peak and the sum over regular containers and sidecars,
/// where a plain init container runs beside the sidecars started before it. Summing the pod's
/// containers instead would count init containers that never run together.
fn collapsed_with(cx: &FitCx<'_>, picks: &[Pick], cand: &DeviceUuid, m: MemMiB, cores: u32) -> (MemMiB, u32) {
    let cur = cx.container;
    // Container `i`'s memory and cores on device `u`.
    let on = |i: usize, u: &DeviceUuid| -> (u64, u32) {
        let add = |(a, b): (u64, u32), (mem, c): (MemMiB, u32)| (a.saturating_add(mem.get()), b.saturating_add(c));
        if i == cur {
            let own = picks.iter().filter(|p| &p.dev.uuid == u).map(|p| (p.dev.usedmem, p.dev.usedcores));
            own.chain((cand == u).then_some((m, cores))).fold((0, 0), add)
        } else {
            let entries = cx.earlier.get(i).map_or(&[][..], |c| &c[..]);
            entries.iter().filter(|d| &d.uuid == u).map(|d| (d.usedmem, d.usedcores)).fold((0, 0), add)
        }
    };
    let uuids = || cx.earlier.iter().flatten().map(|d| &d.uuid).chain(picks.iter().map(|p| &p.dev.uuid)).chain([cand]);
    let (mut mem, mut total_cores) = (0u64, 0u32);
    for (k, u) in uuids().enumerate() {
        if uuids().take(k).any(|v| v == u) {
            continue;
        }
        let (mut app, mut side, mut peak) = ((0u64, 0u32), (0u64, 0u32), (0u64, 0u32));
        for i in 0..=cur {
            let (a, b) = on(i, u);
            if cx.pod.is_plain_init(i) {
                peak = (peak.0.max(a.saturating_add(side.0)), peak.1.max(b.saturating_add(side.1)));
            } else {
                app = (app.0.saturating_add(a), app.1.saturating_add(b));
                if i < cx.pod.n_init {
                    side = (side.0.saturating_add(a), side.1.saturating_add(b));
                }
            }
        }
        mem = mem.saturating_add(app.0.max(peak.0));
        total_cores = total_cores.saturating_add(app.1.max(peak.1));
    }
    (MemMiB(mem), total_cores)
}

/// Runs the walk. On success `out` holds the picks (all fitting devices with `collect_all`).
/// On failure `out` is left as it was and the tally says why, `AllocatedCardsInsufficientRequest`
/// counting the devices that were found.
pub fn walk(cx: &FitCx<'_>, r: &Rules<'_>, out: &mut Vec<Pick>) -> Result<(), Tally> {
    let start = out.len();
    let (mut tally, done) = scan(cx, r, out, !r.collect_all);
    if done {
        return Ok(());
    }
    let original = cx.req.nums;
    if r.collect_all && out.len() - start >= original as usize && original > 0 {
        return Ok(());
    }
    let picked = out.len() - start;
    if picked > 0 {
        tally.add(Reason::AllocatedCardsInsufficientRequest, picked);
    }
    out.truncate(start);
    Err(tally)
}

/// Runs the checks over every candidate without stopping at `nums`, appending each fitting device
/// to `out`, and returns what the other devices were rejected for. For vendors that choose among
/// all fitting devices and word their own failure (Ascend 910C module pairs).
pub fn collect(cx: &FitCx<'_>, r: &Rules<'_>, out: &mut Vec<Pick>) -> Tally {
    scan(cx, r, out, false).0
}

/// The walk itself: appends every device that passes, stopping once `nums` are picked when `stop`
/// is set (then the flag in the answer is true).
fn scan(cx: &FitCx<'_>, r: &Rules<'_>, out: &mut Vec<Pick>, stop: bool) -> (Tally, bool) {
    let start = out.len();
    let mut tally = Tally::new(cx.order.len());
    let original = cx.req.nums;
    let mut nums = cx.req.nums;
    let mut cores = cx.req.cores;
    let mut group: Option<i32> = None;
    let mutex = cx.pod.gpu_policy.mutex;
    let mut i = cx.order.len();
    // Each MIG revisit adds a placement, so revisits are bounded; the guard is belt and braces.
    let mut budget = cx.order.len() * 64 + 64;
    while i > 0 && budget > 0 {
        budget -= 1;
        let pos = usize::from(cx.order[i - 1]);
        let d = &cx.devs[pos];
        // A MIG device is visited again after a pick, for the container's next instance. As in
        // HAMi, every check but the placement and the quota reads the device as it was before this
        // container: its free placements are what it has left, and the earlier instances are
        // charged at their profile's memory and cores once the walk is done.
        let revisit = r.mig.is_some() && d.cap.mig;
        macro_rules! reject {
            ($reason:expr, $need:expr) => {{
                tally.reject($reason, pos, $need);
                i -= 1;
                continue;
            }};
        }
        if !d.health {
            reject!(Reason::CardNotHealth, Need::None);
        }
        if r.cordon.iter().any(|c| c == d.info.id.as_str()) {
            reject!(Reason::CardCordoned, Need::None);
        }
        if !(r.type_ok)(d) {
            reject!(Reason::CardTypeMismatch, Need::None);
        }
        if r.numa_bind && group != Some(d.cap.numa) {
            // A partial group is counted only when the walk stops at the count: a topology-aware
            // walk collects without counting down, and HAMi then reports no NumaNotFit.
            let picked = out.len() - start;
            if picked > 0 && nums != original {
                tally.add(Reason::NumaNotFit, picked);
            }
            out.truncate(start);
            nums = original;
            group = Some(d.cap.numa);
        }
        if !(r.uuid_ok)(d) {
            reject!(Reason::CardUuidMismatch, Need::None);
        }
        if let Some(custom) = r.custom.filter(|_| !r.custom_after_capacity)
            && let Some(reason) = custom(d)
        {
            reject!(reason, Need::None);
        }
        let used = d.used;
        if used >= d.cap.count {
            reject!(Reason::CardTimeSlicingExhausted, Need::Slots { used, count: d.cap.count });
        }
        if mutex && (used > 0 || r.also_busy.is_some_and(|busy| busy(d))) {
            reject!(Reason::ExclusiveDeviceAllocateConflict, Need::Busy { used });
        }
        let (m, cores) = match r.take {
            Some(take) => match take(d) {
                Ok(taken) => taken,
                Err((reason, need)) => reject!(reason, need),
            },
            None => {
                if r.clamp_cores && cores > 100 {
                    cores = 100;
                }
                let m = memory_for(cx.req.memreq, cx.req.mempct, d);
                if r.quota && !cx.quota.unlimited() {
                    let (pod_mem, pod_cores) = collapsed_with(cx, &out[start..], &d.info.id, m, cores);
                    if !cx.quota.fits(&cx.pod.namespace, cx.req.vendor, pod_mem, pod_cores) {
                        reject!(Reason::ResourceQuotaNotFit, Need::None);
                    }
                }
                if r.capacity {
                    // Signed, as HAMi subtracts: a device booked past its total (MIG instances
                    // charged at their profile's rounded-up cores) has less than nothing free.
                    let free_mem = i128::from(d.cap.devmem.get()) - i128::from(d.used_mem.get());
                    if free_mem < i128::from(m.get()) {
                        let free = u64::try_from(free_mem).unwrap_or(0);
                        reject!(Reason::CardInsufficientMemory, Need::Memory { requested: m.get(), free });
                    }
                    let total = r.core_total.unwrap_or(d.cap.devcore);
                    let used_cores = d.used_cores;
                    let free_cores = i64::from(total) - i64::from(used_cores);
                    if free_cores < i64::from(cores) {
                        let free = u32::try_from(free_cores).unwrap_or(0);
                        reject!(Reason::CardInsufficientCore, Need::Cores { requested: cores, free });
                    }
                    if total == 100 && cores == 100 && used > 0 {
                        reject!(Reason::ExclusiveDeviceAllocateConflict, Need::Busy { used });
                    }
                    if total != 0 && used_cores >= total && cores == 0 {
                        reject!(Reason::CardComputeUnitsExhausted, Need::None);
                    }
                }
                if let Some(custom) = r.custom.filter(|_| r.custom_after_capacity)
                    && let Some(reason) = custom(d)
                {
                    reject!(reason, Need::None);
                }
                if let Some(mig) = r.mig
                    && d.cap.mig
                {
                    let mine: Vec<&Pick> = out[start..].iter().filter(|p| usize::from(p.pos) == pos).collect();
                    if !mig(d, m, &mine) {
                        reject!(Reason::CardMigTopologyInfeasible, Need::None);
                    }
                }
                (m, cores)
            }
        };
        let ty = if r.entry_uses_device_type { &d.info.ty } else { r.word };
        out.push(pick(pos as u16, d, ty, m, cores));
        if stop {
            nums = nums.saturating_sub(1);
            if nums == 0 {
                return (tally, true);
            }
        }
        if !revisit {
            i -= 1;
        }
    }
    (tally, false)
}
