//! Per-node evaluation of one pod: init containers one at a time against the running usage, native
//! sidecars and regular containers cumulatively, every vendor request of a container in turn. Pure
//! and allocation-light: buffers live in a reused [`Scratch`].

use crate::devices::{FitCx, Pick, QuotaCheck, ScoreCx, Vendors};
use crate::model::{ContainerDevices, DeviceUsage, MemMiB, PodDevices, PodRequest};

use super::NodeSnapshot;
use super::reason::Rejection;
use super::score;

/// Working buffers kept across evaluations so a filter call allocates little.
#[derive(Default)]
pub struct Scratch {
    cum: Vec<DeviceUsage>,
    tmp: Vec<DeviceUsage>,
    scores: Vec<f32>,
    /// The device order the regular containers' requests sort in turn, as HAMi's one list.
    order: Vec<u16>,
    /// The order of one init container, which HAMi sorts on its own copy of the node.
    init_order: Vec<u16>,
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

/// Evaluates `pod` on `node` exactly, as a reservation needs it: every chosen device is charged,
/// so later containers see earlier ones and MIG entries carry their profile. On success the
/// devices are in `s.result` and the node's score is returned.
pub fn fit_pod(
    node: &NodeSnapshot,
    pod: &PodRequest,
    vendors: &Vendors,
    quota: &dyn QuotaCheck,
    s: &mut Scratch,
) -> Result<f32, Rejection> {
    evaluate(node, pod, vendors, quota, s, true)
}

/// Whether and how well `pod` fits `node`, for ranking candidates. A pod with a single device
/// request is evaluated on the node's snapshot in place, without a working copy of its devices;
/// the chosen devices in `s.result` are then not charged (a MIG entry keeps the requested memory),
/// which is why the winner is evaluated again, exactly, when it is reserved.
pub fn fit_pod_score(
    node: &NodeSnapshot,
    pod: &PodRequest,
    vendors: &Vendors,
    quota: &dyn QuotaCheck,
    s: &mut Scratch,
) -> Result<f32, Rejection> {
    evaluate(node, pod, vendors, quota, s, false)
}

/// Empties `s.result` for `pod`'s vendors and containers, reusing its buffers.
fn reset_result(pod: &PodRequest, s: &mut Scratch) {
    let n = pod.containers.len();
    let vendors = pod.vendors();
    let same = s.result.0.len() == vendors.len() && s.result.0.iter().zip(vendors.iter()).all(|(a, b)| a.0 == *b);
    if !same {
        s.result.0.clear();
        s.result.0.extend(vendors.iter().map(|v| (*v, Vec::new())));
    }
    for (_, cs) in s.result.0.iter_mut() {
        cs.resize_with(n, ContainerDevices::new);
        cs.iter_mut().for_each(Vec::clear);
    }
}

fn evaluate(
    node: &NodeSnapshot,
    pod: &PodRequest,
    vendors: &Vendors,
    quota: &dyn QuotaCheck,
    s: &mut Scratch,
    exact: bool,
) -> Result<f32, Rejection> {
    if node.unusable.is_some() {
        return Err(Rejection::NodeUnusable);
    }
    if node.devices.is_empty() {
        return Err(Rejection::NodeUnregistered);
    }
    let on = On { node, pod, vendors, quota };
    let n = pod.containers.len();
    let before = &node.devices;
    reset_result(pod, s);
    score::reset_order(before.len(), &mut s.order);
    let single = !exact && pod.n_init == 0 && pod.containers.iter().map(|c| c.len()).sum::<usize>() == 1;
    if single {
        // Nothing evaluated after this request can see its charges, so none are made.
        if let Some(ci) = pod.containers.iter().position(|c| !c.is_empty()) {
            fit_container(on, &mut [], false, ci, s)?;
        }
    } else {
        s.cum.clone_from(before);
        for ci in 0..n {
            if pod.containers[ci].is_empty() {
                continue;
            }
            if pod.is_plain_init(ci) {
                // A plain init container runs alone (beside the sidecars started before it), so it
                // sees the running usage but not the other init containers.
                let mut tmp = std::mem::take(&mut s.tmp);
                tmp.clone_from(&s.cum);
                let r = fit_container(on, &mut tmp, true, ci, s);
                s.tmp = tmp;
                r?;
            } else {
                let mut cum = std::mem::take(&mut s.cum);
                let r = fit_container(on, &mut cum, true, ci, s);
                s.cum = cum;
                r?;
            }
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

/// Fits one container of `pod` again (the NUMA refit): `pod` holds the request at container
/// `ci` only, and `seed` the devices of this vendor the pod's other containers hold, placed at
/// positions `0..seed.len()` before `ci`. They count towards the quota checked in the walk as
/// earlier containers of the pod do. The devices are charged on a working copy of `node`, which
/// the caller has already restricted and relieved of the container's own usage. Returns the
/// container's new devices.
pub fn refit_container(
    on: On<'_>,
    ci: usize,
    vendor: crate::model::VendorId,
    seed: &[ContainerDevices],
    s: &mut Scratch,
) -> Result<ContainerDevices, Rejection> {
    let (node, pod) = (on.node, on.pod);
    if node.unusable.is_some() {
        return Err(Rejection::NodeUnusable);
    }
    if node.devices.is_empty() {
        return Err(Rejection::NodeUnregistered);
    }
    reset_result(pod, s);
    let n = pod.containers.len();
    for (i, c) in seed.iter().enumerate().take(ci) {
        s.result.vendor_mut(vendor, n)[i].clone_from(c);
    }
    score::reset_order(node.devices.len(), &mut s.order);
    let mut cum = std::mem::take(&mut s.cum);
    cum.clone_from(&node.devices);
    let r = fit_container(on, &mut cum, true, ci, s);
    s.cum = cum;
    r?;
    Ok(s.result.vendor(vendor).and_then(|c| c.get(ci)).cloned().unwrap_or_default())
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

/// What one evaluation of a pod on a node reads throughout: the node, the pod's request, the
/// vendors and the namespace quota.
#[derive(Clone, Copy)]
pub struct On<'a> {
    pub node: &'a NodeSnapshot,
    pub pod: &'a PodRequest,
    pub vendors: &'a Vendors,
    pub quota: &'a dyn QuotaCheck,
}

/// Fits one container's requests. With `charge`, devices are read from and charged into `cum`
/// (a working copy); without it they are read from the node's snapshot and nothing is charged.
fn fit_container(
    on: On<'_>,
    cum: &mut [DeviceUsage],
    charge: bool,
    ci: usize,
    s: &mut Scratch,
) -> Result<(), Rejection> {
    let On { node, pod, vendors, quota } = on;
    let reqs = &pod.containers[ci];
    // HAMi evaluates each init container on a fresh copy of the node, in registration order.
    let fresh = ci < pod.n_init;
    if fresh {
        score::reset_order(node.devices.len(), &mut s.init_order);
    }
    {
        let devs: &[DeviceUsage] = if charge { cum } else { &node.devices };
        s.scores.clear();
        s.scores.extend(devs.iter().map(|d| score::device_score(d, reqs, &pod.weights, |v| vendors.get(v).name())));
    }
    for req in reqs {
        let vendor = vendors.get(req.vendor);
        {
            let devs: &[DeviceUsage] = if charge { cum } else { &node.devices };
            let order = if fresh { &mut s.init_order } else { &mut s.order };
            score::order_devices(devs, &s.scores, &pod.gpu_policy, order);
            s.cands.clear();
            s.cands.extend(order.iter().copied().filter(|&p| devs[usize::from(p)].vendor == req.vendor));
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
        }
        let slot = s.result.vendor_mut(req.vendor, pod.containers.len());
        let entry = &mut slot[ci];
        if charge {
            for p in s.picks.iter_mut() {
                vendor.charge(&mut cum[usize::from(p.pos)], &mut p.dev, pod);
            }
        }
        entry.extend(s.picks.drain(..).map(|p| p.dev));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
