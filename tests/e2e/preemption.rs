//! Scenario u: GPU-aware preemption (`--preemption=on`) through the real kube-apiserver and
//! kube-scheduler. One node's two GPUs hold two priority-1 pods whose memory leaves no room; a
//! priority-1000 pod of the same size gets the one victim a PodDisruptionBudget does not protect
//! evicted, and is placed on the devices held for it. A `preemptionPolicy: Never` pod and a pod of
//! equal priority evict nothing and do not take the freed devices; nothing is over-committed.
//! (Scenario t shows the flag off: the same high-priority pod waits and nothing is evicted.)

use std::time::Duration;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::api::PostParams;

use crate::cluster::*;
use crate::harness::*;

async fn priority_class(cp: &ControlPlane, name: &str, value: i32, policy: &str) {
    let classes: Api<PriorityClass> = Api::all(cp.client.clone());
    let pc: PriorityClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value, "preemptionPolicy": policy,
    }))
    .expect("a PriorityClass");
    classes.create(&PostParams::default(), &pc).await.expect("the PriorityClass is created");
}

fn classed(name: &str, class: &str, label: Option<(&str, &str)>) -> k8s_openapi::api::core::v1::Pod {
    let mut p = pod(name, &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "12000")], &[], None);
    if let Some(spec) = p.spec.as_mut() {
        spec.priority_class_name = Some(class.to_owned());
    }
    if let Some((k, v)) = label {
        p.metadata.labels.get_or_insert_default().insert(k.to_owned(), v.to_owned());
    }
    p
}

async fn exists(cp: &ControlPlane, name: &str) -> bool {
    pods_api(&cp.client).get_opt(name).await.expect("the pod is read").is_some()
}

#[tokio::test(flavor = "multi_thread")]
async fn u_a_high_priority_pod_evicts_the_one_unprotected_lower_priority_pod_its_memory_needs() {
    let cp = ControlPlane::start("u").await;
    let nodes = FakeNodes::new("gpu-u-", 1, 2);
    let (_plugin, hami, _ks) = crate::single(&cp, &nodes, &["--preemption=on", "--preemption-hold=90s"]).await;
    priority_class(&cp, "e2e-low", 1, "PreemptLowerPriority").await;
    priority_class(&cp, "e2e-high", 1000, "PreemptLowerPriority").await;
    priority_class(&cp, "e2e-high-never", 1000, "Never").await;
    // u-low-0 is protected: a budget that lets none of its pods go.
    let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep-u-low-0", "namespace": NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"keep": "yes"}}},
    }))
    .expect("a PodDisruptionBudget");
    Api::<PodDisruptionBudget>::namespaced(cp.client.clone(), NS)
        .create(&PostParams::default(), &pdb)
        .await
        .expect("the budget is created");
    create(&cp.client, &classed("u-low-0", "e2e-low", Some(("keep", "yes")))).await;
    wait_allocated(&cp.client, "u-low-0", Duration::from_secs(90)).await;
    create(&cp.client, &classed("u-low-1", "e2e-low", None)).await;
    wait_allocated(&cp.client, "u-low-1", Duration::from_secs(90)).await;

    // Neither may preempt: `Never`, and the same priority as the pods on the GPUs.
    create(&cp.client, &classed("u-never", "e2e-high-never", None)).await;
    crate::plugin::filtering_failed(&cp, "u-never").await;
    create(&cp.client, &classed("u-peer", "e2e-low", None)).await;
    crate::plugin::filtering_failed(&cp, "u-peer").await;
    assert!(exists(&cp, "u-low-0").await && exists(&cp, "u-low-1").await, "nothing evicted for u-never or u-peer");
    check_invariants(&cp.client).await;

    let asked = std::time::Instant::now();
    create(&cp.client, &classed("u-urgent", "e2e-high", None)).await;
    let urgent = wait_allocated(&cp.client, "u-urgent", Duration::from_secs(120)).await;
    // From creation to allocated: the preempting filter, the victim's deletion, kube-scheduler's
    // backoff and the filter that takes the held devices.
    let took = asked.elapsed();
    assert_eq!(node_name(&urgent), Some("gpu-u-0"));
    assert!(!exists(&cp, "u-low-1").await, "u-low-1 was evicted");
    assert!(exists(&cp, "u-low-0").await, "the budget kept u-low-0");
    let said = wait_events(
        &cp.client,
        "u-urgent",
        &[("Preempting", &|m: &str| m.contains("default/u-low-1 (priority 1)") && !m.contains("u-low-0"))],
        Duration::from_secs(30),
    )
    .await;
    let evicted = wait_events(
        &cp.client,
        "u-low-1",
        &[("Preempted", &|m: &str| m.contains("default/u-urgent"))],
        Duration::from_secs(30),
    )
    .await;
    // The freed devices went to the preemptor, not to the pods waiting beside it.
    for p in ["u-never", "u-peer"] {
        assert_eq!(node_name(&get_pod(&cp.client, p).await), None, "{p} stays pending");
    }
    let summary = check_invariants(&cp.client).await;
    let metrics = hami.metrics().await.expect("metrics");
    let count = |labels: &[&str]| metric(&metrics, "hami_scheduler_preemptions_total", labels);
    assert_eq!((count(&["outcome=\"started\""]), count(&["outcome=\"placed\""])), (1.0, 1.0), "{metrics}");
    assert_eq!(metric(&metrics, "hami_scheduler_preemption_victims_total", &[]), 1.0);
    assert_eq!(metric(&metrics, "hami_scheduler_preemption_freed_device_memory_bytes_total", &[]), 12000.0 * 1048576.0);
    println!(
        "e2e summary u: u-urgent (priority 1000) evicted u-low-1 only (u-low-0 kept by its budget) and was allocated on gpu-u-0 {:.1} s after its creation; u-never and u-peer evicted nothing and stay pending; {}; events: {} | {}",
        took.as_secs_f64(),
        summary.line(),
        event_summary(&said),
        event_summary(&evicted)
    );
}
