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
