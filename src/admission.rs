//! A pod's admission: HAMi's mutation and validation of a pod being created, and which
//! annotations an update of a pod may not change unchecked. Pure: it reads the quota book and
//! writes nothing. The webhook answers AdmissionReviews with it; the simulator and `inspect` run
//! the pods they place through it.
//!
//! ```text
//!  pod ─▶ decode ─▶ containers? ─▶ decision annotations? ─▶ scheduler name
//!        ─▶ vendor mutations (init first)
//!        ─▶ privileged? ─▶ schedulerName / nodeName ─▶ request derivation ─▶ quota ─▶ allow (mutated pod)
//! ```

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::devices::{QuotaCheck, Vendors};
use crate::model::annotations as keys;
use crate::model::edit::{ContainerEdit, PodContext, PodEdits};
use crate::model::request::{self, PolicyDefaults};
use crate::model::{MemMiB, PodRequest, PodView};
use crate::sched::quota_book::QuotaBook;

/// kube-apiserver's defaulted scheduler name, which `--force-overwrite-default-scheduler` takes over.
const DEFAULT_SCHEDULER: &str = "default-scheduler";

// HAMi's messages, word for word: users and tools match on them.
const NO_CONTAINERS: &str = "pod has no containers";
const OTHER_SCHEDULER: &str = "pod already has different scheduler assigned";
const NODE_ASSIGNED: &str = "pod has node assigned";
const OVER_QUOTA: &str = "exceeding resource quota";

/// What admission needs from the flags. Shared by every review; read-only.
#[derive(Clone)]
pub struct Config {
    /// `--scheduler-name`: written to `spec.schedulerName` of pods that request devices; empty
    /// leaves the field alone.
    pub scheduler_name: String,
    /// `--force-overwrite-default-scheduler`: pods on `default-scheduler` are taken over.
    pub force_overwrite_default_scheduler: bool,
    /// The namespace quota book; `None` skips the quota pre-check.
    pub quota: Option<Arc<QuotaBook>>,
}

impl Default for Config {
    /// The flags' defaults (HAMi: empty scheduler name, force-overwrite on) and no quota.
    fn default() -> Self {
        Config { scheduler_name: String::new(), force_overwrite_default_scheduler: true, quota: None }
    }
}

impl Config {
    pub fn from_flags(f: &crate::config::SchedulerFlags, quota: Option<Arc<QuotaBook>>) -> Config {
        Config {
            scheduler_name: f.scheduler_name.clone(),
            force_overwrite_default_scheduler: f.force_overwrite_default_scheduler,
            quota,
        }
    }
}

/// Admission's answer to one pod being created.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Allowed. `mutated` is the pod with admission's changes applied (which may be none), or
    /// `None` when admission left it alone without looking (a pod of another scheduler);
    /// `message` is HAMi's note for pods left to another scheduler.
    Allow { mutated: Option<Value>, message: Option<&'static str> },
    /// A denial (status code 403).
    Deny(String),
    /// The pod could not be evaluated (400: it does not decode; 500: a vendor refused).
    Failed { code: u16, message: String },
}

/// The JSON object at `path` under `v`, created where it is absent or null; `None` when
/// something on the way is not an object (then the pod is left as it is).
fn object_at<'v>(v: &'v mut Value, path: &[&str]) -> Option<&'v mut Map<String, Value>> {
    let mut cur = v;
    for k in path {
        if cur.is_null() {
            *cur = Value::Object(Map::new());
        }
        cur = cur.as_object_mut()?.entry(*k).or_insert(Value::Null);
    }
    if cur.is_null() {
        *cur = Value::Object(Map::new());
    }
    cur.as_object_mut()
}

/// Everything one admission decision reads besides the pod.
pub struct Cx<'a> {
    pub cfg: &'a Config,
    pub vendors: &'a Vendors,
    pub defaults: &'a PolicyDefaults,
    /// The namespace the pod is created in (the review's, which a pod object may leave out).
    pub namespace: &'a str,
}

/// Runs every vendor's mutation on every container, init containers first (step 4), and applies
/// the pod-level edits they asked for. `Ok(true)` when some vendor recognised a request.
fn mutate(vendors: &Vendors, pod: &mut Value) -> Result<bool, crate::devices::Unusable> {
    // Vendors read the pod's annotations and runtime class as they were before this review;
    // their own edits are layered on top through `PodEdits`.
    let annotations = pod.pointer("/metadata/annotations").and_then(Value::as_object).cloned().unwrap_or_default();
    let runtime_class = pod.pointer("/spec/runtimeClassName").and_then(Value::as_str).map(str::to_owned);
    let mut edits = PodEdits::default();
    let mut recognised = false;
    let mut index = 0;
    for (is_init, list) in [(true, "initContainers"), (false, "containers")] {
        let Some(containers) = pod.pointer_mut(&format!("/spec/{list}")).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut() {
            for (_, v) in vendors.iter() {
                let mut c = ContainerEdit { container: &mut *container, index, is_init };
                let mut cx = PodContext {
                    annotations: &annotations,
                    runtime_class_name: runtime_class.as_deref(),
                    edits: &mut edits,
                };
                recognised |= v.mutate(&mut c, &mut cx)?;
            }
            index += 1;
        }
    }
    if !edits.annotations.is_empty()
        && let Some(a) = object_at(pod, &["metadata", "annotations"])
    {
        for (k, v) in edits.annotations {
            a.insert(k, Value::String(v));
        }
    }
    if let Some(rc) = edits.runtime_class_name
        && let Some(spec) = object_at(pod, &["spec"])
    {
        spec.insert("runtimeClassName".into(), Value::String(rc));
    }
    Ok(recognised)
}

/// The pod's request after mutation (its weights, when it asks for a device, already checked).
fn derive_request(vendors: &Vendors, view: &PodView, defaults: &PolicyDefaults) -> Result<PodRequest, request::Error> {
    vendors.pod_request(view, defaults)
}

/// Step 7: per vendor with a memory or core resource, the pod's peak usage must fit the namespace's
/// quota. Memory is per-device MiB times the count (percentage-only requests carry 0 MiB here);
/// regular containers and native sidecars add up; a plain init container runs beside the sidecars
/// declared before it and no other init container, so the largest of those running sums is the
/// init peak; the larger of the peak and the sum is asked (as scheduling books the pod).
fn fits_quota(req: &PodRequest, vendors: &Vendors, quota: &dyn QuotaCheck, namespace: &str) -> bool {
    vendors.iter().all(|(id, v)| {
        let names = v.quota_names();
        if names.memory.is_none() && names.cores.is_none() {
            return true;
        }
        let (mut sum_mem, mut sum_cores, mut init_mem, mut init_cores) = (0u64, 0u64, 0u64, 0u64);
        // Init containers come first, so the running sum is the sidecars' while they are walked.
        for (i, c) in req.containers.iter().enumerate() {
            let (mut mem, mut cores) = (0u64, 0u64);
            for r in c.iter().filter(|r| r.vendor == id) {
                mem = mem.saturating_add(r.memreq.get().saturating_mul(u64::from(r.nums)));
                cores = cores.saturating_add(u64::from(r.cores).saturating_mul(u64::from(r.nums)));
            }
            if req.is_plain_init(i) {
                init_mem = init_mem.max(sum_mem.saturating_add(mem));
                init_cores = init_cores.max(sum_cores.saturating_add(cores));
            } else {
                sum_mem = sum_mem.saturating_add(mem);
                sum_cores = sum_cores.saturating_add(cores);
            }
        }
        let (mem, cores) = (sum_mem.max(init_mem), sum_cores.max(init_cores));
        if mem == 0 && cores == 0 {
            return true;
        }
        quota.fits(namespace, id, MemMiB(mem), u32::try_from(cores).unwrap_or(u32::MAX))
    })
}

/// HAMi's admission steps on one pod object being created. Pure: reads the quota book, writes
/// nothing.
pub fn admit(cx: &Cx<'_>, pod: &Value) -> Verdict {
    // Step 1.
    let view = match PodView::deserialize(pod) {
        Ok(v) => v,
        Err(e) => return Verdict::Failed { code: 400, message: format!("decoding pod: {e}") },
    };
    // Step 2.
    if view.spec.containers.is_empty() {
        return Verdict::Deny(NO_CONTAINERS.into());
    }
    // A pod created with a decision's annotations, whatever scheduler it names, would have its
    // device plugin hand out the devices it wrote itself, uncounted and unchecked against quota.
    if let Some(k) = cx.vendors.scheduler_keys().iter().find(|k| view.metadata.annotations.contains_key(k.as_str())) {
        return Verdict::Deny(format!(
            "annotation {k} is written by the scheduler and cannot be set when creating a pod"
        ));
    }
    // Step 3: a pod another scheduler owns is not ours to change, nor to count against quota.
    if let Some(s) = view.spec.scheduler_name.as_deref().filter(|s| !s.is_empty()) {
        let taken_over = s == DEFAULT_SCHEDULER && cx.cfg.force_overwrite_default_scheduler;
        if !taken_over && s != cx.cfg.scheduler_name {
            return Verdict::Allow { mutated: None, message: Some(OTHER_SCHEDULER) };
        }
    }
    // HAMi refuses an invalid hami.io/numa-alignment on every pod it handles, device requests
    // or not, before looking at the resources.
    if let Err(e) = crate::model::numa_alignment::numa_alignment(&view.metadata.annotations) {
        return Verdict::Deny(e.to_string());
    }
    // Step 4.
    let mut pod = pod.clone();
    let recognised = match mutate(cx.vendors, &mut pod) {
        Ok(r) => r,
        // HAMi answers a vendor's refusal here as an internal error, not a denial.
        Err(why) => return Verdict::Failed { code: 500, message: why.to_string() },
    };
    // A pod that asks for a device must carry readable scoring weights (HAMi PR 2827): told now,
    // with the parser's words, rather than at every Filter.
    if recognised
        && let Some(v) = view.annotation(keys::DEVICE_SCORING_WEIGHTS)
        && let Err(e) = crate::model::codec::parse_weights(v)
    {
        return Verdict::Deny(e.to_string());
    }
    // Step 5: the first privileged container, init containers first.
    if recognised && let Some(c) = view.all_containers().find(|c| c.is_privileged()) {
        return Verdict::Deny(format!("container {} is privileged", c.name));
    }
    // Step 6.
    if recognised && !cx.cfg.scheduler_name.is_empty() {
        if let Some(spec) = object_at(&mut pod, &["spec"]) {
            spec.insert("schedulerName".into(), Value::String(cx.cfg.scheduler_name.clone()));
        }
        if view.spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
            return Verdict::Deny(NODE_ASSIGNED.into());
        }
    }
    // hami-rs, not HAMi (docs/compat.md, "Unusable quantities"): HAMi's Filter silently drops a
    // container request whose quantity it cannot use (`nvidia.com/gpumem: 16Gi` overflows), and the
    // pod is then placed with no reservation. Deriving the request here refuses such a pod while
    // its author is still watching.
    let mutated = match PodView::deserialize(&pod) {
        Ok(v) => v,
        Err(e) => return Verdict::Failed { code: 500, message: format!("decoding mutated pod: {e}") },
    };
    let req = match derive_request(cx.vendors, &mutated, cx.defaults) {
        Ok(r) => r,
        Err(e @ request::Error::Quantity { .. }) => return Verdict::Deny(e.to_string()),
        Err(e) => return Verdict::Deny(format!("unusable device request: {e}")),
    };
    // Step 7.
    if let Some(book) = &cx.cfg.quota
        && let Some(q) = book.view(cx.namespace)
        && !fits_quota(&req, cx.vendors, &q, cx.namespace)
    {
        return Verdict::Deny(OVER_QUOTA.into());
    }
    // Step 8: the caller turns the pod's changes into whatever its answer carries.
    Verdict::Allow { mutated: Some(pod), message: None }
}

/// Admission's decision on one pod as the simulator and `inspect` need it: the pod as admission
/// would leave it (mutations applied), or the denial's message.
pub fn admit_pod(vendors: &Vendors, cfg: &Config, defaults: &PolicyDefaults, pod: &PodView) -> Result<PodView, String> {
    let value = serde_json::to_value(pod).map_err(|e| e.to_string())?;
    let cx = Cx { cfg, vendors, defaults, namespace: &pod.metadata.namespace };
    match admit(&cx, &value) {
        Verdict::Allow { mutated: None, .. } => Ok(pod.clone()),
        Verdict::Allow { mutated: Some(v), .. } => serde_json::from_value(v).map_err(|e| e.to_string()),
        Verdict::Deny(m) | Verdict::Failed { message: m, .. } => Err(m),
    }
}

/// HAMi's message when a component of its own changes a scheduler-owned annotation.
pub const ALLOWED_COMPONENT: &str = "scheduler-owned annotation changed by a HAMi component";
/// HAMi's message for an update that leaves them alone.
pub const NO_OWNED_CHANGE: &str = "no scheduler-owned annotation changed";

/// The annotation `key` of a pod object in a review, as sent.
fn annotation<'v>(pod: Option<&'v Value>, key: &str) -> Option<&'v Value> {
    pod?.get("metadata")?.get("annotations")?.get(key)
}

/// The first of `keys` whose value differs between `old` and `new` (added, changed or removed).
pub fn changed_key<'k>(keys: &'k [String], old: Option<&Value>, new: Option<&Value>) -> Option<&'k str> {
    keys.iter().map(String::as_str).find(|k| annotation(old, k) != annotation(new, k))
}

/// HAMi's denial of an update of the scheduler-owned annotation `key` by `username`.
pub fn update_denial(key: &str, username: &str) -> String {
    let who = if username.is_empty() { "an unauthenticated user" } else { username };
    format!("annotation {key} is written by the scheduler and cannot be set by {who}")
}

#[cfg(test)]
mod tests;
