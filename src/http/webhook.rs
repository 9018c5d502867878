//! `POST /webhook`: HAMi's mutating admission webhook for pods. It decides and
//! returns a JSON patch; it never writes to the cluster and never reserves devices.
//!
//! ```text
//!  AdmissionReview ─▶ decode ─▶ containers? ─▶ decision annotations? (create) ─▶ scheduler name
//!        ─▶ vendor mutations (init first)
//!        ─▶ privileged? ─▶ schedulerName / nodeName ─▶ request derivation ─▶ quota ─▶ allow + patch
//! ```

use std::sync::Arc;

use actix_web::{HttpResponse, web};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::backend::Backend;
use crate::backend::access::RequestUser;
use crate::model::annotations as keys;
use crate::model::edit::{ContainerEdit, PodContext, PodEdits};
use crate::model::request::{self, PolicyDefaults};
use crate::model::{MemMiB, PodRequest, PodView};
use crate::sched::quota_book::QuotaBook;
use crate::vendor::{QuotaCheck, Vendors};

use super::AppState;
use super::error::{Error, read_body};

const V1: &str = "admission.k8s.io/v1";
const V1BETA1: &str = "admission.k8s.io/v1beta1";
const KIND: &str = "AdmissionReview";
/// kube-apiserver's defaulted scheduler name, which `--force-overwrite-default-scheduler` takes over.
const DEFAULT_SCHEDULER: &str = "default-scheduler";

// HAMi's messages, word for word: users and tools match on them.
const NO_CONTAINERS: &str = "pod has no containers";
const OTHER_SCHEDULER: &str = "pod already has different scheduler assigned";
const NODE_ASSIGNED: &str = "pod has node assigned";
const OVER_QUOTA: &str = "exceeding resource quota";

/// What the webhook needs from the flags. Shared by every request; read-only.
#[derive(Clone)]
pub struct WebhookConfig {
    /// `--scheduler-name`: written to `spec.schedulerName` of pods that request devices; empty
    /// leaves the field alone.
    pub scheduler_name: String,
    /// `--force-overwrite-default-scheduler`: pods on `default-scheduler` are taken over.
    pub force_overwrite_default_scheduler: bool,
    /// The namespace quota book; `None` skips the quota pre-check.
    pub quota: Option<Arc<QuotaBook>>,
}

impl Default for WebhookConfig {
    /// The flags' defaults (HAMi: empty scheduler name, force-overwrite on) and no quota.
    fn default() -> Self {
        WebhookConfig { scheduler_name: String::new(), force_overwrite_default_scheduler: true, quota: None }
    }
}

impl WebhookConfig {
    pub fn from_flags(f: &crate::config::SchedulerFlags, quota: Option<Arc<QuotaBook>>) -> WebhookConfig {
        WebhookConfig {
            scheduler_name: f.scheduler_name.clone(),
            force_overwrite_default_scheduler: f.force_overwrite_default_scheduler,
            quota,
        }
    }
}

/// The envelope fields the webhook reads from an AdmissionReview.
struct Review {
    api_version: &'static str,
    uid: String,
    /// `CREATE`, `UPDATE`, …; empty when the review does not say.
    operation: String,
    namespace: String,
    name: String,
    object: Option<Value>,
    /// The pod before an UPDATE.
    old_object: Option<Value>,
    /// Who asked, as the API server authenticated them.
    user: RequestUser,
}

/// A key of a JSON object, exact first, else case-insensitively, as Go's decoder matches field
/// names.
fn key_of(obj: &Map<String, Value>, name: &str) -> Option<String> {
    if obj.contains_key(name) {
        return Some(name.to_owned());
    }
    obj.keys().find(|k| k.eq_ignore_ascii_case(name)).cloned()
}

fn take(obj: &mut Map<String, Value>, name: &str) -> Option<Value> {
    key_of(obj, name).and_then(|k| obj.remove(&k)).filter(|v| !v.is_null())
}

/// An optional string field; any other type is a malformed review.
fn take_text(obj: &mut Map<String, Value>, name: &str, path: &str) -> Result<Option<String>, Error> {
    match take(obj, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::BadRequest(format!("{path} must be a string"))),
    }
}

/// Decodes the envelope. Anything that is not an AdmissionReview of a known version is a 400:
/// there is no request to answer.
fn decode_review(body: &[u8]) -> Result<Review, Error> {
    let v: Value = serde_json::from_slice(body)?;
    let Value::Object(mut top) = v else {
        return Err(Error::BadRequest("AdmissionReview must be a JSON object".into()));
    };
    let api_version = match take_text(&mut top, "apiVersion", "apiVersion")?.as_deref() {
        Some(V1) => V1,
        Some(V1BETA1) => V1BETA1,
        other => {
            return Err(Error::BadRequest(format!(
                "apiVersion {other:?} is not {V1} or {V1BETA1}",
                other = other.unwrap_or("")
            )));
        }
    };
    if let Some(kind) = take_text(&mut top, "kind", "kind")?
        && kind != KIND
    {
        return Err(Error::BadRequest(format!("kind {kind:?} is not {KIND}")));
    }
    let mut req = match take(&mut top, "request") {
        Some(Value::Object(r)) => r,
        None => return Err(Error::BadRequest("AdmissionReview has no request".into())),
        Some(_) => return Err(Error::BadRequest("request must be an object".into())),
    };
    let Some(uid) = take_text(&mut req, "uid", "request.uid")? else {
        return Err(Error::BadRequest("request.uid is missing".into()));
    };
    Ok(Review {
        api_version,
        uid,
        operation: take_text(&mut req, "operation", "request.operation")?.unwrap_or_default(),
        namespace: take_text(&mut req, "namespace", "request.namespace")?.unwrap_or_default(),
        name: take_text(&mut req, "name", "request.name")?.unwrap_or_default(),
        object: take(&mut req, "object"),
        old_object: take(&mut req, "oldObject"),
        user: match take(&mut req, "userInfo") {
            None => RequestUser::default(),
            Some(u) => serde_json::from_value(u).map_err(|e| Error::BadRequest(format!("request.userInfo: {e}")))?,
        },
    })
}

/// The webhook's answer to one review.
#[derive(Debug, PartialEq)]
enum Decision {
    /// Allowed; `patch` (the base64 of the JSON-patch array, with its number of operations) is
    /// `None` when nothing changed; `message` is HAMi's note for pods left to another scheduler.
    Allow { patch: Option<(String, usize)>, message: Option<&'static str> },
    /// A denial (status code 403).
    Deny(String),
    /// The review could not be evaluated (400: the pod does not decode; 500: a vendor refused).
    Failed { code: u16, message: String },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireReview<'a> {
    api_version: &'a str,
    kind: &'a str,
    response: WireResponse<'a>,
}

/// kube's `AdmissionResponse`, with `patch` as base64 text as Go's `[]byte` is written (kube-rs's
/// own type would write an array of numbers).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<WireStatus<'a>>,
}

#[derive(Serialize)]
struct WireStatus<'a> {
    code: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    message: &'a str,
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
struct Cx<'a> {
    cfg: &'a WebhookConfig,
    vendors: &'a Vendors,
    defaults: &'a PolicyDefaults,
    namespace: &'a str,
}

/// Runs every vendor's mutation on every container, init containers first (step 4), and applies
/// the pod-level edits they asked for. `Ok(true)` when some vendor recognised a request.
fn mutate(vendors: &Vendors, pod: &mut Value) -> Result<bool, crate::vendor::Unusable> {
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
/// regular containers add up, plain init containers run alone so their maximum counts, and the
/// larger of the two is asked. Native sidecars run beside the regular containers, so they add to
/// the sum (HAMi counts them as an init-container peak: over-commit).
fn fits_quota(req: &PodRequest, vendors: &Vendors, quota: &dyn QuotaCheck, namespace: &str) -> bool {
    vendors.iter().all(|(id, v)| {
        let names = v.quota_names();
        if names.memory.is_none() && names.cores.is_none() {
            return true;
        }
        let (mut sum_mem, mut sum_cores, mut init_mem, mut init_cores) = (0u64, 0u64, 0u64, 0u64);
        for (i, c) in req.containers.iter().enumerate() {
            let (mut mem, mut cores) = (0u64, 0u64);
            for r in c.iter().filter(|r| r.vendor == id) {
                mem = mem.saturating_add(r.memreq.get().saturating_mul(u64::from(r.nums)));
                cores = cores.saturating_add(u64::from(r.cores).saturating_mul(u64::from(r.nums)));
            }
            if req.is_plain_init(i) {
                init_mem = init_mem.max(mem);
                init_cores = init_cores.max(cores);
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

/// HAMi's admission steps on one pod object. Pure: reads the quota book, writes nothing.
fn admit(cx: &Cx<'_>, mut pod: Value) -> Decision {
    // Step 1.
    let view = match PodView::deserialize(&pod) {
        Ok(v) => v,
        Err(e) => return Decision::Failed { code: 400, message: format!("decoding pod: {e}") },
    };
    // Step 2.
    if view.spec.containers.is_empty() {
        return Decision::Deny(NO_CONTAINERS.into());
    }
    // A pod created with a decision's annotations, whatever scheduler it names, would have its
    // device plugin hand out the devices it wrote itself, uncounted and unchecked against quota.
    if let Some(k) = cx.vendors.scheduler_keys().iter().find(|k| view.metadata.annotations.contains_key(k.as_str())) {
        return Decision::Deny(format!(
            "annotation {k} is written by the scheduler and cannot be set when creating a pod"
        ));
    }
    // Step 3: a pod another scheduler owns is not ours to change, nor to count against quota.
    if let Some(s) = view.spec.scheduler_name.as_deref().filter(|s| !s.is_empty()) {
        let taken_over = s == DEFAULT_SCHEDULER && cx.cfg.force_overwrite_default_scheduler;
        if !taken_over && s != cx.cfg.scheduler_name {
            return Decision::Allow { patch: None, message: Some(OTHER_SCHEDULER) };
        }
    }
    // HAMi refuses an invalid hami.io/numa-alignment on every pod it handles, device requests
    // or not, before looking at the resources.
    if let Err(e) = crate::model::refit::numa_alignment(&view.metadata.annotations) {
        return Decision::Deny(e.to_string());
    }
    // Step 4.
    let before = pod.clone();
    let recognised = match mutate(cx.vendors, &mut pod) {
        Ok(r) => r,
        // HAMi answers a vendor's refusal here as an internal error, not a denial.
        Err(why) => return Decision::Failed { code: 500, message: why.to_string() },
    };
    // A pod that asks for a device must carry readable scoring weights (HAMi PR 2827): told now,
    // with the parser's words, rather than at every Filter.
    if recognised
        && let Some(v) = view.annotation(keys::DEVICE_SCORING_WEIGHTS)
        && let Err(e) = crate::model::codec::parse_weights(v)
    {
        return Decision::Deny(e.to_string());
    }
    // Step 5: the first privileged container, init containers first.
    if recognised && let Some(c) = view.all_containers().find(|c| c.is_privileged()) {
        return Decision::Deny(format!("container {} is privileged", c.name));
    }
    // Step 6.
    if recognised && !cx.cfg.scheduler_name.is_empty() {
        if let Some(spec) = object_at(&mut pod, &["spec"]) {
            spec.insert("schedulerName".into(), Value::String(cx.cfg.scheduler_name.clone()));
        }
        if view.spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
            return Decision::Deny(NODE_ASSIGNED.into());
        }
    }
    // hami-rs, not HAMi (docs/compat.md, "Unusable quantities"): HAMi's Filter silently drops a
    // container request whose quantity it cannot use (`nvidia.com/gpumem: 16Gi` overflows), and the
    // pod is then placed with no reservation. Deriving the request here refuses such a pod while
    // its author is still watching.
    let mutated = match PodView::deserialize(&pod) {
        Ok(v) => v,
        Err(e) => return Decision::Failed { code: 500, message: format!("decoding mutated pod: {e}") },
    };
    let req = match derive_request(cx.vendors, &mutated, cx.defaults) {
        Ok(r) => r,
        Err(e @ request::Error::Quantity { .. }) => return Decision::Deny(e.to_string()),
        Err(e) => return Decision::Deny(format!("unusable device request: {e}")),
    };
    // Step 7.
    if let Some(book) = &cx.cfg.quota
        && let Some(q) = book.view(cx.namespace)
        && !fits_quota(&req, cx.vendors, &q, cx.namespace)
    {
        return Decision::Deny(OVER_QUOTA.into());
    }
    // Step 8.
    let patch = json_patch::diff(&before, &pod);
    if patch.0.is_empty() {
        return Decision::Allow { patch: None, message: None };
    }
    match serde_json::to_vec(&patch) {
        Ok(b) => Decision::Allow {
            patch: Some((base64::engine::general_purpose::STANDARD.encode(b), patch.0.len())),
            message: None,
        },
        Err(e) => Decision::Failed { code: 500, message: format!("encoding patch: {e}") },
    }
}

/// The webhook's decision on one pod as the simulator needs it: the pod as admission would leave
/// it (mutations applied), or the denial's message.
pub fn admit_pod(
    vendors: &Vendors,
    cfg: &WebhookConfig,
    defaults: &PolicyDefaults,
    pod: &PodView,
) -> Result<PodView, String> {
    let mut value = serde_json::to_value(pod).map_err(|e| e.to_string())?;
    let cx = Cx { cfg, vendors, defaults, namespace: &pod.metadata.namespace };
    match admit(&cx, value.clone()) {
        Decision::Allow { patch: None, .. } => Ok(pod.clone()),
        Decision::Allow { patch: Some((b64, _)), .. } => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b64).map_err(|e| e.to_string())?;
            let patch: json_patch::Patch = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
            json_patch::patch(&mut value, &patch).map_err(|e| e.to_string())?;
            serde_json::from_value(value).map_err(|e| e.to_string())
        }
        Decision::Deny(m) => Err(m),
        Decision::Failed { message, .. } => Err(message),
    }
}

/// `POST /webhook`. Malformed bodies are HTTP 400; every decision, denials included, is an
/// AdmissionReview in the request's apiVersion with the request's uid.
pub async fn webhook<B: Backend>(st: web::Data<AppState<B>>, payload: web::Payload) -> Result<HttpResponse, Error> {
    let body = read_body(payload, st.max_body).await?;
    let answer = match review(&body, &st.webhook, st.engine.vendors(), &st.engine.config().defaults)? {
        Reviewed::Answer(a) => a,
        Reviewed::Guard(g) => {
            let permitted = st.engine.backend().permits(&g.user, "patch", "nodes").await.map_err(|e| e.to_string());
            g.answer(permitted)
        }
    };
    Ok(HttpResponse::Ok().content_type("application/json").body(answer))
}

/// What one review comes to.
pub enum Reviewed {
    /// The AdmissionReview answer's JSON.
    Answer(Vec<u8>),
    /// An UPDATE that changes an annotation only the scheduler and the device plugins write; its
    /// answer waits on whether the requester may patch nodes (see [`Guard::answer`]).
    Guard(Guard),
}

/// An UPDATE of a scheduler-owned annotation (a decision, its node, its bind phase): the keys that
/// make a device plugin hand out devices. Only HAMi's own components may change them after
/// admission, and they are told apart from everyone else by what the cluster lets them do: the
/// scheduler and the device plugins patch nodes (locks, registrations), tenants do not.
pub struct Guard {
    api_version: &'static str,
    uid: String,
    /// The first guarded key the update changes.
    key: String,
    /// `namespace/name`, for the log line.
    pod: String,
    pub user: RequestUser,
}

impl Guard {
    /// The answer once the API server said whether the requester may `patch nodes`
    /// (SubjectAccessReview): allowed if it may; denied if it may not, and denied too when the
    /// review could not be made, since an unverified caller is refused, not trusted.
    pub fn answer(&self, permitted: Result<bool, String>) -> Vec<u8> {
        let who = if self.user.username.is_empty() { "an unauthenticated user" } else { self.user.username.as_str() };
        let denial = format!("annotation {} is written by the scheduler and cannot be set by {who}", self.key);
        let (allowed, message, why) = match permitted {
            Ok(true) => (true, ALLOWED_COMPONENT.to_owned(), ""),
            Ok(false) => (false, denial, "not_permitted"),
            Err(e) => (false, format!("{denial}: its permissions could not be reviewed ({e})"), "review_failed"),
        };
        if allowed {
            tracing::info!(pod = %self.pod, uid = %self.uid, user = %self.user.username, key = %self.key, allowed, "admission of an update");
        } else {
            crate::metrics::request_refused("webhook", why);
            tracing::warn!(pod = %self.pod, uid = %self.uid, user = %self.user.username, key = %self.key, allowed, reason = %message, "admission of an update");
        }
        let status = if allowed {
            WireStatus { code: 200, reason: None, message: &message }
        } else {
            WireStatus { code: 403, reason: Some("Forbidden"), message: &message }
        };
        encode_answer(self.api_version, &self.uid, allowed, None, Some(status))
    }
}

/// HAMi's message when a component of its own changes a scheduler-owned annotation.
const ALLOWED_COMPONENT: &str = "scheduler-owned annotation changed by a HAMi component";
/// HAMi's message for an update that leaves them alone.
const NO_OWNED_CHANGE: &str = "no scheduler-owned annotation changed";

/// The annotation `key` of a pod object in a review, as sent.
fn annotation<'v>(pod: Option<&'v Value>, key: &str) -> Option<&'v Value> {
    pod?.get("metadata")?.get("annotations")?.get(key)
}

/// The first of `keys` whose value differs between `old` and `new` (added, changed or removed).
fn changed_key<'k>(keys: &'k [String], old: Option<&Value>, new: Option<&Value>) -> Option<&'k str> {
    keys.iter().map(String::as_str).find(|k| annotation(old, k) != annotation(new, k))
}

fn encode_answer(
    api_version: &str,
    uid: &str,
    allowed: bool,
    patch: Option<&str>,
    status: Option<WireStatus<'_>>,
) -> Vec<u8> {
    let out = WireReview {
        api_version,
        kind: KIND,
        response: WireResponse { uid, allowed, patch_type: patch.as_ref().map(|_| "JSONPatch"), patch, status },
    };
    // Strings, booleans and integers only: encoding cannot fail.
    serde_json::to_vec(&out).unwrap_or_default()
}

/// One AdmissionReview body in, the AdmissionReview answer's JSON out (or, for an UPDATE of a
/// scheduler-owned annotation, what the answer waits on): what `POST /webhook` answers with
/// status 200. `Err` is the HTTP 400 for a body that is not a review. Pure: reads the quota book,
/// writes nothing.
pub fn review(
    body: &[u8],
    cfg: &WebhookConfig,
    vendors: &Vendors,
    defaults: &PolicyDefaults,
) -> Result<Reviewed, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::BadRequest("empty request body".into()));
    }
    let mut review = decode_review(body)?;
    let object = review.object.take();
    // For the log line only: pods created with generateName have no name yet.
    let pod_name = {
        let meta = object.as_ref().and_then(|o| o.get("metadata"));
        let text = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str).filter(|s| !s.is_empty());
        match Some(review.name.as_str()).filter(|s| !s.is_empty()).or_else(|| text("name")) {
            Some(n) => n.to_owned(),
            None => format!("{}*", text("generateName").unwrap_or("")),
        }
    };
    let namespace = if review.namespace.is_empty() {
        object
            .as_ref()
            .and_then(|o| o.pointer("/metadata/namespace"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    } else {
        std::mem::take(&mut review.namespace)
    };
    // An update is only ever checked, never mutated: what it may not do is change the annotations
    // that hand out devices. A review that does not say is taken as a creation.
    if review.operation.eq_ignore_ascii_case("UPDATE") {
        let old = review.old_object.as_ref();
        if let Some(key) = changed_key(vendors.scheduler_keys(), old, object.as_ref()) {
            return Ok(Reviewed::Guard(Guard {
                api_version: review.api_version,
                uid: review.uid,
                key: key.to_owned(),
                pod: format!("{namespace}/{pod_name}"),
                user: review.user,
            }));
        }
        let status = WireStatus { code: 200, reason: None, message: NO_OWNED_CHANGE };
        return Ok(Reviewed::Answer(encode_answer(review.api_version, &review.uid, true, None, Some(status))));
    }
    let decision = match object {
        None => Decision::Failed { code: 400, message: "decoding pod: request.object is missing".into() },
        Some(pod) => admit(&Cx { cfg, vendors, defaults, namespace: &namespace }, pod),
    };

    let (patch, ops) = match &decision {
        Decision::Allow { patch: Some((p, n)), .. } => (Some(p.as_str()), *n),
        _ => (None, 0),
    };
    let (allowed, status) = match &decision {
        Decision::Allow { message, .. } => (true, message.map(|m| WireStatus { code: 200, reason: None, message: m })),
        Decision::Deny(m) => (false, Some(WireStatus { code: 403, reason: Some("Forbidden"), message: m })),
        Decision::Failed { code, message } => (false, Some(WireStatus { code: *code, reason: None, message })),
    };
    tracing::info!(
        pod = %format_args!("{namespace}/{pod_name}"),
        uid = %review.uid,
        allowed,
        patch_ops = ops,
        reason = status.as_ref().map_or("", |s| s.message),
        "admission"
    );
    Ok(Reviewed::Answer(encode_answer(review.api_version, &review.uid, allowed, patch, status)))
}

#[cfg(test)]
mod tests;
