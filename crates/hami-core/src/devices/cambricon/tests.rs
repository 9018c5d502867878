use proptest::prelude::*;
use serde_json::{Map, json};

use super::fixtures::*;
use super::*;
use crate::devices::{Cleanup, HealthRule, NoQuota, QuotaCheck, ScoreCx};
use crate::model::annotations as common;
use crate::model::codec::encode_pod_devices;
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::model::{ContainerDevices, MemMiB, PodRequest};
use crate::sched::NodeSnapshot;
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

fn chart() -> CambriconConfig {
    CambriconConfig::chart()
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

/// The pod's MLU annotation value on success, HAMi's reason text on failure.
fn eval(snap: &NodeSnapshot, p: &PodBuilder, quota: &dyn QuotaCheck) -> Result<String, String> {
    let v = vendors();
    let req = p.request_with(&v);
    match fit_pod_devices(snap, &req, &v, quota, &mut Scratch::default()) {
        Ok(fit) => Ok(encode_pod_devices(fit.devices.vendor(mlu()).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

fn try_fit(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    eval(snap, p, &NoQuota)
}

// ---------------------------------------------------------------------------------------------
// Request derivation (HAMi: memory = vmemory × 256 MiB, cores default 100)

#[derive(Debug)]
enum Want {
    Nothing,
    /// `(nums, memreq MiB, mempct, cores)`.
    Req(u32, u64, u32, u32),
    /// Refused; the message names this resource.
    Refused(&'static str),
}

#[test]
fn request_derivation_follows_hami_field_by_field() {
    use Want::*;
    type Rows<'a> = [(&'a str, &'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], Want)];
    let rows: &Rows<'_> = &[
        // nums: the count, an integer (Go's AsInt64); HAMi reads anything else as no Cambricon
        // request, hami-rs refuses it.
        ("no count", &[(VMEM, "16")], &[], Nothing),
        ("count 0", &[(VMLU, "0")], &[], Nothing),
        ("negative count", &[(VMLU, "-1")], &[], Refused(VMLU)),
        ("fractional count", &[(VMLU, "1.5")], &[], Refused(VMLU)),
        ("unparsable count", &[(VMLU, "one")], &[], Refused(VMLU)),
        // In HAMi `vmlu: 1` alone is a whole card: percentage 100 and the default 100 cores.
        ("count alone is a whole exclusive card", &[(VMLU, "1")], &[], Req(1, 0, 100, 100)),
        ("count from requests", &[], &[(VMLU, "2")], Req(2, 0, 100, 100)),
        // HAMi keeps counts in an int32; hami-rs refuses a larger one instead of wrapping it.
        ("count beyond int32", &[(VMLU, "2147483648")], &[], Refused(VMLU)),
        // memreq: vmemory × 256 MiB; percentage 0 once memory is given.
        ("memory in 256 MiB units", &[(VMLU, "1"), (VMEM, "16")], &[], Req(1, 4096, 0, 100)),
        ("memory from requests", &[(VMLU, "1")], &[(VMEM, "16")], Req(1, 4096, 0, 100)),
        ("memory limit wins over the request", &[(VMLU, "1"), (VMEM, "8")], &[(VMEM, "16")], Req(1, 2048, 0, 100)),
        ("explicit memory 0 is a whole card", &[(VMLU, "1"), (VMEM, "0")], &[], Req(1, 0, 100, 100)),
        ("memory at the int32 limit", &[(VMLU, "1"), (VMEM, "8388607")], &[], Req(1, 2147483392, 0, 100)),
        // HAMi drops the request for a bad memory value and places the pod with no reservation;
        // hami-rs refuses it.
        ("memory past the int32 limit", &[(VMLU, "1"), (VMEM, "8388608")], &[], Refused(VMEM)),
        ("negative memory", &[(VMLU, "1"), (VMEM, "-1")], &[], Refused(VMEM)),
        ("fractional memory", &[(VMLU, "1"), (VMEM, "1.5")], &[], Refused(VMEM)),
        ("unparsable memory", &[(VMLU, "1"), (VMEM, "lots")], &[], Refused(VMEM)),
        // cores: vcore, default 100 when absent. HAMi also takes the default for a value that is
        // not an integer; hami-rs refuses it.
        ("cores", &[(VMLU, "1"), (VCORE, "50")], &[], Req(1, 0, 100, 50)),
        ("cores from requests", &[(VMLU, "1")], &[(VCORE, "30")], Req(1, 0, 100, 30)),
        ("explicit cores 0", &[(VMLU, "1"), (VMEM, "4"), (VCORE, "0")], &[], Req(1, 1024, 0, 0)),
        ("fractional cores", &[(VMLU, "1"), (VCORE, "1.5")], &[], Refused(VCORE)),
        ("unparsable cores", &[(VMLU, "1"), (VCORE, "most")], &[], Refused(VCORE)),
        // hami-rs: negative cores would subtract usage, so the pod is refused.
        ("negative cores", &[(VMLU, "1"), (VCORE, "-10")], &[], Refused(VCORE)),
    ];
    let v = Cambricon::new(&chart());
    for (what, limits, requests, want) in rows {
        let got = v.request(VendorId(1), &container(limits, requests), &PodView::default());
        match (want, got) {
            (Nothing, Ok(None)) => {}
            (Req(nums, memreq, mempct, cores), Ok(Some(r))) => {
                assert_eq!(r, ContainerRequest::new(VendorId(1), *nums, *memreq, *mempct, *cores), "{what}")
            }
            (Refused(name), Err(why)) => assert!(why.to_string().contains(name), "{what}: {why}"),
            (want, got) => panic!("{what}: wanted {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn an_empty_count_name_disables_the_vendor() {
    // As in HAMi, an absent config section leaves the names empty; such a vendor matches nothing.
    let v = Cambricon::new(&CambriconConfig::default());
    assert_eq!(v.request(VendorId(1), &container(&[(VMLU, "1")], &[]), &PodView::default()), Ok(None));
    assert!(v.resource_names().is_empty());
    assert!(matches!(v.discover(&mlus(2).view()), Discovery::Absent));
}

#[test]
fn resource_and_quota_names_use_256_mib_units() {
    // Cambricon quota limits are in 256 MiB units, as in HAMi.
    let v = Cambricon::new(&chart());
    assert_eq!(v.resource_names(), [VMLU, VMEM, VCORE]);
    let q = v.quota_names();
    assert_eq!((q.memory.as_deref(), q.cores.as_deref(), q.memory_factor), (Some(VMEM), Some(VCORE), 256));
}

// ---------------------------------------------------------------------------------------------
// Webhook (HAMi: recognised iff the count is in limits; no change)

#[test]
fn webhook_recognises_a_count_in_limits_and_changes_nothing() {
    let cases = [
        (json!({"name": "c", "resources": {"limits": {VMLU: "1", VMEM: "16"}}}), true),
        (json!({"name": "c", "resources": {"limits": {VMLU: 2}}}), true),
        // Only limits count for recognition.
        (json!({"name": "c", "resources": {"requests": {VMLU: "1"}}}), false),
        (json!({"name": "c", "resources": {"limits": {VMEM: "16", VCORE: "50"}}}), false),
        (json!({"name": "c"}), false),
    ];
    let v = Cambricon::new(&chart());
    for (before, recognised) in cases {
        let mut after = before.clone();
        let annotations = Map::new();
        let mut edits = PodEdits::default();
        let r = {
            let mut c = ContainerEdit { container: &mut after, index: 0, is_init: false };
            let mut pod = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
            v.mutate(&mut c, &mut pod).map_err(|e| e.to_string())
        };
        assert_eq!(r, Ok(recognised), "{before}");
        assert_eq!(after, before, "the container is left as it was");
        assert_eq!(edits, PodEdits::default());
    }
}

// ---------------------------------------------------------------------------------------------
// Discovery: devices made up from node capacity

fn devices_of(d: Discovery) -> Vec<DeviceInfo> {
    match d {
        Discovery::Devices { devices, extra } => {
            assert!(extra.is_none());
            devices
        }
        Discovery::Absent => panic!("absent"),
        Discovery::Malformed { key, error } => panic!("malformed {key}: {error}"),
    }
}

#[test]
fn capacity_becomes_one_device_per_100_vcores() {
    // HAMi's example: vcore 400, vmemory 384 on n1 → n1-cambricon-mlu-0…3, 384×256×100/400 MiB.
    let n = node("n1").capacity(VCORE, "400").capacity(VMEM, "384");
    let devs = devices_of(Cambricon::new(&chart()).discover(&n.view()));
    let want: Vec<DeviceInfo> =
        (0..4).map(|i| DeviceInfo::new(&format!("n1-cambricon-mlu-{i}"), i, 100, 24576, 100, "MLU")).collect();
    assert_eq!(devs, want);
    assert!(devs.iter().all(|d| d.health && d.numa == 0 && d.mode.is_empty()));
}

#[test]
fn a_partial_card_still_counts_and_memory_divides_by_the_whole_capacity() {
    // ceil(vcore/100) devices; devmem = vmemory×256×100/vcore, truncating.
    let n = node("n1").capacity(VCORE, "250").capacity(VMEM, "100");
    let devs = devices_of(Cambricon::new(&chart()).discover(&n.view()));
    assert_eq!(devs.len(), 3);
    assert!(devs.iter().all(|d| d.devmem == MemMiB(100 * 256 * 100 / 250)));
    // No memory capacity: devices without memory (HAMi reads the missing value as 0).
    let devs = devices_of(Cambricon::new(&chart()).discover(&node("n1").capacity(VCORE, "100").view()));
    assert_eq!((devs.len(), devs[0].devmem), (1, MemMiB::ZERO));
}

#[test]
fn missing_or_zero_core_capacity_means_no_devices() {
    // A missing or zero capacity means "no devices".
    let v = Cambricon::new(&chart());
    assert!(matches!(v.discover(&node("n1").view()), Discovery::Absent));
    assert!(matches!(v.discover(&node("n1").capacity(VCORE, "0").capacity(VMEM, "96").view()), Discovery::Absent));
    assert!(matches!(v.discover(&node("n1").capacity(VMEM, "96").view()), Discovery::Absent));
}

#[test]
fn an_absurd_core_capacity_is_malformed_rather_than_millions_of_devices() {
    // Not HAMi's behaviour (it would loop); a node status this broken is reported instead.
    let n = node("n1").capacity(VCORE, "1000000000").capacity(VMEM, "96");
    assert!(matches!(Cambricon::new(&chart()).discover(&n.view()), Discovery::Malformed { key, .. } if key == VCORE));
    let n = node("n1").capacity(VCORE, "409600").capacity(VMEM, "96");
    assert_eq!(devices_of(Cambricon::new(&chart()).discover(&n.view())).len(), 4096);
}

#[test]
fn a_memory_capacity_beyond_int32_per_device_is_malformed() {
    // HAMi stores devmem in an int32; hami-rs reports such a node instead of wrapping.
    let n = node("n1").capacity(VCORE, "100").capacity(VMEM, "100000000");
    assert!(matches!(Cambricon::new(&chart()).discover(&n.view()), Discovery::Malformed { key, .. } if key == VMEM));
}

// ---------------------------------------------------------------------------------------------
// Fit: HAMi's generic device walk, with the namespace quota check

#[test]
fn a_bare_count_takes_a_whole_idle_card() {
    // A bare count means memory percentage 100 and 100 cores: the whole card, exclusively.
    let snap = with_usage(idle(2), &[(0, 1, 1024, 10)]);
    assert_eq!(try_fit(&snap, &pod().limit(VMLU, "1")), Ok("n1-cambricon-mlu-1,MLU,24576,100:;".into()));
    // 100 cores on a card with a task is an exclusive conflict; the free-memory check comes
    // first, so a card with any memory in use fails on memory instead.
    let snap = with_usage(idle(1), &[(0, 1, 0, 0)]);
    assert_eq!(try_fit(&snap, &pod().limit(VMLU, "1")), Err("1/1 ExclusiveDeviceAllocateConflict".into()));
    let snap = with_usage(idle(1), &[(0, 1, 1024, 0)]);
    assert_eq!(try_fit(&snap, &pod().limit(VMLU, "1")), Err("1/1 CardInsufficientMemory".into()));
}

#[test]
fn each_walk_check_rejects_with_hamis_reason() {
    let rows: Vec<(&str, NodeSnapshot, PodBuilder, Result<&str, &str>)> = vec![
        // A device the usage rebuild marked unhealthy.
        (
            "unhealthy",
            {
                let mut s = idle(1);
                s.devices[0].health = false;
                s
            },
            mlu_pod(1, 4, 10),
            Err("1/1 CardNotHealth"),
        ),
        // All 100 slots in use.
        (
            "slots exhausted",
            with_usage(idle(1), &[(0, 100, 0, 0)]),
            mlu_pod(1, 4, 10),
            Err("1/1 CardTimeSlicingExhausted"),
        ),
        // Free memory.
        ("memory", with_usage(idle(1), &[(0, 1, 20480, 10)]), mlu_pod(1, 17, 10), Err("1/1 CardInsufficientMemory")),
        (
            "memory just fits",
            with_usage(idle(1), &[(0, 1, 20480, 10)]),
            mlu_pod(1, 16, 10),
            Ok("n1-cambricon-mlu-0,MLU,4096,10:;"),
        ),
        // Free cores.
        ("cores", with_usage(idle(1), &[(0, 1, 0, 60)]), mlu_pod(1, 4, 50), Err("1/1 CardInsufficientCore")),
        // A core-less task may not join a fully booked card.
        (
            "core-less on a full card",
            with_usage(idle(1), &[(0, 1, 0, 100)]),
            mlu_pod(1, 4, 0),
            Err("1/1 CardComputeUnitsExhausted"),
        ),
        // Cores above 100 are clamped to 100 before the capacity checks.
        ("cores clamp to 100", idle(1), mlu_pod(1, 4, 150), Ok("n1-cambricon-mlu-0,MLU,1024,100:;")),
        // Some devices picked, not enough → AllocatedCardsInsufficientRequest.
        (
            "two cards, one fits",
            with_usage(idle(2), &[(0, 1, 0, 100)]),
            mlu_pod(2, 4, 50),
            Err("1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientCore"),
        ),
        // More cards than the node has: NodeInsufficientDevice.
        ("more cards than the node has", idle(2), mlu_pod(3, 4, 10), Err("NodeInsufficientDevice")),
        // Equal cards are tried from the one registered last.
        (
            "two cards",
            idle(2),
            mlu_pod(2, 4, 10),
            Ok("n1-cambricon-mlu-1,MLU,1024,10:n1-cambricon-mlu-0,MLU,1024,10:;"),
        ),
    ];
    for (what, snap, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), want.map(str::to_owned).map_err(str::to_owned), "{what}");
    }
}

#[test]
fn mutex_policy_takes_only_idle_cards() {
    // In HAMi `mutex` rejects busy devices for every vendor.
    let p = mlu_pod(1, 4, 10).annotation(common::GPU_SCHEDULER_POLICY, "mutex");
    let snap = with_usage(idle(1), &[(0, 1, 1024, 10)]);
    assert_eq!(try_fit(&snap, &p), Err("1/1 ExclusiveDeviceAllocateConflict".into()));
    let snap = with_usage(idle(2), &[(1, 1, 1024, 10)]);
    assert_eq!(try_fit(&snap, &p), Ok("n1-cambricon-mlu-0,MLU,1024,10:;".into()));
}

#[test]
fn policies_order_cards_by_usage() {
    // binpack tries the fullest card first, spread the emptiest.
    let snap = with_usage(idle(2), &[(1, 1, 4096, 20)]);
    let binpack = mlu_pod(1, 4, 10).annotation(common::GPU_SCHEDULER_POLICY, "binpack");
    assert_eq!(try_fit(&snap, &binpack), Ok("n1-cambricon-mlu-1,MLU,1024,10:;".into()));
    assert_eq!(try_fit(&snap, &mlu_pod(1, 4, 10)), Ok("n1-cambricon-mlu-0,MLU,1024,10:;".into()));
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and
    // Cambricon's Fit walks the list from the end, so mlu-1 is tried first, under every policy.
    let snap = idle(2);
    let policy = |p: &str| mlu_pod(1, 4, 10).annotation(common::GPU_SCHEDULER_POLICY, p);
    let rows = [
        ("default policy", mlu_pod(1, 4, 10), "n1-cambricon-mlu-1,MLU,1024,10:;"),
        ("binpack", policy("binpack"), "n1-cambricon-mlu-1,MLU,1024,10:;"),
        ("mutex", policy("mutex"), "n1-cambricon-mlu-1,MLU,1024,10:;"),
        ("a whole card", pod().limit(VMLU, "1"), "n1-cambricon-mlu-1,MLU,24576,100:;"),
        ("two cards", mlu_pod(2, 4, 10), "n1-cambricon-mlu-1,MLU,1024,10:n1-cambricon-mlu-0,MLU,1024,10:;"),
    ];
    for (what, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), Ok(want.into()), "{what}");
    }
}

#[test]
fn uuid_selection_uses_cambricons_keys() {
    // HAMi's Cambricon UUID keys: cambricon.com/use-gpuuuid / nouse-gpuuuid, exact ids.
    let snap = idle(3);
    let p = mlu_pod(1, 4, 10).annotation(keys::USE_UUID, "n1-cambricon-mlu-2");
    assert_eq!(try_fit(&snap, &p), Ok("n1-cambricon-mlu-2,MLU,1024,10:;".into()));
    let p = mlu_pod(1, 4, 10).annotation(keys::NOUSE_UUID, "n1-cambricon-mlu-0, n1-cambricon-mlu-1");
    assert_eq!(try_fit(&snap, &p), Ok("n1-cambricon-mlu-2,MLU,1024,10:;".into()));
    let p = mlu_pod(1, 4, 10).annotation(keys::USE_UUID, "n1-cambricon-mlu-9");
    assert_eq!(try_fit(&snap, &p), Err("3/3 CardUuidMismatch".into()));
    // Another vendor's keys do not select MLUs.
    let p = mlu_pod(1, 4, 10).annotation(common::NVIDIA_USE_UUID, "n1-cambricon-mlu-9");
    assert!(try_fit(&snap, &p).is_ok());
}

#[test]
fn mlu_type_selection_is_declared_but_not_enforced() {
    // HAMi never checks cambricon.com/use-mlutype / nouse-mlutype. Every device has the type `MLU`,
    // so hami-rs keeps it that way (see `Params`).
    let snap = idle(1);
    for (k, v) in [(keys::USE_TYPE, "MLU370"), (keys::NOUSE_TYPE, "MLU")] {
        let p = mlu_pod(1, 4, 10).annotation(k, v);
        assert_eq!(try_fit(&snap, &p), Ok("n1-cambricon-mlu-0,MLU,1024,10:;".into()), "{k}: {v}");
    }
}

/// A namespace quota with a memory limit in MiB (as the ledger compares after the factor).
struct MemQuota(u64);
impl QuotaCheck for MemQuota {
    fn fits(&self, _: &str, _: VendorId, mem: MemMiB, _: u32) -> bool {
        mem.get() <= self.0
    }
}

#[test]
fn quota_is_checked_per_card_during_filter() {
    // As in HAMi, Cambricon's fit checks the namespace quota with the pod's collapsed usage, the
    // request included.
    let snap = idle(2);
    assert_eq!(eval(&snap, &mlu_pod(1, 16, 10), &MemQuota(4096)), Ok("n1-cambricon-mlu-1,MLU,4096,10:;".into()));
    assert_eq!(eval(&snap, &mlu_pod(1, 17, 10), &MemQuota(4096)), Err("2/2 ResourceQuotaNotFit".into()));
    // Two cards of 2048 MiB: the second card brings the pod to 4096 MiB, still within quota;
    // three would not (the pod's own earlier picks count).
    assert!(eval(&idle(3), &mlu_pod(2, 8, 10), &MemQuota(4096)).is_ok());
    assert_eq!(
        eval(&idle(3), &mlu_pod(3, 8, 10), &MemQuota(4096)),
        Err("1/3 ResourceQuotaNotFit, 2/3 AllocatedCardsInsufficientRequest".into())
    );
    // A whole-card request reserves the card's memory, so the quota sees 24576 MiB.
    assert_eq!(eval(&snap, &pod().limit(VMLU, "1"), &MemQuota(4096)), Err("2/2 ResourceQuotaNotFit".into()));
}

// ---------------------------------------------------------------------------------------------
// Annotations

fn decide(snap: &NodeSnapshot, p: &PodBuilder) -> (PodRequest, Vec<ContainerDevices>) {
    let v = vendors();
    let req = p.request_with(&v);
    let fit = fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(mlu()).unwrap().to_vec();
    (req, cs)
}

fn written(snap: &NodeSnapshot, req: &PodRequest, cs: &[ContainerDevices]) -> Vec<(String, String)> {
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: cs, pod: req, unix_s: 1787293239, unix_ns: 0 };
    let mut out = Vec::new();
    Cambricon::new(&chart()).annotations(&cx, &mut out);
    out
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn worked_example_writes_the_profile_of_device_2() {
    // HAMi's example: vmlu 1, vmemory 16, vcore 50 on device index 2 → CAMBRICON_DSMLU_PROFILE
    // `2_50_16` (`<index>_<cores>_<memory MiB / 256>`).
    let snap = idle(4);
    let (req, cs) = decide(&snap, &mlu_pod(1, 16, 50).annotation(keys::USE_UUID, "n1-cambricon-mlu-2"));
    assert_eq!(
        written(&snap, &req, &cs),
        pairs(&[
            (keys::TO_ALLOCATE, "n1-cambricon-mlu-2,MLU,4096,50:;"),
            (keys::ALLOCATED, "n1-cambricon-mlu-2,MLU,4096,50:;"),
            (keys::DSMLU_ASSIGNED, "false"),
            (keys::DSMLU_PROFILE, "2_50_16"),
        ])
    );
}

#[test]
fn the_profile_comes_from_the_first_container_holding_a_card() {
    // The profile is the first device of the first container holding one; the lists are padded with
    // one entry per container. The first app container takes the whole of mlu-1 (tried first of two
    // idle cards), the second moves on to mlu-0.
    let snap = idle(2);
    let p = pod().init("setup").main().limit(VMLU, "1").container("second").limit(VMLU, "1").limit(VMEM, "8");
    let (req, cs) = decide(&snap, &p);
    let out = written(&snap, &req, &cs);
    let want = ";n1-cambricon-mlu-1,MLU,24576,100:;n1-cambricon-mlu-0,MLU,2048,100:;";
    assert_eq!(out[1], (keys::ALLOCATED.to_owned(), want.to_owned()));
    assert_eq!(out[3], (keys::DSMLU_PROFILE.to_owned(), "1_100_96".to_owned()));
}

#[test]
fn written_annotations_decode_back_and_keys_are_listed() {
    let snap = idle(2);
    let (req, cs) = decide(&snap, &mlu_pod(2, 4, 30));
    let out = written(&snap, &req, &cs);
    let mut p = pod();
    for (k, val) in &out {
        p = p.annotation(k, val);
    }
    let v = Cambricon::new(&chart());
    let back = v.decode_allocation(&p.view()).unwrap().unwrap();
    assert_eq!(crate::model::codec::trim_trailing_empty(back).len(), 1);
    assert_eq!(v.allocated_key(), Some(keys::ALLOCATED));
    let listed = v.pod_keys();
    assert!(out.iter().all(|(k, _)| listed.contains(k)), "every written key is listed for clearing");
}

// ---------------------------------------------------------------------------------------------
// Lock, health, clean-up, node score

#[test]
fn lock_health_cleanup_and_score_are_cambricons() {
    // As in HAMi: its own lock (`cambricon.com/dsmlu.lock`), always healthy, nothing to clean
    // up, node score 0.
    let v = Cambricon::new(&chart());
    assert_eq!(v.lock(), LockKind::Cambricon);
    assert_eq!(v.health_rule(), HealthRule::AlwaysHealthy);
    assert_eq!(v.cleanup(), Cleanup::Nothing);
    let snap = idle(2);
    let (req, cs) = decide(&snap, &mlu_pod(1, 4, 10));
    let cx = ScoreCx {
        node: &snap.name,
        extra: None,
        before: &snap.devices,
        devices: &cs,
        pod: &req,
        policy: crate::model::request::NodePolicy::Binpack,
    };
    assert_eq!(v.node_score(&cx), 0.0);
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, "Property tests")

fn any_usage(cards: usize) -> impl Strategy<Value = Vec<(usize, u32, u64, u32)>> {
    prop::collection::vec(
        (
            prop_oneof![3 => Just(0u32), 2 => 0u32..=100, 1 => Just(100)],
            prop_oneof![3 => Just(0u64), 2 => 0u64..=24576, 1 => Just(24576)],
            prop_oneof![3 => Just(0u32), 2 => 0u32..=100, 1 => Just(100)],
        ),
        cards,
    )
    .prop_map(|v| v.into_iter().enumerate().map(|(i, (s, m, c))| (i, s, m, c)).collect())
}

/// One container's Cambricon limits: count, optional memory units and cores.
fn any_limits() -> impl Strategy<Value = Option<(u32, Option<u32>, Option<u32>)>> {
    prop::option::weighted(
        0.8,
        (
            prop_oneof![3 => Just(1u32), 1 => 1u32..=3],
            prop::option::of(prop_oneof![3 => 1u32..=16, 1 => 0u32..=96]),
            prop::option::of(prop_oneof![3 => 0u32..=50, 1 => Just(100), 1 => 0u32..=150]),
        ),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn accepted_placements_never_overcommit_a_card(
        (cards, usage) in (1u32..=6).prop_flat_map(|n| (Just(n), any_usage(n as usize))),
        init in any_limits(),
        apps in prop::collection::vec(any_limits(), 1..=3),
        policy in prop::sample::select(&["binpack", "spread", "mutex"][..]),
    ) {
        let v = vendors();
        let snap = with_usage(mlus(cards).snapshot(&v), &usage);
        let mut p = with(pod(), &apps[0]);
        for (i, l) in apps.iter().enumerate().skip(1) {
            p = with(p.container(&format!("c{i}")), l);
        }
        p = with(p.init("i0"), &init).annotation(common::GPU_SCHEDULER_POLICY, policy);
        let req = p.request_with(&v);
        if let Ok(fit) = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()) {
            check_within_capacity(&snap, &req, &fit.devices, &v).map_err(TestCaseError::fail)?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine (in-memory backend)
