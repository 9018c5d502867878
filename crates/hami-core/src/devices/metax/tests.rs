use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::*;
use crate::devices::{Cleanup, NoQuota, Vendors};
use crate::model::annotations as common_keys;
use crate::model::edit::PodEdits;
use crate::model::{ContainerDevices, MemMiB, PodRequest};
use crate::sched::NodeSnapshot;
use crate::sched::accounting::{Layout, apply, collapse};
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

fn id(v: &Vendors) -> VendorId {
    v.by_name(WORD).expect("Metax GPU is always registered")
}

/// The snapshot with some devices already holding `used` tasks.
fn snapshot(n: &NodeBuilder, busy: &[(&str, u32)]) -> NodeSnapshot {
    let mut s = n.snapshot(&vendors());
    for (dev, used) in busy {
        let d = s.devices.iter_mut().find(|d| d.info.id.as_str() == *dev).expect("fixture device exists");
        d.used = *used;
        d.used_mem = MemMiB(DEVMEM * u64::from(*used));
        d.used_cores = DEVCORE * used;
    }
    s
}

/// The pod's Metax GPU annotation on success, HAMi's reason text on failure.
fn eval(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    let v = vendors();
    let req = p.request_with(&v);
    match fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()) {
        Ok(fit) => Ok(codec::encode_pod_devices(fit.devices.vendor(id(&v)).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

// ---------------------------------------------------------------------------------------------
// Request derivation (HAMi: whole devices)

#[test]
fn request_derivation_asks_for_whole_devices() {
    let v = MetaxGpu::new(&chart());
    let id = VendorId(6);
    let pod = PodView::default();
    type Want = Result<Option<(u32, u64, u32, u32)>, ()>;
    type Quantities<'a> = &'a [(&'a str, &'a str)];
    let rows: [(&str, Quantities<'_>, Quantities<'_>, Want); 10] = [
        // Count = gpu; memory 0, percentage 100, cores 100 (a whole device).
        ("count 1", &[(GPU, "1")], &[], Ok(Some((1, 0, 100, 100)))),
        ("count 3", &[(GPU, "3")], &[], Ok(Some((3, 0, 100, 100)))),
        // The limit, else the request.
        ("count in requests", &[], &[(GPU, "2")], Ok(Some((2, 0, 100, 100)))),
        ("the limit wins", &[(GPU, "1")], &[(GPU, "2")], Ok(Some((1, 0, 100, 100)))),
        // A vendor appears only when its count is positive.
        ("count 0", &[(GPU, "0")], &[], Ok(None)),
        // HAMi's AsInt64 reads these as no request; hami-rs refuses them.
        ("negative count", &[(GPU, "-1")], &[], Err(())),
        ("fractional count", &[(GPU, "1.5")], &[], Err(())),
        ("milli count", &[(GPU, "500m")], &[], Err(())),
        ("no count", &[("metax-tech.com/sgpu", "1")], &[], Ok(None)),
        // HAMi truncates to int32; hami-rs refuses a count it cannot represent.
        ("count past int32", &[(GPU, "2147483648")], &[], Err(())),
    ];
    for (what, limits, requests, want) in rows {
        let got = v
            .request(id, &container(limits, requests), &pod)
            .map(|r| r.map(|r| (r.nums, r.memreq.get(), r.mempct, r.cores)))
            .map_err(|_| ());
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn an_unconfigured_count_name_matches_nothing() {
    // As in HAMi, an absent config section leaves empty resource names; the vendor matches nothing.
    let v = MetaxGpu::new(&MetaxConfig::default());
    assert!(v.resource_names().is_empty());
    assert_eq!(v.request(VendorId(6), &container(&[(GPU, "1")], &[]), &PodView::default()), Ok(None));
    assert!(matches!(v.discover(&metax_node("n1", 2).view()), Discovery::Absent));
}

#[test]
fn resource_names_and_quota_are_the_count_only() {
    // HAMi's Metax GPU has a count resource and no memory or core resources.
    let v = MetaxGpu::new(&chart());
    assert_eq!(v.resource_names(), [GPU]);
    assert_eq!(v.quota_names(), crate::devices::QuotaNames::default());
}

// ---------------------------------------------------------------------------------------------
// Discovery (devices made up from node capacity) and health

#[test]
fn capacity_becomes_one_whole_device_per_unit() {
    // As HAMi makes them up: id `<node>-metax-<i>`, count 1, devmem 65536, devcore 100, type
    // Metax-GPU.
    let (devs, extra) = devices(MetaxGpu::new(&chart()).discover(&metax_node("n1", 3).view()));
    let want: Vec<DeviceInfo> =
        (0..3).map(|i| DeviceInfo::new(&format!("n1-metax-{i}"), i, 1, 65536, 100, "Metax-GPU")).collect();
    assert_eq!(devs, want);
    assert!(devs.iter().all(|d| d.health && d.numa == 0));
    assert_eq!(*extra, Extra::default(), "no topology annotations");
}

#[test]
fn zero_missing_or_fractional_capacity_means_no_devices() {
    // A missing or zero capacity means "no devices"; HAMi reads it with AsInt64.
    let v = MetaxGpu::new(&chart());
    for cap in ["0", "-2", "1.5", "lots"] {
        assert!(matches!(v.discover(&node("n1").capacity(GPU, cap).view()), Discovery::Absent), "{cap}");
    }
    assert!(matches!(v.discover(&node("n1").view()), Discovery::Absent));
}

#[test]
fn topology_annotations_are_read_at_discovery() {
    // The topology annotations map a device count to a value, `{"1":0,"2":10,…}`; an unparsable
    // value is present but empty.
    let n = metax_node("n1", 2)
        .annotation(keys::TOPOLOGY_LOSSES, r#"{"1":0,"2":10}"#)
        .annotation(keys::TOPOLOGY_SCORES, "not json");
    let (_, extra) = devices(MetaxGpu::new(&chart()).discover(&n.view()));
    assert_eq!(extra.losses, TopologyMap::Present([(1, 0), (2, 10)].into()));
    assert_eq!(extra.scores, TopologyMap::Present(BTreeMap::new()));
}

#[test]
fn topology_maps_parse_like_go_map_int_int() {
    // Go's json.Unmarshal into map[int]int: decimal keys, integer values; any error empties it.
    let cases: [(&str, &[(i64, i64)]); 6] = [
        (r#"{"1":0,"2":10,"4":-5}"#, &[(1, 0), (2, 10), (4, -5)]),
        ("null", &[]),
        (r#"{"x":1}"#, &[]),
        (r#"{"1":1.5}"#, &[]),
        (r#"{"1":"10"}"#, &[]),
        ("[1,2]", &[]),
    ];
    for (text, want) in cases {
        assert_eq!(TopologyMap::parse(Some(text)), TopologyMap::Present(want.iter().copied().collect()), "{text}");
    }
    assert_eq!(TopologyMap::parse(None), TopologyMap::Absent);
}

#[test]
fn health_is_positive_capacity_and_cleanup_does_nothing() {
    // As in HAMi, Metax GPU is healthy iff status.capacity[count] > 0; clean-up removes nothing.
    let v = MetaxGpu::new(&chart());
    assert_eq!(v.health_rule(), HealthRule::CapacityPositive { resource: GPU.into() });
    assert_eq!(v.cleanup(), Cleanup::Nothing);
}

#[test]
fn metax_gpu_takes_no_node_lock() {
    // As in HAMi, Metax GPU never locks the node.
    assert_eq!(MetaxGpu::new(&chart()).lock(), LockKind::None);
}

// ---------------------------------------------------------------------------------------------
// Webhook

fn mutate(container: Value) -> (Result<bool, String>, Value, PodEdits) {
    let v = MetaxGpu::new(&chart());
    let annotations = Map::new();
    let mut edits = PodEdits::default();
    let mut c = container.clone();
    let r = {
        let mut ce = ContainerEdit { container: &mut c, index: 0, is_init: false };
        let mut pc = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        v.mutate(&mut ce, &mut pc).map_err(|e| e.to_string())
    };
    (r, c, edits)
}

#[test]
fn webhook_recognises_the_count_in_limits_and_changes_nothing() {
    // As in HAMi, Metax GPU is recognised iff the count resource is in limits; no change.
    let limits = json!({"name": "c", "resources": {"limits": {GPU: "2"}}});
    let (r, c, edits) = mutate(limits.clone());
    assert_eq!(r, Ok(true));
    assert_eq!(c, limits);
    assert_eq!(edits, PodEdits::default());
    let requests = json!({"name": "c", "resources": {"requests": {GPU: "2"}}});
    assert_eq!(mutate(requests).0, Ok(false), "requests alone are not recognised");
    assert_eq!(mutate(json!({"name": "c"})).0, Ok(false));
}

// ---------------------------------------------------------------------------------------------
// Fit: HAMi's generic device walk without UUID selection, plus the same-device rule. The default
// GPU policy is spread; among idle devices the one registered last is tried first.

#[test]
fn a_single_device_request_takes_a_whole_idle_device() {
    // Percentage 100 reserves all 65536 MiB, and 100 cores.
    assert_eq!(
        eval(&snapshot(&metax_node("n1", 2), &[]), &metax_pod(1)),
        Ok("n1-metax-1,Metax-GPU,65536,100:;".into())
    );
}

#[test]
fn one_container_may_take_several_devices() {
    // HAMi's same-device rule looks only at earlier containers, so one container takes several.
    assert_eq!(
        eval(&snapshot(&metax_node("n1", 3), &[]), &metax_pod(2)),
        Ok("n1-metax-2,Metax-GPU,65536,100:n1-metax-1,Metax-GPU,65536,100:;".into())
    );
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and
    // Metax GPU's Fit walks the list from the end, so n1-metax-1 is tried first, under every
    // policy.
    let snap = snapshot(&metax_node("n1", 2), &[]);
    let policy = |p: &str| metax_pod(1).annotation(common_keys::GPU_SCHEDULER_POLICY, p);
    let rows = [
        ("default policy", metax_pod(1), "n1-metax-1,Metax-GPU,65536,100:;"),
        ("binpack", policy("binpack"), "n1-metax-1,Metax-GPU,65536,100:;"),
        ("mutex", policy("mutex"), "n1-metax-1,Metax-GPU,65536,100:;"),
        ("two devices", metax_pod(2), "n1-metax-1,Metax-GPU,65536,100:n1-metax-0,Metax-GPU,65536,100:;"),
    ];
    for (what, p, want) in rows {
        assert_eq!(eval(&snap, &p), Ok(want.into()), "{what}");
    }
}

#[test]
fn fit_rules_reject_with_hamis_reason_words() {
    let two = metax_node("n1", 2);
    let rows: [(&str, NodeSnapshot, PodBuilder, Result<&str, &str>); 6] = [
        // A device is one slot (count 1), so a busy device is exhausted.
        (
            "busy devices are exhausted",
            snapshot(&two, &[("n1-metax-0", 1)]),
            metax_pod(1),
            Ok("n1-metax-1,Metax-GPU,65536,100:;"),
        ),
        (
            "every device busy",
            snapshot(&two, &[("n1-metax-0", 1), ("n1-metax-1", 1)]),
            metax_pod(1),
            Err("2/2 CardTimeSlicingExhausted"),
        ),
        // Some but not enough devices found.
        (
            "two wanted, one free",
            snapshot(&two, &[("n1-metax-1", 1)]),
            metax_pod(2),
            Err("1/2 AllocatedCardsInsufficientRequest, 1/2 CardTimeSlicingExhausted"),
        ),
        // More devices than the node has.
        ("three wanted, two on the node", snapshot(&two, &[]), metax_pod(3), Err("NodeInsufficientDevice")),
        // The mutex policy rejects used devices (here the exhausted-slots reason comes first,
        // since a Metax device has one slot).
        (
            "mutex",
            snapshot(&two, &[("n1-metax-0", 1)]),
            metax_pod(1).annotation(common_keys::GPU_SCHEDULER_POLICY, "mutex"),
            Ok("n1-metax-1,Metax-GPU,65536,100:;"),
        ),
        // HAMi's Metax GPU has no UUID selection; any value is accepted.
        (
            "uuid annotations are ignored",
            snapshot(&two, &[]),
            metax_pod(1)
                .annotation("metax-tech.com/use-gpuuuid", "n1-metax-0")
                .annotation("metax-tech.com/nouse-gpuuuid", "n1-metax-1"),
            Ok("n1-metax-1,Metax-GPU,65536,100:;"),
        ),
    ];
    for (what, snap, p, want) in rows {
        assert_eq!(eval(&snap, &p), want.map(str::to_owned).map_err(str::to_owned), "{what}");
    }
}

#[test]
fn unhealthy_devices_are_skipped() {
    let mut snap = snapshot(&metax_node("n1", 2), &[]);
    snap.devices[1].health = false;
    assert_eq!(eval(&snap, &metax_pod(1)), Ok("n1-metax-0,Metax-GPU,65536,100:;".into()));
    snap.devices[0].health = false;
    assert_eq!(eval(&snap, &metax_pod(1)), Err("2/2 CardNotHealth".into()));
}

#[test]
fn a_later_container_must_use_the_earlier_containers_device() {
    // HAMi's same-device rule: every device earlier containers got must be this device. HAMi checks
    // the rule after the capacity checks, so the device the first container took (now busy)
    // counts as exhausted and the idle one as breaking the rule; the second container never fits.
    let p = metax_pod(1).container("second").limit(GPU, "1");
    assert_eq!(
        eval(&snapshot(&metax_node("n1", 2), &[]), &p),
        Err("1/2 CardNotFoundCustomFilterRule, 1/2 CardTimeSlicingExhausted".into())
    );
}

#[test]
fn a_device_busy_with_another_pod_counts_as_exhausted_not_as_the_rule() {
    // The same-device rule runs after the capacity checks (HAMi's Metax Fit order).
    let p = metax_pod(1).container("second").limit(GPU, "1");
    assert_eq!(
        eval(&snapshot(&metax_node("n1", 3), &[("n1-metax-2", 1)]), &p),
        Err("1/3 CardNotFoundCustomFilterRule, 2/3 CardTimeSlicingExhausted".into())
    );
}

#[test]
fn init_and_regular_containers_are_held_to_the_rule_separately() {
    // HAMi fits init containers into their own result, so the rule binds a
    // regular container only to earlier regular containers. Held to the init container's two
    // devices, the regular container could never fit.
    let p = pod().init("setup").limit(GPU, "2").main().limit(GPU, "1");
    assert_eq!(
        eval(&snapshot(&metax_node("n1", 2), &[]), &p),
        Ok("n1-metax-1,Metax-GPU,65536,100:n1-metax-0,Metax-GPU,65536,100:;n1-metax-1,Metax-GPU,65536,100:;".into())
    );
}

// ---------------------------------------------------------------------------------------------
// Annotations

fn written(snap: &NodeSnapshot, req: &PodRequest, cs: &[ContainerDevices]) -> Vec<(String, String)> {
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: cs, pod: req, unix_s: 1787293239, unix_ns: 0 };
    let mut out = Vec::new();
    MetaxGpu::new(&chart()).annotations(&cx, &mut out);
    out
}

#[test]
fn filter_writes_both_hami_keys_identically() {
    // As in HAMi: to-allocate and allocated, no extra keys.
    let v = vendors();
    let snap = snapshot(&metax_node("n1", 2), &[]);
    let req = metax_pod(1).request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let want = "n1-metax-1,Metax-GPU,65536,100:;";
    assert_eq!(
        written(&snap, &req, fit.devices.vendor(id(&v)).unwrap()),
        [(keys::TO_ALLOCATE.to_owned(), want.to_owned()), (keys::ALLOCATED.to_owned(), want.to_owned())]
    );
    assert_eq!(MetaxGpu::new(&chart()).pod_keys(), [keys::TO_ALLOCATE, keys::ALLOCATED]);
    assert_eq!(MetaxGpu::new(&chart()).allocated_key(), Some(keys::ALLOCATED));
}

#[test]
fn containers_without_a_device_get_an_empty_entry() {
    // One entry per container, empty where unused.
    let p = pod().init("setup").main().container("worker").limit(GPU, "1");
    assert_eq!(eval(&snapshot(&metax_node("n1", 1), &[]), &p), Ok(";;n1-metax-0,Metax-GPU,65536,100:;".into()));
}

#[test]
fn the_allocation_reads_back_from_the_allocated_key() {
    let mut pv = PodView::default();
    pv.metadata.annotations.insert(keys::ALLOCATED.into(), "n1-metax-1,Metax-GPU,65536,100:;".into());
    let got = MetaxGpu::new(&chart()).decode_allocation(&pv).unwrap().unwrap();
    assert_eq!(got[0][0].uuid.as_str(), "n1-metax-1");
    assert_eq!(MetaxGpu::new(&chart()).decode_allocation(&PodView::default()).unwrap(), None);
}

// ---------------------------------------------------------------------------------------------
// Node score (from the node's topology annotations)

#[test]
fn node_score_follows_the_node_policy_and_the_device_count() {
    let both = Extra {
        losses: TopologyMap::parse(Some(r#"{"1":0,"2":10,"3":40}"#)),
        scores: TopologyMap::parse(Some(r#"{"1":100,"2":30}"#)),
    };
    // binpack: 2000 − losses[n], n = devices over all containers.
    assert_eq!(score(&both, NodePolicy::Binpack, &[2]), 1990.0);
    assert_eq!(score(&both, NodePolicy::Binpack, &[1, 0, 2]), 1960.0);
    // spread: 2000 − scores[n].
    assert_eq!(score(&both, NodePolicy::Spread, &[1]), 1900.0);
    // A node policy other than binpack/spread scores 0.
    assert_eq!(score(&both, NodePolicy::Other, &[1]), 0.0);
    // Present but without key n → the value counts 0 → 2000.
    assert_eq!(score(&both, NodePolicy::Spread, &[3]), 2000.0);
    // Present but unparsable → 2000.
    let bad = Extra { losses: TopologyMap::parse(Some("{")), scores: TopologyMap::Absent };
    assert_eq!(score(&bad, NodePolicy::Binpack, &[1]), 2000.0);
    // Absent → 0.
    assert_eq!(score(&bad, NodePolicy::Spread, &[1]), 0.0);
    assert_eq!(score(&Extra::default(), NodePolicy::Binpack, &[1]), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Property: accepted placements never overcommit a device (as tests/fit_invariant.rs checks for every vendor)

fn any_case() -> impl Strategy<Value = (u32, Vec<bool>, Vec<(bool, u32)>, &'static str)> {
    (1u32..=6).prop_flat_map(|n| {
        (
            Just(n),
            prop::collection::vec(prop::bool::weighted(0.3), n as usize),
            // (init container?, count 0..=3)
            prop::collection::vec((prop::bool::weighted(0.3), 0u32..=3), 1..=3),
            prop::sample::select(vec!["spread", "binpack", "mutex"]),
        )
    })
}

proptest! {
    #[test]
    fn accepted_placements_never_overcommit_a_metax_gpu((n, busy, containers, policy) in any_case()) {
        let v = vendors();
        let builder = metax_node("n1", n);
        let busy: Vec<(String, u32)> =
            busy.iter().enumerate().filter(|(_, b)| **b).map(|(i, _)| (format!("n1-metax-{i}"), 1)).collect();
        let busy_ref: Vec<(&str, u32)> = busy.iter().map(|(s, u)| (s.as_str(), *u)).collect();
        let snap = snapshot(&builder, &busy_ref);
        let mut p = pod().annotation(common_keys::GPU_SCHEDULER_POLICY, policy);
        for (i, (init, count)) in containers.iter().enumerate() {
            p = if *init { p.init(&format!("i{i}")) } else if i == 0 { p } else { p.container(&format!("c{i}")) };
            if *count > 0 {
                p = p.limit(GPU, &count.to_string());
            }
        }
        let req = p.request_with(&v);
        if let Ok(fit) = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()) {
            let info = |u: &crate::model::DeviceUuid| snap.devices.iter().find(|d| &d.info.id == u).map(|d| d.info.clone());
            for init_released in [false, true] {
                let layout = Layout { n_init: req.n_init, sidecars: req.sidecars.clone(), init_released };
                let mut devs = snap.devices.clone();
                let unmatched = apply(&mut devs, &collapse(&fit.devices, &layout, &v, &info));
                prop_assert!(unmatched.0.is_empty());
                for d in &devs {
                    prop_assert!(d.within_capacity(), "{:?}", d);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine (in-memory backend)
