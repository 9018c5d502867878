//! `POST /webhook` through the whole app in process: AdmissionReviews as kube-apiserver sends
//! them, answers compared as exact JSON where the shape is the contract (the answer echoes the
//! request's version and uid; mutations are a base64 JSON patch), patches decoded and applied to
//! the pod they came with.

use super::*;

use std::sync::Arc;
use std::time::Duration;

use actix_web::App;
use actix_web::http::StatusCode;
use actix_web::test::{TestRequest, call_service, init_service, read_body};
use actix_web::web::Bytes;
use serde_json::json;

use crate::actor::{Engine, EngineConfig};
use crate::backend::memory::MemoryBackend;
use crate::config::device::DeviceConfig;
use crate::devices::{Discovery, Enable, FitCx, Pick, Vendor, WriteCx};
use crate::http::{Readiness, routes};
use crate::model::PodView;
use crate::model::annotations as keys;
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::request::ContainerRequest;
use crate::model::{ContainerView, VendorId};
use crate::sched::quota_book::QuotaBook;
use crate::sched::reason::Rejection;
use crate::testing::vendors;

/// A started app whose webhook has the given flags.
struct Hook {
    state: web::Data<AppState<MemoryBackend>>,
}

impl Hook {
    async fn start(cfg: admission::Config) -> Hook {
        Hook::with_vendors(cfg, Arc::new(vendors()), 1 << 20).await
    }

    async fn with_vendors(cfg: admission::Config, vendors: Arc<Vendors>, max_body: usize) -> Hook {
        let backend = MemoryBackend::new(Duration::from_secs(300));
        let engine = Engine::start(EngineConfig::default(), vendors, backend, None);
        Hook { state: web::Data::new(AppState::new(engine, max_body, Readiness::ready()).with_webhook(cfg)) }
    }

    async fn post_raw(&self, body: impl Into<Bytes>) -> (StatusCode, Bytes) {
        let app = init_service(App::new().app_data(self.state.clone()).configure(routes::<MemoryBackend>)).await;
        let req = TestRequest::post()
            .uri("/webhook")
            .insert_header(("content-type", "application/json"))
            .set_payload(body.into())
            .to_request();
        let res = call_service(&app, req).await;
        let status = res.status();
        (status, read_body(res).await)
    }

    /// POST /webhook; the answer must be 200 and is returned as text.
    async fn text(&self, body: &Value) -> String {
        let (status, b) = self.post_raw(body.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
        String::from_utf8(b.to_vec()).unwrap()
    }

    /// POST /webhook with `pod` in a v1 review; the `response` object, its uid checked.
    async fn admit(&self, pod: Value) -> Value {
        let v: Value = serde_json::from_str(&self.text(&review(V1, pod)).await).unwrap();
        assert_eq!(v["response"]["uid"], UID, "the response echoes the request's uid");
        v["response"].clone()
    }
}

const UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

/// The chart's flags: `--scheduler-name=hami-scheduler`, force-overwrite on, no quota.
fn hami() -> admission::Config {
    admission::Config { scheduler_name: "hami-scheduler".into(), force_overwrite_default_scheduler: true, quota: None }
}

/// An AdmissionReview for a pod CREATE in `default`, as kube-apiserver sends it.
fn review(version: &str, pod: Value) -> Value {
    json!({
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "e2e-admin", "groups": ["system:masters"]},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

/// Pod `p` with one container `c` and these limits.
fn pod(limits: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]}
    })
}

/// A container named `name` with these limits.
fn container(name: &str, limits: Value) -> Value {
    json!({"name": name, "image": "x", "resources": {"limits": limits}})
}

/// A pod with these init and regular containers.
fn pod_of(init: Vec<Value>, regular: Vec<Value>) -> Value {
    json!({"metadata": {"name": "p"}, "spec": {"initContainers": init, "containers": regular}})
}

/// The decoded JSON-patch operations of an allowed response.
fn ops(res: &Value) -> Value {
    assert_eq!(res["allowed"], true, "{res}");
    assert_eq!(res["patchType"], "JSONPatch", "{res}");
    let raw = base64::engine::general_purpose::STANDARD.decode(res["patch"].as_str().unwrap()).unwrap();
    serde_json::from_slice(&raw).unwrap()
}

/// The pod as the apiserver stores it after applying the response's patch.
fn patched(mut pod: Value, res: &Value) -> Value {
    let p: json_patch::Patch = serde_json::from_value(ops(res)).unwrap();
    json_patch::patch(&mut pod, &p.0).unwrap();
    pod
}

/// Allowed, with no patch and no status.
fn assert_untouched(res: &Value) {
    assert_eq!(res, &json!({"uid": UID, "allowed": true}));
}

/// A denial with status code 403 and exactly `message`.
fn assert_denied(res: &Value, message: &str) {
    assert_eq!(
        res,
        &json!({"uid": UID, "allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": message}})
    );
}

/// A 400 answer must carry `{"error": "<text>"}` and nothing else.
fn assert_bad_request(status: StatusCode, body: &Bytes) -> String {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{}", String::from_utf8_lossy(body));
    let v: Value = serde_json::from_slice(body).unwrap();
    let obj = v.as_object().unwrap();
    assert_eq!(obj.len(), 1, "{v}");
    obj["error"].as_str().unwrap().to_owned()
}

const PATCH_SCHEDULER_NAME: &str =
    "W3sib3AiOiJhZGQiLCJwYXRoIjoiL3NwZWMvc2NoZWR1bGVyTmFtZSIsInZhbHVlIjoiaGFtaS1zY2hlZHVsZXIifV0=";

// --- transport ---------------------------------------------------------------------------------

#[actix_web::test]
async fn a_v1_review_is_answered_in_admission_v1s_exact_shape() {
    // As in HAMi, count and memory given, so no cores are injected; only spec.schedulerName
    // is added. The patch is padded standard base64.
    let hook = Hook::start(hami()).await;
    let text = hook.text(&review(V1, pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})))).await;
    assert_eq!(
        text,
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"{UID}","allowed":true,"patchType":"JSONPatch","patch":"{PATCH_SCHEDULER_NAME}"}}}}"#
        )
    );
}

#[actix_web::test]
async fn a_v1beta1_review_is_answered_in_v1beta1() {
    // HAMi's chart registers the webhook for v1beta1 only, and the answer keeps the request's
    // version. A pod with `nvidia.com/gpu: 1` alone gets 100 cores (whole memory is exclusive).
    let hook = Hook::start(hami()).await;
    let text = hook.text(&review(V1BETA1, pod(json!({"nvidia.com/gpu": "1"})))).await;
    let patch = "W3sib3AiOiJhZGQiLCJwYXRoIjoiL3NwZWMvY29udGFpbmVycy8wL3Jlc291cmNlcy9saW1pdHMvbnZpZGlhLmNvbX4xZ3B1Y29yZXMiLCJ2YWx1ZSI6IjEwMCJ9LHsib3AiOiJhZGQiLCJwYXRoIjoiL3NwZWMvc2NoZWR1bGVyTmFtZSIsInZhbHVlIjoiaGFtaS1zY2hlZHVsZXIifV0=";
    assert_eq!(
        text,
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{{"uid":"{UID}","allowed":true,"patchType":"JSONPatch","patch":"{patch}"}}}}"#
        )
    );
}

#[actix_web::test]
async fn a_v1beta1_denial_carries_code_reason_and_message() {
    // As in HAMi, denials are allowed:false with status.code 403 and HAMi's message.
    let hook = Hook::start(hami()).await;
    let text = hook.text(&review(V1BETA1, json!({"metadata": {"name": "p"}, "spec": {"containers": []}}))).await;
    assert_eq!(
        text,
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{{"uid":"{UID}","allowed":false,"status":{{"code":403,"reason":"Forbidden","message":"pod has no containers"}}}}}}"#
        )
    );
}

#[actix_web::test]
async fn lower_cased_and_extra_fields_are_tolerated() {
    // Go matches field names case-insensitively; unknown fields are ignored.
    let hook = Hook::start(hami()).await;
    let body = json!({
        "apiversion": V1,
        "KIND": "AdmissionReview",
        "extra": {"x": 1},
        "Request": {
            "UID": "lower",
            "Namespace": "default",
            "somethingNew": [1, 2, 3],
            "Object": pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}))
        }
    });
    let v: Value = serde_json::from_str(&hook.text(&body).await).unwrap();
    assert_eq!(v["apiVersion"], V1);
    assert_eq!(v["kind"], "AdmissionReview");
    assert_eq!(v["response"]["uid"], "lower");
    assert_eq!(v["response"]["patch"], PATCH_SCHEDULER_NAME);
}

#[actix_web::test]
async fn malformed_bodies_are_400_with_an_error_object() {
    // A body that is not an AdmissionReview has no request to answer.
    let hook = Hook::start(hami()).await;
    let cases: Vec<(&str, String)> = vec![
        ("empty body", String::new()),
        ("whitespace", "  \n".into()),
        ("truncated JSON", r#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":"#.into()),
        ("not an object", "[1,2]".into()),
        ("no request", json!({"apiVersion": V1, "kind": "AdmissionReview"}).to_string()),
        ("null request", json!({"apiVersion": V1, "kind": "AdmissionReview", "request": null}).to_string()),
        ("request of the wrong type", json!({"apiVersion": V1, "kind": "AdmissionReview", "request": "x"}).to_string()),
        (
            "uid of the wrong type",
            json!({"apiVersion": V1, "request": {"uid": 7, "object": pod(json!({}))}}).to_string(),
        ),
        ("no uid", json!({"apiVersion": V1, "request": {"object": pod(json!({}))}}).to_string()),
        (
            "namespace of the wrong type",
            json!({"apiVersion": V1, "request": {"uid": "u", "namespace": []}}).to_string(),
        ),
        ("unknown version", json!({"apiVersion": "admission.k8s.io/v2", "request": {"uid": "u"}}).to_string()),
        ("no version", json!({"request": {"uid": "u"}}).to_string()),
        ("version of the wrong type", json!({"apiVersion": 1, "request": {"uid": "u"}}).to_string()),
        ("another kind", json!({"apiVersion": V1, "kind": "Pod", "request": {"uid": "u"}}).to_string()),
    ];
    for (what, body) in cases {
        let (status, b) = hook.post_raw(body).await;
        let msg = assert_bad_request(status, &b);
        assert!(!msg.is_empty(), "{what}");
    }
}

#[actix_web::test]
async fn an_oversized_body_is_400() {
    // --max-body-bytes bounds /webhook as well as /filter and /bind (HAMi reads at most 1 MiB
    // there).
    let hook = Hook::with_vendors(hami(), Arc::new(vendors()), 1024).await;
    let big = review(V1, pod(json!({"nvidia.com/gpu": "1", "padding": "x".repeat(2048)})));
    let (status, b) = hook.post_raw(big.to_string()).await;
    assert!(assert_bad_request(status, &b).contains("1024"));
}

#[actix_web::test]
async fn a_pod_that_does_not_decode_is_a_400_review_with_the_uid() {
    // As in HAMi, a pod that does not decode → allowed:false, code 400, the request still answered.
    let hook = Hook::start(hami()).await;
    for object in [
        json!({"metadata": {"name": "p"}, "spec": {"containers": "c"}}),
        json!({"spec": {"containers": [{"name": "c", "securityContext": {"privileged": "yes"}}]}}),
        json!("a pod"),
    ] {
        let res = hook.admit(object).await;
        assert_eq!(res["allowed"], false, "{res}");
        assert_eq!(res["status"]["code"], 400, "{res}");
        assert!(res["status"]["message"].as_str().unwrap().starts_with("decoding pod"), "{res}");
        assert!(res.get("patch").is_none());
    }
    let missing = json!({"apiVersion": V1, "kind": "AdmissionReview", "request": {"uid": UID}});
    let v: Value = serde_json::from_str(&hook.text(&missing).await).unwrap();
    assert_eq!(v["response"]["uid"], UID);
    assert_eq!(v["response"]["status"]["code"], 400);
}

// --- decision sequence ---------------------------------------------------------------------------

#[actix_web::test]
async fn a_pod_without_containers_is_denied() {
    // HAMi denies a pod with no regular containers; init containers alone do not count.
    let hook = Hook::start(hami()).await;
    assert_denied(&hook.admit(json!({"metadata": {"name": "p"}, "spec": {}})).await, "pod has no containers");
    let only_init = pod_of(vec![container("i", json!({"nvidia.com/gpu": "1"}))], vec![]);
    assert_denied(&hook.admit(only_init).await, "pod has no containers");
}

#[actix_web::test]
async fn the_worked_example_adds_exclusive_cores_and_the_scheduler_name() {
    // HAMi's example: `nvidia.com/gpu: 1` alone → gpucores 100 (whole memory) and schedulerName.
    let hook = Hook::start(hami()).await;
    let p = pod(json!({"nvidia.com/gpu": "1"}));
    let res = hook.admit(p.clone()).await;
    assert_eq!(
        ops(&res),
        json!([
            {"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpucores", "value": "100"},
            {"op": "add", "path": "/spec/schedulerName", "value": "hami-scheduler"}
        ])
    );
    let after = patched(p, &res);
    assert_eq!(after["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"], "100");
    assert_eq!(after["spec"]["schedulerName"], "hami-scheduler");
}

#[actix_web::test]
async fn a_pod_that_gives_memory_gets_no_cores() {
    // HAMi's exclusive-core default (100 cores) needs whole memory: memory present, so not "whole".
    let hook = Hook::start(hami()).await;
    let res = hook.admit(pod(json!({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}))).await;
    assert_eq!(ops(&res), json!([{"op": "add", "path": "/spec/schedulerName", "value": "hami-scheduler"}]));
    // 100 % of memory is whole again, whatever the memory says.
    let res = hook.admit(pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"}))).await;
    assert_eq!(ops(&res)[0]["path"], "/spec/containers/0/resources/limits/nvidia.com~1gpucores");
    // Cores given by the user are kept.
    let res = hook.admit(pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"}))).await;
    assert_eq!(ops(&res), json!([{"op": "add", "path": "/spec/schedulerName", "value": "hami-scheduler"}]));
}

#[actix_web::test]
async fn memory_alone_gets_the_default_gpu_count() {
    // HAMi injects the count: memory in limits without a count, defaultGPUNum (chart: 1) > 0.
    let hook = Hook::start(hami()).await;
    let res = hook.admit(pod(json!({"nvidia.com/gpumem": "4096"}))).await;
    assert_eq!(
        ops(&res),
        json!([
            {"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "1"},
            {"op": "add", "path": "/spec/schedulerName", "value": "hami-scheduler"}
        ])
    );
}

#[actix_web::test]
async fn without_a_default_count_memory_alone_is_not_a_request() {
    // HAMi injects a count only when defaultGPUNum > 0.
    let mut cfg = DeviceConfig::chart();
    cfg.nvidia.default_gpu_num = 0;
    let v = Vendors::from_config(&cfg, Enable::default());
    let hook = Hook::with_vendors(hami(), Arc::new(v), 1 << 20).await;
    assert_untouched(&hook.admit(pod(json!({"nvidia.com/gpumem": "4096"}))).await);
}

#[actix_web::test]
async fn a_pod_without_a_device_request_is_allowed_unchanged() {
    // As in HAMi, nothing recognised, so no schedulerName and no patch.
    let hook = Hook::start(hami()).await;
    assert_untouched(&hook.admit(pod(json!({"cpu": "1", "memory": "1Gi"}))).await);
    assert_untouched(&hook.admit(json!({"spec": {"containers": [{"name": "c"}]}})).await);
}

#[actix_web::test]
async fn a_pod_of_another_scheduler_is_allowed_unchanged_with_hamis_message() {
    // HAMi leaves a pod that names another scheduler alone, with this message and no quota check.
    let hook = Hook::start(hami()).await;
    let mut p = pod(json!({"nvidia.com/gpu": "1"}));
    p["spec"]["schedulerName"] = json!("volcano");
    let res = hook.admit(p).await;
    assert_eq!(
        res,
        json!({"uid": UID, "allowed": true, "status": {"code": 200, "message": "pod already has different scheduler assigned"}})
    );
}

#[actix_web::test]
async fn a_pod_already_on_our_scheduler_is_mutated() {
    // A schedulerName equal to --scheduler-name is ours; HAMi sets the same value again (no op).
    let hook = Hook::start(hami()).await;
    let mut p = pod(json!({"nvidia.com/gpu": "1"}));
    p["spec"]["schedulerName"] = json!("hami-scheduler");
    let res = hook.admit(p).await;
    assert_eq!(
        ops(&res),
        json!([{"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpucores", "value": "100"}])
    );
}

#[actix_web::test]
async fn default_scheduler_is_taken_over_only_when_the_flag_is_on() {
    // HAMi takes over `default-scheduler` pods only with --force-overwrite-default-scheduler.
    let mut p = pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}));
    p["spec"]["schedulerName"] = json!("default-scheduler");

    let on = Hook::start(hami()).await;
    let res = on.admit(p.clone()).await;
    assert_eq!(ops(&res), json!([{"op": "replace", "path": "/spec/schedulerName", "value": "hami-scheduler"}]));

    let off = Hook::start(admission::Config { force_overwrite_default_scheduler: false, ..hami() }).await;
    let res = off.admit(p).await;
    assert_eq!(res["allowed"], true);
    assert_eq!(res["status"]["message"], "pod already has different scheduler assigned");
    assert!(res.get("patch").is_none());
}

#[actix_web::test]
async fn without_a_scheduler_name_the_pod_keeps_its_scheduler() {
    // HAMi's default --scheduler-name is empty: schedulerName is not set, defaults still apply.
    let hook = Hook::start(admission::Config::default()).await;
    let res = hook.admit(pod(json!({"nvidia.com/gpu": "1"}))).await;
    assert_eq!(
        ops(&res),
        json!([{"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpucores", "value": "100"}])
    );
}

#[actix_web::test]
async fn init_containers_are_mutated_first_and_every_container_is_visited() {
    // HAMi mutates init containers, then regular ones.
    let hook = Hook::start(hami()).await;
    let p = pod_of(
        vec![container("i", json!({"nvidia.com/gpu": "1"}))],
        vec![container("a", json!({"cpu": "1"})), container("b", json!({"nvidia.com/gpu": "2"}))],
    );
    let res = hook.admit(p.clone()).await;
    let after = patched(p, &res);
    assert_eq!(after["spec"]["initContainers"][0]["resources"]["limits"]["nvidia.com/gpucores"], "100");
    assert_eq!(after["spec"]["containers"][0]["resources"]["limits"], json!({"cpu": "1"}));
    assert_eq!(after["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpucores"], "100");
    assert_eq!(after["spec"]["schedulerName"], "hami-scheduler");
}

#[actix_web::test]
async fn env_from_limits_is_appended() {
    // HAMi: `nvidia.com/priority` in limits → env CUDA_TASK_PRIORITY.
    let hook = Hook::start(hami()).await;
    let mut p = pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", "nvidia.com/priority": "1"}));
    p["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "b"}]);
    let res = hook.admit(p.clone()).await;
    let after = patched(p, &res);
    assert_eq!(
        after["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "b"}, {"name": "CUDA_TASK_PRIORITY", "value": "1"}])
    );
}

#[actix_web::test]
async fn a_configured_runtime_class_is_set_once() {
    // HAMi: a recognised request, no runtimeClassName yet, one configured → set it.
    let mut cfg = DeviceConfig::chart();
    cfg.nvidia.runtime_class_name = "nvidia".into();
    let hook = Hook::with_vendors(hami(), Arc::new(Vendors::from_config(&cfg, Enable::default())), 1 << 20).await;
    let p = pod_of(
        vec![],
        vec![container("a", json!({"nvidia.com/gpu": "1"})), container("b", json!({"nvidia.com/gpu": "1"}))],
    );
    let after = patched(p.clone(), &hook.admit(p).await);
    assert_eq!(after["spec"]["runtimeClassName"], "nvidia");

    let mut own = pod(json!({"nvidia.com/gpu": "1"}));
    own["spec"]["runtimeClassName"] = json!("kata");
    let after = patched(own.clone(), &hook.admit(own).await);
    assert_eq!(after["spec"]["runtimeClassName"], "kata");
}

#[actix_web::test]
async fn a_privileged_container_that_requests_devices_is_denied() {
    // HAMi denies a device pod with a privileged container (older HAMi skipped it and admitted
    // the pod); the first privileged container is named, init containers first.
    let hook = Hook::start(hami()).await;
    let mut p = pod(json!({"nvidia.com/gpu": "1"}));
    p["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    assert_denied(&hook.admit(p).await, "container c is privileged");

    let mut init = container("setup", json!({}));
    init["securityContext"] = json!({"privileged": true});
    let p = pod_of(vec![init], vec![container("c", json!({"nvidia.com/gpu": "1"}))]);
    assert_denied(&hook.admit(p).await, "container setup is privileged");
}

#[actix_web::test]
async fn a_privileged_container_without_devices_is_allowed() {
    // HAMi denies privileged containers only in a pod with a recognised device request.
    let hook = Hook::start(hami()).await;
    let mut p = pod(json!({"cpu": "1"}));
    p["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    assert_untouched(&hook.admit(p).await);
}

#[actix_web::test]
async fn a_pod_with_a_node_assigned_is_denied() {
    // HAMi's webhook checks nodeName after the scheduler name: a pod with a node already set is
    // denied.
    let hook = Hook::start(hami()).await;
    let mut p = pod(json!({"nvidia.com/gpu": "1"}));
    p["spec"]["nodeName"] = json!("node-a");
    assert_denied(&hook.admit(p.clone()).await, "pod has node assigned");
    // Without --scheduler-name the check is not reached, as in HAMi.
    let plain = Hook::start(admission::Config::default()).await;
    assert_eq!(plain.admit(p).await["allowed"], true);
}

#[actix_web::test]
async fn a_memory_percentage_out_of_range_is_a_500_with_hamis_message() {
    // As in HAMi, vendor validation errors are allowed:false, code 500, the error text.
    let hook = Hook::start(hami()).await;
    for v in ["101", "-1", "50.5"] {
        let res = hook.admit(pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": v}))).await;
        assert_eq!(
            res,
            json!({"uid": UID, "allowed": false, "status": {"code": 500, "message": format!(
                "invalid nvidia.com/gpumem-percentage value {v} in container c: must be an integer between 0 and 100"
            )}})
        );
    }
}

#[actix_web::test]
async fn cores_out_of_range_are_a_500_with_hamis_message() {
    // HAMi PR 2784: nvidia.com/gpucores outside 0–100 is refused at admission, as the memory
    // percentage is; 0 and 100 are allowed.
    let hook = Hook::start(hami()).await;
    for v in ["101", "-1", "150", "50.5"] {
        let res = hook.admit(pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpucores": v}))).await;
        assert_eq!(
            res,
            json!({"uid": UID, "allowed": false, "status": {"code": 500, "message": format!(
                "invalid nvidia.com/gpucores value {v} in container c: must be an integer between 0 and 100"
            )}}),
            "{v}"
        );
    }
    for v in ["0", "100", "30"] {
        let res = hook.admit(pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpucores": v}))).await;
        assert_eq!(res["allowed"], true, "{v}: {res}");
    }
}

#[actix_web::test]
async fn an_unusable_memory_quantity_is_denied_at_admission() {
    // HAMi drops a `16Gi` gpumem request and places the pod with no reservation; hami-rs
    // refuses it here.
    let hook = Hook::start(hami()).await;
    let res = hook.admit(pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "16Gi"}))).await;
    assert_denied(
        &res,
        "container c: unusable NVIDIA device request: nvidia.com/gpumem: 17179869184 is out of range 0..=2147483647",
    );
    let res = hook.admit(pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1.5"}))).await;
    assert_eq!(res["status"]["code"], 403, "{res}");
    assert!(res["status"]["message"].as_str().unwrap().contains("nvidia.com/gpumem"), "{res}");
}

#[actix_web::test]
async fn a_bad_scoring_weights_annotation_denies_a_device_pod_and_no_other() {
    // HAMi PR 2827: once the webhook knows the pod asks for a device, weights that do not parse
    // deny it with the parser's text (before the privileged check); a pod asking for no device is
    // admitted whatever its annotation says.
    let hook = Hook::start(hami()).await;
    let weighted = |limits: Value, w: &str| {
        let mut p = pod(limits);
        p["metadata"]["annotations"][keys::DEVICE_SCORING_WEIGHTS] = json!(w);
        p
    };
    let gpu = || json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"});
    assert_denied(
        &hook.admit(weighted(gpu(), "bogus=weights")).await,
        r#"invalid hami.io/device-scoring-weights annotation "bogus=weights": expected slot, core, and memory weights"#,
    );
    let mut privileged = weighted(gpu(), "slot=1,core=1,memory=x");
    privileged["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    assert_denied(
        &hook.admit(privileged).await,
        r#"invalid hami.io/device-scoring-weights annotation "slot=1,core=1,memory=x": "memory" weight must be an integer"#,
    );
    assert_eq!(hook.admit(weighted(json!({}), "bogus=weights")).await["allowed"], true, "a CPU-only pod");
    assert_eq!(hook.admit(weighted(gpu(), "slot=1, core=1, memory=3")).await["allowed"], true);
}

// --- quota ---------------------------------------------------------------------------------------

/// The chart's vendors with a quota book limiting `default` to `hard`.
async fn with_quota(hard: &[(&str, i64)]) -> Hook {
    let v = Arc::new(vendors());
    let book = Arc::new(QuotaBook::new(&v));
    let hard: Vec<(String, i64)> = hard.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect();
    book.set_quota("default", "q", &hard);
    Hook::with_vendors(admission::Config { quota: Some(book), ..hami() }, v, 1 << 20).await
}

#[actix_web::test]
async fn a_pod_over_its_namespace_quota_is_denied() {
    // HAMi's admission quota check: memory × count against limits.<memory name>.
    let hook = with_quota(&[("limits.nvidia.com/gpumem", 1000)]).await;
    assert_denied(
        &hook.admit(pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}))).await,
        "exceeding resource quota",
    );
    assert_denied(
        &hook.admit(pod(json!({"nvidia.com/gpu": "3", "nvidia.com/gpumem": "400"}))).await,
        "exceeding resource quota",
    );
    assert_eq!(hook.admit(pod(json!({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "500"}))).await["allowed"], true);
}

#[actix_web::test]
async fn regular_containers_add_up_and_init_containers_count_their_peak() {
    // HAMi's quota pre-check: sum over regular containers, max over init containers,
    // the larger of the two.
    let hook = with_quota(&[("limits.nvidia.com/gpumem", 1000)]).await;
    let gpu = |m: &str| json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": m});
    let regular = pod_of(vec![], vec![container("a", gpu("600")), container("b", gpu("600"))]);
    assert_denied(&hook.admit(regular).await, "exceeding resource quota");
    let inits =
        pod_of(vec![container("i1", gpu("900")), container("i2", gpu("900"))], vec![container("c", gpu("500"))]);
    assert_eq!(hook.admit(inits).await["allowed"], true, "init containers run one at a time");
    let big_init = pod_of(vec![container("i", gpu("1200"))], vec![container("c", gpu("500"))]);
    assert_denied(&hook.admit(big_init).await, "exceeding resource quota");
}

#[actix_web::test]
async fn cores_are_checked_and_percentage_memory_counts_nothing() {
    // HAMi's quota pre-check: injected cores count; percentage-only memory is 0 here.
    let hook = with_quota(&[("limits.nvidia.com/gpumem", 1000), ("limits.nvidia.com/gpucores", 50)]).await;
    assert_denied(&hook.admit(pod(json!({"nvidia.com/gpu": "1"}))).await, "exceeding resource quota");
    let pct = pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50", "nvidia.com/gpucores": "50"}));
    assert_eq!(hook.admit(pct).await["allowed"], true);
}

#[actix_web::test]
async fn quota_applies_only_to_its_namespace_and_not_to_other_schedulers_pods() {
    // As in HAMi, a namespace without a quota fits; another scheduler's pod is not quota-checked.
    let hook = with_quota(&[("limits.nvidia.com/gpumem", 1000)]).await;
    let big = pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}));
    let mut other_ns = review(V1, big.clone());
    other_ns["request"]["namespace"] = json!("team-b");
    let v: Value = serde_json::from_str(&hook.text(&other_ns).await).unwrap();
    assert_eq!(v["response"]["allowed"], true);

    let mut theirs = big;
    theirs["spec"]["schedulerName"] = json!("volcano");
    assert_eq!(hook.admit(theirs).await["status"]["message"], "pod already has different scheduler assigned");
}

#[actix_web::test]
async fn a_pod_without_a_request_namespace_uses_its_own() {
    // The pod's metadata.namespace stands in when the review has none.
    let hook = with_quota(&[("limits.nvidia.com/gpumem", 1000)]).await;
    let mut p = pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}));
    p["metadata"]["namespace"] = json!("default");
    let mut r = review(V1, p);
    r["request"].as_object_mut().unwrap().remove("namespace");
    let v: Value = serde_json::from_str(&hook.text(&r).await).unwrap();
    assert_eq!(v["response"]["status"]["message"], "exceeding resource quota");
}

// --- pod-level edits -----------------------------------------------------------------------------

/// A vendor whose mutation asks for a pod annotation and a runtime class, or fails.
struct Marker {
    fail: bool,
}

impl Vendor for Marker {
    fn name(&self) -> &str {
        "MARK"
    }
    fn resource_names(&self) -> Vec<String> {
        vec!["example.com/mark".into()]
    }
    fn request(
        &self,
        _: VendorId,
        _: &ContainerView,
        _: &PodView,
    ) -> Result<Option<ContainerRequest>, crate::devices::Unusable> {
        Ok(None)
    }
    fn mutate(&self, c: &mut ContainerEdit<'_>, pod: &mut PodContext<'_>) -> Result<bool, crate::devices::Unusable> {
        let Some(n) = c.limit("example.com/mark") else { return Ok(false) };
        if self.fail {
            return Err(format!("mark {n} refused in container {}", c.name()).into());
        }
        let seen = pod.annotation("example.com/marks").unwrap_or("").to_owned();
        pod.set_annotation("example.com/marks", &format!("{seen}{}", c.name()));
        pod.default_runtime_class("marked");
        Ok(true)
    }
    fn discover(&self, _: &NodeView) -> Discovery {
        Discovery::Absent
    }
    fn fit(&self, _: &FitCx<'_>, _: &mut Vec<Pick>) -> Result<(), Rejection> {
        Ok(())
    }
    fn allocated_key(&self) -> Option<&str> {
        None
    }
    fn pod_keys(&self) -> Vec<String> {
        Vec::new()
    }
    fn annotations(&self, _: &WriteCx<'_>, _: &mut Vec<(String, String)>) {}
}

#[actix_web::test]
async fn pod_annotations_and_runtime_class_from_vendors_are_applied() {
    // Per-vendor mutations may edit the pod (e.g. HAMi's Mthreads request-gpu-num annotation):
    // pod-level edits land after the container mutations; later edits see earlier ones.
    let v = Vendors::new(vec![Box::new(Marker { fail: false })]);
    let hook = Hook::with_vendors(hami(), Arc::new(v), 1 << 20).await;
    let p = json!({
        "metadata": {"name": "p", "annotations": {"keep": "me"}},
        "spec": {"initContainers": [container("i", json!({"example.com/mark": "1"}))],
                 "containers": [container("c", json!({"example.com/mark": "1"}))]}
    });
    let after = patched(p.clone(), &hook.admit(p).await);
    assert_eq!(after["metadata"]["annotations"], json!({"keep": "me", "example.com/marks": "ic"}));
    assert_eq!(after["spec"]["runtimeClassName"], "marked");
    assert_eq!(after["spec"]["schedulerName"], "hami-scheduler");

    let bare = json!({"spec": {"containers": [container("c", json!({"example.com/mark": "1"}))]}});
    let after = patched(bare.clone(), &hook.admit(bare).await);
    assert_eq!(after["metadata"]["annotations"], json!({"example.com/marks": "c"}));
}

#[actix_web::test]
async fn a_vendor_error_is_a_500_with_its_text() {
    // As in HAMi, any vendor error → allowed:false, code 500, that text.
    let v = Vendors::new(vec![Box::new(Marker { fail: true })]);
    let hook = Hook::with_vendors(hami(), Arc::new(v), 1 << 20).await;
    let res = hook.admit(pod(json!({"example.com/mark": "2"}))).await;
    assert_eq!(
        res,
        json!({"uid": UID, "allowed": false, "status": {"code": 500, "message": "mark 2 refused in container c"}})
    );
}

#[actix_web::test]
async fn every_answer_echoes_the_request_uid() {
    // The response uid is the request's, whatever the decision.
    let hook = Hook::start(hami()).await;
    let pods = [
        pod(json!({"nvidia.com/gpu": "1"})),
        pod(json!({})),
        json!({"spec": {"containers": []}}),
        pod(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "101"})),
        json!(null),
    ];
    for (i, p) in pods.into_iter().enumerate() {
        let mut r = review(V1, p);
        let uid = format!("uid-{i}");
        r["request"]["uid"] = json!(uid);
        let v: Value = serde_json::from_str(&hook.text(&r).await).unwrap();
        assert_eq!(v["response"]["uid"], uid);
    }
}

// --- pods created carrying a decision -----------------------------------------------------------

/// Every key HAMi's webhook refuses on a pod it is asked to create: the node and bind phase of a
/// decision, and each registered vendor's pending and allocated lists.
const SCHEDULER_KEYS: &[&str] = &[
    "hami.io/vgpu-node",
    "hami.io/bind-time",
    "hami.io/bind-phase",
    "hami.io/vgpu-devices-to-allocate",
    "hami.io/vgpu-devices-allocated",
    "hami.io/cambricon-mlu-devices-to-allocate",
    "hami.io/cambricon-mlu-devices-allocated",
    "hami.io/dcu-devices-to-allocate",
    "hami.io/dcu-devices-allocated",
    "hami.io/enflame-gcu-devices-to-allocate",
    "hami.io/enflame-gcu-devices-allocated",
    "hami.io/enflame-vgpu-devices-allocated",
    "hami.io/mthreads-vgpu-devices-to-allocate",
    "hami.io/mthreads-vgpu-devices-allocated",
    "hami.io/metax-gpu-devices-to-allocate",
    "hami.io/metax-gpu-devices-allocated",
    "hami.io/metax-sgpu-devices-to-allocate",
    "hami.io/metax-sgpu-devices-allocated",
    "hami.io/kunlun-allocated",
    "hami.io/xpu-devices-to-allocate",
    "hami.io/xpu-devices-allocated",
    "hami.io/aws-neuron-devices-allocated",
    "hami.io/amd-devices-to-allocate",
    "hami.io/amd-devices-allocated",
    "hami.io/Vastai-devices-to-allocate",
    "hami.io/Vastai-devices-allocated",
    "hami.io/Biren-devices-to-allocate",
    "hami.io/Biren-devices-allocated",
    "hami.io/Ascend910A-devices-to-allocate",
    "hami.io/Ascend910A-devices-allocated",
    "hami.io/Ascend910B3-devices-to-allocate",
    "hami.io/Ascend910B3-devices-allocated",
    "hami.io/Ascend910B4-1-devices-to-allocate",
    "hami.io/Ascend910B4-1-devices-allocated",
    "hami.io/MR-V100-devices-to-allocate",
    "hami.io/MR-V100-devices-allocated",
    "hami.io/BI-V150-devices-to-allocate",
    "hami.io/BI-V150-devices-allocated",
];

fn with_annotation(mut pod: Value, key: &str, value: &str) -> Value {
    pod["metadata"]["annotations"] = json!({ key: value });
    pod
}

fn forged_message(key: &str) -> String {
    format!("annotation {key} is written by the scheduler and cannot be set when creating a pod")
}

#[actix_web::test]
async fn a_pod_created_with_any_vendors_decision_keys_is_denied_whatever_its_scheduler() {
    let hook = Hook::start(hami()).await;
    let gpu = || pod(json!({"nvidia.com/gpu": "1"}));
    let mut other = pod(json!({}));
    other["spec"]["schedulerName"] = json!("some-other-scheduler");
    for key in SCHEDULER_KEYS.iter().copied().chain(["hami.io/vgpu-mig-allocations"]) {
        for (what, p) in [("GPU pod", gpu()), ("pod of another scheduler without devices", other.clone())] {
            let res = hook.admit(with_annotation(p, key, "GPU-a,NVIDIA,20000,100:;")).await;
            assert_eq!(res["allowed"], false, "{what} with {key}: {res}");
            assert_eq!(res["status"]["code"], 403, "{what} with {key}: {res}");
            assert_eq!(res["status"]["reason"], "Forbidden", "{what} with {key}: {res}");
            assert_eq!(res["status"]["message"], forged_message(key), "{what} with {key}");
        }
        // Presence alone counts, as in HAMi: an empty value too.
        let res = hook.admit(with_annotation(gpu(), key, "")).await;
        assert_eq!(res["allowed"], false, "empty {key}: {res}");
    }
}

#[actix_web::test]
async fn the_scheduler_keys_are_every_vendors_decision_keys_each_once() {
    let v = vendors();
    let keys: Vec<&str> = v.scheduler_keys().iter().map(String::as_str).collect();
    for k in SCHEDULER_KEYS {
        assert!(keys.contains(k), "{k} missing from {keys:?}");
    }
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), keys.len(), "each key once: {keys:?}");
    assert_eq!(keys[..3], ["hami.io/vgpu-node", "hami.io/bind-time", "hami.io/bind-phase"]);
}

#[actix_web::test]
async fn keys_a_user_may_set_and_updates_of_a_scheduled_pod_are_not_refused() {
    let hook = Hook::start(hami()).await;
    let gpu = || pod(json!({"nvidia.com/gpu": "1"}));
    // The user's own choices, and the decision time HAMi does not guard.
    for key in
        ["hami.io/gpu-scheduler-policy", "nvidia.com/use-gpuuuid", "hami.io/vgpu-time", "hami.io/node-nvidia-register"]
    {
        let res = hook.admit(with_annotation(gpu(), key, "x")).await;
        assert_eq!(res["allowed"], true, "{key}: {res}");
    }
    // An update of a pod that carries its decision (a label added, say) changes no owned key.
    let placed = with_annotation(gpu(), "hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,1000,0:;");
    let mut labelled = placed.clone();
    labelled["metadata"]["labels"] = json!({"team": "b"});
    let v: Value = serde_json::from_str(&hook.text(&update(placed, labelled, TENANT)).await).unwrap();
    assert_eq!(v["response"]["allowed"], true, "{v}");
    assert!(v["response"].get("patch").is_none(), "an update is not mutated: {v}");
    // A review that does not say is taken as a creation.
    let mut unsaid = review(V1, with_annotation(gpu(), "hami.io/bind-phase", "allocating"));
    unsaid["request"].as_object_mut().unwrap().remove("operation");
    let v: Value = serde_json::from_str(&hook.text(&unsaid).await).unwrap();
    assert_eq!(v["response"]["allowed"], false, "{v}");
}

#[actix_web::test]
async fn a_pod_without_containers_is_denied_for_that_before_its_annotations_are_read() {
    let hook = Hook::start(hami()).await;
    let mut p = with_annotation(pod(json!({})), "hami.io/vgpu-node", "n");
    p["spec"]["containers"] = json!([]);
    let res = hook.admit(p).await;
    assert_eq!(res["status"]["message"], "pod has no containers", "{res}");
}

/// `pod` with `hami.io/numa-alignment` set to `value`.
fn numa_aligned(mut p: Value, value: &str) -> Value {
    p["metadata"]["annotations"] = json!({ "hami.io/numa-alignment": value });
    p
}

#[actix_web::test]
async fn an_invalid_numa_alignment_is_denied_on_any_pod_the_webhook_handles() {
    // HAMi's TestHandleNumaAlignmentAnnotation, and a pod without device requests.
    let h = Hook::start(hami()).await;
    let gpu = pod(json!({"nvidia.com/gpu": "1"}));
    assert_eq!(h.admit(numa_aligned(gpu.clone(), "best-effort")).await["allowed"], true);
    assert_eq!(h.admit(numa_aligned(gpu.clone(), " Strict ")).await["allowed"], true);
    for (p, value) in [(gpu.clone(), "bogus"), (gpu, ""), (pod(json!({})), "bogus")] {
        let r = h.admit(numa_aligned(p, value)).await;
        assert_eq!(r["allowed"], false);
        assert_eq!(r["status"]["code"], 403);
        assert_eq!(r["status"]["reason"], "Forbidden");
        assert_eq!(
            r["status"]["message"],
            format!("invalid hami.io/numa-alignment annotation \"{value}\": expected \"best-effort\" or \"strict\"")
        );
    }
    // A pod another scheduler owns is allowed before the check, as in HAMi.
    let mut other = numa_aligned(pod(json!({})), "bogus");
    other["spec"]["schedulerName"] = json!("someone-else");
    assert_eq!(h.admit(other).await["allowed"], true);
}

// --- updates of scheduler-owned annotations ---------------------------------------------------

/// A tenant's ServiceAccount: may patch its pods, not nodes.
const TENANT: &str = "system:serviceaccount:team-b:default";

/// An UPDATE review from `user`, the pod going from `old` to `new`.
fn update(old: Value, new: Value, user: &str) -> Value {
    let mut r = review(V1, new);
    r["request"]["operation"] = json!("UPDATE");
    r["request"]["oldObject"] = old;
    r["request"]["userInfo"] =
        json!({"username": user, "uid": "u-1", "groups": ["system:serviceaccounts", "system:authenticated"]});
    r
}

#[actix_web::test]
async fn an_update_adding_changing_or_removing_an_owned_annotation_needs_the_right_to_patch_nodes() {
    // HAMi's guard on updates: only a requester that may patch nodes (the scheduler, the device
    // plugins) changes what hands out devices.
    let hook = Hook::start(hami()).await;
    let plugin = "system:serviceaccount:kube-system:hami-device-plugin";
    hook.state.engine.backend().permit(plugin, "patch", "nodes");
    let gpu = || pod(json!({"nvidia.com/gpu": "1"}));
    let keys = hook.state.engine.vendors().scheduler_keys().to_vec();
    assert!(keys.iter().any(|k| k == "hami.io/vgpu-devices-allocated"));
    for key in &keys {
        let bare = gpu();
        let set = |v: &str| with_annotation(gpu(), key, v);
        for (what, old, new) in
            [("adds", bare.clone(), set("x")), ("changes", set("x"), set("y")), ("removes", set("x"), bare)]
        {
            let v: Value = serde_json::from_str(&hook.text(&update(old.clone(), new.clone(), TENANT)).await).unwrap();
            assert_eq!(v["response"]["allowed"], false, "a tenant {what} {key}: {v}");
            assert_eq!(v["response"]["status"]["code"], 403);
            assert_eq!(
                v["response"]["status"]["message"],
                format!("annotation {key} is written by the scheduler and cannot be set by {TENANT}")
            );
            let v: Value = serde_json::from_str(&hook.text(&update(old, new, plugin)).await).unwrap();
            assert_eq!(v["response"]["allowed"], true, "the device plugin {what} {key}: {v}");
            assert_eq!(v["response"]["status"]["message"], "scheduler-owned annotation changed by a HAMi component");
        }
    }
}

#[actix_web::test]
async fn an_update_without_its_old_object_or_requester_is_judged_as_forging() {
    let hook = Hook::start(hami()).await;
    let forged =
        with_annotation(pod(json!({"nvidia.com/gpu": "1"})), "hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,1,0:;");
    let mut r = update(Value::Null, forged, TENANT);
    r["request"].as_object_mut().unwrap().remove("userInfo");
    let v: Value = serde_json::from_str(&hook.text(&r).await).unwrap();
    assert_eq!(v["response"]["allowed"], false, "{v}");
    assert!(v["response"]["status"]["message"].as_str().unwrap().ends_with("cannot be set by an unauthenticated user"));
    // user keys are not the scheduler's: a tenant may change them.
    let mine = |v: &str| with_annotation(pod(json!({"nvidia.com/gpu": "1"})), "hami.io/gpu-scheduler-policy", v);
    let v: Value = serde_json::from_str(&hook.text(&update(mine("spread"), mine("binpack"), TENANT)).await).unwrap();
    assert_eq!(v["response"]["allowed"], true, "{v}");
    assert_eq!(v["response"]["status"]["message"], "no scheduler-owned annotation changed");
}

#[test]
fn an_update_whose_access_review_fails_is_denied() {
    // HAMi's first version let it through; an unverified caller is refused (docs/compat.md).
    let old = pod(json!({"nvidia.com/gpu": "1"}));
    let new = with_annotation(old.clone(), "hami.io/bind-phase", "success");
    let body = update(old, new, TENANT).to_string();
    let Ok(Reviewed::Guard(g)) = super::review(body.as_bytes(), &hami(), &vendors(), &crate::testing::defaults())
    else {
        panic!("an update of hami.io/bind-phase is guarded");
    };
    assert_eq!(g.user.username, TENANT);
    let v: Value = serde_json::from_slice(&g.answer(Err("connection refused".into()))).unwrap();
    assert_eq!(v["response"]["allowed"], false, "{v}");
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.contains("could not be reviewed (connection refused)"), "{msg}");
}

#[test]
fn every_guarded_key_is_under_hami_io_where_the_charts_match_condition_looks() {
    // The chart's update guard sends the API server's updates only when an annotation under
    // `hami.io/` changes (files/update-guard.cel): a guarded key elsewhere would never be checked.
    let cel = include_str!("../../../charts/hami-rs/files/update-guard.cel");
    assert!(cel.contains("startsWith('hami.io/')"), "{cel}");
    let all = Vendors::from_config(&DeviceConfig::default(), Enable { ascend: true, iluvatar: true });
    for v in [vendors(), all] {
        for key in v.scheduler_keys() {
            assert!(key.starts_with("hami.io/"), "{key} is guarded but the chart's matchCondition would not send it");
        }
    }
}
