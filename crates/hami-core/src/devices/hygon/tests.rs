use proptest::prelude::*;
use serde_json::{Map, json};

use super::fixtures::*;
use super::*;
use crate::devices::{LockKind, NoQuota};
use crate::model::annotations as common;
use crate::model::annotations::hygon as keys;
use crate::model::codec::{encode_node_devices_colon, encode_node_devices_json, encode_pod_devices};
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::model::{ContainerDevice, ContainerDevices, DeviceInfo, MemMiB, PodRequest};
use crate::sched::NodeSnapshot;
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

fn chart() -> HygonConfig {
    HygonConfig::chart()
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

/// The pod's DCU annotation value on success, HAMi's reason text on failure.
fn try_fit(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    let v = vendors();
    let req = p.request_with(&v);
    match fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()) {
        Ok(fit) => Ok(encode_pod_devices(fit.devices.vendor(dcu()).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

// ---------------------------------------------------------------------------------------------
// Request derivation (HAMi: memory × memoryFactor, cores default 100)

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
    type Rows<'a> = [(&'a str, fn(&mut HygonConfig), &'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], Want)];
    fn same(_: &mut HygonConfig) {}
    fn factor4(c: &mut HygonConfig) {
        c.memory_factor = 4;
    }
    fn factor0(c: &mut HygonConfig) {
        c.memory_factor = 0;
    }
    let rows: &Rows<'_> = &[
        // nums: dcunum, 1..2^31-1.
        ("no count", same, &[(DCUMEM, "1024")], &[], Nothing),
        ("count 0", same, &[(DCUNUM, "0")], &[], Nothing),
        // HAMi reads these counts as no request; hami-rs refuses them.
        ("negative count", same, &[(DCUNUM, "-2")], &[], Refused(DCUNUM)),
        ("fractional count", same, &[(DCUNUM, "0.5")], &[], Refused(DCUNUM)),
        ("count 2", same, &[(DCUNUM, "2")], &[], Req(2, 0, 100, 100)),
        ("count from requests", same, &[], &[(DCUNUM, "1")], Req(1, 0, 100, 100)),
        ("count at int32", same, &[(DCUNUM, "2147483647")], &[], Req(2147483647, 0, 100, 100)),
        // HAMi ignores a count past 2^31-1; hami-rs refuses it.
        ("count past int32", same, &[(DCUNUM, "2147483648")], &[], Refused(DCUNUM)),
        // memreq: dcumem × memoryFactor (when > 1); percentage 100 only without memory.
        ("memory", same, &[(DCUNUM, "1"), (DCUMEM, "4096")], &[], Req(1, 4096, 0, 100)),
        ("memory from requests", same, &[(DCUNUM, "1")], &[(DCUMEM, "4096")], Req(1, 4096, 0, 100)),
        ("memory × factor 4", factor4, &[(DCUNUM, "1"), (DCUMEM, "1000")], &[], Req(1, 4000, 0, 100)),
        ("factor 0 counts as 1", factor0, &[(DCUNUM, "1"), (DCUMEM, "1000")], &[], Req(1, 1000, 0, 100)),
        ("memory at 2^31-1 / 4", factor4, &[(DCUNUM, "1"), (DCUMEM, "536870911")], &[], Req(1, 2147483644, 0, 100)),
        // A memory value HAMi would drop (placing the pod with no reservation) is refused.
        ("memory past 2^31-1 / 4", factor4, &[(DCUNUM, "1"), (DCUMEM, "536870912")], &[], Refused(DCUMEM)),
        ("negative memory", same, &[(DCUNUM, "1"), (DCUMEM, "-1")], &[], Refused(DCUMEM)),
        ("fractional memory", same, &[(DCUNUM, "1"), (DCUMEM, "0.5")], &[], Refused(DCUMEM)),
        ("memory 0", same, &[(DCUNUM, "1"), (DCUMEM, "0")], &[], Req(1, 0, 100, 100)),
        // cores: dcucores, default 100.
        ("cores", same, &[(DCUNUM, "1"), (DCUCORES, "40")], &[], Req(1, 0, 100, 40)),
        ("cores from requests", same, &[(DCUNUM, "1")], &[(DCUCORES, "40")], Req(1, 0, 100, 40)),
        ("explicit cores 0", same, &[(DCUNUM, "1"), (DCUCORES, "0")], &[], Req(1, 0, 100, 0)),
        // HAMi takes the default for cores that are not an integer; hami-rs refuses them.
        ("non-integer cores", same, &[(DCUNUM, "1"), (DCUCORES, "2.5")], &[], Refused(DCUCORES)),
        ("negative cores", same, &[(DCUNUM, "1"), (DCUCORES, "-1")], &[], Refused(DCUCORES)),
    ];
    for (what, cfg, limits, requests, want) in rows {
        let mut c = chart();
        cfg(&mut c);
        let got = Hygon::new(&c).request(VendorId(2), &container(limits, requests), &PodView::default());
        match (want, got) {
            (Nothing, Ok(None)) => {}
            (Req(nums, memreq, mempct, cores), Ok(Some(r))) => {
                assert_eq!(r, ContainerRequest::new(VendorId(2), *nums, *memreq, *mempct, *cores), "{what}")
            }
            (Refused(name), Err(why)) => assert!(why.to_string().contains(name), "{what}: {why}"),
            (want, got) => panic!("{what}: wanted {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn resource_and_quota_names_carry_the_memory_factor() {
    // As in HAMi, the quota limit scales by the configured memoryFactor.
    let v = Hygon::new(&HygonConfig { memory_factor: 4, ..chart() });
    assert_eq!(v.resource_names(), [DCUNUM, DCUMEM, DCUCORES]);
    let q = v.quota_names();
    assert_eq!((q.memory.as_deref(), q.cores.as_deref(), q.memory_factor), (Some(DCUMEM), Some(DCUCORES), 4));
}

// ---------------------------------------------------------------------------------------------
// Webhook (HAMi: recognised iff the count is in limits; no change)

#[test]
fn webhook_recognises_a_count_in_limits_and_changes_nothing() {
    let v = Hygon::new(&chart());
    for (before, recognised) in [
        (json!({"name": "c", "resources": {"limits": {DCUNUM: "1"}}}), true),
        (json!({"name": "c", "resources": {"requests": {DCUNUM: "1"}}}), false),
        (json!({"name": "c", "resources": {"limits": {DCUMEM: "1024"}}}), false),
    ] {
        let mut after = before.clone();
        let annotations = Map::new();
        let mut edits = PodEdits::default();
        let r = {
            let mut c = ContainerEdit { container: &mut after, index: 0, is_init: false };
            let mut pod = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
            v.mutate(&mut c, &mut pod).map_err(|e| e.to_string())
        };
        assert_eq!(r, Ok(recognised), "{before}");
        assert_eq!((after, edits), (before, PodEdits::default()));
    }
}

// ---------------------------------------------------------------------------------------------
// Discovery (`hami.io/node-dcu-register`)

fn devices_of(d: Discovery) -> Vec<DeviceInfo> {
    match d {
        Discovery::Devices { devices, .. } => devices,
        Discovery::Absent => panic!("absent"),
        Discovery::Malformed { key, error } => panic!("malformed {key}: {error}"),
    }
}

fn discover(reg: Option<&str>) -> Discovery {
    let mut n = node("n1");
    if let Some(r) = reg {
        n = n.annotation(keys::REGISTER, r);
    }
    Hygon::new(&chart()).discover(&n.view())
}

#[test]
fn registration_reads_the_colon_list_hygon_writes() {
    // The colon form HAMi reads: 7 fields (mode hami-core, index 0) and 9 fields.
    let reg = "DCU-a,4,16368,100,DCU-Z100,0,true:DCU-b,4,16368,100,DCU-Z100,1,false,1,hami-core:";
    let devs = devices_of(discover(Some(reg)));
    assert_eq!(devs.len(), 2);
    assert_eq!((devs[0].id.as_str(), devs[0].index, &*devs[0].mode, devs[0].health), ("DCU-a", 0, "hami-core", true));
    assert_eq!((devs[1].id.as_str(), devs[1].index, devs[1].numa, devs[1].health), ("DCU-b", 1, 1, false));
    assert_eq!((devs[1].count, devs[1].devmem, devs[1].devcore, &*devs[1].ty), (4, MemMiB(16368), 100, "DCU-Z100"));
}

#[test]
fn registration_also_accepts_the_json_list() {
    // hami-rs accepts both forms on every key (HAMi reads only the colon form for Hygon).
    let want = vec![dcu_dev(0, "DCU-Z100", 16384), dcu_dev(1, "DCU-K100", 65536)];
    assert_eq!(devices_of(discover(Some(&encode_node_devices_json(&want)))), want);
    assert_eq!(devices_of(discover(Some(&encode_node_devices_colon(&want)))), want);
}

#[test]
fn missing_empty_or_malformed_registrations() {
    // No annotation or no devices → none; a parse error → malformed.
    assert!(matches!(discover(None), Discovery::Absent));
    assert!(matches!(discover(Some("[]")), Discovery::Absent));
    assert!(matches!(discover(Some(":")), Discovery::Absent));
    for bad in ["DCU-a,4,16368,100,DCU-Z100,0:", "no separator", "DCU-a,x,1,1,DCU,0,true:", "[{"] {
        assert!(matches!(discover(Some(bad)), Discovery::Malformed { ref key, .. } if key == keys::REGISTER), "{bad}");
    }
}

// ---------------------------------------------------------------------------------------------
// Fit (HAMi's generic device walk with type selection, no quota check)

#[test]
fn each_walk_check_rejects_with_hamis_reason() {
    let two = || {
        let devs = [dcu_dev(0, "DCU-Z100", 16384), dcu_dev(1, "DCU-Z100", 16384)];
        dcus(&devs).snapshot(&vendors())
    };
    let rows: Vec<(&str, NodeSnapshot, PodBuilder, Result<&str, &str>)> = vec![
        // A count alone: whole memory and the default 100 cores, so the device must be idle.
        ("whole device", idle(1), pod().limit(DCUNUM, "1"), Ok("DCU-0,DCU,16384,100:;")),
        (
            "whole device on a busy one",
            with_usage(idle(1), &[(0, 1, 0, 0)]),
            pod().limit(DCUNUM, "1"),
            Err("1/1 ExclusiveDeviceAllocateConflict"),
        ),
        // Registered unhealthy.
        (
            "unhealthy",
            {
                let devs = [DeviceInfo { health: false, ..dcu_dev(0, "DCU-Z100", 16384) }];
                dcus(&devs).snapshot(&vendors())
            },
            dcu_pod(1, 1024, 10),
            Err("1/1 CardNotHealth"),
        ),
        ("slots", with_usage(idle(1), &[(0, 10, 0, 0)]), dcu_pod(1, 1024, 10), Err("1/1 CardTimeSlicingExhausted")),
        ("memory", with_usage(idle(1), &[(0, 1, 16000, 0)]), dcu_pod(1, 1024, 10), Err("1/1 CardInsufficientMemory")),
        ("cores", with_usage(idle(1), &[(0, 1, 0, 95)]), dcu_pod(1, 1024, 10), Err("1/1 CardInsufficientCore")),
        (
            "core-less on a full device",
            with_usage(idle(1), &[(0, 1, 0, 100)]),
            dcu_pod(1, 1024, 0),
            Err("1/1 CardComputeUnitsExhausted"),
        ),
        ("cores clamp to 100", idle(1), dcu_pod(1, 1024, 120), Ok("DCU-0,DCU,1024,100:;")),
        ("more than the node has", two(), dcu_pod(3, 1024, 10), Err("NodeInsufficientDevice")),
        (
            "two devices, one fits",
            with_usage(two(), &[(1, 1, 16000, 0)]),
            dcu_pod(2, 1024, 10),
            Err("1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory"),
        ),
        // Equal devices are tried from the one registered last.
        ("two devices", two(), dcu_pod(2, 1024, 10), Ok("DCU-1,DCU,1024,10:DCU-0,DCU,1024,10:;")),
        // mutex in a list is a fit rule: binpack would try the busy device first.
        (
            "binpack with mutex",
            with_usage(two(), &[(0, 1, 1024, 10)]),
            dcu_pod(1, 1024, 10).annotation(common::GPU_SCHEDULER_POLICY, "binpack,mutex"),
            Ok("DCU-1,DCU,1024,10:;"),
        ),
    ];
    for (what, snap, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), want.map(str::to_owned).map_err(str::to_owned), "{what}");
    }
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and
    // Hygon's Fit walks the list from the end, so DCU-1 is tried first, under every policy.
    let snap = idle(2);
    let policy = |p: &str| dcu_pod(1, 1024, 10).annotation(common::GPU_SCHEDULER_POLICY, p);
    let rows = [
        ("default policy", dcu_pod(1, 1024, 10), "DCU-1,DCU,1024,10:;"),
        ("binpack", policy("binpack"), "DCU-1,DCU,1024,10:;"),
        ("mutex", policy("mutex"), "DCU-1,DCU,1024,10:;"),
        ("a whole device", pod().limit(DCUNUM, "1"), "DCU-1,DCU,16384,100:;"),
        ("two devices", dcu_pod(2, 1024, 10), "DCU-1,DCU,1024,10:DCU-0,DCU,1024,10:;"),
    ];
    for (what, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), Ok(want.into()), "{what}");
    }
}

#[test]
fn type_and_uuid_selection_use_hygons_keys() {
    // HAMi's Hygon keys: hygon.com/use-dcutype / nouse-dcutype (case-insensitive substrings of the
    // device type) and hygon.com/use-gpuuuid / nouse-gpuuuid (exact ids).
    let devs = [dcu_dev(0, "DCU-Z100", 16384), dcu_dev(1, "DCU-K100", 65536)];
    let snap = dcus(&devs).snapshot(&vendors());
    let p = |k: &str, v: &str| dcu_pod(1, 1024, 10).annotation(k, v);
    // Without selection, spread tries DCU-1 first (the request weighs less on the larger card).
    let rows = [
        (keys::USE_TYPE, "z100", Ok("DCU-0,DCU,1024,10:;")),
        (keys::NOUSE_TYPE, "K100", Ok("DCU-0,DCU,1024,10:;")),
        (keys::USE_TYPE, "Z200", Err("2/2 CardTypeMismatch")),
        (keys::NOUSE_TYPE, "dcu", Err("2/2 CardTypeMismatch")),
        (keys::USE_UUID, "DCU-0", Ok("DCU-0,DCU,1024,10:;")),
        (keys::NOUSE_UUID, "DCU-1", Ok("DCU-0,DCU,1024,10:;")),
        (keys::USE_UUID, "DCU-9", Err("2/2 CardUuidMismatch")),
        // Another vendor's keys do not select DCUs.
        (common::NVIDIA_USE_TYPE, "Z100", Ok("DCU-1,DCU,1024,10:;")),
    ];
    for (k, v, want) in rows {
        assert_eq!(try_fit(&snap, &p(k, v)), want.map(str::to_owned).map_err(str::to_owned), "{k}: {v}");
    }
}

// ---------------------------------------------------------------------------------------------
// Annotations, lock, health

fn decide(snap: &NodeSnapshot, p: &PodBuilder) -> (PodRequest, Vec<ContainerDevices>) {
    let v = vendors();
    let req = p.request_with(&v);
    let fit = fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    (req, fit.devices.vendor(dcu()).unwrap().to_vec())
}

#[test]
fn filter_writes_both_device_keys_padded_per_container() {
    // As HAMi writes them: identical to-allocate and allocated values, type field `DCU`, one entry
    // per container (init first), even when no device's type is the bare word.
    let snap = idle(2);
    let (req, cs) = decide(&snap, &pod().init("setup").main().limit(DCUNUM, "1").limit(DCUMEM, "2048"));
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: &cs, pod: &req, unix_s: 1, unix_ns: 1 };
    let mut out = Vec::new();
    Hygon::new(&chart()).annotations(&cx, &mut out);
    let want = ";DCU-1,DCU,2048,100:;".to_owned();
    assert_eq!(out, [(keys::TO_ALLOCATE.to_owned(), want.clone()), (keys::ALLOCATED.to_owned(), want)]);
    let v = Hygon::new(&chart());
    assert_eq!(v.pod_keys(), [keys::TO_ALLOCATE, keys::ALLOCATED]);
    let p = pod().annotation(keys::ALLOCATED, &out[1].1).view();
    // The annotation carries no device index, so the entry reads back with index 0.
    let chosen = ContainerDevice { idx: 0, ..cs[1][0].clone() };
    assert_eq!(v.decode_allocation(&p).unwrap().unwrap()[1], [chosen]);
}

#[test]
fn lock_health_and_cleanup_follow_the_handshake_vendors() {
    // As in HAMi: handshake on hami.io/node-handshake-dcu with the allocatable dcunum fallback;
    // on death the handshake annotation is removed; the shared hami.io/mutex.lock.
    let v = Hygon::new(&chart());
    assert_eq!(
        v.health_rule(),
        HealthRule::Handshake { key: keys::HANDSHAKE.to_owned(), count_resource: DCUNUM.to_owned() }
    );
    assert_eq!(v.cleanup(), Cleanup::RemoveAnnotation(keys::HANDSHAKE.to_owned()));
    assert_eq!(v.lock(), LockKind::Shared);
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, "Property tests")

fn any_device() -> impl Strategy<Value = (u32, u64, (u32, u64, u32), bool)> {
    (1u32..=10, 1024u64..=65536).prop_flat_map(|(count, mem)| {
        (
            Just(count),
            Just(mem),
            (
                prop_oneof![2 => Just(0), 1 => 0..=count],
                prop_oneof![2 => Just(0), 1 => 0..=mem, 1 => Just(mem)],
                prop_oneof![2 => Just(0u32), 1 => 0u32..=100, 1 => Just(100)],
            ),
            prop::bool::weighted(0.1),
        )
    })
}

fn any_limits() -> impl Strategy<Value = Limits> {
    prop::option::weighted(
        0.8,
        (
            prop_oneof![3 => Just(1u32), 1 => 1u32..=3],
            prop::option::of(prop_oneof![3 => 1u64..=4096, 1 => 0u64..=65536]),
            prop::option::of(prop_oneof![3 => 0u32..=50, 1 => Just(100), 1 => 0u32..=150]),
        ),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn accepted_placements_never_overcommit_a_device(
        devs in prop::collection::vec(any_device(), 1..=6),
        init in any_limits(),
        apps in prop::collection::vec(any_limits(), 1..=3),
        policy in prop::sample::select(&["binpack", "spread", "mutex"][..]),
        ty in prop::option::of(prop::sample::select(&["z100", "K100"][..])),
    ) {
        let v = vendors();
        let infos: Vec<DeviceInfo> = devs
            .iter()
            .enumerate()
            .map(|(i, (count, mem, _, sick))| DeviceInfo {
                count: *count,
                health: !sick,
                ..dcu_dev(i as u32, if i % 2 == 0 { "DCU-Z100" } else { "DCU-K100" }, *mem)
            })
            .collect();
        let usage: Vec<(usize, u32, u64, u32)> =
            devs.iter().enumerate().map(|(i, (_, _, (s, m, c), _))| (i, *s, *m, *c)).collect();
        let snap = with_usage(dcus(&infos).snapshot(&v), &usage);
        let mut p = with(pod(), &apps[0]);
        for (i, l) in apps.iter().enumerate().skip(1) {
            p = with(p.container(&format!("c{i}")), l);
        }
        p = with(p.init("i0"), &init).annotation(common::GPU_SCHEDULER_POLICY, policy);
        if let Some(t) = ty {
            p = p.annotation(keys::USE_TYPE, t);
        }
        let req = p.request_with(&v);
        if let Ok(fit) = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()) {
            check_within_capacity(&snap, &req, &fit.devices, &v).map_err(TestCaseError::fail)?;
            if let Some(t) = ty {
                for (_, _, d) in fit.devices.entries() {
                    let dev = snap.devices.iter().find(|u| u.info.id == d.uuid).unwrap();
                    prop_assert!(dev.info.ty.to_uppercase().contains(&t.to_uppercase()));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine (in-memory backend)

// ---------------------------------------------------------------------------------------------
// The HCU family (HAMi PR 2969's rename), beside DCU

#[test]
fn each_family_takes_the_section_whose_names_are_its_own() {
    let section = |count: &str| HygonConfig { resource_count_name: count.into(), ..chart() };
    let none = HygonConfig::default();
    // HAMi's basis: a `hygon` section of DCU names; HCU takes its chart names.
    let (dcu, hcu) = HygonConfig::families(&chart(), &none);
    assert_eq!((dcu, hcu), (chart(), HygonConfig::hcu_chart()));
    // HAMi since the rename: the `hygon` section names HCU; DCU takes its chart names.
    let (dcu, hcu) = HygonConfig::families(&HygonConfig::hcu_chart(), &none);
    assert_eq!((dcu, hcu), (chart(), HygonConfig::hcu_chart()));
    // hami-rs's chart: both sections; an `hcu` section wins for HCU.
    let custom = section("example.com/hcu-count");
    let (dcu, hcu) = HygonConfig::families(&section("example.com/dcu-count"), &custom);
    assert_eq!((dcu.resource_count_name.as_str(), hcu), ("example.com/dcu-count", custom));
}
