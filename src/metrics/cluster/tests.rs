use super::*;
use crate::model::{PodDevices, PodUid, VendorId};
use crate::testing::*;
use std::sync::Arc;

fn report(v: &Vendors) -> NodeReport {
    let snap = node("n1").gpu(gpu("GPU-0", 16384).used(2, 6000, 40)).gpu(gpu("GPU-1", 16384)).snapshot(v);
    let nv = v.by_name("NVIDIA").unwrap();
    let devices = PodDevices(vec![(nv, vec![vec![crate::model::ContainerDevice::new("GPU-0", "NVIDIA", 6000, 40)]])]);
    NodeReport {
        name: snap.name.clone(),
        snapshot: Arc::new(snap),
        allocs: vec![AllocReport {
            uid: PodUid::new("u1"),
            namespace: Arc::from("team-a"),
            name: Arc::from("p1"),
            state: AllocState::Reserved,
            devices,
            charges: Vec::new(),
        }],
        locked_by: None,
        held_for: None,
        claims: Vec::new(),
    }
}

#[test]
fn device_gauges_keep_hamis_names_labels_and_units() {
    // As in HAMi, every gauge but hami_build_info carries zone="vGPU", and memory is in bytes.
    let v = vendors();
    let text = render_cluster(&[report(&v)], &v, None, Series { legacy: false, pods: true });
    let line = |prefix: &str| {
        text.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} in\n{text}")).to_owned()
    };
    assert_eq!(
        line("hami_gpu_memory_allocated_bytes{node=\"n1\",device_uuid=\"GPU-0\""),
        "hami_gpu_memory_allocated_bytes{node=\"n1\",device_uuid=\"GPU-0\",device_index=\"0\",device_cores=\"100\",device_type=\"NVIDIA-Tesla V100-PCIE-32GB\",zone=\"vGPU\"} 6291456000"
    );
    assert!(line("hami_gpu_memory_limit_bytes{node=\"n1\",device_uuid=\"GPU-1\"").ends_with(" 17179869184"));
    assert!(line("hami_gpu_shared_count{node=\"n1\",device_uuid=\"GPU-0\"").ends_with(" 2"));
    assert!(line("hami_gpu_core_allocated_ratio{node=\"n1\",device_uuid=\"GPU-0\"").ends_with(" 40"));
    assert!(line("hami_node_gpu_overview{node=\"n1\",device_uuid=\"GPU-0\"").contains("device_memory_limit=\"16384\""));
    let ratio = line("hami_node_gpu_memory_allocated_ratio{node=\"n1\",device_uuid=\"GPU-0\"");
    assert!(ratio.ends_with(" 0.3662109375"), "{ratio}");
    assert_eq!(
        line("hami_vgpu_memory_allocated_bytes{"),
        "hami_vgpu_memory_allocated_bytes{namespace=\"team-a\",node=\"n1\",pod=\"p1\",container_index=\"0\",device_uuid=\"GPU-0\",zone=\"vGPU\"} 6291456000"
    );
    // Each family appears once, with its HELP and TYPE, so the exposition is well formed.
    assert_eq!(text.matches("# TYPE hami_gpu_shared_count gauge").count(), 1);
    assert!(!text.contains("GPUDeviceMemoryLimit"), "legacy names only with --legacy-metrics");
}

#[test]
fn legacy_names_are_grouped_by_family() {
    // With --legacy-metrics HAMi emits its old metric names in addition to the new ones.
    let v = vendors();
    let text = render_cluster(&[report(&v), report(&v)], &v, None, Series { legacy: true, pods: true });
    assert!(text.contains("GPUDeviceMemoryLimit{nodeid=\"n1\",deviceuuid=\"GPU-0\",deviceidx=\"0\",devicetype=\"NVIDIA-Tesla V100-PCIE-32GB\"} 17179869184"));
    assert!(text.contains("vGPUMemoryAllocated{podnamespace=\"team-a\",nodename=\"n1\",podname=\"p1\",containeridx=\"0\",deviceuuid=\"GPU-0\"}"));
    // All samples of one family are contiguous.
    let names: Vec<&str> =
        text.lines().filter(|l| !l.starts_with('#')).map(|l| l.split('{').next().unwrap_or("")).collect();
    let mut seen: Vec<&str> = Vec::new();
    for w in names.windows(2) {
        if w[0] != w[1] {
            assert!(!seen.contains(&w[1]), "family {} is split", w[1]);
            seen.push(w[0]);
        }
    }
}

#[test]
fn quota_gauges_name_the_quota_and_its_limit() {
    let v = vendors();
    let q = QuotaBook::new(&v);
    q.set_quota(
        "team-a",
        "gpu-quota",
        &[("limits.nvidia.com/gpumem".into(), 8000), ("limits.nvidia.com/gpucores".into(), 200)],
    );
    q.add("team-a", &vec![(VendorId(0), 3000, 50)]);
    let text = render_cluster(&[], &v, Some(&q), Series { legacy: true, pods: true });
    // HAMi's labels: the quota is named by the resource it limits, so memory and cores are two series.
    assert!(text.contains("hami_resource_quota_used{namespace=\"team-a\",quota_name=\"nvidia.com/gpumem\",limit=\"8000\",zone=\"vGPU\"} 3000"), "{text}");
    assert!(text.contains("hami_resource_quota_used{namespace=\"team-a\",quota_name=\"nvidia.com/gpucores\",limit=\"200\",zone=\"vGPU\"} 50"), "{text}");
    assert!(text.contains(
        "hami_resource_quota_limit{namespace=\"team-a\",quota_name=\"nvidia.com/gpumem\",zone=\"vGPU\"} 8000"
    ));
    let legacy: Vec<&str> = text.lines().filter(|l| l.starts_with("QuotaUsed{")).collect();
    assert_eq!(
        legacy,
        [
            "QuotaUsed{quotanamespace=\"team-a\",quotaName=\"nvidia.com/gpucores\",limit=\"200\"} 50",
            "QuotaUsed{quotanamespace=\"team-a\",quotaName=\"nvidia.com/gpumem\",limit=\"8000\"} 3000",
        ],
        "one series each, as HAMi has them"
    );
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

#[test]
fn state_gauges_say_leader_and_synced_and_a_follower_is_never_synced() {
    let text = |leader, synced| render_state(leader, synced);
    let leading = text(true, true);
    assert!(leading.contains("# TYPE hami_scheduler_is_leader gauge"), "{leading}");
    assert!(leading.contains("hami_scheduler_is_leader{zone=\"vGPU\"} 1\n"), "{leading}");
    assert!(leading.contains("hami_scheduler_cache_synced{zone=\"vGPU\"} 1\n"), "{leading}");
    let syncing = text(true, false);
    assert!(syncing.contains("hami_scheduler_cache_synced{zone=\"vGPU\"} 0\n"), "{syncing}");
    // HAMi's follower never runs its registration pass, so its cache reads as not synced.
    let follower = text(false, true);
    assert!(follower.contains("hami_scheduler_is_leader{zone=\"vGPU\"} 0\n"), "{follower}");
    assert!(follower.contains("hami_scheduler_cache_synced{zone=\"vGPU\"} 0\n"), "{follower}");
}

#[test]
fn without_pod_device_metrics_no_per_pod_series_is_rendered_and_the_device_gauges_stay() {
    let v = vendors();
    let text = render_cluster(&[report(&v)], &v, None, Series { legacy: true, pods: false });
    for gone in [
        "hami_vgpu_memory_allocated_bytes",
        "hami_vgpu_core_allocated_ratio",
        "vGPUMemoryAllocated",
        "vGPUCoreAllocated",
    ] {
        assert!(!text.contains(gone), "{gone} left in:\n{text}");
    }
    assert!(text.contains("hami_gpu_memory_allocated_bytes{node=\"n1\",device_uuid=\"GPU-0\""), "{text}");
    assert!(text.contains("GPUDeviceMemoryLimit{"), "{text}");
}

#[test]
fn pending_pods_are_counted_by_outcome_every_outcome_shown_and_by_reason() {
    let text = render_pending([("no_fit", 3)], [("CardInsufficientMemory", 2), ("NodeUnregistered", 1)]);
    assert_eq!(
        text,
        "# HELP hami_scheduler_pending_pods Pods this scheduler's last filter found no node for (no_fit) or failed (error), until they are placed, bound or deleted\n\
         # TYPE hami_scheduler_pending_pods gauge\n\
         hami_scheduler_pending_pods{outcome=\"error\"} 0\n\
         hami_scheduler_pending_pods{outcome=\"no_fit\"} 3\n\
         # HELP hami_scheduler_unschedulable_pods Pending pods by each reason their last filter gave (a pod counts under every reason it was given)\n\
         # TYPE hami_scheduler_unschedulable_pods gauge\n\
         hami_scheduler_unschedulable_pods{reason=\"CardInsufficientMemory\"} 2\n\
         hami_scheduler_unschedulable_pods{reason=\"NodeUnregistered\"} 1\n"
    );
    assert!(render_pending([], []).contains("hami_scheduler_pending_pods{outcome=\"no_fit\"} 0"), "zero when none");
}
