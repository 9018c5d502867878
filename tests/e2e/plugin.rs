//! Scenario t: the kubectl plugin against the real API server, with pods that kube-scheduler and
//! hami-rs placed. `top nodes` and `top gpus` show what the devices hold and who holds it (as
//! tables and as JSON, for one node), `why` counts a pending pod's reasons, names them on each node
//! with `--all`, shows its Events, describes a bound pod as bound, reads the scheduler's
//! configuration from its Deployment and device ConfigMap, finds the pod in the kubeconfig
//! context's namespace or with `-A`, and for a pod of higher priority (from a PriorityClass) names
//! the lower-priority pods whose eviction would make room; all with nothing written.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::api::PostParams;

use crate::cluster::*;
use crate::harness::*;

/// Runs `kubectl-hami --kubeconfig <admin> args…`: its stdout, or a panic with stderr.
pub(crate) async fn kubectl_hami(cp: &ControlPlane, args: &[&str]) -> String {
    kubectl_hami_with(&cp.kubeconfig("admin"), args).await
}

async fn kubectl_hami_with(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-hami"));
    cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
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

/// The admin kubeconfig with its context's namespace set to `ns`.
fn with_context_namespace(cp: &ControlPlane, ns: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(cp.kubeconfig("admin")).expect("the admin kubeconfig");
    let mut kc: serde_yaml::Value = serde_yaml::from_str(&text).expect("a kubeconfig");
    for c in kc["contexts"].as_sequence_mut().expect("contexts") {
        c["context"]["namespace"] = ns.into();
    }
    let path = cp.dir.join(format!("kubeconfig-{ns}"));
    std::fs::write(&path, serde_yaml::to_string(&kc).expect("YAML")).expect("written");
    path
}

/// A hami-rs Deployment as the chart makes one (nothing runs it: the API server only stores it),
/// with a device config whose memory factor is 2, for `why` to read.
async fn deploy_hami_rs(cp: &ControlPlane) {
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "hami-rs-device-config", "namespace": "kube-system"},
        "data": {"device-config.yaml": "nvidia:\n  resourceCountName: nvidia.com/gpu\n  resourceMemoryName: nvidia.com/gpumem\n  resourceCoreName: nvidia.com/gpucores\n  memoryFactor: 2\n"},
    }))
    .expect("a ConfigMap");
    Api::<ConfigMap>::namespaced(cp.client.clone(), "kube-system")
        .create(&PostParams::default(), &cm)
        .await
        .expect("created");
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "hami-rs", "namespace": "kube-system", "labels": {"app.kubernetes.io/name": "hami-rs"}},
        "spec": {
            "selector": {"matchLabels": {"app": "hami-rs"}},
            "template": {
                "metadata": {"labels": {"app": "hami-rs"}},
                "spec": {
                    "containers": [{
                        "name": "hami-rs", "image": "registry.invalid/hami-rs:never-pulled", "command": ["hami-rs"],
                        "args": ["serve", "--scheduler-name=hami-scheduler", "--node-scheduler-policy=spread", "--device-config-file=/device-config.yaml"],
                        "volumeMounts": [{"name": "device-config", "mountPath": "/device-config.yaml", "subPath": "device-config.yaml"}],
                    }],
                    "volumes": [{"name": "device-config", "configMap": {"name": "hami-rs-device-config"}}],
                },
            },
        },
    }))
    .expect("a Deployment");
    Api::<Deployment>::namespaced(cp.client.clone(), "kube-system")
        .create(&PostParams::default(), &d)
        .await
        .expect("created");
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

    let gpus = kubectl_hami(&cp, &["top", "gpus", "-o", "wide"]).await;
    let row = line_with(&gpus, "default/t-small");
    assert!(row.starts_with(&node) && row.contains("3000/16384") && row.contains("(3000 MiB,"), "{row}\n{gpus}");
    assert_eq!(gpus.lines().filter(|l| l.starts_with("gpu-t-")).count(), 4, "one line per GPU:\n{gpus}");
    let one: serde_json::Value =
        serde_json::from_str(&kubectl_hami(&cp, &["top", "gpus", &node, "-o", "json", "--sort-by", "memory"]).await)
            .expect("top -o json is JSON");
    let rows = one.as_array().expect("an array of devices");
    assert_eq!(rows.len(), 2, "a node argument keeps that node's devices: {one}");
    assert_eq!((rows[0]["memoryUsedMiB"].as_u64(), rows[0]["state"].as_str()), (Some(3000), Some("shared")), "{one}");
    assert_eq!(rows[0]["pods"][0]["pod"], "default/t-small", "{one}");

    let why = kubectl_hami(&cp, &["why", "t-big", "--all"]).await;
    println!("e2e[t]: kubectl hami top gpus:\n{gpus}e2e[t]: kubectl hami why t-big:\n{why}");
    assert!(why.contains("Pod default/t-big: Pending, not bound"), "{why}");
    assert!(
        why.lines().any(|l| l.contains("FilteringFailed") && l.contains("CardInsufficientMemory")),
        "its Events:\n{why}"
    );
    assert!(why.contains("no node fits") && why.contains("  2 nodes do not fit: 2 CardInsufficientMemory"), "{why}");
    assert!(why.contains("with the scheduler's defaults (no Deployment"), "no hami-rs Deployment yet:\n{why}");
    for n in nodes.names() {
        assert!(line_with(&why, &format!("    {n}: ")).contains("CardInsufficientMemory"), "{n}:\n{why}");
    }
    let why_small = kubectl_hami(&cp, &["why", "t-small", "-n", "default"]).await;
    assert!(why_small.contains(&format!("bound to {node}")) && why_small.contains("holds: GPU-"), "{why_small}");
    assert!(!why_small.contains("would choose"), "a bound pod is described as bound: {why_small}");

    // The scheduler's configuration is read from its Deployment, device config included: with a
    // memory factor of 2 the 20000 asked are 40000.
    deploy_hami_rs(&cp).await;
    let json: serde_json::Value =
        serde_json::from_str(&kubectl_hami(&cp, &["why", "t-big", "-o", "json"]).await).expect("why -o json is JSON");
    assert_eq!(json["configuration"], "Deployment kube-system/hami-rs", "{json}");
    let closest = json["fit"]["closest"][0]["reason"].as_str().unwrap_or_default();
    assert!(closest.contains("requested 40000 MiB"), "the deployed memoryFactor: {json}");
    Api::<Deployment>::namespaced(cp.client.clone(), "kube-system")
        .delete("hami-rs", &Default::default())
        .await
        .expect("the Deployment is deleted");

    // The kubeconfig context's namespace, and -A.
    let ns: Api<Namespace> = Api::all(cp.client.clone());
    let team: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "team-t"}})).expect("a namespace");
    ns.create(&PostParams::default(), &team).await.expect("the namespace is created");
    let mut in_team = pod("t-team", &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "20000")], &[], None);
    in_team.metadata.namespace = Some("team-t".into());
    Api::<Pod>::namespaced(cp.client.clone(), "team-t")
        .create(&PostParams::default(), &in_team)
        .await
        .expect("created");
    let kubeconfig = with_context_namespace(&cp, "team-t");
    let why_team = kubectl_hami_with(&kubeconfig, &["why", "t-team"]).await;
    assert!(why_team.contains("Pod team-t/t-team: Pending"), "{why_team}");
    let why_any = kubectl_hami(&cp, &["why", "t-team", "-A"]).await;
    assert!(why_any.contains("Pod team-t/t-team"), "{why_any}");
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
