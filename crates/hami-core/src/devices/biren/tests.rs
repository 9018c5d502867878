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
// Request derivation and the webhook

#[test]
fn requests_are_counts_only() {
    // HAMi's Biren request: nums = count (limits, else requests), percentage 100, cores 0.
    // The count, or the resource a refusal names.
    type Want = Result<Option<u32>, &'static str>;
    let rows: [(&str, Quantities, Quantities, Want); 5] = [
        ("count", &[(BR, "2")], &[], Ok(Some(2))),
        ("from requests", &[], &[(BR, "1")], Ok(Some(1))),
        // HAMi reads these counts as no request; hami-rs refuses them, naming the resource.
        ("fractional", &[(BR, "1.5")], &[], Err(BR)),
        ("negative", &[(BR, "-1")], &[], Err(BR)),
        ("absent", &[], &[], Ok(None)),
    ];
    for (what, l, r, want) in rows {
        let got = br().request(VendorId(13), &container(l, r), &PodView::default());
        match want {
            Ok(w) => assert_eq!(got, Ok(w.map(|n| ContainerRequest::new(VendorId(13), n, 0, 100, 0))), "{what}"),
            Err(name) => assert!(got.as_ref().is_err_and(|e| e.to_string().contains(name)), "{what}: {got:?}"),
        }
    }
    let mutate = |c: Value| {
        let mut c = c;
        let annotations = Map::new();
        let mut edits = PodEdits::default();
        let mut e = ContainerEdit { container: &mut c, index: 0, is_init: false };
        let mut p = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        br().mutate(&mut e, &mut p).map_err(|e| e.to_string())
    };
    // As in HAMi, recognised iff the count is in limits.
    assert_eq!(mutate(json!({"resources": {"limits": {BR: "1"}}})), Ok(true));
    assert_eq!(mutate(json!({"resources": {"requests": {BR: "1"}}})), Ok(false));
}

// ---------------------------------------------------------------------------------------------
// Discovery, health, clean-up, lock

#[test]
fn registration_forces_devcore_to_100() {
    // As HAMi reads it: JSON list (hami-rs also accepts the colon form), devcore forced to 100.
    let Discovery::Devices { devices, .. } = br().discover(&two().view()) else { panic!("none") };
    assert_eq!(
        devices.iter().map(|d| (d.id.as_str(), d.devcore, d.count)).collect::<Vec<_>>(),
        [("br-0", 100, 2), ("br-1", 100, 2)]
    );
    let colon = node("n1").annotation(keys::REGISTER, "br-0,2,65536,7,BR104,0,true:");
    let Discovery::Devices { devices, .. } = br().discover(&colon.view()) else { panic!("none") };
    assert_eq!(devices[0].devcore, 100);
    assert!(matches!(br().discover(&node("n1").annotation(keys::REGISTER, "[{").view()), Discovery::Malformed { .. }));
    assert!(matches!(br().discover(&node("n1").annotation(keys::REGISTER, "null").view()), Discovery::Absent));
    assert!(matches!(br().discover(&node("n1").view()), Discovery::Absent));
}

#[test]
fn handshake_health_clean_up_and_the_shared_lock() {
    // As in HAMi: hami.io/node-handshake-biren; clean-up removes it; the shared hami.io/mutex.lock.
    assert_eq!(
        br().health_rule(),
        HealthRule::Handshake { key: "hami.io/node-handshake-biren".into(), count_resource: BR.into() }
    );
    assert_eq!(br().cleanup(), Cleanup::RemoveAnnotation("hami.io/node-handshake-biren".into()));
    assert_eq!(br().lock(), LockKind::Shared);
    assert_eq!(br().resource_names(), [BR]);
}

// ---------------------------------------------------------------------------------------------
// Fit

#[test]
fn fit_checks_health_type_uuid_slots_and_mutex_only() {
    let v = vendors();
    let snap = two().snapshot(&v);
    // No memory or core checks: the entries reserve nothing. The walk starts from the end.
    assert_eq!(try_fit(&snap, &ask(2)), Ok("br-1,Biren,0,0:br-0,Biren,0,0:;".into()));
    let mut s = two().snapshot(&v);
    s.devices[0].health = false;
    set_usage(&mut s, "br-1", 2, 65536, 100);
    assert_eq!(try_fit(&s, &ask(1)), Err("1/2 CardNotHealth, 1/2 CardTimeSlicingExhausted".into()));
    // A device whose memory is fully booked still takes a task (no memory rule).
    set_usage(&mut s, "br-1", 1, 65536, 100);
    assert_eq!(try_fit(&s, &ask(1)), Ok("br-1,Biren,0,0:;".into()));
    let p = ask(1).annotation(GPU_SCHEDULER_POLICY, "mutex");
    assert_eq!(try_fit(&s, &p), Err("1/2 CardNotHealth, 1/2 ExclusiveDeviceAllocateConflict".into()));
    // UUID selection with birentech.com/use-gpuuuid / nouse-gpuuuid.
    assert_eq!(try_fit(&snap, &ask(1).annotation(keys::USE_UUID, "br-0")), Ok("br-0,Biren,0,0:;".into()));
    assert_eq!(
        try_fit(&snap, &ask(2).annotation(keys::NOUSE_UUID, "br-1")),
        Err("1/2 AllocatedCardsInsufficientRequest, 1/2 CardUuidMismatch".into())
    );
}

#[test]
fn use_biren_and_nouse_biren_select_device_types() {
    // HAMi declares birentech.com/use-biren / nouse-biren without enforcing them; hami-rs enforces
    // them as type lists (case-insensitive substrings of the device type).
    let snap = two().snapshot(&vendors());
    assert_eq!(try_fit(&snap, &ask(1).annotation(keys::USE_TYPE, "br104")), Ok("br-0,Biren,0,0:;".into()));
    assert_eq!(try_fit(&snap, &ask(1).annotation(keys::NOUSE_TYPE, "BR106, BR105")), Ok("br-0,Biren,0,0:;".into()));
    assert_eq!(try_fit(&snap, &ask(1).annotation(keys::USE_TYPE, "BR110")), Err("2/2 CardTypeMismatch".into()));
    assert_eq!(try_fit(&snap, &ask(1).annotation(keys::NOUSE_TYPE, "")), Ok("br-1,Biren,0,0:;".into()));
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and
    // Biren's Fit walks the list from the end, so br-1 is tried first, under every policy.
    let snap = br_node(&[dev("br-0", 0, "BR104"), dev("br-1", 1, "BR104")]).snapshot(&vendors());
    let rows = [
        ("default policy", ask(1), "br-1,Biren,0,0:;"),
        ("binpack", ask(1).annotation(GPU_SCHEDULER_POLICY, "binpack"), "br-1,Biren,0,0:;"),
        ("mutex", ask(1).annotation(GPU_SCHEDULER_POLICY, "mutex"), "br-1,Biren,0,0:;"),
        ("two devices", ask(2), "br-1,Biren,0,0:br-0,Biren,0,0:;"),
    ];
    for (what, p, want) in rows {
        assert_eq!(try_fit(&snap, &p), Ok(want.into()), "{what}");
    }
}

// ---------------------------------------------------------------------------------------------
// Annotations

#[test]
fn filter_writes_both_keys_with_a_capital_b() {
    let v = vendors();
    let snap = two().snapshot(&v);
    let req = ask(1).init("setup").limit(BR, "1").request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(id()).unwrap();
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: cs, pod: &req, unix_s: 1, unix_ns: 1 };
    let mut out = Vec::new();
    br().annotations(&cx, &mut out);
    // One entry per container, init first (HAMi may leave such lists short). The init container's
    // device is not charged to the app container, so both get br-1, tried first.
    let want = "br-1,Biren,0,0:;br-1,Biren,0,0:;".to_owned();
    assert_eq!(
        out,
        [
            ("hami.io/Biren-devices-to-allocate".to_owned(), want.clone()),
            ("hami.io/Biren-devices-allocated".to_owned(), want)
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, property tests)

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn accepted_placements_never_overcommit_slots(
        counts in prop::collection::vec(1u32..=3, 1..=6),
        policy in prop::sample::select(vec!["binpack", "spread", "mutex"]),
        pods in prop::collection::vec((prop::collection::vec(prop::option::of(1u32..=3), 1..=3), prop::option::of(1u32..=2)), 1..=6),
    ) {
        let devs: Vec<DeviceInfo> = counts.iter().enumerate().map(|(i, c)| {
            let mut d = dev(&format!("br-{i}"), i as u32, "BR104");
            d.count = *c;
            d
        }).collect();
        let v = vendors();
        let mut snap = br_node(&devs).snapshot(&v);
        for (i, (apps, init)) in pods.iter().enumerate() {
            let mut p = pod().name(&format!("p{i}")).annotation(GPU_SCHEDULER_POLICY, policy);
            if let Some(n) = apps[0] {
                p = p.limit(BR, &n.to_string());
            }
            for (j, a) in apps.iter().enumerate().skip(1) {
                p = p.container(&format!("c{j}"));
                if let Some(n) = a {
                    p = p.limit(BR, &n.to_string());
                }
            }
            if let Some(n) = init {
                p = p.init("i").limit(BR, &n.to_string());
            }
            let req = p.request_with(&v);
            place(&mut snap, &req, &v).map_err(TestCaseError::fail)?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine
