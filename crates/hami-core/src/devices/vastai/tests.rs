use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::*;
use crate::devices::{LockKind, NoQuota};
use crate::model::annotations::GPU_SCHEDULER_POLICY;
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::model::request::NodePolicy;
use crate::model::{ContainerDevices, NodeName};
use crate::sched::NodeSnapshot;
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

fn cards(n: u32) -> NodeBuilder {
    va_node(&(0..n).map(|i| dev(&format!("va-{i}"), i, None)).collect::<Vec<_>>())
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

/// The ids a fit chose, comma-joined.
fn ids(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    try_fit(snap, p).map(|e| {
        e.split([':', ';'])
            .filter(|x| !x.is_empty())
            .map(|x| x.split(',').next().unwrap().to_owned())
            .collect::<Vec<_>>()
            .join(",")
    })
}

// ---------------------------------------------------------------------------------------------
// Request derivation and the webhook

#[test]
fn requests_are_counts_only() {
    // HAMi's Vastai request: nums = count (limits, else requests), percentage 100, cores 0.
    // The count, or the resource a refusal names.
    type Want = Result<Option<u32>, &'static str>;
    let rows: [(&str, Quantities, Quantities, Want); 5] = [
        ("count", &[(VA, "2")], &[], Ok(Some(2))),
        ("from requests", &[], &[(VA, "1")], Ok(Some(1))),
        // HAMi reads a fractional count as no request; hami-rs refuses it, naming the resource.
        ("fractional", &[(VA, "0.5")], &[], Err(VA)),
        ("zero", &[(VA, "0")], &[], Ok(None)),
        ("absent", &[], &[], Ok(None)),
    ];
    for (what, l, r, want) in rows {
        let got = va().request(VendorId(12), &container(l, r), &PodView::default());
        match want {
            Ok(w) => assert_eq!(got, Ok(w.map(|n| ContainerRequest::new(VendorId(12), n, 0, 100, 0))), "{what}"),
            Err(name) => assert!(got.as_ref().is_err_and(|e| e.to_string().contains(name)), "{what}: {got:?}"),
        }
    }
    let mutate = |c: Value| {
        let mut c = c;
        let annotations = Map::new();
        let mut edits = PodEdits::default();
        let mut e = ContainerEdit { container: &mut c, index: 0, is_init: false };
        let mut p = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        va().mutate(&mut e, &mut p).map_err(|e| e.to_string())
    };
    // As in HAMi, recognised iff the count is in limits.
    assert_eq!(mutate(json!({"resources": {"limits": {VA: "1"}}})), Ok(true));
    assert_eq!(mutate(json!({"resources": {"requests": {VA: "1"}}})), Ok(false));
}

// ---------------------------------------------------------------------------------------------
// Discovery, health, clean-up, lock

#[test]
fn registration_forces_devcore_to_100_and_keeps_the_die_info() {
    // As HAMi reads it: JSON list, devcore forced to 100 on read; custominfo DeviceStrategy and
    // AIC passed through. The colon form is accepted too.
    let Discovery::Devices { devices, .. } = va().discover(&dies().view()) else { panic!("none") };
    assert_eq!(devices.len(), 5);
    assert!(devices.iter().all(|d| d.devcore == 100));
    assert!(is_die(&devices[0]));
    assert_eq!(aic(&devices[3]), Some("B"));
    let colon = node("n1").annotation(keys::REGISTER, "va-0,4,16384,7,VA1L,0,true:");
    let Discovery::Devices { devices, .. } = va().discover(&colon.view()) else { panic!("none") };
    assert_eq!((devices[0].devcore, is_die(&devices[0])), (100, false));
    assert!(matches!(va().discover(&node("n1").annotation(keys::REGISTER, "{").view()), Discovery::Malformed { .. }));
    assert!(matches!(va().discover(&node("n1").view()), Discovery::Absent));
}

#[test]
fn handshake_health_clean_up_and_the_shared_lock() {
    // As in HAMi: hami.io/node-handshake-va; clean-up removes it; the shared hami.io/mutex.lock.
    assert_eq!(
        va().health_rule(),
        HealthRule::Handshake { key: "hami.io/node-handshake-va".into(), count_resource: VA.into() }
    );
    assert_eq!(va().cleanup(), Cleanup::RemoveAnnotation("hami.io/node-handshake-va".into()));
    assert_eq!(va().lock(), LockKind::Shared);
    assert_eq!(va().resource_names(), [VA]);
    assert_eq!(
        Vastai::new(&CountOnlyConfig::default()).request(
            VendorId(12),
            &container(&[(VA, "1")], &[]),
            &PodView::default()
        ),
        Ok(None)
    );
}

// ---------------------------------------------------------------------------------------------
// Fit

#[test]
fn card_mode_checks_health_type_uuid_slots_and_mutex_only() {
    let v = vendors();
    let snap = cards(2).snapshot(&v);
    // No memory or core checks; the entries reserve nothing. The walk starts from the end.
    assert_eq!(try_fit(&snap, &ask(2)), Ok("va-1,Vastai,0,0:va-0,Vastai,0,0:;".into()));
    let mut s = cards(2).snapshot(&v);
    s.devices[0].health = false;
    set_usage(&mut s, "va-1", 4, 0, 0);
    assert_eq!(try_fit(&s, &ask(1)), Err("1/2 CardNotHealth, 1/2 CardTimeSlicingExhausted".into()));
    let mut s = cards(2).snapshot(&v);
    set_usage(&mut s, "va-0", 1, 0, 0);
    let mutex = ask(1).annotation(GPU_SCHEDULER_POLICY, "mutex");
    assert_eq!(ids(&s, &mutex), Ok("va-1".into()));
    assert_eq!(
        try_fit(&s, &ask(2).annotation(GPU_SCHEDULER_POLICY, "mutex")),
        Err("1/2 AllocatedCardsInsufficientRequest, 1/2 ExclusiveDeviceAllocateConflict".into())
    );
    // UUID selection with vastaitech.com/use-gpuuuid / nouse-gpuuuid.
    assert_eq!(ids(&snap, &ask(1).annotation(keys::USE_UUID, "va-0")), Ok("va-0".into()));
    assert_eq!(try_fit(&snap, &ask(1).annotation(keys::NOUSE_UUID, "va-0,va-1")), Err("2/2 CardUuidMismatch".into()));
}

#[test]
fn use_va_and_nouse_va_select_device_types() {
    // HAMi declares vastaitech.com/use-va / nouse-va without enforcing them; hami-rs enforces
    // them as type lists (case-insensitive substrings of the device type).
    let mut devs = vec![dev("va-0", 0, None), dev("va-1", 1, None)];
    devs[1].ty = std::sync::Arc::from("VA16");
    let snap = va_node(&devs).snapshot(&vendors());
    assert_eq!(ids(&snap, &ask(1).annotation(keys::USE_TYPE, "va1l")), Ok("va-0".into()));
    assert_eq!(ids(&snap, &ask(1).annotation(keys::NOUSE_TYPE, "VA16")), Ok("va-0".into()));
    assert_eq!(try_fit(&snap, &ask(1).annotation(keys::USE_TYPE, "VA10")), Err("2/2 CardTypeMismatch".into()));
    // A blank value is no constraint: va-1, registered last, is tried first.
    assert_eq!(ids(&snap, &ask(1).annotation(keys::USE_TYPE, " ")), Ok("va-1".into()));
}

#[test]
fn die_mode_takes_whole_cards_first() {
    // HAMi's die mode (decided by the first candidate) collects every fitting die,
    // walking from the end of the sorted list (d4 first); one requested → the first collected;
    // more → grouped by AIC, largest groups first, each filled in collection order.
    let snap = dies().snapshot(&vendors());
    assert_eq!(ids(&snap, &ask(1)), Ok("d4".into()));
    assert_eq!(ids(&snap, &ask(2)), Ok("d4,d3".into()));
    assert_eq!(ids(&snap, &ask(3)), Ok("d4,d3,d2".into()));
    assert_eq!(ids(&snap, &ask(4)), Ok("d4,d3,d2,d1".into()));
    // Exactly as many dies as requested: taken as collected.
    assert_eq!(ids(&snap, &ask(5)), Ok("d4,d3,d2,d1,d0".into()));
    assert_eq!(try_fit(&snap, &ask(6)), Err("NodeInsufficientDevice".into()));
    // A full die is not collected; with equal groups the card met first (B, from d3) wins.
    let mut s = dies().snapshot(&vendors());
    set_usage(&mut s, "d4", 4, 0, 0);
    assert_eq!(ids(&s, &ask(2)), Ok("d3,d2".into()));
    assert_eq!(try_fit(&s, &ask(5)), Err("1/5 CardTimeSlicingExhausted, 4/5 AllocatedCardsInsufficientRequest".into()));
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and
    // Vastai's Fit walks the list from the end; in die mode it collects in that order and keeps
    // it (one die: the first collected; a card's dies: as collected). So the second device is
    // tried first, under every policy.
    let cards = cards(2).snapshot(&vendors());
    let one_card = va_node(&[dev("d0", 0, Some("A")), dev("d1", 1, Some("A"))]).snapshot(&vendors());
    let rows = [
        ("card mode", &cards, ask(1), "va-1"),
        ("card mode, binpack", &cards, ask(1).annotation(GPU_SCHEDULER_POLICY, "binpack"), "va-1"),
        ("card mode, mutex", &cards, ask(1).annotation(GPU_SCHEDULER_POLICY, "mutex"), "va-1"),
        ("card mode, two cards", &cards, ask(2), "va-1,va-0"),
        ("die mode", &one_card, ask(1), "d1"),
        ("die mode, mutex", &one_card, ask(1).annotation(GPU_SCHEDULER_POLICY, "mutex"), "d1"),
        ("die mode, two dies", &one_card, ask(2), "d1,d0"),
    ];
    for (what, snap, p, want) in rows {
        assert_eq!(ids(snap, &p), Ok(want.into()), "{what}");
    }
}

#[test]
fn mutex_in_die_mode_keeps_busy_cards_whole() {
    // In HAMi, under mutex an idle die on a card with a busy die conflicts too.
    let mut s = dies().snapshot(&vendors());
    set_usage(&mut s, "d3", 1, 0, 0);
    let p = ask(2).annotation(GPU_SCHEDULER_POLICY, "mutex");
    assert_eq!(ids(&s, &p), Ok("d1,d0".into()));
    let p = ask(3).annotation(GPU_SCHEDULER_POLICY, "mutex");
    assert_eq!(
        try_fit(&s, &p),
        Err("2/5 AllocatedCardsInsufficientRequest, 3/5 ExclusiveDeviceAllocateConflict".into())
    );
}

#[test]
fn dies_without_a_card_id_come_after_whole_cards() {
    // HAMi drops card-less dies from the grouping and can answer fewer dies than requested;
    // hami-rs keeps them, after the cards, in collection order (y before x).
    let loose = |id: &str, index| {
        let mut d = dev(id, index, Some("-"));
        let mut m = (*d.custom.clone().unwrap()).clone();
        m.remove("AIC");
        d.custom = Some(std::sync::Arc::new(m));
        d
    };
    let devs = vec![dev("d0", 0, Some("A")), dev("d1", 1, Some("A")), loose("x", 2), loose("y", 3)];
    let snap = va_node(&devs).snapshot(&vendors());
    assert_eq!(ids(&snap, &ask(3)), Ok("d1,d0,y".into()));
}

// ---------------------------------------------------------------------------------------------
// Node score (die mode only)

fn score(snap: &NodeSnapshot, containers: &[&[&str]]) -> f32 {
    let v = vendors();
    let req = ask(1).request_with(&v);
    let devices: Vec<ContainerDevices> =
        containers.iter().map(|c| c.iter().map(|u| ContainerDevice::new(u, WORD, 0, 0)).collect()).collect();
    let name = NodeName::new("n1");
    va().node_score(&ScoreCx {
        node: &name,
        extra: None,
        before: &snap.devices,
        devices: &devices,
        pod: &req,
        policy: NodePolicy::Binpack,
    })
}

#[test]
fn the_die_score_rewards_dies_on_one_card() {
    // HAMi: Σ over containers of the largest same-AIC group ÷ dies.
    let snap = dies().snapshot(&vendors());
    assert_eq!(score(&snap, &[&["d2", "d3"]]), 1.0);
    assert_eq!(score(&snap, &[&["d1", "d2"]]), 0.5);
    assert_eq!(score(&snap, &[&["d0", "d1", "d2"], &[], &["d4"]]), 2.0 / 3.0 + 1.0);
    // Devices not in die mode, or without card ids, score 0.
    assert_eq!(score(&cards(2).snapshot(&vendors()), &[&["va-0"]]), 0.0);
    let mut card = dev("c0", 0, Some("A"));
    let mut m = (*card.custom.clone().unwrap()).clone();
    m.insert("DeviceStrategy".into(), json!("card"));
    card.custom = Some(std::sync::Arc::new(m));
    assert_eq!(score(&va_node(&[card]).snapshot(&vendors()), &[&["c0"]]), 0.0);
    // Through fit, the score is added to the node's (HAMi adds vendor scores whatever the policy).
    let v = vendors();
    let req = ask(2).request_with(&v);
    let s = crate::sched::fit::fit_pod(&dies().snapshot(&v), &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    assert_eq!(s, 1.0);
}

// ---------------------------------------------------------------------------------------------
// Annotations

#[test]
fn filter_writes_both_keys_with_a_capital_v() {
    let v = vendors();
    let snap = cards(1).snapshot(&v);
    let req = ask(1).request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(id()).unwrap();
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: cs, pod: &req, unix_s: 1, unix_ns: 1 };
    let mut out = Vec::new();
    va().annotations(&cx, &mut out);
    let want = "va-0,Vastai,0,0:;".to_owned();
    assert_eq!(
        out,
        [
            ("hami.io/Vastai-devices-to-allocate".to_owned(), want.clone()),
            ("hami.io/Vastai-devices-allocated".to_owned(), want)
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, property tests)

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn accepted_placements_never_overcommit_slots(
        die_mode in any::<bool>(),
        cards_of in prop::collection::vec(0u8..3, 1..=8),
        slots in 1u32..=3,
        policy in prop::sample::select(vec!["binpack", "spread", "mutex"]),
        pods in prop::collection::vec((prop::collection::vec(prop::option::of(1u32..=4), 1..=3), prop::option::of(1u32..=3)), 1..=6),
    ) {
        let devs: Vec<DeviceInfo> = cards_of
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let card = format!("card-{c}");
                let mut d = dev(&format!("d{i}"), i as u32, die_mode.then_some(card.as_str()));
                d.count = slots;
                d
            })
            .collect();
        let v = vendors();
        let mut snap = va_node(&devs).snapshot(&v);
        for (i, (apps, init)) in pods.iter().enumerate() {
            let mut p = pod().name(&format!("p{i}")).annotation(GPU_SCHEDULER_POLICY, policy);
            if let Some(n) = apps[0] {
                p = p.limit(VA, &n.to_string());
            }
            for (j, a) in apps.iter().enumerate().skip(1) {
                p = p.container(&format!("c{j}"));
                if let Some(n) = a {
                    p = p.limit(VA, &n.to_string());
                }
            }
            if let Some(n) = init {
                p = p.init("i").limit(VA, &n.to_string());
            }
            let req = p.request_with(&v);
            if let Some(got) = place(&mut snap, &req, &v).map_err(TestCaseError::fail)? {
                // Each request got exactly what it asked for, on distinct dies.
                for (ci, c) in got.vendor(id()).unwrap_or(&[]).iter().enumerate() {
                    let want = req.containers[ci].first().map_or(0, |r| r.nums as usize);
                    let mut u: Vec<&str> = c.iter().map(|d| d.uuid.as_str()).collect();
                    u.dedup();
                    prop_assert_eq!((c.len(), u.len()), (want, want));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine
