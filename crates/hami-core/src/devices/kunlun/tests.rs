use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::*;
use super::topology::{bubble_score, bubbles, choose};
use super::*;
use crate::devices::{Cleanup, HealthRule, NoQuota};
use crate::model::MemMiB;
use crate::model::annotations::GPU_SCHEDULER_POLICY;
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::model::request::NodePolicy;
use crate::sched::NodeSnapshot;
use crate::sched::fit::{Scratch, fit_pod, fit_pod_devices};
use crate::testing::*;

fn kl() -> KunlunXpu {
    KunlunXpu::new(&KunlunConfig::chart())
}

fn id() -> VendorId {
    vendors().by_name(WORD).unwrap()
}

/// An 8-device node whose devices with these indexes are busy.
fn busy(indexes: &[u32]) -> NodeSnapshot {
    let mut s = xpus(8).snapshot(&vendors());
    for i in indexes {
        set_usage(&mut s, &format!("n1-kunlun-{i}"), 1, DEVICE_MEM, 100);
    }
    s
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

/// The device indexes a request of `n` gets on `snap`, as a comma list.
fn chosen(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    try_fit(snap, p).map(|enc| {
        enc.split([':', ';'])
            .filter(|e| !e.is_empty())
            .map(|e| e.split(',').next().unwrap().trim_start_matches("n1-kunlun-").to_owned())
            .collect::<Vec<_>>()
            .join(",")
    })
}

// ---------------------------------------------------------------------------------------------
// Request derivation

#[test]
fn requests_are_whole_devices_by_count() {
    // HAMi's Kunlun XPU request: nums = xpu, memory 0, percentage 100, cores 0.
    // The count, or the resource a refusal names.
    type Want = Result<Option<u32>, &'static str>;
    let rows: [(&str, Quantities, Quantities, Want); 6] = [
        ("count 4", &[(XPU, "4")], &[], Ok(Some(4))),
        ("count from requests", &[], &[(XPU, "1")], Ok(Some(1))),
        ("limit wins", &[(XPU, "2")], &[(XPU, "8")], Ok(Some(2))),
        // HAMi's AsInt64 reads it as no request; hami-rs refuses it, naming the resource.
        ("fractional", &[(XPU, "0.5")], &[], Err(XPU)),
        ("zero", &[(XPU, "0")], &[], Ok(None)),
        ("absent", &[], &[], Ok(None)),
    ];
    for (what, l, r, want) in rows {
        let got = kl().request(VendorId(8), &container(l, r), &PodView::default());
        match want {
            Ok(w) => assert_eq!(got, Ok(w.map(|n| ContainerRequest::new(VendorId(8), n, 0, 100, 0))), "{what}"),
            Err(name) => assert!(got.as_ref().is_err_and(|e| e.to_string().contains(name)), "{what}: {got:?}"),
        }
    }
    assert!(kl().request(VendorId(8), &container(&[(XPU, "5000000000")], &[]), &PodView::default()).is_err());
}

#[test]
fn webhook_recognises_the_count_in_limits_only() {
    // As in HAMi, Kunlun XPU is recognised iff the count is in limits; no change.
    let mutate = |c: Value| {
        let mut c = c;
        let annotations = Map::new();
        let mut edits = PodEdits::default();
        let mut e = ContainerEdit { container: &mut c, index: 0, is_init: false };
        let mut p = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        kl().mutate(&mut e, &mut p).map_err(|e| e.to_string())
    };
    assert_eq!(mutate(json!({"resources": {"limits": {XPU: "1"}}})), Ok(true));
    assert_eq!(mutate(json!({"resources": {"requests": {XPU: "1"}}})), Ok(false));
}

// ---------------------------------------------------------------------------------------------
// Discovery (devices made up from node capacity), health, lock

#[test]
fn devices_are_synthesised_from_capacity_with_the_upper_half_on_numa_1() {
    // As HAMi makes them up: id `<node>-kunlun-<i>`, count 100, devmem 98304, devcore 100, type
    // kunlun; numa 1 for i >= n/2.
    let Discovery::Devices { devices, .. } = kl().discover(&xpus(8).view()) else { panic!("no devices") };
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d.id.as_str(), format!("n1-kunlun-{i}"));
        assert_eq!(
            (d.index, d.count, d.devmem.get(), d.devcore, &*d.ty, d.health),
            (i as u32, 100, 98304, 100, "kunlun", true)
        );
        assert_eq!(d.numa, i32::from(i >= 4), "device {i}");
    }
    let Discovery::Devices { devices, .. } = kl().discover(&xpus(3).view()) else { panic!("no devices") };
    assert_eq!(devices.iter().map(|d| d.numa).collect::<Vec<_>>(), [0, 1, 1]);
    assert!(matches!(kl().discover(&node("n1").view()), Discovery::Absent));
}

#[test]
fn no_lock_always_healthy_nothing_to_clean() {
    // As in HAMi, Kunlun XPU is always healthy and never locks the node.
    assert_eq!(
        (kl().lock(), kl().health_rule(), kl().cleanup()),
        (LockKind::None, HealthRule::AlwaysHealthy, Cleanup::Nothing)
    );
    assert_eq!(kl().resource_names(), [XPU]);
}

// ---------------------------------------------------------------------------------------------
// The topology selector (HAMi's two wings: indexes 0–3 left, 4–7 right), on device indexes

fn fits(idx: &[usize]) -> [bool; 8] {
    let mut f = [false; 8];
    for &i in idx {
        f[i] = true;
    }
    f
}

#[test]
fn selector_follows_hamis_wing_preferences() {
    type Row = (&'static str, &'static [usize], u32, Option<&'static [usize]>);
    let all: &[usize] = &[0, 1, 2, 3, 4, 5, 6, 7];
    let rows: [Row; 22] = [
        // 8 devices: all 8 must fit.
        ("8 of 8", all, 8, Some(all)),
        ("8 of 7", &[0, 1, 2, 3, 4, 5, 6], 8, None),
        // 1 device: a wing with 1 fitting first, then 3, 2, 4; left before right.
        ("1: the lone hole on the right", &[0, 1, 2, 3, 7], 1, Some(&[7])),
        ("1: the lone hole on the left", &[2, 4, 5, 6, 7], 1, Some(&[2])),
        ("1: a wing with 3 before one with 2", &[0, 1, 4, 5, 6], 1, Some(&[4])),
        ("1: a wing with 2 before one with 4", &[0, 1, 2, 3, 6, 7], 1, Some(&[6])),
        ("1: both full: left first", all, 1, Some(&[0])),
        ("1: nothing", &[], 1, None),
        // 2 devices: a wing with 2, then 3, then 4.
        ("2: the wing with exactly 2", &[0, 1, 2, 3, 5, 7], 2, Some(&[5, 7])),
        ("2: 3 before 4", &[0, 1, 2, 4, 5, 6, 7], 2, Some(&[0, 1])),
        ("2: both full", all, 2, Some(&[0, 1])),
        // Otherwise a cross-wing pair (i, i+4).
        ("2: cross pair", &[1, 5], 2, Some(&[1, 5])),
        ("2: cross pair 3-7", &[3, 7], 2, Some(&[3, 7])),
        ("2: no pair", &[0, 5], 2, None),
        // 4 devices: a full wing; else a connected group of four.
        ("4: full right wing", &[0, 4, 5, 6, 7], 4, Some(&[4, 5, 6, 7])),
        ("4: group 0-1-4-5", &[0, 1, 4, 5], 4, Some(&[0, 1, 4, 5])),
        ("4: group 2-3-6-7 with 5 fitting", &[0, 2, 3, 6, 7], 4, Some(&[2, 3, 6, 7])),
        ("4: no group", &[0, 1, 2, 4], 4, None),
        // With 6 fitting: a group whose leftover two are linked.
        ("4: six fitting, leftover linked", &[0, 1, 2, 4, 5, 6], 4, Some(&[0, 1, 4, 5])),
        ("4: six fitting, leftover 3-7 linked", &[0, 1, 3, 4, 5, 7], 4, Some(&[0, 1, 4, 5])),
        // Other counts never fit.
        ("3 devices", all, 3, None),
        ("5 devices", all, 5, None),
    ];
    for (what, idx, n, want) in rows {
        assert_eq!(choose(&fits(idx), n), want.map(<[usize]>::to_vec), "{what}");
    }
}

#[test]
fn six_fitting_falls_back_to_the_last_fitting_group() {
    // HAMi: with 6 fitting and no group leaving a connected pair, the last fully fitting group.
    // Fitting 0,2,3,5,6,7: only 2-3-6-7 fits, and it leaves 0 and 5 unlinked.
    assert_eq!(choose(&fits(&[0, 2, 3, 5, 6, 7]), 4), Some(vec![2, 3, 6, 7]));
    // Two groups that fit always share a cross pair, so the first leaves a linked pair.
    assert_eq!(choose(&fits(&[0, 2, 3, 4, 6, 7]), 4), Some(vec![2, 3, 6, 7]));
}

#[test]
fn the_selector_works_on_device_indexes_not_list_positions() {
    // HAMi counts wings by position in the policy-sorted list. Busy devices 1, 2, 3 leave index 0
    // as the left wing's lone hole; whatever the policy order, hami-rs fills that hole (HAMi's
    // sorted positions would put the busy devices elsewhere).
    for policy in ["binpack", "spread", "mutex"] {
        let p = ask(1).annotation(GPU_SCHEDULER_POLICY, policy);
        assert_eq!(chosen(&busy(&[1, 2, 3]), &p), Ok("0".into()), "{policy}");
    }
    // Two devices after 0-3 are taken: the right wing.
    assert_eq!(chosen(&busy(&[0, 1, 2, 3]), &ask(2)), Ok("4,5".into()));
    // A node listing its devices out of index order still answers indexes.
    let mut s = xpus(8).snapshot(&vendors());
    s.devices.reverse();
    assert_eq!(chosen(&s, &ask(4)), Ok("0,1,2,3".into()));
}

#[test]
fn two_equal_devices_give_the_pod_the_first() {
    // HAMi: Kunlun's Fit does not walk from the end. Its selector scans the policy-sorted list
    // from the front (the first fitting devices of the chosen wing), and with two equal devices
    // the sort keeps registration order, so device 0 comes first under every policy. hami-rs
    // scans device indexes from the lowest, which gives the same.
    let s = xpus(2).snapshot(&vendors());
    let rows = [
        ("default policy", ask(1), "0"),
        ("binpack", ask(1).annotation(GPU_SCHEDULER_POLICY, "binpack"), "0"),
        ("mutex", ask(1).annotation(GPU_SCHEDULER_POLICY, "mutex"), "0"),
        ("two devices", ask(2), "0,1"),
    ];
    for (what, p, want) in rows {
        assert_eq!(chosen(&s, &p), Ok(want.into()), "{what}");
    }
}

#[test]
fn failures_report_uuid_mismatches_else_numa_not_fit() {
    let s = xpus(8).snapshot(&vendors());
    // HAMi: no allocation → UUID mismatches if any device failed a UUID selection, else one
    // NumaNotFit over the vendor's devices.
    assert_eq!(try_fit(&s, &ask(3)), Err("1/8 NumaNotFit".into()));
    assert_eq!(try_fit(&busy(&[0, 1, 2, 3, 4, 5, 6, 7]), &ask(1)), Err("1/8 NumaNotFit".into()));
    let p = ask(8).annotation(xpu_keys::NOUSE_UUID, "n1-kunlun-3");
    assert_eq!(try_fit(&s, &p), Err("1/8 CardUuidMismatch".into()));
    let mut sick = xpus(8).snapshot(&vendors());
    sick.devices[5].health = false;
    assert_eq!(try_fit(&sick, &ask(8)), Err("1/8 NumaNotFit".into()));
}

#[test]
fn both_uuid_selections_must_pass() {
    // As in HAMi, hami.io/use-xpu-uuid / no-use-xpu-uuid and baidu.com/use-gpuuuid / nouse-gpuuuid
    // are both checked.
    let s = xpus(8).snapshot(&vendors());
    let p = ask(1).annotation(xpu_keys::USE_UUID, "n1-kunlun-5,n1-kunlun-6");
    assert_eq!(chosen(&s, &p), Ok("5".into()));
    let p = p.annotation(keys::BAIDU_NOUSE_UUID, "n1-kunlun-5");
    assert_eq!(chosen(&s, &p), Ok("6".into()));
    let p = ask(1).annotation(keys::BAIDU_USE_UUID, "n1-kunlun-2").annotation(xpu_keys::USE_UUID, "n1-kunlun-3");
    assert_eq!(try_fit(&s, &p), Err("8/8 CardUuidMismatch".into()));
}

#[test]
fn entries_take_the_whole_device_and_fitting_counts_only_the_slot() {
    // As in HAMi, chosen entries take the device's full memory and cores; the usage update is
    // Used += 1 only.
    let s = xpus(8).snapshot(&vendors());
    assert_eq!(try_fit(&s, &ask(2)), Ok("n1-kunlun-0,kunlun,98304,100:n1-kunlun-1,kunlun,98304,100:;".into()));
    let mut d = s.devices[0].clone();
    let mut e = ContainerDevice::new("n1-kunlun-0", WORD, DEVICE_MEM, 100);
    kl().charge(&mut d, &mut e, &ask(1).request_with(&vendors()));
    assert_eq!((d.used, d.used_mem, d.used_cores), (1, MemMiB::ZERO, 0));
    // The next container of the pod sees the device busy: the left wing now has 3 fitting,
    // preferred over the full right wing.
    let two = ask(1).container("b").limit(XPU, "1");
    assert_eq!(try_fit(&s, &two), Ok("n1-kunlun-0,kunlun,98304,100:;n1-kunlun-1,kunlun,98304,100:;".into()));
}

// ---------------------------------------------------------------------------------------------
// Bubble node score (HAMi: a set's bubbles are, per wing, 0 for four devices, 2 for one, 1
// otherwise; the empty set has 1)

#[test]
fn bubbles_count_as_hami_counts_them() {
    for (set, want) in [
        (&[][..], 1),
        (&[0][..], 3),
        (&[0, 1, 2, 3][..], 1),
        (&[0, 1, 2, 3, 4, 5, 6, 7][..], 0),
        (&[0, 4][..], 4),
        (&[0, 1][..], 2),
        (&[4, 5, 6, 7, 0][..], 2),
    ] {
        assert_eq!(bubbles(set), want, "{set:?}");
    }
    // mine − busy: −1 → 3000, 0 → 2000, +1 → 1000, +2 → 0, anything else → 1000.
    for (busy, mine, want) in [
        (&[0][..], &[1, 2, 3][..], 3000.0),
        (&[][..], &[0, 1, 2, 3][..], 2000.0),
        (&[][..], &[0, 1][..], 1000.0),
        (&[][..], &[0][..], 0.0),
        (&[0, 1, 2, 3, 4, 5, 6, 7][..], &[0, 4][..], 1000.0),
        (&[0, 4][..], &[1][..], 3000.0),
        (&[0, 4][..], &[0, 1, 2, 3][..], 1000.0),
    ] {
        assert_eq!(bubble_score(busy, mine), want, "busy {busy:?}, mine {mine:?}");
    }
}

fn score(before: &[crate::model::DeviceUsage], devices: &[crate::model::ContainerDevices]) -> f32 {
    let v = vendors();
    let req = ask(1).request_with(&v);
    let name = crate::model::NodeName::new("n1");
    kl().node_score(&ScoreCx { node: &name, extra: None, before, devices, pod: &req, policy: NodePolicy::Binpack })
}

#[test]
fn the_node_score_compares_the_pods_devices_with_the_busy_ones() {
    // As in HAMi: busy = indexes in use before the pod, mine = the pod's indexes.
    let s = busy(&[0]);
    let e = |i: u32| {
        let mut d = ContainerDevice::new(&format!("n1-kunlun-{i}"), WORD, DEVICE_MEM, 100);
        d.idx = i;
        d
    };
    let mine = vec![vec![e(1), e(2)], vec![e(3)]];
    assert_eq!(score(&s.devices, &mine), 3000.0);
    // A device of another type on the node, or an entry of another type, scores 0.
    let mut other = s.devices.clone();
    let mut info = (*other[7].info).clone();
    info.ty = std::sync::Arc::from("NVIDIA-A100");
    other[7].info = std::sync::Arc::new(info);
    assert_eq!(score(&other, &mine), 0.0);
    let mut foreign = e(1);
    foreign.ty = std::sync::Arc::from("XPU");
    assert_eq!(score(&s.devices, &[vec![foreign]]), 0.0);
    // Through fit: the node score is added to the default score.
    let v = vendors();
    let req = ask(1).request_with(&v);
    let got = fit_pod(&xpus(8).snapshot(&v), &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    assert_eq!(got, 0.0, "a lone device on an idle node: +2 bubbles, score 0");
    let got = fit_pod(&busy(&[1, 2, 3]), &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let default = crate::sched::score::node_default_score(&busy(&[1, 2, 3]).devices);
    // The pod's {0} (3 bubbles) against the busy {1, 2, 3} (2): +1, so 1000 (HAMi compares the
    // two sets, not their union).
    assert_eq!(got, default + 1000.0);
}

// ---------------------------------------------------------------------------------------------
// Annotations

#[test]
fn filter_writes_the_allocated_key_and_the_last_containers_indexes() {
    // As HAMi writes them: hami.io/kunlun-allocated only (no to-allocate key), and
    // BAIDU_COM_DEVICE_IDX = indexes of the last container holding devices.
    let v = vendors();
    let snap = xpus(8).snapshot(&v);
    let p = ask(2).container("b").limit(XPU, "1").container("c2");
    let req = p.request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(id()).unwrap();
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: cs, pod: &req, unix_s: 1, unix_ns: 1 };
    let mut out = Vec::new();
    kl().annotations(&cx, &mut out);
    assert_eq!(
        out,
        [
            (
                "hami.io/kunlun-allocated".to_owned(),
                "n1-kunlun-0,kunlun,98304,100:n1-kunlun-1,kunlun,98304,100:;n1-kunlun-2,kunlun,98304,100:;;".to_owned()
            ),
            ("BAIDU_COM_DEVICE_IDX".to_owned(), "2".to_owned()),
        ]
    );
    assert_eq!(kl().pod_keys(), ["hami.io/kunlun-allocated", "BAIDU_COM_DEVICE_IDX"]);
}

// ---------------------------------------------------------------------------------------------
// The allocation invariant (STYLE.md, property tests)

fn any_count() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![1 => Just(None), 3 => prop::sample::select(vec![1u32, 1, 2, 4, 8, 3]).prop_map(Some)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn accepted_placements_never_overcommit_an_xpu(
        n in 1u32..=8,
        sick in prop::collection::vec(prop::bool::weighted(0.1), 8),
        policy in prop::sample::select(vec!["binpack", "spread", "mutex"]),
        pods in prop::collection::vec((prop::collection::vec(any_count(), 1..=3), any_count()), 1..=6),
    ) {
        let v = vendors();
        let mut snap = xpus(n).snapshot(&v);
        for (d, s) in snap.devices.iter_mut().zip(sick) {
            d.health = !s;
        }
        for (i, (apps, init)) in pods.iter().enumerate() {
            let mut p = pod().name(&format!("p{i}")).annotation(GPU_SCHEDULER_POLICY, policy);
            if let Some(k) = apps[0] {
                p = p.limit(XPU, &k.to_string());
            }
            for (j, a) in apps.iter().enumerate().skip(1) {
                p = p.container(&format!("c{j}"));
                if let Some(k) = a {
                    p = p.limit(XPU, &k.to_string());
                }
            }
            if let Some(k) = init {
                p = p.init("i").limit(XPU, &k.to_string());
            }
            let req = p.request_with(&v);
            let before = snap.devices.clone();
            if let Some(devs) = place(&mut snap, &req, &v).map_err(TestCaseError::fail)? {
                for (_, _, e) in devs.entries() {
                    let d = before.iter().find(|d| d.info.id == e.uuid).unwrap();
                    prop_assert!(d.used == 0 && d.health, "{} was busy or unhealthy", e.uuid);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine
