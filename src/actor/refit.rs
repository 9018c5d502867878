//! `Engine::refit`: the NUMA refit the NVIDIA device plugin asks for when kubelet's
//! NUMA-aligned choice does not hold the devices the scheduler annotated. The request is checked,
//! the node actor that holds the pod re-fits the container onto the allowed devices and holds
//! the move, the two annotations are written, and the actor keeps or rolls back the move.
//!
//! ```text
//!  checks ─▶ Refit (node actor: checks, re-fit, hold old+new) ─▶ patch the two annotations
//!        ─▶ RefitSettle { written } (keep new, or restore old) ─▶ Event
//! ```

use super::Inner;
use super::messages::{Refit, RefitAsk, RefitFailure, RefitPlan, RefitSettle};
use crate::model::PodUid;
use crate::model::annotations as keys;
use crate::port::{self, Backend, EventType, PodPatch, PodRef, reasons};
use std::sync::Arc;

use crate::model::numa_alignment::{go_list, go_quote};

/// The most allowed device ids a request may carry.
pub const MAX_ALLOWED_DEVICES: usize = 512;

/// The one vendor the refit supports.
const REFIT_VENDOR: &str = "NVIDIA";

/// A refit request as the device plugin sends it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RefitArgs {
    pub pod_uid: String,
    pub pod_namespace: String,
    pub pod_name: String,
    pub node_name: String,
    /// The container's position among the pod's containers, init containers first (the
    /// position of its entry in the allocation annotations).
    pub container_index: i64,
    pub container_name: String,
    pub device_type: String,
    pub allowed_device_uuids: Vec<String>,
}

/// How a refit ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefitOutcome {
    /// Moved; the container's new devices as one annotation entry.
    Moved(String),
    /// Every device held is allowed already; the container's devices as one annotation entry.
    Unchanged(String),
    Refused(String),
}

impl RefitOutcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            RefitOutcome::Moved(_) => "moved",
            RefitOutcome::Unchanged(_) => "unchanged",
            RefitOutcome::Refused(_) => "refused",
        }
    }
}

impl<B: Backend> Inner<B> {
    /// Moves one container's devices onto `allowed_device_uuids` (HAMi's `/refit`). Answers every
    /// outcome as a value; never retries. Serialised with the node's reservations by its actor,
    /// and the move is held until the annotation write settles, so a failed write gives back
    /// exactly what the pod held.
    pub async fn refit(self: &Arc<Self>, args: RefitArgs) -> RefitOutcome {
        let refused = |r: String| RefitOutcome::Refused(r);
        if args.pod_uid.is_empty()
            || args.pod_namespace.is_empty()
            || args.pod_name.is_empty()
            || args.node_name.is_empty()
        {
            return refused("incomplete refit request: pod UID, namespace, name, and node are required".into());
        }
        if args.allowed_device_uuids.is_empty() {
            return refused("refit request carries an empty allowed device set".into());
        }
        if args.allowed_device_uuids.len() > MAX_ALLOWED_DEVICES {
            return refused(format!(
                "refit request carries {} allowed devices, limit is {MAX_ALLOWED_DEVICES}",
                args.allowed_device_uuids.len()
            ));
        }
        let Some(vendor) = self.vendors.by_name(&args.device_type) else {
            return refused(format!("unknown device type {}", go_quote(&args.device_type)));
        };
        if args.device_type != REFIT_VENDOR {
            return refused(format!(
                "device type {} is not supported by the NUMA refit yet",
                go_quote(&args.device_type)
            ));
        }
        let uid = PodUid::new(&args.pod_uid);
        let not_tracked = || refused(format!("pod {} is not tracked by the scheduler", args.pod_uid));
        let Some(node) = self.nodes.placement(&uid) else { return not_tracked() };
        let Some(addr) = self.nodes.addr(node.as_str()) else { return not_tracked() };
        let pod = self.backend.pod(&args.pod_namespace, &args.pod_name);
        let request = match &pod {
            // HAMi's text for weights it cannot read; a quantity it cannot use says so itself.
            Some(p) => self.vendors.pod_request(p, &self.cfg.defaults).map(Arc::new).map_err(|e| match e {
                crate::model::request::Error::Weights(_) => format!("invalid device scoring weights: {e}"),
                other => other.to_string(),
            }),
            None => Err(String::new()),
        };
        let pod_ref =
            PodRef { namespace: args.pod_namespace.clone(), name: args.pod_name.clone(), uid: args.pod_uid.clone() };
        let ask = Arc::new(RefitAsk {
            uid: uid.clone(),
            namespace: args.pod_namespace,
            name: args.pod_name,
            node: args.node_name,
            index: args.container_index,
            container_name: args.container_name,
            vendor,
            allowed: args.allowed_device_uuids,
        });
        let plan = match addr.send(Refit { ask, pod, request }).await {
            Ok(p) => p,
            Err(e) => Err(RefitFailure { reason: format!("cannot compute node usage: {e}"), event: true }),
        };
        let mv = match plan {
            Ok(RefitPlan::Unchanged { devices }) => return RefitOutcome::Unchanged(devices),
            Ok(RefitPlan::Moved(mv)) => mv,
            Err(f) => {
                if f.event {
                    self.event(&pod_ref, reasons::NUMA_REFIT_FAILED, EventType::Warning, f.reason.clone());
                }
                return refused(f.reason);
            }
        };
        let patch = PodPatch {
            annotations: vec![
                (keys::NVIDIA_TO_ALLOCATE.into(), Some(mv.to_allocate.clone())),
                (keys::NVIDIA_ALLOCATED.into(), Some(mv.allocated.clone())),
            ],
            at_version: Some(mv.resource_version.clone()),
            ..PodPatch::default()
        };
        // The write and its settlement run on their own, so a caller that goes away cannot leave
        // the move held.
        let (backend, target) = (self.backend.clone(), pod_ref.clone());
        let written = actix::spawn(async move {
            let r = backend.patch_pod(&target, &patch).await;
            let _ = addr.send(RefitSettle { uid, written: r.is_ok() }).await;
            r
        })
        .await;
        let err = match written {
            Ok(Ok(())) => None,
            Ok(Err(port::Error::Status { message, .. })) => Some(message),
            Ok(Err(e)) => Some(e.to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(e) = err {
            let reason = format!("cannot patch pod annotations: {e}");
            self.event(&pod_ref, reasons::NUMA_REFIT_FAILED, EventType::Warning, reason.clone());
            return refused(reason);
        }
        let message =
            format!("NUMA refit moved container {} from {} to {}", mv.index, go_list(&mv.from), go_list(&mv.to));
        self.event(&pod_ref, reasons::NUMA_REFIT_SUCCEED, EventType::Normal, message);
        RefitOutcome::Moved(mv.devices)
    }
}
