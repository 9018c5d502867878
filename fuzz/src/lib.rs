//! What each fuzz target does with one input. Shared by the libFuzzer targets in
//! `fuzz/fuzz_targets/` and by the stable-Rust property tests in `tests/bad_input.rs`, so both
//! exercise exactly the same code. Every function takes arbitrary bytes, must never panic, and
//! asserts the invariants that hold for any input (errors are of the decoder's own kind, an
//! accepted value re-encodes to itself, an admission patch applies to the pod it came with).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use base64::Engine as _;
use serde_json::{Map, Value};

use hami_rs::actor::EngineConfig;
use hami_rs::admission;
use hami_rs::backend::memory::ClusterObjects;
use hami_rs::config::device::DeviceConfig;
use hami_rs::devices::{Enable, NoQuota, Vendors};
use hami_rs::http::webhook;
use hami_rs::http::wire::{ExtenderArgs, ExtenderBindingArgs, node_names};
use hami_rs::model::annotations as keys;
use hami_rs::model::codec::{self, Error as CodecError, Handshake, Selection, TypeList, UuidList};
use hami_rs::model::pod::{NodeView, QuantityText};
use hami_rs::model::quantity::Quantity;
use hami_rs::model::request::PolicyDefaults;
use hami_rs::model::{NodeName, PodRequest, PodView};
use hami_rs::sched::{NodeSnapshot, Scratch, fit, score};

/// The worked examples every target can lean on (the same files the simulator documents).
const MIXED_CLUSTER: &str = include_str!("../../examples/mixed-cluster.json");
const CLUSTER: &str = include_str!("../../examples/cluster.json");
const MIXED_PODS: &str = include_str!("../../examples/mixed-pods.yaml");
const PODS: &str = include_str!("../../examples/pods.yaml");

/// Everything that is built once per process: the chart's vendors (Ascend and Iluvatar on), the
/// policy defaults, the example nodes merged into one node that every vendor finds devices on,
/// and the example pods' requests.
pub struct Fixture {
    pub vendors: Vendors,
    pub defaults: PolicyDefaults,
    /// One node carrying every example node's annotations, labels and capacity.
    pub rich: NodeView,
    /// The example nodes as snapshots (what live-mode Filter evaluates against).
    pub snapshots: Vec<NodeSnapshot>,
    /// The example pods' requests, after admission.
    pub requests: Vec<PodRequest>,
    /// Every node annotation key some vendor reads.
    pub node_keys: Vec<String>,
}

pub fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(build_fixture)
}

fn build_fixture() -> Fixture {
    let vendors = hami_rs::testing::vendors();
    let defaults = EngineConfig::default().defaults;
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    for text in [MIXED_CLUSTER, CLUSTER, MIXED_PODS, PODS] {
        if let Ok(c) = ClusterObjects::parse(text) {
            nodes.extend(c.nodes);
            pods.extend(c.pods);
        }
    }
    nodes.push(hami_rs::testing::node("fixture").gpus(2, 16384).view());
    pods.push(hami_rs::testing::pod().gpu(1).mem_mib(3000).cores(30).name("fixture").view());
    let mut rich = NodeView::default();
    rich.metadata.name = "rich".into();
    for n in &nodes {
        rich.metadata.annotations.extend(n.metadata.annotations.clone());
        rich.metadata.labels.extend(n.metadata.labels.clone());
        rich.status.capacity.extend(n.status.capacity.clone());
        rich.status.allocatable.extend(n.status.allocatable.clone());
    }
    let snapshots = nodes.iter().map(|n| snapshot(&vendors, n)).collect();
    let cfg = admission::Config::default();
    let requests = pods
        .iter()
        .filter_map(|p| admission::admit_pod(&vendors, &cfg, &defaults, p).ok())
        .filter_map(|p| vendors.pod_request(&p, &defaults).ok())
        .collect();
    let dc = DeviceConfig::chart();
    let mut node_keys: Vec<String> = [
        keys::NVIDIA_REGISTER,
        keys::NVIDIA_SCORE,
        keys::NVIDIA_CORDON,
        keys::NVIDIA_HANDSHAKE,
        keys::NODE_LOCK,
        keys::CAMBRICON_LOCK,
        keys::amd::REGISTER,
        keys::biren::REGISTER,
        keys::hygon::REGISTER,
        keys::kunlun_vxpu::REGISTER,
        keys::vastai::REGISTER,
        keys::enflame_drs::DRS_CAPACITY,
        keys::metax_sgpu::NODE_DEVICES,
        keys::metax::TOPOLOGY_LOSSES,
        keys::metax::TOPOLOGY_SCORES,
        keys::ascend::NODE_HAMI_VNPU_CORE,
    ]
    .iter()
    .map(|k| (*k).to_owned())
    .collect();
    node_keys.extend(dc.vnpus.configs.iter().map(|c| keys::ascend::register(&c.common_word)));
    node_keys.extend(dc.iluvatars.iter().map(|c| keys::iluvatar::register(&c.common_word)));
    node_keys.sort();
    node_keys.dedup();
    Fixture { vendors, defaults, rich, snapshots, requests, node_keys }
}

/// A node as Filter sees it: every vendor's devices, unusable when some registration is malformed.
fn snapshot(vendors: &Vendors, view: &NodeView) -> NodeSnapshot {
    let nd = vendors.discover(view);
    let mut snap = NodeSnapshot::new(NodeName::new(view.name()), nd.devices, nd.extras);
    if let Some((_, key, err)) = nd.malformed.first() {
        let msg = err.to_string();
        assert!(!msg.is_empty(), "a malformed {key} needs a reason");
        snap.unusable = Some(format!("annotation {key} is malformed: {msg}").into());
    }
    snap
}

/// Fits every request on the node, rendering each rejection as FailedNodes would.
fn fit_all(vendors: &Vendors, snap: &NodeSnapshot, requests: &[PodRequest]) {
    let mut s = Scratch::default();
    let mut fits = Vec::new();
    for req in requests {
        match fit::fit_pod(snap, req, vendors, &NoQuota, &mut s) {
            Ok(sc) => fits.push((snap.name.clone(), sc, ())),
            Err(r) => assert!(!r.render(&snap.devices, snap.unusable.as_deref()).is_empty()),
        }
    }
    if let Some(req) = requests.first() {
        score::rank_nodes(&mut fits, req.node_policy);
    }
}

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

// ---------------------------------------------------------------------------------------------

/// `node_register`: both register forms, and every vendor's discovery with the input as the value
/// of each node annotation a vendor reads (alone, and over a node that has every vendor), as a
/// capacity value, and as the instance-type label; then the example pods are fitted on it.
pub fn node_register(data: &[u8]) {
    let Some(s) = text(data) else { return };
    let f = fixture();
    match codec::decode_node_devices(s) {
        Ok(devs) => {
            let json = codec::encode_node_devices_json(&devs);
            assert_eq!(codec::decode_node_devices_json(&json).as_ref(), Ok(&devs), "JSON round trip of {json}");
        }
        Err(e) => assert!(
            matches!(
                e,
                CodecError::Json(_)
                    | CodecError::NoDevices
                    | CodecError::Field { .. }
                    | CodecError::NoSeparator
                    | CodecError::FieldCount { .. }
            ),
            "{e:?}"
        ),
    }
    if let Ok(devs) = codec::decode_node_devices_colon(s) {
        let colon = codec::encode_node_devices_colon(&devs);
        let again = codec::decode_node_devices_colon(&colon);
        assert_eq!(again.as_ref(), Ok(&devs), "colon round trip of {colon}");
    }
    for key in &f.node_keys {
        let mut bare = NodeView::default();
        bare.metadata.name = "fuzz".into();
        bare.metadata.annotations.insert(key.clone(), s.to_owned());
        fit_all(&f.vendors, &snapshot(&f.vendors, &bare), &f.requests);
    }
    // Over the node with every vendor, one key per input (re-reading every vendor's devices for
    // every key would cost most of the time); which one follows from the input's bytes.
    let pick = data.iter().fold(data.len(), |h, &b| h.wrapping_mul(31) ^ usize::from(b)) % f.node_keys.len();
    let mut rich = f.rich.clone();
    rich.metadata.annotations.insert(f.node_keys[pick].clone(), s.to_owned());
    fit_all(&f.vendors, &snapshot(&f.vendors, &rich), &f.requests);
    if s.len() <= 256 {
        let mut cap = f.rich.clone();
        for name in f.vendors.resource_names() {
            cap.status.capacity.insert(name.clone(), QuantityText(s.to_owned()));
            cap.status.allocatable.insert(name, QuantityText(s.to_owned()));
        }
        cap.metadata.labels.insert(keys::awsneuron::INSTANCE_TYPE_LABEL.into(), s.to_owned());
        fit_all(&f.vendors, &snapshot(&f.vendors, &cap), &f.requests);
    }
}

/// `pod_devices`: the pod device encoding, and every vendor's read-back of a pod whose every
/// allocation key holds the input.
pub fn pod_devices(data: &[u8]) {
    let Some(s) = text(data) else { return };
    match codec::decode_pod_devices(s) {
        Ok(v) => {
            let enc = codec::encode_pod_devices(&v);
            let again = codec::decode_pod_devices(&enc).expect("an encoded value decodes");
            assert_eq!(codec::trim_trailing_empty(again), codec::trim_trailing_empty(v), "round trip of {enc}");
        }
        Err(e) => assert!(matches!(e, CodecError::PodDevice { .. }), "{e:?}"),
    }
    let f = fixture();
    let mut pod = hami_rs::testing::pod().gpu(1).name("fuzz").view();
    for (_, v) in f.vendors.iter() {
        for k in v.pod_keys().into_iter().chain(v.allocated_key().map(str::to_owned)) {
            pod.metadata.annotations.insert(k, s.to_owned());
        }
    }
    let _ = f.vendors.decode_allocation(&pod);
    for (_, v) in f.vendors.iter() {
        let _ = v.decode_allocation(&pod);
        let _ = v.pod_params(&pod);
        let _ = v.task_tag(&pod.metadata.annotations);
    }
}

/// `mig_allocations`: `hami.io/vgpu-mig-allocations`; an accepted value re-encodes to itself.
pub fn mig_allocations(data: &[u8]) {
    let Some(s) = text(data) else { return };
    match codec::decode_mig_allocations(s) {
        Ok(v) => {
            let enc = codec::encode_mig_allocations(&v);
            assert_eq!(codec::decode_mig_allocations(&enc).as_ref(), Ok(&v), "round trip of {enc}");
        }
        Err(e) => assert!(matches!(e, CodecError::Json(_) | CodecError::MigAllocation { .. }), "{e:?}"),
    }
}

/// `node_lock`: the lock value, and the other small annotation grammars: handshake, scoring
/// weights, pair scores, Go booleans, selection lists and resource quantities.
pub fn node_lock(data: &[u8]) {
    let Some(s) = text(data) else { return };
    match codec::decode_node_lock(s) {
        Ok(l) => {
            let now = chrono::Utc::now();
            let _ = l.is_expired(now, std::time::Duration::from_secs(300));
            let _ = l.is_expired(now, std::time::Duration::MAX);
            let _ = l.is_held_by("default", "p");
        }
        Err(e) => assert!(matches!(e, CodecError::NodeLock { .. }), "{e:?}"),
    }
    match codec::decode_handshake(s) {
        Handshake::Requesting(_) => assert!(s.contains("Requesting")),
        Handshake::Other => assert!(!s.contains("Requesting")),
    }
    match codec::parse_weights(s) {
        Ok(w) => {
            assert!(w.slot >= 0.0 && w.core >= 0.0 && w.memory >= 0.0, "{w:?}");
            assert!(w.slot + w.core + w.memory > 0.0, "{w:?}");
        }
        Err(e) => assert!(matches!(e, CodecError::Weights { .. }), "{e:?}"),
    }
    match codec::decode_pair_scores(s) {
        Ok(p) => {
            let enc = codec::encode_pair_scores(&p);
            let _ = codec::decode_pair_scores(&enc).expect("encoded pair scores decode");
            if let Some((a, others)) = p.0.first()
                && let Some((b, _)) = others.first()
            {
                let _ = p.score(a, b);
            }
        }
        Err(e) => assert!(matches!(e, CodecError::PairScores(_)), "{e:?}"),
    }
    if let Err(e) = codec::parse_go_bool(s) {
        assert!(matches!(e, CodecError::Bool(_)), "{e:?}");
    }
    let list = codec::parse_list(s);
    assert!(list.iter().all(|e| !e.is_empty() && e.trim() == e));
    let types = Selection::<TypeList>::types(Some(s), Some(s));
    let _ = types.allows(s);
    let uuids = Selection::<UuidList>::uuids(Some(s), None);
    let _ = uuids.allows(s);
    if let Ok(q) = Quantity::parse(s) {
        let ceil = q.value_ceil();
        if let Some(n) = q.as_i64_exact() {
            assert_eq!(ceil, n, "an exact integer is its own ceiling: {s:?}");
        }
        assert!(ceil >= 0 || q.is_negative(), "only a negative quantity has a negative ceiling: {s:?}");
        assert!(!q.is_zero() || ceil == 0, "zero is its own ceiling: {s:?}");
        // Where the text is also a plain decimal number, the ceiling agrees with f64's (within
        // f64's precision).
        if let Ok(x) = s.trim().parse::<f64>()
            && x.is_finite()
            && x.abs() < 1e15
            && !s.contains(['i', 'n', 'N', 'I'])
        {
            let want = x.ceil();
            assert!((ceil as f64 - want).abs() <= 1.0, "ceiling of {s:?}: {ceil}, f64 says {want}");
        }
        let _ = q.to_string();
    }
}

/// `extender_args`: `POST /filter` and `POST /bind` bodies. A decoded pod's request is derived
/// and fitted on the example nodes (live mode) and on every node the body carries (simulation
/// mode, where the body's nodes are discovered as Filter does).
pub fn extender_args(data: &[u8]) {
    let f = fixture();
    if let Ok(args) = serde_json::from_slice::<ExtenderArgs<'_>>(data) {
        if let Some(pod) = &args.pod {
            match f.vendors.pod_request(pod, &f.defaults) {
                Ok(req) => {
                    let reqs = std::slice::from_ref(&req);
                    for snap in &f.snapshots {
                        fit_all(&f.vendors, snap, reqs);
                    }
                    if let Some(nodes) = &args.nodes {
                        for raw in &nodes.items {
                            if let Ok(view) = serde_json::from_str::<NodeView>(raw.get()) {
                                fit_all(&f.vendors, &snapshot(&f.vendors, &view), reqs);
                            }
                        }
                    }
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
        if let Some(raw) = args.node_names {
            let _ = node_names(raw).map(|n| n.len());
        }
    }
    let _ = serde_json::from_slice::<ExtenderBindingArgs>(data);
}

/// The value of `key` in `obj`: the exact key, else the first case-insensitive match (as the
/// webhook reads the envelope).
fn field<'v>(obj: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    obj.get(key).or_else(|| obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
}

/// `admission_review`: `POST /webhook` bodies through the webhook's decision, under the flags'
/// defaults and under the chart's. An answer is an AdmissionReview with the request's uid; its
/// patch, if any, applies to the pod it came with.
pub fn admission_review(data: &[u8]) {
    let f = fixture();
    let hami = admission::Config {
        scheduler_name: "hami-scheduler".into(),
        force_overwrite_default_scheduler: true,
        quota: None,
    };
    for cfg in [admission::Config::default(), hami] {
        let answers = match webhook::review(data, &cfg, &f.vendors, &f.defaults) {
            Err(e) => {
                assert!(!e.to_string().is_empty());
                continue;
            }
            Ok(webhook::Reviewed::Answer(bytes)) => vec![bytes],
            // An update of a scheduler-owned annotation, answered both ways the access review may go.
            Ok(webhook::Reviewed::Guard(g)) => {
                let answers = vec![g.answer(Ok(true)), g.answer(Ok(false)), g.answer(Err("unreachable".into()))];
                for (bytes, allowed) in answers.iter().zip([true, false, false]) {
                    let out: Value = serde_json::from_slice(bytes).expect("the answer is JSON");
                    assert_eq!(out["response"]["allowed"], allowed, "{out}");
                    assert!(out["response"].get("patch").is_none(), "an update is never mutated: {out}");
                }
                answers
            }
        };
        for bytes in answers {
            {
                let out: Value = serde_json::from_slice(&bytes).expect("the answer is JSON");
                let resp = out.get("response").and_then(Value::as_object).expect("the answer has a response");
                assert!(resp.get("uid").is_some_and(Value::is_string), "{out}");
                assert!(resp.get("allowed").is_some_and(Value::is_boolean), "{out}");
                let Some(patch) = resp.get("patch").and_then(Value::as_str) else { continue };
                let patch = base64::engine::general_purpose::STANDARD.decode(patch).expect("the patch is base64");
                let patch: json_patch::Patch = serde_json::from_slice(&patch).expect("the patch is a JSON patch");
                let input: Value = serde_json::from_slice(data).expect("an answered review was JSON");
                let object = input
                    .as_object()
                    .and_then(|top| field(top, "request"))
                    .and_then(Value::as_object)
                    .and_then(|req| field(req, "object"))
                    .cloned();
                if let Some(mut object) = object {
                    json_patch::patch(&mut object, &patch).expect("the patch applies to the pod it came with");
                    let _ = serde_json::from_value::<PodView>(object);
                }
            }
        }
    }
}

/// `device_config`: the device config file; a config that loads builds its vendors, which then
/// derive the example pods' requests and discover the example nodes.
pub fn device_config(data: &[u8]) {
    let Some(s) = text(data) else { return };
    let f = fixture();
    match DeviceConfig::from_yaml(s) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(cfg) => {
            for enable in [Enable::default(), Enable { ascend: true, iluvatar: true }] {
                let vendors = Vendors::from_config(&cfg, enable);
                let _ = vendors.resource_names();
                let requests: Vec<PodRequest> = pods()
                    .iter()
                    .filter_map(|p| admission::admit_pod(&vendors, &admission::Config::default(), &f.defaults, p).ok())
                    .filter_map(|p| vendors.pod_request(&p, &f.defaults).ok())
                    .collect();
                let snap = snapshot(&vendors, &f.rich);
                fit_all(&vendors, &snap, &requests);
            }
        }
    }
}

/// The example pods, with their quantities as written (before any vendor reads them).
fn pods() -> &'static [PodView] {
    static P: OnceLock<Vec<PodView>> = OnceLock::new();
    P.get_or_init(|| {
        let mut v: Vec<PodView> =
            [MIXED_PODS, PODS].iter().filter_map(|t| ClusterObjects::parse(t).ok()).flat_map(|c| c.pods).collect();
        v.push(hami_rs::testing::pod().gpu(1).mem_mib(3000).cores(30).name("fixture").view());
        v
    })
}

/// `cluster_objects`: a cluster file (`--cluster-file`: JSON, a List, or multi-document YAML).
pub fn cluster_objects(data: &[u8]) {
    let Some(s) = text(data) else { return };
    match ClusterObjects::parse(s) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(c) => {
            let f = fixture();
            for n in c.nodes.iter().take(16) {
                fit_all(&f.vendors, &snapshot(&f.vendors, n), &f.requests);
            }
            for p in c.pods.iter().take(16) {
                let _ = f.vendors.decode_allocation(p);
                if let Ok(req) = f.vendors.pod_request(p, &f.defaults) {
                    for snap in &f.snapshots {
                        fit_all(&f.vendors, snap, std::slice::from_ref(&req));
                    }
                }
            }
            let _: BTreeMap<&str, usize> = c.quotas.iter().map(|q| (q.name.as_str(), q.hard.len())).collect();
        }
    }
}

/// One target's drive function.
pub type Drive = fn(&[u8]);

/// Every target, by name, for the drivers.
pub const TARGETS: &[(&str, Drive)] = &[
    ("node_register", node_register),
    ("pod_devices", pod_devices),
    ("mig_allocations", mig_allocations),
    ("node_lock", node_lock),
    ("extender_args", extender_args),
    ("admission_review", admission_review),
    ("device_config", device_config),
    ("cluster_objects", cluster_objects),
];
