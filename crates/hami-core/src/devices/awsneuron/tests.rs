use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::*;
use crate::devices::{Cleanup, HealthRule, NoQuota, Vendors};
use crate::model::annotations::GPU_SCHEDULER_POLICY;
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::sched::NodeSnapshot;
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

fn id(v: &Vendors) -> VendorId {
    v.by_name(WORD).unwrap()
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

/// Discovers `n` (so the vendors learn the cores per device), lets `prep` set usage, then fits.
fn try_fit_with(n: &NodeBuilder, prep: impl FnOnce(&mut NodeSnapshot), p: &PodBuilder) -> Result<String, String> {
    let v = vendors();
    let mut snap = n.snapshot(&v);
    prep(&mut snap);
    let req = p.request_with(&v);
    match fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()) {
        Ok(fit) => Ok(codec::encode_pod_devices(fit.devices.vendor(id(&v)).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

fn try_fit(n: &NodeBuilder, p: &PodBuilder) -> Result<String, String> {
    try_fit_with(n, |_| {}, p)
}

// ---------------------------------------------------------------------------------------------
// Request derivation and the webhook

#[test]
fn requests_by_device_or_by_core_split_by_the_learned_cores_per_device() {
    // HAMi: nums = neuron (cores = cores per device), else derived from neuroncore: ≤ cores per
    // device → one device, a multiple → that many whole devices.
    let v = aws();
    let _ = v.discover(&neurons(4, 2, "inf2.xlarge").view());
    type Want = Option<(u32, u32, i32)>;
    let rows: [(&str, Quantities, Quantities, Want); 7] = [
        ("two devices", &[(NEURON, "2")], &[], Some((2, 2, MODE_DEVICES))),
        ("devices from requests", &[], &[(NEURON, "1")], Some((1, 2, MODE_DEVICES))),
        ("devices win over cores", &[(NEURON, "1"), (CORE, "4")], &[], Some((1, 2, MODE_DEVICES))),
        ("one core", &[(CORE, "1")], &[], Some((1, 1, MODE_CORES))),
        ("two cores: one device", &[(CORE, "2")], &[], Some((1, 2, MODE_CORES))),
        ("six cores: three devices", &[(CORE, "6")], &[], Some((3, 2, MODE_CORES))),
        ("nothing", &[], &[], None),
    ];
    for (what, l, r, want) in rows {
        let got = v.request(VendorId(10), &container(l, r), &PodView::default()).unwrap();
        let want =
            want.map(|(n, c, mode)| ContainerRequest { mode, ..ContainerRequest::new(VendorId(10), n, 0, 0, c) });
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn invalid_counts_are_refused_with_the_webhooks_messages() {
    // HAMi's webhook wants a positive integer within range, and a core count that splits.
    // HAMi's request derivation drops such containers; hami-rs refuses them with the same text.
    let v = aws();
    let _ = v.discover(&neurons(4, 2, "inf2.xlarge").view());
    let rows: [(Quantities, &str); 6] = [
        (&[(NEURON, "0")], "aws.amazon.com/neuron must be greater than 0"),
        (&[(NEURON, "1.5")], "aws.amazon.com/neuron must be an integer"),
        (&[(NEURON, "3000000000")], "aws.amazon.com/neuron must not exceed 2147483647"),
        (&[(CORE, "-2")], "aws.amazon.com/neuroncore must be greater than 0"),
        (&[(CORE, "5000000000")], "aws.amazon.com/neuroncore must not exceed 4294967294"),
        (&[(CORE, "3")], "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"),
    ];
    let annotations = Map::new();
    for (limits, msg) in rows {
        assert_eq!(
            v.request(VendorId(10), &container(limits, &[]), &PodView::default()).map_err(|e| e.to_string()),
            Err(msg.to_owned())
        );
        let mut c: Value = json!({"name": "c", "resources": {"limits": limits.iter().map(|(k, q)| ((*k).to_owned(), json!(q))).collect::<Map<_, _>>()}});
        let mut edits = PodEdits::default();
        let mut e = ContainerEdit { container: &mut c, index: 0, is_init: false };
        let mut p = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        assert_eq!(v.mutate(&mut e, &mut p).map_err(|e| e.to_string()), Err(msg.to_owned()));
    }
    // Valid requests are recognised and left unchanged; other containers are not recognised.
    for (c, want) in [
        (json!({"resources": {"limits": {NEURON: "2"}}}), true),
        (json!({"resources": {"requests": {CORE: "4"}}}), true),
        (json!({"resources": {"limits": {"cpu": "1"}}}), false),
    ] {
        let mut c2 = c.clone();
        let mut edits = PodEdits::default();
        let mut e = ContainerEdit { container: &mut c2, index: 0, is_init: false };
        let mut p = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        assert_eq!(v.mutate(&mut e, &mut p).map_err(|e| e.to_string()), Ok(want));
        assert_eq!(c2, c);
    }
}

#[test]
fn core_splitting_follows_the_first_node_seen() {
    // As in HAMi, cores per device come from the first node and are then reused; the split is
    // capped at two cores per device. Before any node, two.
    let v = aws();
    assert_eq!(v.learned_cores(), None);
    assert_eq!(v.split_cores(4), Ok((2, 2)));
    assert_eq!(
        v.request(VendorId(10), &container(&[(NEURON, "1")], &[]), &PodView::default()).unwrap().unwrap().cores,
        0
    );
    let _ = v.discover(&neurons(2, 1, "trn1.2xlarge").view());
    assert_eq!(v.learned_cores(), Some(1));
    assert_eq!(v.split_cores(3), Ok((3, 1)));
    let _ = v.discover(&neurons(2, 2, "inf2.xlarge").view());
    assert_eq!(v.learned_cores(), Some(1), "only the first node counts");
    let four = aws();
    let _ = four.discover(&neurons(2, 4, "inf1.xlarge").view());
    assert_eq!(four.split_cores(4), Ok((2, 2)), "at most two cores per device");
}

// ---------------------------------------------------------------------------------------------
// Discovery (devices made up from node capacity), health, lock

#[test]
fn devices_are_synthesised_from_capacity_and_the_instance_type() {
    // As HAMi makes them up from capacity (N devices, K cores): N devices `<node>-AWSNeuron-<i>`,
    // count K/N, devmem 0, devcore a mask of K/N ones, type AWSNeuron, custominfo AWSNodeType =
    // the instance-type label.
    let v = aws();
    let Discovery::Devices { devices, .. } = v.discover(&neurons(4, 2, "inf2.24xlarge").view()) else { panic!("none") };
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d.id.as_str(), format!("n1-AWSNeuron-{i}"));
        assert_eq!(
            (d.index, d.count, d.devmem.get(), d.devcore, &*d.ty, d.health),
            (i as u32, 2, 0, 3, "AWSNeuron", true)
        );
        assert_eq!(d.custom_str(NODE_TYPE), Some("inf2.24xlarge"));
    }
    // A later node with another ratio still gets the learned figure.
    let Discovery::Devices { devices, .. } = v.discover(&neurons(2, 1, "").view()) else { panic!("none") };
    assert_eq!((devices[0].count, devices[0].devcore, devices[0].custom_str(NODE_TYPE)), (2, 3, Some("")));
    // No count capacity: no devices. No core capacity on the first node: nothing learned.
    assert!(matches!(aws().discover(&node("n1").view()), Discovery::Absent));
    let w = aws();
    let Discovery::Devices { devices, .. } = w.discover(&node("n0").capacity(NEURON, "2").view()) else {
        panic!("none")
    };
    assert_eq!((devices[0].count, devices[0].devcore, w.learned_cores()), (0, 0, None));
    let Discovery::Devices { devices, .. } = w.discover(&neurons(1, 2, "trn1").view()) else { panic!("none") };
    assert_eq!((devices[0].count, devices[0].devcore, w.learned_cores()), (2, 3, Some(2)));
}

#[test]
fn always_healthy_and_never_locked() {
    // As in HAMi, AWS Neuron is always healthy and never locks the node.
    assert_eq!(
        (aws().health_rule(), aws().cleanup(), aws().lock()),
        (HealthRule::AlwaysHealthy, Cleanup::Nothing, LockKind::None)
    );
    assert_eq!(aws().resource_names(), [NEURON, CORE]);
    assert_eq!(aws().quota_names().cores.as_deref(), Some(CORE));
}

// ---------------------------------------------------------------------------------------------
// Fit, several devices: contiguous blocks by device index

fn busy(ids: &'static [u32]) -> impl FnOnce(&mut NodeSnapshot) {
    move |s| {
        for i in ids {
            set_usage(s, &format!("n1-AWSNeuron-{i}"), 1, 0, 1);
        }
    }
}

#[test]
fn inf_instances_take_the_first_idle_run_anywhere() {
    // HAMi: on `inf` types the first run of consecutive idle, healthy devices.
    let n = neurons(4, 2, "inf2.24xlarge");
    assert_eq!(
        try_fit_with(&n, busy(&[1]), &devices(2)),
        Ok("n1-AWSNeuron-2,AWSNeuron,0,3:n1-AWSNeuron-3,AWSNeuron,0,3:;".into())
    );
    assert_eq!(
        try_fit_with(&n, busy(&[2]), &devices(2)),
        Ok("n1-AWSNeuron-0,AWSNeuron,0,3:n1-AWSNeuron-1,AWSNeuron,0,3:;".into())
    );
    assert_eq!(try_fit_with(&n, busy(&[1]), &devices(3)), Err("1/4 NumaNotFit".into()));
    let sick = |s: &mut NodeSnapshot| s.devices[0].health = false;
    assert_eq!(
        try_fit_with(&n, sick, &devices(3)),
        Ok("n1-AWSNeuron-1,AWSNeuron,0,3:n1-AWSNeuron-2,AWSNeuron,0,3:n1-AWSNeuron-3,AWSNeuron,0,3:;".into())
    );
    // "Inf" matches too; cores split across devices are whole devices here.
    assert!(try_fit(&neurons(4, 2, "Inf1"), &cores(6)).is_ok());
}

#[test]
fn other_instances_take_aligned_blocks_of_4_8_or_16() {
    // HAMi: other types only for 4, 8, 16 devices, blocks aligned to the size.
    let n = neurons(16, 2, "trn1.32xlarge");
    let got = try_fit_with(&n, busy(&[1]), &devices(4)).unwrap();
    assert_eq!(
        got.split(':').filter(|e| !e.is_empty() && *e != ";").map(|e| e.split(',').next().unwrap()).collect::<Vec<_>>(),
        ["n1-AWSNeuron-4", "n1-AWSNeuron-5", "n1-AWSNeuron-6", "n1-AWSNeuron-7"]
    );
    assert!(try_fit_with(&n, busy(&[15]), &devices(8)).unwrap().starts_with("n1-AWSNeuron-0,"));
    assert_eq!(try_fit_with(&n, busy(&[0, 8]), &devices(8)), Err("1/16 NumaNotFit".into()));
    assert_eq!(try_fit(&n, &devices(2)), Err("1/16 NumaNotFit".into()));
    assert_eq!(try_fit(&n, &devices(3)), Err("1/16 NumaNotFit".into()));
    assert!(try_fit(&n, &devices(16)).is_ok());
    // No instance-type label reads as "" (not inf): aligned blocks.
    let unlabeled = node("n1").capacity(NEURON, "8").capacity(CORE, "16");
    assert_eq!(try_fit(&unlabeled, &devices(2)), Err("1/8 NumaNotFit".into()));
    assert!(try_fit(&unlabeled, &devices(4)).is_ok());
}

#[test]
fn blocks_are_chosen_and_allocated_by_device_index() {
    // HAMi checks list positions (policy-sorted) but allocates the devices whose index equals them.
    // hami-rs checks and allocates by index, whatever the order.
    let n = neurons(4, 2, "inf2.24xlarge");
    for policy in ["binpack", "spread", "mutex"] {
        let p = devices(2).annotation(GPU_SCHEDULER_POLICY, policy);
        let reversed = |s: &mut NodeSnapshot| {
            busy(&[0])(s);
            s.devices.reverse();
        };
        assert_eq!(
            try_fit_with(&n, reversed, &p),
            Ok("n1-AWSNeuron-1,AWSNeuron,0,3:n1-AWSNeuron-2,AWSNeuron,0,3:;".into()),
            "{policy}"
        );
    }
    // UUID selections do not apply to blocks (HAMi).
    let p = devices(2).annotation(keys::NOUSE_UUID, "n1-AWSNeuron-0,n1-AWSNeuron-1");
    assert!(try_fit(&n, &p).unwrap().starts_with("n1-AWSNeuron-0,"));
}

// ---------------------------------------------------------------------------------------------
// Fit, one device: core masks

#[test]
fn a_single_device_gets_a_core_mask() {
    let n = neurons(2, 2, "inf2.xlarge");
    // Devices without memory score 0, so the sort keeps registration order and the walk from the
    // end tries device 1 first.
    // Idle device: one core → mask 1, two cores (or the whole device) → mask 3.
    assert_eq!(try_fit(&n, &cores(1)), Ok("n1-AWSNeuron-1,AWSNeuron,0,1:;".into()));
    assert_eq!(try_fit(&n, &cores(2)), Ok("n1-AWSNeuron-1,AWSNeuron,0,3:;".into()));
    assert_eq!(try_fit(&n, &devices(1)), Ok("n1-AWSNeuron-1,AWSNeuron,0,3:;".into()));
    // A device with core 0 taken gives the complement (mask 2).
    let half = |s: &mut NodeSnapshot| {
        set_usage(s, "n1-AWSNeuron-0", 1, 0, 2);
        set_usage(s, "n1-AWSNeuron-1", 1, 0, 1);
    };
    let p = cores(1).annotation(GPU_SCHEDULER_POLICY, "binpack");
    assert_eq!(try_fit_with(&n, half, &p), Ok("n1-AWSNeuron-1,AWSNeuron,0,2:;".into()));
    let only_1 = |s: &mut NodeSnapshot| {
        set_usage(s, "n1-AWSNeuron-0", 2, 0, 3);
        set_usage(s, "n1-AWSNeuron-1", 1, 0, 2);
    };
    assert_eq!(try_fit_with(&n, only_1, &cores(1)), Ok("n1-AWSNeuron-1,AWSNeuron,0,1:;".into()));
    assert_eq!(try_fit_with(&n, half, &cores(2)), Err("2/2 CardInsufficientCore".into()));
    // A whole-device request needs every core free.
    assert_eq!(try_fit_with(&n, half, &devices(1)), Err("2/2 CardInsufficientCore".into()));
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and AWS
    // Neuron's one-device Fit walks the list from the end, so device 1 is tried first. A block of
    // devices is chosen by index from the lowest, so two devices come in index order.
    let n = neurons(2, 2, "inf2.xlarge");
    let rows = [
        ("one core", cores(1), "n1-AWSNeuron-1,AWSNeuron,0,1:;"),
        ("one core, binpack", cores(1).annotation(GPU_SCHEDULER_POLICY, "binpack"), "n1-AWSNeuron-1,AWSNeuron,0,1:;"),
        ("one core, mutex", cores(1).annotation(GPU_SCHEDULER_POLICY, "mutex"), "n1-AWSNeuron-1,AWSNeuron,0,1:;"),
        ("one device", devices(1), "n1-AWSNeuron-1,AWSNeuron,0,3:;"),
        ("a block of two", devices(2), "n1-AWSNeuron-0,AWSNeuron,0,3:n1-AWSNeuron-1,AWSNeuron,0,3:;"),
    ];
    for (what, p, want) in rows {
        assert_eq!(try_fit(&n, &p), Ok(want.into()), "{what}");
    }
}

#[test]
fn single_device_checks_run_in_hamis_order() {
    // HAMi's order: healthy, type contains AWSNeuron, UUID, Used < Count, mutex, free core bits.
    let n = neurons(3, 2, "inf2.xlarge");
    let prep = |s: &mut NodeSnapshot| {
        s.devices[0].health = false;
        let mut info = (*s.devices[1].info).clone();
        info.ty = std::sync::Arc::from("Trainium");
        s.devices[1].info = std::sync::Arc::new(info);
        set_usage(s, "n1-AWSNeuron-2", 2, 0, 3);
    };
    assert_eq!(
        try_fit_with(&n, prep, &cores(1)),
        Err("1/3 CardNotHealth, 1/3 CardTimeSlicingExhausted, 1/3 CardTypeMismatch".into())
    );
    let p = cores(1).annotation(keys::USE_UUID, "n1-AWSNeuron-2");
    assert_eq!(try_fit(&n, &p), Ok("n1-AWSNeuron-2,AWSNeuron,0,1:;".into()));
    let p = cores(1).annotation(keys::NOUSE_UUID, "n1-AWSNeuron-0,n1-AWSNeuron-1,n1-AWSNeuron-2");
    assert_eq!(try_fit(&n, &p), Err("3/3 CardUuidMismatch".into()));
    let p = cores(1).annotation(GPU_SCHEDULER_POLICY, "mutex");
    assert_eq!(try_fit_with(&n, busy(&[0, 1, 2]), &p), Err("3/3 ExclusiveDeviceAllocateConflict".into()));
}

// ---------------------------------------------------------------------------------------------
// Annotations

fn written(n: &NodeBuilder, p: &PodBuilder) -> Vec<(String, String)> {
    let v = vendors();
    let snap = n.snapshot(&v);
    let req = p.request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(id(&v)).unwrap();
    let cx = WriteCx {
        node: &snap.name,
        devs: &snap.devices,
        devices: cs,
        pod: &req,
        unix_s: 1787293239,
        unix_ns: 1787293239000000007,
    };
    let mut out = Vec::new();
    v.get(id(&v)).annotations(&cx, &mut out);
    out.sort();
    out
}

fn kv(k: &str, v: &str) -> (String, String) {
    (k.to_owned(), v.to_owned())
}

#[test]
fn device_requests_write_device_indexes_accumulated_over_containers() {
    // As HAMi writes them: AWS_NEURON_IDS = device indexes for device requests,
    // accumulated over the containers; NEURON_ALLOC_TIME unix-ns; NEURON_ALLOCATED "false";
    // aws.amazon.com/predicate-node; no NEURON_RESOURCE_TYPE. The block takes devices 0 and 1;
    // the one-device container walks from the end and gets device 3.
    let p = devices(2).container("b").limit(NEURON, "1");
    assert_eq!(
        written(&neurons(4, 2, "inf2.24xlarge"), &p),
        [
            kv("AWS_NEURON_IDS", "0,1,3"),
            kv("NEURON_ALLOCATED", "false"),
            kv("NEURON_ALLOC_TIME", "1787293239000000007"),
            kv("aws.amazon.com/predicate-node", "n1"),
            kv(
                "hami.io/aws-neuron-devices-allocated",
                "n1-AWSNeuron-0,AWSNeuron,0,3:n1-AWSNeuron-1,AWSNeuron,0,3:;n1-AWSNeuron-3,AWSNeuron,0,3:;"
            ),
        ]
    );
}

#[test]
fn core_requests_write_core_indexes_and_the_resource_type() {
    // AWS_NEURON_IDS holds core indexes cpd × idx (mask bit 1) and cpd × idx + 1 (mask bit 2), cpd
    // being the cores per device, and NEURON_RESOURCE_TYPE = the core resource name. Two one-core
    // containers share device 1 (devices without memory all score 0, so the walk meets device 1
    // first both times): cores 2 and 3.
    let p = cores(1).annotation(GPU_SCHEDULER_POLICY, "binpack").container("b").limit(CORE, "1");
    let out = written(&neurons(2, 2, "inf2.xlarge"), &p);
    assert_eq!(out[0], kv("AWS_NEURON_IDS", "2,3"));
    assert!(out.contains(&kv("NEURON_RESOURCE_TYPE", CORE)));
    assert!(out.contains(&kv(
        "hami.io/aws-neuron-devices-allocated",
        "n1-AWSNeuron-1,AWSNeuron,0,1:;n1-AWSNeuron-1,AWSNeuron,0,2:;"
    )));
    // Four cores are two whole devices, each listing both its cores.
    let out = written(&neurons(4, 2, "inf2.24xlarge"), &cores(4));
    assert_eq!(out[0], kv("AWS_NEURON_IDS", "0,1,2,3"));
    let mut declared = aws().pod_keys();
    declared.sort();
    let mut got: Vec<String> = out.into_iter().map(|(k, _)| k).collect();
    got.sort();
    assert_eq!(got, declared, "every key written is declared for clearing");
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, property tests)

fn any_ask() -> impl Strategy<Value = Option<(bool, u32)>> {
    prop_oneof![
        1 => Just(None),
        2 => prop::sample::select(vec![1u32, 1, 2, 3, 4, 8]).prop_map(|n| Some((true, n))),
        2 => prop::sample::select(vec![1u32, 1, 2, 4, 6]).prop_map(|n| Some((false, n))),
    ]
}

fn with_ask(p: PodBuilder, a: &Option<(bool, u32)>) -> PodBuilder {
    match a {
        None => p,
        Some((true, n)) => p.limit(NEURON, &n.to_string()),
        Some((false, n)) => p.limit(CORE, &n.to_string()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn accepted_placements_never_overcommit_slots_or_cores(
        n in 1u32..=16,
        per in 1u32..=2,
        ty in prop::sample::select(vec!["inf2.48xlarge", "trn1.32xlarge"]),
        policy in prop::sample::select(vec!["binpack", "spread", "mutex"]),
        pods in prop::collection::vec((prop::collection::vec(any_ask(), 1..=2), any_ask()), 1..=8),
    ) {
        let v = vendors();
        let mut snap = neurons(n, per, ty).snapshot(&v);
        for (i, (apps, init)) in pods.iter().enumerate() {
            let mut p = with_ask(pod().name(&format!("p{i}")).annotation(GPU_SCHEDULER_POLICY, policy), &apps[0]);
            for (j, a) in apps.iter().enumerate().skip(1) {
                p = with_ask(p.container(&format!("c{j}")), a);
            }
            p = with_ask(p.init("i"), init);
            let Ok(req) = v.pod_request(&p.view(), &defaults()) else { continue };
            place(&mut snap, &req, &v).map_err(TestCaseError::fail)?;
            // Core masks of one device never overlap: the used mask stays within the device's.
            for d in &snap.devices {
                prop_assert!(d.used_cores & !d.info.devcore == 0, "{:?}", d);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine
