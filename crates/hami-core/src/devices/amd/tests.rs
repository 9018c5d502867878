use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::*;
use crate::devices::{LockKind, NoQuota};
use crate::model::DeviceInfo;
use crate::model::annotations::GPU_SCHEDULER_POLICY;
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::sched::NodeSnapshot;
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

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
fn requests_come_from_limits_only_with_cores_in_percent() {
    // HAMi's AMD request: gpu (limits only) 1..2^31-1; gpumem (limits only); mempct 0;
    // gpucores (limits only) 1..100, default 100.
    type Want = Option<(u32, u64, u32)>;
    let rows: [(&str, Quantities, Quantities, Want); 7] = [
        ("count only", &[(GPU, "1")], &[], Some((1, 0, 100))),
        ("count, memory and cores", &[(GPU, "2"), (MEM, "8192"), (CORES, "50")], &[], Some((2, 8192, 50))),
        ("count in requests is ignored", &[], &[(GPU, "1")], None),
        ("memory in requests is ignored", &[(GPU, "1")], &[(MEM, "8192")], Some((1, 0, 100))),
        ("cores in requests are ignored", &[(GPU, "1")], &[(CORES, "10")], Some((1, 0, 100))),
        ("count 0", &[(GPU, "0")], &[], None),
        ("memory and cores without a count", &[(MEM, "1"), (CORES, "10")], &[], None),
    ];
    for (what, l, r, want) in rows {
        let got = amd().request(VendorId(11), &container(l, r), &PodView::default()).unwrap();
        assert_eq!(got, want.map(|(n, m, c)| ContainerRequest::new(VendorId(11), n, m, 0, c)), "{what}");
    }
}

#[test]
fn out_of_range_memory_or_cores_refuse_the_pod() {
    // HAMi drops the container's request for these and places the pod with no reservation;
    // hami-rs refuses the pod. The core message is the webhook's.
    for (limits, name) in [
        (&[(GPU, "3000000000")][..], GPU),
        // HAMi reads a fractional or negative count as no request; hami-rs refuses it.
        (&[(GPU, "1.5")][..], GPU),
        (&[(GPU, "-1")][..], GPU),
        (&[(GPU, "1"), (MEM, "1.5")][..], MEM),
        (&[(GPU, "1"), (MEM, "-1")][..], MEM),
        (&[(GPU, "1"), (MEM, "3000000000")][..], MEM),
        (&[(GPU, "1"), (CORES, "0")][..], CORES),
        (&[(GPU, "1"), (CORES, "101")][..], CORES),
        (&[(GPU, "1"), (CORES, "12.5")][..], CORES),
    ] {
        let err = amd().request(VendorId(11), &container(limits, &[]), &PodView::default()).unwrap_err();
        assert!(err.to_string().contains(name), "{limits:?}: {err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Webhook

fn mutate(c: Value) -> Result<bool, String> {
    let mut c = c;
    let annotations = Map::new();
    let mut edits = PodEdits::default();
    let mut e = ContainerEdit { container: &mut c, index: 0, is_init: false };
    let mut p = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
    amd().mutate(&mut e, &mut p).map_err(|e| e.to_string())
}

#[test]
fn webhook_recognises_any_amd_limit_and_validates_cores_with_a_count() {
    // HAMi: recognised if count, memory or cores is in limits; with the count,
    // cores must be an integer percentage 1–100.
    let msg = Err("amd.com/gpucores must be an integer percentage between 1 and 100".to_owned());
    assert_eq!(mutate(json!({"resources": {"limits": {GPU: "1", CORES: "150"}}})), msg);
    assert_eq!(mutate(json!({"resources": {"limits": {GPU: "1", CORES: "0.5"}}})), msg);
    assert_eq!(mutate(json!({"resources": {"limits": {GPU: "1", CORES: "50"}}})), Ok(true));
    assert_eq!(mutate(json!({"resources": {"limits": {GPU: "1"}}})), Ok(true));
    // Memory or cores alone are recognised (the pod gets the scheduler name) but unchecked.
    assert_eq!(mutate(json!({"resources": {"limits": {MEM: "1024"}}})), Ok(true));
    assert_eq!(mutate(json!({"resources": {"limits": {CORES: "150"}}})), Ok(true));
    assert_eq!(mutate(json!({"resources": {"requests": {GPU: "1"}}})), Ok(false));
}

// ---------------------------------------------------------------------------------------------
// Discovery (`hami.io/node-amd-register`), health, clean-up, lock

#[test]
fn registration_is_json_or_colon_with_product_names() {
    let Discovery::Devices { devices, .. } = amd().discover(&two().view()) else { panic!("none") };
    assert_eq!(devices, [mi300x("GPU-a", 0), mi300x("GPU-b", 1)]);
    let colon = format!("GPU-a,10,196608,304,{MI300X},0,true:");
    let Discovery::Devices { devices, .. } = amd().discover(&node("n1").annotation(keys::REGISTER, &colon).view())
    else {
        panic!("none")
    };
    assert_eq!((&*devices[0].ty, devices[0].devcore), (MI300X, 304));
    assert!(matches!(amd().discover(&node("n1").annotation(keys::REGISTER, "[]").view()), Discovery::Absent));
    assert!(matches!(amd().discover(&node("n1").annotation(keys::REGISTER, "[{").view()), Discovery::Malformed { .. }));
    assert!(matches!(amd().discover(&node("n1").view()), Discovery::Absent));
}

#[test]
fn health_is_capacity_and_clean_up_removes_the_register_annotation() {
    // As in HAMi: healthy iff capacity of amd.com/gpu > 0 (no name: always healthy); AMD's
    // clean-up removes hami.io/node-amd-register; the shared hami.io/mutex.lock.
    assert_eq!(amd().health_rule(), HealthRule::CapacityPositive { resource: GPU.into() });
    assert_eq!(Amd::new(&AmdConfig::default()).health_rule(), HealthRule::AlwaysHealthy);
    assert_eq!(amd().cleanup(), Cleanup::RemoveAnnotation("hami.io/node-amd-register".into()));
    assert_eq!(amd().lock(), LockKind::Shared);
    assert_eq!(amd().resource_names(), [GPU, MEM, CORES]);
    let q = amd().quota_names();
    assert_eq!((q.memory.as_deref(), q.cores.as_deref(), q.memory_factor), (Some(MEM), Some(CORES), 1));
}

// ---------------------------------------------------------------------------------------------
// Fit (HAMi: cores are a percentage of the card's CUs; memory 0 means the whole card)

#[test]
fn cores_are_a_percentage_of_the_cus_and_memory_0_is_the_whole_card() {
    let d = |cus: u32| {
        crate::model::DeviceUsage::idle(
            std::sync::Arc::new(DeviceInfo::new("x", 0, 10, 1000, cus, MI300X)),
            VendorId(11),
        )
    };
    // memory = request, or the whole card when 0; CUs = floor(CUs × % ÷ 100) clamped to [1, CUs];
    // without a percentage, a whole-memory request takes every CU.
    for (mem, pct, cus, want) in [
        (0, 100, 304, (1000, Some(304))),
        (100, 50, 304, (100, Some(152))),
        (100, 1, 304, (100, Some(3))),
        (100, 5, 10, (100, Some(1))),
        (100, 100, 0, (100, None)),
        (0, 0, 304, (1000, Some(304))),
        (100, 0, 304, (100, Some(0))),
    ] {
        let (m, c) = demand(MemMiB(mem), pct, &d(cus));
        assert_eq!((m.get(), c), want, "mem {mem}, {pct} %, {cus} CUs");
    }
}

#[test]
fn the_walk_checks_health_type_uuid_slots_mutex_memory_and_cus() {
    let v = vendors();
    let snap = two().snapshot(&v);
    // Whole card by default; the entry carries the product name. Of the two idle cards, the one
    // registered last is tried first.
    assert_eq!(try_fit(&snap, &gpus(1)), Ok(format!("GPU-b,{MI300X},196608,304:;")));
    assert_eq!(
        try_fit(&snap, &gpus(1).limit(MEM, "8192").limit(CORES, "50")),
        Ok(format!("GPU-b,{MI300X},8192,152:;"))
    );
    // Type selection with amd.com/use-gputype / nouse-gputype (case-insensitive substrings).
    assert_eq!(try_fit(&snap, &gpus(1).annotation(keys::USE_TYPE, "mi250")), Err("2/2 CardTypeMismatch".into()));
    assert!(try_fit(&snap, &gpus(1).annotation(keys::USE_TYPE, "mi300x")).is_ok());
    assert_eq!(try_fit(&snap, &gpus(1).annotation(keys::NOUSE_TYPE, "Instinct")), Err("2/2 CardTypeMismatch".into()));
    // UUID selection with amd.com/use-gpu-uuid / nouse-gpu-uuid.
    assert_eq!(
        try_fit(&snap, &gpus(1).annotation(keys::USE_UUID, "GPU-b")),
        Ok(format!("GPU-b,{MI300X},196608,304:;"))
    );
    assert_eq!(
        try_fit(&snap, &gpus(2).annotation(keys::NOUSE_UUID, "GPU-b")),
        Err("1/2 AllocatedCardsInsufficientRequest, 1/2 CardUuidMismatch".into())
    );

    let mut s = two().snapshot(&v);
    s.devices[0].health = false;
    set_usage(&mut s, "GPU-b", 10, 0, 0);
    assert_eq!(try_fit(&s, &gpus(1).limit(MEM, "1")), Err("1/2 CardNotHealth, 1/2 CardTimeSlicingExhausted".into()));

    let mut s = two().snapshot(&v);
    set_usage(&mut s, "GPU-a", 1, 8192, 152);
    set_usage(&mut s, "GPU-b", 1, 196608, 0);
    // Mutex: busy devices conflict.
    let p = gpus(1).limit(MEM, "1").limit(CORES, "1").annotation(GPU_SCHEDULER_POLICY, "mutex");
    assert_eq!(try_fit(&s, &p), Err("2/2 ExclusiveDeviceAllocateConflict".into()));
    // GPU-b has no memory left, GPU-a not enough CUs for 60 % (182 of 152 free).
    assert_eq!(
        try_fit(&s, &gpus(1).limit(MEM, "1024").limit(CORES, "60")),
        Err("1/2 CardInsufficientCore, 1/2 CardInsufficientMemory".into())
    );
    assert_eq!(try_fit(&s, &gpus(1).limit(MEM, "1024").limit(CORES, "50")), Ok(format!("GPU-a,{MI300X},1024,152:;")));
}

// ---------------------------------------------------------------------------------------------
// Annotations

#[test]
fn filter_writes_both_keys_with_the_product_name() {
    let v = vendors();
    let snap = two().snapshot(&v);
    let req = gpus(2).limit(MEM, "1024").limit(CORES, "25").request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(id()).unwrap();
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: cs, pod: &req, unix_s: 1, unix_ns: 1 };
    let mut out = Vec::new();
    amd().annotations(&cx, &mut out);
    let want = format!("GPU-b,{MI300X},1024,76:GPU-a,{MI300X},1024,76:;");
    assert_eq!(
        out,
        [
            ("hami.io/amd-devices-to-allocate".to_owned(), want.clone()),
            ("hami.io/amd-devices-allocated".to_owned(), want.clone())
        ]
    );
    // Read back on restart with the product name as the type.
    let back = amd().decode_allocation(&pod().annotation(keys::ALLOCATED, &want).view()).unwrap().unwrap();
    assert_eq!((&*back[0][1].ty, back[0][1].usedcores), (MI300X, 76));
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and
    // AMD's Fit walks the list from the end, so of two idle cards GPU-b is tried first, under
    // every policy; a two-card request lists GPU-b first.
    let v = vendors();
    let snap = two().snapshot(&v);
    let rows = [
        ("default policy", gpus(1), format!("GPU-b,{MI300X},196608,304:;")),
        ("binpack", gpus(1).annotation(GPU_SCHEDULER_POLICY, "binpack"), format!("GPU-b,{MI300X},196608,304:;")),
        ("mutex", gpus(1).annotation(GPU_SCHEDULER_POLICY, "mutex"), format!("GPU-b,{MI300X},196608,304:;")),
        ("two cards", gpus(2).limit(MEM, "1024"), format!("GPU-b,{MI300X},1024,304:GPU-a,{MI300X},1024,304:;")),
    ];
    for (what, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), Ok(want), "{what}");
    }
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, property tests)

fn any_ask() -> impl Strategy<Value = Option<(u32, Option<u32>, Option<u32>)>> {
    let ask = (
        prop_oneof![3 => Just(1u32), 1 => 1u32..=3],
        prop::option::of(prop_oneof![3 => 1u32..=65536, 1 => Just(196608)]),
        prop::option::of(1u32..=100),
    );
    prop_oneof![1 => Just(None), 4 => ask.prop_map(Some)]
}

fn with_ask(p: PodBuilder, a: &Option<(u32, Option<u32>, Option<u32>)>) -> PodBuilder {
    let Some((n, mem, cores)) = a else { return p };
    let mut p = p.limit(GPU, &n.to_string());
    if let Some(m) = mem {
        p = p.limit(MEM, &m.to_string());
    }
    if let Some(c) = cores {
        p = p.limit(CORES, &c.to_string());
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn accepted_placements_never_overcommit_memory_or_cus(
        cus in prop::collection::vec(prop::sample::select(vec![1u32, 10, 110, 304]), 1..=4),
        count in 1u32..=4,
        policy in prop::sample::select(vec!["binpack", "spread", "mutex"]),
        pods in prop::collection::vec((prop::collection::vec(any_ask(), 1..=3), any_ask()), 1..=6),
    ) {
        let devs: Vec<DeviceInfo> = cus.iter().enumerate().map(|(i, c)| DeviceInfo::new(&format!("GPU-{i}"), i as u32, count, 196608, *c, MI300X)).collect();
        let v = vendors();
        let mut snap = amd_node(&devs).snapshot(&v);
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
