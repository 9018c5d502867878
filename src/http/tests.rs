//! The whole HTTP app in process: extender JSON as kube-scheduler sends it
//! (Go field names, as HAMi's extender API has them), answers compared with exact JSON where the
//! shape is the contract, and `/usage`, `/healthz`, `/readyz`. Every test starts its own engine
//! over the in-memory backend.

use super::*;
use crate::actor::Engine;
use crate::backend::memory::ClusterObjects;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use actix_web::App;
use actix_web::http::StatusCode;
use actix_web::test::{TestRequest, call_service, init_service, read_body};
use actix_web::web::Bytes;
use serde_json::{Value, json};

use crate::actor::{DecisionWrite, EngineConfig, FilterResult};
use crate::backend::memory::MemoryBackend;
use crate::model::PodView;
use crate::model::annotations as keys;
use crate::model::pod::NodeView;
use crate::testing::{NodeBuilder, PodBuilder, gpu, node, pod, vendors};

/// A cluster (nodes and pods) and the readiness the app starts with.
struct TestApp {
    cfg: EngineConfig,
    nodes: Vec<NodeView>,
    pods: Vec<PodView>,
    readiness: Readiness,
    max_body: usize,
}

/// A started app: the shared state every request goes through.
struct Running {
    state: web::Data<AppState<MemoryBackend>>,
}

impl TestApp {
    fn new() -> TestApp {
        TestApp {
            cfg: EngineConfig::default(),
            nodes: Vec::new(),
            pods: Vec::new(),
            readiness: Readiness::ready(),
            max_body: 1 << 20,
        }
    }
    /// `--filter-result=all` (which writes the decision at bind).
    fn answering_all(mut self) -> TestApp {
        self.cfg.filter_result = FilterResult::All;
        self.cfg.decision_write = DecisionWrite::Bind;
        self
    }
    /// `--gpu-scheduler-policy` and `--node-scheduler-policy`.
    fn policies(mut self, gpu: &str, node: &str) -> TestApp {
        self.cfg.defaults = crate::model::request::PolicyDefaults { gpu: gpu.into(), node: node.into() };
        self
    }
    fn node(mut self, n: NodeBuilder) -> TestApp {
        self.nodes.push(n.view());
        self
    }
    fn pod(mut self, p: PodBuilder) -> TestApp {
        self.pods.push(p.view());
        self
    }
    fn max_body(mut self, n: usize) -> TestApp {
        self.max_body = n;
        self
    }
    fn readiness(mut self, leader: bool, synced: bool) -> TestApp {
        self.readiness =
            Readiness { leader: Arc::new(AtomicBool::new(leader)), synced: Arc::new(AtomicBool::new(synced)) };
        self
    }

    /// Starts the engine, loads the cluster into it and into the in-memory backend, and waits
    /// until every node actor has seen what it was sent.
    async fn start(self) -> Running {
        let backend = MemoryBackend::new(Duration::from_secs(300));
        let engine = Engine::start(self.cfg, Arc::new(vendors()), backend, None);
        let objects = ClusterObjects {
            nodes: self.nodes,
            pods: self.pods,
            quotas: Vec::new(),
            groups: Vec::new(),
            budgets: Vec::new(),
        };
        crate::app::load_cluster(&engine, objects).await;
        Running { state: web::Data::new(AppState::new(engine, self.max_body, self.readiness)) }
    }
}

impl Running {
    fn backend(&self) -> &MemoryBackend {
        self.state.engine.backend()
    }

    /// One request through the whole app from kube-scheduler beside it (the pod's loopback):
    /// status and body.
    async fn call(&self, req: TestRequest) -> (StatusCode, Bytes) {
        self.call_from(req, LOOPBACK).await
    }

    /// One request from the peer address `peer`.
    async fn call_from(&self, req: TestRequest, peer: &str) -> (StatusCode, Bytes) {
        let app = init_service(App::new().app_data(self.state.clone()).configure(routes::<MemoryBackend>)).await;
        let res = call_service(&app, req.peer_addr(peer.parse().unwrap()).to_request()).await;
        let status = res.status();
        (status, read_body(res).await)
    }

    async fn post_raw(&self, uri: &str, body: impl Into<Bytes>) -> (StatusCode, Bytes) {
        self.post_raw_from(uri, body, LOOPBACK).await
    }

    async fn post_raw_from(&self, uri: &str, body: impl Into<Bytes>, peer: &str) -> (StatusCode, Bytes) {
        let body: Bytes = body.into();
        let req = TestRequest::post().uri(uri).insert_header(("content-type", "application/json")).set_payload(body);
        self.call_from(req, peer).await
    }

    /// POST /filter; the answer must be 200 and is returned as text.
    async fn filter_text(&self, body: &Value) -> String {
        let (status, b) = self.post_raw("/filter", body.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
        String::from_utf8(b.to_vec()).unwrap()
    }

    async fn filter(&self, body: &Value) -> Value {
        serde_json::from_str(&self.filter_text(body).await).unwrap()
    }

    async fn bind_text(&self, body: &Value) -> String {
        let (status, b) = self.post_raw("/bind", body.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
        String::from_utf8(b.to_vec()).unwrap()
    }

    async fn bind(&self, p: &PodBuilder, node: &str) -> String {
        self.bind_text(&bind_args(p, node)).await
    }

    async fn usage(&self) -> Value {
        let (status, b) = self.call(TestRequest::get().uri("/usage")).await;
        assert_eq!(status, StatusCode::OK);
        serde_json::from_slice(&b).unwrap()
    }

    /// The pod's entry in /usage, if it holds or reserves devices.
    async fn usage_pod(&self, name: &str) -> Option<Value> {
        let u = self.usage().await;
        u["pods"].as_array().unwrap().iter().find(|p| p["name"] == name).cloned()
    }
}

/// Where kube-scheduler calls from in the chart: the pod's loopback.
const LOOPBACK: &str = "127.0.0.1:45678";

/// `ExtenderArgs` as kube-scheduler sends it with `nodeCacheCapable: true`: `Nodes` null, names
/// only.
fn filter_args<const N: usize>(p: &PodBuilder, names: [&str; N]) -> Value {
    json!({ "Pod": p.view(), "Nodes": null, "NodeNames": names.as_slice() })
}

/// `ExtenderBindingArgs` as kube-scheduler sends it to `/bind`.
fn bind_args(p: &PodBuilder, node: &str) -> Value {
    let v = p.view();
    json!({ "PodName": v.metadata.name, "PodNamespace": v.metadata.namespace, "PodUID": v.metadata.uid, "Node": node })
}

fn gpu_pod(name: &str, mem: u64) -> PodBuilder {
    pod().gpu(1).mem_mib(mem).name(name)
}

/// A 400 answer must carry `{"error": "<text>"}` and nothing else.
fn assert_bad_request(status: StatusCode, body: &Bytes) -> String {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{}", String::from_utf8_lossy(body));
    let v: Value = serde_json::from_slice(body).unwrap();
    let obj = v.as_object().unwrap();
    assert_eq!(obj.len(), 1, "{v}");
    let msg = obj["error"].as_str().unwrap().to_owned();
    assert!(!msg.is_empty());
    msg
}

// --- filter: live mode -------------------------------------------------------------------------

#[actix_web::test]
async fn a_fitting_pod_is_answered_with_exactly_one_node_and_every_field_present() {
    // As HAMi answers: Go field names, every field present (nulls included), exactly one node.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let text = app.filter_text(&filter_args(&gpu_pod("p1", 4096), ["a"])).await;
    assert_eq!(
        text,
        r#"{"Nodes":null,"NodeNames":["a"],"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":""}"#
    );
}

#[actix_web::test]
async fn filter_answers_are_json_typed() {
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let req = TestRequest::post()
        .uri("/filter")
        .peer_addr(LOOPBACK.parse().unwrap())
        .set_json(filter_args(&gpu_pod("p1", 4096), ["a"]));
    let app_svc = init_service(App::new().app_data(app.state.clone()).configure(routes::<MemoryBackend>)).await;
    let res = call_service(&app_svc, req.to_request()).await;
    assert_eq!(res.headers().get("content-type").unwrap(), "application/json");
}

#[actix_web::test]
async fn a_successful_filter_writes_the_decision_onto_the_pod() {
    // HAMi's filter patch: node, time, to-allocate, allocated (identical), and the node label.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).pod(gpu_pod("p1", 3000)).start().await;
    let res = app.filter(&filter_args(&gpu_pod("p1", 3000), ["a"])).await;
    assert_eq!(res["NodeNames"], json!(["a"]));
    let v = app.backend().pod("default", "p1").unwrap();
    let a = &v.metadata.annotations;
    assert_eq!(a[keys::ASSIGNED_NODE], "a");
    assert!(a[keys::ASSIGNED_TIME].parse::<i64>().is_ok());
    assert_eq!(a[keys::NVIDIA_ALLOCATED], "GPU-a-0,NVIDIA,3000,0:;");
    assert_eq!(a[keys::NVIDIA_TO_ALLOCATE], "GPU-a-0,NVIDIA,3000,0:;");
    assert_eq!(v.metadata.labels[keys::ASSIGNED_NODE], "a");
    assert_eq!(v.spec.node_name, None, "filter does not bind");
}

#[actix_web::test]
async fn lower_cased_field_names_are_accepted() {
    // HAMi's Go decoder matches field names case-insensitively, so `pod` and `nodenames` work.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let body = json!({ "pod": gpu_pod("p1", 4096).view(), "nodes": null, "nodenames": ["a"] });
    let text = app.filter_text(&body).await;
    assert_eq!(
        text,
        r#"{"Nodes":null,"NodeNames":["a"],"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":""}"#
    );
}

#[actix_web::test]
async fn mixed_case_field_names_and_unknown_fields_are_accepted() {
    // As with Go's decoder, any casing matches; fields the extender does not know are ignored.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let body = json!({ "pOD": gpu_pod("p1", 4096).view(), "NODES": null, "nodeNames": ["a"], "Extra": {"x": [1, 2]} });
    let res = app.filter(&body).await;
    assert_eq!(res["NodeNames"], json!(["a"]));
    assert_eq!(res["Error"], "");
}

#[actix_web::test]
async fn node_names_with_json_escapes_are_decoded() {
    // A name the decoder cannot borrow from the body (it has an escape) still matches its node.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let body =
        format!(r#"{{"Pod":{},"NodeNames":["\u0061"]}}"#, serde_json::to_string(&gpu_pod("p1", 4096).view()).unwrap());
    let (status, b) = app.post_raw("/filter", body).await;
    assert_eq!(status, StatusCode::OK);
    let res: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(res["NodeNames"], json!(["a"]));
}

#[actix_web::test]
async fn a_pod_that_fits_nowhere_gets_failed_nodes_with_hamis_reason_and_a_detail() {
    // As HAMi answers a no-fit: `NodeNames: null`, `FailedNodes` keyed by node, the
    // HAMi reason list first (tools match on it), then the detail in parentheses.
    let app = TestApp::new().node(node("a").gpus(1, 4096)).start().await;
    let res = app.filter(&filter_args(&gpu_pod("p1", 8000), ["a"])).await;
    assert_eq!(
        res,
        json!({
            "Nodes": null,
            "NodeNames": null,
            "FailedNodes": { "a": "1/1 CardInsufficientMemory" },
            "FailedAndUnresolvableNodes": null,
            "Error": "",
        })
    );
}

#[actix_web::test]
async fn an_earlier_pods_reservation_is_counted_by_the_next_filter() {
    // As in HAMi, a filter's reservation is seen by the next filter before any bind.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let first = app.filter(&filter_args(&gpu_pod("p1", 12288), ["a"])).await;
    assert_eq!(first["NodeNames"], json!(["a"]));
    let res = app.filter(&filter_args(&gpu_pod("p2", 8000), ["a"])).await;
    assert_eq!(res["NodeNames"], Value::Null);
    assert_eq!(res["FailedNodes"]["a"], "1/1 CardInsufficientMemory", "HAMi's reason text, unchanged");
}

#[actix_web::test]
async fn an_unknown_candidate_fails_as_node_unregistered() {
    // As in HAMi, a node unknown to the scheduler fails as `node unregistered`.
    let app = TestApp::new().node(node("a").gpus(1, 4096)).start().await;
    let res = app.filter(&filter_args(&gpu_pod("p1", 8000), ["ghost"])).await;
    assert_eq!(res["NodeNames"], Value::Null);
    let reason = res["FailedNodes"]["ghost"].as_str().unwrap();
    assert!(reason.starts_with("node unregistered"), "{reason}");
    assert_eq!(res["Error"], "");
}

#[actix_web::test]
async fn every_failed_candidate_gets_a_reason() {
    // As in HAMi, one `FailedNodes` entry per candidate that did not fit.
    let app = TestApp::new()
        .node(node("a").gpus(1, 4096))
        .node(node("b").gpus(1, 2048))
        .node(node("c").gpu(gpu("GPU-c-0", 16384).unhealthy()))
        .start()
        .await;
    let res = app.filter(&filter_args(&gpu_pod("p1", 8000), ["a", "b", "c", "ghost"])).await;
    assert_eq!(res["NodeNames"], Value::Null);
    let failed = res["FailedNodes"].as_object().unwrap();
    let mut names: Vec<&str> = failed.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, ["a", "b", "c", "ghost"]);
    for (n, reason) in failed {
        assert!(!reason.as_str().unwrap().is_empty(), "{n}");
    }
    assert!(failed["a"].as_str().unwrap().starts_with("1/1 CardInsufficientMemory"));
    assert!(failed["b"].as_str().unwrap().starts_with("1/1 CardInsufficientMemory"));
    assert!(failed["ghost"].as_str().unwrap().starts_with("node unregistered"));
}

#[actix_web::test]
async fn the_fitting_node_is_answered_alone_even_when_other_candidates_failed() {
    // As in HAMi, success answers one node; the reasons of the others are not sent.
    let app = TestApp::new().node(node("a").gpus(1, 4096)).node(node("b").gpus(1, 16384)).start().await;
    let text = app.filter_text(&filter_args(&gpu_pod("p1", 8000), ["a", "b", "ghost"])).await;
    assert_eq!(
        text,
        r#"{"Nodes":null,"NodeNames":["b"],"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":""}"#
    );
}

#[actix_web::test]
async fn a_pod_without_device_requests_is_passed_through_with_its_candidates() {
    // HAMi passes a pod with no device request through: the input `NodeNames` echoed, nothing else.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let text = app.filter_text(&filter_args(&pod().name("plain"), ["a", "b", "ghost"])).await;
    assert_eq!(
        text,
        r#"{"Nodes":null,"NodeNames":["a","b","ghost"],"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":""}"#
    );
    assert!(app.usage_pod("plain").await.is_none(), "nothing is reserved for it");
}

#[actix_web::test]
async fn a_pass_through_with_no_candidates_echoes_an_empty_list() {
    let app = TestApp::new().start().await;
    let res = app.filter(&filter_args(&pod(), [])).await;
    assert_eq!(res["NodeNames"], json!([]));
}

#[actix_web::test]
async fn a_null_pod_is_answered_with_an_error() {
    // As in HAMi, `Pod` null → 200 with `Error: "extender args missing pod"`.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let text = app.filter_text(&json!({ "Pod": null, "Nodes": null, "NodeNames": ["a"] })).await;
    assert_eq!(
        text,
        r#"{"Nodes":null,"NodeNames":null,"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":"extender args missing pod"}"#
    );
    let res = app.filter(&json!({ "NodeNames": ["a"] })).await;
    assert_eq!(res["Error"], "extender args missing pod", "an absent Pod is the same as null");
}

#[actix_web::test]
async fn a_pod_without_nodes_or_node_names_is_answered_with_an_error() {
    // HAMi's handler panics here (the connection is dropped); hami-rs answers `Error`.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    for body in [
        json!({ "Pod": gpu_pod("p1", 4096).view() }),
        json!({ "Pod": gpu_pod("p1", 4096).view(), "Nodes": null, "NodeNames": null }),
    ] {
        let res = app.filter(&body).await;
        assert_eq!(res["NodeNames"], Value::Null);
        assert_eq!(res["FailedNodes"], Value::Null);
        assert!(!res["Error"].as_str().unwrap().is_empty(), "{res}");
    }
    assert!(app.usage_pod("p1").await.is_none());
}

#[actix_web::test]
async fn an_empty_candidate_list_is_a_no_fit_without_reasons() {
    // As in HAMi, no fitting node → `NodeNames: null`, `FailedNodes` (empty here), no Error.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let text = app.filter_text(&filter_args(&gpu_pod("p1", 4096), [])).await;
    assert_eq!(
        text,
        r#"{"Nodes":null,"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":null,"Error":""}"#
    );
    assert!(app.usage_pod("p1").await.is_none());
}

#[actix_web::test]
async fn filtering_the_same_pod_again_does_not_compete_with_its_own_reservation() {
    // As in HAMi, the pod's earlier reservation is dropped before the new evaluation.
    let app = TestApp::new().node(node("a").gpu(gpu("GPU-a-0", 16384).count(1))).start().await;
    let p = gpu_pod("p1", 16384);
    for _ in 0..3 {
        let res = app.filter(&filter_args(&p, ["a"])).await;
        assert_eq!(res["NodeNames"], json!(["a"]), "{res}");
    }
}

// --- filter: policy annotations -----------------------------------------------------------------

/// A pod of 4000 MiB already running on the first of node `n`'s GPUs.
fn busy_on_first_gpu(n: &str) -> PodBuilder {
    gpu_pod(&format!("busy-{n}"), 4000).placed(n, &format!("GPU-{n}-0,NVIDIA,4000,0:;")).bound_to(n).phase("Running")
}

/// The device the filter reserved for `p` on its node (the first entry of its allocation).
async fn reserved_device(app: &Running, p: &PodBuilder) -> String {
    let name = p.view().metadata.name;
    let u = app.usage_pod(&name).await.unwrap_or_else(|| panic!("{name} reserved nothing"));
    let alloc = u["annotations"][keys::NVIDIA_ALLOCATED].as_str().unwrap_or_default().to_owned();
    alloc.split(',').next().unwrap_or_default().to_owned()
}

#[actix_web::test]
async fn a_gpu_policy_annotation_that_names_no_policy_keeps_the_configured_one() {
    // HAMi ignores such a value with a warning and sorts the cards by the configured policy; a
    // padded name is read trimmed (a whole-string compare would sort ` binpack` as spread).
    // (configured, annotation, the card chosen beside a card already holding 4000 MiB)
    let cases = [
        ("binpack", None, "GPU-a-0"),
        ("binpack", Some("bogus"), "GPU-a-0"),
        ("binpack", Some("Binpack"), "GPU-a-0"),
        ("binpack", Some("binpack,"), "GPU-a-0"),
        ("spread", None, "GPU-a-1"),
        ("spread", Some(" binpack"), "GPU-a-0"),
        ("spread", Some("binpack , numa"), "GPU-a-0"),
        ("spread", Some("binpack,nmua"), "GPU-a-1"),
    ];
    for (configured, given, want) in cases {
        let app =
            TestApp::new().policies(configured, "binpack").node(node("a").gpus(2, 16000)).pod(busy_on_first_gpu("a"));
        let app = app.start().await;
        let mut p = gpu_pod("p1", 1000);
        if let Some(v) = given {
            p = p.annotation(keys::GPU_SCHEDULER_POLICY, v);
        }
        assert_eq!(app.filter(&filter_args(&p, ["a"])).await["NodeNames"], json!(["a"]));
        assert_eq!(reserved_device(&app, &p).await, want, "{configured} + {given:?}");
    }
}

#[actix_web::test]
async fn a_node_policy_annotation_that_names_no_policy_keeps_the_configured_one() {
    // (configured, annotation, the node chosen of a busy `a` and an idle `b`)
    let cases = [
        ("binpack", None, "a"),
        ("binpack", Some("spred"), "a"),
        ("binpack", Some("Spread"), "a"),
        ("binpack", Some("binpack,spread"), "a"),
        ("binpack", Some(" spread "), "b"),
        ("spread", None, "b"),
        ("spread", Some("numa"), "b"),
        ("spread", Some("binpack"), "a"),
    ];
    for (configured, given, want) in cases {
        let app = TestApp::new()
            .policies("spread", configured)
            .node(node("a").gpus(1, 16000))
            .node(node("b").gpus(1, 16000))
            .pod(busy_on_first_gpu("a"))
            .start()
            .await;
        let mut p = gpu_pod("p1", 1000);
        if let Some(v) = given {
            p = p.annotation(keys::NODE_SCHEDULER_POLICY, v);
        }
        assert_eq!(
            app.filter(&filter_args(&p, ["a", "b"])).await["NodeNames"],
            json!([want]),
            "{configured} + {given:?}"
        );
    }
}

// --- filter: native sidecars and init containers -----------------------------------------------

#[actix_web::test]
async fn a_native_sidecar_books_beside_the_app_and_a_plain_init_container_alone() {
    // A sidecar keeps running beside the app, so the pod books their sum; a plain init container
    // has finished before the app starts, so the pod books the larger of the two.
    // (init container is a sidecar, its MiB, the app's MiB, the next pod's MiB, the next fits)
    let cases = [(true, 8000, 8000, 1000, false), (false, 12000, 4000, 4000, true), (false, 12000, 4000, 5000, false)];
    for (sidecar, init, app_mem, next, fits) in cases {
        let app = TestApp::new().node(node("a").gpus(1, 16000)).start().await;
        let first = if sidecar { pod().sidecar("side") } else { pod().init("setup") };
        let first = first.gpu(1).mem_mib(init).main().gpu(1).mem_mib(app_mem).name("first");
        assert_eq!(app.filter(&filter_args(&first, ["a"])).await["NodeNames"], json!(["a"]));
        assert_eq!(app.bind(&first, "a").await, r#"{"Error":""}"#);
        let res = app.filter(&filter_args(&gpu_pod("next", next), ["a"])).await;
        assert_eq!(res["NodeNames"] == json!(["a"]), fits, "sidecar {sidecar}: {init} + {app_mem}, then {next}: {res}");
    }
}

// --- filter: DRA claims -------------------------------------------------------------------------

#[actix_web::test]
async fn a_pod_asking_for_devices_only_through_resource_claims_is_passed_through() {
    // DRA allocates such a pod's devices; hami-rs neither places nor reserves anything for it.
    let app = TestApp::new().node(node("a").gpus(1, 16000)).node(node("b").gpus(1, 16000)).start().await;
    let mut p = serde_json::to_value(pod().name("claims").view()).unwrap();
    p["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
    p["spec"]["containers"][0]["resources"] = json!({"claims": [{"name": "gpu"}]});
    let res = app.filter(&json!({ "Pod": p, "Nodes": null, "NodeNames": ["a", "b"] })).await;
    assert_eq!(res["NodeNames"], json!(["a", "b"]), "{res}");
    assert_eq!(res["Error"], "");
    assert!(app.usage_pod("claims").await.is_none(), "nothing is reserved for it");
}

// --- filter: simulation mode -------------------------------------------------------------------

#[actix_web::test]
async fn simulation_answers_the_best_node_object_and_reserves_nothing() {
    // HAMi's simulation mode: `Nodes` present → read each Node directly, usage from zero, answer
    // the single best Node object in `Nodes`, plus `FailedNodes`; no reservation, no patch.
    let a = node("a").gpus(1, 4096);
    let b = node("b").gpu(gpu("GPU-b-0", 16384).count(1));
    let app = TestApp::new().node(b.clone()).start().await;
    let p = gpu_pod("p1", 16384);
    let body = json!({
        "Pod": p.view(),
        "Nodes": { "metadata": {}, "items": [a.view(), b.view()] },
        "NodeNames": null,
    });
    let res = app.filter(&body).await;
    assert_eq!(res["Error"], "");
    assert_eq!(res["NodeNames"], Value::Null);
    assert_eq!(res["FailedAndUnresolvableNodes"], Value::Null);
    let items = res["Nodes"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{res}");
    assert_eq!(items[0], serde_json::to_value(b.view()).unwrap(), "the Node object is echoed as sent");
    let failed = res["FailedNodes"].as_object().unwrap();
    assert_eq!(failed.len(), 1);
    assert!(failed["a"].as_str().unwrap().starts_with("1/1 CardInsufficientMemory"), "{res}");

    assert!(app.usage_pod("p1").await.is_none(), "nothing reserved");
    assert!(app.backend().pod("default", "p1").is_none(), "nothing written");
    // The whole GPU is still free for a live filter.
    let live = app.filter(&filter_args(&gpu_pod("p2", 16384), ["b"])).await;
    assert_eq!(live["NodeNames"], json!(["b"]), "{live}");
}

#[actix_web::test]
async fn simulation_with_no_fitting_node_answers_null_nodes_and_the_reasons() {
    // In simulation mode, as in HAMi, nodes with no devices fail `node unregistered`.
    let app = TestApp::new().start().await;
    let body = json!({
        "pod": gpu_pod("p1", 8000).view(),
        "nodes": { "items": [node("a").gpus(1, 4096).view(), node("bare").view()] },
    });
    let res = app.filter(&body).await;
    assert_eq!(res["Nodes"], Value::Null, "{res}");
    assert_eq!(res["NodeNames"], Value::Null);
    let failed = res["FailedNodes"].as_object().unwrap();
    assert!(failed["a"].as_str().unwrap().starts_with("1/1 CardInsufficientMemory"), "{res}");
    assert!(failed["bare"].as_str().unwrap().starts_with("node unregistered"), "{res}");
    assert_eq!(res["Error"], "");
}

#[actix_web::test]
async fn simulation_passes_a_pod_without_devices_with_every_node_it_was_sent() {
    // HAMi's simulation mode answers a pod that asks for no device with the Nodes (and names)
    // it was given; before, it answered nothing and the autoscaler saw every node refused.
    let app = TestApp::new().start().await;
    let (a, bare) = (node("a").gpus(1, 4096), node("bare"));
    let body = json!({
        "Pod": pod().name("plain").view(),
        "Nodes": { "metadata": {}, "items": [a.view(), bare.view()] },
    });
    let res = app.filter(&body).await;
    assert_eq!(res["Error"], "", "{res}");
    assert_eq!(res["NodeNames"], Value::Null, "no names were sent: {res}");
    assert_eq!(res["FailedNodes"], Value::Null, "{res}");
    let items = res["Nodes"]["items"].as_array().unwrap();
    let sent = [serde_json::to_value(a.view()).unwrap(), serde_json::to_value(bare.view()).unwrap()];
    assert_eq!(items.as_slice(), &sent, "every Node, as sent and in order");
    // Names sent beside the Nodes come back too.
    let both = json!({
        "Pod": pod().name("plain").view(),
        "Nodes": { "items": [a.view()] },
        "NodeNames": ["a"],
    });
    let res = app.filter(&both).await;
    assert_eq!(res["NodeNames"], json!(["a"]), "{res}");
    assert_eq!(res["Nodes"]["items"].as_array().map(Vec::len), Some(1), "{res}");
}

#[actix_web::test]
async fn a_pod_without_devices_passes_whatever_its_scoring_weights_say() {
    // HAMi reads hami.io/device-scoring-weights only for a pod that asks for a device: one that
    // asks for none is passed through before the weights are read.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let bad = pod().name("plain").annotation(keys::DEVICE_SCORING_WEIGHTS, "slot=1");
    let res = app.filter(&filter_args(&bad, ["a", "b"])).await;
    assert_eq!(res["Error"], "", "{res}");
    assert_eq!(res["NodeNames"], json!(["a", "b"]), "{res}");
    // The same annotation on a GPU pod is still HAMi's error.
    let gpu = gpu_pod("p1", 1000).annotation(keys::DEVICE_SCORING_WEIGHTS, "slot=1");
    let res = app.filter(&filter_args(&gpu, ["a"])).await;
    assert!(res["Error"].as_str().unwrap().contains("invalid hami.io/device-scoring-weights annotation"), "{res}");
}

// --- filter: bad bodies -------------------------------------------------------------------------

#[actix_web::test]
async fn bad_filter_bodies_are_http_400_with_a_json_error() {
    // http/error.rs: malformed bodies are classified once, as 400 with `{"error": …}`.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let pod_json = serde_json::to_string(&gpu_pod("p1", 4096).view()).unwrap();
    let cases: Vec<(&str, String)> = vec![
        ("malformed JSON", "this is not json".into()),
        ("wrong type for NodeNames", format!(r#"{{"Pod":{pod_json},"NodeNames":5}}"#)),
        ("wrong type for a node name", format!(r#"{{"Pod":{pod_json},"NodeNames":[1]}}"#)),
        ("wrong type for Pod", r#"{"Pod":"p1","NodeNames":["a"]}"#.into()),
        ("wrong type for Nodes", format!(r#"{{"Pod":{pod_json},"Nodes":[]}}"#)),
        ("not an object", r#"["a"]"#.into()),
        ("empty body", String::new()),
        ("whitespace only", "  \n\t ".into()),
        ("truncated JSON", format!(r#"{{"Pod":{pod_json},"NodeNames":["a""#)),
        ("trailing garbage", format!(r#"{{"Pod":{pod_json},"NodeNames":["a"]}} x"#)),
    ];
    for (what, body) in cases {
        let (status, b) = app.post_raw("/filter", body).await;
        let msg = assert_bad_request(status, &b);
        assert!(!msg.is_empty(), "{what}");
    }
    assert!(app.usage_pod("p1").await.is_none(), "no bad request reserved anything");
}

#[actix_web::test]
async fn an_oversized_filter_body_is_http_400() {
    // http/error.rs: a body over the limit is refused without being buffered whole.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let pad = " ".repeat(1 << 20);
    let body =
        format!(r#"{{"Pod":{},"NodeNames":["a"]}}{pad}"#, serde_json::to_string(&gpu_pod("p1", 4096).view()).unwrap());
    let (status, b) = app.post_raw("/filter", body).await;
    let msg = assert_bad_request(status, &b);
    assert!(msg.contains("exceeds"), "{msg}");
    assert!(app.usage_pod("p1").await.is_none());
}

#[actix_web::test]
async fn a_body_of_exactly_the_limit_is_accepted_and_one_byte_more_is_not() {
    let limit = 4096;
    let app = TestApp::new().node(node("a").gpus(1, 16384)).max_body(limit).start().await;
    let core = filter_args(&gpu_pod("p1", 4096), ["a"]).to_string();
    assert!(core.len() < limit);
    let exact = format!("{core}{}", " ".repeat(limit - core.len()));
    let (status, b) = app.post_raw("/filter", exact.clone()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    let (status, b) = app.post_raw("/filter", format!("{exact} ")).await;
    assert_bad_request(status, &b);
}

// --- filter: leadership ------------------------------------------------------------------------

#[actix_web::test]
async fn a_follower_answers_filter_at_once_with_a_clear_error() {
    // HAMi's follower waits until the client gives up; hami-rs answers now.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).readiness(false, true).start().await;
    let res = app.filter(&filter_args(&gpu_pod("p1", 4096), ["a"])).await;
    assert_eq!(res["NodeNames"], Value::Null);
    assert_eq!(res["FailedNodes"], Value::Null);
    let err = res["Error"].as_str().unwrap();
    assert!(err.contains("not the leader"), "{err}");
    assert!(app.usage_pod("p1").await.is_none(), "a follower reserves nothing");
}

#[actix_web::test]
async fn a_leader_with_unsynced_caches_says_so_in_error() {
    let app = TestApp::new().node(node("a").gpus(1, 16384)).readiness(true, false).start().await;
    let res = app.filter(&filter_args(&gpu_pod("p1", 4096), ["a"])).await;
    assert!(res["Error"].as_str().unwrap().contains("not synced"), "{res}");
}

#[actix_web::test]
async fn filtering_resumes_once_the_replica_becomes_leader() {
    let app = TestApp::new().node(node("a").gpus(1, 16384)).readiness(false, true).start().await;
    let p = gpu_pod("p1", 4096);
    assert_ne!(app.filter(&filter_args(&p, ["a"])).await["Error"], "");
    app.state.readiness.leader.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(app.filter(&filter_args(&p, ["a"])).await["NodeNames"], json!(["a"]));
}

// --- bind ----------------------------------------------------------------------------------------

#[actix_web::test]
async fn bind_after_filter_answers_an_empty_error_and_commits_the_pod() {
    // As HAMi binds: `{"Error":""}`; bind-phase, bind-time, nodeName; the
    // in-memory backend plays the device plugin (to-allocate emptied, bind-phase success).
    let app = TestApp::new().node(node("a").gpus(1, 16384)).pod(gpu_pod("p1", 3000)).start().await;
    let p = gpu_pod("p1", 3000);
    assert_eq!(app.filter(&filter_args(&p, ["a"])).await["NodeNames"], json!(["a"]));
    assert_eq!(app.usage_pod("p1").await.unwrap()["state"], "reserved");
    assert_eq!(app.bind(&p, "a").await, r#"{"Error":""}"#);

    let u = app.usage_pod("p1").await.unwrap();
    assert_eq!(u["state"], "committed");
    assert_eq!(u["node"], "a");
    assert_eq!(u["nodeName"], "a");
    let a = &u["annotations"];
    assert_eq!(a[keys::ASSIGNED_NODE], "a");
    assert_eq!(a[keys::NVIDIA_ALLOCATED], "GPU-a-0,NVIDIA,3000,0:;");
    assert_eq!(a[keys::NVIDIA_TO_ALLOCATE], ";;", "the plugin empties the container it served");
    assert_eq!(a[keys::BIND_PHASE], keys::BIND_PHASE_SUCCESS);
    assert!(a[keys::BIND_TIME].as_str().unwrap().parse::<i64>().is_ok());
    let usage = app.usage().await;
    let node_annos = usage["nodes"][0]["annotations"].as_object().unwrap();
    assert!(!node_annos.contains_key(keys::NODE_LOCK), "the emulated plugin released the node lock");
}

#[actix_web::test]
async fn binding_a_bound_pod_again_succeeds_without_changes() {
    // actor.rs `bind`: a pod already bound to that node is answered with success.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let p = gpu_pod("p1", 3000);
    app.filter(&filter_args(&p, ["a"])).await;
    assert_eq!(app.bind(&p, "a").await, r#"{"Error":""}"#);
    let before = app.usage_pod("p1").await.unwrap();
    assert_eq!(app.bind(&p, "a").await, r#"{"Error":""}"#);
    assert_eq!(app.usage_pod("p1").await.unwrap(), before);
}

#[actix_web::test]
async fn bind_accepts_lower_cased_field_names() {
    // As with Go's decoder, `podname`, `podnamespace`, `poduid`, `node` decode like the Go names.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let p = gpu_pod("p1", 3000);
    app.filter(&filter_args(&p, ["a"])).await;
    let body = json!({ "podname": "p1", "podnamespace": "default", "poduid": "uid-p1", "node": "a" });
    assert_eq!(app.bind_text(&body).await, r#"{"Error":""}"#);
    assert_eq!(app.usage_pod("p1").await.unwrap()["state"], "committed");
}

#[actix_web::test]
async fn bind_failures_are_reported_in_error() {
    // As in HAMi, a failed bind is 200 with the reason in `Error`.
    let app = TestApp::new()
        .node(node("a").gpus(1, 16384))
        .node(node("b").gpus(1, 16384))
        .pod(gpu_pod("p1", 3000))
        .start()
        .await;
    let p = gpu_pod("p1", 3000);
    let err = |text: String| -> String {
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
        v["Error"].as_str().unwrap().to_owned()
    };
    // Never filtered.
    let e = err(app.bind(&p, "a").await);
    assert!(e.contains("not filtered onto node a"), "{e}");
    // Unknown pod: HAMi's lookup error.
    let e = err(app.bind(&gpu_pod("nobody", 3000), "a").await);
    assert_eq!(e, "pod default/nobody not found");
    // Unknown node.
    app.filter(&filter_args(&p, ["a"])).await;
    let e = err(app.bind(&p, "ghost").await);
    assert_eq!(e, "failed to get node ghost");
    // Filtered onto a, bound to b.
    app.filter(&filter_args(&p, ["a"])).await;
    let e = err(app.bind(&p, "b").await);
    assert!(e.contains("not filtered onto node b"), "{e}");
    // The backend refuses the Binding: reported, and the reservation is released.
    app.backend().fail_binds(true);
    let e = err(app.bind(&p, "a").await);
    assert!(e.contains("binding refused"), "{e}");
    assert!(app.usage_pod("p1").await.is_none(), "a failed bind releases the reservation");
}

#[actix_web::test]
async fn bind_without_pod_name_or_node_is_http_400() {
    // http/error.rs: an unusable binding request is a bad request, not an extender error.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    for body in [
        json!({ "PodNamespace": "default", "PodUID": "uid-p1", "Node": "a" }),
        json!({ "PodName": "", "PodNamespace": "default", "Node": "a" }),
        json!({ "PodName": "p1", "PodNamespace": "default", "PodUID": "uid-p1" }),
        json!({ "PodName": "p1", "Node": null }),
    ] {
        let (status, b) = app.post_raw("/bind", body.to_string()).await;
        assert_bad_request(status, &b);
    }
}

#[actix_web::test]
async fn bad_bind_bodies_are_http_400_with_a_json_error() {
    let app = TestApp::new().node(node("a").gpus(1, 16384)).max_body(256).start().await;
    let long = format!(r#"{{"PodName":"{}","Node":"a"}}"#, "p".repeat(300));
    for body in [
        String::new(),
        "{".into(),
        "nope".into(),
        r#"{"PodName":5,"Node":"a"}"#.into(),
        r#"{"PodName":"p1","Node":["a"]}"#.into(),
        long,
    ] {
        let (status, b) = app.post_raw("/bind", body).await;
        assert_bad_request(status, &b);
    }
}

// --- pods first seen in a filter request -------------------------------------------------------

#[actix_web::test]
async fn a_pod_first_seen_in_a_filter_request_can_be_filtered_and_bound() {
    // With the in-memory backend a pod that is not in the cluster file is learnt from the filter
    // request, so `serve --cluster-file` can be driven with new pods.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let p = gpu_pod("newcomer", 3000).label("team", "x");
    assert!(app.backend().pod("default", "newcomer").is_none());
    assert_eq!(app.filter(&filter_args(&p, ["a"])).await["NodeNames"], json!(["a"]));
    assert_eq!(app.bind(&p, "a").await, r#"{"Error":""}"#);
    let u = app.usage_pod("newcomer").await.unwrap();
    assert_eq!(u["state"], "committed");
    assert_eq!(u["nodeName"], "a");
    assert_eq!(u["uid"], "uid-newcomer");
    assert_eq!(u["labels"]["team"], "x");
    assert_eq!(u["annotations"][keys::ASSIGNED_NODE], "a");
}

#[actix_web::test]
async fn a_known_pod_is_not_replaced_by_the_copy_in_a_filter_request() {
    // The cluster's copy (with what the scheduler wrote) stays; the request's copy is not stored.
    let app =
        TestApp::new().node(node("a").gpus(1, 16384)).pod(gpu_pod("p1", 3000).label("from", "file")).start().await;
    let res = app.filter(&filter_args(&gpu_pod("p1", 3000).label("from", "request"), ["a"])).await;
    assert_eq!(res["NodeNames"], json!(["a"]));
    let v = app.backend().pod("default", "p1").unwrap();
    assert_eq!(v.metadata.labels["from"], "file");
    assert_eq!(v.metadata.annotations[keys::ASSIGNED_NODE], "a");
}

// --- /healthz, /readyz -------------------------------------------------------------------------

#[actix_web::test]
async fn healthz_is_200_with_an_empty_body() {
    let app = TestApp::new().readiness(false, false).start().await;
    let (status, b) = app.call(TestRequest::get().uri("/healthz")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(b.is_empty());
}

#[actix_web::test]
async fn readyz_is_200_on_a_ready_leader() {
    let app = TestApp::new().start().await;
    let (status, _) = app.call(TestRequest::get().uri("/readyz")).await;
    assert_eq!(status, StatusCode::OK);
}

#[actix_web::test]
async fn readyz_is_503_on_a_follower_or_before_the_caches_sync() {
    for (leader, synced, says) in
        [(false, true, "not the leader"), (true, false, "not synced"), (false, false, "not the leader")]
    {
        let app = TestApp::new().readiness(leader, synced).start().await;
        let (status, b) = app.call(TestRequest::get().uri("/readyz")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(String::from_utf8_lossy(&b).contains(says), "{leader} {synced}: {b:?}");
    }
}

#[actix_web::test]
async fn head_is_answered_where_get_is_and_the_console_keeps_its_gate() {
    let app = TestApp::new().start().await;
    for uri in ["/", "/usage", "/healthz", "/readyz"] {
        let (status, _) = app.call(TestRequest::default().method(actix_web::http::Method::HEAD).uri(uri)).await;
        assert_eq!(status, StatusCode::OK, "HEAD {uri}");
    }
    let (status, _) =
        app.call_from(TestRequest::default().method(actix_web::http::Method::HEAD).uri("/"), "10.0.0.9:5000").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "the console's gate holds for HEAD too");
}

#[actix_web::test]
async fn after_an_hour_of_traffic_the_console_still_lists_the_pending_pod_with_its_age_and_need() {
    let app = TestApp::new().node(node("a").gpus(4, 16384)).node(node("b").gpus(4, 16384)).start().await;
    let huge = gpu_pod("huge", 900_000).uid("u-huge");
    let answer = app.filter(&filter_args(&huge, ["a", "b"])).await;
    assert!(answer["NodeNames"].is_null(), "{answer}");
    // An hour on this thread's clock: five pods a minute placed, bound and gone again.
    for minute in 0..60 {
        crate::clock::advance(Duration::from_secs(60));
        for k in 0..5 {
            let p = gpu_pod(&format!("web-{minute}-{k}"), 1000).uid(&format!("u-web-{minute}-{k}"));
            let answer = app.filter(&filter_args(&p, ["a", "b"])).await;
            let node = answer["NodeNames"][0].as_str().expect("a node").to_owned();
            assert_eq!(app.bind(&p, &node).await, r#"{"Error":""}"#);
            app.state.engine.delete_pod(&crate::model::PodUid::new(&format!("u-web-{minute}-{k}")));
        }
    }
    let (status, body) = app.call(TestRequest::get().uri("/?q=huge")).await;
    assert_eq!(status, StatusCode::OK);
    let html = String::from_utf8_lossy(&body);
    assert!(html.contains("<h2>Pending (1)</h2>"), "{html}");
    assert!(
        html.contains(
            "<td>default/huge</td><td>1h 0m</td><td>1</td><td>no_fit</td><td>1 × NVIDIA 900000 MiB, 0 cores</td>"
        ),
        "{html}"
    );
    let (_, front) = app.call(TestRequest::get().uri("/")).await;
    let front = String::from_utf8_lossy(&front);
    assert!(front.contains("<td>default/huge</td>"), "300 decisions later, still on the front page: {front}");
    assert!(!front.contains("default/web-0-0"), "the decisions of the first minute left the last 50");
}

#[actix_web::test]
async fn unknown_routes_and_methods_are_not_served() {
    let app = TestApp::new().start().await;
    let (status, _) = app.call(TestRequest::get().uri("/filter")).await;
    assert!(status.is_client_error(), "{status}");
    let (status, _) = app.call(TestRequest::post().uri("/unreserve").set_payload("{}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

// --- --filter-result=all and /prioritize ------------------------------------------------------------

#[actix_web::test]
async fn all_mode_answers_every_fitting_node_with_the_others_reasons() {
    let app = TestApp::new()
        .answering_all()
        .node(node("a").gpus(1, 16384))
        .node(node("b").gpus(1, 16384))
        .node(node("c").gpus(1, 2048))
        .start()
        .await;
    let p = gpu_pod("p1", 4096);
    app.backend().insert_pod(p.view());
    let v = app.filter(&filter_args(&p, ["a", "b", "c"])).await;
    // The reserved node first (ties by name: a), then every other node that fits.
    assert_eq!(v["NodeNames"], json!(["a", "b"]));
    let failed = v["FailedNodes"].as_object().unwrap();
    assert_eq!(failed.keys().collect::<Vec<_>>(), ["c"]);
    assert!(failed["c"].as_str().unwrap().contains("CardInsufficientMemory"), "{failed:?}");
    assert_eq!(v["Error"], "");
}

#[actix_web::test]
async fn prioritize_answers_a_host_priority_list() {
    let app =
        TestApp::new().answering_all().node(node("a").gpus(1, 16384)).node(node("b").gpus(1, 16384)).start().await;
    let p = gpu_pod("p1", 4096);
    app.backend().insert_pod(p.view());
    app.filter(&filter_args(&p, ["a", "b"])).await;
    let (status, b) = app.post_raw("/prioritize", filter_args(&p, ["b", "a"]).to_string()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    // Go's field names, in the order of NodeNames; the reserved node on top, the other (as good
    // by binpack before the reservation) just below it.
    assert_eq!(String::from_utf8_lossy(&b), r#"[{"Host":"b","Score":9},{"Host":"a","Score":10}]"#);

    for (body, says) in [
        ("{not json", "invalid JSON"),
        (r#"{"NodeNames":["a"]}"#, "missing pod"),
        (&*json!({ "Pod": p.view() }).to_string(), "NodeNames"),
    ] {
        let (status, b) = app.post_raw("/prioritize", body.to_owned()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert!(v["error"].as_str().unwrap().contains(says), "{body}: {v}");
    }
}

// --- /usage ----------------------------------------------------------------------------------------

#[actix_web::test]
async fn a_cordoned_device_is_reported_cordoned_on_usage_the_console_and_its_search() {
    let app = TestApp::new().node(node("a").gpus(2, 16384).annotation(keys::NVIDIA_CORDON, "GPU-a-1")).start().await;
    let p = gpu_pod("train-7", 3000);
    assert_eq!(app.filter(&filter_args(&p, ["a"])).await["NodeNames"], json!(["a"]));
    let u = app.usage().await;
    let cordoned: Vec<&Value> = u["nodes"][0]["devices"].as_array().unwrap().iter().map(|d| &d["cordoned"]).collect();
    assert_eq!(cordoned, [&json!(false), &json!(true)]);

    let (status, body) = app.call(TestRequest::get().uri("/")).await;
    assert_eq!(status, StatusCode::OK);
    let html = String::from_utf8_lossy(&body);
    // idle, shared, full, unhealthy, cordoned: GPU-a-0 holds the pod, GPU-a-1 is cordoned.
    assert!(
        html.contains(r#"<a href="?state=idle">0</a>"#) && html.contains(r#"<a href="?state=cordoned">1</a>"#),
        "{html}"
    );
    // Nothing pending: the shared device's free memory is fragmented.
    assert!(html.contains(r#"<a href="?state=fragmented">1</a>"#), "{html}");
    assert!(html.contains(r#"<i class="g"></i><i class="c"></i>"#), "{html}");

    // A search by the pod's name finds the node holding it.
    let (_, body) = app.call(TestRequest::get().uri("/?q=train-7")).await;
    let html = String::from_utf8_lossy(&body);
    assert!(html.contains(r#"<td>default/train-7</td><td><a href="?node=a">a</a></td>"#), "{html}");
    let (_, body) = app.call(TestRequest::get().uri("/?node=a")).await;
    assert!(String::from_utf8_lossy(&body).contains("cordoned"));
}

#[actix_web::test]
async fn usage_lists_nodes_devices_and_pods_in_the_report_shape() {
    // report.rs: `nodes[].name/devices[..]/annotations`, and `pods[]` with their state.
    let app = TestApp::new().node(node("a").gpus(2, 16384)).node(node("b").gpus(1, 8192)).start().await;
    let empty = app.usage().await;
    assert_eq!(empty["pods"], json!([]));
    let nodes = empty["nodes"].as_array().unwrap();
    assert_eq!(nodes.iter().map(|n| n["name"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(
        nodes[0]["devices"][1],
        json!({
            "vendor": "NVIDIA",
            "uuid": "GPU-a-1",
            "type": "NVIDIA-Tesla V100-PCIE-32GB",
            "index": 1,
            "numa": 0,
            "healthy": true,
            "cordoned": false,
            "count": 10,
            "used": 0,
            "memTotal": 16384,
            "memUsed": 0,
            "coresTotal": 100,
            "coresUsed": 0,
        })
    );
    assert!(nodes[0]["annotations"].as_object().unwrap().contains_key(keys::NVIDIA_REGISTER));

    let p = gpu_pod("p1", 3000).cores(30).label("app", "train");
    app.filter(&filter_args(&p, ["b"])).await;
    let u = app.usage().await;
    let dev = &u["nodes"][1]["devices"][0];
    assert_eq!((&dev["used"], &dev["memUsed"], &dev["coresUsed"]), (&json!(1), &json!(3000), &json!(30)));
    let pods = u["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 1);
    let pj = pods[0].as_object().unwrap();
    let mut fields: Vec<&str> = pj.keys().map(String::as_str).collect();
    fields.sort();
    assert_eq!(fields, ["annotations", "labels", "name", "namespace", "node", "nodeName", "state", "uid"]);
    assert_eq!(pj["namespace"], "default");
    assert_eq!(pj["name"], "p1");
    assert_eq!(pj["uid"], "uid-p1");
    assert_eq!(pj["node"], "b");
    assert_eq!(pj["nodeName"], Value::Null, "not bound yet");
    assert_eq!(pj["state"], "reserved");
    assert_eq!(pj["labels"]["app"], "train");
    assert_eq!(pj["labels"][keys::ASSIGNED_NODE], "b");
    assert_eq!(pj["annotations"][keys::NVIDIA_ALLOCATED], "GPU-b-0,NVIDIA,3000,30:;");

    assert_eq!(app.bind(&p, "b").await, r#"{"Error":""}"#);
    let pj = app.usage_pod("p1").await.unwrap();
    assert_eq!(pj["state"], "committed");
    assert_eq!(pj["nodeName"], "b");
}

#[actix_web::test]
async fn usage_of_one_node_lists_only_its_devices_and_pods() {
    let app = TestApp::new().node(node("a").gpus(2, 16384)).node(node("b").gpus(1, 8192)).start().await;
    let (pa, pb) = (gpu_pod("pa", 1000), gpu_pod("pb", 1000));
    app.filter(&filter_args(&pa, ["a"])).await;
    app.filter(&filter_args(&pb, ["b"])).await;
    let (status, b) = app.call(TestRequest::get().uri("/usage?node=b")).await;
    assert_eq!(status, StatusCode::OK);
    let u: Value = serde_json::from_slice(&b).unwrap();
    let names: Vec<&str> = u["nodes"].as_array().unwrap().iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["b"]);
    let pods: Vec<&str> = u["pods"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(pods, ["pb"]);
    let (status, b) = app.call(TestRequest::get().uri("/usage?node=zz")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(serde_json::from_slice::<Value>(&b).unwrap(), json!({"error": "no node zz"}));
}

#[actix_web::test]
async fn usage_and_the_status_page_are_gzipped_when_asked_and_the_extender_answers_are_not() {
    use std::io::Read;
    let app = TestApp::new().node(node("a").gpus(2, 16384)).start().await;
    let plain = app.usage().await;
    let svc = init_service(App::new().app_data(app.state.clone()).configure(routes::<MemoryBackend>)).await;
    for uri in ["/usage", "/"] {
        let res = call_service(
            &svc,
            TestRequest::get()
                .uri(uri)
                .peer_addr(LOOPBACK.parse().unwrap())
                .insert_header(("accept-encoding", "gzip"))
                .to_request(),
        )
        .await;
        assert_eq!(res.headers().get("content-encoding").map(|v| v.to_str().unwrap()), Some("gzip"), "{uri}");
        let zipped = read_body(res).await;
        let mut text = String::new();
        flate2::read::GzDecoder::new(&zipped[..]).read_to_string(&mut text).unwrap();
        if uri == "/usage" {
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), plain);
        } else {
            assert!(text.contains("<html"), "{text}");
        }
    }
    let body = filter_args(&gpu_pod("p1", 1000), ["a"]).to_string();
    let req = TestRequest::post()
        .uri("/filter")
        .peer_addr(LOOPBACK.parse().unwrap())
        .insert_header(("content-type", "application/json"))
        .insert_header(("accept-encoding", "gzip"))
        .set_payload(body);
    let res = call_service(&svc, req.to_request()).await;
    assert!(res.headers().get("content-encoding").is_none(), "the filter's answer stays plain");
    let answer: Value = serde_json::from_slice(&read_body(res).await).unwrap();
    assert_eq!(answer["NodeNames"], json!(["a"]));
}

#[actix_web::test]
async fn usage_counts_pods_loaded_with_the_cluster() {
    // A bound pod in the cluster file holds its devices, as HAMi counts annotated pods' usage.
    let mut bound = pod()
        .gpu(1)
        .mem_mib(5000)
        .name("old")
        .annotation(keys::ASSIGNED_NODE, "a")
        .annotation(keys::NVIDIA_ALLOCATED, "GPU-a-0,NVIDIA,5000,20:;");
    bound.view.spec.node_name = Some("a".into());
    let app = TestApp::new().node(node("a").gpus(1, 16384)).pod(bound).start().await;
    let u = app.usage().await;
    let dev = &u["nodes"][0]["devices"][0];
    assert_eq!((&dev["used"], &dev["memUsed"], &dev["coresUsed"]), (&json!(1), &json!(5000), &json!(20)));
    let pj = app.usage_pod("old").await.unwrap();
    assert_eq!(pj["state"], "committed");
    assert_eq!(pj["nodeName"], "a");
    // The rest of the card is what a new pod can get.
    let res = app.filter(&filter_args(&gpu_pod("p1", 12000), ["a"])).await;
    assert_eq!(res["FailedNodes"]["a"], "1/1 CardInsufficientMemory");
    let res = app.filter(&filter_args(&gpu_pod("p2", 11384), ["a"])).await;
    assert_eq!(res["NodeNames"], json!(["a"]), "16384 - 5000 = 11384 MiB is free");
}

#[actix_web::test]
async fn a_memory_percentage_above_100_created_past_the_webhook_takes_the_whole_card() {
    // HAMi's Filter reads a percentage above 100 as 100: the pod is placed and reserves the card.
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    let p = pod().gpu(1).mem_pct(150).name("p1");
    let res = app.filter(&filter_args(&p, ["a"])).await;
    assert_eq!(res["NodeNames"], json!(["a"]), "{res}");
    let u = app.usage().await;
    assert_eq!(u["nodes"][0]["devices"][0]["memUsed"], json!(16384), "{u}");
}

// --- /preempt ----------------------------------------------------------------------------------------

/// A bound pod holding `mem` MiB of the node's first GPU, with a priority.
fn holding(name: &str, node: &str, mem: u64, priority: i32) -> PodBuilder {
    gpu_pod(name, mem).priority(priority).placed(node, &format!("GPU-{node}-0,NVIDIA,{mem},0:;")).bound_to(node)
}

#[actix_web::test]
async fn preempt_keeps_the_nodes_where_the_victims_free_the_devices_adding_the_fewest_more() {
    let app = TestApp::new()
        .node(node("a").gpus(1, 16384))
        .node(node("b").gpus(1, 16384))
        .pod(holding("low1", "a", 8000, 1))
        .pod(holding("low2", "a", 8000, 2))
        .pod(holding("low3", "b", 10000, 1))
        .pod(holding("high", "b", 6000, 50))
        .pod(gpu_pod("urgent", 12000).priority(10))
        .start()
        .await;
    let p = gpu_pod("urgent", 12000).priority(10);
    let args = json!({
        "Pod": p.view(),
        "NodeNameToMetaVictims": {
            "a": {"Pods": [{"UID": "uid-low1"}], "NumPDBViolations": 1},
            "b": {"Pods": [{"UID": "uid-low3"}], "NumPDBViolations": 0},
            "zz": {"Pods": [], "NumPDBViolations": 0},
        },
    });
    let (status, body) = app.post_raw("/preempt", args.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let v: Value = serde_json::from_slice(&body).unwrap();
    // a: low1 alone leaves 8 384 MiB, low2 (priority 2) is added; b: high (priority 50) stays,
    // so no eviction there makes 12 000 MiB; zz: not a node with devices.
    assert_eq!(
        v,
        json!({"NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "uid-low1"}, {"UID": "uid-low2"}], "NumPDBViolations": 1}}})
    );

    // The same proposal in the full-pod form, keys in another case, proposing both pods of a.
    let args = json!({
        "pod": p.view(),
        "nodeNameToVictims": {"a": {"pods": [holding("low1", "a", 8000, 1).view(), holding("low2", "a", 8000, 2).view()]}},
    });
    let (status, body) = app.post_raw("/preempt", args.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["NodeNameToMetaVictims"]["a"]["Pods"], json!([{"UID": "uid-low1"}, {"UID": "uid-low2"}]));

    // A pod asking for no device keeps every proposal.
    let args = json!({"Pod": pod().name("cpu").priority(10).view(), "NodeNameToMetaVictims": {"b": {"Pods": [{"UID": "uid-low3"}]}}});
    let (_, body) = app.post_raw("/preempt", args.to_string()).await;
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["NodeNameToMetaVictims"]["b"]["Pods"], json!([{"UID": "uid-low3"}]));
}

#[actix_web::test]
async fn a_follower_answers_preempt_with_a_503() {
    let app = TestApp::new().node(node("a").gpus(1, 16384)).readiness(false, true).start().await;
    let args = json!({"Pod": gpu_pod("p", 1000).view(), "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "x"}]}}});
    let (status, body) = app.post_raw("/preempt", args.to_string()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{}", String::from_utf8_lossy(&body));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert!(v["error"].as_str().unwrap().contains("not the leader"), "{v}");
}

#[actix_web::test]
async fn preempt_refuses_what_does_not_read_with_a_json_400() {
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    for (body, says) in [
        ("{", "EOF"),
        ("[]", "must be an object"),
        (r#"{"NodeNameToMetaVictims": {}}"#, "missing pod"),
        (r#"{"Pod": {}, "NodeNameToMetaVictims": {"a": {"Pods": [{}]}}}"#, "without a UID"),
        (r#"{"Pod": {}, "NodeNameToMetaVictims": 3}"#, "map of node names"),
    ] {
        let (status, b) = app.post_raw("/preempt", body).await;
        let msg = assert_bad_request(status, &b);
        assert!(msg.contains(says), "{body}: {msg}");
    }
}

// --- who may call which door ------------------------------------------------------------------

/// A pod elsewhere in the cluster: not the loopback.
const REMOTE: &str = "10.244.1.7:51234";

/// A refusal for who the caller is: 403 with `{"error": …}` naming the door.
fn assert_refused(status: StatusCode, body: &Bytes, door: &str) {
    assert_eq!(status, StatusCode::FORBIDDEN, "{door}: {}", String::from_utf8_lossy(body));
    let v: Value = serde_json::from_slice(body).unwrap();
    let msg = v["error"].as_str().unwrap();
    assert!(msg.starts_with(door) && msg.contains("only kube-scheduler"), "{door}: {msg}");
}

#[actix_web::test]
async fn the_extender_verbs_refuse_a_caller_off_the_loopback_and_change_nothing() {
    let app =
        TestApp::new().node(node("a").gpus(1, 16384)).pod(gpu_pod("pending", 1000).uid("uid-pending")).start().await;
    let p = gpu_pod("pending", 1000).uid("uid-pending");
    let post = |uri: &str, body: Value| {
        TestRequest::post().uri(uri).insert_header(("content-type", "application/json")).set_payload(body.to_string())
    };
    let calls = [
        ("/filter", filter_args(&p, ["a"])),
        ("/prioritize", filter_args(&p, ["a"])),
        ("/preempt", json!({"Pod": p.view(), "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "x"}]}}})),
        ("/bind", bind_args(&p, "a")),
    ];
    for peer in [REMOTE, "[2001:db8::7]:5000", "[::ffff:10.0.0.9]:5000"] {
        for (uri, body) in &calls {
            let (status, b) = app.call_from(post(uri, body.clone()), peer).await;
            assert_refused(status, &b, uri);
        }
    }
    // Nothing was reserved, written or bound for the pod.
    assert!(app.usage_pod("pending").await.is_none());
    assert!(app.backend().written("default", "pending").is_empty());
    assert_eq!(app.backend().pod("default", "pending").unwrap().spec.node_name, None);
    // kube-scheduler beside it, on either loopback, is answered.
    for peer in [LOOPBACK, "[::1]:5000", "[::ffff:127.0.0.1]:5000"] {
        let (status, b) = app.call_from(post("/filter", filter_args(&p, ["a"])), peer).await;
        assert_eq!(status, StatusCode::OK, "{peer}: {}", String::from_utf8_lossy(&b));
    }
    assert_eq!(app.bind(&p, "a").await, r#"{"Error":""}"#);
}

#[actix_web::test]
async fn the_console_and_usage_are_for_trusted_callers_unless_opened() {
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    for uri in ["/", "/usage", "/?q=default", "/usage?node=a"] {
        let (status, b) = app.call_from(TestRequest::get().uri(uri), REMOTE).await;
        let door = uri.split('?').next().unwrap();
        assert_refused(status, &b, door);
        let (status, _) = app.call(TestRequest::get().uri(uri)).await;
        assert_eq!(status, StatusCode::OK, "{uri} from the loopback");
    }
    let mut open = app;
    let access = access::Access { console: crate::config::ConsoleAccess::Any, device_plugin: None };
    open.state =
        web::Data::new(AppState::new(open.state.engine.clone(), 1 << 20, Readiness::ready()).with_access(access));
    for uri in ["/", "/usage"] {
        let (status, _) = open.call_from(TestRequest::get().uri(uri), REMOTE).await;
        assert_eq!(status, StatusCode::OK, "{uri} with --console-access=any");
    }
    // Opening the console opens no extender verb.
    let (status, b) = open.post_raw_from("/filter", filter_args(&gpu_pod("p", 1000), ["a"]).to_string(), REMOTE).await;
    assert_refused(status, &b, "/filter");
}

#[actix_web::test]
async fn the_webhook_and_health_endpoints_answer_any_caller() {
    let app = TestApp::new().node(node("a").gpus(1, 16384)).start().await;
    for uri in ["/healthz", "/readyz"] {
        let (status, _) = app.call_from(TestRequest::get().uri(uri), REMOTE).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
    }
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "r1", "operation": "CREATE", "namespace": "default", "object": gpu_pod("w", 1000).view()},
    });
    let (status, b) = app.post_raw_from("/webhook", review.to_string(), REMOTE).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["response"]["uid"], "r1");
}
