use proptest::prelude::*;

use super::PackedPod;
use crate::model::PodView;
use crate::model::pod::{
    ContainerStateView, ContainerStatusView, ContainerView, EnvVarView, ObjectMetaView, OwnerRefView, PodSpecView,
    PodStatusView, QuantityText, ResourcesView, SchedulingGroupView, SecurityContextView, TerminatedView,
};
use crate::model::vec_map::VecMap;

/// A running pod as the load generator writes them, as the cache holds most pods.
fn running() -> PodView {
    serde_json::from_str(
        r#"{"metadata":{"name":"running-0","namespace":"loadtest-running","uid":"4e4de460-795d-4751-8ddb-1aba95574190",
            "resourceVersion":"81723",
            "annotations":{"hami.io/bind-phase":"success","hami.io/bind-time":"1796349333",
              "hami.io/vgpu-devices-allocated":"GPU-fake-gpu-0-0,NVIDIA,4096,0:;",
              "hami.io/vgpu-devices-to-allocate":";;","hami.io/vgpu-node":"fake-gpu-0","hami.io/vgpu-time":"1796349333"},
            "labels":{"app.kubernetes.io/name":"hami-loadtest","hami.io/vgpu-node":"fake-gpu-0"}},
          "spec":{"containers":[{"name":"main","resources":{
              "limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"4096"},
              "requests":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"4096"}}}],
            "nodeName":"fake-gpu-0","schedulerName":"hami-scheduler"},
          "status":{"phase":"Running"}}"#,
    )
    .unwrap()
}

#[test]
fn a_running_pod_unpacks_as_it_was_in_a_fraction_of_the_bytes() {
    let p = running();
    let packed = PackedPod::pack(&p);
    assert_eq!(packed.unpack().as_ref(), Some(&p));
    // The JSON it came from is about 700 bytes; interned keys are written as one or two bytes.
    assert!(packed.len() < 300, "{} bytes", packed.len());
    assert_eq!(packed.namespace(), "loadtest-running");
    assert_eq!(packed.name(), "running-0");
    assert_eq!(packed.uid(), "4e4de460-795d-4751-8ddb-1aba95574190");
    assert_eq!(packed.resource_version(), Some("81723"));
    assert_eq!(packed.node_name(), Some("fake-gpu-0"));
    assert_eq!(packed.annotation("hami.io/vgpu-node"), Some("fake-gpu-0"));
    assert_eq!(packed.annotation("hami.io/bind-phase"), Some("success"));
    assert_eq!(packed.annotation("hami.io/vgpu-devices-to-allocate"), Some(";;"));
    assert_eq!(packed.annotation("hami.io/absent"), None);
}

#[test]
fn an_empty_pod_and_an_empty_node_name_round_trip() {
    let empty = PodView::default();
    assert_eq!(PackedPod::pack(&empty).unpack(), Some(empty));
    let mut p = running();
    p.spec.node_name = Some(String::new());
    let packed = PackedPod::pack(&p);
    assert_eq!(packed.node_name(), None, "an empty nodeName is no node");
    assert_eq!(packed.unpack(), Some(p), "but it is kept as written");
}

#[test]
fn every_prefix_of_a_packed_pod_is_refused() {
    let packed = PackedPod::pack(&running());
    for n in 0..packed.0.len() {
        let cut = PackedPod(packed.0[..n].into());
        assert_eq!(cut.unpack(), None, "prefix of {n} bytes");
    }
    let mut longer = packed.0.to_vec();
    longer.push(0);
    assert_eq!(PackedPod(longer.into()).unpack(), None, "a trailing byte");
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z0-9./-]{1,12}",
        "\\PC{0,40}",
        // Long enough for a multi-byte length.
        "[a-z]{120,200}",
    ]
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(text())
}

fn map<V: std::fmt::Debug>(value: impl Strategy<Value = V>) -> impl Strategy<Value = VecMap<V>> {
    // Known keys (interned, written as codes) mixed with arbitrary ones.
    let key = prop_oneof![
        Just("hami.io/vgpu-node".to_owned()),
        Just("nvidia.com/gpu".to_owned()),
        Just("hami.io/vgpu-devices-allocated".to_owned()),
        text(),
    ];
    proptest::collection::vec((key, value), 0..6).prop_map(|v| v.into_iter().collect())
}

fn container() -> impl Strategy<Value = ContainerView> {
    let quantity = || text().prop_map(QuantityText);
    let security = proptest::option::of(proptest::option::of(any::<bool>()))
        .prop_map(|s| s.map(|privileged| SecurityContextView { privileged }));
    (
        text(),
        map(quantity()),
        map(quantity()),
        opt_text(),
        security,
        proptest::collection::vec(text().prop_map(|name| EnvVarView { name }), 0..3),
    )
        .prop_map(|(name, limits, requests, restart_policy, security_context, env)| ContainerView {
            name,
            resources: ResourcesView { limits, requests },
            restart_policy,
            security_context,
            env,
        })
}

fn pod() -> impl Strategy<Value = PodView> {
    let owner = (text(), text(), text(), proptest::option::of(any::<bool>()))
        .prop_map(|(kind, name, uid, controller)| OwnerRefView { kind, name, uid, controller });
    let meta = (
        text(),
        text(),
        text(),
        map(text()),
        map(text()),
        opt_text(),
        opt_text(),
        proptest::collection::vec(owner, 0..3),
    )
        .prop_map(
            |(name, namespace, uid, annotations, labels, deletion_timestamp, resource_version, owner_references)| {
                ObjectMetaView {
                    name,
                    namespace,
                    uid,
                    annotations,
                    labels,
                    deletion_timestamp,
                    resource_version,
                    owner_references,
                }
            },
        );
    let spec = (
        proptest::collection::vec(container(), 0..3),
        proptest::collection::vec(container(), 0..2),
        opt_text(),
        opt_text(),
        proptest::option::of(opt_text().prop_map(|pod_group_name| SchedulingGroupView { pod_group_name })),
        proptest::option::of(any::<i32>()),
        opt_text(),
    )
        .prop_map(
            |(
                containers,
                init_containers,
                node_name,
                scheduler_name,
                scheduling_group,
                priority,
                preemption_policy,
            )| {
                PodSpecView {
                    containers,
                    init_containers,
                    node_name,
                    scheduler_name,
                    scheduling_group,
                    priority,
                    preemption_policy,
                }
            },
        );
    let status_entry = (text(), proptest::option::of(any::<i32>())).prop_map(|(name, code)| ContainerStatusView {
        name,
        state: ContainerStateView { terminated: code.map(|exit_code| TerminatedView { exit_code }) },
    });
    let status = (opt_text(), opt_text(), proptest::collection::vec(status_entry, 0..3)).prop_map(
        |(phase, start_time, init_container_statuses)| PodStatusView { phase, start_time, init_container_statuses },
    );
    (meta, spec, status).prop_map(|(metadata, spec, status)| PodView { metadata, spec, status })
}

proptest! {
    #[test]
    fn any_pod_unpacks_to_itself_and_its_leading_fields_read_in_place(p in pod()) {
        let packed = PackedPod::pack(&p);
        let back = packed.unpack();
        prop_assert_eq!(back.as_ref(), Some(&p));
        prop_assert_eq!(packed.namespace(), p.metadata.namespace.as_str());
        prop_assert_eq!(packed.name(), p.metadata.name.as_str());
        prop_assert_eq!(packed.uid(), p.metadata.uid.as_str());
        prop_assert_eq!(packed.resource_version(), p.metadata.resource_version.as_deref());
        prop_assert_eq!(packed.node_name(), p.spec.node_name.as_deref().filter(|n| !n.is_empty()));
        for (k, v) in &p.metadata.annotations {
            prop_assert_eq!(packed.annotation(k), Some(v.as_str()));
        }
        prop_assert_eq!(packed.annotation("not/an-annotation-any-pod-has"), None);
    }

    #[test]
    fn editing_annotations_and_labels_in_place_is_unpacking_editing_and_packing(
        p in pod(),
        set in proptest::collection::vec(("[a-z./-]{1,12}", "[ -~]{0,20}"), 0..4),
        drop_first in any::<bool>(),
    ) {
        let edit = |a: &mut crate::model::vec_map::VecMap<String>, l: &mut crate::model::vec_map::VecMap<String>| {
            let first = a.iter().next().map(|(k, _)| k.to_string());
            if let Some(k) = first.filter(|_| drop_first) {
                a.remove(&k);
            }
            for (k, v) in &set {
                a.insert(k.clone(), v.clone());
                l.insert(format!("l-{k}"), v.clone());
            }
        };
        let mut whole = p.clone();
        edit(&mut whole.metadata.annotations, &mut whole.metadata.labels);
        let edited = PackedPod::pack(&p).with_meta(edit);
        prop_assert_eq!(edited.as_ref().and_then(PackedPod::unpack), Some(whole));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let p = PackedPod(bytes.into());
        let _ = p.unpack();
        let _ = (p.namespace(), p.name(), p.uid(), p.resource_version(), p.node_name());
        let _ = p.annotation("hami.io/vgpu-node");
        let _ = p.with_meta(|a, _| { a.insert("k".into(), "v".into()); });
    }
}
