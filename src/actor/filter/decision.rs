//! The decision written onto a pod: the one merge patch HAMi's filter writes (node, time, every
//! chosen vendor's keys, the node label, and `null` for keys of vendors not chosen this time).
//! A pure function of the choice; Filter or Bind writes it, as configured.

use crate::devices::{Vendors, WriteCx};
use crate::model::annotations as keys;
use crate::model::{DeviceUsage, NodeName, PodDevices, PodRequest};
use crate::port::PodPatch;

/// Label values are at most 63 characters; HAMi's patch fails for longer node names, so such
/// nodes never get pods. hami-rs writes the annotation and skips the label instead.
pub const MAX_LABEL_VALUE: usize = 63;

/// The patch that records `devices` on `node` for the pod, at `unix` (seconds, nanoseconds).
/// `devs` is the node's device list, which some vendors' annotations name devices from.
pub fn decision_patch(
    vendors: &Vendors,
    node: &NodeName,
    devs: &[DeviceUsage],
    req: &PodRequest,
    devices: &PodDevices,
    unix: (i64, i128),
) -> PodPatch {
    let (unix_s, unix_ns) = unix;
    let mut annotations: Vec<(String, String)> =
        vec![(keys::ASSIGNED_NODE.into(), node.to_string()), (keys::ASSIGNED_TIME.into(), unix_s.to_string())];
    for (v, cs) in &devices.0 {
        vendors.get(*v).annotations(&WriteCx { node, devs, devices: cs, pod: req, unix_s, unix_ns }, &mut annotations);
    }
    let mut patch =
        PodPatch { annotations: annotations.into_iter().map(|(k, v)| (k, Some(v))).collect(), ..PodPatch::default() };
    for k in vendors.pod_keys() {
        if req.annotations.contains_key(k) && !patch.annotations.iter().any(|(w, _)| w == k) {
            patch.annotations.push((k.clone(), None));
        }
    }
    if node.as_str().len() <= MAX_LABEL_VALUE {
        patch.labels.push((keys::ASSIGNED_NODE.into(), node.to_string()));
    }
    patch
}
