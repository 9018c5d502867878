//! Per-node evaluation of one pod (scheduling.md §5.3, §5.4): init containers one at a time
//! against the running usage, native sidecars and regular containers cumulatively, every vendor
//! request of a container in turn. Pure and allocation-light: buffers live in a reused [`Scratch`].

use crate::model::{ContainerDevices, DeviceUsage, MemMiB, PodDevices, PodRequest};
use crate::vendor::{FitCx, Pick, QuotaCheck, ScoreCx, Vendors};

use super::NodeSnapshot;
use super::reason::Rejection;
use super::score;

/// Working buffers kept across evaluations so a filter call allocates little.
#[derive(Default)]
pub struct Scratch {
    cum: Vec<DeviceUsage>,
    tmp: Vec<DeviceUsage>,
    peak: Vec<(u32, MemMiB, u32)>,
    scores: Vec<f32>,
    order: Vec<u16>,
    cands: Vec<u16>,
    picks: Vec<Pick>,
    /// The devices of the last successful evaluation.
    pub result: PodDevices,
}

/// A node that can take the pod.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFit {
    pub score: f32,
    pub devices: PodDevices,
}

/// Evaluates `pod` on `node`. On success the chosen devices are in `s.result` and the node's
/// score is returned; the caller decides whether it needs a copy of the devices.
pub fn fit_pod(
    node: &NodeSnapshot,
    pod: &PodRequest,
    vendors: &Vendors,
    quota: &dyn QuotaCheck,
    s: &mut Scratch,
) -> Result<f32, Rejection> {
    if node.unusable.is_some() {
        return Err(Rejection::NodeUnusable);
    }
    if node.devices.is_empty() {
        return Err(Rejection::NodeUnregistered);
    }
    let n = pod.containers.len();
    let before = &node.devices;
    s.result.0.retain(|_| false);
    for v in pod.vendors() {
        s.result.0.push((v, vec![ContainerDevices::new(); n]));
    }
    s.cum.clone_from(before);
    s.peak.clear();
    s.peak.resize(before.len(), (0, MemMiB::ZERO, 0));

    for ci in 0..n {
        if pod.containers[ci].is_empty() {
            continue;
        }
        if pod.is_plain_init(ci) {
            // A plain init container runs alone (beside the sidecars started before it), so it
            // sees the running usage but not the other init containers.
            let mut tmp = std::mem::take(&mut s.tmp);
            tmp.clone_from(&s.cum);
            let r = fit_container(node, &mut tmp, ci, pod, vendors, quota, s);
            for (p, d) in s.peak.iter_mut().zip(tmp.iter()) {
                p.0 = p.0.max(d.used);
                p.1 = p.1.max(d.used_mem);
                p.2 = p.2.max(d.used_cores);
            }
            s.tmp = tmp;
            r?;
        } else {
            let mut cum = std::mem::take(&mut s.cum);
            let r = fit_container(node, &mut cum, ci, pod, vendors, quota, s);
            s.cum = cum;
            r?;
        }
    }

    let mut total = score::node_default_score(before);
    for (v, devices) in &s.result.0 {
        total += vendors.get(*v).node_score(&ScoreCx {
            node: &node.name,
            extra: node.extra(*v),
            before,
            devices,
            pod,
            policy: pod.node_policy,
        });
    }
    Ok(total)
}

/// `fit_pod`, returning a copy of the chosen devices.
pub fn fit_pod_devices(
    node: &NodeSnapshot,
    pod: &PodRequest,
    vendors: &Vendors,
    quota: &dyn QuotaCheck,
    s: &mut Scratch,
) -> Result<NodeFit, Rejection> {
    let score = fit_pod(node, pod, vendors, quota, s)?;
    Ok(NodeFit { score, devices: s.result.clone() })
}

/// Memory and cores of `vendor` the pod holds so far in this evaluation: regular containers
/// summed, init containers as a peak (for the quota check).
fn pod_usage_so_far(pod: &PodRequest, result: &PodDevices, vendor: crate::model::VendorId) -> (MemMiB, u32) {
    let Some(cs) = result.vendor(vendor) else { return (MemMiB::ZERO, 0) };
    let (mut app_m, mut app_c, mut init_m, mut init_c) = (MemMiB::ZERO, 0u32, MemMiB::ZERO, 0u32);
    for (i, c) in cs.iter().enumerate() {
        let m = c.iter().fold(MemMiB::ZERO, |a, d| a + d.usedmem);
        let k: u32 = c.iter().map(|d| d.usedcores).sum();
        if pod.is_plain_init(i) {
            init_m = init_m.max(m);
            init_c = init_c.max(k);
        } else {
            app_m += m;
            app_c = app_c.saturating_add(k);
        }
    }
    (app_m.max(init_m), app_c.max(init_c))
}

fn fit_container(
    node: &NodeSnapshot,
    devs: &mut [DeviceUsage],
    ci: usize,
    pod: &PodRequest,
    vendors: &Vendors,
    quota: &dyn QuotaCheck,
    s: &mut Scratch,
) -> Result<(), Rejection> {
    let reqs = &pod.containers[ci];
    s.scores.clear();
    s.scores.extend(devs.iter().map(|d| score::device_score(d, reqs, &pod.weights)));
    for req in reqs {
        score::order_devices(devs, &s.scores, &pod.gpu_policy, &mut s.order);
        s.cands.clear();
        s.cands.extend(s.order.iter().copied().filter(|&p| devs[usize::from(p)].vendor == req.vendor));
        let vendor = vendors.get(req.vendor);
        let (pod_mem, pod_cores) = pod_usage_so_far(pod, &s.result, req.vendor);
        let earlier = s.result.vendor(req.vendor).map_or(&[][..], |c| &c[..ci.min(c.len())]);
        let cx = FitCx {
            node: &node.name,
            devs,
            order: &s.cands,
            req: *req,
            pod,
            params: pod.params(req.vendor).map(|p| &**p),
            extra: node.extra(req.vendor),
            container: ci,
            earlier,
            quota,
            pod_mem,
            pod_cores,
        };
        if req.nums as usize > s.cands.len() && !vendor.count_check_exempt(&cx) {
            return Err(Rejection::NodeInsufficientDevice { requested: req.nums, available: s.cands.len() as u16 });
        }
        s.picks.clear();
        vendor.fit(&cx, &mut s.picks)?;
        let slot = s.result.vendor_mut(req.vendor, pod.containers.len());
        let entry = &mut slot[ci];
        for p in s.picks.iter_mut() {
            vendor.charge(&mut devs[usize::from(p.pos)], &mut p.dev, pod);
            entry.push(p.dev.clone());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
