//! The NUMA refit on the node that holds the pod: the checks that need the pod's allocation, the
//! restricted re-fit and the held move (see [`Refit`]). The actor's mailbox serialises it with
//! every reservation of the node, so concurrent refits and filters cannot both take a device.

use std::collections::HashSet;

use crate::actor::messages::{Refit, RefitFailure, RefitMove, RefitPlan, RefitSettle};
use crate::actor::node::core::{NodeCore, PendingRefit};
use crate::actor::scratch::with_scratch;
use crate::devices::{NoQuota, QuotaCheck};
use crate::model::annotations as keys;
use crate::model::codec;
use crate::model::numa_alignment::{encode_container_devices, go_quote, replace_entry};
use crate::model::request::{ContainerRequest, ContainerRequests};
use crate::sched::accounting;
use crate::sched::quota_book::usage_of;
use crate::sched::{NodeSnapshot, Rejection, fit};

fn quiet(reason: String) -> RefitFailure {
    RefitFailure { reason, event: false }
}

fn loud(reason: String) -> RefitFailure {
    RefitFailure { reason, event: true }
}

impl NodeCore {
    /// The checks and the re-fit, in HAMi's order (which decides which reason a request gets).
    pub(super) fn refit(&mut self, msg: &Refit) -> Result<RefitPlan, RefitFailure> {
        let ask = &*msg.ask;
        let not_tracked = || quiet(format!("pod {} is not tracked by the scheduler", ask.uid));
        let a = self.ledger.get(&ask.uid).ok_or_else(not_tracked)?;
        let parts = self.parts(&ask.uid, a).ok_or_else(not_tracked)?;
        if *parts.namespace != *ask.namespace || *parts.name != *ask.name {
            return Err(quiet(format!("pod {} does not match {}/{}", ask.uid, ask.namespace, ask.name)));
        }
        // The annotations and containers are read from the backend's copy: it must be this pod.
        let pod = match &msg.pod {
            Some(p) if p.metadata.uid == ask.uid.as_str() => p.clone(),
            _ => return Err(not_tracked()),
        };
        let (ns, name) = (&*parts.namespace, &*parts.name);
        if self.cfg.name.as_str() != ask.node {
            return Err(loud(format!("pod {ns}/{name} is tracked on node {}, not {}", self.cfg.name, ask.node)));
        }
        if self.refits.contains_key(&ask.uid) {
            // HAMi holds one lock over the whole refit, its write included; here a second refit of
            // the pod would rewrite annotations the first has not written yet.
            return Err(loud(format!("cannot patch pod annotations: a refit of pod {ns}/{name} is being written")));
        }
        let names: Vec<&str> = pod.all_containers().map(|c| c.name.as_str()).collect();
        let index = usize::try_from(ask.index)
            .ok()
            .filter(|i| *i < names.len())
            .ok_or_else(|| loud(format!("container index {} is outside the pod's containers", ask.index)))?;
        if !ask.container_name.is_empty() && names[index] != ask.container_name {
            return Err(loud(format!(
                "container index {index} is {}, not {}",
                go_quote(names[index]),
                go_quote(&ask.container_name)
            )));
        }
        let word = self.cfg.vendors.get(ask.vendor).name();
        // Positions come from the annotations, not from the collapsed allocation.
        let pending_raw = pod.annotation(keys::NVIDIA_TO_ALLOCATE).unwrap_or("");
        let allocated_raw = pod.annotation(keys::NVIDIA_ALLOCATED).unwrap_or("");
        let pending = codec::decode_pod_devices(pending_raw)
            .map_err(|e| loud(format!("cannot decode pending allocation annotation: {e}")))?;
        let allocated = codec::decode_pod_devices(allocated_raw)
            .map_err(|e| loud(format!("cannot decode allocated annotation: {e}")))?;
        // An empty pending entry: the device plugin's Allocate consumed it already.
        if pending.get(index).is_none_or(Vec::is_empty) {
            return Err(loud(format!("container {index} has no pending {word} allocation to refit")));
        }
        let current = match allocated.get(index) {
            Some(c) if !c.is_empty() => c.clone(),
            _ => return Err(loud(format!("container {index} has no recorded {word} allocation"))),
        };
        let allowed: HashSet<&str> = ask.allowed.iter().map(String::as_str).collect();
        if current.iter().all(|d| allowed.contains(d.uuid.as_str())) {
            return Ok(RefitPlan::Unchanged { devices: encode_container_devices(&current) });
        }
        // The re-fit asks for one amount per device.
        if current.iter().skip(1).any(|d| d.usedmem != current[0].usedmem || d.usedcores != current[0].usedcores) {
            return Err(loud(format!(
                "container {index} reserves differing amounts per device; the refit does not support heterogeneous reservations"
            )));
        }
        if self.devices.unusable.is_some() || self.devices.base.is_empty() {
            return Err(loud(format!(
                "node {} unavailable: {}",
                self.cfg.name,
                Rejection::NodeUnregistered.hami_text()
            )));
        }
        if let Some(d) = self.devices.base.iter().find(|d| allowed.contains(d.info.id.as_str()) && d.info.is_mig()) {
            return Err(loud(format!(
                "allowed device {} is in MIG mode; the NUMA refit does not support MIG",
                d.info.id
            )));
        }
        let req = msg.request.clone().map_err(loud)?;

        // The node as the re-fit sees it: the container's own devices released (its raw entry,
        // as HAMi releases it), and of this vendor only the allowed devices.
        let mut devs = self.usage(None);
        for d in &current {
            if let Some(u) = devs.iter_mut().find(|u| u.vendor == ask.vendor && u.info.id == d.uuid) {
                u.used = u.used.saturating_sub(1);
                u.used_mem = u.used_mem.saturating_sub(d.usedmem);
                u.used_cores = u.used_cores.saturating_sub(d.usedcores);
            }
        }
        devs.retain(|d| d.vendor != ask.vendor || allowed.contains(d.info.id.as_str()));
        // The pod's usage leaves its namespace's quota for the evaluation.
        let own = usage_of(&a.charges);
        let view = self.cfg.quota.as_ref().and_then(|q| q.view(ns)).map(|v| v.without(ns, &own));
        let quota: &dyn QuotaCheck = match &view {
            Some(v) => v,
            None => &NoQuota,
        };
        if !devs.iter().any(|d| d.vendor == ask.vendor) {
            return Err(loud("no allowed device fits: AllowedDeviceSetUnmatched".into()));
        }
        // The pod's other containers of this vendor, in order without gaps, ahead of the refitted
        // one: the quota checked inside the fit counts them as HAMi's does.
        let seed: Vec<_> = allocated
            .iter()
            .enumerate()
            .filter(|(i, c)| *i != index && !c.is_empty())
            .map(|(_, c)| c.clone())
            .collect();
        let ci = seed.len();
        let mut one = (*req).clone();
        one.containers = vec![ContainerRequests::new(); one.containers.len().max(ci + 1)];
        let nums = u32::try_from(current.len()).unwrap_or(u32::MAX);
        one.containers[ci].push(ContainerRequest::new(
            ask.vendor,
            nums,
            current[0].usedmem.get(),
            0,
            current[0].usedcores,
        ));
        let snap = NodeSnapshot {
            name: self.cfg.name.clone(),
            devices: devs,
            extras: self.devices.extras.clone(),
            unusable: None,
            generation: 0,
        };
        let vendors = &self.cfg.vendors;
        let new = with_scratch(|s| {
            fit::refit_container(fit::On { node: &snap, pod: &one, vendors, quota }, ci, ask.vendor, &seed, s)
        })
        .map_err(|r| loud(format!("no allowed device fits: {}", r.hami_text())))?;
        if new.len() != current.len() {
            return Err(loud(format!(
                "restricted fit selected {} container sets, want {} with {} devices",
                ci + 1,
                ci + 1,
                current.len()
            )));
        }

        // The quota once more, with every container at its own position: init containers as a
        // peak, regular ones summed (HAMi issue 2828).
        let mut list = allocated.clone();
        list[index].clone_from(&new);
        let list = codec::trim_trailing_empty(list);
        let mut after_devices = parts.devices.clone();
        let n = list.len();
        *after_devices.vendor_mut(ask.vendor, n) = list;
        let new_charges = self.collapse(&after_devices, &parts.layout, &parts.tags);
        let check = usage_of(&new_charges);
        let exceeds = || loud(format!("refit would exceed the {word} resource quota in namespace {ns}"));
        if let Some(v) = &view {
            let (mem, cores) = check.iter().find(|(v, _, _)| *v == ask.vendor).map_or((0, 0), |(_, m, c)| (*m, *c));
            if !v.fits(ns, ask.vendor, crate::model::MemMiB(mem), u32::try_from(cores).unwrap_or(u32::MAX)) {
                return Err(exceeds());
            }
        }

        let entry = encode_container_devices(&new);
        let to_allocate = replace_entry(pending_raw, index, &entry)
            .map_err(|e| loud(format!("cannot rewrite pending allocation annotation: {e}")))?;
        let allocated_new = replace_entry(allocated_raw, index, &entry)
            .map_err(|e| loud(format!("cannot rewrite allocated annotation: {e}")))?;

        // Held: the old and the new devices both, checked like any reservation.
        let held = accounting::cover(&a.charges, &new_charges);
        let usage = accounting::validate(self.usage(Some(&ask.uid)), &held)
            .map_err(|r| loud(format!("no allowed device fits: {}", r.hami_text())))?;
        if let Some(q) = &self.cfg.quota
            && !q.try_swap(ns, &own, &check, &usage_of(&held))
        {
            return Err(exceeds());
        }
        let new_record = self.record(ns, name, &after_devices, &parts.layout, &parts.tags);
        let Some(a) = self.ledger.get_mut(&ask.uid) else { return Err(not_tracked()) };
        let old_charges = std::mem::replace(&mut a.charges, held.into_boxed_slice());
        let pending = PendingRefit {
            old: (old_charges, a.record.clone()),
            new: (new_charges.into_boxed_slice(), new_record),
            observed: None,
        };
        self.refits.insert(ask.uid.clone(), pending);
        self.publish_devices(usage);
        Ok(RefitPlan::Moved(RefitMove {
            index,
            from: current.iter().map(|d| d.uuid.to_string()).collect(),
            to: new.iter().map(|d| d.uuid.to_string()).collect(),
            devices: entry,
            to_allocate,
            allocated: allocated_new,
            resource_version: pod.metadata.resource_version.clone().unwrap_or_default(),
        }))
    }
}

impl NodeCore {
    /// The refit's annotation write settled: the pod holds the new devices if it was written,
    /// else what the cluster showed meanwhile, or the old ones.
    pub(super) fn refit_settle(&mut self, msg: RefitSettle) {
        // Gone when the pod was deleted, released or reserved again meanwhile: nothing to settle.
        let Some(p) = self.refits.remove(&msg.uid) else { return };
        let (charges, record) = if msg.written { p.new } else { p.observed.unwrap_or(p.old) };
        let Some(a) = self.ledger.get(&msg.uid) else { return };
        if let Some(q) = &self.cfg.quota {
            match self.ledger.namespace(a) {
                Some(ns) => q.replace(&ns, Some(&usage_of(&a.charges)), &usage_of(&charges)),
                None => {
                    tracing::error!(node = %self.cfg.name, pod = %msg.uid, "allocation record does not read; its quota stays as held")
                }
            }
        }
        if let Some(a) = self.ledger.get_mut(&msg.uid) {
            a.charges = charges;
            a.record = record;
        }
        self.publish();
    }
}
