use proptest::prelude::*;
use serde_json::{Map, json};

use super::fixtures::*;
use super::*;
use crate::devices::{Cleanup, LockKind, NoQuota, Vendors};
use crate::model::MemMiB;
use crate::model::annotations as common_keys;
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::sched::NodeSnapshot;
use crate::sched::accounting::{Layout, apply, collapse};
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

fn chart() -> MetaxConfig {
    MetaxConfig::chart()
}

fn id(v: &Vendors) -> VendorId {
    v.by_name(WORD).expect("Metax sGPU is always registered")
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

/// What another pod already holds on a device.
#[derive(Clone, Copy, Default)]
struct Busy {
    used: u32,
    mem: u64,
    cores: u32,
    online: u16,
    offline: u16,
    qos: Option<&'static str>,
}

fn snapshot(n: &NodeBuilder, busy: &[(&str, Busy)]) -> NodeSnapshot {
    let mut s = n.snapshot(&vendors());
    for (dev, b) in busy {
        let d = s.devices.iter_mut().find(|d| d.info.id.as_str() == *dev).expect("fixture device exists");
        d.used = b.used;
        d.used_mem = MemMiB(b.mem);
        d.used_cores = b.cores;
        d.classes[TaskClass::Online as usize] = b.online;
        d.classes[TaskClass::Offline as usize] = b.offline;
        d.classes[TaskClass::Plain as usize] = (b.used as u16).saturating_sub(b.online + b.offline);
        d.qos = b.qos.map(Arc::from);
    }
    s
}

fn eval(snap: &NodeSnapshot, p: &PodBuilder) -> Result<String, String> {
    let v = vendors();
    let req = p.request_with(&v);
    match fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()) {
        Ok(fit) => Ok(codec::encode_pod_devices(fit.devices.vendor(id(&v)).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

fn ok(s: &str) -> Result<String, String> {
    Ok(s.to_owned())
}

// ---------------------------------------------------------------------------------------------
// Request derivation (HAMi: limits only; vmemory with a unit is bytes, bare is GiB)

#[test]
fn request_derivation_reads_limits_with_metax_units() {
    let v = MetaxSgpu::new(&chart());
    let pod = PodView::default();
    type Want = Result<Option<(u32, u64, u32, u32)>, &'static str>;
    type Quantities<'a> = &'a [(&'a str, &'a str)];
    let rows: Vec<(&str, Quantities<'_>, Quantities<'_>, Want)> = vec![
        // nums from limits; memory absent → percentage 100; cores default 100.
        ("count only", &[(SGPU, "1")], &[], Ok(Some((1, 0, 100, 100)))),
        ("two devices", &[(SGPU, "2")], &[], Ok(Some((2, 0, 100, 100)))),
        // Limits only: requests are not read.
        ("count in requests", &[], &[(SGPU, "1")], Ok(None)),
        ("count 0", &[(SGPU, "0")], &[], Ok(None)),
        // HAMi drops these counts and one past int32; hami-rs refuses them.
        ("negative count", &[(SGPU, "-1")], &[], Err(SGPU)),
        ("fractional count", &[(SGPU, "1.5")], &[], Err(SGPU)),
        ("count past int32", &[(SGPU, "2147483648")], &[], Err(SGPU)),
        // cores from limits, default 100; HAMi keeps the default for a non-integer, hami-rs
        // refuses it.
        ("cores 30", &[(SGPU, "1"), (VCORE, "30")], &[], Ok(Some((1, 0, 100, 30)))),
        ("cores 0", &[(SGPU, "1"), (VCORE, "0")], &[], Ok(Some((1, 0, 100, 0)))),
        ("cores in requests", &[(SGPU, "1")], &[(VCORE, "30")], Ok(Some((1, 0, 100, 100)))),
        ("fractional cores", &[(SGPU, "1"), (VCORE, "30.5")], &[], Err(VCORE)),
        ("negative cores", &[(SGPU, "1"), (VCORE, "-1")], &[], Err(VCORE)),
        ("cores past int32", &[(SGPU, "1"), (VCORE, "2147483648")], &[], Err(VCORE)),
        // memory: a bare number is GiB (× 1024); percentage 0 once memory is given.
        ("8 GiB bare", &[(SGPU, "1"), (VMEM, "8")], &[], Ok(Some((1, 8192, 0, 100)))),
        // With a unit it is bytes → MiB.
        ("8Gi", &[(SGPU, "1"), (VMEM, "8Gi")], &[], Ok(Some((1, 8192, 0, 100)))),
        ("512Mi", &[(SGPU, "1"), (VMEM, "512Mi")], &[], Ok(Some((1, 512, 0, 100)))),
        ("1G decimal", &[(SGPU, "1"), (VMEM, "1G")], &[], Ok(Some((1, 953, 0, 100)))),
        // Less than a MiB is 0, and 0 means the whole device.
        ("100Ki", &[(SGPU, "1"), (VMEM, "100Ki")], &[], Ok(Some((1, 0, 100, 100)))),
        ("memory in requests", &[(SGPU, "1")], &[(VMEM, "8")], Ok(Some((1, 0, 100, 100)))),
        ("largest bare GiB", &[(SGPU, "1"), (VMEM, "2097151")], &[], Ok(Some((1, 2147482624, 0, 100)))),
        // HAMi drops out-of-range memory and places the pod with no reservation; hami-rs refuses.
        ("bare GiB past int32 MiB", &[(SGPU, "1"), (VMEM, "2097152")], &[], Err(VMEM)),
        ("negative memory", &[(SGPU, "1"), (VMEM, "-1")], &[], Err(VMEM)),
        ("negative bytes", &[(SGPU, "1"), (VMEM, "-1Gi")], &[], Err(VMEM)),
        ("bytes past int32 MiB", &[(SGPU, "1"), (VMEM, "2Pi")], &[], Err(VMEM)),
        // HAMi ignores a non-integer memory and so gives the whole device; hami-rs refuses.
        ("fractional memory", &[(SGPU, "1"), (VMEM, "1.5")], &[], Err(VMEM)),
        ("unparsable memory", &[(SGPU, "1"), (VMEM, "lots")], &[], Err(VMEM)),
    ];
    for (what, limits, requests, want) in rows {
        let got = v.request(VendorId(7), &container(limits, requests), &pod);
        match (want, got) {
            (Ok(w), Ok(g)) => {
                assert_eq!(g.map(|r| (r.nums, r.memreq.get(), r.mempct, r.cores)), w, "{what}")
            }
            (Err(name), Err(why)) => assert!(why.to_string().contains(name), "{what}: {why}"),
            (w, g) => panic!("{what}: wanted {w:?}, got {g:?}"),
        }
    }
}

#[test]
fn resource_names_and_quota_use_the_v_names_and_factor_1024() {
    // As in HAMi, Metax sGPU quota limits are in GiB: memory factor 1024.
    let v = MetaxSgpu::new(&chart());
    assert_eq!(v.resource_names(), [SGPU, VMEM, VCORE]);
    let q = v.quota_names();
    assert_eq!((q.memory.as_deref(), q.cores.as_deref(), q.memory_factor), (Some(VMEM), Some(VCORE), 1024));
}

// ---------------------------------------------------------------------------------------------
// Discovery (`metax-tech.com/node-gpu-devices`) and health

fn discover(n: &NodeBuilder) -> Discovery {
    MetaxSgpu::new(&chart()).discover(&n.view())
}

#[test]
fn the_plugins_list_becomes_devices_with_metax_custom_info() {
    // As HAMi reads the plugin's list: id = uuid, index = position, count = totalDevCount,
    // devmem = totalVRam, devcore = totalCompute, type Metax-SGPU, health = healthy,
    // custominfo {QosPolicy, Model, LinkZone}.
    let mut second = sdev("sgpu-1", 32768, "fixed-share", 2);
    second["numa"] = json!(1);
    second["healthy"] = json!(false);
    let devs = devices(discover(&sgpu_node("n1", &[sdev("sgpu-0", 65536, "", 1), second])));
    assert_eq!(devs.len(), 2);
    let d = &devs[1];
    assert_eq!((d.id.as_str(), d.index, d.count, d.devmem, d.devcore), ("sgpu-1", 1, 8, MemMiB(32768), 100));
    assert_eq!((&*d.ty, d.numa, d.health, &*d.mode), ("Metax-SGPU", 1, false, ""));
    let c = d.custom.as_ref().unwrap();
    assert_eq!(c.get("QosPolicy"), Some(&json!("fixed-share")));
    assert_eq!(c.get("Model"), Some(&json!("MXC500")));
    assert_eq!(c.get("LinkZone"), Some(&json!(2)));
    assert_eq!(devs[0].index, 0);
    assert!(devs[0].health);
}

#[test]
fn device_keys_match_case_insensitively_and_missing_ones_read_as_zero() {
    // Go's decoder matches keys case-insensitively; a missing `healthy` means unhealthy.
    let devs = devices(discover(&node("n1").annotation(keys::NODE_DEVICES, r#"[{"UUID":"u","TotalVRam":1024}]"#)));
    assert_eq!((devs[0].id.as_str(), devs[0].devmem, devs[0].count, devs[0].health), ("u", MemMiB(1024), 0, false));
    assert_eq!(devs[0].custom.as_ref().unwrap().get("QosPolicy"), Some(&json!("")));
}

#[test]
fn an_empty_or_missing_list_means_no_devices_and_a_broken_one_is_malformed() {
    // No devices is reported as an error by HAMi (the node has none).
    assert!(matches!(discover(&node("n1")), Discovery::Absent));
    assert!(matches!(discover(&node("n1").annotation(keys::NODE_DEVICES, "[]")), Discovery::Absent));
    assert!(matches!(discover(&node("n1").annotation(keys::NODE_DEVICES, "null")), Discovery::Absent));
    for bad in [
        "[{",
        r#"{"uuid":"u"}"#,
        r#"[{"uuid":7}]"#,
        r#"[{"uuid":"u","totalVRam":"big"}]"#,
        r#"[{"uuid":"u","healthy":"yes"}]"#,
        r#"[{"uuid":"u","totalCompute":1.5}]"#,
        r#"[{"uuid":"u","bdf":1}]"#,
        "[null]",
    ] {
        match discover(&node("n1").annotation(keys::NODE_DEVICES, bad)) {
            Discovery::Malformed { key, .. } => assert_eq!(key, keys::NODE_DEVICES, "{bad}"),
            _ => panic!("{bad}: expected malformed"),
        }
    }
}

#[test]
fn health_is_listed_devices_lock_is_shared_and_cleanup_does_nothing() {
    // As in HAMi: healthy iff the annotation lists a device; the shared hami.io/mutex.lock.
    let v = MetaxSgpu::new(&chart());
    assert_eq!(v.health_rule(), HealthRule::DevicesListed);
    assert_eq!(v.cleanup(), Cleanup::Nothing);
    assert_eq!(v.lock(), LockKind::Shared);
}

// ---------------------------------------------------------------------------------------------
// Webhook (HAMi's Metax sGPU rules)

fn mutate(annotations: serde_json::Value, container: serde_json::Value) -> (Result<bool, String>, PodEdits) {
    let v = MetaxSgpu::new(&chart());
    let annotations: Map<String, serde_json::Value> = annotations.as_object().cloned().unwrap_or_default();
    let mut edits = PodEdits::default();
    let mut c = container;
    let r = {
        let mut ce = ContainerEdit { container: &mut c, index: 0, is_init: false };
        let mut pc = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        v.mutate(&mut ce, &mut pc).map_err(|e| e.to_string())
    };
    (r, edits)
}

fn count(n: &str) -> serde_json::Value {
    json!({"name": "c", "resources": {"limits": {SGPU: n}}})
}

#[test]
fn webhook_defaults_the_qos_and_validates_class_and_qos() {
    let qos_default = vec![(keys::QOS_POLICY.to_owned(), "best-effort".to_owned())];
    let class_err = "metax-tech.com/sgpu-app-class must be set one of [online, offline]";
    let qos_err = "metax-tech.com/sgpu-qos-policy must be set one of [best-effort, fixed-share, burst-share]";
    type Row<'a> = (&'a str, serde_json::Value, serde_json::Value, Result<bool, &'a str>, Vec<(String, String)>);
    let rows: Vec<Row<'_>> = vec![
        // Not recognised without the count in limits.
        ("no count", json!({}), json!({"name": "c"}), Ok(false), vec![]),
        (
            "count in requests",
            json!({}),
            json!({"name": "c", "resources": {"requests": {SGPU: "1"}}}),
            Ok(false),
            vec![],
        ),
        // Pods that are not online get best-effort when they name no QoS.
        ("plain pod", json!({}), count("2"), Ok(true), qos_default.clone()),
        ("offline pod", json!({keys::APP_CLASS: "offline"}), count("1"), Ok(true), qos_default.clone()),
        ("online pod keeps no QoS", json!({keys::APP_CLASS: "online"}), count("1"), Ok(true), vec![]),
        ("fixed-share", json!({keys::QOS_POLICY: "fixed-share"}), count("1"), Ok(true), vec![]),
        ("burst-share", json!({keys::QOS_POLICY: "burst-share"}), count("1"), Ok(true), vec![]),
        ("best-effort", json!({keys::QOS_POLICY: "best-effort"}), count("1"), Ok(true), vec![]),
        ("unknown QoS", json!({keys::QOS_POLICY: "gold"}), count("1"), Err(qos_err), vec![]),
        // Online pods' QoS is not checked.
        (
            "online with any QoS",
            json!({keys::APP_CLASS: "online", keys::QOS_POLICY: "gold"}),
            count("1"),
            Ok(true),
            vec![],
        ),
        ("unknown class", json!({keys::APP_CLASS: "batch"}), count("1"), Err(class_err), vec![]),
        (
            "app-class pods take one device",
            json!({keys::APP_CLASS: "offline"}),
            count("2"),
            Err("app-class pod must request single device"),
            vec![],
        ),
    ];
    for (what, annos, c, want, edits) in rows {
        let (got, got_edits) = mutate(annos, c);
        assert_eq!(got, want.map_err(str::to_owned), "{what}");
        if got_edits.annotations != edits {
            panic!("{what}: edits {:?}", got_edits.annotations);
        }
    }
}

#[test]
fn the_defaulted_qos_is_seen_by_the_next_container() {
    // The webhook sets the annotation once; a second container finds it and adds nothing.
    let v = MetaxSgpu::new(&chart());
    let annotations = Map::new();
    let mut edits = PodEdits::default();
    for _ in 0..2 {
        let mut c = count("1");
        let mut ce = ContainerEdit { container: &mut c, index: 0, is_init: false };
        let mut pc = PodContext { annotations: &annotations, runtime_class_name: None, edits: &mut edits };
        assert_eq!(v.mutate(&mut ce, &mut pc).map_err(|e| e.to_string()), Ok(true));
    }
    assert_eq!(edits.annotations.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Fit: filter every device (walking from the end), then pick, as HAMi's Metax sGPU does

#[test]
fn a_request_gets_its_memory_and_cores_on_the_least_used_device() {
    // HAMi's example: vcore 30, vmemory 8 (GiB) → 8192 MiB, 30 cores.
    let p = sgpu_pod(1).limit(VCORE, "30").limit(VMEM, "8");
    assert_eq!(eval(&snapshot(&idle(2), &[]), &p), ok("sgpu-1,Metax-SGPU,8192,30:;"));
    // Without memory the device's whole memory (percentage 100).
    assert_eq!(eval(&snapshot(&idle(1), &[]), &sgpu_pod(1)), ok("sgpu-0,Metax-SGPU,65536,100:;"));
}

#[test]
fn filter_rules_reject_with_hamis_reason_words() {
    let small = || sgpu_pod(1).limit(VCORE, "30").limit(VMEM, "8");
    let plain = |used| Busy { used, mem: 8192 * u64::from(used), cores: 30 * used, ..Busy::default() };
    let rows: Vec<(&str, NodeSnapshot, PodBuilder, Result<String, String>)> = vec![
        // UUID selection: metax-tech.com/use-gpuuuid / nouse-gpuuuid.
        (
            "use-gpuuuid",
            snapshot(&idle(2), &[]),
            small().annotation(keys::USE_UUID, "sgpu-1"),
            ok("sgpu-1,Metax-SGPU,8192,30:;"),
        ),
        (
            "nouse-gpuuuid",
            snapshot(&idle(1), &[]),
            small().annotation(keys::NOUSE_UUID, "sgpu-0"),
            no("1/1 CardUuidMismatch"),
        ),
        // Slots: `Used < Count`.
        (
            "slots exhausted",
            snapshot(&idle(1), &[("sgpu-0", Busy { used: 8, ..Busy::default() })]),
            small(),
            no("1/1 CardTimeSlicingExhausted"),
        ),
        // The mutex policy rejects used devices.
        (
            "mutex",
            snapshot(&idle(1), &[("sgpu-0", plain(1))]),
            small().annotation(common_keys::GPU_SCHEDULER_POLICY, "mutex"),
            no("1/1 ExclusiveDeviceAllocateConflict"),
        ),
        // Memory: request, else the whole device.
        (
            "memory",
            snapshot(&idle(1), &[("sgpu-0", Busy { used: 1, mem: 60000, ..Busy::default() })]),
            small(),
            no("1/1 CardInsufficientMemory"),
        ),
        // Free cores must cover the request (pods that are not online).
        (
            "cores",
            snapshot(&idle(1), &[("sgpu-0", Busy { used: 3, cores: 90, ..Busy::default() })]),
            small(),
            no("1/1 CardInsufficientCore"),
        ),
        // 100 cores means exclusive.
        (
            "exclusive",
            snapshot(&idle(1), &[("sgpu-0", Busy { used: 1, mem: 1024, ..Busy::default() })]),
            sgpu_pod(1).limit(VMEM, "1"),
            no("1/1 ExclusiveDeviceAllocateConflict"),
        ),
        // A core-less task may not join a fully booked device.
        (
            "core-0 on a full device",
            snapshot(&idle(1), &[("sgpu-0", Busy { used: 2, cores: 100, ..Busy::default() })]),
            sgpu_pod(1).limit(VCORE, "0").limit(VMEM, "1"),
            no("1/1 CardComputeUnitsExhausted"),
        ),
        // Some but not enough devices.
        (
            "two wanted, one fits",
            snapshot(&idle(2), &[("sgpu-1", Busy { used: 8, ..Busy::default() })]),
            sgpu_pod(2).limit(VCORE, "30").limit(VMEM, "8"),
            no("1/2 AllocatedCardsInsufficientRequest, 1/2 CardTimeSlicingExhausted"),
        ),
        ("more than the node has", snapshot(&idle(1), &[]), sgpu_pod(2), no("NodeInsufficientDevice")),
    ];
    for (what, snap, p, want) in rows {
        assert_eq!(eval(&snap, &p), want, "{what}");
    }
}

#[test]
fn unhealthy_devices_are_card_unhealthy() {
    // HAMi's Metax sGPU has its own word, CardUnhealthy (not CardNotHealth).
    let mut snap = snapshot(&idle(2), &[]);
    snap.devices[0].health = false;
    assert_eq!(eval(&snap, &sgpu_pod(1).limit(VCORE, "30")), ok("sgpu-1,Metax-SGPU,65536,30:;"));
    snap.devices[1].health = false;
    assert_eq!(eval(&snap, &sgpu_pod(1)), no("2/2 CardUnhealthy"));
}

#[test]
fn app_classes_co_locate_as_hami_allows() {
    let online = |n| Busy { used: n, mem: 1024, online: n as u16, ..Busy::default() };
    let offline =
        |n| Busy { used: n, mem: 1024, cores: 30, offline: n as u16, qos: Some("best-effort"), ..Busy::default() };
    let plain = Busy { used: 1, mem: 1024, cores: 30, qos: Some("best-effort"), ..Busy::default() };
    let class = |c: &str| {
        sgpu_pod(1)
            .limit(VCORE, "30")
            .limit(VMEM, "1")
            .annotation(keys::APP_CLASS, c)
            .annotation(keys::QOS_POLICY, "best-effort")
    };
    let plain_pod = sgpu_pod(1).limit(VCORE, "30").limit(VMEM, "1").annotation(keys::QOS_POLICY, "best-effort");
    let mismatch = no("1/1 CardAppClassMismatch");
    let rows: Vec<(&str, Busy, PodBuilder, Result<String, String>)> = vec![
        // A device running online/offline pods takes only such pods …
        ("plain pod on an online device", online(1), plain_pod.clone(), mismatch.clone()),
        ("online pod on an online device", online(1), class("online"), ok("sgpu-0,Metax-SGPU,1024,0:;")),
        ("online pod on an offline device", offline(1), class("online"), ok("sgpu-0,Metax-SGPU,1024,0:;")),
        ("offline pod on an offline device", offline(1), class("offline"), ok("sgpu-0,Metax-SGPU,1024,30:;")),
        // … but never an offline pod where an online one runs.
        ("offline pod on an online device", online(1), class("offline"), mismatch.clone()),
        // A device with plain pods takes only plain pods.
        ("online pod on a plain device", plain, class("online"), mismatch.clone()),
        ("offline pod on a plain device", plain, class("offline"), mismatch.clone()),
        ("plain pod on a plain device", plain, plain_pod.clone(), ok("sgpu-0,Metax-SGPU,1024,30:;")),
        // An unused device takes anything.
        ("online pod on an idle device", Busy::default(), class("online"), ok("sgpu-0,Metax-SGPU,1024,0:;")),
    ];
    for (what, busy, p, want) in rows {
        assert_eq!(eval(&snapshot(&idle(1), &[("sgpu-0", busy)]), &p), want, "{what}");
    }
}

#[test]
fn online_pods_skip_the_core_rules_and_take_no_cores() {
    // In HAMi the core checks are for pods that are not online; online entries get cores 0.
    let full = Busy { used: 2, mem: 1024, cores: 100, online: 2, ..Busy::default() };
    let p = sgpu_pod(1).limit(VMEM, "1").annotation(keys::APP_CLASS, "online");
    assert_eq!(eval(&snapshot(&idle(1), &[("sgpu-0", full)]), &p), ok("sgpu-0,Metax-SGPU,1024,0:;"));
}

#[test]
fn qos_must_match_a_busy_device() {
    let reg = |qos: &str| sgpu_node("n1", &[sdev("sgpu-0", 65536, qos, 0)]);
    let busy = Busy { used: 1, mem: 1024, cores: 30, ..Busy::default() };
    let p = |qos: &str| sgpu_pod(1).limit(VCORE, "30").limit(VMEM, "1").annotation(keys::QOS_POLICY, qos);
    let mismatch = no("1/1 CardQosPolicyMismatch");
    let fits = ok("sgpu-0,Metax-SGPU,1024,30:;");
    // The registered QoS must be empty or the pod's.
    assert_eq!(eval(&snapshot(&reg("fixed-share"), &[("sgpu-0", busy)]), &p("best-effort")), mismatch);
    assert_eq!(eval(&snapshot(&reg("fixed-share"), &[("sgpu-0", busy)]), &p("fixed-share")), fits);
    assert_eq!(eval(&snapshot(&reg(""), &[("sgpu-0", busy)]), &p("burst-share")), fits);
    // An unused device switches to any QoS.
    assert_eq!(eval(&snapshot(&reg("fixed-share"), &[]), &p("best-effort")), fits);
    // An exclusive request does not care (it then fails on the busy device's cores).
    let excl = sgpu_pod(1).limit(VMEM, "1").annotation(keys::QOS_POLICY, "best-effort");
    assert_eq!(eval(&snapshot(&reg("fixed-share"), &[("sgpu-0", busy)]), &excl), no("1/1 CardInsufficientCore"));
    // The QoS the device's pods expect wins over a registered value the plugin has not updated
    // yet (HAMi's expected-QoS cache).
    let expected = Busy { qos: Some("fixed-share"), ..busy };
    assert_eq!(eval(&snapshot(&reg(""), &[("sgpu-0", expected)]), &p("best-effort")), mismatch);
    assert_eq!(eval(&snapshot(&reg("best-effort"), &[("sgpu-0", expected)]), &p("fixed-share")), fits);
    // Online pods are not checked.
    let online_busy = Busy { online: 1, ..busy };
    let online = sgpu_pod(1).limit(VMEM, "1").annotation(keys::APP_CLASS, "online");
    assert_eq!(
        eval(&snapshot(&reg("fixed-share"), &[("sgpu-0", online_busy)]), &online),
        ok("sgpu-0,Metax-SGPU,1024,0:;")
    );
}

#[test]
fn a_later_container_sees_the_qos_an_earlier_one_set() {
    // HAMi's AddResourceUsage switches the device's QoS to the pod's for the rest of the pod's
    // evaluation; a pod has one QoS, so its own containers always agree.
    let one = sgpu_node("n1", &[sdev("sgpu-0", 65536, "fixed-share", 0)]);
    let p = sgpu_pod(1)
        .limit(VCORE, "30")
        .limit(VMEM, "1")
        .annotation(keys::QOS_POLICY, "best-effort")
        .container("second")
        .limit(SGPU, "1")
        .limit(VCORE, "30")
        .limit(VMEM, "1");
    assert_eq!(eval(&snapshot(&one, &[]), &p), ok("sgpu-0,Metax-SGPU,1024,30:;sgpu-0,Metax-SGPU,1024,30:;"));
}

#[test]
fn online_pods_pick_devices_with_the_fewest_online_tasks_and_only_offline_devices_last() {
    // HAMi's pick for online pods (prioritizeOnlineDevices): the fewest online tasks first, devices
    // with only offline tasks last.
    let n = idle(4);
    let snap = snapshot(
        &n,
        &[
            ("sgpu-0", Busy { used: 2, online: 2, ..Busy::default() }),
            ("sgpu-1", Busy { used: 1, offline: 1, ..Busy::default() }),
            ("sgpu-2", Busy { used: 2, online: 1, offline: 1, ..Busy::default() }),
            ("sgpu-3", Busy { used: 3, online: 1, offline: 2, ..Busy::default() }),
        ],
    );
    let p = |n: u32| pod().limit(SGPU, &n.to_string()).limit(VMEM, "1").annotation(keys::APP_CLASS, "online");
    assert_eq!(eval(&snap, &p(1)), ok("sgpu-2,Metax-SGPU,1024,0:;"));
    assert_eq!(eval(&snap, &p(3)), ok("sgpu-2,Metax-SGPU,1024,0:sgpu-3,Metax-SGPU,1024,0:sgpu-0,Metax-SGPU,1024,0:;"));
    // Offline pods follow the GPU policy order instead (spread: least used first).
    let off = pod().limit(SGPU, "1").limit(VMEM, "1").limit(VCORE, "0").annotation(keys::APP_CLASS, "offline");
    let snap = snapshot(
        &n,
        &[
            ("sgpu-0", Busy { used: 3, offline: 3, ..Busy::default() }),
            ("sgpu-1", Busy { used: 1, offline: 1, ..Busy::default() }),
            ("sgpu-2", Busy { used: 2, offline: 2, ..Busy::default() }),
            ("sgpu-3", Busy { used: 2, online: 2, ..Busy::default() }),
        ],
    );
    assert_eq!(eval(&snap, &off), ok("sgpu-1,Metax-SGPU,1024,0:;"));
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices (equal ones stay in registration order) and
    // the sGPU Fit collects candidates walking from the end; its picks keep that order among
    // equals (online pods: a stable sort of two; exclusive pods: devices without a zone in
    // collection order), so sgpu-1 is taken first.
    let snap = snapshot(&idle(2), &[]);
    let shared = || sgpu_pod(1).limit(VMEM, "1").limit(VCORE, "50");
    let rows = [
        ("shared", shared(), "sgpu-1,Metax-SGPU,1024,50:;"),
        ("binpack", shared().annotation(common_keys::GPU_SCHEDULER_POLICY, "binpack"), "sgpu-1,Metax-SGPU,1024,50:;"),
        ("mutex", shared().annotation(common_keys::GPU_SCHEDULER_POLICY, "mutex"), "sgpu-1,Metax-SGPU,1024,50:;"),
        ("online", sgpu_pod(1).limit(VMEM, "1").annotation(keys::APP_CLASS, "online"), "sgpu-1,Metax-SGPU,1024,0:;"),
        ("exclusive", sgpu_pod(1).limit(VMEM, "1"), "sgpu-1,Metax-SGPU,1024,100:;"),
        ("two devices", sgpu_pod(2).limit(VMEM, "1"), "sgpu-1,Metax-SGPU,1024,100:sgpu-0,Metax-SGPU,1024,100:;"),
    ];
    for (what, p, want) in rows {
        assert_eq!(eval(&snap, &p), ok(want), "{what}");
    }
}

#[test]
fn online_pods_break_ties_as_gos_sort_does() {
    // HAMi sorts the candidates with sort.Slice: stable up to 12 of them (insertion sort),
    // pattern-defeating quicksort beyond. Every device holds one task, online on even indexes and
    // offline on odd ones, so the walk meets them from sgpu-<n-1> down with alternating keys.
    // The expected picks are what Go's sort leaves first.
    let alternating = |n: usize| {
        let busy: Vec<(String, Busy)> = (0..n)
            .map(|i| {
                let b = if i % 2 == 0 {
                    Busy { used: 1, online: 1, ..Busy::default() }
                } else {
                    Busy { used: 1, offline: 1, ..Busy::default() }
                };
                (format!("sgpu-{i}"), b)
            })
            .collect();
        let busy: Vec<(&str, Busy)> = busy.iter().map(|(d, b)| (d.as_str(), *b)).collect();
        snapshot(&idle(n), &busy)
    };
    let online = pod().limit(SGPU, "2").limit(VMEM, "1").annotation(keys::APP_CLASS, "online");
    assert_eq!(uuids(eval(&alternating(12), &online)), ["sgpu-10", "sgpu-8"], "12 candidates keep the walk order");
    assert_eq!(
        uuids(eval(&alternating(14), &online)),
        ["sgpu-4", "sgpu-12"],
        "14 candidates as Go's pdqsort leaves them"
    );
}

fn uuids(r: Result<String, String>) -> Vec<String> {
    r.expect("fits")
        .split([':', ';'])
        .filter(|e| !e.is_empty())
        .map(|e| e.split(',').next().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn exclusive_pods_pick_by_metalink_zone() {
    // In HAMi 100-core pods without app class take a zone that alone holds the request, smallest
    // first; else fill zones smallest first; then devices without a zone. Inside a zone devices
    // keep the walk's order (from the end of the sorted list).
    let snap = snapshot(&zoned(), &[]);
    let excl = |n: u32| sgpu_pod(n).limit(VMEM, "1");
    // Policy order alone would give sgpu-4, sgpu-3 (the walk starts from the end).
    assert_eq!(uuids(eval(&snap, &excl(2))), ["sgpu-3", "sgpu-2"]);
    assert_eq!(uuids(eval(&snap, &excl(1))), ["sgpu-0"], "zone 1 alone holds one device");
    assert_eq!(uuids(eval(&snap, &excl(3))), ["sgpu-3", "sgpu-2", "sgpu-1"]);
    assert_eq!(uuids(eval(&snap, &excl(4))), ["sgpu-0", "sgpu-3", "sgpu-2", "sgpu-1"]);
    // As many candidates as wanted: all of them, in walk order.
    assert_eq!(uuids(eval(&snap, &excl(5))), ["sgpu-4", "sgpu-3", "sgpu-2", "sgpu-1", "sgpu-0"]);
    // Shared (non-exclusive) pods and app-class pods take the policy order.
    assert_eq!(uuids(eval(&snap, &excl(2).limit(VCORE, "50"))), ["sgpu-4", "sgpu-3"]);
}

// ---------------------------------------------------------------------------------------------
// Usage update and task tags

#[test]
fn charging_counts_the_class_and_switches_the_qos() {
    let v = MetaxSgpu::new(&chart());
    let info = Arc::new(DeviceInfo::new("sgpu-0", 0, 8, 65536, 100, WORD));
    let req = |p: PodBuilder| p.request_with(&vendors());
    let mut e = ContainerDevice::new("sgpu-0", WORD, 1024, 30);
    let mut d = DeviceUsage::idle(info.clone(), VendorId(7));
    v.charge(&mut d, &mut e, &req(sgpu_pod(1).annotation(keys::QOS_POLICY, "burst-share")));
    assert_eq!((d.used, d.used_mem, d.used_cores, d.qos.as_deref()), (1, MemMiB(1024), 30, Some("burst-share")));
    assert_eq!(d.class_count(TaskClass::Plain), 1);
    // An exclusive entry leaves no QoS; online pods leave it alone.
    let mut excl = ContainerDevice::new("sgpu-0", WORD, 1024, 100);
    v.charge(&mut d, &mut excl, &req(sgpu_pod(1).annotation(keys::QOS_POLICY, "burst-share")));
    assert_eq!(d.qos.as_deref(), Some(""));
    let mut on = ContainerDevice::new("sgpu-0", WORD, 1024, 0);
    v.charge(&mut d, &mut on, &req(sgpu_pod(1).annotation(keys::APP_CLASS, "online")));
    assert_eq!((d.qos.as_deref(), d.class_count(TaskClass::Online)), (Some(""), 1));
}

#[test]
fn task_tags_carry_class_and_qos() {
    let v = MetaxSgpu::new(&chart());
    let a =
        |kv: &[(&str, &str)]| -> Annotations { kv.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect() };
    let tag = |class, qos: Option<&str>| Some((class, qos.map(Arc::from)));
    // Pods that are not online carry their QoS, empty when they name none (HAMi's expected QoS).
    assert_eq!(v.task_tag(&a(&[])), tag(TaskClass::Plain, Some("")));
    assert_eq!(v.task_tag(&a(&[(keys::QOS_POLICY, "fixed-share")])), tag(TaskClass::Plain, Some("fixed-share")));
    // Online pods leave the device's QoS alone.
    assert_eq!(
        v.task_tag(&a(&[(keys::APP_CLASS, "online"), (keys::QOS_POLICY, "fixed-share")])),
        tag(TaskClass::Online, None)
    );
    assert_eq!(
        v.task_tag(&a(&[(keys::APP_CLASS, "offline"), (keys::QOS_POLICY, "best-effort")])),
        tag(TaskClass::Offline, Some("best-effort"))
    );
    assert_eq!(v.task_tag(&a(&[(keys::APP_CLASS, "offline")])), tag(TaskClass::Offline, Some("")));
    assert_eq!(
        v.task_tag(&a(&[(keys::APP_CLASS, "batch")])),
        tag(TaskClass::Plain, Some("")),
        "an unknown class is plain"
    );
}

#[test]
fn tagged_charges_feed_the_next_fit() {
    // The engine tags each pod's charges with task_tag; apply() then counts classes and sets the
    // device's QoS, which the next pod's fit sees.
    let v = vendors();
    let snap = snapshot(&idle(1), &[]);
    let first = sgpu_pod(1).limit(VCORE, "30").limit(VMEM, "1").annotation(keys::APP_CLASS, "online");
    let req = first.request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let info = |u: &DeviceUuid| snap.devices.iter().find(|d| &d.info.id == u).map(|d| d.info.clone());
    let mut charges = collapse(&fit.devices, &Layout::default(), &v, &info);
    let (class, qos) = MetaxSgpu::new(&chart()).task_tag(&req.annotations).unwrap();
    for c in &mut charges {
        c.class = class;
        c.qos = qos.clone();
    }
    let mut after = snap.clone();
    apply(&mut after.devices, &charges);
    let plain = sgpu_pod(1).limit(VCORE, "30").limit(VMEM, "1").annotation(keys::QOS_POLICY, "best-effort");
    assert_eq!(eval(&after, &plain), no("1/1 CardAppClassMismatch"));
}

// ---------------------------------------------------------------------------------------------
// Annotations

fn written(snap: &NodeSnapshot, p: &PodBuilder) -> Vec<(String, String)> {
    let v = vendors();
    let req = p.request_with(&v);
    let fit = fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(id(&v)).unwrap();
    let cx = WriteCx {
        node: &snap.name,
        devs: &snap.devices,
        devices: cs,
        pod: &req,
        unix_s: 1787293239,
        unix_ns: 1787293239123456789,
    };
    let mut out = Vec::new();
    MetaxSgpu::new(&chart()).annotations(&cx, &mut out);
    out
}

fn pairs(kv: &[(&str, &str)]) -> Vec<(String, String)> {
    kv.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn filter_writes_hami_keys_metax_allocation_and_predicate_time() {
    // HAMi's example: `[[{"uuid":"sgpu-0","compute":30,"vRam":8192}]]`; predicate-time unix-ns.
    let p = sgpu_pod(1).limit(VCORE, "30").limit(VMEM, "8");
    assert_eq!(
        written(&snapshot(&idle(1), &[]), &p),
        pairs(&[
            (keys::TO_ALLOCATE, "sgpu-0,Metax-SGPU,8192,30:;"),
            (keys::ALLOCATED, "sgpu-0,Metax-SGPU,8192,30:;"),
            (keys::GPU_DEVICES_ALLOCATED, r#"[[{"uuid":"sgpu-0","compute":30,"vRam":8192}]]"#),
            (keys::PREDICATE_TIME, "1787293239123456789"),
        ])
    );
}

#[test]
fn metax_allocation_omits_zero_fields_and_keeps_one_array_per_container() {
    // As HAMi writes it: zero compute/vRam omitted; empty containers are empty arrays.
    let p = pod().init("setup").main().limit(SGPU, "1").limit(VMEM, "2").annotation(keys::APP_CLASS, "online");
    let w = written(&snapshot(&idle(1), &[]), &p);
    assert_eq!(w[0], (keys::TO_ALLOCATE.to_owned(), ";sgpu-0,Metax-SGPU,2048,0:;".to_owned()));
    assert_eq!(w[2], (keys::GPU_DEVICES_ALLOCATED.to_owned(), r#"[[],[{"uuid":"sgpu-0","vRam":2048}]]"#.to_owned()));
}

#[test]
fn pod_keys_are_every_key_metax_sgpu_writes() {
    let v = MetaxSgpu::new(&chart());
    assert_eq!(v.pod_keys(), [keys::TO_ALLOCATE, keys::ALLOCATED, keys::GPU_DEVICES_ALLOCATED, keys::PREDICATE_TIME]);
    assert_eq!(v.allocated_key(), Some(keys::ALLOCATED));
}

// ---------------------------------------------------------------------------------------------
// Node score (policy-neutral; HAMi multiplies it by −10000 under spread, +10000 otherwise)

fn score(before: &NodeSnapshot, p: &PodBuilder, cfg: &MetaxConfig, chosen: &[(&str, u32)], policy: NodePolicy) -> f32 {
    let req = p.request_with(&vendors());
    let cs = vec![chosen.iter().map(|(u, c)| ContainerDevice::new(u, WORD, 1024, *c)).collect::<ContainerDevices>()];
    let cx = ScoreCx { node: &before.name, extra: None, before: &before.devices, devices: &cs, pod: &req, policy };
    MetaxSgpu::new(cfg).node_score(&cx)
}

#[test]
fn online_score_penalises_busy_devices_and_flips_under_spread() {
    let snap = snapshot(
        &idle(3),
        &[
            ("sgpu-0", Busy { used: 2, online: 2, ..Busy::default() }),
            ("sgpu-1", Busy { used: 3, offline: 3, ..Busy::default() }),
            ("sgpu-2", Busy { used: 3, online: 1, offline: 2, ..Busy::default() }),
        ],
    );
    let online = sgpu_pod(1).annotation(keys::APP_CLASS, "online");
    // −20 × 2 online; −100 × 3 offline (offline only); −20 − 2 × 2.
    let all = [("sgpu-0", 0), ("sgpu-1", 0), ("sgpu-2", 0)];
    assert_eq!(score(&snap, &online, &chart(), &all, NodePolicy::Binpack), -364.0 * 10000.0);
    assert_eq!(score(&snap, &online, &chart(), &all, NodePolicy::Spread), 364.0 * 10000.0);
    assert_eq!(
        score(&snap, &online, &chart(), &all, NodePolicy::Other),
        -364.0 * 10000.0,
        "unknown policies count as binpack"
    );
    // Plain pods without topology awareness score 0.
    assert_eq!(score(&snap, &sgpu_pod(1), &chart(), &all, NodePolicy::Binpack), 0.0);
}

#[test]
fn exclusive_score_counts_metalink_pairs_when_topology_aware() {
    // Devices 0,1 in zone 1 and 2,3 in zone 2, all idle.
    let n = sgpu_node(
        "n1",
        &[
            sdev("sgpu-0", 65536, "", 1),
            sdev("sgpu-1", 65536, "", 1),
            sdev("sgpu-2", 65536, "", 2),
            sdev("sgpu-3", 65536, "", 2),
        ],
    );
    let snap = snapshot(&n, &[]);
    let aware = MetaxConfig { sgpu_topology_aware: true, ..chart() };
    let p = sgpu_pod(2);
    // Same zone: allocated 10, available 20, rest 10 → loss 0 → 10 × 10 − 0 = 100.
    assert_eq!(score(&snap, &p, &aware, &[("sgpu-0", 100), ("sgpu-1", 100)], NodePolicy::Binpack), 100.0 * 10000.0);
    // Across zones: allocated 0, rest 0 → loss 20 → −20.
    assert_eq!(score(&snap, &p, &aware, &[("sgpu-0", 100), ("sgpu-2", 100)], NodePolicy::Binpack), -20.0 * 10000.0);
    assert_eq!(score(&snap, &p, &aware, &[("sgpu-0", 100), ("sgpu-2", 100)], NodePolicy::Spread), 20.0 * 10000.0);
    // The config is off by default; the pod annotation overrides it either way.
    assert_eq!(score(&snap, &p, &chart(), &[("sgpu-0", 100), ("sgpu-1", 100)], NodePolicy::Binpack), 0.0);
    let on = sgpu_pod(2).annotation(keys::TOPOLOGY_AWARE, "true");
    assert_eq!(score(&snap, &on, &chart(), &[("sgpu-0", 100), ("sgpu-1", 100)], NodePolicy::Binpack), 100.0 * 10000.0);
    let off = sgpu_pod(2).annotation(keys::TOPOLOGY_AWARE, "false");
    assert_eq!(score(&snap, &off, &aware, &[("sgpu-0", 100), ("sgpu-1", 100)], NodePolicy::Binpack), 0.0);
    let junk = sgpu_pod(2).annotation(keys::TOPOLOGY_AWARE, "maybe");
    assert_eq!(score(&snap, &junk, &aware, &[("sgpu-0", 100), ("sgpu-1", 100)], NodePolicy::Binpack), 100.0 * 10000.0);
    // Only exclusive (100-core) entries enable it.
    assert_eq!(score(&snap, &p, &aware, &[("sgpu-0", 50), ("sgpu-1", 50)], NodePolicy::Binpack), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Property: accepted placements never overcommit a device

#[derive(Clone, Debug)]
struct Dev {
    count: u32,
    vram: u32,
    used: u32,
    mem_pct: u64,
    cores: u32,
    healthy: bool,
    zone: i32,
}

fn any_dev() -> impl Strategy<Value = Dev> {
    (
        1u32..=8,
        prop::sample::select(vec![16384u32, 65536]),
        0u32..=8,
        0u64..=100,
        0u32..=100,
        prop::bool::weighted(0.9),
        0i32..=2,
    )
        .prop_map(|(count, vram, used, mem_pct, cores, healthy, zone)| {
            let used = used.min(count);
            let (mem_pct, cores) = if used == 0 { (0, 0) } else { (mem_pct, cores) };
            Dev { count, vram, used, mem_pct, cores, healthy, zone }
        })
}

#[derive(Clone, Debug)]
struct Ctr {
    nums: u32,
    mem_gib: Option<u32>,
    cores: Option<u32>,
}

fn any_ctr() -> impl Strategy<Value = Option<Ctr>> {
    let c = (
        prop_oneof![3 => Just(1u32), 1 => 1u32..=3],
        prop::option::of(1u32..=64),
        prop::option::of(prop_oneof![Just(0u32), 1u32..=60, Just(100)]),
    )
        .prop_map(|(nums, mem_gib, cores)| Ctr { nums, mem_gib, cores });
    prop_oneof![1 => Just(None), 4 => c.prop_map(Some)]
}

proptest! {
    #[test]
    fn accepted_placements_never_overcommit_an_sgpu(
        devs in prop::collection::vec(any_dev(), 1..=5),
        ctrs in prop::collection::vec(any_ctr(), 1..=3),
        class in prop::sample::select(vec!["", "online", "offline"]),
        policy in prop::sample::select(vec!["spread", "binpack", "mutex"]),
    ) {
        let v = vendors();
        let list: Vec<_> = devs.iter().enumerate().map(|(i, d)| {
            let mut j = sdev(&format!("sgpu-{i}"), d.vram, "", d.zone);
            j["totalDevCount"] = json!(d.count);
            j["healthy"] = json!(d.healthy);
            j
        }).collect();
        let names: Vec<String> = (0..devs.len()).map(|i| format!("sgpu-{i}")).collect();
        let busy: Vec<(&str, Busy)> = devs.iter().zip(&names).map(|(d, n)| (n.as_str(), Busy {
            used: d.used, mem: u64::from(d.vram) * d.mem_pct / 100, cores: d.cores, ..Busy::default()
        })).collect();
        let snap = snapshot(&sgpu_node("n1", &list), &busy);
        let mut p = pod().annotation(common_keys::GPU_SCHEDULER_POLICY, policy);
        if !class.is_empty() {
            p = p.annotation(keys::APP_CLASS, class);
        }
        for (i, c) in ctrs.iter().enumerate() {
            if i > 0 {
                p = p.container(&format!("c{i}"));
            }
            let Some(c) = c else { continue };
            p = p.limit(SGPU, &c.nums.to_string());
            if let Some(m) = c.mem_gib { p = p.limit(VMEM, &m.to_string()); }
            if let Some(k) = c.cores { p = p.limit(VCORE, &k.to_string()); }
        }
        let req = p.request_with(&v);
        if let Ok(fit) = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()) {
            let info = |u: &DeviceUuid| snap.devices.iter().find(|d| &d.info.id == u).map(|d| d.info.clone());
            let mut after = snap.devices.clone();
            let unmatched = apply(&mut after, &collapse(&fit.devices, &Layout::default(), &v, &info));
            prop_assert!(unmatched.0.is_empty());
            for d in &after {
                prop_assert!(d.within_capacity(), "{:?}", d);
            }
            for (_, _, e) in fit.devices.entries() {
                let d = snap.devices.iter().find(|d| d.info.id == e.uuid).unwrap();
                prop_assert!(d.health, "unhealthy {} chosen", e.uuid);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Through the engine (in-memory backend)
