use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::*;
use crate::config::device::DeviceConfig;
use crate::devices::{Cleanup, Enable, LockKind, NoQuota, Vendors};
use crate::model::annotations as common;
use crate::model::codec::{encode_node_devices_colon, encode_node_devices_json, encode_pod_devices};
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::model::{ContainerDevice, ContainerDevices, DeviceInfo, PodRequest};
use crate::sched::NodeSnapshot;
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

/// The chart's BI-V150 entry.
fn bi_v150() -> IluvatarConfig {
    DeviceConfig::chart().iluvatars.into_iter().find(|c| c.common_word == "BI-V150").expect("the chart lists BI-V150")
}

fn chip(v: &Vendors, cw: &str) -> VendorId {
    v.by_name(cw).unwrap_or_else(|| panic!("{cw} is registered"))
}

/// Two idle 32 GiB BI-V150 devices `ix-0`, `ix-1`.
fn idle() -> NodeSnapshot {
    chips(&[dev("ix-0", 0, 32768), dev("ix-1", 1, 32768)]).snapshot(&vendors())
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

fn try_fit(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    let v = vendors();
    let req = p.request_with(&v);
    match fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()) {
        Ok(fit) => Ok(encode_pod_devices(fit.devices.vendor(chip(&v, "BI-V150")).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

// ---------------------------------------------------------------------------------------------
// Registry and names

#[test]
fn one_backend_per_configured_chip_only_with_enable_iluvatar() {
    // As in HAMi, one backend per `iluvatars` entry, behind --enable-iluvatar.
    let on = vendors();
    for cw in ["MR-V100", "MR-V50", "BI-V150", "BI-V100"] {
        assert_eq!(on.get(chip(&on, cw)).name(), cw);
    }
    let off = Vendors::from_config(&DeviceConfig::chart(), Enable { ascend: false, iluvatar: false });
    assert!(off.by_name("BI-V150").is_none());
}

#[test]
fn keys_and_resources_embed_the_common_word() {
    // HAMi's Iluvatar keys and resources all carry the chip's common word; quota memory is in
    // 256 MiB units.
    let v = Iluvatar::new(&bi_v150());
    assert_eq!(v.resource_names(), [VGPU, VMEM, VCORE]);
    let q = v.quota_names();
    assert_eq!((q.memory.as_deref(), q.cores.as_deref(), q.memory_factor), (Some(VMEM), Some(VCORE), 256));
    assert_eq!(v.allocated_key(), Some("hami.io/BI-V150-devices-allocated"));
    assert_eq!(v.pod_keys(), ["hami.io/BI-V150-devices-to-allocate", "hami.io/BI-V150-devices-allocated"]);
    assert_eq!(keys::register("BI-V150"), "hami.io/node-BI-V150-register");
    assert_eq!(keys::handshake("BI-V150"), "hami.io/node-handshake-BI-V150");
    assert_eq!(keys::use_uuid("BI-V150"), "hami.io/use-BI-V150-uuid");
    assert_eq!(keys::nouse_uuid("BI-V150"), "hami.io/no-use-BI-V150-uuid");
}

// ---------------------------------------------------------------------------------------------
// Request derivation (HAMi: memory = vMem × 256 MiB, cores default 0)

#[derive(Debug)]
enum Want {
    Nothing,
    /// `(nums, memreq MiB, mempct, cores)`.
    Req(u32, u64, u32, u32),
    Refused(&'static str),
}

#[test]
fn request_derivation_follows_hami_field_by_field() {
    use Want::*;
    type Rows<'a> = [(&'a str, &'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], Want)];
    let rows: &Rows<'_> = &[
        ("no count", &[(VMEM, "4")], &[], Nothing),
        ("count 0", &[(VGPU, "0")], &[], Nothing),
        // HAMi reads a fractional count as no request; hami-rs refuses it.
        ("fractional count", &[(VGPU, "1.5")], &[], Refused(VGPU)),
        ("another chip's count", &[(MR_VGPU, "1")], &[], Nothing),
        // Without memory the whole device's memory (percentage 100); cores default 0.
        ("count alone", &[(VGPU, "1")], &[], Req(1, 0, 100, 0)),
        ("count from requests", &[], &[(VGPU, "2")], Req(2, 0, 100, 0)),
        ("count past int32", &[(VGPU, "2147483648")], &[], Refused(VGPU)),
        // memreq: vMem × 256 MiB.
        ("memory", &[(VGPU, "1"), (VMEM, "64")], &[], Req(1, 16384, 0, 0)),
        ("memory from requests", &[(VGPU, "1")], &[(VMEM, "64")], Req(1, 16384, 0, 0)),
        ("memory 0", &[(VGPU, "1"), (VMEM, "0")], &[], Req(1, 0, 100, 0)),
        ("memory past the int32 limit", &[(VGPU, "1"), (VMEM, "8388608")], &[], Refused(VMEM)),
        // Refused, where HAMi drops the request and places the pod with no reservation.
        ("fractional memory", &[(VGPU, "1"), (VMEM, "0.5")], &[], Refused(VMEM)),
        ("negative memory", &[(VGPU, "1"), (VMEM, "-4")], &[], Refused(VMEM)),
        // cores: vCore, default 0.
        ("cores", &[(VGPU, "1"), (VCORE, "50")], &[], Req(1, 0, 100, 50)),
        ("cores from requests", &[(VGPU, "1")], &[(VCORE, "50")], Req(1, 0, 100, 50)),
        ("webhook's whole-device cores", &[(VGPU, "2"), (VCORE, "200")], &[], Req(2, 0, 100, 200)),
        // HAMi takes the default for cores that are not an integer; hami-rs refuses them.
        ("non-integer cores", &[(VGPU, "1"), (VCORE, "0.5")], &[], Refused(VCORE)),
        ("negative cores", &[(VGPU, "1"), (VCORE, "-1")], &[], Refused(VCORE)),
    ];
    let v = Iluvatar::new(&bi_v150());
    for (what, limits, requests, want) in rows {
        let got = v.request(VendorId(7), &container(limits, requests), &PodView::default());
        match (want, got) {
            (Nothing, Ok(None)) => {}
            (Req(nums, memreq, mempct, cores), Ok(Some(r))) => {
                assert_eq!(r, ContainerRequest::new(VendorId(7), *nums, *memreq, *mempct, *cores), "{what}")
            }
            (Refused(name), Err(why)) => assert!(why.to_string().contains(name), "{what}: {why}"),
            (want, got) => panic!("{what}: wanted {want:?}, got {got:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Webhook (HAMi's Iluvatar rules)

fn mutate(before: &Value) -> (Result<bool, String>, Value) {
    let v = Iluvatar::new(&bi_v150());
    let mut after = before.clone();
    let annotations = Map::new();
    let mut edits = PodEdits::default();
    let r = {
        let mut c = ContainerEdit { container: &mut after, index: 0, is_init: false };
        let mut pod = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        v.mutate(&mut c, &mut pod).map_err(|e| e.to_string())
    };
    assert_eq!(edits, PodEdits::default(), "no pod-level edits");
    (r, after)
}

#[test]
fn webhook_sets_whole_device_cores_for_more_than_one_device() {
    // HAMi: count > 1 → limits[vCore] = 100 × count (Go's Value, rounded up).
    let (r, after) = mutate(&json!({"name": "train", "resources": {"limits": {VGPU: "2", VMEM: "64"}}}));
    assert_eq!(r, Ok(true));
    assert_eq!(after["resources"]["limits"][VCORE], "200");
    // An explicit vCore is overwritten as well.
    let (_, after) = mutate(&json!({"name": "train", "resources": {"limits": {VGPU: 3, VCORE: "50"}}}));
    assert_eq!(after["resources"]["limits"][VCORE], "300");
    // One device keeps what it asked for.
    let (_, after) = mutate(&json!({"name": "train", "resources": {"limits": {VGPU: "1", VCORE: "50"}}}));
    assert_eq!(after["resources"]["limits"][VCORE], "50");
}

#[test]
fn webhook_exports_the_container_name_once() {
    // HAMi: SOL_CONTINER_NAME=<container name> (sic) unless present or the name is empty.
    let (r, after) = mutate(&json!({"name": "train", "resources": {"limits": {VGPU: "1"}}}));
    assert_eq!(r, Ok(true));
    assert_eq!(after["env"], json!([{"name": "SOL_CONTINER_NAME", "value": "train"}]));
    let present = json!({"name": "train", "env": [{"name": "SOL_CONTINER_NAME", "value": "x"}], "resources": {"limits": {VGPU: "1"}}});
    assert_eq!(mutate(&present).1, present);
    let nameless = json!({"resources": {"limits": {VGPU: "1"}}});
    assert_eq!(mutate(&nameless), (Ok(true), nameless));
}

#[test]
fn webhook_ignores_containers_without_the_count_in_limits() {
    // HAMi: the count must be in limits to be recognised; nothing changes otherwise.
    for c in [
        json!({"name": "c", "resources": {"requests": {VGPU: "2"}}}),
        json!({"name": "c", "resources": {"limits": {MR_VGPU: "2"}}}),
        json!({"name": "c"}),
    ] {
        assert_eq!(mutate(&c), (Ok(false), c.clone()));
    }
    let (r, _) = mutate(&json!({"name": "c", "resources": {"limits": {VGPU: "two"}}}));
    assert!(r.is_err_and(|e| e.to_string().contains(VGPU)));
}

// ---------------------------------------------------------------------------------------------
// Discovery

fn discover(annotations: &[(&str, &str)]) -> Discovery {
    let mut n = node("n1");
    for (k, v) in annotations {
        n = n.annotation(k, v);
    }
    Iluvatar::new(&bi_v150()).discover(&n.view())
}

fn devices_of(d: Discovery) -> Vec<DeviceInfo> {
    match d {
        Discovery::Devices { devices, .. } => devices,
        Discovery::Absent => panic!("absent"),
        Discovery::Malformed { key, error } => panic!("malformed {key}: {error}"),
    }
}

#[test]
fn registration_reads_the_chips_own_annotation_in_either_form() {
    // HAMi reads a colon list in hami.io/node-<cw>-register; hami-rs accepts JSON too.
    let want = vec![dev("ix-0", 0, 32768), dev("ix-1", 1, 32768)];
    let reg = keys::register("BI-V150");
    assert_eq!(devices_of(discover(&[(&reg, &encode_node_devices_colon(&want))])), want);
    assert_eq!(devices_of(discover(&[(&reg, &encode_node_devices_json(&want))])), want);
    let seven = "ix-0,16,32768,100,BI-V150,0,true:";
    assert_eq!(devices_of(discover(&[(&reg, seven)])), want[..1]);
    // Another chip's annotation is not this chip's.
    let other = keys::register("MR-V100");
    assert!(matches!(discover(&[(&other, seven)]), Discovery::Absent));
    assert!(matches!(discover(&[]), Discovery::Absent));
    assert!(matches!(discover(&[(&reg, "[]")]), Discovery::Absent));
    assert!(matches!(discover(&[(&reg, "ix-0,16,32768:")]), Discovery::Malformed { key, .. } if key == reg));
}

// ---------------------------------------------------------------------------------------------
// Fit (HAMi's generic device walk: type always passes, UUID selection)

#[test]
fn each_walk_check_rejects_with_hamis_reason() {
    let rows: Vec<(&str, NodeSnapshot, PodBuilder, Result<&str, &str>)> = vec![
        // Cores default 0, so devices are shared without an exclusive rule.
        (
            "shares a busy device",
            with_usage(idle(), &[(0, 1, 4096, 30), (1, 2, 8192, 60)]),
            ix_pod(1, 16, 0),
            Ok("ix-0,BI-V150,4096,0:;"),
        ),
        ("whole memory", with_usage(idle(), &[(0, 1, 4096, 30)]), pod().limit(VGPU, "1"), Ok("ix-1,BI-V150,32768,0:;")),
        (
            "slots",
            with_usage(idle(), &[(0, 16, 0, 0), (1, 16, 0, 0)]),
            ix_pod(1, 4, 0),
            Err("2/2 CardTimeSlicingExhausted"),
        ),
        (
            "memory",
            with_usage(idle(), &[(0, 1, 30000, 0), (1, 1, 30000, 0)]),
            ix_pod(1, 16, 0),
            Err("2/2 CardInsufficientMemory"),
        ),
        (
            "cores",
            with_usage(idle(), &[(0, 1, 0, 80), (1, 1, 0, 80)]),
            ix_pod(1, 4, 30),
            Err("2/2 CardInsufficientCore"),
        ),
        // The webhook's 100 cores make a device exclusive.
        (
            "exclusive",
            with_usage(idle(), &[(0, 1, 0, 0), (1, 1, 0, 0)]),
            ix_pod(1, 4, 100),
            Err("2/2 ExclusiveDeviceAllocateConflict"),
        ),
        (
            "core-less on full devices",
            with_usage(idle(), &[(0, 1, 0, 100), (1, 1, 0, 100)]),
            ix_pod(1, 4, 0),
            Err("2/2 CardComputeUnitsExhausted"),
        ),
        ("more than the node has", idle(), ix_pod(3, 4, 0), Err("NodeInsufficientDevice")),
        // Equal devices are tried from the one registered last.
        ("two whole devices", idle(), ix_pod(2, 0, 200), Ok("ix-1,BI-V150,32768,100:ix-0,BI-V150,32768,100:;")),
        (
            "mutex",
            with_usage(idle(), &[(0, 1, 0, 0)]),
            ix_pod(1, 4, 0).annotation(common::GPU_SCHEDULER_POLICY, "binpack,mutex"),
            Ok("ix-1,BI-V150,1024,0:;"),
        ),
    ];
    for (what, snap, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), want.map(str::to_owned).map_err(str::to_owned), "{what}");
    }
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and
    // Iluvatar's Fit walks the list from the end, so ix-1 is tried first, under every policy.
    let snap = idle();
    let policy = |p: &str| ix_pod(1, 4, 10).annotation(common::GPU_SCHEDULER_POLICY, p);
    let rows = [
        ("default policy", ix_pod(1, 4, 10), "ix-1,BI-V150,1024,10:;"),
        ("binpack", policy("binpack"), "ix-1,BI-V150,1024,10:;"),
        ("mutex", policy("mutex"), "ix-1,BI-V150,1024,10:;"),
        ("two devices", ix_pod(2, 4, 10), "ix-1,BI-V150,1024,10:ix-0,BI-V150,1024,10:;"),
    ];
    for (what, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), Ok(want.into()), "{what}");
    }
}

#[test]
fn uuid_selection_uses_the_chips_keys_and_type_always_passes() {
    // HAMi's keys: hami.io/use-<cw>-uuid / hami.io/no-use-<cw>-uuid; no type selection.
    let snap = idle();
    let p = |k: &str, v: &str| ix_pod(1, 4, 10).annotation(k, v);
    let rows = [
        (keys::use_uuid("BI-V150"), "ix-0", Ok("ix-0,BI-V150,1024,10:;")),
        (keys::nouse_uuid("BI-V150"), "ix-1", Ok("ix-0,BI-V150,1024,10:;")),
        (keys::use_uuid("BI-V150"), "ix-9", Err("2/2 CardUuidMismatch")),
        // Another chip's or vendor's keys select nothing: ix-1, registered last, is tried first.
        (keys::use_uuid("MR-V100"), "ix-9", Ok("ix-1,BI-V150,1024,10:;")),
        (common::NVIDIA_USE_TYPE.to_owned(), "MR-V100", Ok("ix-1,BI-V150,1024,10:;")),
    ];
    for (k, v, want) in rows {
        assert_eq!(try_fit(&snap, &p(&k, v)), want.map(str::to_owned).map_err(str::to_owned), "{k}: {v}");
    }
}

// ---------------------------------------------------------------------------------------------
// Annotations, lock, health

fn decide(snap: &NodeSnapshot, p: &PodBuilder) -> (PodRequest, Vec<ContainerDevices>) {
    let v = vendors();
    let req = p.request_with(&v);
    let fit = fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    (req, fit.devices.vendor(chip(&v, "BI-V150")).unwrap().to_vec())
}

#[test]
fn filter_writes_the_chips_device_keys() {
    // As HAMi writes them: hami.io/<cw>-devices-to-allocate / -allocated, identical, type `<cw>`,
    // one entry per container.
    let snap = idle();
    let (req, cs) = decide(&snap, &ix_pod(1, 64, 50).container("plain"));
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: &cs, pod: &req, unix_s: 1, unix_ns: 1 };
    let mut out = Vec::new();
    Iluvatar::new(&bi_v150()).annotations(&cx, &mut out);
    let want = "ix-1,BI-V150,16384,50:;;".to_owned();
    assert_eq!(
        out,
        [
            ("hami.io/BI-V150-devices-to-allocate".to_owned(), want.clone()),
            ("hami.io/BI-V150-devices-allocated".to_owned(), want)
        ]
    );
    let back = Iluvatar::new(&bi_v150()).decode_allocation(&pod().annotation(&out[1].0, &out[1].1).view());
    // The annotation carries no device index, so the entry reads back with index 0.
    let chosen = ContainerDevice { idx: 0, ..cs[0][0].clone() };
    assert_eq!(back.unwrap().unwrap()[0], [chosen]);
}

#[test]
fn handshake_without_cleanup_and_the_shared_lock() {
    // As in HAMi: handshake on hami.io/node-handshake-<cw> with the allocatable-count fallback;
    // Iluvatar's clean-up does nothing; the shared hami.io/mutex.lock.
    let v = Iluvatar::new(&bi_v150());
    assert_eq!(
        v.health_rule(),
        HealthRule::Handshake { key: "hami.io/node-handshake-BI-V150".into(), count_resource: VGPU.into() }
    );
    assert_eq!(v.cleanup(), Cleanup::Nothing);
    assert_eq!(v.lock(), LockKind::Shared);
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, "Property tests")

fn any_limits() -> impl Strategy<Value = Limits> {
    prop::option::weighted(
        0.8,
        (
            prop_oneof![3 => Just(1u32), 1 => 1u32..=3],
            prop::option::of(prop_oneof![3 => 1u32..=32, 1 => 0u32..=128]),
            prop::option::of(prop_oneof![3 => 0u32..=50, 1 => Just(100), 1 => 0u32..=300]),
        ),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn accepted_placements_never_overcommit_a_device(
        devs in prop::collection::vec((1u32..=16, 1024u64..=32768, any::<(u8, u8, u8)>(), prop::bool::weighted(0.1)), 1..=4),
        init in any_limits(),
        apps in prop::collection::vec(any_limits(), 1..=3),
        policy in prop::sample::select(&["binpack", "spread", "mutex"][..]),
    ) {
        let v = vendors();
        let infos: Vec<DeviceInfo> = devs
            .iter()
            .enumerate()
            .map(|(i, (count, mem, _, sick))| DeviceInfo { count: *count, health: !sick, ..dev(&format!("ix-{i}"), i as u32, *mem) })
            .collect();
        // Starting usage anywhere within capacity, scaled from the random bytes.
        let usage: Vec<(usize, u32, u64, u32)> = devs
            .iter()
            .enumerate()
            .map(|(i, (count, mem, (s, m, c), _))| {
                (i, count * u32::from(*s) / 255, mem * u64::from(*m) / 255, 100 * u32::from(*c) / 255)
            })
            .collect();
        let snap = with_usage(chips(&infos).snapshot(&v), &usage);
        let mut p = with(pod(), &apps[0]);
        for (i, l) in apps.iter().enumerate().skip(1) {
            p = with(p.container(&format!("c{i}")), l);
        }
        p = with(p.sidecar("s0"), &init).annotation(common::GPU_SCHEDULER_POLICY, policy);
        let req = p.request_with(&v);
        if let Ok(fit) = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()) {
            check_within_capacity(&snap, &req, &fit.devices, &v).map_err(TestCaseError::fail)?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine (in-memory backend, --enable-iluvatar)
