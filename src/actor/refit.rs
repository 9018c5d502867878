//! `Engine::refit`: the NUMA refit the NVIDIA device plugin asks for when kubelet's
//! NUMA-aligned choice does not hold the devices the scheduler annotated. The request is checked,
//! the node actor that holds the pod re-fits the container onto the allowed devices and holds
//! the move, the two annotations are written, and the actor keeps or rolls back the move.
//!
//! One call is a `RefitCx` (the pod, its node actor), whose steps read top to bottom:
//!
//! ```text
//!  check ─▶ of (the pod's node) ─▶ plan: Refit (node actor: checks, re-fit, hold old+new)
//!        ─▶ write: patch the two annotations ─▶ RefitSettle { written } (keep new, or restore
//!           old) ─▶ Event
//! ```

use crate::actor::Inner;
use crate::actor::messages::{Refit, RefitAsk, RefitFailure, RefitMove, RefitPlan, RefitSettle};
use crate::actor::node::NodeAddr;
use crate::model::annotations as keys;
use crate::model::{PodUid, VendorId};
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
        match RefitCx::run(self, args).await {
            Ok(outcome) => outcome,
            Err(reason) => RefitOutcome::Refused(reason),
        }
    }
}

/// One refit call as its steps see it: the pod it names, the node actor that holds the pod, and
/// the request's arguments.
struct RefitCx<'a, B: Backend> {
    e: &'a Arc<Inner<B>>,
    uid: PodUid,
    pod: PodRef,
    addr: NodeAddr,
}

impl<'a, B: Backend> RefitCx<'a, B> {
    /// The steps: the request's checks, the pod's node, the node's plan, the write, the Event.
    async fn run(e: &'a Arc<Inner<B>>, args: RefitArgs) -> Result<RefitOutcome, String> {
        let vendor = check(e, &args)?;
        let cx = RefitCx::of(e, &args)?;
        let mv = match cx.plan(args, vendor).await? {
            RefitPlan::Unchanged { devices } => return Ok(RefitOutcome::Unchanged(devices)),
            RefitPlan::Moved(mv) => mv,
        };
        cx.write(&mv).await?;
        let message =
            format!("NUMA refit moved container {} from {} to {}", mv.index, go_list(&mv.from), go_list(&mv.to));
        cx.e.event(&cx.pod, reasons::NUMA_REFIT_SUCCEED, EventType::Normal, message);
        Ok(RefitOutcome::Moved(mv.devices))
    }

    /// The pod's node actor, from the placement the engine keeps.
    fn of(e: &'a Arc<Inner<B>>, args: &RefitArgs) -> Result<RefitCx<'a, B>, String> {
        let uid = PodUid::new(&args.pod_uid);
        let not_tracked = || format!("pod {} is not tracked by the scheduler", args.pod_uid);
        let node = e.nodes.placement(&uid).ok_or_else(not_tracked)?;
        let addr = e.nodes.addr(node.as_str()).ok_or_else(not_tracked)?;
        let pod =
            PodRef { namespace: args.pod_namespace.clone(), name: args.pod_name.clone(), uid: args.pod_uid.clone() };
        Ok(RefitCx { e, uid, pod, addr })
    }

    /// The node actor checks the pod and the container, re-fits it onto the allowed devices and
    /// holds the move (old and new devices) until the write settles.
    async fn plan(&self, args: RefitArgs, vendor: VendorId) -> Result<RefitPlan, String> {
        let e = self.e;
        let pod = e.backend.pod(&args.pod_namespace, &args.pod_name);
        let request = match &pod {
            // HAMi's text for weights it cannot read; a quantity it cannot use says so itself.
            Some(p) => e.vendors.pod_request(p, &e.cfg.defaults).map(Arc::new).map_err(|err| match err {
                crate::model::request::Error::Weights(_) => format!("invalid device scoring weights: {err}"),
                other => other.to_string(),
            }),
            None => Err(String::new()),
        };
        let ask = Arc::new(RefitAsk {
            uid: self.uid.clone(),
            namespace: args.pod_namespace,
            name: args.pod_name,
            node: args.node_name,
            index: args.container_index,
            container_name: args.container_name,
            vendor,
            allowed: args.allowed_device_uuids,
        });
        let plan = match self.addr.send(Refit { ask, pod, request }).await {
            Ok(p) => p,
            Err(err) => Err(RefitFailure { reason: format!("cannot compute node usage: {err}"), event: true }),
        };
        plan.map_err(|f| {
            if f.event {
                e.event(&self.pod, reasons::NUMA_REFIT_FAILED, EventType::Warning, f.reason.clone());
            }
            f.reason
        })
    }

    /// Writes the two annotations at the version the plan read, and tells the node actor
    /// whether they were written (it keeps the new devices or restores the old). The write and
    /// its settlement run on their own, so a caller that goes away cannot leave the move held.
    async fn write(&self, mv: &RefitMove) -> Result<(), String> {
        let patch = PodPatch {
            annotations: vec![
                (keys::NVIDIA_TO_ALLOCATE.into(), Some(mv.to_allocate.clone())),
                (keys::NVIDIA_ALLOCATED.into(), Some(mv.allocated.clone())),
            ],
            at_version: Some(mv.resource_version.clone()),
            ..PodPatch::default()
        };
        let (backend, target, addr, uid) =
            (self.e.backend.clone(), self.pod.clone(), self.addr.clone(), self.uid.clone());
        let written = actix::spawn(async move {
            let r = backend.patch_pod(&target, &patch).await;
            let _ = addr.send(RefitSettle { uid, written: r.is_ok() }).await;
            r
        })
        .await;
        let err = match written {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(port::Error::Status { message, .. })) => message,
            Ok(Err(err)) => err.to_string(),
            Err(err) => err.to_string(),
        };
        let reason = format!("cannot patch pod annotations: {err}");
        self.e.event(&self.pod, reasons::NUMA_REFIT_FAILED, EventType::Warning, reason.clone());
        Err(reason)
    }
}

/// The request's own checks, before any node is asked: what it names, how many devices it
/// allows, and the vendor (NVIDIA only).
fn check<B: Backend>(e: &Inner<B>, args: &RefitArgs) -> Result<VendorId, String> {
    if args.pod_uid.is_empty() || args.pod_namespace.is_empty() || args.pod_name.is_empty() || args.node_name.is_empty()
    {
        return Err("incomplete refit request: pod UID, namespace, name, and node are required".into());
    }
    if args.allowed_device_uuids.is_empty() {
        return Err("refit request carries an empty allowed device set".into());
    }
    if args.allowed_device_uuids.len() > MAX_ALLOWED_DEVICES {
        return Err(format!(
            "refit request carries {} allowed devices, limit is {MAX_ALLOWED_DEVICES}",
            args.allowed_device_uuids.len()
        ));
    }
    let Some(vendor) = e.vendors.by_name(&args.device_type) else {
        return Err(format!("unknown device type {}", go_quote(&args.device_type)));
    };
    if args.device_type != REFIT_VENDOR {
        return Err(format!("device type {} is not supported by the NUMA refit yet", go_quote(&args.device_type)));
    }
    Ok(vendor)
}
