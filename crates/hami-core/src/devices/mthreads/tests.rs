use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::*;
use crate::devices::{Cleanup, HealthRule, NoQuota};
use crate::model::annotations as common;
use crate::model::codec::encode_pod_devices;
use crate::model::edit::PodEdits;
use crate::model::{ContainerDevices, PodRequest};
use crate::sched::NodeSnapshot;
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

fn chart() -> MthreadsConfig {
    MthreadsConfig::chart()
}

fn mt() -> VendorId {
    vendors().by_name(WORD).expect("Mthreads is registered")
}

fn try_fit(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    let v = vendors();
    let req = p.request_with(&v);
    match fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()) {
        Ok(fit) => Ok(encode_pod_devices(fit.devices.vendor(mt()).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

// ---------------------------------------------------------------------------------------------
// Request derivation (HAMi: sgpu-memory × 512 MiB; memory and cores divided by the count)

#[derive(Debug)]
enum Want {
    Nothing,
    /// `(nums, memreq MiB per device, mempct, cores per device)`.
    Req(u32, u64, u32, u32),
    Refused(&'static str),
}

#[test]
fn request_derivation_splits_memory_and_cores_over_the_gpus() {
    use Want::*;
    type Rows<'a> = [(&'a str, &'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], Want)];
    let rows: &Rows<'_> = &[
        ("no count", &[(SMEM, "8")], &[], Nothing),
        ("count 0", &[(VGPU, "0")], &[], Nothing),
        // HAMi reads these counts as no request; hami-rs refuses them.
        ("negative count", &[(VGPU, "-1")], &[], Refused(VGPU)),
        ("fractional count", &[(VGPU, "1.5")], &[], Refused(VGPU)),
        ("count past int32", &[(VGPU, "2147483648")], &[], Refused(VGPU)),
        // Without memory: the whole memory (percentage 100); cores default 0.
        ("count alone", &[(VGPU, "1")], &[], Req(1, 0, 100, 0)),
        ("count from requests", &[], &[(VGPU, "1")], Req(1, 0, 100, 0)),
        // memreq: sgpu-memory × 512 MiB.
        ("one GPU, 8 units", &[(VGPU, "1"), (SMEM, "8"), (SCORE, "4")], &[], Req(1, 4096, 0, 4)),
        ("memory from requests", &[(VGPU, "1")], &[(SMEM, "8")], Req(1, 4096, 0, 0)),
        // HAMi: memory and cores are the container's totals, divided by the count.
        ("two whole GPUs", &[(VGPU, "2"), (SMEM, "192"), (SCORE, "32")], &[], Req(2, 49152, 0, 16)),
        ("division truncates", &[(VGPU, "3"), (SMEM, "10"), (SCORE, "16")], &[], Req(3, 1706, 0, 5)),
        ("memory 0", &[(VGPU, "1"), (SMEM, "0")], &[], Req(1, 0, 100, 0)),
        // A memory value HAMi would drop (placing the pod with no reservation) is refused.
        ("memory past the int32 limit", &[(VGPU, "1"), (SMEM, "4194304")], &[], Refused(SMEM)),
        ("fractional memory", &[(VGPU, "1"), (SMEM, "2.5")], &[], Refused(SMEM)),
        ("negative memory", &[(VGPU, "1"), (SMEM, "-2")], &[], Refused(SMEM)),
        // HAMi takes the default for cores that are not an integer; hami-rs refuses them.
        ("non-integer cores", &[(VGPU, "1"), (SCORE, "1.5")], &[], Refused(SCORE)),
        ("negative cores", &[(VGPU, "1"), (SCORE, "-16")], &[], Refused(SCORE)),
    ];
    let v = Mthreads::new(&chart());
    for (what, limits, requests, want) in rows {
        let got = v.request(VendorId(5), &container(limits, requests), &PodView::default());
        match (want, got) {
            (Nothing, Ok(None)) => {}
            (Req(nums, memreq, mempct, cores), Ok(Some(r))) => {
                assert_eq!(r, ContainerRequest::new(VendorId(5), *nums, *memreq, *mempct, *cores), "{what}")
            }
            (Refused(name), Err(why)) => assert!(why.to_string().contains(name), "{what}: {why}"),
            (want, got) => panic!("{what}: wanted {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn resource_and_quota_names_use_512_mib_units() {
    // As in HAMi, Mthreads quota limits are in 512 MiB units.
    let v = Mthreads::new(&chart());
    assert_eq!(v.resource_names(), [VGPU, SMEM, SCORE]);
    let q = v.quota_names();
    assert_eq!((q.memory.as_deref(), q.cores.as_deref(), q.memory_factor), (Some(SMEM), Some(SCORE), 512));
}

// ---------------------------------------------------------------------------------------------
// Webhook (HAMi's Mthreads rules)

struct Mutated {
    result: Result<bool, String>,
    container: Value,
    edits: PodEdits,
}

impl Mutated {
    fn limit(&self, name: &str) -> Option<&str> {
        self.container["resources"]["limits"][name].as_str()
    }
}

fn mutate(before: &Value) -> Mutated {
    let v = Mthreads::new(&chart());
    let mut container = before.clone();
    let annotations = Map::new();
    let mut edits = PodEdits::default();
    let result = {
        let mut c = ContainerEdit { container: &mut container, index: 0, is_init: false };
        let mut pod = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        v.mutate(&mut c, &mut pod).map_err(|e| e.to_string())
    };
    Mutated { result, container, edits }
}

#[test]
fn webhook_refuses_a_count_that_is_not_positive() {
    // HAMi: count (limits, else requests) ≤ 0 → `mthreads.com/vgpu must be greater than 0`.
    for c in [
        json!({"name": "c", "resources": {"limits": {VGPU: "0"}}}),
        json!({"name": "c", "resources": {"requests": {VGPU: "-1"}}}),
    ] {
        assert_eq!(mutate(&c).result, Err("mthreads.com/vgpu must be greater than 0".to_owned()), "{c}");
    }
}

#[test]
fn webhook_gives_more_than_one_gpu_whole_gpus() {
    // HAMi: count > 1 → cores 16 × count, memory 96 × count and
    // `mthreads.com/request-gpu-num: <count>`, whatever memory was asked for.
    let m = mutate(&json!({"name": "c", "resources": {"limits": {VGPU: "2", SMEM: "8"}}}));
    assert_eq!(m.result, Ok(true));
    assert_eq!((m.limit(SCORE), m.limit(SMEM)), (Some("32"), Some("192")));
    assert_eq!(m.edits.annotations, [(keys::REQUEST_GPU_NUM.to_owned(), "2".to_owned())]);
    // The count may come from requests.
    let m = mutate(&json!({"name": "c", "resources": {"requests": {VGPU: 3}}}));
    assert_eq!((&m.result, m.limit(SCORE), m.limit(SMEM)), (&Ok(true), Some("48"), Some("288")));
}

#[test]
fn webhook_checks_single_gpu_memory_sizes() {
    // HAMi: one GPU without memory → cores 16, memory 96; with memory it must be one
    // of 2, 4, 8, 16, 32, 64, 96 (units of 512 MiB), else HAMi's error text.
    let m = mutate(&json!({"name": "c", "resources": {"limits": {VGPU: "1"}}}));
    assert_eq!((&m.result, m.limit(SCORE), m.limit(SMEM)), (&Ok(true), Some("16"), Some("96")));
    assert_eq!(m.edits, PodEdits::default());
    for ok in ["2", "4", "8", "16", "32", "64", "96"] {
        let before = json!({"name": "c", "resources": {"limits": {VGPU: "1", SMEM: ok, SCORE: "4"}}});
        let m = mutate(&before);
        assert_eq!((m.result, m.container), (Ok(true), before), "{ok} is left as it is");
    }
    for bad in [
        json!({"name": "c", "resources": {"limits": {VGPU: "1", SMEM: "3"}}}),
        json!({"name": "c", "resources": {"limits": {VGPU: "1", SMEM: "128"}}}),
        json!({"name": "c", "resources": {"limits": {VGPU: "1"}, "requests": {SMEM: "6"}}}),
    ] {
        assert_eq!(
            mutate(&bad).result,
            Err("sGPU memory request value is invalid, valid values are [2, 4, 8, 16, 32, 64, 96]".to_owned()),
            "{bad}"
        );
    }
}

#[test]
fn webhook_ignores_containers_without_a_count() {
    let before = json!({"name": "c", "resources": {"limits": {SMEM: "3"}}});
    let m = mutate(&before);
    assert_eq!((m.result, m.container, m.edits), (Ok(false), before, PodEdits::default()));
}

// ---------------------------------------------------------------------------------------------
// Discovery (devices made up from node capacity)

fn devices_of(d: Discovery) -> Vec<DeviceInfo> {
    match d {
        Discovery::Devices { devices, .. } => devices,
        Discovery::Absent => panic!("absent"),
        Discovery::Malformed { key, error } => panic!("malformed {key}: {error}"),
    }
}

#[test]
fn capacity_becomes_one_device_per_16_cores() {
    // As HAMi makes them up from C sgpu-core and M sgpu-memory: ceil(C/16) devices
    // `<node>-mthreads-<i>`, 100 slots, M×512×16/C MiB, 16 cores, type `Mthreads`.
    let devs = devices_of(Mthreads::new(&chart()).discover(&gpus(2).view()));
    let want: Vec<DeviceInfo> =
        (0..2).map(|i| DeviceInfo::new(&format!("n1-mthreads-{i}"), i, 100, 49152, 16, "Mthreads")).collect();
    assert_eq!(devs, want);
    // A partial GPU still counts; memory divides by the whole core capacity (truncating).
    let n = node("n1").capacity(SCORE, "20").capacity(SMEM, "100");
    let devs = devices_of(Mthreads::new(&chart()).discover(&n.view()));
    assert_eq!(devs.len(), 2);
    assert_eq!(devs[1].devmem, MemMiB(100 * 512 * 16 / 20));
}

#[test]
fn missing_or_zero_core_capacity_means_no_devices() {
    let v = Mthreads::new(&chart());
    assert!(matches!(v.discover(&node("n1").view()), Discovery::Absent));
    assert!(matches!(v.discover(&node("n1").capacity(SCORE, "0").capacity(SMEM, "96").view()), Discovery::Absent));
    let huge = node("n1").capacity(SCORE, "16").capacity(SMEM, "10000000");
    assert!(matches!(v.discover(&huge.view()), Discovery::Malformed { key, .. } if key == SMEM));
    // Not HAMi's behaviour (it would loop): a broken core capacity is reported, not synthesised.
    let many = node("n1").capacity(SCORE, "1000000000").capacity(SMEM, "96");
    assert!(matches!(v.discover(&many.view()), Discovery::Malformed { key, .. } if key == SCORE));
}

// ---------------------------------------------------------------------------------------------
// Fit (HAMi's generic device walk, plus the `Mthreads` type and the same-device rule)

#[test]
fn each_walk_check_rejects_with_hamis_reason() {
    let rows: Vec<(&str, NodeSnapshot, PodBuilder, Result<&str, &str>)> = vec![
        // Of two idle GPUs the one registered last is tried first.
        ("one GPU share", idle(2), mt_pod(1, 8, 4), Ok("n1-mthreads-1,Mthreads,4096,4:;")),
        // The webhook's whole GPU: all memory and 16 cores.
        (
            "whole GPU",
            with_usage(idle(2), &[(0, 1, 1024, 1)]),
            mt_pod(1, 96, 16),
            Ok("n1-mthreads-1,Mthreads,49152,16:;"),
        ),
        (
            "two whole GPUs",
            idle(2),
            mt_pod(2, 192, 32),
            Ok("n1-mthreads-1,Mthreads,49152,16:n1-mthreads-0,Mthreads,49152,16:;"),
        ),
        ("memory", with_usage(idle(1), &[(0, 1, 49152 - 2048, 0)]), mt_pod(1, 8, 4), Err("1/1 CardInsufficientMemory")),
        ("cores", with_usage(idle(1), &[(0, 1, 0, 10)]), mt_pod(1, 8, 8), Err("1/1 CardInsufficientCore")),
        // Cores total 16, all booked: a core-less task may not join.
        (
            "core-less on a full GPU",
            with_usage(idle(1), &[(0, 1, 0, 16)]),
            mt_pod(1, 8, 0),
            Err("1/1 CardComputeUnitsExhausted"),
        ),
        ("slots", with_usage(idle(1), &[(0, 100, 0, 0)]), mt_pod(1, 8, 4), Err("1/1 CardTimeSlicingExhausted")),
        ("more than the node has", idle(2), mt_pod(3, 8, 4), Err("NodeInsufficientDevice")),
        (
            "mutex",
            with_usage(idle(1), &[(0, 1, 1024, 1)]),
            mt_pod(1, 8, 4).annotation(common::GPU_SCHEDULER_POLICY, "mutex"),
            Err("1/1 ExclusiveDeviceAllocateConflict"),
        ),
    ];
    for (what, snap, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), want.map(str::to_owned).map_err(str::to_owned), "{what}");
    }
}

#[test]
fn a_pods_containers_share_one_gpu() {
    // HAMi's same-device rule: every device given to earlier containers must be this device
    // (CardNotFoundCustomFilterRule), so the whole pod lands on one GPU.
    let p = and_container(mt_pod(1, 8, 4), "second", 8, 4);
    assert_eq!(try_fit(&idle(2), &p), Ok("n1-mthreads-1,Mthreads,4096,4:;n1-mthreads-1,Mthreads,4096,4:;".into()));
    // The second container does not fit beside the first: the other GPU is ruled out, so the
    // pod does not fit even though that GPU is idle.
    let p = and_container(mt_pod(1, 64, 8), "second", 64, 8);
    assert_eq!(try_fit(&idle(2), &p), Err("1/2 CardInsufficientMemory, 1/2 CardNotFoundCustomFilterRule".into()));
    // Two GPUs for the first container: no single device can hold the second.
    let p = and_container(mt_pod(2, 16, 8), "second", 8, 4);
    assert_eq!(try_fit(&idle(2), &p), Err("2/2 CardNotFoundCustomFilterRule".into()));
    // Init containers count as earlier containers too.
    let p = mt_pod(1, 8, 4).init("setup").limit(VGPU, "1").limit(SMEM, "8");
    assert_eq!(try_fit(&idle(2), &p), Ok("n1-mthreads-1,Mthreads,4096,0:;n1-mthreads-1,Mthreads,4096,4:;".into()));
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and
    // Mthreads' Fit walks the list from the end, so n1-mthreads-1 is tried first, under every
    // policy; later containers follow it by the same-device rule.
    let snap = idle(2);
    let policy = |p: &str| mt_pod(1, 8, 4).annotation(common::GPU_SCHEDULER_POLICY, p);
    let rows = [
        ("default policy", mt_pod(1, 8, 4), "n1-mthreads-1,Mthreads,4096,4:;"),
        ("binpack", policy("binpack"), "n1-mthreads-1,Mthreads,4096,4:;"),
        ("mutex", policy("mutex"), "n1-mthreads-1,Mthreads,4096,4:;"),
        ("two GPUs", mt_pod(2, 192, 32), "n1-mthreads-1,Mthreads,49152,16:n1-mthreads-0,Mthreads,49152,16:;"),
        (
            "two containers",
            and_container(mt_pod(1, 8, 4), "second", 8, 4),
            "n1-mthreads-1,Mthreads,4096,4:;n1-mthreads-1,Mthreads,4096,4:;",
        ),
    ];
    for (what, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), Ok(want.into()), "{what}");
    }
}

#[test]
fn devices_must_have_an_mthreads_type() {
    // HAMi: the type must contain `Mthreads`. Discovery always writes it, so only a
    // device edited into the snapshot can miss it; the check mirrors HAMi's.
    let mut snap = idle(2);
    snap.devices[1].info = Arc::new(DeviceInfo { ty: Arc::from("Other"), ..(*snap.devices[1].info).clone() });
    assert_eq!(try_fit(&snap, &mt_pod(1, 8, 4)), Ok("n1-mthreads-0,Mthreads,4096,4:;".into()));
    assert_eq!(
        try_fit(&snap, &mt_pod(2, 8, 4)),
        Err("1/2 AllocatedCardsInsufficientRequest, 1/2 CardTypeMismatch".into())
    );
}

#[test]
fn uuid_selection_uses_the_mthreads_ai_keys() {
    // HAMi's keys: mthreads.ai/use-gpuuuid / nouse-gpuuuid (note `.ai`).
    let snap = idle(2);
    let p = |k: &str, v: &str| mt_pod(1, 8, 4).annotation(k, v);
    assert_eq!(try_fit(&snap, &p(keys::USE_UUID, "n1-mthreads-0")), Ok("n1-mthreads-0,Mthreads,4096,4:;".into()));
    assert_eq!(try_fit(&snap, &p(keys::NOUSE_UUID, "n1-mthreads-1")), Ok("n1-mthreads-0,Mthreads,4096,4:;".into()));
    assert_eq!(try_fit(&snap, &p(keys::USE_UUID, "gpu-9")), Err("2/2 CardUuidMismatch".into()));
}

// ---------------------------------------------------------------------------------------------
// Annotations, lock, health

fn written(snap: &NodeSnapshot, p: &PodBuilder) -> Vec<(String, String)> {
    let v = vendors();
    let req: PodRequest = p.request_with(&v);
    let fit = fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs: Vec<ContainerDevices> = fit.devices.vendor(mt()).unwrap().to_vec();
    let cx = WriteCx {
        node: &snap.name,
        devs: &snap.devices,
        devices: &cs,
        pod: &req,
        unix_s: 1787293239,
        unix_ns: 1787293239123456789,
    };
    let mut out = Vec::new();
    Mthreads::new(&chart()).annotations(&cx, &mut out);
    out
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn filter_writes_the_allocated_key_and_the_mthreads_extras() {
    // As HAMi writes them: no to-allocate key; gpu-index of the last container holding devices;
    // predicate-time in unix-ns; predicate-node.
    let out = written(&idle(2), &mt_pod(2, 192, 32));
    assert_eq!(
        out,
        pairs(&[
            (keys::ALLOCATED, "n1-mthreads-1,Mthreads,49152,16:n1-mthreads-0,Mthreads,49152,16:;"),
            (keys::GPU_INDEX, "1,0"),
            (keys::PREDICATE_TIME, "1787293239123456789"),
            (keys::PREDICATE_NODE, "n1"),
        ])
    );
    // The last container holding devices, not the last container.
    let p = mt_pod(1, 8, 4).annotation(keys::USE_UUID, "n1-mthreads-1").container("plain");
    let out = written(&idle(2), &p);
    assert_eq!(out[0].1, "n1-mthreads-1,Mthreads,4096,4:;;");
    assert_eq!(out[1], (keys::GPU_INDEX.to_owned(), "1".to_owned()));
    let v = Mthreads::new(&chart());
    assert!(out.iter().all(|(k, _)| v.pod_keys().contains(k)));
    assert_eq!(v.decode_allocation(&pod().annotation(&out[0].0, &out[0].1).view()).unwrap().unwrap().len(), 3);
}

#[test]
fn no_lock_always_healthy_nothing_to_clean_up() {
    // As in HAMi: no lock, always healthy.
    let v = Mthreads::new(&chart());
    assert_eq!(v.lock(), LockKind::None);
    assert_eq!(v.health_rule(), HealthRule::AlwaysHealthy);
    assert_eq!(v.cleanup(), Cleanup::Nothing);
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, "Property tests")

fn any_limits() -> impl Strategy<Value = Limits> {
    prop::option::weighted(
        0.8,
        (
            prop_oneof![3 => Just(1u32), 1 => 1u32..=3],
            prop::option::of(
                prop_oneof![3 => prop::sample::select(&[2u32, 4, 8, 16, 32, 64, 96][..]), 1 => 0u32..=300],
            ),
            prop::option::of(prop_oneof![3 => 0u32..=16, 1 => 0u32..=48]),
        ),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn accepted_placements_never_overcommit_a_gpu(
        (n, usage) in (1u32..=4).prop_flat_map(|n| {
            (Just(n), prop::collection::vec((0u32..=100, 0u64..=49152, 0u32..=16), n as usize))
        }),
        init in any_limits(),
        apps in prop::collection::vec(any_limits(), 1..=3),
        policy in prop::sample::select(&["binpack", "spread", "mutex"][..]),
    ) {
        let v = vendors();
        let usage: Vec<(usize, u32, u64, u32)> =
            usage.into_iter().enumerate().map(|(i, (s, m, c))| (i, s, m, c)).collect();
        let snap = with_usage(gpus(n).snapshot(&v), &usage);
        let mut p = with(pod(), &apps[0]);
        for (i, l) in apps.iter().enumerate().skip(1) {
            p = with(p.container(&format!("c{i}")), l);
        }
        p = with(p.init("i0"), &init).annotation(common::GPU_SCHEDULER_POLICY, policy);
        let req = p.request_with(&v);
        if let Ok(fit) = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()) {
            check_within_capacity(&snap, &req, &fit.devices, &v).map_err(TestCaseError::fail)?;
            // The same-device rule: a container after the first holding devices uses one device,
            // the one every earlier container used.
            let cs = fit.devices.vendor(mt()).unwrap_or(&[]);
            let mut first: Option<&crate::model::DeviceUuid> = None;
            for c in cs.iter().filter(|c| !c.is_empty()) {
                match first {
                    None => first = c.first().map(|d| &d.uuid),
                    Some(u) => prop_assert!(c.iter().all(|d| &d.uuid == u) && cs.iter().flatten().all(|d| &d.uuid == u)),
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine (in-memory backend)
