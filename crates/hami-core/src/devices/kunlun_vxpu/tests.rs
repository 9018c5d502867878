use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::*;
use crate::devices::{Cleanup, HealthRule, LockKind, NoQuota};
use crate::model::annotations::kunlun as baidu_keys;
use crate::model::annotations::{GPU_SCHEDULER_POLICY, kunlun_vxpu as xpu_keys};
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::sched::NodeSnapshot;
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

fn vx() -> KunlunVxpu {
    KunlunVxpu::new(&KunlunConfig::chart())
}

fn id() -> VendorId {
    vendors().by_name(WORD).unwrap()
}

/// Resource quantities of a container: `(name, value)` pairs.
type Quantities = &'static [(&'static str, &'static str)];

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

fn try_fit(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    let v = vendors();
    let req = p.request_with(&v);
    match fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()) {
        Ok(fit) => Ok(codec::encode_pod_devices(fit.devices.vendor(id()).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

// ---------------------------------------------------------------------------------------------
// Request derivation

#[test]
fn memory_is_rounded_up_to_a_template_and_sets_the_cores() {
    // HAMi's trimMemory: ≤ 24576 → 24576, ≤ 49152 → 49152, else 98304 (zero and below: 24576).
    for (m, want) in [
        (1, 24576),
        (24576, 24576),
        (24577, 49152),
        (49152, 49152),
        (49153, 98304),
        (500000, 98304),
        (0, 24576),
        (-5, 24576),
    ] {
        assert_eq!(template(m), want, "{m}");
    }
    // HAMi's Kunlun vXPU request: cores = memory × 100 ÷ 98304; no memory → whole device
    // (98304, percentage 100, cores 100).
    type Want = Result<Option<(u32, u64, u32, u32)>, &'static str>;
    let rows: [(&str, Quantities, Quantities, Want); 10] = [
        ("a quarter", &[(VXPU, "1"), (MEM, "10000")], &[], Ok(Some((1, 24576, 0, 25)))),
        ("a half", &[(VXPU, "2"), (MEM, "30000")], &[], Ok(Some((2, 49152, 0, 50)))),
        ("the whole device by memory", &[(VXPU, "1"), (MEM, "60000")], &[], Ok(Some((1, 98304, 0, 100)))),
        ("no memory: the whole device", &[(VXPU, "1")], &[], Ok(Some((1, 98304, 100, 100)))),
        ("memory from requests", &[(VXPU, "1")], &[(MEM, "20000")], Ok(Some((1, 24576, 0, 25)))),
        // HAMi reads a non-integer memory as absent, so the whole device; hami-rs refuses it,
        // and a negative one.
        ("fractional memory", &[(VXPU, "1"), (MEM, "1.5")], &[], Err(MEM)),
        ("negative memory", &[(VXPU, "1"), (MEM, "-1")], &[], Err(MEM)),
        ("count from requests", &[], &[(VXPU, "1"), (MEM, "1")], Ok(Some((1, 24576, 0, 25)))),
        ("fractional count", &[(VXPU, "1.5")], &[], Err(VXPU)),
        ("zero count", &[(VXPU, "0")], &[], Ok(None)),
    ];
    for (what, l, r, want) in rows {
        let got = vx().request(VendorId(9), &container(l, r), &PodView::default());
        match want {
            Ok(w) => {
                let w = w.map(|(n, m, pct, c)| ContainerRequest::new(VendorId(9), n, m, pct, c));
                assert_eq!(got, Ok(w), "{what}");
            }
            Err(name) => assert!(got.as_ref().is_err_and(|e| e.to_string().contains(name)), "{what}: {got:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Webhook

fn mutate(c: Value) -> (Result<bool, String>, Value) {
    let mut c = c;
    let annotations = Map::new();
    let mut edits = PodEdits::default();
    let r = {
        let mut e = ContainerEdit { container: &mut c, index: 0, is_init: false };
        let mut p = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        vx().mutate(&mut e, &mut p).map_err(|e| e.to_string())
    };
    (r, c)
}

#[test]
fn webhook_rounds_the_memory_limit_into_limits_and_requests() {
    // HAMi: count in limits → recognised; memory limit rounded up to
    // 24576 / 49152 / else 98304 and written to limits and requests.
    let (r, c) = mutate(json!({"resources": {"limits": {VXPU: "1", MEM: "30000"}}}));
    assert_eq!(r, Ok(true));
    assert_eq!(c["resources"], json!({"limits": {VXPU: "1", MEM: "49152"}, "requests": {MEM: "49152"}}));
    // Go's Value rounds a unit quantity to its integer: 30Gi is far above a whole device.
    let (_, c) = mutate(json!({"resources": {"limits": {VXPU: "1", MEM: "30Gi"}}}));
    assert_eq!(c["resources"]["limits"][MEM], "98304");
    // Memory only in requests is left alone; no count in limits → not recognised.
    let only_req = json!({"resources": {"limits": {VXPU: "1"}, "requests": {MEM: "100"}}});
    assert_eq!(mutate(only_req.clone()), (Ok(true), only_req));
    let c = json!({"resources": {"requests": {VXPU: "1"}, "limits": {MEM: "100"}}});
    assert_eq!(mutate(c.clone()), (Ok(false), c));
}

// ---------------------------------------------------------------------------------------------
// Discovery (`hami.io/node-register-xpu`), health, lock

#[test]
fn registration_reads_the_json_and_the_colon_forms() {
    let Discovery::Devices { devices, .. } = vx().discover(&xpus(2).view()) else { panic!("no devices") };
    assert_eq!(devices, registered(2));
    let colon = "xpu-0,4,98304,100,P800,0,true,0,:xpu-1,4,98304,100,P800,1,true,1,:";
    let Discovery::Devices { devices, .. } = vx().discover(&node("n1").annotation(xpu_keys::REGISTER, colon).view())
    else {
        panic!("no devices")
    };
    assert_eq!((devices[1].id.as_str(), devices[1].index, devices[1].numa), ("xpu-1", 1, 1));
    for (v, absent) in [("[]", true), ("null", true), ("[{", false), ("no separator", false)] {
        let d = vx().discover(&node("n1").annotation(xpu_keys::REGISTER, v).view());
        match d {
            Discovery::Absent => assert!(absent, "{v}"),
            Discovery::Malformed { key, .. } => assert!(!absent && key == xpu_keys::REGISTER, "{v}"),
            Discovery::Devices { .. } => panic!("{v}"),
        }
    }
    assert!(matches!(vx().discover(&node("n1").view()), Discovery::Absent));
}

#[test]
fn handshake_health_shared_lock_and_handshake_clean_up() {
    // As in HAMi: hami.io/node-handshake-xpu with the allocatable fallback on the vxpu count;
    // clean-up removes the handshake; the shared node lock.
    let v = vx();
    assert_eq!(
        v.health_rule(),
        HealthRule::Handshake { key: "hami.io/node-handshake-xpu".into(), count_resource: VXPU.into() }
    );
    assert_eq!(v.cleanup(), Cleanup::RemoveAnnotation("hami.io/node-handshake-xpu".into()));
    assert_eq!(v.lock(), LockKind::Shared);
    assert_eq!(v.resource_names(), [VXPU, MEM]);
    assert_eq!(v.quota_names().memory.as_deref(), Some(MEM));
}

// ---------------------------------------------------------------------------------------------
// Fit (HAMi: healthy, memory fits, and unused or running tasks of the same size)

#[test]
fn only_equal_sized_slices_share_a_device() {
    let v = vendors();
    let mut s = xpus(8).snapshot(&v);
    // Every device holds one quarter except 4, which holds a half.
    for i in 0..8 {
        set_usage(&mut s, &format!("xpu-{i}"), 1, 24576, 25);
    }
    set_usage(&mut s, "xpu-4", 1, 49152, 50);
    // A half fits only where halves run (average memory per task equals the request).
    assert_eq!(try_fit(&s, &ask(1, "40000")), Ok("xpu-4,XPU,49152,50:;".into()));
    // A quarter avoids 4; the left wing has 4 fitting, the right 3: a wing with 3 is preferred.
    assert_eq!(try_fit(&s, &ask(1, "100")), Ok("xpu-5,XPU,24576,25:;".into()));
    // The whole device needs idle devices.
    assert_eq!(try_fit(&s, &ask(1, "98304")), Err("1/8 NumaNotFit".into()));
}

#[test]
fn memory_health_and_slots_bound_a_device() {
    let v = vendors();
    let mut s = xpus(1).snapshot(&v);
    set_usage(&mut s, "xpu-0", 3, 73728, 75);
    assert_eq!(try_fit(&s, &ask(1, "1000")), Ok("xpu-0,XPU,24576,25:;".into()));
    set_usage(&mut s, "xpu-0", 4, 98304, 100);
    assert_eq!(try_fit(&s, &ask(1, "1000")), Err("1/1 NumaNotFit".into()));
    // hami-rs also needs a free slot: a device registered with 2 slots takes 2 quarters.
    let mut info = registered(1);
    info[0].count = 2;
    let two = node("n1").annotation(xpu_keys::REGISTER, &codec::encode_node_devices_json(&info));
    let mut s = two.snapshot(&v);
    set_usage(&mut s, "xpu-0", 2, 49152, 50);
    assert_eq!(try_fit(&s, &ask(1, "1000")), Err("1/1 NumaNotFit".into()));
    let mut sick = xpus(1).snapshot(&v);
    sick.devices[0].health = false;
    assert_eq!(try_fit(&sick, &ask(1, "1000")), Err("1/1 NumaNotFit".into()));
}

#[test]
fn mutex_takes_idle_devices_and_reports_the_busy_ones() {
    // In HAMi mutex requires unused; when nothing is found, busy devices that would otherwise have
    // fitted count as ExclusiveDeviceAllocateConflict.
    let v = vendors();
    let mut s = xpus(2).snapshot(&v);
    set_usage(&mut s, "xpu-0", 1, 24576, 25);
    let p = ask(1, "1000").annotation(GPU_SCHEDULER_POLICY, "mutex");
    assert_eq!(try_fit(&s, &p), Ok("xpu-1,XPU,24576,25:;".into()));
    set_usage(&mut s, "xpu-1", 1, 24576, 25);
    assert_eq!(try_fit(&s, &p), Err("2/2 ExclusiveDeviceAllocateConflict".into()));
    // A busy device that would not fit anyway is not a conflict.
    set_usage(&mut s, "xpu-1", 1, 49152, 50);
    assert_eq!(try_fit(&s, &p), Err("1/2 ExclusiveDeviceAllocateConflict".into()));
}

#[test]
fn two_equal_devices_give_the_pod_the_first() {
    // HAMi: the vXPU Fit runs Kunlun's selector, which scans the policy-sorted list from the
    // front; two equal devices stay in registration order, so xpu-0 comes first under every
    // policy. hami-rs scans device indexes from the lowest, which gives the same.
    let s = xpus(2).snapshot(&vendors());
    let rows = [
        ("default policy", ask(1, "1000"), "xpu-0,XPU,24576,25:;"),
        ("binpack", ask(1, "1000").annotation(GPU_SCHEDULER_POLICY, "binpack"), "xpu-0,XPU,24576,25:;"),
        ("mutex", ask(1, "1000").annotation(GPU_SCHEDULER_POLICY, "mutex"), "xpu-0,XPU,24576,25:;"),
        ("two devices", ask(2, "1000"), "xpu-0,XPU,24576,25:xpu-1,XPU,24576,25:;"),
    ];
    for (what, p, want) in rows {
        assert_eq!(try_fit(&s, &p), Ok(want.into()), "{what}");
    }
}

#[test]
fn uuid_selection_checks_both_annotation_pairs() {
    // As in HAMi, both hami.io/use-xpu-uuid / no-use-xpu-uuid and baidu.com/use-gpuuuid /
    // nouse-gpuuuid must pass.
    let s = xpus(8).snapshot(&vendors());
    let p =
        ask(1, "1000").annotation(xpu_keys::USE_UUID, "xpu-6").annotation(baidu_keys::BAIDU_USE_UUID, "xpu-6, xpu-7");
    assert_eq!(try_fit(&s, &p), Ok("xpu-6,XPU,24576,25:;".into()));
    let p = ask(1, "1000").annotation(xpu_keys::USE_UUID, "xpu-6").annotation(baidu_keys::BAIDU_NOUSE_UUID, "xpu-6");
    assert_eq!(try_fit(&s, &p), Err("8/8 CardUuidMismatch".into()));
}

#[test]
fn multi_device_requests_use_the_topology_selector_by_index() {
    // The same wing selector as Kunlun XPU, on device indexes.
    let v = vendors();
    let mut s = xpus(8).snapshot(&v);
    for i in [0, 1, 2, 3] {
        set_usage(&mut s, &format!("xpu-{i}"), 1, 98304, 100);
    }
    assert_eq!(try_fit(&s, &ask(2, "98304")), Ok("xpu-4,XPU,98304,100:xpu-5,XPU,98304,100:;".into()));
    assert_eq!(try_fit(&s, &ask(8, "1000")), Err("1/8 NumaNotFit".into()));
    s.devices.reverse();
    assert_eq!(
        try_fit(&s, &ask(4, "98304")),
        Ok("xpu-4,XPU,98304,100:xpu-5,XPU,98304,100:xpu-6,XPU,98304,100:xpu-7,XPU,98304,100:;".into())
    );
}

// ---------------------------------------------------------------------------------------------
// Annotations

#[test]
fn filter_writes_both_keys_identically() {
    let v = vendors();
    let snap = xpus(2).snapshot(&v);
    let req = ask(1, "1000").request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(id()).unwrap();
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: cs, pod: &req, unix_s: 1, unix_ns: 1 };
    let mut out = Vec::new();
    vx().annotations(&cx, &mut out);
    let want = "xpu-0,XPU,24576,25:;".to_owned();
    assert_eq!(
        out,
        [
            ("hami.io/xpu-devices-to-allocate".to_owned(), want.clone()),
            ("hami.io/xpu-devices-allocated".to_owned(), want)
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, property tests)

fn any_ask() -> impl Strategy<Value = Option<(u32, Option<u32>)>> {
    let mem = prop::option::of(prop::sample::select(vec![1000u32, 24576, 30000, 49152, 60000, 98304]));
    prop_oneof![1 => Just(None), 4 => (prop::sample::select(vec![1u32, 1, 1, 2, 4, 8]), mem).prop_map(Some)]
}

fn with_ask(p: PodBuilder, a: &Option<(u32, Option<u32>)>) -> PodBuilder {
    match a {
        None => p,
        Some((n, None)) => p.limit(VXPU, &n.to_string()),
        Some((n, Some(m))) => p.limit(VXPU, &n.to_string()).limit(MEM, &m.to_string()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn accepted_placements_never_overcommit_a_vxpu(
        n in 1u32..=8,
        slots in 1u32..=4,
        policy in prop::sample::select(vec!["binpack", "spread", "mutex"]),
        pods in prop::collection::vec((prop::collection::vec(any_ask(), 1..=3), any_ask()), 1..=8),
    ) {
        let mut info = registered(n);
        for d in &mut info {
            d.count = slots;
        }
        let v = vendors();
        let mut snap = node("n1").annotation(xpu_keys::REGISTER, &codec::encode_node_devices_json(&info)).snapshot(&v);
        for (i, (apps, init)) in pods.iter().enumerate() {
            let mut p = with_ask(pod().name(&format!("p{i}")).annotation(GPU_SCHEDULER_POLICY, policy), &apps[0]);
            for (j, a) in apps.iter().enumerate().skip(1) {
                p = with_ask(p.container(&format!("c{j}")), a);
            }
            p = with_ask(p.init("i"), init);
            let req = p.request_with(&v);
            place(&mut snap, &req, &v).map_err(TestCaseError::fail)?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine
