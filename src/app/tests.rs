use super::*;
use crate::model::PodView;
use crate::model::packed::PackedPod;

fn example(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples").join(name)
}

fn flags() -> crate::config::SchedulerFlags {
    use clap::Parser;
    let cli = crate::config::Cli::try_parse_from(["hami-rs", "serve", "--cluster-file", "x.json"]).unwrap();
    match cli.command {
        crate::config::Command::Serve(a) => a.sched,
        crate::config::Command::Simulate(_) => unreachable!(),
    }
}

/// What the engine counts and the backend holds, in a form two loads can be compared by.
async fn state(engine: &Engine<MemoryBackend>) -> (Vec<String>, Vec<Arc<PodView>>) {
    let reports = engine.reports().await;
    let usage = reports.iter().map(|r| format!("{} {:?} {:?}", r.name, r.allocs, r.snapshot.devices)).collect();
    (usage, engine.backend().pods())
}

#[actix::test]
async fn a_cluster_loaded_packed_is_the_cluster_loaded_whole() {
    for file in ["cluster.json", "mixed-cluster.json"] {
        let whole = memory_engine(&flags(), ClusterObjects::load(&example(file)).unwrap()).await.unwrap();
        let packed_cluster = PackedCluster::load(&example(file)).unwrap();
        let packed = start_memory_engine(&flags(), &packed_cluster.quotas).unwrap();
        load_packed_cluster(&packed, packed_cluster).await;
        let (usage, pods) = state(&whole).await;
        assert!(usage.iter().any(|u| u.contains("Committed")), "{file}: the example holds devices");
        assert_eq!(state(&packed).await, (usage, pods), "{file}");
    }
}

#[actix::test]
async fn every_pod_of_a_cluster_larger_than_a_load_batch_is_counted() {
    // One node of the example, and copies of one of its running pods spread over more than two
    // batches: every copy must be counted, those sent after the last wait included.
    let mut cluster = ClusterObjects::load(&example("cluster.json")).unwrap();
    let first = cluster.pods.iter().find(|p| p.spec.node_name.is_some()).unwrap().clone();
    let node = first.spec.node_name.clone().unwrap();
    cluster.nodes.retain(|n| n.metadata.name == node);
    let copies = 2 * LOAD_BATCH + 3;
    let pods: Vec<PackedPod> = (0..copies)
        .map(|i| {
            let mut p = first.clone();
            p.metadata.name = format!("copy-{i}");
            p.metadata.uid = format!("uid-{i}");
            PackedPod::pack(&p)
        })
        .collect();
    // Bound pods are counted whatever room is left, so every copy is held.
    let engine = start_memory_engine(&flags(), &[]).unwrap();
    let loaded = PackedCluster {
        nodes: cluster.nodes,
        pods,
        quotas: Vec::new(),
        groups: Vec::new(),
        budgets: Vec::new(),
        device_classes: Vec::new(),
    };
    load_packed_cluster(&engine, loaded).await;
    let reports = engine.reports().await;
    let counted: usize = reports.iter().map(|r| r.allocs.len()).sum();
    assert_eq!(counted, copies);
    assert_eq!(engine.backend().pods().len(), copies);
}

#[actix::test]
async fn a_cluster_file_s_device_classes_naming_a_served_resource_are_reported() {
    // DRA may serve a resource name through such a class on nodes without its device plugin: the
    // simulated cluster lists it and records a Warning Event on it; others are left out.
    let text = r#"{"kind": "List", "items": [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com", "uid": "u1"},
         "spec": {"extendedResourceName": "nvidia.com/gpu"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "fpga.example.com"},
         "spec": {"extendedResourceName": "example.com/fpga"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "plain.example.com"}, "spec": {}}
    ]}"#;
    let cluster = PackedCluster::parse(text).unwrap();
    assert_eq!(cluster.device_classes.len(), 3);
    let engine = start_memory_engine(&flags(), &[]).unwrap();
    load_packed_cluster(&engine, cluster).await;
    let want = crate::port::dra::DraClass { class: "gpu.example.com".into(), resource: "nvidia.com/gpu".into() };
    assert_eq!(engine.backend().dra_classes(), vec![want]);
    let events = engine.backend().events();
    let on_class: Vec<_> = events.iter().filter(|e| e.object == crate::port::ObjectKind::DeviceClass).collect();
    assert_eq!(on_class.len(), 1, "{events:?}");
    assert_eq!(on_class[0].pod.name, "gpu.example.com");
    assert_eq!(on_class[0].reason, crate::port::reasons::EXTENDED_RESOURCE_SERVED_BY_DRA);
    assert_eq!(on_class[0].kind, crate::port::EventType::Warning);
}

#[test]
fn the_defragmentation_budgets_come_from_their_flags() {
    use clap::Parser;
    let parse = |extra: &[&str]| {
        let args = ["hami-rs", "serve", "--cluster-file", "x.json"].iter().chain(extra).copied();
        match crate::config::Cli::try_parse_from(args).unwrap().command {
            crate::config::Command::Serve(a) => engine_config(&a.sched).defrag,
            crate::config::Command::Simulate(_) => unreachable!("serve parses as serve"),
        }
    };
    let d = parse(&[]);
    assert_eq!((d.per_plan, d.per_node, d.per_controller, d.per_minute), (2, 2, 1, 10));
    let d = parse(&[
        "--defrag-max-moves=3",
        "--defrag-max-per-node=4",
        "--defrag-max-per-controller=5",
        "--defrag-max-per-minute=6",
    ]);
    assert_eq!((d.per_plan, d.per_node, d.per_controller, d.per_minute), (3, 4, 5, 6));
}
