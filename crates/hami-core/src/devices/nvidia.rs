//! NVIDIA: JSON registration with optional pair scores and cordon list, the full per-device walk
//! (type/mode, NUMA, UUID, quota, MIG placements), topology-aware choice and the webhook's defaults
//! (count, exclusive cores, env).

use super::Unusable;
use std::sync::Arc;

use crate::model::annotations as keys;
use crate::model::codec::{self, MigAllocation, PairScores, Selection, TypeList, UuidList};
use crate::model::device::MigSlot;
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::reason::Rejection;
use crate::model::request::{ContainerRequest, MEMPCT_UNSET, VendorParams};
use crate::model::{
    ContainerDevice, ContainerDevices, ContainerView, DeviceUsage, DeviceUuid, MemMiB, MigPlacement, MigProfile,
    PodView, VendorId,
};

use super::common;
use super::walk::{self, Rules};
use super::{Cleanup, Discovery, FitCx, HealthRule, Names, Pick, Vendor, WriteCx, quantities};

mod config;
pub use config::{MigAllowlistEntry, NvidiaConfig};

pub const WORD: &str = "NVIDIA";

pub struct Nvidia {
    cfg: NvidiaConfig,
    factor: u64,
    word: Arc<str>,
}

/// What the pod's annotations select (parsed once per pod).
#[derive(Debug, Default)]
pub struct Params {
    pub types: Selection<TypeList>,
    pub uuids: Selection<UuidList>,
    /// `nvidia.com/vgpu-mode`: a device's mode must be a substring of it.
    pub vgpu_mode: Option<String>,
    pub numa_bind: bool,
}

/// What the node's annotations say beyond the device list.
#[derive(Debug, Default)]
pub struct Extra {
    pub cordon: Vec<String>,
    pub scores: PairScores,
}

impl Nvidia {
    pub fn new(cfg: &NvidiaConfig) -> Nvidia {
        Nvidia { cfg: cfg.clone(), factor: cfg.memory_factor.max(1), word: Arc::from(WORD) }
    }
}

/// MIG profile choice, as HAMi makes it: the smallest profile that holds the request and has a free
/// placement.
pub mod mig {
    use super::*;

    /// Profiles by `memoryMB`, then `sliceCount` (stable).
    fn sorted(profiles: &[MigProfile]) -> Vec<&MigProfile> {
        let mut v: Vec<&MigProfile> = profiles.iter().collect();
        v.sort_by_key(|p| (p.memory_mb, p.slice_count));
        v
    }

    /// The first profile with enough memory that still has a free placement. Small `1g.*` and
    /// `3g.*` instances are placed from the top so large ones stay placeable.
    pub fn choose<'p>(
        profiles: &'p [MigProfile],
        occupied: &[MigPlacement],
        m: MemMiB,
    ) -> Option<(&'p MigProfile, MigPlacement)> {
        for p in sorted(profiles) {
            if u64::from(p.memory_mb) < m.get() {
                continue;
            }
            let mut pls = p.placements.clone();
            if p.name.starts_with("1g.") || p.name.starts_with("3g.") {
                pls.sort_by_key(|a| std::cmp::Reverse(a.start));
            } else {
                pls.sort_by_key(|a| a.start);
            }
            if let Some(pl) = pls.into_iter().find(|pl| pl.size > 0 && !occupied.iter().any(|o| o.overlaps(*pl))) {
                return Some((p, pl));
            }
        }
        None
    }

    /// Check 15: replays the choices of this walk's earlier picks on the device, then needs one more.
    pub fn feasible(d: &DeviceUsage, m: MemMiB, mine: &[&Pick]) -> bool {
        let mut occ: Vec<MigPlacement> = d.mig_used.iter().map(|s| s.placement).collect();
        for p in mine {
            match choose(&d.info.mig_profiles, &occ, p.dev.usedmem) {
                Some((_, pl)) => occ.push(pl),
                None => return false,
            }
        }
        choose(&d.info.mig_profiles, &occ, m).is_some()
    }
}

/// Topology-aware choice among all fitting devices, by the node's pair scores: one device goes
/// where it is least linked, leaving well-linked GPUs for multi-GPU pods; more take the best-linked
/// set.
fn topology_choice(picks: &mut Vec<Pick>, n: usize, scores: &PairScores) {
    if picks.len() <= n {
        return;
    }
    // A MIG GPU is collected once per free instance. As HAMi does, keep only its first entry when
    // enough distinct GPUs remain: otherwise the pair scores (0 within one GPU) can put every
    // instance on one card, and the subsets to weigh grow with every free slice.
    let mut distinct: Vec<usize> = Vec::with_capacity(picks.len());
    for (i, p) in picks.iter().enumerate() {
        if !distinct.iter().any(|&j| picks[j].dev.uuid == p.dev.uuid) {
            distinct.push(i);
        }
    }
    if distinct.len() < picks.len() && distinct.len() >= n {
        let mut k = 0;
        picks.retain(|_| {
            let keep = distinct.contains(&k);
            k += 1;
            keep
        });
        if picks.len() <= n {
            return;
        }
    }
    let id = |p: &Pick| p.dev.uuid.as_str().to_owned();
    if n == 1 {
        let mut best = 0;
        let mut best_score = i64::MAX;
        for (i, a) in picks.iter().enumerate() {
            let s: i64 =
                picks.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, b)| scores.score(&id(a), &id(b))).sum();
            if s < best_score {
                best_score = s;
                best = i;
            }
        }
        let chosen = picks[best].clone();
        picks.clear();
        picks.push(chosen);
        return;
    }
    // Lexicographic n-subsets of collection positions; the first maximum wins. Pair scores are
    // precomputed so each subset costs only additions.
    let c = picks.len();
    let pair: Vec<Vec<i64>> =
        (0..c).map(|i| (0..c).map(|j| scores.score(&id(&picks[i]), &id(&picks[j]))).collect()).collect();
    let mut idx: Vec<usize> = (0..n).collect();
    let mut best = idx.clone();
    let mut best_score = i64::MIN;
    // Guard the enumeration for implausibly large nodes: beyond it, the first subset stands.
    let mut budget: u32 = 200_000;
    loop {
        let mut s = 0i64;
        for a in 0..n {
            for b in a + 1..n {
                s += pair[idx[a]][idx[b]];
            }
        }
        if s > best_score {
            best_score = s;
            best.clone_from(&idx);
        }
        budget -= 1;
        // next combination
        let mut k = n;
        while k > 0 && idx[k - 1] == c - n + k - 1 {
            k -= 1;
        }
        if k == 0 || budget == 0 {
            break;
        }
        idx[k - 1] += 1;
        for j in k..n {
            idx[j] = idx[j - 1] + 1;
        }
    }
    let chosen: Vec<Pick> = best.iter().map(|&i| picks[i].clone()).collect();
    *picks = chosen;
}

fn is_mig_request(cx: &FitCx<'_>) -> bool {
    let mode_allows = cx.params_as::<Params>().and_then(|p| p.vgpu_mode.as_deref()).is_none_or(|m| m.contains("mig"));
    mode_allows && cx.order.iter().any(|&p| cx.devs[usize::from(p)].info.is_mig())
}

impl Vendor for Nvidia {
    fn names(&self) -> Names<'_> {
        let c = &self.cfg;
        Names::new(WORD, &c.resource_count_name, &c.resource_memory_name, &c.resource_core_name, self.factor)
    }

    fn resource_names(&self) -> Vec<String> {
        let c = &self.cfg;
        let (count, pct, prio) =
            (&c.resource_count_name, &c.resource_memory_percentage_name, &c.resource_priority_name);
        common::names(&[count, &c.resource_memory_name, pct, &c.resource_core_name, prio])
    }

    /// Count, memory (times the memory factor), percentage and cores of one container. Every
    /// quantity that is given must be usable (see [`quantities`]). The percentage must be an
    /// integer; as in HAMi, one above 100 reads as 100 (the whole card) and one of 0 or less as
    /// not given. The webhook refuses both, so only pods created past it carry them.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        let cfg = &self.cfg;
        let Some(nums) = quantities::count(c, &cfg.resource_count_name)? else { return Ok(None) };
        let mut memreq = quantities::memory(c, &cfg.resource_memory_name, self.factor)?;
        let pct_name = &cfg.resource_memory_percentage_name;
        let mut mempct = match quantities::int_in(quantities::given(c, pct_name), pct_name, i64::MIN..=i64::MAX)? {
            None => MEMPCT_UNSET,
            Some(p) if p <= 0 => MEMPCT_UNSET,
            Some(p) => p.min(100) as u32,
        };
        if mempct == MEMPCT_UNSET && memreq == 0 {
            if cfg.default_memory != 0 {
                memreq = cfg.default_memory;
            } else {
                mempct = 100;
            }
        }
        let cores = quantities::cores(c, &cfg.resource_core_name, cfg.default_cores)?;
        Ok(Some(ContainerRequest { vendor: id, nums, memreq: MemMiB(memreq), mempct, cores, mode: 0 }))
    }

    fn selects(&self, params: Option<&VendorParams>, ty: &str, uuid: &str) -> bool {
        super::params_allow(params, |p: &Params| {
            (p.types.is_empty() || p.types.allows(ty)) && (p.uuids.is_empty() || p.uuids.allows(uuid))
        })
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        let a = |k: &str| pod.annotation(k);
        Some(Arc::new(Params {
            types: Selection::types(a(keys::NVIDIA_USE_TYPE), a(keys::NVIDIA_NOUSE_TYPE)),
            uuids: Selection::uuids(a(keys::NVIDIA_USE_UUID), a(keys::NVIDIA_NOUSE_UUID)),
            vgpu_mode: a(keys::NVIDIA_VGPU_MODE).map(str::to_owned),
            numa_bind: a(keys::NVIDIA_NUMA_BIND).is_some_and(|v| codec::parse_go_bool(v).unwrap_or(false)),
        }))
    }

    /// HAMi's webhook rules for NVIDIA containers.
    fn mutate(&self, c: &mut ContainerEdit<'_>, pod: &mut PodContext<'_>) -> Result<bool, Unusable> {
        let cfg = &self.cfg;
        let pct_name = &cfg.resource_memory_percentage_name;
        if !pct_name.is_empty()
            && let Some(v) = c.quantity(pct_name)
        {
            let ok = codec_int(&v).is_some_and(|p| (0..=100).contains(&p));
            if !ok {
                return Err(format!(
                    "invalid {pct_name} value {v} in container {}: must be an integer between 0 and 100",
                    c.name()
                )
                .into());
            }
        }
        // HAMi PR 2784: cores outside 0–100 are refused at admission (Filter still clamps what
        // reaches it, as HAMi's scheduler at the basis does).
        let cores_name = &cfg.resource_core_name;
        if !cores_name.is_empty()
            && let Some(v) = c.quantity(cores_name)
            && !codec_int(&v).is_some_and(|k| (0..=100).contains(&k))
        {
            return Err(format!(
                "invalid {cores_name} value {v} in container {}: must be an integer between 0 and 100",
                c.name()
            )
            .into());
        }
        if !cfg.resource_priority_name.is_empty()
            && let Some(p) = c.limit(&cfg.resource_priority_name)
        {
            c.push_env("CUDA_TASK_PRIORITY", &p);
        }
        if !cfg.gpu_core_policy.is_empty() && cfg.gpu_core_policy != "default" {
            c.push_env("GPU_CORE_UTILIZATION_POLICY", &cfg.gpu_core_policy);
        }
        let named = |n: &String| !n.is_empty();
        let mut recognised = named(&cfg.resource_count_name) && c.has_limit(&cfg.resource_count_name);
        if !recognised
            && cfg.default_gpu_num > 0
            && named(&cfg.resource_count_name)
            && [&cfg.resource_core_name, &cfg.resource_memory_name, pct_name]
                .into_iter()
                .any(|n| named(n) && c.has_limit(n))
        {
            c.set_limit(&cfg.resource_count_name, &cfg.default_gpu_num.to_string());
            recognised = true;
        }
        if named(&cfg.resource_count_name)
            && c.has_any(&cfg.resource_count_name)
            && named(&cfg.resource_core_name)
            && !c.has_any(&cfg.resource_core_name)
        {
            let whole = if named(pct_name) && c.has_any(pct_name) {
                c.quantity(pct_name).as_deref().and_then(codec_int) == Some(100)
            } else {
                !named(&cfg.resource_memory_name) || !c.has_any(&cfg.resource_memory_name)
            };
            if whole {
                c.set_limit(&cfg.resource_core_name, "100");
                recognised = true;
            }
        }
        if recognised {
            pod.default_runtime_class(&cfg.runtime_class_name);
        } else if cfg.overwrite_env {
            c.push_env("NVIDIA_VISIBLE_DEVICES", "none");
        }
        Ok(recognised)
    }

    fn discover(&self, node: &NodeView) -> Discovery {
        common::registered(node, keys::NVIDIA_REGISTER, |devices| {
            let scores = match node.annotation(keys::NVIDIA_SCORE) {
                None => PairScores::default(),
                Some(s) => match codec::decode_pair_scores(s) {
                    Ok(p) => p,
                    Err(error) => return Discovery::Malformed { key: keys::NVIDIA_SCORE.into(), error },
                },
            };
            let cordon = node.annotation(keys::NVIDIA_CORDON).map(codec::parse_list).unwrap_or_default();
            Discovery::Devices { devices, extra: Some(Arc::new(Extra { cordon, scores })) }
        })
    }

    fn health_rule(&self) -> HealthRule {
        HealthRule::Handshake {
            key: keys::NVIDIA_HANDSHAKE.into(),
            count_resource: self.cfg.resource_count_name.clone(),
        }
    }

    fn cleanup(&self) -> Cleanup {
        Cleanup::RemoveAnnotation(keys::NVIDIA_HANDSHAKE.into())
    }

    fn count_check_exempt(&self, cx: &FitCx<'_>) -> bool {
        is_mig_request(cx)
    }

    fn cordoned<'a>(&self, extra: Option<&'a (dyn std::any::Any + Send + Sync)>) -> &'a [String] {
        extra.and_then(|e| e.downcast_ref::<Extra>()).map_or(&[], |e| &e.cordon)
    }

    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = cx.params_as::<Params>();
        let extra = cx.extra.and_then(|e| e.downcast_ref::<Extra>());
        // The device's registration is read only when the pod selects by it (see `Capacity`).
        let type_ok = |d: &DeviceUsage| {
            p.is_none_or(|p| {
                (p.types.is_empty() || p.types.allows(&d.info.ty))
                    && p.vgpu_mode.as_deref().is_none_or(|m| m.contains(&*d.info.mode))
            })
        };
        let uuid_ok = |d: &DeviceUsage| p.is_none_or(|p| p.uuids.is_empty() || p.uuids.allows(d.info.id.as_str()));
        let mig_check = |d: &DeviceUsage, m: MemMiB, mine: &[&Pick]| mig::feasible(d, m, mine);
        let topology = cx.pod.gpu_policy.topology_aware;
        let rules = Rules {
            cordon: extra.map_or(&[][..], |e| &e.cordon[..]),
            type_ok: &type_ok,
            numa_bind: p.is_some_and(|p| p.numa_bind),
            uuid_ok: &uuid_ok,
            quota: true,
            mig: Some(&mig_check),
            collect_all: topology,
            ..Rules::basic(&self.word)
        };
        let start = out.len();
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)?;
        if topology {
            let mut chosen = out.split_off(start);
            let empty = PairScores::default();
            topology_choice(&mut chosen, cx.req.nums as usize, extra.map_or(&empty, |e| &e.scores));
            out.extend(chosen);
        }
        Ok(())
    }

    fn charge(&self, dev: &mut DeviceUsage, entry: &mut ContainerDevice, _pod: &crate::model::PodRequest) {
        if dev.info.is_mig() {
            let occ: Vec<MigPlacement> = dev.mig_used.iter().map(|s| s.placement).collect();
            if let Some((p, pl)) = mig::choose(&dev.info.mig_profiles, &occ, entry.usedmem) {
                entry.usedmem = MemMiB(u64::from(p.memory_mb));
                entry.usedcores = p.core;
                let slot = MigSlot { profile: p.name.clone(), placement: pl };
                dev.mig_used.push(slot.clone());
                entry.mig = Some(slot);
            }
        }
        dev.used = dev.used.saturating_add(1);
        dev.used_mem += entry.usedmem;
        dev.used_cores = dev.used_cores.saturating_add(entry.usedcores);
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::NVIDIA_ALLOCATED)
    }

    fn pod_keys(&self) -> Vec<String> {
        [keys::NVIDIA_TO_ALLOCATE, keys::NVIDIA_ALLOCATED, keys::NVIDIA_MIG_ALLOCATIONS].map(String::from).to_vec()
    }

    /// The MIG reservations too, beyond HAMi's list: a pod created with them would hold MIG
    /// placements that no decision gave it.
    fn decision_keys(&self) -> Vec<String> {
        self.pod_keys()
    }

    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        let v = codec::encode_pod_devices(cx.devices);
        out.push((keys::NVIDIA_TO_ALLOCATE.into(), v.clone()));
        out.push((keys::NVIDIA_ALLOCATED.into(), v));
        let mig: Vec<MigAllocation> = cx
            .devices
            .iter()
            .enumerate()
            .flat_map(|(ci, c)| {
                c.iter().enumerate().filter_map(move |(di, d)| {
                    d.mig.as_ref().map(|s| MigAllocation {
                        container_index: ci as u32,
                        device_index: di as u32,
                        gpu_uuid: d.uuid.to_string(),
                        profile: s.profile.to_string(),
                        placement: s.placement,
                        mig_uuid: None,
                        gpu_instance_id: None,
                        compute_instance_id: None,
                    })
                })
            })
            .collect();
        if !mig.is_empty() {
            out.push((keys::NVIDIA_MIG_ALLOCATIONS.into(), codec::encode_mig_allocations(&mig)));
        }
    }

    /// Reads the allocated key and attaches MIG instances from `hami.io/vgpu-mig-allocations`
    /// (an invalid value is ignored, as HAMi does; an entry whose position is gone attaches to the
    /// first free entry on its GPU; what is left over is read by `decode_held`).
    fn decode_allocation(&self, pod: &PodView) -> Result<Option<Vec<ContainerDevices>>, codec::Error> {
        let Some(v) = pod.annotation(keys::NVIDIA_ALLOCATED) else { return Ok(None) };
        let mut cs = codec::decode_pod_devices(v)?;
        attach_mig(pod, &mut cs);
        Ok(Some(cs))
    }

    /// MIG reservations no device entry consumed, on GPUs the pod has an entry on or not: HAMi
    /// keeps their placements taken.
    fn decode_held(&self, pod: &PodView) -> Vec<(DeviceUuid, MigSlot)> {
        if pod.annotation(keys::NVIDIA_MIG_ALLOCATIONS).is_none() {
            return Vec::new();
        }
        let mut cs =
            pod.annotation(keys::NVIDIA_ALLOCATED).and_then(|v| codec::decode_pod_devices(v).ok()).unwrap_or_default();
        attach_mig(pod, &mut cs)
    }
}

/// Attaches each MIG reservation to its entry (or the first entry on its GPU without one) and
/// returns those that found none.
fn attach_mig(pod: &PodView, cs: &mut [ContainerDevices]) -> Vec<(DeviceUuid, MigSlot)> {
    let mut left = Vec::new();
    let Some(allocs) = pod.annotation(keys::NVIDIA_MIG_ALLOCATIONS).and_then(|m| codec::decode_mig_allocations(m).ok())
    else {
        return left;
    };
    for a in allocs {
        let slot = MigSlot { profile: Arc::from(a.profile.as_str()), placement: a.placement };
        let exact = cs
            .get_mut(a.container_index as usize)
            .and_then(|c| c.get_mut(a.device_index as usize))
            .filter(|d| d.uuid.as_str() == a.gpu_uuid && d.mig.is_none());
        if let Some(d) = exact {
            d.mig = Some(slot);
        } else if let Some(d) = cs.iter_mut().flatten().find(|d| d.uuid.as_str() == a.gpu_uuid && d.mig.is_none()) {
            d.mig = Some(slot);
        } else {
            left.push((DeviceUuid::new(&a.gpu_uuid), slot));
        }
    }
    left
}

fn codec_int(s: &str) -> Option<i64> {
    crate::model::quantity::Quantity::parse(s).ok()?.as_i64_exact()
}

#[cfg(test)]
mod tests;
