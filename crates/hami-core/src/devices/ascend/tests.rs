use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::*;
use crate::config::device::DeviceConfig;
use crate::devices::{Enable, LockKind, NoQuota, Vendors};
use crate::model::annotations as common_keys;
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::model::{ContainerDevices, MemMiB, PodRequest};
use crate::sched::NodeSnapshot;
use crate::sched::accounting::{Layout, apply, collapse};
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

const C910: &str = "huawei.com/Ascend910C";

/// The chart's config of one chip.
fn chip(cw: &str) -> VnpuChipConfig {
    VnpuConfig::chart_defaults().configs.into_iter().find(|c| c.common_word == cw).expect("a chart chip")
}

fn b3() -> Ascend {
    Ascend::new(&chip(B3), false)
}

fn id(v: &Vendors, cw: &str) -> VendorId {
    v.by_name(cw).expect("chart chips are registered with --enable-ascend")
}

fn container(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> ContainerView {
    let mut c = ContainerView { name: "c".into(), ..Default::default() };
    for (k, v) in limits {
        c.resources.limits.insert((*k).to_owned(), QuantityText((*v).to_owned()));
    }
    for (k, v) in requests {
        c.resources.requests.insert((*k).to_owned(), QuantityText((*v).to_owned()));
    }
    c
}

fn snapshot(n: &NodeBuilder, busy: &[(&str, u32, u64, u32)]) -> NodeSnapshot {
    let mut s = n.snapshot(&vendors());
    for (dev, used, mem, cores) in busy {
        let d = s.devices.iter_mut().find(|d| d.info.id.as_str() == *dev).expect("fixture device exists");
        d.used = *used;
        d.used_mem = MemMiB(*mem);
        d.used_cores = *cores;
    }
    s
}

/// The chip's annotation on success, HAMi's reason text on failure.
fn eval_cw(snap: &NodeSnapshot, p: &PodBuilder, cw: &str) -> Result<String, String> {
    let v = vendors();
    let req = p.request_with(&v);
    match fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()) {
        Ok(fit) => Ok(codec::encode_pod_devices(fit.devices.vendor(id(&v, cw)).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

fn eval(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    eval_cw(snap, p, B3)
}

fn ok(s: &str) -> Result<String, String> {
    Ok(s.to_owned())
}
fn no(s: &str) -> Result<String, String> {
    Err(s.to_owned())
}

/// The device ids of an encoded annotation, in order.
fn uuids(r: Result<String, String>) -> Vec<String> {
    r.expect("fits")
        .split([':', ';'])
        .filter(|e| !e.is_empty())
        .map(|e| e.split(',').next().unwrap_or("").to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Registry and config (the device config's `vnpus` section)

#[test]
fn one_backend_per_chip_and_only_with_enable_ascend() {
    // HAMi registers the Ascend vendors after Biren, one per vnpus.configs entry.
    let cfg = DeviceConfig::chart();
    let on = Vendors::from_config(&cfg, Enable { ascend: true, iluvatar: false });
    let names: Vec<&str> = on.iter().map(|(_, v)| v.name()).filter(|n| n.starts_with("Ascend")).collect();
    assert_eq!(
        names,
        ["Ascend910A", "Ascend910B2", "Ascend910B3", "Ascend910B4-1", "Ascend910B4", "Ascend310P", "Ascend910C"]
    );
    let off = Vendors::from_config(&cfg, Enable::default());
    assert!(off.iter().all(|(_, v)| !v.name().starts_with("Ascend")));
}

#[test]
fn templates_are_sorted_by_memory_whatever_the_config_shape() {
    // HAMi sorts the templates at start-up; the old list shape arrives as written.
    let old = "vnpus:\n- commonWord: Ascend910B3\n  resourceName: huawei.com/Ascend910B3\n  resourceMemoryName: huawei.com/Ascend910B3-memory\n  memoryAllocatable: 65536\n  memoryCapacity: 65536\n  templates:\n  - {name: big, memory: 32768}\n  - {name: small, memory: 16384}\n";
    let cfg = DeviceConfig::from_yaml(old).unwrap();
    let a = Ascend::new(&cfg.vnpus.configs[0], cfg.vnpus.hami_vnpu_core);
    assert_eq!(a.trim_memory(100), Some((16384, "small")));
    assert_eq!(a.trim_memory(20000), Some((32768, "big")));
}

#[test]
fn resource_names_and_quota_follow_the_chip_config() {
    let a = b3();
    assert_eq!(a.resource_names(), [NPU, MEM, CORE]);
    let q = a.quota_names();
    assert_eq!((q.memory.as_deref(), q.cores.as_deref(), q.memory_factor), (Some(MEM), Some(CORE), 1));
    let f = Ascend::new(&VnpuChipConfig { memory_factor: 4, ..chip(B3) }, false).quota_names();
    assert_eq!(f.memory_factor, 4, "quota limits scale by the configured memoryFactor");
}

// ---------------------------------------------------------------------------------------------
// Request derivation: count 1..2³¹−1, memory × memoryFactor, percentage 100 when memory is 0,
// cores from `-core` (default 0)

#[test]
fn request_derivation_follows_hami_field_by_field() {
    let pod = PodView::default();
    type Want = Result<Option<(u32, u64, u32, u32)>, &'static str>;
    let factor2 = Ascend::new(&VnpuChipConfig { memory_factor: 2, ..chip(B3) }, false);
    let one = b3();
    type Quantities<'a> = &'a [(&'a str, &'a str)];
    let rows: Vec<(&str, &Ascend, Quantities<'_>, Quantities<'_>, Want)> = vec![
        // nums 1..2^31-1 (limits, else requests); no memory → percentage 100; cores default 0.
        ("count only", &one, &[(NPU, "1")], &[], Ok(Some((1, 0, 100, 0)))),
        ("count in requests", &one, &[], &[(NPU, "2")], Ok(Some((2, 0, 100, 0)))),
        ("count 0", &one, &[(NPU, "0")], &[], Ok(None)),
        // HAMi reads these counts as no request; hami-rs refuses them.
        ("negative count", &one, &[(NPU, "-1")], &[], Err(NPU)),
        ("fractional count", &one, &[(NPU, "1.5")], &[], Err(NPU)),
        ("count past int32", &one, &[(NPU, "2147483648")], &[], Err(NPU)),
        // memory × memoryFactor (when > 1), limits else requests; percentage 0 once given.
        ("memory", &one, &[(NPU, "1"), (MEM, "16384")], &[], Ok(Some((1, 16384, 0, 0)))),
        ("memory in requests", &one, &[(NPU, "1")], &[(MEM, "8192")], Ok(Some((1, 8192, 0, 0)))),
        ("memory × factor 2", &factor2, &[(NPU, "1"), (MEM, "16384")], &[], Ok(Some((1, 32768, 0, 0)))),
        ("memory 0", &one, &[(NPU, "1"), (MEM, "0")], &[], Ok(Some((1, 0, 100, 0)))),
        // HAMi drops these and places the pod with no reservation; hami-rs refuses them.
        ("negative memory", &one, &[(NPU, "1"), (MEM, "-1")], &[], Err(MEM)),
        ("memory in bytes", &one, &[(NPU, "1"), (MEM, "16Gi")], &[], Err(MEM)),
        ("memory × factor past int32", &factor2, &[(NPU, "1"), (MEM, "1073741824")], &[], Err(MEM)),
        ("fractional memory", &one, &[(NPU, "1"), (MEM, "1.5")], &[], Err(MEM)),
        ("unparsable memory", &one, &[(NPU, "1"), (MEM, "lots")], &[], Err(MEM)),
        // cores from `-core` (Value(), so fractions round up).
        ("cores", &one, &[(NPU, "1"), (CORE, "30")], &[], Ok(Some((1, 0, 100, 30)))),
        ("cores in requests", &one, &[(NPU, "1")], &[(CORE, "30")], Ok(Some((1, 0, 100, 30)))),
        ("fractional cores", &one, &[(NPU, "1"), (CORE, "1.5")], &[], Ok(Some((1, 0, 100, 2)))),
        ("negative cores", &one, &[(NPU, "1"), (CORE, "-1")], &[], Err(CORE)),
        ("other chip's count", &one, &[("huawei.com/Ascend910B4", "1")], &[], Ok(None)),
    ];
    for (what, a, limits, requests, want) in rows {
        let got = a.request(VendorId(20), &container(limits, requests), &pod);
        match (want, got) {
            (Ok(w), Ok(g)) => assert_eq!(g.map(|r| (r.nums, r.memreq.get(), r.mempct, r.cores)), w, "{what}"),
            (Err(name), Err(why)) => assert!(why.to_string().contains(name), "{what}: {why}"),
            (w, g) => panic!("{what}: wanted {w:?}, got {g:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Discovery and health

#[test]
fn registration_reads_the_json_list_with_network_ids() {
    // custominfo's NetworkID is a JSON number, passed through.
    let reg = r#"[{"id":"npu-0","count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true,"custominfo":{"NetworkID":3}},
                 {"id":"npu-1","index":1,"count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true}]"#;
    let (devs, extra) = devices(b3().discover(&node("n1").annotation("hami.io/node-register-Ascend910B3", reg).view()));
    assert_eq!(devs.len(), 2);
    assert_eq!((devs[0].id.as_str(), devs[0].count, devs[0].devmem, devs[0].devcore), ("npu-0", 4, MemMiB(65536), 20));
    assert_eq!(network_id(&devs[0]), Some(Some(3)));
    assert_eq!(network_id(&devs[1]), None);
    assert_eq!(*extra.unwrap(), Extra { hami_vnpu_core: None });
}

#[test]
fn registration_also_accepts_the_colon_list() {
    // hami-rs accepts both forms on every register key (HAMi reads Ascend's as JSON only).
    let reg = "npu-0,4,65536,20,Ascend910B3,0,true:npu-1,4,65536,20,Ascend910B3,0,true,1,:";
    let (devs, _) = devices(b3().discover(&node("n1").annotation("hami.io/node-register-Ascend910B3", reg).view()));
    assert_eq!(devs.iter().map(|d| (d.id.as_str(), d.index)).collect::<Vec<_>>(), [("npu-0", 0), ("npu-1", 1)]);
}

#[test]
fn the_node_hami_vnpu_core_annotation_is_read_at_discovery() {
    // The node's `hami-vnpu-core`: "true" allows hami-core; any other value forbids it.
    for (v, want) in [("true", Some(true)), ("false", Some(false)), ("yes", Some(false)), ("True", Some(false))] {
        let n = plain_b3(1).annotation(keys::NODE_HAMI_VNPU_CORE, v);
        assert_eq!(devices(b3().discover(&n.view())).1.unwrap().hami_vnpu_core, want, "{v}");
    }
}

#[test]
fn missing_empty_or_broken_registrations() {
    let d = |v: Option<&str>| {
        let n = v.map_or(node("n1"), |v| node("n1").annotation("hami.io/node-register-Ascend910B3", v));
        b3().discover(&n.view())
    };
    assert!(matches!(d(None), Discovery::Absent));
    assert!(matches!(d(Some("[]")), Discovery::Absent));
    assert!(matches!(d(Some("null")), Discovery::Absent));
    // Another chip's key is not ours.
    let other = node("n1").annotation("hami.io/node-register-Ascend910B4", "[]");
    assert!(matches!(b3().discover(&other.view()), Discovery::Absent));
    for bad in ["[{", r#"[{"id":"npu-0","count":"four"}]"#, "npu-0,4:"] {
        match d(Some(bad)) {
            Discovery::Malformed { key, .. } => assert_eq!(key, "hami.io/node-register-Ascend910B3", "{bad}"),
            _ => panic!("{bad}: expected malformed"),
        }
    }
}

#[test]
fn health_is_the_chip_handshake_and_cleanup_removes_it() {
    // Health: handshake `hami.io/node-handshake-<cw>`, liveness from allocatable `huawei.com/<cw>`.
    let a = b3();
    assert_eq!(
        a.health_rule(),
        HealthRule::Handshake { key: "hami.io/node-handshake-Ascend910B3".into(), count_resource: NPU.into() }
    );
    assert_eq!(a.cleanup(), Cleanup::RemoveAnnotation("hami.io/node-handshake-Ascend910B3".into()));
    assert_eq!(a.lock(), LockKind::Shared, "Ascend takes the shared hami.io/mutex.lock");
}

// ---------------------------------------------------------------------------------------------
// Webhook (HAMi's Ascend rules)

struct Mutated {
    result: Result<bool, String>,
    container: Value,
    edits: PodEdits,
}

impl Mutated {
    fn limit(&self, name: &str) -> Option<&str> {
        self.container.pointer(&format!("/resources/limits/{}", name.replace('/', "~1")))?.as_str()
    }
    fn request(&self, name: &str) -> Option<&str> {
        self.container.pointer(&format!("/resources/requests/{}", name.replace('/', "~1")))?.as_str()
    }
}

fn mutate_with(a: &Ascend, annotations: Value, mut container: Value) -> Mutated {
    let annotations: Map<String, Value> = annotations.as_object().cloned().unwrap_or_default();
    let mut edits = PodEdits::default();
    let result = {
        let mut c = ContainerEdit { container: &mut container, index: 0, is_init: false };
        let mut pc = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        a.mutate(&mut c, &mut pc).map_err(|e| e.to_string())
    };
    Mutated { result, container, edits }
}

fn limits(kv: &[(&str, &str)]) -> Value {
    let m: Map<String, Value> = kv.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
    json!({"name": "c", "resources": {"limits": m}})
}

#[test]
fn memory_is_rounded_up_to_a_template_or_the_whole_chip() {
    // HAMi: the smallest template memory ≥ request, else memoryAllocatable while the
    // request fits memoryCapacity, else an error; no memory → memoryAllocatable.
    let b3 = b3();
    let p310 = Ascend::new(&chip("Ascend310P"), false);
    type Row<'a> = (&'a Ascend, &'a str, Option<&'a str>, Result<&'a str, &'a str>);
    let rows: Vec<Row<'_>> = vec![
        (&b3, NPU, Some("10000"), Ok("16384")),
        (&b3, NPU, Some("16384"), Ok("16384")),
        (&b3, NPU, Some("20000"), Ok("32768")),
        (&b3, NPU, Some("40000"), Ok("65536")),
        (&b3, NPU, Some("65536"), Ok("65536")),
        (&b3, NPU, None, Ok("65536")),
        (&b3, NPU, Some("70000"), Err("huawei.com/Ascend910B3-memory 70000 is invalid")),
        // Ascend310P: allocatable 21527 below a capacity of 24576.
        (&p310, "huawei.com/Ascend310P", Some("3000"), Ok("3072")),
        (&p310, "huawei.com/Ascend310P", Some("20000"), Ok("21527")),
        (&p310, "huawei.com/Ascend310P", Some("24576"), Ok("21527")),
        (&p310, "huawei.com/Ascend310P", Some("24577"), Err("huawei.com/Ascend310P-memory 24577 is invalid")),
    ];
    for (a, count, mem, want) in rows {
        let mem_name = format!("{count}-memory");
        let mut kv = vec![(count, "1")];
        if let Some(m) = mem {
            kv.push((&mem_name, m));
        }
        let m = mutate_with(a, json!({}), limits(&kv));
        match want {
            Ok(v) => {
                assert_eq!(m.result, Ok(true), "{count} {mem:?}");
                assert_eq!((m.limit(&mem_name), m.request(&mem_name)), (Some(v), Some(v)), "{count} {mem:?}");
            }
            Err(e) => assert_eq!(m.result, Err(e.to_owned()), "{count} {mem:?}"),
        }
    }
}

#[test]
fn hami_core_keeps_memory_and_allows_cores() {
    // HAMi: hami-core takes the memory as is; `-core` is allowed only there.
    let a = b3();
    let hc = json!({"huawei.com/vnpu-mode": HAMI_CORE});
    let m = mutate_with(&a, hc.clone(), limits(&[(NPU, "1"), (MEM, "10000"), (CORE, "30")]));
    assert_eq!((m.result.clone(), m.limit(MEM), m.request(MEM)), (Ok(true), Some("10000"), Some("10000")));
    let m = mutate_with(&a, json!({}), limits(&[(NPU, "1"), (CORE, "30")]));
    assert_eq!(m.result, Err("huawei.com/Ascend910B3-core is only supported in hami-core (soft split) mode".into()));
    // The core check reads limits, else requests; 0 is not a request.
    let req_core = json!({"name": "c", "resources": {"limits": {NPU: "1"}, "requests": {CORE: "1"}}});
    assert!(mutate_with(&a, json!({}), req_core).result.is_err());
    assert_eq!(mutate_with(&a, json!({}), limits(&[(NPU, "1"), (CORE, "0")])).result, Ok(true));
    // HAMi passes a negative hami-core memory through (and then drops the request); refused here.
    let m = mutate_with(&a, hc, limits(&[(NPU, "1"), (MEM, "-5")]));
    assert_eq!(m.result, Err("huawei.com/Ascend910B3-memory -5 is invalid".into()));
}

#[test]
fn several_devices_need_the_whole_chip_outside_hami_core() {
    // HAMi refuses count > 1 without hami-core when memory ≠ memoryAllocatable.
    let a = b3();
    let m = mutate_with(&a, json!({}), limits(&[(NPU, "2"), (MEM, "16384")]));
    assert_eq!(m.result, Err("vNPU not supported for multiple devices".into()));
    assert_eq!(mutate_with(&a, json!({}), limits(&[(NPU, "2")])).result, Ok(true));
    assert_eq!(mutate_with(&a, json!({}), limits(&[(NPU, "2"), (MEM, "65536")])).result, Ok(true));
    let hc = json!({"huawei.com/vnpu-mode": HAMI_CORE});
    assert_eq!(mutate_with(&a, hc, limits(&[(NPU, "2"), (MEM, "16384")])).result, Ok(true));
}

#[test]
fn super_pod_910c_counts_are_one_or_even() {
    // HAMi: Ascend910C with superPod: 1 → 2 (limits, and requests when present); other
    // odd counts are refused.
    let a = Ascend::new(&chip("Ascend910C"), false);
    let m =
        mutate_with(&a, json!({}), json!({"name": "c", "resources": {"limits": {C910: "1"}, "requests": {C910: "1"}}}));
    assert_eq!((m.result.clone(), m.limit(C910), m.request(C910)), (Ok(true), Some("2"), Some("2")));
    let m = mutate_with(&a, json!({}), limits(&[(C910, "1")]));
    assert_eq!((m.limit(C910), m.request(C910)), (Some("2"), None), "requests are written only when present");
    assert_eq!(
        mutate_with(&a, json!({}), limits(&[(C910, "3")])).result,
        Err("Ascend910C device request must be 1 or 2*n, got 3".into())
    );
    assert_eq!(mutate_with(&a, json!({}), limits(&[(C910, "4")])).result, Ok(true));
    // The multi-device memory rule reads the count as written (1), as HAMi does.
    let m = mutate_with(&a, json!({}), limits(&[(C910, "1"), ("huawei.com/Ascend910C-memory", "16384")]));
    assert_eq!(m.result, Ok(true));
    // Without superPod nothing is rounded.
    let plain = Ascend::new(&VnpuChipConfig { super_pod: false, ..chip("Ascend910C") }, false);
    let m = mutate_with(&plain, json!({}), limits(&[(C910, "3")]));
    assert_eq!((m.result.clone(), m.limit(C910)), (Ok(true), Some("3")));
}

#[test]
fn containers_without_a_count_get_the_visible_devices_env_when_configured() {
    // HAMi: count absent → `ASCEND_VISIBLE_DEVICES=` when overwriteEnv; not recognised.
    let a = Ascend::new(&VnpuChipConfig { overwrite_env: true, ..chip(B3) }, false);
    let m = mutate_with(&a, json!({}), json!({"name": "c"}));
    assert_eq!(m.result, Ok(false));
    assert_eq!(m.container["env"], json!([{"name": "ASCEND_VISIBLE_DEVICES", "value": ""}]));
    // Count only in requests is not a count (limits only).
    let m = mutate_with(&b3(), json!({}), json!({"name": "c", "resources": {"requests": {NPU: "1"}}}));
    assert_eq!((m.result, m.container.get("env")), (Ok(false), None));
}

#[test]
fn recognised_pods_get_the_runtime_class() {
    let a = Ascend::new(&VnpuChipConfig { runtime_class_name: "ascend".into(), ..chip(B3) }, false);
    let m = mutate_with(&a, json!({}), limits(&[(NPU, "1")]));
    assert_eq!(m.edits.runtime_class_name.as_deref(), Some("ascend"));
}

// ---------------------------------------------------------------------------------------------
// Fit: HAMi's generic device walk, plus Ascend's hami-core gate and topology choices

#[test]
fn generic_walk_rules_with_hamis_reason_words() {
    let two = plain_b3(2);
    let rows: Vec<(&str, NodeSnapshot, PodBuilder, Result<String, String>)> = vec![
        // The memory asked for (rounded by the webhook) is reserved; of two idle devices the one
        // registered last is tried first.
        (
            "the idle device registered last",
            snapshot(&two, &[]),
            b3_pod(1).limit(MEM, "16384"),
            ok("npu-1,Ascend910B3,16384,0:;"),
        ),
        // No memory → percentage 100, the whole NPU.
        ("whole memory by default", snapshot(&two, &[]), b3_pod(1), ok("npu-1,Ascend910B3,65536,0:;")),
        // UUID selection: hami.io/use-<cw>-uuid / hami.io/no-use-<cw>-uuid.
        (
            "use-uuid",
            snapshot(&two, &[]),
            b3_pod(1).annotation("hami.io/use-Ascend910B3-uuid", "npu-0"),
            ok("npu-0,Ascend910B3,65536,0:;"),
        ),
        (
            "no-use-uuid",
            snapshot(&two, &[]),
            b3_pod(1).annotation("hami.io/no-use-Ascend910B3-uuid", "npu-0,npu-1"),
            no("2/2 CardUuidMismatch"),
        ),
        // Another chip's or vendor's selection keys do not apply.
        (
            "other keys",
            snapshot(&two, &[]),
            b3_pod(1).annotation("hami.io/no-use-Ascend910B4-uuid", "npu-1"),
            ok("npu-1,Ascend910B3,65536,0:;"),
        ),
        // Every slot taken: CardTimeSlicingExhausted.
        (
            "slots",
            snapshot(&two, &[("npu-0", 4, 0, 0), ("npu-1", 4, 0, 0)]),
            b3_pod(1).limit(MEM, "1"),
            no("2/2 CardTimeSlicingExhausted"),
        ),
        // The mutex policy rejects used devices.
        (
            "mutex",
            snapshot(&two, &[("npu-0", 1, 16384, 0), ("npu-1", 1, 16384, 0)]),
            b3_pod(1).limit(MEM, "16384").annotation(common_keys::GPU_SCHEDULER_POLICY, "mutex"),
            no("2/2 ExclusiveDeviceAllocateConflict"),
        ),
        // Not enough free memory: CardInsufficientMemory.
        (
            "memory",
            snapshot(&two, &[("npu-0", 1, 60000, 0), ("npu-1", 1, 60000, 0)]),
            b3_pod(1).limit(MEM, "16384"),
            no("2/2 CardInsufficientMemory"),
        ),
        // Free cores are checked against the registered AI cores (hard split).
        (
            "cores",
            snapshot(&two, &[("npu-0", 1, 0, 15), ("npu-1", 1, 0, 15)]),
            b3_pod(1).limit(MEM, "1").limit(CORE, "10"),
            no("2/2 CardInsufficientCore"),
        ),
        // A core-less task may not join a fully booked device.
        (
            "core-0 on a full device",
            snapshot(&two, &[("npu-0", 1, 0, 20), ("npu-1", 1, 0, 20)]),
            b3_pod(1).limit(MEM, "1"),
            no("2/2 CardComputeUnitsExhausted"),
        ),
        // AllocatedCardsInsufficientRequest counts the devices found.
        (
            "some but not enough",
            snapshot(&two, &[("npu-1", 4, 0, 0)]),
            b3_pod(2),
            no("1/2 AllocatedCardsInsufficientRequest, 1/2 CardTimeSlicingExhausted"),
        ),
        // More devices asked than the node has: NodeInsufficientDevice.
        ("more than the node has", snapshot(&two, &[]), b3_pod(3), no("NodeInsufficientDevice")),
    ];
    for (what, snap, p, want) in rows {
        assert_eq!(eval(&snap, &p), want, "{what}");
    }
    let mut snap = snapshot(&two, &[]);
    snap.devices[1].health = false;
    assert_eq!(eval(&snap, &b3_pod(1)), ok("npu-0,Ascend910B3,65536,0:;"), "CardNotHealth");
    snap.devices[0].health = false;
    assert_eq!(eval(&snap, &b3_pod(1)), no("2/2 CardNotHealth"));
}

#[test]
fn hami_core_pods_need_a_node_that_supports_it() {
    // HAMi: node annotation `hami-vnpu-core` = "true", else the config's hamiVnpuCore;
    // otherwise `ModeNotFit` at once (one count over the chip's devices).
    let hc = || b3_pod(1).limit(MEM, "10000").limit(CORE, "30").annotation(keys::VNPU_MODE, HAMI_CORE);
    let fits = ok("npu-1,Ascend910B3,10000,30:;");
    assert_eq!(eval(&snapshot(&plain_b3(2), &[]), &hc()), no("1/2 ModeNotFit"));
    assert_eq!(eval(&snapshot(&plain_b3(2).annotation(keys::NODE_HAMI_VNPU_CORE, "true"), &[]), &hc()), fits);
    // The config default applies when the node does not say; the node wins when it does.
    let v = Vendors::new(vec![Box::new(Ascend::new(&chip(B3), true))]);
    let run = |n: &NodeBuilder| {
        let nd = v.discover(&n.view());
        let snap = NodeSnapshot::new(crate::model::NodeName::new("n1"), nd.devices, nd.extras);
        let req = hc().request_with(&v);
        fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default())
            .map(|f| codec::encode_pod_devices(f.devices.vendor(VendorId(0)).unwrap_or(&[])))
            .map_err(|r| r.hami_text())
    };
    assert_eq!(run(&plain_b3(2)), fits);
    assert_eq!(run(&plain_b3(2).annotation(keys::NODE_HAMI_VNPU_CORE, "false")), no("1/2 ModeNotFit"));
    // Pods not in hami-core mode are unaffected.
    assert_eq!(eval(&snapshot(&plain_b3(2), &[]), &b3_pod(1)), ok("npu-1,Ascend910B3,65536,0:;"));
}

#[test]
fn hami_core_takes_the_devices_cores_as_100_percent() {
    // HAMi: in hami-core mode the device's total cores are 100 for the core rules.
    let n = plain_b3(1).annotation(keys::NODE_HAMI_VNPU_CORE, "true");
    let hc = |c: &str| b3_pod(1).limit(MEM, "1000").limit(CORE, c).annotation(keys::VNPU_MODE, HAMI_CORE);
    assert_eq!(eval(&snapshot(&n, &[("npu-0", 1, 1000, 50)]), &hc("50")), ok("npu-0,Ascend910B3,1000,50:;"));
    assert_eq!(eval(&snapshot(&n, &[("npu-0", 1, 1000, 60)]), &hc("50")), no("1/1 CardInsufficientCore"));
    // 100 cores is exclusive against the 100 total.
    assert_eq!(eval(&snapshot(&n, &[("npu-0", 1, 1000, 0)]), &hc("100")), no("1/1 ExclusiveDeviceAllocateConflict"));
    // On a node without hami-core the registered 20 AI cores count.
    let hard = snapshot(&plain_b3(1), &[]);
    assert_eq!(eval(&hard, &b3_pod(1).limit(MEM, "1000").limit(CORE, "50")), no("1/1 CardInsufficientCore"));
}

#[test]
fn npus_on_a_hami_core_node_have_100_percent_of_cores() {
    // hami-core cores are percent; the node's NPUs then count cores in that unit (HAMi fits
    // hami-core pods against 100 but keeps the registered AI-core count for usage).
    let cores = |n: &NodeBuilder, a: &Ascend| devices(a.discover(&n.view())).0[0].devcore;
    assert_eq!(cores(&plain_b3(1), &b3()), 20);
    assert_eq!(cores(&plain_b3(1).annotation(keys::NODE_HAMI_VNPU_CORE, "true"), &b3()), 100);
    assert_eq!(cores(&plain_b3(1), &Ascend::new(&chip(B3), true)), 100);
    assert_eq!(cores(&plain_b3(1).annotation(keys::NODE_HAMI_VNPU_CORE, "false"), &Ascend::new(&chip(B3), true)), 20);
    // A hard-split pod on such a node is not refused for hami-core usage of 20 percent (HAMi's
    // core-0 rule compares it with the 20 AI cores).
    let n = plain_b3(1).annotation(keys::NODE_HAMI_VNPU_CORE, "true");
    assert_eq!(
        eval(&snapshot(&n, &[("npu-0", 1, 1000, 20)]), &b3_pod(1).limit(MEM, "1000")),
        ok("npu-0,Ascend910B3,1000,0:;")
    );
}

#[test]
fn ascend910_groups_by_network_id_when_every_device_has_one() {
    // HAMi collects every fitting device, walking from the end of the sorted list
    // (npu-4 first among the idle devices); one → the first collected; more → largest network
    // groups first, each filled in collection order.
    let snap = snapshot(&networked(B3), &[]);
    assert_eq!(uuids(eval(&snap, &b3_pod(1))), ["npu-4"]);
    assert_eq!(uuids(eval(&snap, &b3_pod(2))), ["npu-4", "npu-2"]);
    assert_eq!(uuids(eval(&snap, &b3_pod(3))), ["npu-4", "npu-2", "npu-1"]);
    assert_eq!(uuids(eval(&snap, &b3_pod(4))), ["npu-4", "npu-2", "npu-1", "npu-3"]);
    // Only fitting devices count: with npu-2 and npu-4 full, network 1 is the largest group.
    let busy = snapshot(&networked(B3), &[("npu-2", 4, 0, 0), ("npu-4", 4, 0, 0)]);
    assert_eq!(uuids(eval(&busy, &b3_pod(2))), ["npu-3", "npu-0"]);
    // Fewer fitting devices than requested: HAMi's insufficient-request reason.
    assert_eq!(eval(&busy, &b3_pod(4)), no("2/5 CardTimeSlicingExhausted, 3/5 AllocatedCardsInsufficientRequest"));
}

#[test]
fn network_grouping_needs_every_device_to_have_a_network_id() {
    let mut devs: Vec<_> =
        [1, 2, 2].iter().enumerate().map(|(i, n)| npu(&format!("npu-{i}"), i as u32, B3, Some(json!(n)))).collect();
    devs.push(npu("npu-3", 3, B3, None));
    let snap = snapshot(&ascend_node("n1", B3, &devs), &[]);
    assert_eq!(uuids(eval(&snap, &b3_pod(2))), ["npu-3", "npu-2"], "policy order without grouping");
}

#[test]
fn a_non_numeric_network_id_is_grouped_last() {
    // HAMi drops such devices from its groups and can answer fewer devices than requested; here
    // they form a last group, in collection order (npu-1 before npu-0).
    let devs: Vec<_> = [json!("x"), json!("x"), json!(1)]
        .into_iter()
        .enumerate()
        .map(|(i, n)| npu(&format!("npu-{i}"), i as u32, B3, Some(n)))
        .collect();
    let snap = snapshot(&ascend_node("n1", B3, &devs), &[]);
    assert_eq!(uuids(eval(&snap, &b3_pod(2))), ["npu-2", "npu-1"]);
}

#[test]
fn network_grouping_is_for_the_910_family_only() {
    // HAMi groups by network only for `Ascend910*` chips.
    let snap = snapshot(&networked("Ascend310P"), &[]);
    let p = pod().limit("huawei.com/Ascend310P", "2");
    assert_eq!(uuids(eval_cw(&snap, &p, "Ascend310P")), ["npu-4", "npu-3"]);
}

/// Ascend910C NPUs at the given indexes (module = index ÷ 2).
fn c910(indexes: &[u32]) -> NodeBuilder {
    let devs: Vec<_> = indexes.iter().map(|&i| npu(&format!("npu-{i}"), i, "Ascend910C", Some(json!(0)))).collect();
    ascend_node("n1", "Ascend910C", &devs)
}

fn c910_pod(n: u32) -> PodBuilder {
    pod().limit(C910, &n.to_string())
}

#[test]
fn ascend910c_takes_complete_module_pairs_only() {
    // HAMi groups by index ÷ 2 (a module holds two NPUs) and takes only complete pairs; fewer →
    // AllocatedCardsInsufficientRequest over the requested count. The walk collects from the end,
    // so of two free modules the one met first (the higher indexes) is taken, each in collection
    // order.
    let eval = |n: &NodeBuilder, busy: &[(&str, u32, u64, u32)], p: u32| {
        eval_cw(&snapshot(n, busy), &c910_pod(p), "Ascend910C")
    };
    assert_eq!(uuids(eval(&c910(&[0, 1, 2, 3]), &[], 2)), ["npu-3", "npu-2"]);
    assert_eq!(uuids(eval(&c910(&[0, 1, 2, 3]), &[], 4)), ["npu-3", "npu-2", "npu-1", "npu-0"]);
    // A busy NPU breaks its module.
    assert_eq!(uuids(eval(&c910(&[0, 1, 2, 3]), &[("npu-3", 4, 0, 0)], 2)), ["npu-1", "npu-0"]);
    // HAMi's pairing tests: 0,1,2,4,6 → one pair for 4 wanted; 0 and 2 → no pair.
    assert_eq!(eval(&c910(&[0, 1, 2, 4, 6]), &[], 4), no("2/4 AllocatedCardsInsufficientRequest"));
    assert_eq!(eval(&c910(&[0, 2]), &[], 2), no("0/2 AllocatedCardsInsufficientRequest"));
    // Device rejections are counted against the requested count too.
    assert_eq!(
        eval(&c910(&[0, 1, 2]), &[("npu-1", 4, 0, 0)], 2),
        no("0/2 AllocatedCardsInsufficientRequest, 1/2 CardTimeSlicingExhausted")
    );
    // One NPU is a normal walk (the webhook rounds 1 up to 2 for super pods).
    assert_eq!(uuids(eval(&c910(&[0, 2]), &[], 1)), ["npu-2"]);
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and
    // Ascend's Fit walks the list from the end; its topology paths keep that collection order
    // (one NPU: the first collected; a 910C pair: the module's NPUs as collected).
    let same_network =
        |cw: &str| ascend_node("n1", cw, &[npu("npu-0", 0, cw, Some(json!(1))), npu("npu-1", 1, cw, Some(json!(1)))]);
    let rows: [(&str, NodeBuilder, PodBuilder, &str, &[&str]); 5] = [
        ("plain walk", plain_b3(2), b3_pod(1), B3, &["npu-1"]),
        ("plain walk, two NPUs", plain_b3(2), b3_pod(2), B3, &["npu-1", "npu-0"]),
        ("910 network topology, one NPU", same_network(B3), b3_pod(1), B3, &["npu-1"]),
        ("910C, one NPU", c910(&[0, 1]), c910_pod(1), "Ascend910C", &["npu-1"]),
        ("910C, one module", c910(&[0, 1]), c910_pod(2), "Ascend910C", &["npu-1", "npu-0"]),
    ];
    for (what, n, p, cw, want) in rows {
        assert_eq!(uuids(eval_cw(&snapshot(&n, &[]), &p, cw)), want, "{what}");
    }
}

#[test]
fn an_ascend910b4_request_sees_only_ascend910b4_devices() {
    // HAMi matches candidates by substring of the device type, so an Ascend910B4 request can land
    // on Ascend910B4-1 devices under the Ascend910B4 key; hami-rs keeps each chip's devices apart.
    let n = ascend_node("n1", "Ascend910B4-1", &[npu("b41-0", 0, "Ascend910B4-1", None)]);
    let p = pod().limit("huawei.com/Ascend910B4", "1");
    assert_eq!(eval_cw(&snapshot(&n, &[]), &p, "Ascend910B4"), no("NodeInsufficientDevice"));
}

// ---------------------------------------------------------------------------------------------
// Annotations

fn written_with(a: &Ascend, snap: &NodeSnapshot, req: &PodRequest, cs: &[ContainerDevices]) -> Vec<(String, String)> {
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: cs, pod: req, unix_s: 1787293239, unix_ns: 0 };
    let mut out = Vec::new();
    a.annotations(&cx, &mut out);
    out
}

fn written(snap: &NodeSnapshot, p: &PodBuilder) -> Vec<(String, String)> {
    let v = vendors();
    let req = p.request_with(&v);
    let fit = fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    written_with(&b3(), snap, &req, fit.devices.vendor(id(&v, B3)).unwrap())
}

fn pairs(kv: &[(&str, &str)]) -> Vec<(String, String)> {
    kv.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn the_worked_example_writes_the_runtime_info_with_the_template() {
    // HAMi's example: memory 10000 (rounded to 16384 by the webhook) on Ascend910B3 →
    // `[{"UUID":"npu-uuid-0","temp":"vir05_1c_16g","memory":16384}]`, predicate-time unix-s.
    let n = ascend_node("n1", B3, &[npu("npu-uuid-0", 0, B3, None)]);
    let m = mutate_with(&b3(), json!({}), limits(&[(NPU, "1"), (MEM, "10000")]));
    let rounded = m.limit(MEM).unwrap().to_owned();
    assert_eq!(
        written(&snapshot(&n, &[]), &b3_pod(1).limit(MEM, &rounded)),
        pairs(&[
            ("hami.io/Ascend910B3-devices-to-allocate", "npu-uuid-0,Ascend910B3,16384,0:;"),
            ("hami.io/Ascend910B3-devices-allocated", "npu-uuid-0,Ascend910B3,16384,0:;"),
            ("predicate-time", "1787293239"),
            ("huawei.com/Ascend910B3", r#"[{"UUID":"npu-uuid-0","temp":"vir05_1c_16g","memory":16384}]"#),
        ])
    );
}

#[test]
fn runtime_info_omits_the_template_for_whole_chips_and_in_hami_core() {
    let n = plain_b3(2).annotation(keys::NODE_HAMI_VNPU_CORE, "true");
    // A whole chip matches no template.
    let w = written(&snapshot(&n, &[]), &b3_pod(2));
    assert_eq!(w[3].1, r#"[{"UUID":"npu-1","memory":65536},{"UUID":"npu-0","memory":65536}]"#);
    // hami-core: memory and core as given, no template.
    let hc = b3_pod(1).limit(MEM, "16384").limit(CORE, "30").annotation(keys::VNPU_MODE, HAMI_CORE);
    let w = written(&snapshot(&n, &[]), &hc);
    assert_eq!(
        w[3],
        ("huawei.com/Ascend910B3".to_owned(), r#"[{"UUID":"npu-1","memory":16384,"core":30}]"#.to_owned())
    );
}

#[test]
fn every_container_gets_an_entry_and_the_runtime_info_lists_all_devices() {
    // One entry per container, init containers first. The init container's NPU
    // is not charged to the app containers, so both land on npu-1 (registered last).
    let p = pod()
        .init("setup")
        .limit(NPU, "1")
        .limit(MEM, "32768")
        .main()
        .container("idle")
        .container("w")
        .limit(NPU, "1")
        .limit(MEM, "16384");
    let w = written(&snapshot(&plain_b3(2), &[]), &p);
    assert_eq!(w[0].1, "npu-1,Ascend910B3,32768,0:;;;npu-1,Ascend910B3,16384,0:;");
    assert_eq!(
        w[3].1,
        r#"[{"UUID":"npu-1","temp":"vir10_3c_32g","memory":32768},{"UUID":"npu-1","temp":"vir05_1c_16g","memory":16384}]"#
    );
}

#[test]
fn pod_keys_name_the_chip() {
    let a = b3();
    assert_eq!(
        a.pod_keys(),
        [
            "hami.io/Ascend910B3-devices-to-allocate",
            "hami.io/Ascend910B3-devices-allocated",
            "predicate-time",
            "huawei.com/Ascend910B3"
        ]
    );
    assert_eq!(a.allocated_key(), Some("hami.io/Ascend910B3-devices-allocated"));
    let mut pv = PodView::default();
    pv.metadata
        .annotations
        .insert("hami.io/Ascend910B3-devices-allocated".into(), "npu-1,Ascend910B3,16384,0:;".into());
    assert_eq!(a.decode_allocation(&pv).unwrap().unwrap()[0][0].uuid.as_str(), "npu-1");
}

// ---------------------------------------------------------------------------------------------
// Node score (910 family)

#[test]
fn node_score_is_the_largest_network_share_per_container() {
    // Σ over containers of (largest same-NetworkID group ÷ devices) × 10.
    let snap = snapshot(&networked(B3), &[]);
    let s = score(&b3(), &snap, &[&["npu-0", "npu-1", "npu-2"], &[], &["npu-3"]]);
    assert!((s - (2.0 / 3.0 + 1.0) * 10.0).abs() < 1e-4, "{s}");
    assert_eq!(score(&b3(), &snap, &[&["npu-1", "npu-2"]]), 10.0);
    // Any device without a NetworkID → 0.
    let mixed = snapshot(&ascend_node("n1", B3, &[npu("a", 0, B3, Some(json!(1))), npu("b", 1, B3, None)]), &[]);
    assert_eq!(score(&b3(), &mixed, &[&["a", "b"]]), 0.0);
    // A NetworkID that is not a number is not counted.
    let odd =
        snapshot(&ascend_node("n1", B3, &[npu("a", 0, B3, Some(json!(1))), npu("b", 1, B3, Some(json!("x")))]), &[]);
    assert_eq!(score(&b3(), &odd, &[&["a", "b"]]), 10.0);
    // Not a 910 chip → 0.
    let p310 = Ascend::new(&chip("Ascend310P"), false);
    assert_eq!(score(&p310, &snap, &[&["npu-1", "npu-2"]]), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Property: accepted placements never overcommit a device

#[derive(Clone, Debug)]
struct Npu {
    count: u32,
    used: u32,
    mem_pct: u64,
    cores: u32,
    healthy: bool,
    network: Option<u8>,
}

fn any_npu() -> impl Strategy<Value = Npu> {
    (1u32..=4, 0u32..=4, 0u64..=100, 0u32..=20, prop::bool::weighted(0.9), prop::option::weighted(0.8, 0u8..=2))
        .prop_map(|(count, used, mem_pct, cores, healthy, network)| {
            let used = used.min(count);
            let (mem_pct, cores) = if used == 0 { (0, 0) } else { (mem_pct, cores) };
            Npu { count, used, mem_pct, cores, healthy, network }
        })
}

fn any_ctr() -> impl Strategy<Value = Option<(u32, Option<u32>, Option<u32>)>> {
    let c = (
        1u32..=4,
        prop::option::of(prop::sample::select(vec![8192u32, 16384, 32768, 65536])),
        prop::option::of(0u32..=100),
    );
    prop_oneof![1 => Just(None), 4 => c.prop_map(Some)]
}

proptest! {
    #[test]
    fn accepted_placements_never_overcommit_an_npu(
        npus in prop::collection::vec(any_npu(), 1..=6),
        ctrs in prop::collection::vec(any_ctr(), 1..=3),
        cw in prop::sample::select(vec![B3, "Ascend910C"]),
        hami_core in any::<bool>(),
        node_core in any::<bool>(),
        policy in prop::sample::select(vec!["spread", "binpack", "mutex"]),
    ) {
        let v = vendors();
        let devs: Vec<DeviceInfo> = npus.iter().enumerate().map(|(i, n)| {
            let mut d = npu(&format!("npu-{i}"), i as u32, cw, n.network.map(|x| json!(x)));
            d.count = n.count;
            d.health = n.healthy;
            d
        }).collect();
        let busy: Vec<(String, u32, u64, u32)> = npus.iter().enumerate()
            .map(|(i, n)| (format!("npu-{i}"), n.used, 65536 * n.mem_pct / 100, n.cores)).collect();
        let busy_ref: Vec<(&str, u32, u64, u32)> = busy.iter().map(|(s, a, b, c)| (s.as_str(), *a, *b, *c)).collect();
        let n = ascend_node("n1", cw, &devs).annotation(keys::NODE_HAMI_VNPU_CORE, if node_core { "true" } else { "false" });
        let snap = snapshot(&n, &busy_ref);
        let mut p = pod().annotation(common_keys::GPU_SCHEDULER_POLICY, policy);
        if hami_core {
            p = p.annotation(keys::VNPU_MODE, HAMI_CORE);
        }
        let (count, mem, core) = (format!("huawei.com/{cw}"), format!("huawei.com/{cw}-memory"), format!("huawei.com/{cw}-core"));
        for (i, c) in ctrs.iter().enumerate() {
            if i > 0 {
                p = p.container(&format!("c{i}"));
            }
            let Some((n, m, k)) = c else { continue };
            p = p.limit(&count, &n.to_string());
            if let Some(m) = m { p = p.limit(&mem, &m.to_string()); }
            if let Some(k) = k { p = p.limit(&core, &k.to_string()); }
        }
        let req = p.request_with(&v);
        if let Ok(fit) = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()) {
            let info = |u: &crate::model::DeviceUuid| snap.devices.iter().find(|d| &d.info.id == u).map(|d| d.info.clone());
            let mut after = snap.devices.clone();
            let unmatched = apply(&mut after, &collapse(&fit.devices, &Layout::default(), &v, &info));
            prop_assert!(unmatched.0.is_empty());
            for d in &after {
                prop_assert!(d.within_capacity(), "{:?}", d);
            }
            for (ci, reqs) in req.containers.iter().enumerate() {
                let Some(r) = reqs.first() else { continue };
                let got = &fit.devices.vendor(r.vendor).unwrap()[ci];
                prop_assert_eq!(got.len(), r.nums as usize);
                if cw == "Ascend910C" && r.nums > 1 {
                    // Complete modules only.
                    let mut mods: Vec<u32> = got.iter().map(|e| info(&e.uuid).unwrap().index / 2).collect();
                    mods.sort_unstable();
                    prop_assert!(mods.chunks(2).all(|c| c.len() == 2 && c[0] == c[1]), "{:?}", mods);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine (in-memory backend, --enable-ascend)
