//! Admission without the envelope: the verdict on pod objects, the pod the simulator is handed,
//! and which annotations an update changes. The webhook's tests drive the same rules through
//! AdmissionReviews.

use super::*;

use serde_json::json;

use crate::testing::{defaults, vendors};

fn hami() -> Config {
    Config { scheduler_name: "hami-scheduler".into(), force_overwrite_default_scheduler: true, quota: None }
}

fn pod(scheduler: Option<&str>, limits: Value) -> Value {
    let mut p = json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]}
    });
    if let Some(s) = scheduler {
        p["spec"]["schedulerName"] = json!(s);
    }
    p
}

fn verdict(cfg: &Config, p: &Value) -> Verdict {
    let vendors = vendors();
    admit(&Cx { cfg, vendors: &vendors, defaults: &defaults(), namespace: "default" }, p)
}

#[test]
fn verdicts_on_pod_objects() {
    let gpu = json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"});
    // (pod, what the verdict must be)
    let other = pod(Some("volcano"), gpu.clone());
    assert_eq!(verdict(&hami(), &other), Verdict::Allow { mutated: None, message: Some(OTHER_SCHEDULER) });
    assert_eq!(verdict(&hami(), &json!({"metadata": {}, "spec": {}})), Verdict::Deny(NO_CONTAINERS.into()));
    let mut assigned = pod(None, gpu.clone());
    assigned["spec"]["nodeName"] = json!("node-a");
    assert_eq!(verdict(&hami(), &assigned), Verdict::Deny(NODE_ASSIGNED.into()));
    let mut privileged = pod(None, gpu.clone());
    privileged["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    assert_eq!(verdict(&hami(), &privileged), Verdict::Deny("container c is privileged".into()));
    let mut owned = pod(None, gpu.clone());
    owned["metadata"]["annotations"] = json!({"hami.io/vgpu-devices-allocated": "x"});
    let Verdict::Deny(why) = verdict(&hami(), &owned) else { panic!("a pod created with a decision is denied") };
    assert!(why.starts_with("annotation hami.io/vgpu-devices-allocated is written by the scheduler"), "{why}");
    assert!(matches!(verdict(&hami(), &json!("not a pod")), Verdict::Failed { code: 400, .. }));
}

#[test]
fn an_admitted_device_pod_comes_back_mutated_and_a_cpu_pod_unchanged() {
    let p = pod(None, json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}));
    let Verdict::Allow { mutated: Some(after), message: None } = verdict(&hami(), &p) else {
        panic!("a device pod is admitted")
    };
    assert_eq!(after["spec"]["schedulerName"], "hami-scheduler");
    assert_ne!(after, p, "the vendor's mutation is applied");
    let cpu = pod(None, json!({"cpu": "1"}));
    assert_eq!(verdict(&hami(), &cpu), Verdict::Allow { mutated: Some(cpu.clone()), message: None });
}

#[test]
fn admit_pod_hands_the_simulator_the_mutated_pod_or_the_denial() {
    let vendors = vendors();
    let view: PodView = serde_json::from_value(pod(None, json!({"nvidia.com/gpu": "1"}))).unwrap();
    let admitted = admit_pod(&vendors, &hami(), &defaults(), &view).unwrap();
    assert_eq!(admitted.spec.scheduler_name.as_deref(), Some("hami-scheduler"));
    let mut assigned = view.clone();
    assigned.spec.node_name = Some("node-a".into());
    assert_eq!(admit_pod(&vendors, &hami(), &defaults(), &assigned), Err(NODE_ASSIGNED.into()));
}

#[test]
fn changed_key_finds_an_added_changed_or_removed_owned_annotation() {
    let keys = vec!["hami.io/a".to_owned(), "hami.io/b".to_owned()];
    let with = |a: Value| json!({"metadata": {"annotations": a}});
    let (none, a1, a2, b1) = (
        with(json!({})),
        with(json!({"hami.io/a": "1"})),
        with(json!({"hami.io/a": "2"})),
        with(json!({"hami.io/b": "1", "other": "x"})),
    );
    // (old, new, the key reported)
    let table: [(Option<&Value>, Option<&Value>, Option<&str>); 7] = [
        (Some(&none), Some(&none), None),
        (Some(&none), Some(&a1), Some("hami.io/a")),
        (Some(&a1), Some(&a2), Some("hami.io/a")),
        (Some(&a1), Some(&none), Some("hami.io/a")),
        (Some(&a1), Some(&a1), None),
        (None, Some(&b1), Some("hami.io/b")),
        (Some(&b1), Some(&with(json!({"hami.io/b": "1", "other": "y"}))), None),
    ];
    for (old, new, want) in table {
        assert_eq!(changed_key(&keys, old, new), want, "{old:?} -> {new:?}");
    }
}

#[test]
fn an_update_denial_names_the_key_and_the_user() {
    assert_eq!(
        update_denial("hami.io/vgpu-devices-allocated", "alice"),
        "annotation hami.io/vgpu-devices-allocated is written by the scheduler and cannot be set by alice"
    );
    assert!(update_denial("k", "").ends_with("cannot be set by an unauthenticated user"));
}

/// A namespace quota of `mem` MiB and `cores` of NVIDIA.
struct Limit {
    mem: u64,
    cores: u32,
}

impl QuotaCheck for Limit {
    fn fits(&self, _: &str, _: crate::model::VendorId, mem: crate::model::MemMiB, cores: u32) -> bool {
        mem.get() <= self.mem && cores <= self.cores
    }
}

#[test]
fn the_quota_check_books_sidecars_beside_the_app_and_init_containers_beside_earlier_sidecars() {
    use crate::testing::pod;
    // HAMi's webhook quota walk: a sidecar adds to a running sum, a plain init container peaks at
    // that sum plus its own, and the pod asks the larger of the peak and sidecars plus app.
    // (init containers in order as (sidecar, MiB, cores), the app's MiB and cores, quota MiB, fits)
    type Init = (bool, u64, u32);
    type Case = (&'static [Init], (u64, u32), u64, bool);
    let cases: &[Case] = &[
        (&[(false, 5000, 50), (true, 8000, 80)], (0, 0), 10000, true),
        (&[(true, 8000, 80), (false, 5000, 50)], (0, 0), 10000, false),
        (&[(false, 5000, 10), (true, 3000, 30), (false, 4000, 20)], (1000, 5), 7500, true),
        (&[(true, 4000, 40)], (4000, 40), 7500, false),
        (&[(true, 4000, 40)], (4000, 40), 8000, true),
        (&[(false, 12000, 0)], (4000, 0), 12000, true),
        (&[(false, 12000, 0)], (4000, 0), 11999, false),
    ];
    let vendors = vendors();
    for (inits, (app_mem, app_cores), quota_mem, fits) in cases {
        let mut p = pod();
        for (k, (sidecar, mem, cores)) in inits.iter().enumerate() {
            let name = format!("init-{k}");
            p = if *sidecar { p.sidecar(&name) } else { p.init(&name) };
            p = p.gpu(1).mem_mib(*mem).cores(*cores);
        }
        p = p.main();
        if *app_mem > 0 {
            p = p.gpu(1).mem_mib(*app_mem).cores(*app_cores);
        }
        let req = p.request_with(&vendors);
        let quota = Limit { mem: *quota_mem, cores: 100 };
        assert_eq!(fits_quota(&req, &vendors, &quota, "default"), *fits, "{inits:?} + {app_mem} under {quota_mem}");
    }
}

#[test]
fn a_policy_annotation_that_names_no_policy_is_admitted() {
    // The scheduler ignores such a value and keeps the configured policy; the webhook does not
    // refuse it, as HAMi's does not.
    for (key, value) in [(keys::GPU_SCHEDULER_POLICY, "bogus"), (keys::NODE_SCHEDULER_POLICY, "Spread")] {
        let mut p = pod(None, json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}));
        p["metadata"]["annotations"] = json!({ key: value });
        assert!(matches!(verdict(&hami(), &p), Verdict::Allow { mutated: Some(_), .. }), "{key}={value}");
    }
}

#[test]
fn a_pod_asking_for_devices_only_through_resource_claims_is_left_alone() {
    // DRA allocates such a pod's devices: the webhook neither mutates it nor takes it over.
    let mut p = pod(None, json!({"cpu": "1"}));
    p["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
    p["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
    assert_eq!(verdict(&hami(), &p), Verdict::Allow { mutated: Some(p.clone()), message: None });
}
