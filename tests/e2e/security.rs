//! Scenario v: every door answers only whom it should, against the real kube-apiserver and
//! kube-scheduler. hami-rs listens on every address (as in a pod, where other pods reach its
//! port through the Service) with preemption on, the update guard registered as the chart
//! renders it, and `/refit` for the device plugin's ServiceAccount. A tenant with an unprivileged
//! ServiceAccount, calling from a network namespace of its own (not the loopback), tries every
//! door: a forged high-priority `/filter`, `/bind` of someone else's pending pod, `/prioritize`,
//! `/preempt`, the console and `/usage`, `/refit` with its own token, and an update forging an
//! allocation onto its own pod. Nothing is evicted, bound, reserved or admitted. A forged
//! preemption that does reach the extender (on the loopback, as kube-scheduler's calls do) names
//! a pod the cluster does not have, or claims a priority its pod does not have: nobody is
//! evicted. Meanwhile kube-scheduler in the pod places pods, the device plugin's patches pass the
//! guard, and the device plugin's own token is answered.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::cluster::*;
use crate::harness::*;

const ATTACKER_NS: &str = "attacker";
const ATTACKER_SA: &str = "intruder";
const PLUGIN_NS: &str = "kube-system";
const PLUGIN_SA: &str = "hami-device-plugin";
/// hami-rs's identity in the end-to-end control plane (control-plane.sh's token file).
const HAMI_USER: &str = "system:serviceaccount:kube-system:hami-scheduler";

async fn create_in<K>(client: &kube::Client, ns: Option<&str>, doc: Value) -> K
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(doc).expect("a valid object");
    let api: Api<K> = Api::namespaced(client.clone(), ns.unwrap_or(NS));
    api.create(&PostParams::default(), &obj).await.unwrap_or_else(|e| panic!("e2e: creating {}: {e}", K::kind(&())))
}

/// A ServiceAccount token bound to the pod `pod` (what the kubelet mounts into the pod).
async fn bound_token(cp: &ControlPlane, ns: &str, sa: &str, pod: &Pod) -> String {
    let api: Api<ServiceAccount> = Api::namespaced(cp.client.clone(), ns);
    let req = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: None,
            bound_object_ref: Some(BoundObjectReference {
                kind: Some("Pod".into()),
                api_version: Some("v1".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let t = api.create_token_request(sa, &PostParams::default(), &req).await.expect("e2e: a token request");
    t.status.and_then(|s| s.token).expect("e2e: the token request has a token")
}

/// A kubeconfig for a user presenting `token`.
fn kubeconfig_with(cp: &ControlPlane, who: &str, token: &str) -> PathBuf {
    let admin = std::fs::read_to_string(cp.kubeconfig("admin")).expect("the admin kubeconfig");
    let line = admin.lines().find(|l| l.contains("token:")).expect("a token line");
    let path = cp.dir.join(format!("{who}.kubeconfig"));
    std::fs::write(&path, admin.replace(line, &format!("  user: {{token: \"{token}\"}}"))).unwrap();
    path
}

fn gpu_pod_body(name: &str, ns: &str, uid: &str, priority: i64, mem: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": ns, "uid": uid},
        "spec": {
            "schedulerName": SCHEDULER_NAME, "priority": priority,
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem}}}],
        },
    })
}

/// (nodeName, the decision) of a pod: what a forged call would change.
async fn placement(cp: &ControlPlane, pod: &str) -> (Option<String>, Option<String>) {
    let p = get_pod(&cp.client, pod).await;
    (node_name(&p).map(str::to_owned), annotation(&p, "hami.io/vgpu-devices-allocated").map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread")]
async fn v_a_tenant_tries_every_door_and_nothing_is_evicted_bound_moved_or_admitted() {
    let cp = ControlPlane::start("v").await;
    let nodes = FakeNodes::new("gpu-v-", 1, 2);
    let _plugin = FakePlugin::start(&cp, &nodes).await;
    let flags = [
        "--preemption=on",
        "--preemption-hold=60s",
        "--device-plugin-namespace=kube-system",
        "--device-plugin-service-account=hami-device-plugin",
    ];
    let mut hami = Hami::start_on(&cp, "hami-rs", "0.0.0.0", &flags).await;
    hami.wait_ready(Duration::from_secs(60)).await;
    wait_nodes_registered(&hami, &nodes.names(), nodes.gpus).await;
    cp.apply_webhook(&hami.url()).await;
    cp.apply_update_guard(&hami, HAMI_USER).await;
    let _ks = KubeScheduler::start(&cp, "kube-scheduler", &hami.url(), SchedulerOpts::default()).await;

    // Two priority-1 pods fill the node's two GPUs; the device plugin's bind-phase patches go
    // through the guard (its identity may patch nodes).
    let classes: Api<PriorityClass> = Api::all(cp.client.clone());
    let low: PriorityClass = serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "e2e-low"}, "value": 1,
    }))
    .unwrap();
    classes.create(&PostParams::default(), &low).await.expect("the PriorityClass is created");
    for name in ["v-victim-0", "v-victim-1"] {
        let mut p = pod(name, &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "12000")], &[], None);
        p.spec.as_mut().unwrap().priority_class_name = Some("e2e-low".into());
        // Admission learns of the PriorityClass a moment after it is created.
        wait_for(&format!("{name} to be admitted"), Duration::from_secs(30), || {
            let (api, p) = (pods_api(&cp.client), p.clone());
            async move { api.create(&PostParams::default(), &p).await.map(|_| ()).map_err(|e| e.to_string()) }
        })
        .await;
        wait_allocated(&cp.client, name, Duration::from_secs(90)).await;
    }
    // Someone else's pod, pending: nothing fits it.
    create(&cp.client, &pod("v-waiting", &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "12000")], &[], None)).await;
    crate::plugin::filtering_failed(&cp, "v-waiting").await;
    let waiting_uid = get_pod(&cp.client, "v-waiting").await.metadata.uid.unwrap_or_default();
    let before = [placement(&cp, "v-victim-0").await, placement(&cp, "v-victim-1").await];

    // The tenant: a ServiceAccount that may read and patch pods in its own namespace only, and a
    // pod of its own its token is bound to.
    let nss: Api<Namespace> = Api::all(cp.client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ATTACKER_NS}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.expect("the tenant's namespace");
    for ns in [ATTACKER_NS, PLUGIN_NS] {
        let sa = if ns == ATTACKER_NS { ATTACKER_SA } else { PLUGIN_SA };
        create_in::<ServiceAccount>(&cp.client, Some(ns), json!({"metadata": {"name": sa, "namespace": ns}})).await;
    }
    create_in::<Role>(
        &cp.client,
        Some(ATTACKER_NS),
        json!({"metadata": {"name": "own-pods", "namespace": ATTACKER_NS},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch", "update"]}]}),
    )
    .await;
    create_in::<RoleBinding>(
        &cp.client,
        Some(ATTACKER_NS),
        json!({"metadata": {"name": "own-pods", "namespace": ATTACKER_NS},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "own-pods"},
               "subjects": [{"kind": "ServiceAccount", "name": ATTACKER_SA, "namespace": ATTACKER_NS}]}),
    )
    .await;
    // A pod of `sa` that nothing schedules (no kubelet runs it either).
    let own = |name: &str, ns: &str, sa: &str, node: Option<&str>| {
        let mut spec = json!({"schedulerName": "nobody", "serviceAccountName": sa,
                              "containers": [{"name": "main", "image": "registry.invalid/e2e:never-pulled"}]});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        json!({"metadata": {"name": name, "namespace": ns}, "spec": spec})
    };
    let mine: Pod = create_in(&cp.client, Some(ATTACKER_NS), own("mine", ATTACKER_NS, ATTACKER_SA, None)).await;
    let tenant_token = bound_token(&cp, ATTACKER_NS, ATTACKER_SA, &mine).await;
    let tenant = client_from(&kubeconfig_with(&cp, "tenant", &tenant_token)).await;

    // --- the extender's doors, from another network namespace --------------------------------
    let netns = NetNs::new("v");
    let base = format!("https://{}:{}", netns.host_ip, hami.port);
    let forged = gpu_pod_body("evil", ATTACKER_NS, "uid-evil", 2_000_000_000, "12000");
    let bind = json!({"PodName": "v-waiting", "PodNamespace": NS, "PodUID": waiting_uid, "Node": "gpu-v-0"});
    let calls: [(&str, &str, Option<Value>); 6] = [
        ("POST", "/filter", Some(json!({"Pod": forged, "NodeNames": ["gpu-v-0"]}))),
        ("POST", "/bind", Some(bind)),
        ("POST", "/prioritize", Some(json!({"Pod": forged, "NodeNames": ["gpu-v-0"]}))),
        (
            "POST",
            "/preempt",
            Some(json!({"Pod": forged, "NodeNameToMetaVictims": {"gpu-v-0": {"Pods": [{"UID": "x"}]}}})),
        ),
        ("GET", "/usage", None),
        ("GET", "/", None),
    ];
    for (method, path, body) in &calls {
        let body = body.as_ref().map(Value::to_string);
        let (code, text) = netns.curl(method, &format!("{base}{path}"), &[], body.as_deref());
        assert_eq!(code, 403, "{method} {path} from {}: {text}", netns.ip);
        assert!(text.contains("answers only kube-scheduler"), "{path}: {text}");
    }
    let (code, _) = netns.curl("GET", &format!("{base}/healthz"), &[], None);
    assert_eq!(code, 200, "the health endpoints stay reachable");

    // /refit: no token, the tenant's own token, then the device plugin's.
    let refit = |node: &str| {
        json!({"podUID": "u", "podNamespace": NS, "podName": "v-victim-0", "nodeName": node, "containerIndex": 0,
               "deviceType": "NVIDIA", "allowedDeviceUUIDs": ["GPU-none"]})
        .to_string()
    };
    let (code, text) = netns.curl("POST", &format!("{base}/refit"), &[], Some(&refit("gpu-v-0")));
    assert_eq!(code, 401, "{text}");
    let bearer = format!("Authorization: Bearer {tenant_token}");
    let (code, text) = netns.curl("POST", &format!("{base}/refit"), &[&bearer], Some(&refit("gpu-v-0")));
    assert_eq!(code, 403, "{text}");
    assert!(text.contains("is not the device plugin's ServiceAccount"), "{text}");
    let plugin_pod: Pod =
        create_in(&cp.client, Some(PLUGIN_NS), own("hami-device-plugin-v", PLUGIN_NS, PLUGIN_SA, Some("gpu-v-0")))
            .await;
    let plugin_bearer = format!("Authorization: Bearer {}", bound_token(&cp, PLUGIN_NS, PLUGIN_SA, &plugin_pod).await);
    let (code, text) = netns.curl("POST", &format!("{base}/refit"), &[&plugin_bearer], Some(&refit("gpu-v-0")));
    assert_eq!(code, 200, "the device plugin's token, from its node: {text}");
    assert!(!text.contains("caller authentication"), "{text}");
    let (code, text) = netns.curl("POST", &format!("{base}/refit"), &[&plugin_bearer], Some(&refit("gpu-v-9")));
    assert_eq!(code, 403, "the device plugin's token for another node: {text}");

    // --- forged preemptions that reach the extender (on its loopback, as kube-scheduler's do) --
    let (http, url) = hami.client();
    for body in [
        // A pod the cluster does not have.
        gpu_pod_body("evil", ATTACKER_NS, "uid-evil", 2_000_000_000, "12000"),
        // The cluster's pending pod, its body claiming a priority it does not have.
        gpu_pod_body("v-waiting", NS, &waiting_uid, 2_000_000_000, "12000"),
    ] {
        let answer: Value = http
            .post(format!("{url}/filter"))
            .json(&json!({"Pod": body, "NodeNames": ["gpu-v-0"]}))
            .send()
            .await
            .expect("the filter is answered")
            .json()
            .await
            .expect("a filter answer");
        assert!(answer["NodeNames"].is_null(), "no node fits without an eviction: {answer}");
    }

    // --- an update forging an allocation onto the tenant's own pod ----------------------------
    let tenant_pods: Api<Pod> = Api::namespaced(tenant, ATTACKER_NS);
    let forge = json!({"metadata": {"annotations": {
        "hami.io/vgpu-devices-allocated": "GPU-gpu-v-0-0,NVIDIA,16384,100:;", "hami.io/vgpu-node": "gpu-v-0"}}});
    let err = tenant_pods
        .patch("mine", &PatchParams::default(), &Patch::Merge(&forge))
        .await
        .expect_err("the guard denies the forged allocation");
    let said = err.to_string();
    assert!(
        said.contains("is written by the scheduler and cannot be set by system:serviceaccount:attacker:intruder"),
        "{said}"
    );
    // The tenant may patch its pod otherwise: the denial was the guard's, not RBAC's.
    let allowed =
        json!({"metadata": {"labels": {"team": "b"}, "annotations": {"hami.io/gpu-scheduler-policy": "binpack"}}});
    tenant_pods
        .patch("mine", &PatchParams::default(), &Patch::Merge(&allowed))
        .await
        .expect("an ordinary patch passes");
    let mine = Api::<Pod>::namespaced(cp.client.clone(), ATTACKER_NS).get("mine").await.expect("the tenant's pod");
    assert_eq!(annotation(&mine, "hami.io/vgpu-devices-allocated"), None, "nothing forged was admitted");

    // --- nothing moved -------------------------------------------------------------------------
    let after = [placement(&cp, "v-victim-0").await, placement(&cp, "v-victim-1").await];
    assert_eq!(after, before, "no victim evicted or moved");
    assert_eq!(node_name(&get_pod(&cp.client, "v-waiting").await), None, "v-waiting was not bound");
    let usage = hami.usage().await.expect("usage from the loopback");
    let holders: Vec<&str> = usage["pods"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(!holders.contains(&"evil") && !holders.contains(&"v-waiting"), "nothing reserved: {holders:?}");
    let summary = check_invariants(&cp.client).await;
    let m = hami.metrics().await.expect("metrics");
    let refused = |door: &str, why: &str| {
        metric(&m, "hami_scheduler_requests_refused_total", &[&format!("door=\"{door}\""), &format!("why=\"{why}\"")])
    };
    for door in ["filter", "bind", "prioritize", "preempt", "usage", "console"] {
        assert_eq!(refused(door, "untrusted_caller"), 1.0, "{door}");
    }
    assert_eq!(refused("refit", "no_token"), 1.0);
    assert_eq!(refused("refit", "wrong_identity"), 1.0);
    assert_eq!(refused("refit", "wrong_node"), 1.0);
    assert!(refused("webhook", "not_permitted") >= 1.0);
    let preemptions = |o: &str| metric(&m, "hami_scheduler_preemptions_total", &[&format!("outcome=\"{o}\"")]);
    assert_eq!(preemptions("started"), 0.0, "{m}");
    assert!(preemptions("unverified") >= 1.0, "the forged preemptor was counted");
    let unwatched = metric(&m, "hami_scheduler_filter_unwatched_pods_total", &[]);
    println!(
        "e2e summary v: from {} every extender verb, the console and /usage answered 403, /refit 401 without a token and 403 with the tenant's, 200 with the device plugin's on its node; forged preemptions evicted no one (unverified {}); the forged allocation update was denied by the guard; {}; filters of pods the watch had not delivered: {unwatched}",
        netns.ip,
        preemptions("unverified"),
        summary.line()
    );
}
