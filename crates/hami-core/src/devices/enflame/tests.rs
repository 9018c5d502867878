use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::*;
use crate::devices::{Cleanup, NoQuota};
use crate::model::annotations::GPU_SCHEDULER_POLICY;
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::sched::NodeSnapshot;
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

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

/// The pod's GCU annotation on success, HAMi's reason text on failure.
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
fn requests_take_whole_devices_by_count() {
    // HAMi's Enflame GCU request: nums = gcu, memory 100, percentage 100, cores 100.
    // The count, or the resource a refusal names.
    type Want = Result<Option<u32>, &'static str>;
    let rows: [(&str, Quantities, Quantities, Want); 8] = [
        ("count 2 in limits", &[(GCU, "2")], &[], Ok(Some(2))),
        // Limits first, requests as a fallback.
        ("count in requests only", &[], &[(GCU, "1")], Ok(Some(1))),
        ("the limit wins over the request", &[(GCU, "3")], &[(GCU, "1")], Ok(Some(3))),
        // HAMi's AsInt64 reads a non-integer or negative count as no request; hami-rs refuses it.
        ("fractional count", &[(GCU, "1.5")], &[], Err(GCU)),
        ("milli count", &[(GCU, "500m")], &[], Err(GCU)),
        ("zero", &[(GCU, "0")], &[], Ok(None)),
        ("negative", &[(GCU, "-1")], &[], Err(GCU)),
        ("absent", &[], &[], Ok(None)),
    ];
    for (what, limits, requests, want) in rows {
        let got = gcu().request(VendorId(3), &container(limits, requests), &PodView::default());
        match want {
            Ok(w) => {
                assert_eq!(got, Ok(w.map(|n| ContainerRequest::new(VendorId(3), n, 100, 100, 100))), "{what}")
            }
            Err(name) => assert!(got.as_ref().is_err_and(|e| e.to_string().contains(name)), "{what}: {got:?}"),
        }
    }
}

#[test]
fn a_count_beyond_u32_is_refused_and_an_empty_name_matches_nothing() {
    // hami-rs refuses a count it cannot represent instead of wrapping it.
    let err = gcu().request(VendorId(3), &container(&[(GCU, "5000000000")], &[]), &PodView::default());
    assert!(err.unwrap_err().to_string().contains(GCU));
    // As in HAMi, an absent config section leaves the name empty, and the vendor matches nothing.
    let off = EnflameGcu::new(&EnflameConfig::default());
    assert_eq!(off.request(VendorId(3), &container(&[(GCU, "1")], &[]), &PodView::default()), Ok(None));
    assert!(off.resource_names().is_empty());
    assert!(matches!(off.discover(&gcus(2).view()), Discovery::Absent));
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
        gcu().mutate(&mut e, &mut p).map_err(|e| e.to_string())
    };
    (r, c)
}

#[test]
fn webhook_recognises_the_count_in_limits_only_and_changes_nothing() {
    // As in HAMi, Enflame GCU is recognised iff the count resource is in limits.
    let c = json!({"name": "c", "resources": {"limits": {GCU: "1"}}});
    assert_eq!(mutate(c.clone()), (Ok(true), c));
    let c = json!({"name": "c", "resources": {"requests": {GCU: "1"}}});
    assert_eq!(mutate(c.clone()), (Ok(false), c));
    assert_eq!(mutate(json!({"name": "c"})).0, Ok(false));
}

// ---------------------------------------------------------------------------------------------
// Discovery (devices made up from node capacity), health, lock

#[test]
fn devices_are_synthesised_from_capacity() {
    // As HAMi makes them up: id `<node>-GCU-<i>`, count 1, devmem 100, devcore 100, type GCU.
    let Discovery::Devices { devices, extra } = gcu().discover(&gcus(3).view()) else { panic!("no devices") };
    assert!(extra.is_none());
    let ids: Vec<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["n1-GCU-0", "n1-GCU-1", "n1-GCU-2"]);
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(
            (d.index, d.count, d.devmem.get(), d.devcore, &*d.ty, d.numa, d.health),
            (i as u32, 1, 100, 100, "GCU", 0, true)
        );
    }
    // A missing or zero capacity means no devices.
    assert!(matches!(gcu().discover(&node("n1").view()), Discovery::Absent));
    assert!(matches!(gcu().discover(&gcus(0).view()), Discovery::Absent));
}

#[test]
fn health_follows_capacity_and_nothing_is_cleaned_or_locked() {
    // As in HAMi, Enflame GCU is healthy iff capacity of its count resource > 0; no handshake,
    // no clean-up, no lock.
    let v = gcu();
    assert_eq!(v.health_rule(), HealthRule::CapacityPositive { resource: GCU.into() });
    assert_eq!(v.cleanup(), Cleanup::Nothing);
    assert_eq!(v.lock(), LockKind::None);
    assert_eq!(v.resource_names(), [GCU]);
    assert_eq!(v.quota_names(), crate::devices::QuotaNames::default());
}

// ---------------------------------------------------------------------------------------------
// Fit (whole devices, exclusively)

#[test]
fn fit_takes_only_healthy_unused_devices() {
    let v = vendors();
    // HAMi's GCU fit is exclusive only: a used device is a conflict; among idle devices the one
    // registered last is tried first.
    let snap = gcus(2).snapshot(&v);
    assert_eq!(try_fit(&snap, &ask(1)), Ok("n1-GCU-1,GCU,100,100:;".into()));
    assert_eq!(try_fit(&snap, &ask(2)), Ok("n1-GCU-1,GCU,100,100:n1-GCU-0,GCU,100,100:;".into()));

    let mut busy = gcus(2).snapshot(&v);
    set_usage(&mut busy, "n1-GCU-1", 1, 100, 100);
    assert_eq!(try_fit(&busy, &ask(1)), Ok("n1-GCU-0,GCU,100,100:;".into()));
    // HAMi's reasons: the busy device conflicts, and a partial find is insufficient.
    assert_eq!(
        try_fit(&busy, &ask(2)),
        Err("1/2 AllocatedCardsInsufficientRequest, 1/2 ExclusiveDeviceAllocateConflict".into())
    );

    let mut sick = gcus(1).snapshot(&v);
    sick.devices[0].health = false;
    assert_eq!(try_fit(&sick, &ask(1)), Err("1/1 CardNotHealth".into()));
    // More devices requested than the node has.
    assert_eq!(try_fit(&snap, &ask(3)), Err("NodeInsufficientDevice".into()));
}

#[test]
fn one_device_never_serves_two_containers_of_a_pod() {
    // Usage accumulates over regular containers: the second container finds the first one's device
    // busy.
    let snap = gcus(2).snapshot(&vendors());
    let p = ask(1).container("d").limit(GCU, "1");
    assert_eq!(try_fit(&snap, &p), Ok("n1-GCU-1,GCU,100,100:;n1-GCU-0,GCU,100,100:;".into()));
    let one = gcus(1).snapshot(&vendors());
    assert_eq!(try_fit(&one, &p), Err("1/1 ExclusiveDeviceAllocateConflict".into()));
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and the
    // GCU Fit walks the list from the end, so n1-GCU-1 is tried first, under every policy.
    let snap = gcus(2).snapshot(&vendors());
    let policy = |p: &str| ask(1).annotation(GPU_SCHEDULER_POLICY, p);
    let rows = [
        ("default policy", ask(1), "n1-GCU-1,GCU,100,100:;"),
        ("binpack", policy("binpack"), "n1-GCU-1,GCU,100,100:;"),
        ("mutex", policy("mutex"), "n1-GCU-1,GCU,100,100:;"),
        ("two devices", ask(2), "n1-GCU-1,GCU,100,100:n1-GCU-0,GCU,100,100:;"),
    ];
    for (what, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), Ok(want.into()), "{what}");
    }
}

// ---------------------------------------------------------------------------------------------
// Annotations

#[test]
fn filter_writes_both_keys_identically() {
    // hami.io/enflame-gcu-devices-to-allocate and …-allocated, identical.
    let v = vendors();
    let snap = gcus(2).snapshot(&v);
    let req = ask(1).request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(id()).unwrap();
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: cs, pod: &req, unix_s: 1, unix_ns: 1 };
    let mut out = Vec::new();
    gcu().annotations(&cx, &mut out);
    let want = "n1-GCU-1,GCU,100,100:;".to_owned();
    assert_eq!(
        out,
        [
            ("hami.io/enflame-gcu-devices-to-allocate".to_owned(), want.clone()),
            ("hami.io/enflame-gcu-devices-allocated".to_owned(), want)
        ]
    );
    assert_eq!(gcu().pod_keys(), ["hami.io/enflame-gcu-devices-to-allocate", "hami.io/enflame-gcu-devices-allocated"]);
    // The allocated key is what usage is rebuilt from.
    let back = gcu().decode_allocation(&pod().annotation(keys::ALLOCATED, "n1-GCU-0,GCU,100,100:;").view()).unwrap();
    assert_eq!(back.unwrap()[0][0].uuid.as_str(), "n1-GCU-0");
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, property tests)

fn any_container() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![1 => Just(None), 4 => (1u32..=3).prop_map(Some)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn accepted_placements_never_overcommit_a_gcu(
        devices in 1u32..=6,
        sick in prop::collection::vec(prop::bool::weighted(0.1), 6),
        pods in prop::collection::vec((prop::collection::vec(any_container(), 1..=3), any_container()), 1..=6),
    ) {
        let v = vendors();
        let mut snap = gcus(devices).snapshot(&v);
        for (d, s) in snap.devices.iter_mut().zip(sick) {
            d.health = !s;
        }
        for (i, (apps, init)) in pods.iter().enumerate() {
            let mut p = pod().name(&format!("p{i}"));
            if let Some(n) = apps[0] {
                p = p.limit(GCU, &n.to_string());
            }
            for (j, a) in apps.iter().enumerate().skip(1) {
                p = p.container(&format!("c{j}"));
                if let Some(n) = a {
                    p = p.limit(GCU, &n.to_string());
                }
            }
            if let Some(n) = init {
                p = p.init("i").limit(GCU, &n.to_string());
            }
            let req = p.request_with(&v);
            if let Some(devs) = place(&mut snap, &req, &v).map_err(TestCaseError::fail)? {
                // Every chosen device was idle and healthy beforehand: one task per GCU.
                for (_, c, d) in devs.entries() {
                    prop_assert_eq!((d.usedmem.get(), d.usedcores), (100, 100), "container {}", c);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine
