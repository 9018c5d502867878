//! Bad input, end to end in process. Two halves:
//!
//! - Property tests ("never panics, errors are typed") over every decoder, through the same drive
//!   functions the cargo-fuzz targets use (`fuzz/src/lib.rs`): arbitrary bytes, arbitrary text,
//!   and mutations of the seed corpus (`fuzz/corpus/<target>/`). `HAMI_FUZZ_CASES` sets the case
//!   count (`tests/fuzz.sh` raises it when it cannot fuzz).
//! - A table of input classes sent through the whole HTTP app to `/filter`, `/bind` and
//!   `/webhook`: the exact status, the shape of the answer, and that a normal pod still schedules
//!   afterwards. docs/reliability.md lists each class with the test that proves it.

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod drive;

use hami_rs::backend::memory::ClusterObjects;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix_web::App;
use actix_web::http::StatusCode;
use actix_web::test::{TestRequest, call_service, init_service, read_body};
use actix_web::web::{self, Bytes};
use proptest::prelude::*;
use serde_json::{Value, json};

use hami_rs::actor::{Engine, EngineConfig};
use hami_rs::admission;
use hami_rs::backend::memory::MemoryBackend;
use hami_rs::backend::reasons;
use hami_rs::http::{AppState, Readiness, routes};
use hami_rs::model::PodView;
use hami_rs::model::annotations as keys;
use hami_rs::model::pod::NodeView;
use hami_rs::testing::{NodeBuilder, PodBuilder, gpu, node, pod, vendors};

// =============================================================================================
// Property tests

/// Cases per property: `HAMI_FUZZ_CASES`, else 64 (the HTTP table below covers the classes).
fn cases() -> u32 {
    std::env::var("HAMI_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() }
}

/// The seed inputs of one target, as tracked in `fuzz/corpus/<target>/`.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok()).filter_map(|e| std::fs::read(e.path()).ok()).collect())
        .unwrap_or_default();
    out.sort();
    if out.is_empty() {
        out.push(b"{}".to_vec());
    }
    out
}

/// One edit of a seed, as libFuzzer's mutators would make it.
#[derive(Clone, Debug)]
enum Edit {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Duplicate(usize, usize),
    /// Replaces the run of digits found at or after the position with a troublesome number.
    Number(usize, &'static str),
    /// Inserts a JSON/YAML fragment that changes a value's type.
    Fragment(usize, &'static str),
}

const NUMBERS: &[&str] = &[
    "1e400",
    "-1e400",
    "18446744073709551616",
    "-9223372036854775809",
    "2147483648",
    "-1",
    "0",
    "1.5",
    "0.0000000000000000000000000000000000000001",
    "4294967296",
    "65536",
    "NaN",
];
const FRAGMENTS: &[&str] = &[
    "null",
    "[]",
    "{}",
    "\"\"",
    "true",
    "\"16Gi\"",
    "[[[[[[[[",
    "}}}}",
    "\\u0000",
    "\u{0}",
    "\"\\ud800\"",
    ",",
    ":",
    ";",
];

fn edit() -> impl Strategy<Value = Edit> {
    let pos = any::<usize>();
    prop_oneof![
        pos.prop_map(Edit::Truncate),
        (pos, any::<u8>()).prop_map(|(p, b)| Edit::Flip(p, b)),
        (pos, proptest::collection::vec(any::<u8>(), 1..8)).prop_map(|(p, b)| Edit::Insert(p, b)),
        (pos, 1usize..32).prop_map(|(p, n)| Edit::Delete(p, n)),
        (pos, 1usize..64).prop_map(|(p, n)| Edit::Duplicate(p, n)),
        (pos, proptest::sample::select(NUMBERS)).prop_map(|(p, n)| Edit::Number(p, n)),
        (pos, proptest::sample::select(FRAGMENTS)).prop_map(|(p, f)| Edit::Fragment(p, f)),
    ]
}

fn apply(mut b: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let at = |p: usize, b: &Vec<u8>| if b.is_empty() { 0 } else { p % (b.len() + 1) };
        match e {
            Edit::Truncate(p) => {
                let p = at(*p, &b);
                b.truncate(p);
            }
            Edit::Flip(p, x) if !b.is_empty() => {
                let p = *p % b.len();
                b[p] ^= x | 1;
            }
            Edit::Flip(..) => {}
            Edit::Insert(p, x) => {
                let p = at(*p, &b);
                b.splice(p..p, x.iter().copied());
            }
            Edit::Delete(p, n) => {
                let p = at(*p, &b);
                let end = (p + n).min(b.len());
                b.drain(p..end);
            }
            Edit::Duplicate(p, n) => {
                let p = at(*p, &b);
                let end = (p + n).min(b.len());
                let part: Vec<u8> = b[p..end].to_vec();
                b.splice(end..end, part);
            }
            Edit::Number(p, n) => {
                let p = at(*p, &b);
                if let Some(start) = b[p..].iter().position(u8::is_ascii_digit).map(|i| p + i) {
                    let end = b[start..].iter().position(|c| !c.is_ascii_digit()).map_or(b.len(), |i| start + i);
                    b.splice(start..end, n.bytes());
                }
            }
            Edit::Fragment(p, f) => {
                let p = at(*p, &b);
                b.splice(p..p, f.bytes());
            }
        }
    }
    b
}

/// A seed of `target` with a few edits.
fn mutated(target: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let s = seeds(target);
    (proptest::sample::select(s), proptest::collection::vec(edit(), 1..6)).prop_map(|(seed, edits)| apply(seed, &edits))
}

macro_rules! fallback {
    ($name:ident, $target:literal, $drive:path) => {
        proptest! {
            #![proptest_config(config())]
            #[test]
            fn $name(input in prop_oneof![
                4 => mutated($target),
                1 => proptest::collection::vec(any::<u8>(), 0..512),
                1 => any::<String>().prop_map(String::into_bytes),
            ]) {
                $drive(&input);
            }
        }
    };
}

fallback!(fuzz_fallback_node_register, "node_register", drive::node_register);
fallback!(fuzz_fallback_pod_devices, "pod_devices", drive::pod_devices);
fallback!(fuzz_fallback_mig_allocations, "mig_allocations", drive::mig_allocations);
fallback!(fuzz_fallback_node_lock, "node_lock", drive::node_lock);
fallback!(fuzz_fallback_extender_args, "extender_args", drive::extender_args);
fallback!(fuzz_fallback_admission_review, "admission_review", drive::admission_review);
fallback!(fuzz_fallback_device_config, "device_config", drive::device_config);
fallback!(fuzz_fallback_cluster_objects, "cluster_objects", drive::cluster_objects);

#[test]
fn every_seed_runs_through_its_target_and_every_target_has_seeds() {
    for (name, run) in drive::TARGETS {
        let s = seeds(name);
        assert!(s.len() > 1 || s[0] != b"{}", "fuzz/corpus/{name} has no seeds");
        for input in s {
            run(&input);
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// Every register annotation value the colon grammar allows decodes, and re-encodes to itself.
    #[test]
    fn well_formed_colon_lists_decode(
        devs in proptest::collection::vec(
            ("[A-Za-z0-9-]{1,12}", 0i32..=i32::MAX, 0i32..=i32::MAX, 0i32..=i32::MAX, "[A-Za-z -]{0,12}", any::<i32>(), any::<bool>()),
            1..6,
        )
    ) {
        let text: String = devs.iter()
            .map(|(id, c, m, k, t, n, h)| format!("{id},{c},{m},{k},{t},{n},{h}:"))
            .collect();
        let got = hami_rs::model::codec::decode_node_devices(&text).expect("a well-formed list decodes");
        prop_assert_eq!(got.len(), devs.len());
        drive::node_register(text.as_bytes());
    }

    /// Pod device values built from the grammar decode to one entry per container plus one.
    #[test]
    fn well_formed_pod_device_values_decode(
        containers in proptest::collection::vec(
            proptest::collection::vec(("[A-Za-z0-9-]{1,12}", "[A-Za-z]{1,8}", 0i32..=i32::MAX, 0i32..=i32::MAX), 0..4),
            0..5,
        )
    ) {
        let text: String = containers.iter()
            .map(|c| c.iter().map(|(u, t, m, k)| format!("{u},{t},{m},{k}:")).collect::<String>() + ";")
            .collect();
        let got = hami_rs::model::codec::decode_pod_devices(&text).expect("a well-formed value decodes");
        prop_assert_eq!(got.len(), if text.is_empty() { 0 } else { containers.len() + 1 });
        drive::pod_devices(text.as_bytes());
    }
}

// =============================================================================================
// The HTTP app in process

/// The flag's default (`--max-body-bytes`).
const MAX_BODY: usize = 4 << 20;

/// A cluster and the app over it (as `src/http/tests.rs` builds it).
struct TestApp {
    nodes: Vec<NodeView>,
    pods: Vec<PodView>,
    max_body: usize,
    webhook: admission::Config,
}

struct Running {
    state: web::Data<AppState<MemoryBackend>>,
    probes: AtomicUsize,
}

impl TestApp {
    fn new() -> TestApp {
        TestApp {
            nodes: Vec::new(),
            pods: Vec::new(),
            max_body: MAX_BODY,
            webhook: admission::Config {
                scheduler_name: "hami-scheduler".into(),
                force_overwrite_default_scheduler: true,
                quota: None,
            },
        }
    }
    /// Node `a` with one 16 GiB GPU, node `b` with two.
    fn standard() -> TestApp {
        TestApp::new().node(node("a").gpus(1, 16384)).node(node("b").gpus(2, 16384))
    }
    fn node(mut self, n: NodeBuilder) -> TestApp {
        self.nodes.push(n.view());
        self
    }
    fn node_view(mut self, n: NodeView) -> TestApp {
        self.nodes.push(n);
        self
    }
    fn pod(mut self, p: PodBuilder) -> TestApp {
        self.pods.push(p.view());
        self
    }
    async fn start(self) -> Running {
        let backend = MemoryBackend::new(Duration::from_secs(300));
        let engine = Engine::start(EngineConfig::default(), Arc::new(vendors()), backend, None);
        let objects = ClusterObjects {
            nodes: self.nodes,
            pods: self.pods,
            quotas: Vec::new(),
            groups: Vec::new(),
            budgets: Vec::new(),
        };
        hami_rs::app::load_cluster(&engine, objects).await;
        let state = AppState::new(engine, self.max_body, Readiness::ready()).with_webhook(self.webhook);
        Running { state: web::Data::new(state), probes: AtomicUsize::new(0) }
    }
}

/// What one request got back.
struct Answer {
    status: StatusCode,
    body: Bytes,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    /// A 400 with `{"error": "<text>"}` and nothing else; the text.
    fn bad_request(&self) -> String {
        assert_eq!(self.status, StatusCode::BAD_REQUEST, "{}", String::from_utf8_lossy(&self.body));
        let v = self.json();
        let obj = v.as_object().expect("an object");
        assert_eq!(obj.len(), 1, "{v}");
        let msg = obj["error"].as_str().expect("error is text").to_owned();
        assert!(!msg.is_empty());
        msg
    }
    /// A 200 extender filter answer: every field present.
    fn filter_result(&self) -> Value {
        assert_eq!(self.status, StatusCode::OK, "{}", String::from_utf8_lossy(&self.body));
        let v = self.json();
        let mut fields: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort();
        assert_eq!(fields, ["Error", "FailedAndUnresolvableNodes", "FailedNodes", "NodeNames", "Nodes"], "{v}");
        v
    }
    /// The `Error` text of a 200 filter answer that carries no decision.
    fn filter_error(&self) -> String {
        let v = self.filter_result();
        assert_eq!((&v["NodeNames"], &v["FailedNodes"]), (&Value::Null, &Value::Null), "{v}");
        let e = v["Error"].as_str().unwrap().to_owned();
        assert!(!e.is_empty(), "{v}");
        e
    }
    /// The `Error` text of a 200 bind answer (`{"Error": …}` alone).
    fn bind_error(&self) -> String {
        assert_eq!(self.status, StatusCode::OK, "{}", String::from_utf8_lossy(&self.body));
        let v = self.json();
        assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
        v["Error"].as_str().unwrap().to_owned()
    }
    /// The `response` of a 200 AdmissionReview answer.
    fn review_response(&self) -> Value {
        assert_eq!(self.status, StatusCode::OK, "{}", String::from_utf8_lossy(&self.body));
        let v = self.json();
        assert_eq!(v["kind"], "AdmissionReview", "{v}");
        assert_eq!(v["response"]["uid"], UID, "{v}");
        v["response"].clone()
    }
}

/// Where kube-scheduler calls from in the chart.
const LOOPBACK: &str = "127.0.0.1:40000";

impl Running {
    fn backend(&self) -> &MemoryBackend {
        self.state.engine.backend()
    }

    async fn post(&self, uri: &str, body: impl Into<Bytes>) -> Answer {
        let app = init_service(App::new().app_data(self.state.clone()).configure(routes::<MemoryBackend>)).await;
        // From kube-scheduler beside hami-rs: the pod's loopback.
        let req = TestRequest::post()
            .uri(uri)
            .peer_addr(LOOPBACK.parse().unwrap())
            .insert_header(("content-type", "application/json"))
            .set_payload(body.into())
            .to_request();
        let res = call_service(&app, req).await;
        let status = res.status();
        Answer { status, body: read_body(res).await }
    }

    async fn usage(&self) -> Value {
        let app = init_service(App::new().app_data(self.state.clone()).configure(routes::<MemoryBackend>)).await;
        let req = TestRequest::get().uri("/usage").peer_addr(LOOPBACK.parse().unwrap());
        let res = call_service(&app, req.to_request()).await;
        assert_eq!(res.status(), StatusCode::OK);
        serde_json::from_slice(&read_body(res).await).unwrap()
    }

    /// Pods that hold or reserve devices.
    async fn holders(&self) -> Vec<String> {
        let u = self.usage().await;
        u["pods"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect()
    }

    /// The process still works: a fresh 1000 MiB GPU pod filters onto one of `nodes`, binds, and
    /// the webhook still admits a GPU pod.
    async fn still_schedules(&self, nodes: &[&str]) {
        let n = self.probes.fetch_add(1, Ordering::SeqCst);
        let p = pod().gpu(1).mem_mib(1000).name(&format!("probe-{n}")).uid(&format!("uid-probe-{n}"));
        let res =
            self.post("/filter", json!({ "Pod": p.view(), "NodeNames": nodes }).to_string()).await.filter_result();
        assert_eq!(res["Error"], "", "{res}");
        let chosen = res["NodeNames"][0].as_str().unwrap_or_else(|| panic!("probe did not schedule: {res}")).to_owned();
        assert!(nodes.contains(&chosen.as_str()), "{res}");
        let v = p.view();
        let bind =
            json!({"PodName": v.metadata.name, "PodNamespace": "default", "PodUID": v.metadata.uid, "Node": chosen});
        assert_eq!(self.post("/bind", bind.to_string()).await.bind_error(), "");
        let admitted = self.post("/webhook", review(gpu_pod_json()).to_string()).await.review_response();
        assert_eq!(admitted["allowed"], true, "{admitted}");
        assert_eq!(admitted["patchType"], "JSONPatch", "{admitted}");
    }
}

const UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

fn review(object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "object": object,
        }
    })
}

fn pod_json(limits: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bad", "namespace": "default", "uid": "uid-bad"},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]}
    })
}

fn gpu_pod_json() -> Value {
    pod_json(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}))
}

/// `{"Pod": <pod with these limits>, "NodeNames": [...]}`.
fn filter_body(limits: Value, names: &[&str]) -> String {
    json!({ "Pod": pod_json(limits), "Nodes": null, "NodeNames": names }).to_string()
}

fn deep(n: usize) -> String {
    "[".repeat(n)
}

/// 1 MiB of bytes that are not JSON (a fixed pseudo-random stream, invalid UTF-8 included).
fn garbage(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A valid filter body padded with spaces to exactly `len` bytes.
fn padded_filter(len: usize) -> String {
    let core = filter_body(json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}), &["a"]);
    assert!(core.len() <= len);
    format!("{core}{}", " ".repeat(len - core.len()))
}

/// Bodies every route must refuse with 400 and a JSON error, whatever the route.
fn malformed_bodies() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    vec![
        ("truncated JSON", br#"{"Pod":{"metadata":{"name":"p"#.to_vec(), "EOF while parsing"),
        ("empty body", Vec::new(), "empty request body"),
        ("1 MiB of garbage", garbage(1 << 20), "invalid JSON"),
        ("a bare number 1e400", b"1e400".to_vec(), "number out of range"),
        ("trailing garbage", b"{} x".to_vec(), "trailing characters"),
    ]
}

// ---------------------------------------------------------------------------------------------
// Malformed bodies, every route

#[actix_web::test]
async fn malformed_bodies_are_400_with_a_json_error_on_every_route() {
    let app = TestApp::standard().start().await;
    for uri in ["/filter", "/bind", "/webhook", "/preempt"] {
        for (what, body, says) in malformed_bodies() {
            let msg = app.post(uri, body).await.bad_request();
            assert!(msg.contains(says), "{uri} {what}: {msg}");
        }
    }
    // 100 000 '[': the extender decoders want an object at the first byte and skip unknown keys
    // without recursing (serde_json keeps one byte per level), so they meet the end of the
    // input; the webhook reads a JSON value first and meets serde_json's recursion limit (128).
    let unclosed = format!(r#"{{"x":{}"#, deep(100_000));
    for (uri, top, under_key) in [
        ("/filter", "invalid type: sequence, expected an ExtenderArgs object", "EOF while parsing a list"),
        ("/bind", "invalid type: sequence, expected an ExtenderBindingArgs object", "EOF while parsing a list"),
        ("/webhook", "recursion limit exceeded", "recursion limit exceeded"),
        ("/preempt", "recursion limit exceeded", "recursion limit exceeded"),
    ] {
        let msg = app.post(uri, deep(100_000)).await.bad_request();
        assert!(msg.contains(top), "{uri}: {msg}");
        let msg = app.post(uri, unclosed.clone()).await.bad_request();
        assert!(msg.contains(under_key), "{uri}: {msg}");
    }
    // Balanced, under a key the extender ignores: skipped, so the request is simply missing its pod.
    let balanced = format!(r#"{{"x":{}{}}}"#, deep(100_000), "]".repeat(100_000));
    assert_eq!(app.post("/filter", balanced.clone()).await.filter_error(), "extender args missing pod");
    assert_eq!(app.post("/bind", balanced.clone()).await.bad_request(), "PodName and Node are required");
    assert!(app.post("/webhook", balanced).await.bad_request().contains("recursion limit exceeded"));
    assert!(app.holders().await.is_empty(), "nothing was reserved");
    app.still_schedules(&["a", "b"]).await;
}

/// `{"<field>": "<bytes>"}` around bytes that are not valid in a JSON string, in a field each
/// route decodes (a node name, the pod name, the review's uid).
fn in_read_field(uri: &str, bad: &[u8]) -> Vec<u8> {
    let (head, tail): (&str, &str) = match uri {
        "/filter" => (r#"{"Pod":{"metadata":{"name":"p"}},"NodeNames":[""#, r#""]}"#),
        "/bind" => (r#"{"PodName":""#, r#"","Node":"a"}"#),
        _ => (r#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":""#, r#""}}"#),
    };
    [head.as_bytes(), bad, tail.as_bytes()].concat()
}

#[actix_web::test]
async fn invalid_utf8_and_nul_bytes_are_400_where_read_and_skipped_where_ignored() {
    let app = TestApp::standard().start().await;
    for uri in ["/filter", "/bind", "/webhook"] {
        let msg = app.post(uri, in_read_field(uri, b"\xff\xfe")).await.bad_request();
        assert!(msg.contains("invalid unicode code point"), "{uri}: {msg}");
        let msg = app.post(uri, in_read_field(uri, b"p\0")).await.bad_request();
        assert!(msg.contains("control character (\\u0000-\\u001F) found while parsing a string"), "{uri}: {msg}");
    }
    // In a key the extenders do not read, serde_json skips a string without checking its UTF-8
    // (it still refuses a raw control character); the webhook reads every value.
    let ignored = |bad: &[u8]| {
        [br#"{"Ignored":""#.as_slice(), bad, br#"","PodName":"nobody","PodNamespace":"default","Node":"a"}"#].concat()
    };
    assert_eq!(app.post("/bind", ignored(b"\xff\xfe")).await.bind_error(), "pod default/nobody not found");
    assert_eq!(app.post("/filter", ignored(b"\xff\xfe")).await.filter_error(), "extender args missing pod");
    assert!(app.post("/bind", ignored(b"\0")).await.bad_request().contains("control character"));
    let review =
        [br#"{"apiVersion":"admission.k8s.io/v1","x":""#.as_slice(), b"\xff", br#"","request":{"uid":"u"}}"#].concat();
    assert!(app.post("/webhook", review).await.bad_request().contains("invalid unicode code point"));
    // The escaped forms are valid JSON: a NUL in a name is just an unknown name.
    let e = app.post("/bind", br#"{"PodName":"p\u0000","Node":"a"}"#.to_vec()).await.bind_error();
    assert_eq!(e, "pod /p\u{0} not found");
    app.still_schedules(&["a", "b"]).await;
}

#[actix_web::test]
async fn a_body_just_over_the_limit_is_400_and_one_at_the_limit_is_served() {
    let app = TestApp::standard().start().await;
    for uri in ["/filter", "/bind", "/webhook", "/preempt"] {
        let msg = app.post(uri, vec![b' '; MAX_BODY + 1]).await.bad_request();
        assert_eq!(msg, format!("request body exceeds {MAX_BODY} bytes"), "{uri}");
    }
    let over = padded_filter(MAX_BODY + 1);
    assert_eq!(app.post("/filter", over).await.bad_request(), format!("request body exceeds {MAX_BODY} bytes"));
    let res = app.post("/filter", padded_filter(MAX_BODY)).await.filter_result();
    assert_eq!(res["NodeNames"], json!(["a"]), "{res}");
    app.still_schedules(&["a", "b"]).await;
}

// ---------------------------------------------------------------------------------------------
// /filter

#[actix_web::test]
async fn filter_bodies_of_the_wrong_shape_are_400() {
    let app = TestApp::standard().start().await;
    let p = gpu_pod_json();
    let cases: Vec<(&str, String, &str)> = vec![
        ("Pod is a string", json!({"Pod": "p", "NodeNames": ["a"]}).to_string(), "invalid type: string"),
        ("NodeNames is a number", json!({"Pod": p, "NodeNames": 5}).to_string(), "invalid type: integer"),
        ("a node name is a number", json!({"Pod": p, "NodeNames": [1]}).to_string(), "invalid type: integer"),
        ("Nodes is an array", json!({"Pod": p, "Nodes": []}).to_string(), "invalid type: sequence"),
        ("containers is a string", json!({"Pod": {"spec": {"containers": "x"}}, "NodeNames": ["a"]}).to_string(), "invalid type: string"),
        ("a limit is an object", filter_body(json!({"nvidia.com/gpu": {"n": 1}}), &["a"]), "data did not match any variant of untagged enum Raw"),
        ("the pod is 100 000 '['", format!(r#"{{"Pod":{}"#, deep(100_000)), "invalid type: sequence"),
        ("a limit is a bare 1e400", r#"{"Pod":{"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":1e400}}}]}},"NodeNames":["a"]}"#.into(), "number out of range"),
        ("an annotation is a number", json!({"Pod": {"metadata": {"annotations": {"x": 1}}}, "NodeNames": ["a"]}).to_string(), "invalid type: integer"),
    ];
    for (what, body, says) in cases {
        let msg = app.post("/filter", body).await.bad_request();
        assert!(msg.contains(says), "{what}: {msg}");
    }
    assert!(app.holders().await.is_empty());
    app.still_schedules(&["a"]).await;
}

/// Container limits a vendor cannot use, the vendor, and what the refusal says about them. Every
/// row is a quantity HAMi drops or ignores (placing the pod as if it needed no device).
fn unusable_limits() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    const RANGE: &str = "is out of range 0..=2147483647";
    vec![
        (
            "16Gi for MiB memory",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "16Gi"}),
            "NVIDIA",
            "nvidia.com/gpumem: 17179869184 is out of range 0..=2147483647",
        ),
        (
            "negative memory",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "-1"}),
            "NVIDIA",
            "nvidia.com/gpumem: -1 is out of range",
        ),
        (
            "negative cores",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "-5"}),
            "NVIDIA",
            "nvidia.com/gpucores: -5 is out of range 0..=2147483647",
        ),
        (
            "fractional cores",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "1.5"}),
            "NVIDIA",
            "nvidia.com/gpucores: \"1.5\" is not an integer",
        ),
        (
            "fractional memory",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "0.5"}),
            "NVIDIA",
            "nvidia.com/gpumem: \"0.5\" is not an integer",
        ),
        (
            "memory 1e400 as text",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1e400"}),
            "NVIDIA",
            "nvidia.com/gpumem: quantity \"1e400\" is too large",
        ),
        (
            "memory 2^64",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "18446744073709551616"}),
            "NVIDIA",
            "nvidia.com/gpumem: 18446744073709551616 is out of range",
        ),
        (
            "memory not a quantity",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "lots"}),
            "NVIDIA",
            "nvidia.com/gpumem: quantity \"lots\" is not a valid Kubernetes quantity",
        ),
        (
            "fractional percentage",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50.5"}),
            "NVIDIA",
            "nvidia.com/gpumem-percentage: \"50.5\" is not an integer",
        ),
        (
            "count past int32",
            json!({"nvidia.com/gpu": "2147483648"}),
            "NVIDIA",
            "nvidia.com/gpu: 2147483648 is out of range 0..=2147483647",
        ),
        (
            "count over uint32",
            json!({"nvidia.com/gpu": "4294967296"}),
            "NVIDIA",
            "nvidia.com/gpu: 4294967296 is out of range",
        ),
        ("count 2^64", json!({"nvidia.com/gpu": "18446744073709551616"}), "NVIDIA", RANGE),
        (
            "count 10^20",
            json!({"nvidia.com/gpu": "99999999999999999999"}),
            "NVIDIA",
            "nvidia.com/gpu: 99999999999999999999 is out of range",
        ),
        ("count 2^64 as a JSON number", json!({"nvidia.com/gpu": 18446744073709551616u128 as f64}), "NVIDIA", RANGE),
        (
            "count 1e400 as text",
            json!({"nvidia.com/gpu": "1e400"}),
            "NVIDIA",
            "nvidia.com/gpu: quantity \"1e400\" is too large",
        ),
        (
            "count not a number",
            json!({"nvidia.com/gpu": "one"}),
            "NVIDIA",
            "nvidia.com/gpu: quantity \"one\" is not a valid Kubernetes quantity",
        ),
        (
            "negative count",
            json!({"nvidia.com/gpu": "-1"}),
            "NVIDIA",
            "nvidia.com/gpu: -1 is out of range 0..=2147483647",
        ),
        ("fractional count", json!({"nvidia.com/gpu": "1.5"}), "NVIDIA", "nvidia.com/gpu: \"1.5\" is not an integer"),
        (
            "another vendor's count",
            json!({"cambricon.com/vmlu": "two"}),
            "MLU",
            "cambricon.com/vmlu: quantity \"two\" is not a valid Kubernetes quantity",
        ),
        (
            "another vendor's cores",
            json!({"hygon.com/dcunum": "1", "hygon.com/dcucores": "2.5"}),
            "DCU",
            "hygon.com/dcucores: \"2.5\" is not an integer",
        ),
        (
            "a limits-only vendor's count",
            json!({"amd.com/gpu": "-2"}),
            "AMD",
            "amd.com/gpu: -2 is out of range 0..=2147483647",
        ),
    ]
}

#[actix_web::test]
async fn unusable_device_quantities_are_a_filter_error_and_reserve_nothing() {
    let app = TestApp::standard().start().await;
    for (what, limits, vendor, says) in unusable_limits() {
        let e = app.post("/filter", filter_body(limits, &["a", "b"])).await.filter_error();
        let prefix = format!("pod default/bad: container main: unusable {vendor} device request: ");
        assert!(e.starts_with(&prefix), "{what}: {e}");
        assert!(e.contains(says), "{what}: {e}");
    }
    assert!(app.holders().await.is_empty());
    assert!(app.backend().events().is_empty(), "a request error records no Event");
    app.still_schedules(&["a", "b"]).await;
}

#[actix_web::test]
async fn zero_counts_unknown_resources_and_no_limits_pass_through() {
    // A count of 0 asks for no device, as in HAMi; a resource no vendor owns is not HAMi's. The
    // pod requests nothing, so its candidates are echoed.
    let app = TestApp::standard().start().await;
    let cases: Vec<(&str, Value)> = vec![
        ("zero count", json!({"nvidia.com/gpu": "0"})),
        ("zero count in milli-units", json!({"nvidia.com/gpu": "0m"})),
        ("an unknown vendor's resource", json!({"example.com/fpga": "1", "example.com/fpga-memory": "16Gi"})),
        ("no limits at all", json!({})),
    ];
    for (what, limits) in cases {
        let res = app.post("/filter", filter_body(limits, &["a", "b"])).await.filter_result();
        assert_eq!(res["NodeNames"], json!(["a", "b"]), "{what}: {res}");
        assert_eq!((&res["FailedNodes"], &res["Error"]), (&Value::Null, &json!("")), "{what}: {res}");
    }
    assert!(app.holders().await.is_empty());
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn an_empty_pod_and_a_missing_pod() {
    let app = TestApp::standard().start().await;
    let res = app.post("/filter", json!({"Pod": {}, "NodeNames": ["a"]}).to_string()).await.filter_result();
    assert_eq!((&res["NodeNames"], &res["Error"]), (&json!(["a"]), &json!("")), "an empty pod requests nothing: {res}");
    let e = app.post("/filter", json!({"Pod": null, "NodeNames": ["a"]}).to_string()).await.filter_error();
    assert_eq!(e, "extender args missing pod");
    let e = app.post("/filter", "{}").await.filter_error();
    assert_eq!(e, "extender args missing pod");
    let e = app.post("/filter", json!({"Pod": gpu_pod_json()}).to_string()).await.filter_error();
    assert_eq!(e, "extender args have neither Nodes nor NodeNames");
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn a_pod_with_100_containers_is_placed_with_100_entries() {
    let app = TestApp::new().node(node("big").gpus(10, 65536)).start().await;
    let containers: Vec<Value> = (0..100)
        .map(|i| json!({"name": format!("c{i}"), "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "100"}}}))
        .collect();
    let p = json!({"metadata": {"name": "wide", "namespace": "default", "uid": "uid-wide"}, "spec": {"containers": containers}});
    let res = app.post("/filter", json!({"Pod": p, "NodeNames": ["big"]}).to_string()).await.filter_result();
    assert_eq!(res["NodeNames"], json!(["big"]), "{res}");
    let u = app.usage().await;
    let wide = u["pods"].as_array().unwrap().iter().find(|p| p["name"] == "wide").unwrap().clone();
    let allocated = wide["annotations"][keys::NVIDIA_ALLOCATED].as_str().unwrap().to_owned();
    assert_eq!(allocated.matches(';').count(), 100, "{allocated}");
    let used: u64 = u["nodes"][0]["devices"].as_array().unwrap().iter().map(|d| d["used"].as_u64().unwrap()).sum();
    assert_eq!(used, 100, "every container holds one slot");
    // 101 containers cannot fit in 100 slots.
    let containers: Vec<Value> = (0..101)
        .map(|i| json!({"name": format!("c{i}"), "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "100"}}}))
        .collect();
    let p = json!({"metadata": {"name": "wider", "namespace": "default", "uid": "uid-wider"}, "spec": {"containers": containers}});
    let res = app.post("/filter", json!({"Pod": p, "NodeNames": ["big"]}).to_string()).await.filter_result();
    assert_eq!(res["NodeNames"], Value::Null, "{res}");
    assert!(res["FailedNodes"]["big"].as_str().unwrap().contains("CardTimeSlicingExhausted"), "{res}");
}

#[actix_web::test]
async fn ten_thousand_unknown_candidates_all_fail_as_unregistered() {
    let app = TestApp::standard().start().await;
    let names: Vec<String> = (0..10_000).map(|i| format!("ghost-{i}")).collect();
    let p = pod().gpu(1).mem_mib(1000).name("many");
    let res = app.post("/filter", json!({"Pod": p.view(), "NodeNames": names}).to_string()).await.filter_result();
    assert_eq!(res["NodeNames"], Value::Null, "{}", &res.to_string()[..200]);
    let failed = res["FailedNodes"].as_object().unwrap();
    assert_eq!(failed.len(), 10_000);
    assert!(failed.values().all(|r| r == "node unregistered"), "{:?}", failed.values().next());
    let ev = app.backend().events_for(&hami_rs::backend::PodRef {
        namespace: "default".into(),
        name: "many".into(),
        uid: String::new(),
    });
    assert!(ev.iter().any(|e| e.reason == reasons::FILTERING_FAILED && e.message == "no available node, 10000 nodes do not meet"), "{ev:?}");
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn ten_thousand_known_small_nodes_are_all_evaluated() {
    let mut t = TestApp::new();
    for i in 0..10_000 {
        t = t.node(node(&format!("n{i:05}")).gpus(1, 1024));
    }
    let app = t.start().await;
    let names: Vec<String> = (0..10_000).map(|i| format!("n{i:05}")).collect();
    // Fits nowhere: every node answers with its own reason.
    let big = pod().gpu(1).mem_mib(2048).name("big");
    let res = app.post("/filter", json!({"Pod": big.view(), "NodeNames": names}).to_string()).await.filter_result();
    let failed = res["FailedNodes"].as_object().unwrap();
    assert_eq!(failed.len(), 10_000);
    assert!(failed["n00000"].as_str().unwrap().starts_with("1/1 CardInsufficientMemory"), "{}", failed["n00000"]);
    // Fits: exactly one node is chosen.
    let small = pod().gpu(1).mem_mib(512).name("small");
    let res = app.post("/filter", json!({"Pod": small.view(), "NodeNames": names}).to_string()).await.filter_result();
    assert_eq!(res["NodeNames"].as_array().map(Vec::len), Some(1), "{res}");
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    app.still_schedules(&refs).await;
}

#[actix_web::test]
async fn duplicate_and_odd_node_names_are_answered() {
    let app = TestApp::standard().start().await;
    let p = pod().gpu(1).mem_mib(1000).name("dups");
    let res =
        app.post("/filter", json!({"Pod": p.view(), "NodeNames": ["a", "a", "a"]}).to_string()).await.filter_result();
    assert_eq!(res["NodeNames"], json!(["a"]), "{res}");
    let odd = ["", "\u{0}", "a\u{0}", "\u{1F600}", &"x".repeat(10_000)];
    let p = pod().gpu(1).mem_mib(1000).name("odd");
    let res = app.post("/filter", json!({"Pod": p.view(), "NodeNames": odd}).to_string()).await.filter_result();
    let failed = res["FailedNodes"].as_object().unwrap();
    assert_eq!(failed.len(), odd.len(), "{res}");
    assert!(failed.values().all(|r| r == "node unregistered"), "{res}");
    app.still_schedules(&["a", "b"]).await;
}

#[actix_web::test]
async fn duplicate_device_uuids_in_a_registration() {
    // Two devices with one UUID: both are listed, but usage is matched by UUID (as in HAMi), so
    // every charge lands on both. The node is under-used, never over-committed.
    let dup = node("dup").gpu(gpu("GPU-dup", 16384)).gpu(gpu("GPU-dup", 16384).index(1));
    let app = TestApp::new().node(dup).node(node("a").gpus(1, 16384)).start().await;
    let two = pod().gpu(2).mem_mib(10000).name("two");
    let res = app.post("/filter", json!({"Pod": two.view(), "NodeNames": ["dup"]}).to_string()).await.filter_result();
    assert_eq!(res["NodeNames"], Value::Null, "{res}");
    assert_eq!(res["FailedNodes"]["dup"], "1/2 CardInsufficientMemory", "{res}");
    let one = |i: usize| pod().gpu(1).mem_mib(10000).name(&format!("one-{i}")).uid(&format!("uid-one-{i}"));
    let res =
        app.post("/filter", json!({"Pod": one(0).view(), "NodeNames": ["dup"]}).to_string()).await.filter_result();
    assert_eq!(res["NodeNames"], json!(["dup"]), "{res}");
    let b = json!({"PodName": "one-0", "PodNamespace": "default", "PodUID": "uid-one-0", "Node": "dup"});
    assert_eq!(app.post("/bind", b.to_string()).await.bind_error(), "");
    let u = app.usage().await;
    let devs = u["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "dup").unwrap()["devices"].clone();
    let mem: Vec<u64> = devs.as_array().unwrap().iter().map(|d| d["memUsed"].as_u64().unwrap()).collect();
    assert_eq!(mem, [10000, 10000], "one pod is charged on both devices: {devs}");
    let res =
        app.post("/filter", json!({"Pod": one(1).view(), "NodeNames": ["dup"]}).to_string()).await.filter_result();
    assert_eq!(res["FailedNodes"]["dup"], "2/2 CardInsufficientMemory", "the second pod does not fit: {res}");
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn a_malformed_registration_on_one_node_leaves_the_others_schedulable() {
    let bad = node("bad").gpus(1, 16384).view();
    let mut bad = bad;
    bad.metadata.annotations.insert(keys::NVIDIA_REGISTER.into(), "[{\"id\":\"GPU-x\",\"count\":\"ten\"}]".into());
    let app = TestApp::standard().node_view(bad).start().await;
    let reason =
        "NVIDIA annotation hami.io/node-nvidia-register is malformed: device 0: field \"count\": expected a number";
    let ev: Vec<_> =
        app.backend().events().into_iter().filter(|e| e.reason == reasons::DEVICE_REGISTRATION_INVALID).collect();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!((ev[0].pod.name.as_str(), ev[0].message.as_str()), ("bad", reason));

    let p = pod().gpu(1).mem_mib(1000).name("only-bad");
    let res = app.post("/filter", json!({"Pod": p.view(), "NodeNames": ["bad"]}).to_string()).await.filter_result();
    assert_eq!(res["NodeNames"], Value::Null, "{res}");
    assert_eq!(res["FailedNodes"], json!({"bad": format!("node unregistered ({reason})")}), "{res}");
    let res =
        app.post("/filter", json!({"Pod": p.view(), "NodeNames": ["bad", "a", "b"]}).to_string()).await.filter_result();
    let chosen = res["NodeNames"][0].as_str().unwrap();
    assert!(chosen == "a" || chosen == "b", "{res}");
    app.still_schedules(&["bad", "a", "b"]).await;
}

#[actix_web::test]
async fn every_vendor_annotation_malformed_marks_only_that_node() {
    let f = drive::fixture();
    let mut t = TestApp::standard();
    let mut bad_nodes = Vec::new();
    for (i, key) in f.node_keys.iter().enumerate() {
        let mut n = f.rich.clone();
        n.metadata.name = format!("bad-{i}");
        n.metadata.annotations.insert(key.clone(), "[{\"id\":".into());
        bad_nodes.push((n.metadata.name.clone(), key.clone()));
        t = t.node_view(n);
    }
    let app = t.start().await;
    // Registrations and the NVIDIA pair scores are read strictly; a lock, the handshake, the
    // cordon list, Ascend's vnpu-core flag and Metax's topology maps are read leniently.
    let lenient = [
        keys::CAMBRICON_LOCK,
        keys::NODE_LOCK,
        keys::NVIDIA_HANDSHAKE,
        keys::NVIDIA_CORDON,
        keys::ascend::NODE_HAMI_VNPU_CORE,
        keys::metax::TOPOLOGY_LOSSES,
        keys::metax::TOPOLOGY_SCORES,
    ];
    let events: Vec<_> =
        app.backend().events().into_iter().filter(|e| e.reason == reasons::DEVICE_REGISTRATION_INVALID).collect();
    for (name, key) in &bad_nodes {
        let p = pod().gpu(1).mem_mib(1000).name(&format!("probe-{name}"));
        let res = app.post("/filter", json!({"Pod": p.view(), "NodeNames": [name]}).to_string()).await.filter_result();
        let event = events.iter().find(|e| &e.pod.name == name);
        if lenient.contains(&key.as_str()) {
            assert_eq!(res["NodeNames"], json!([name]), "{key}: {res}");
            assert!(event.is_none(), "{key}: {event:?}");
        } else {
            let why = res["FailedNodes"][name].as_str().unwrap_or_else(|| panic!("{key}: {res}"));
            assert!(why.starts_with("node unregistered ("), "{key}: {why}");
            assert!(why.contains(&format!(" annotation {key} is malformed: ")), "{key}: {why}");
            assert!(why.ends_with("EOF while parsing a value at line 1 column 7)"), "{key}: {why}");
            let event = event.unwrap_or_else(|| panic!("{key}: no DeviceRegistrationInvalid Event"));
            assert_eq!(format!("node unregistered ({})", event.message), why);
        }
    }
    app.still_schedules(&["a", "b"]).await;
}

// ---------------------------------------------------------------------------------------------
// /bind

#[actix_web::test]
async fn bind_bodies_of_the_wrong_shape_are_400() {
    let app = TestApp::standard().start().await;
    let cases: Vec<(&str, String, &str)> = vec![
        ("PodName is a number", r#"{"PodName":5,"Node":"a"}"#.into(), "invalid type: integer"),
        ("PodName is 1e400", r#"{"PodName":1e400,"Node":"a"}"#.into(), "number out of range"),
        ("Node is an array", r#"{"PodName":"p","Node":["a"]}"#.into(), "invalid type: sequence"),
        ("not an object", r#"["p","a"]"#.into(), "invalid type: sequence"),
        ("an empty object", "{}".into(), "PodName and Node are required"),
        ("Node missing", r#"{"PodName":"p"}"#.into(), "PodName and Node are required"),
    ];
    for (what, body, says) in cases {
        let msg = app.post("/bind", body).await.bad_request();
        assert!(msg.contains(says), "{what}: {msg}");
    }
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn binds_of_unknown_or_odd_pods_are_answered_in_error() {
    let app = TestApp::standard().start().await;
    let cases: Vec<(Value, &str)> = vec![
        (json!({"PodName": "nobody", "PodNamespace": "default", "Node": "a"}), "pod default/nobody not found"),
        (json!({"PodName": "p\u{0}", "PodNamespace": "default", "Node": "a"}), "pod default/p\u{0} not found"),
        (json!({"PodName": "x".repeat(100_000), "PodNamespace": "default", "Node": "a"}), "not found"),
    ];
    for (body, says) in cases {
        let e = app.post("/bind", body.to_string()).await.bind_error();
        assert!(e.contains(says), "{e:.200}");
    }
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn a_garbage_lock_annotation_fails_that_bind_only() {
    let app = TestApp::new()
        .node(node("locked").gpus(1, 16384).annotation(keys::NODE_LOCK, "garbage, not a lock"))
        .node(node("a").gpus(1, 16384))
        .pod(pod().gpu(1).mem_mib(1000).name("victim"))
        .start()
        .await;
    let p = pod().gpu(1).mem_mib(1000).name("victim");
    let res = app.post("/filter", json!({"Pod": p.view(), "NodeNames": ["locked"]}).to_string()).await.filter_result();
    assert_eq!(res["NodeNames"], json!(["locked"]), "Filter does not read the lock: {res}");
    let body = json!({"PodName": "victim", "PodNamespace": "default", "PodUID": "uid-victim", "Node": "locked"});
    let e = app.post("/bind", body.to_string()).await.bind_error();
    let want = r#"node locked: lock annotation is malformed: node lock value "garbage, not a lock": expected <time>,<namespace>,<name>"#;
    assert_eq!(e, want);
    let ev: Vec<_> = app.backend().events().into_iter().filter(|e| e.reason == reasons::BINDING_FAILED).collect();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].message, want);
    // The failed bind released the reservation; the pod's next Filter can go elsewhere.
    assert!(app.holders().await.is_empty());
    let res = app.post("/filter", json!({"Pod": p.view(), "NodeNames": ["a"]}).to_string()).await.filter_result();
    assert_eq!(res["NodeNames"], json!(["a"]), "{res}");
    let body = json!({"PodName": "victim", "PodNamespace": "default", "PodUID": "uid-victim", "Node": "a"});
    assert_eq!(app.post("/bind", body.to_string()).await.bind_error(), "");
    app.still_schedules(&["a"]).await;
}

// ---------------------------------------------------------------------------------------------
// /webhook

#[actix_web::test]
async fn admission_reviews_of_the_wrong_shape_are_400() {
    let app = TestApp::standard().start().await;
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "apiVersion is a number",
            json!({"apiVersion": 5, "kind": "AdmissionReview", "request": {"uid": UID}}),
            "apiVersion must be a string",
        ),
        (
            "unknown apiVersion",
            json!({"apiVersion": "v1", "kind": "AdmissionReview", "request": {"uid": UID}}),
            "apiVersion \"v1\" is not",
        ),
        (
            "wrong kind",
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "Pod", "request": {"uid": UID}}),
            "kind \"Pod\" is not AdmissionReview",
        ),
        (
            "no request",
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "AdmissionReview has no request",
        ),
        (
            "request is a string",
            json!({"apiVersion": "admission.k8s.io/v1", "request": "x"}),
            "request must be an object",
        ),
        ("no uid", json!({"apiVersion": "admission.k8s.io/v1", "request": {}}), "request.uid is missing"),
        (
            "uid is a number",
            json!({"apiVersion": "admission.k8s.io/v1", "request": {"uid": 7}}),
            "request.uid must be a string",
        ),
        ("not an object", json!(["AdmissionReview"]), "AdmissionReview must be a JSON object"),
    ];
    for (what, body, says) in cases {
        let msg = app.post("/webhook", body.to_string()).await.bad_request();
        assert!(msg.contains(says), "{what}: {msg}");
    }
    // A bare 1e400 inside the pod fails the JSON decode of the whole review.
    let body = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","request":{{"uid":"{UID}","object":{{"spec":{{"containers":[{{"name":"c","resources":{{"limits":{{"nvidia.com/gpu":1e400}}}}}}]}}}}}}}}"#
    );
    assert!(app.post("/webhook", body).await.bad_request().contains("number out of range"));
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn admission_reviews_without_a_usable_pod_are_refused_in_the_review() {
    let app = TestApp::standard().start().await;
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        ("request.object null", Value::Null, 400, "decoding pod: request.object is missing"),
        ("request.object a string", json!("pod"), 400, "decoding pod: invalid type: string"),
        (
            "a ConfigMap",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}}),
            403,
            "pod has no containers",
        ),
        ("an empty pod", json!({}), 403, "pod has no containers"),
        ("containers is a number", json!({"spec": {"containers": 3}}), 400, "decoding pod: invalid type: integer"),
    ];
    for (what, object, code, says) in cases {
        let r = app.post("/webhook", review(object).to_string()).await.review_response();
        assert_eq!(r["allowed"], false, "{what}: {r}");
        assert_eq!(r["status"]["code"], code, "{what}: {r}");
        assert!(r["status"]["message"].as_str().unwrap().starts_with(says), "{what}: {r}");
        assert!(r.get("patch").is_none(), "{what}: {r}");
    }
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn admission_of_unusable_quantities_is_denied_and_unknown_resources_are_left_alone() {
    let app = TestApp::standard().start().await;
    for (what, limits, vendor, says) in unusable_limits() {
        let r = app.post("/webhook", review(pod_json(limits)).to_string()).await.review_response();
        let message = r["status"]["message"].as_str().unwrap();
        // NVIDIA's mutation checks the percentage and the cores itself (HAMi PR 2784 for the
        // cores), before any request is derived, and answers with HAMi's message and code.
        let hami = match what {
            "fractional percentage" => Some(("nvidia.com/gpumem-percentage", "50.5")),
            "negative cores" => Some(("nvidia.com/gpucores", "-5")),
            "fractional cores" => Some(("nvidia.com/gpucores", "1.5")),
            _ => None,
        };
        if let Some((name, v)) = hami {
            assert_eq!((&r["allowed"], &r["status"]["code"]), (&json!(false), &json!(500)), "{what}: {r}");
            let text = format!("invalid {name} value {v} in container main: must be an integer between 0 and 100");
            assert_eq!(message, text, "{what}");
            continue;
        }
        assert_eq!((&r["allowed"], &r["status"]["code"]), (&json!(false), &json!(403)), "{what}: {r}");
        let prefix = format!("container main: unusable {vendor} device request: ");
        assert!(message.starts_with(&prefix), "{what}: {r}");
        assert!(message.contains(says), "{what}: {r}");
    }
    let r =
        app.post("/webhook", review(pod_json(json!({"example.com/fpga": "1"}))).to_string()).await.review_response();
    assert_eq!(r["allowed"], true, "an unknown vendor's resource: {r}");
    assert!(r.get("patch").is_none(), "an unknown vendor's resource: {r}");
    // HAMi's webhook recognises the count by its presence and adds the exclusive cores and the
    // scheduler name, whatever the count says.
    let exclusive = json!([
        {"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpucores", "value": "100"},
        {"op": "add", "path": "/spec/schedulerName", "value": "hami-scheduler"}
    ]);
    let r = app.post("/webhook", review(pod_json(json!({"nvidia.com/gpu": "0"}))).to_string()).await.review_response();
    assert_eq!(r["allowed"], true, "zero count: {r}");
    assert_eq!(patch_ops(&r), exclusive, "zero count");
    app.still_schedules(&["a"]).await;
}

/// The decoded JSON patch of an allowed review response.
fn patch_ops(r: &Value) -> Value {
    use base64::Engine as _;
    let b = base64::engine::general_purpose::STANDARD.decode(r["patch"].as_str().unwrap()).unwrap();
    serde_json::from_slice(&b).unwrap()
}

#[actix_web::test]
async fn admission_of_a_pod_with_100_containers_patches_every_one() {
    let app = TestApp::standard().start().await;
    let containers: Vec<Value> = (0..100)
        .map(|i| json!({"name": format!("c{i}"), "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}))
        .collect();
    let p = json!({"metadata": {"name": "wide"}, "spec": {"containers": containers}});
    let r = app.post("/webhook", review(p).to_string()).await.review_response();
    let ops = patch_ops(&r);
    let ops = ops.as_array().unwrap();
    assert_eq!(ops.len(), 101, "gpucores on each container and the scheduler name");
    assert_eq!(ops[99]["path"], "/spec/containers/99/resources/limits/nvidia.com~1gpucores");
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn a_count_past_every_node_is_a_no_fit() {
    // The largest count HAMi's int32 holds is a valid request that no node can serve.
    let app = TestApp::standard().start().await;
    let res =
        app.post("/filter", filter_body(json!({"nvidia.com/gpu": "2147483647"}), &["a", "b"])).await.filter_result();
    assert_eq!(
        res["FailedNodes"],
        json!({
            "a": "NodeInsufficientDevice",
            "b": "NodeInsufficientDevice",
        }),
        "{res}"
    );
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn simulation_mode_nodes_that_are_not_nodes() {
    // `Nodes` instead of `NodeNames` is HAMi's simulation mode: the body's nodes are read directly.
    let app = TestApp::standard().start().await;
    let p = gpu_pod_json();
    let e = app.post("/filter", json!({"Pod": p, "Nodes": {"items": [5]}}).to_string()).await.filter_error();
    assert!(e.starts_with("invalid node in Nodes: invalid type: integer"), "{e}");
    let mut bad = node("sim-bad").view();
    bad.metadata.annotations.insert(keys::NVIDIA_REGISTER.into(), "GPU-x,ten,1,1,NVIDIA,0,true:".into());
    let good = node("sim-good").gpus(1, 16384).view();
    let res = app.post("/filter", json!({"Pod": p, "Nodes": {"items": [bad, good]}}).to_string()).await.filter_result();
    assert_eq!(res["Nodes"]["items"][0]["metadata"]["name"], "sim-good", "{res}");
    assert_eq!(
        res["FailedNodes"],
        json!({"sim-bad": "node unregistered (annotation hami.io/node-nvidia-register is malformed: device 0: field \"count\": \"ten\" is not a non-negative int32)"}),
        "{res}"
    );
    assert!(app.holders().await.is_empty(), "simulation reserves nothing");
    app.still_schedules(&["a"]).await;
}

// ---------------------------------------------------------------------------------------------
// The device config file

#[test]
fn a_device_config_with_an_absurd_memory_factor_refuses_the_request() {
    use hami_rs::config::device::DeviceConfig;
    use hami_rs::devices::{Enable, Vendors};
    let yaml = "vnpus:\n  configs:\n  - {chipName: 910B3, commonWord: Ascend910B3, resourceName: huawei.com/Ascend910B3, resourceMemoryName: huawei.com/Ascend910B3-memory, memoryAllocatable: 65536, memoryCapacity: 65536, memoryFactor: 1125899906842624, aiCore: 20, templates: [{name: vir05_1c_16g, memory: 16384, aiCore: 5}]}\n";
    let cfg = DeviceConfig::from_yaml(yaml).expect("the file parses");
    let v = Vendors::from_config(&cfg, Enable { ascend: true, iluvatar: false });
    let p = pod().limit("huawei.com/Ascend910B3", "1").limit("huawei.com/Ascend910B3-memory", "16384").view();
    let e = v.pod_request(&p, &hami_rs::testing::defaults()).expect_err("16384 MiB × 2^50 is out of range");
    assert!(e.to_string().contains("16384 × memoryFactor 1125899906842624 is out of range"), "{e}");
}

#[test]
fn a_device_config_with_more_chips_than_vendor_ids_is_refused() {
    use hami_rs::config::device::DeviceConfig;
    use hami_rs::devices::{Enable, Vendors};
    let config = |n: usize| {
        let chips: String = (0..n)
            .map(|i| format!("  - {{chipName: c{i}, commonWord: Chip{i}, resourceName: example.com/chip{i}}}\n"))
            .collect();
        DeviceConfig::from_yaml(&format!("vnpus:\n  configs:\n{chips}"))
    };
    // 15 fixed vendors + 239 chips = 254 vendor ids: the most there can be.
    let most = config(239).expect("239 chips fit");
    assert_eq!(Vendors::from_config(&most, Enable { ascend: true, iluvatar: true }).len(), 254);
    let e = config(240).expect_err("a VendorId is a byte: 240 chips do not fit");
    assert_eq!(e.to_string(), "device config: 240 Ascend and Iluvatar chips are configured; at most 239 are supported");
    assert!(config(300).is_err());
}

#[actix_web::test]
async fn a_registration_of_more_devices_than_a_node_can_address_is_malformed() {
    // Device positions are u16: 65 536 unhealthy devices and one healthy one after them would
    // wrap to a list of one unhealthy device. The registration is refused instead.
    let mut devs = vec!["{}"; 65_536].join(",");
    devs.push_str(r#",{"id":"GPU-last","count":10,"devmem":16384,"devcore":100,"type":"NVIDIA-T4","health":true}"#);
    let mut huge = node("huge").view();
    huge.metadata.annotations.insert(keys::NVIDIA_REGISTER.into(), format!("[{devs}]"));
    let app = TestApp::standard().node_view(huge.clone()).start().await;
    let p = pod().gpu(1).mem_mib(1000).name("huge-probe");
    let res = app.post("/filter", json!({"Pod": p.view(), "NodeNames": ["huge"]}).to_string()).await.filter_result();
    assert_eq!(
        res["FailedNodes"]["huge"],
        "node unregistered (NVIDIA annotation hami.io/node-nvidia-register is malformed: 65537 devices listed, at most 65535 are supported)",
        "{res}"
    );
    // Across vendors: 65 535 Enflame GCUs and 65 535 Kunlun XPUs from capacity.
    let both = node("both").capacity("enflame.com/gcu", "65535").capacity("kunlunxin.com/xpu", "65535").gpus(1, 16384);
    let app = TestApp::standard().node(both).start().await;
    let res = app.post("/filter", json!({"Pod": p.view(), "NodeNames": ["both"]}).to_string()).await.filter_result();
    let why = res["FailedNodes"]["both"].as_str().unwrap_or_else(|| panic!("{res}"));
    assert!(why.ends_with("devices listed, at most 65535 are supported)"), "{why}");
    // In simulation mode the same registration is reported for that node only.
    let res = app
        .post(
            "/filter",
            json!({"Pod": p.view(), "Nodes": {"items": [huge, node("fine").gpus(1, 16384).view()]}}).to_string(),
        )
        .await
        .filter_result();
    assert_eq!(res["Nodes"]["items"][0]["metadata"]["name"], "fine", "{res}");
    assert!(res["FailedNodes"]["huge"].as_str().unwrap().contains("65537 devices listed"), "{res}");
    app.still_schedules(&["a", "b"]).await;
}

#[test]
fn quantities_past_the_exact_range_have_the_right_ceiling() {
    use hami_rs::model::quantity::Quantity;
    // A zero with a huge exponent is zero; a positive value too small for the exact form is
    // below one (these read as i64::MAX before).
    for (text, ceil, exact) in [
        ("0e50", 0, Some(0)),
        ("0.e50", 0, Some(0)),
        ("-0e99", 0, Some(0)),
        ("1e-40", 1, None),
        ("-1e-40", 0, None),
        ("0.0000000000000000000000000000000000000001", 1, None),
        ("1e-100", 1, None),
        ("1e100", i64::MAX, None),
        ("-1e100", i64::MIN, None),
    ] {
        let q = Quantity::parse(text).unwrap();
        assert_eq!((q.value_ceil(), q.as_i64_exact()), (ceil, exact), "{text}");
    }
    drive::node_lock(b"0.e50");
}

#[actix_web::test]
async fn a_zero_capacity_with_a_huge_exponent_synthesises_no_devices() {
    let app = TestApp::standard().start().await;
    let zero = node("zero").capacity("enflame.com/gcu", "0e50").view();
    let tiny = node("tiny").capacity("enflame.com/gcu", "1e-40").view();
    let gcu = json!({"metadata": {"name": "g", "namespace": "default"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"enflame.com/gcu": "1"}}}]}});
    let res =
        app.post("/filter", json!({"Pod": gcu, "Nodes": {"items": [zero, tiny]}}).to_string()).await.filter_result();
    assert_eq!(res["FailedNodes"]["zero"], "node unregistered", "{res}");
    assert_eq!(res["Nodes"]["items"][0]["metadata"]["name"], "tiny", "1e-40 rounds up to one device: {res}");
    app.still_schedules(&["a"]).await;
}

#[actix_web::test]
async fn a_capacity_past_i64_is_too_many_devices_not_an_overflow() {
    // Cambricon and Mthreads synthesise ceil(C / cores-per-device) devices from the core
    // capacity; C saturates at i64::MAX and must not overflow the rounding.
    let app = TestApp::standard().start().await;
    let mlu = node("mlu").capacity("cambricon.com/mlu.smlu.vcore", "4444444444444444444444440").view();
    let mt = node("mt").capacity("mthreads.com/sgpu-core", "4444444444444444444444440").view();
    let p = gpu_pod_json();
    let res = app.post("/filter", json!({"Pod": p, "Nodes": {"items": [mlu, mt]}}).to_string()).await.filter_result();
    for n in ["mlu", "mt"] {
        let why = res["FailedNodes"][n].as_str().unwrap_or_else(|| panic!("{res}"));
        assert!(why.contains("capacity 9223372036854775807 means more than 4096 devices"), "{n}: {why}");
    }
    drive::node_register(b"44444444444444444444440");
    app.still_schedules(&["a"]).await;
}
