//! A bound on memory, not on time: the worst bodies a client can send (each at most 1 MiB, or
//! just under the 4 MiB limit where that is worse) must not make the process allocate more than
//! a fixed amount. A counting global allocator wraps the system one and tracks the bytes live
//! and their peak; one test runs every case in turn, so nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix_web::App;
use actix_web::http::StatusCode;
use actix_web::test::{TestRequest, call_service, init_service, read_body};
use actix_web::web::{self, Bytes};
use serde_json::json;

use hami_rs::actor::{Engine, EngineConfig};
use hami_rs::admission;
use hami_rs::backend::memory::MemoryBackend;
use hami_rs::http::{AppState, Readiness, routes};
use hami_rs::model::annotations as keys;
use hami_rs::testing::{node, pod, vendors};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = CURRENT.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; only counters are updated besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on to `System` as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with this layout.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `System` moves or resizes the block.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The most one request may make the process allocate above what was live before it.
const BOUND: usize = 256 << 20;
/// The same for a body just under the 4 MiB limit.
const BOUND_AT_LIMIT: usize = 1 << 30;
const MIB: usize = 1 << 20;
const MAX_BODY: usize = 4 << 20;

/// Runs `f` and returns the peak bytes allocated above the live bytes at its start.
async fn peak_of<F: std::future::Future<Output = ()>>(f: F) -> usize {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    f.await;
    PEAK.load(Ordering::Relaxed).saturating_sub(base)
}

/// A body of `len` bytes: `head`, then `item` repeated (comma-separated), then `tail`.
fn repeated(head: &str, item: &str, tail: &str, len: usize) -> String {
    let mut s = String::with_capacity(len);
    s.push_str(head);
    let mut first = true;
    while s.len() + item.len() + 1 + tail.len() <= len {
        if !first {
            s.push(',');
        }
        first = false;
        s.push_str(item);
    }
    s.push_str(tail);
    s
}

fn garbage(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// The worst bodies: (what, route, body).
fn cases() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let gpu_pod = serde_json::to_string(&pod().gpu(1).mem_mib(1000).name("w").view()).unwrap();
    // One register annotation of ~1 MiB: 300 000 devices `{}` in a node the body carries.
    let register = format!("[{}]", vec!["{}"; 300_000].join(","));
    let mut big_node = node("sim").view();
    big_node.metadata.annotations.insert(keys::NVIDIA_REGISTER.into(), register.clone());
    let sim_register = json!({"Pod": pod().gpu(1).name("w").view(), "Nodes": {"items": [big_node]}}).to_string();
    // A node whose capacity synthesises the most devices a vendor allows (65 535 GCUs).
    let gcu = node("gcu").capacity("enflame.com/gcu", "1e100").view();
    let gcu_pod = json!({"metadata": {"name": "g"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"enflame.com/gcu": "1"}}}]}});
    let sim_capacity = json!({"Pod": gcu_pod, "Nodes": {"items": [gcu]}}).to_string();

    let containers = |n: usize| -> String {
        let c = r#"{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"1"}}}"#;
        repeated("[", c, "]", n)
    };
    let wide_pod = format!(
        r#"{{"metadata":{{"name":"wide","namespace":"default","uid":"u-wide"}},"spec":{{"containers":{}}}}}"#,
        containers(MIB - 200)
    );
    let review_head = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","namespace":"default","object":"#;
    vec![
        ("1 MiB of garbage", "/filter", garbage(MIB)),
        ("1 MiB of garbage", "/bind", garbage(MIB)),
        ("1 MiB of garbage", "/webhook", garbage(MIB)),
        ("100 000 '['", "/filter", "[".repeat(100_000).into_bytes()),
        ("100 000 '[' under an ignored key", "/filter", format!(r#"{{"x":{}"#, "[".repeat(MIB)).into_bytes()),
        ("100 000 '['", "/webhook", "[".repeat(100_000).into_bytes()),
        ("a body just over the limit", "/filter", vec![b' '; MAX_BODY + 1]),
        (
            "1 MiB of 127-deep arrays",
            "/webhook",
            repeated(&format!("{review_head}["), &format!("{}{}", "[".repeat(120), "]".repeat(120)), "]}}", MIB)
                .into_bytes(),
        ),
        (
            "1 MiB of empty objects",
            "/webhook",
            repeated(
                &format!("{review_head}{{\"metadata\":{{\"annotations\":{{\"a\":\"b\"}}}},\"x\":["),
                "{}",
                "]}}}",
                MIB,
            )
            .into_bytes(),
        ),
        (
            "~1 MiB of unknown candidate names",
            "/filter",
            repeated(&format!(r#"{{"Pod":{gpu_pod},"NodeNames":["#), r#""n""#, "]}", MIB).into_bytes(),
        ),
        (
            "a pod with ~12 000 GPU containers",
            "/filter",
            format!(r#"{{"Pod":{wide_pod},"NodeNames":["a","b"]}}"#).into_bytes(),
        ),
        (
            "a review of a pod with ~12 000 GPU containers",
            "/webhook",
            format!("{review_head}{wide_pod}}}}}").into_bytes(),
        ),
        ("a 300 000-device registration (simulation)", "/filter", sim_register.into_bytes()),
        ("65 535 synthesised devices (simulation)", "/filter", sim_capacity.into_bytes()),
        ("1 MiB of one string", "/bind", format!(r#"{{"PodName":"{}","Node":"a"}}"#, "p".repeat(MIB)).into_bytes()),
    ]
}

/// Bodies just under the 4 MiB limit, where the limit rather than 1 MiB is what bounds them.
fn cases_at_the_limit() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let review_head = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","namespace":"default","object":"#;
    let nested = format!("{}{}", "[".repeat(120), "]".repeat(120));
    // As many healthy devices as fit in the limit (each ~80 bytes once escaped in the body).
    let dev = r#"{"count":1,"devmem":1,"devcore":1,"type":"NVIDIA","health":true}"#;
    let mut many = node("many").view();
    many.metadata.annotations.insert(keys::NVIDIA_REGISTER.into(), format!("[{}]", vec![dev; 50_000].join(",")));
    let sim_many = json!({"Pod": pod().gpu(1).mem_mib(1).name("w").view(), "Nodes": {"items": [many]}}).to_string();
    vec![
        ("a 50 000-device registration (simulation)", "/filter", sim_many.into_bytes()),
        (
            "4 MiB of 120-deep arrays",
            "/webhook",
            repeated(&format!("{review_head}["), &nested, "]}}", MAX_BODY).into_bytes(),
        ),
        ("4 MiB of garbage", "/filter", garbage(MAX_BODY)),
    ]
}

/// kube-scheduler beside hami-rs, on the pod's loopback: the extender verbs answer it alone.
const KUBE_SCHEDULER: &str = "127.0.0.1:40000";

#[actix_web::test]
async fn the_worst_bodies_stay_under_the_memory_bound() {
    let backend = MemoryBackend::new(Duration::from_secs(300));
    let engine = Engine::start(EngineConfig::default(), Arc::new(vendors()), backend.clone(), None);
    for n in [node("a").gpus(1, 16384), node("b").gpus(8, 16384)] {
        let v = n.view();
        backend.insert_node(v.clone());
        engine.register_node(Arc::new(v)).await;
    }
    let cfg = admission::Config {
        scheduler_name: "hami-scheduler".into(),
        force_overwrite_default_scheduler: true,
        quota: None,
    };
    let state = web::Data::new(AppState::new(engine, MAX_BODY, Readiness::ready()).with_webhook(cfg));
    let app = init_service(App::new().app_data(state.clone()).configure(routes::<MemoryBackend>)).await;

    let mut report = Vec::new();
    let bounded =
        cases().into_iter().map(|c| (c, BOUND)).chain(cases_at_the_limit().into_iter().map(|c| (c, BOUND_AT_LIMIT)));
    for ((what, uri, body), bound) in bounded {
        let len = body.len();
        let body = Bytes::from(body);
        let mut status = StatusCode::OK;
        let peak = peak_of(async {
            let req = TestRequest::post()
                .uri(uri)
                .peer_addr(KUBE_SCHEDULER.parse().unwrap())
                .insert_header(("content-type", "application/json"))
                .set_payload(body);
            let res = call_service(&app, req.to_request()).await;
            status = res.status();
            let _ = read_body(res).await;
        })
        .await;
        report.push(format!(
            "{uri:<9} {what:<48} {:>8} KiB body  {status}  peak {:>7.1} MiB",
            len / 1024,
            peak as f64 / MIB as f64
        ));
        assert!(peak < bound, "{uri} {what}: {peak} bytes at peak");
    }
    // The same decoders, called directly on the worst register value.
    let register = format!("[{}]", vec!["{}"; 300_000].join(","));
    let peak = peak_of(async {
        let _ = hami_rs::model::codec::decode_node_devices(&register);
    })
    .await;
    report.push(format!("decode_node_devices of 300 000 devices: peak {:.1} MiB", peak as f64 / MIB as f64));
    assert!(peak < BOUND);
    println!("{}", report.join("\n"));

    // Still serving.
    let p = pod().gpu(1).mem_mib(1000).name("after");
    let req = TestRequest::post()
        .uri("/filter")
        .peer_addr(KUBE_SCHEDULER.parse().unwrap())
        .set_json(json!({"Pod": p.view(), "NodeNames": ["a"]}));
    let res = call_service(&app, req.to_request()).await;
    assert_eq!(res.status(), StatusCode::OK);
    let v: serde_json::Value = serde_json::from_slice(&read_body(res).await).unwrap();
    assert_eq!(v["NodeNames"], json!(["a"]), "{v}");
}
