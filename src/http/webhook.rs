//! `POST /webhook`: the AdmissionReview envelope around `admission`. A creation is admitted
//! (mutated and validated) and answered with a JSON patch; an update that changes a
//! scheduler-owned annotation waits on whether its requester may patch nodes. It never writes to
//! the cluster and never reserves devices.

use actix_web::{HttpResponse, web};
use base64::Engine as _;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::admission::{self, ALLOWED_COMPONENT, Cx, NO_OWNED_CHANGE, Verdict, changed_key};
use crate::backend::Backend;
use crate::backend::access::RequestUser;
use crate::devices::Vendors;
use crate::model::request::PolicyDefaults;

use super::AppState;
use super::error::{Error, read_body};

const V1: &str = "admission.k8s.io/v1";
const V1BETA1: &str = "admission.k8s.io/v1beta1";
const KIND: &str = "AdmissionReview";

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
        let denial = admission::update_denial(&self.key, &self.user.username);
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
    cfg: &admission::Config,
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
    let verdict = match &object {
        None => Verdict::Failed { code: 400, message: "decoding pod: request.object is missing".into() },
        Some(pod) => admission::admit(&Cx { cfg, vendors, defaults, namespace: &namespace }, pod),
    };
    let patch = match (&verdict, &object) {
        (Verdict::Allow { mutated: Some(after), .. }, Some(before)) => encode_patch(before, after),
        _ => Ok(None),
    };
    let (patch, ops, allowed, status) = match (&verdict, &patch) {
        (Verdict::Allow { .. }, Err(e)) => (None, 0, false, Some(WireStatus { code: 500, reason: None, message: e })),
        (Verdict::Allow { message, .. }, Ok(p)) => (
            p.as_ref().map(|(b64, _)| b64.as_str()),
            p.as_ref().map_or(0, |(_, n)| *n),
            true,
            message.map(|m| WireStatus { code: 200, reason: None, message: m }),
        ),
        (Verdict::Deny(m), _) => {
            (None, 0, false, Some(WireStatus { code: 403, reason: Some("Forbidden"), message: m }))
        }
        (Verdict::Failed { code, message }, _) => {
            (None, 0, false, Some(WireStatus { code: *code, reason: None, message }))
        }
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

/// The JSON patch from `before` to `after` as the wire carries it (base64), with its number of
/// operations; `None` when admission changed nothing.
fn encode_patch(before: &Value, after: &Value) -> Result<Option<(String, usize)>, String> {
    let patch = json_patch::diff(before, after);
    if patch.0.is_empty() {
        return Ok(None);
    }
    let bytes = serde_json::to_vec(&patch).map_err(|e| format!("encoding patch: {e}"))?;
    Ok(Some((base64::engine::general_purpose::STANDARD.encode(bytes), patch.0.len())))
}

#[cfg(test)]
mod tests;
