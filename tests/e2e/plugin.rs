//! Scenario t: the kubectl plugin against the real API server, with pods that kube-scheduler and
//! hami-rs placed. `top nodes` and `top gpus` show what the devices hold and who holds it, `why`
//! names a pending pod's reason on each node and its Events and, for a pod of higher priority
//! (from a PriorityClass), the lower-priority pods whose eviction would make room, all with the
//! cluster's own admin kubeconfig and nothing written.

use std::time::Duration;

use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::api::PostParams;

use crate::cluster::*;
use crate::harness::*;

/// Runs `kubectl-hami --kubeconfig <admin> args…`: its stdout, or a panic with stderr.
async fn kubectl_hami(cp: &ControlPlane, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-hami"));
    cmd.arg("--kubeconfig").arg(cp.kubeconfig("admin")).args(args);
    let out = tokio::task::spawn_blocking(move || cmd.output()).await.expect("joined").expect("kubectl-hami runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl-hami {args:?} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until hami-rs has recorded a `FilteringFailed` Event on the pod.
pub async fn filtering_failed(cp: &ControlPlane, pod: &str) {
    wait_for(&format!("{pod}'s FilteringFailed Events"), Duration::from_secs(60), || async {
        let evs = events_of(&cp.client, pod).await;
        if evs.iter().any(|e| e.reason.as_deref() == Some("FilteringFailed")) {
            Ok(())
        } else {
            Err(event_summary(&evs))
        }
    })
    .await;
}

fn line_with<'a>(text: &'a str, what: &str) -> &'a str {
    text.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("no line with {what}:\n{text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn t_kubectl_hami_shows_what_the_gpus_hold_and_why_a_pod_is_pending() {
    let cp = ControlPlane::start("t").await;
    let nodes = FakeNodes::new("gpu-t-", 2, 2);
    let (_plugin, _hami, _ks) = crate::single(&cp, &nodes, &[]).await;
    create(&cp.client, &pod("t-small", &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "3000")], &[], None)).await;
    let small = wait_allocated(&cp.client, "t-small", Duration::from_secs(90)).await;
    let node = node_name(&small).expect("bound").to_owned();
    // More memory than any one GPU has: it stays pending.
    create(&cp.client, &pod("t-big", &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "20000")], &[], None)).await;
    filtering_failed(&cp, "t-big").await;

    let top = kubectl_hami(&cp, &["top", "nodes"]).await;
    let row = line_with(&top, &node);
    assert!(row.contains("3000/32768"), "the node's two GPUs hold t-small's 3000 MiB: {row}\n{top}");
    let other = nodes.names().into_iter().find(|n| *n != node).expect("a second node");
    assert!(line_with(&top, &other).contains("0/32768"), "{top}");

    let gpus = kubectl_hami(&cp, &["top", "gpus"]).await;
    let row = line_with(&gpus, "default/t-small");
    assert!(row.starts_with(&node) && row.contains("3000/16384") && row.contains("(3000 MiB,"), "{row}\n{gpus}");
    assert_eq!(gpus.lines().filter(|l| l.starts_with("gpu-t-")).count(), 4, "one line per GPU:\n{gpus}");

    let why = kubectl_hami(&cp, &["why", "t-big"]).await;
    println!("e2e[t]: kubectl hami top gpus:\n{gpus}e2e[t]: kubectl hami why t-big:\n{why}");
    assert!(why.contains("Pod default/t-big: Pending, not bound"), "{why}");
    assert!(
        why.lines().any(|l| l.contains("FilteringFailed") && l.contains("CardInsufficientMemory")),
        "its Events:\n{why}"
    );
    assert!(why.contains("no node fits"), "{why}");
    for n in nodes.names() {
        assert!(line_with(&why, &format!("  {n}: ")).contains("CardInsufficientMemory"), "{n}:\n{why}");
    }
    let why_small = kubectl_hami(&cp, &["why", "t-small", "-n", "default"]).await;
    assert!(why_small.contains(&format!("bound to {node}")), "{why_small}");
    assert!(why_small.contains("fits: hami-rs would choose"), "{why_small}");
    // Read-only: the pending pod was fitted in memory, not on the cluster.
    let big = get_pod(&cp.client, "t-big").await;
    assert_eq!(node_name(&big), None);
    assert!(annotation(&big, "hami.io/vgpu-node").is_none(), "nothing written on t-big");

    // Priorities as admission resolves them from PriorityClasses: four priority-1 pods fill the
    // four GPUs, and a priority-1000 pod asking as much stays pending; `why` names the pods whose
    // eviction would make room for it (kube-scheduler's own preemption, blind to device memory,
    // evicts nothing).
    let classes: Api<PriorityClass> = Api::all(cp.client.clone());
    for (name, value) in [("e2e-low", 1), ("e2e-high", 1000)] {
        let pc: PriorityClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value,
        }))
        .expect("a PriorityClass");
        classes.create(&PostParams::default(), &pc).await.expect("the PriorityClass is created");
    }
    let with_class = |name: &str, class: &str| {
        let mut p = pod(name, &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "12000")], &[], None);
        if let Some(spec) = p.spec.as_mut() {
            spec.priority_class_name = Some(class.to_owned());
        }
        p
    };
    for i in 0..4 {
        create(&cp.client, &with_class(&format!("t-low-{i}"), "e2e-low")).await;
        wait_allocated(&cp.client, &format!("t-low-{i}"), Duration::from_secs(90)).await;
    }
    create(&cp.client, &with_class("t-urgent", "e2e-high")).await;
    filtering_failed(&cp, "t-urgent").await;
    let why_urgent = kubectl_hami(&cp, &["why", "t-urgent"]).await;
    println!("e2e[t]: kubectl hami why t-urgent:\n{why_urgent}");
    let line = line_with(&why_urgent, "evicting these pods of lower priority");
    assert!(line.contains("default/t-low-") && line.contains("(priority 1)"), "{why_urgent}");
    assert_eq!(line.matches("default/t-low-").count(), 1, "one victim is enough: {line}");
    for i in 0..4 {
        assert!(node_name(&get_pod(&cp.client, &format!("t-low-{i}")).await).is_some(), "nothing was evicted");
    }
    println!(
        "e2e summary t: kubectl-hami top nodes/gpus showed t-small's 3000 MiB on {node}; why named CardInsufficientMemory on both nodes for t-big, and for a priority-1000 pod the one priority-1 pod whose eviction would make room"
    );
}
