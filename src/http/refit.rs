//! `POST /refit`: the NVIDIA device plugin asks to move one container's devices onto the ones
//! kubelet's NUMA alignment allows. Only the device plugin may: its ServiceAccount token
//! (`Authorization: Bearer`) is checked with a TokenReview, must belong to the ServiceAccount of
//! `--device-plugin-namespace`/`--device-plugin-service-account`, and must be bound to a pod of
//! that ServiceAccount running on the request's node. A caller without a token gets 401, one the
//! API server does not authenticate 401, any other 403, each with a refit answer saying why.
//! HAMi's plugin reads every other answer as HTTP 200 with `{"succeeded":…}`, so every other
//! outcome is one, a body that does not decode included (the extender's rule of 400 for
//! malformed JSON does not apply here).

use std::fmt;
use std::time::Instant;

use actix_web::http::StatusCode;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::actor::refit::{RefitArgs, RefitOutcome};
use crate::backend::Backend;
use crate::backend::access::service_account_user;
use crate::model::numa_alignment::push_go_json_string;

use super::AppState;
use super::error::{Error, read_body};

/// The request body, Go field names matched case-insensitively, unknown keys ignored, `null`
/// leaving a field at its zero value, as Go's decoder reads it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RefitRequest(pub RefitArgs);

impl<'de> Deserialize<'de> for RefitRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RefitRequest;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a NumaRefitRequest object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<RefitRequest, A::Error> {
                let mut a = RefitArgs::default();
                while let Some(k) = m.next_key::<String>()? {
                    let is = |name: &str| k.eq_ignore_ascii_case(name);
                    let text = |into: &mut String, m: &mut A| -> Result<(), A::Error> {
                        if let Some(v) = m.next_value::<Option<String>>()? {
                            *into = v;
                        }
                        Ok(())
                    };
                    if is("podUID") {
                        text(&mut a.pod_uid, &mut m)?;
                    } else if is("podNamespace") {
                        text(&mut a.pod_namespace, &mut m)?;
                    } else if is("podName") {
                        text(&mut a.pod_name, &mut m)?;
                    } else if is("nodeName") {
                        text(&mut a.node_name, &mut m)?;
                    } else if is("containerName") {
                        text(&mut a.container_name, &mut m)?;
                    } else if is("deviceType") {
                        text(&mut a.device_type, &mut m)?;
                    } else if is("containerIndex") {
                        if let Some(v) = m.next_value::<Option<i64>>()? {
                            a.container_index = v;
                        }
                    } else if is("allowedDeviceUUIDs") {
                        a.allowed_device_uuids = m.next_value::<Option<Vec<String>>>()?.unwrap_or_default();
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(RefitRequest(a))
            }
        }
        d.deserialize_map(V)
    }
}

impl RefitRequest {
    /// The request as HAMi's plugin marshals it (Go field order; `containerName` omitted when
    /// empty; an empty allowed list as `null`, as a nil Go slice marshals).
    pub fn to_json(&self) -> String {
        let a = &self.0;
        let mut s = String::from("{");
        for (key, v) in [
            ("podUID", &a.pod_uid),
            ("podNamespace", &a.pod_namespace),
            ("podName", &a.pod_name),
            ("nodeName", &a.node_name),
        ] {
            s.push('"');
            s.push_str(key);
            s.push_str("\":");
            push_go_json_string(&mut s, v);
            s.push(',');
        }
        s.push_str(&format!("\"containerIndex\":{},", a.container_index));
        if !a.container_name.is_empty() {
            s.push_str("\"containerName\":");
            push_go_json_string(&mut s, &a.container_name);
            s.push(',');
        }
        s.push_str("\"deviceType\":");
        push_go_json_string(&mut s, &a.device_type);
        s.push_str(",\"allowedDeviceUUIDs\":");
        if a.allowed_device_uuids.is_empty() {
            s.push_str("null");
        } else {
            s.push('[');
            for (i, u) in a.allowed_device_uuids.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                push_go_json_string(&mut s, u);
            }
            s.push(']');
        }
        s.push('}');
        s
    }
}

/// The answer: `containerDevices` and `failureReason` left out when empty, strings escaped as
/// Go's `json.Marshal` escapes them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefitResponse {
    pub succeeded: bool,
    #[serde(default)]
    pub container_devices: String,
    #[serde(default)]
    pub failure_reason: String,
}

impl RefitResponse {
    pub fn failed(reason: impl Into<String>) -> RefitResponse {
        RefitResponse { succeeded: false, container_devices: String::new(), failure_reason: reason.into() }
    }

    pub fn to_json(&self) -> String {
        let mut s = String::from(if self.succeeded { "{\"succeeded\":true" } else { "{\"succeeded\":false" });
        if !self.container_devices.is_empty() {
            s.push_str(",\"containerDevices\":");
            push_go_json_string(&mut s, &self.container_devices);
        }
        if !self.failure_reason.is_empty() {
            s.push_str(",\"failureReason\":");
            push_go_json_string(&mut s, &self.failure_reason);
        }
        s.push('}');
        s
    }
}

impl From<RefitOutcome> for RefitResponse {
    fn from(o: RefitOutcome) -> RefitResponse {
        match o {
            RefitOutcome::Moved(d) | RefitOutcome::Unchanged(d) => {
                RefitResponse { succeeded: true, container_devices: d, failure_reason: String::new() }
            }
            RefitOutcome::Refused(r) => RefitResponse::failed(r),
        }
    }
}

/// Decodes the first JSON value of the body, as Go's `json.Decoder.Decode` does (what follows it
/// is not read); an empty body is Go's `EOF`.
pub fn decode(body: &[u8]) -> Result<RefitArgs, String> {
    match serde_json::Deserializer::from_slice(body).into_iter::<RefitRequest>().next() {
        None => Err("EOF".into()),
        Some(Ok(r)) => Ok(r.0),
        Some(Err(e)) => Err(e.to_string()),
    }
}

fn answer(r: &RefitResponse) -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(r.to_json())
}

/// Why a caller of `/refit` was refused: its status, the counter's word, the text.
struct Refusal {
    status: StatusCode,
    why: &'static str,
    text: String,
}

impl Refusal {
    fn new(status: StatusCode, why: &'static str, text: impl Into<String>) -> Refusal {
        Refusal { status, why, text: text.into() }
    }

    fn respond(self, req: &HttpRequest) -> HttpResponse {
        crate::metrics::request_refused("refit", self.why);
        crate::metrics::refit_done("refused");
        let peer = req.peer_addr().map(|p| p.to_string()).unwrap_or_else(|| "unknown".into());
        tracing::warn!(door = "refit", why = self.why, peer = %peer, "refit refused: {}", self.text);
        // HAMi's plugin reads the reason; "caller authentication" is HAMi's word for it.
        let body = RefitResponse::failed(format!("caller authentication failed: {}", self.text));
        HttpResponse::build(self.status).content_type("application/json").body(body.to_json())
    }
}

/// The bearer token of the request, as HAMi's plugin sends it (`Bearer <token>`, exactly).
fn bearer(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(AUTHORIZATION)?.to_str().ok()?;
    value.strip_prefix("Bearer ").map(str::trim).filter(|t| !t.is_empty())
}

/// Whether `token` is the device plugin's, from a pod on `node` (`None`: a body that did not
/// decode names no node; only who holds the token is checked).
async fn authenticate<B: Backend>(st: &AppState<B>, token: &str, node: Option<&str>) -> Result<(), Refusal> {
    use StatusCode as S;
    let Some((ns, sa)) = &st.access.device_plugin else {
        return Err(Refusal::new(
            S::FORBIDDEN,
            "not_configured",
            "no device plugin ServiceAccount is configured (--device-plugin-namespace, --device-plugin-service-account)",
        ));
    };
    let backend = st.engine.backend();
    let who = match backend.review_token(token).await {
        Ok(Some(who)) => who,
        Ok(None) => return Err(Refusal::new(S::UNAUTHORIZED, "bad_token", "the token does not authenticate")),
        Err(e) => {
            return Err(Refusal::new(
                S::SERVICE_UNAVAILABLE,
                "review_failed",
                format!("the token could not be reviewed: {e}"),
            ));
        }
    };
    let expected = service_account_user(ns, sa);
    if who.username != expected {
        let text = format!("{} is not the device plugin's ServiceAccount {expected}", who.username);
        return Err(Refusal::new(S::FORBIDDEN, "wrong_identity", text));
    }
    let Some(pod) = who.pod else {
        return Err(Refusal::new(S::FORBIDDEN, "not_bound", "the token is not bound to a pod"));
    };
    let Some(node) = node else { return Ok(()) };
    match backend.pod_placement(ns, &pod.name).await {
        Ok(Some(p)) if p.uid == pod.uid && !node.is_empty() && p.node == node => Ok(()),
        Ok(Some(p)) if p.uid == pod.uid => {
            let text = format!("the token's pod {ns}/{} runs on node {:?}, not on {node:?}", pod.name, p.node);
            Err(Refusal::new(S::FORBIDDEN, "wrong_node", text))
        }
        Ok(_) => Err(Refusal::new(S::FORBIDDEN, "not_bound", format!("the token's pod {ns}/{} is gone", pod.name))),
        Err(e) => Err(Refusal::new(
            S::SERVICE_UNAVAILABLE,
            "review_failed",
            format!("the token's pod {ns}/{} could not be read: {e}", pod.name),
        )),
    }
}

pub async fn refit<B: Backend>(
    st: web::Data<AppState<B>>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, Error> {
    let started = Instant::now();
    // Nothing of the body is read for a caller with no token at all.
    let Some(token) = bearer(&req) else {
        return Ok(Refusal::new(StatusCode::UNAUTHORIZED, "no_token", "no bearer token").respond(&req));
    };
    let args = read_body(payload, st.max_body).await.map_err(|e| e.to_string()).and_then(|b| decode(&b));
    if let Err(refused) = authenticate(&st, token, args.as_ref().ok().map(|a| a.node_name.as_str())).await {
        return Ok(refused.respond(&req));
    }
    let args = match args {
        Ok(a) => a,
        Err(e) => {
            crate::metrics::refit_done("refused");
            return Ok(answer(&RefitResponse::failed(e)));
        }
    };
    // HAMi's replica waits for its caches; the plugin's 2 s timeout is better served at once.
    if !st.is_leader() {
        crate::metrics::refit_done("refused");
        return Ok(answer(&RefitResponse::failed(st.not_leader_message())));
    }
    let pod = format!("{}/{}", args.pod_namespace, args.pod_name);
    let index = args.container_index;
    let outcome = st.engine.refit(args).await;
    let verdict = outcome.as_str();
    crate::metrics::refit_done(verdict);
    let res = RefitResponse::from(outcome);
    tracing::info!(pod = %pod, container = index, outcome = verdict, devices = %res.container_devices, reason = %res.failure_reason, latency_us = started.elapsed().as_micros() as u64, "refit");
    Ok(answer(&res))
}

#[cfg(test)]
mod tests;
