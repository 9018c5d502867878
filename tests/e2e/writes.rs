//! Scenario q: the Kubernetes backend's writes meant for an unbound pod, against the real API
//! server. A decision must never land on a pod that already runs elsewhere (a Binding whose
//! answer was lost, then a retry choosing another node), and a pod that merely changed since it
//! was read (a label, its status) still takes the write.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Binding, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use hami_rs::backend::kube::{KubeBackend, KubeOptions};
use hami_rs::backend::{Backend, Error, PodPatch, PodRef};

use crate::cluster::*;
use crate::harness::*;

fn decision(node: &str, rv: &str) -> PodPatch {
    PodPatch {
        annotations: vec![("hami.io/vgpu-node".into(), Some(node.into()))],
        while_unbound: Some(rv.into()),
        ..PodPatch::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn q_a_write_for_an_unbound_pod_takes_a_changed_pod_and_refuses_a_bound_one() {
    let cp = ControlPlane::start("q").await;
    let opts = KubeOptions {
        qps: 50.0,
        burst: 100,
        timeout: Some(Duration::from_secs(10)),
        component: "hami-scheduler".into(),
        lock_timeout: Duration::from_secs(300),
    };
    let backend = KubeBackend::with_client(cp.client.clone(), opts);
    let created = create(&cp.client, &pod("q1", &[], &[], Some("e2e-by-hand"))).await;
    let seen = created.metadata.resource_version.clone().unwrap_or_default();
    let pref =
        PodRef { namespace: NS.into(), name: "q1".into(), uid: created.metadata.uid.clone().unwrap_or_default() };

    // Changed since it was read (a label): the write is made against the pod as it is now.
    let body = json!({"metadata": {"labels": {"touched": "yes"}}});
    pods_api(&cp.client).patch("q1", &PatchParams::default(), &Patch::Merge(&body)).await.unwrap();
    // The API server holds a merge patch to the resource version it names.
    let stale = json!({"metadata": {"resourceVersion": seen, "annotations": {"probe": "x"}}});
    let r = pods_api(&cp.client).patch("q1", &PatchParams::default(), &Patch::Merge(&stale)).await;
    assert!(matches!(&r, Err(kube::Error::Api(s)) if s.code == 409), "{r:?}");
    backend.patch_pod(&pref, &decision("n-1", &seen)).await.expect("an unbound pod takes the write");
    let now = get_pod(&cp.client, "q1").await;
    assert_eq!(annotation(&now, "hami.io/vgpu-node"), Some("n-1"));

    // Bound behind the writer's back (as by a Binding whose answer was lost): refused, unchanged.
    let seen = now.metadata.resource_version.clone().unwrap_or_default();
    let binding = Binding {
        metadata: ObjectMeta { name: Some("q1".into()), ..Default::default() },
        target: ObjectReference { kind: Some("Node".into()), name: Some("n-1".into()), ..Default::default() },
    };
    pods_api(&cp.client)
        .create_subresource::<_, serde_json::Value>("binding", "q1", &PostParams::default(), &binding)
        .await
        .unwrap();
    let err = backend.patch_pod(&pref, &decision("n-2", &seen)).await.unwrap_err();
    assert!(matches!(&err, Error::AlreadyBound { node, .. } if node == "n-1"), "{err:?}");
    let err = backend.bind(&pref, "n-2", &decision("n-2", &seen)).await.unwrap_err();
    assert!(matches!(&err, Error::AlreadyBound { node, .. } if node == "n-1"), "{err:?}");
    let after = get_pod(&cp.client, "q1").await;
    assert_eq!(annotation(&after, "hami.io/vgpu-node"), Some("n-1"), "the decision of the node it runs on");
    assert_eq!(node_name(&after), Some("n-1"));

    // A write at one exact version (the NUMA refit's): taken at the pod's version, refused with the
    // API server's conflict once the pod changed, never retried.
    let exact = |rv: &str| PodPatch {
        annotations: vec![("hami.io/vgpu-devices-allocated".into(), Some("GPU-b,NVIDIA,1000,0:;".into()))],
        at_version: Some(rv.into()),
        ..PodPatch::default()
    };
    let current = after.metadata.resource_version.clone().unwrap_or_default();
    backend.patch_pod(&pref, &exact(&current)).await.expect("the write at the pod's version is taken");
    let taken = get_pod(&cp.client, "q1").await;
    assert_eq!(annotation(&taken, "hami.io/vgpu-devices-allocated"), Some("GPU-b,NVIDIA,1000,0:;"));
    let conflict = backend.patch_pod(&pref, &exact(&current)).await.unwrap_err();
    assert!(
        matches!(&conflict, Error::Status { code: 409, message, .. } if message.contains("the object has been modified")),
        "{conflict:?}"
    );
    println!(
        "e2e summary q: a stale unbound copy took the write after one re-read; a bound pod refused it ({err}); an exact-version write conflicted once the pod changed"
    );
}

fn annotation<'a>(p: &'a k8s_openapi::api::core::v1::Pod, key: &str) -> Option<&'a str> {
    p.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}
