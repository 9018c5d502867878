//! MIG placements through the engine, as HAMi places and books them: a container's several
//! instances on one GPU, each checked against the GPU as it was before the container but for its
//! placements; instances charged at their profile's memory and rounded-up cores, which may pass
//! 100 on a GPU whose placements are the real capacity; and an init container's instances on one
//! GPU counted once.

use crate::actor::tests::*;

/// The entries of the pod's NVIDIA allocation, as written.
fn allocated(b: &MemoryBackend, p: &PodBuilder) -> String {
    b.written("default", &p.view.metadata.name).get(keys::NVIDIA_ALLOCATED).cloned().unwrap_or_default()
}

/// (slots, MiB, cores, placements) in use on the node's device `i`.
fn device(e: &Mem, node: &str, i: usize) -> (u32, u64, u32, Vec<u32>) {
    let s = e.snapshot(node).unwrap();
    let d = &s.devices[i];
    let mut starts: Vec<u32> = d.mig_used.iter().map(|m| m.placement.start).collect();
    starts.sort_unstable();
    (d.used, d.used_mem.get(), d.used_cores, starts)
}

/// A running pod holding MIG instances on `gpu`: (profile, start, size, MiB, cores) each, in one
/// regular container, or in one init container that has not finished when `init`.
fn holding(name: &str, node: &str, gpu: &str, slices: &[(&str, u32, u32, u64, u32)], init: bool) -> PodBuilder {
    let entries: String = slices.iter().map(|(_, _, _, m, c)| format!("{gpu},NVIDIA,{m},{c}:")).collect();
    let mig: Vec<String> = slices
        .iter()
        .enumerate()
        .map(|(i, (p, start, size, _, _))| {
            format!(
                r#"{{"containerIndex":0,"deviceIndex":{i},"gpuUUID":"{gpu}","profile":"{p}","placement":{{"start":{start},"size":{size}}}}}"#
            )
        })
        .collect();
    let mut b = pod().name(name);
    if init {
        b = b.init("prepare").gpu(slices.len() as u32).mem_mib(4000).main().gpu(0);
    } else {
        b = b.gpu(slices.len() as u32).mem_mib(4000);
    }
    let allocated = if init { format!("{entries};;") } else { format!("{entries};") };
    b.placed(node, &allocated)
        .annotation(keys::NVIDIA_MIG_ALLOCATIONS, &format!("[{}]", mig.join(",")))
        .bound_to(node)
        .phase("Running")
}

#[actix::test]
async fn a_containers_instances_on_one_idle_gpu_are_placed_whatever_cores_they_ask_under_any_policy() {
    // An idle A100-80GB, one container asking 2 GPUs of 60 cores whose memory selects 1g.10gb:
    // HAMi checks the second instance against the GPU as it was before the container (60 of 100
    // cores free, no slot used, mutex or not) and books two 1g.10gb instances at their profile's
    // memory and cores.
    for policy in ["spread", "binpack", "mutex"] {
        let (e, b) = engine(&[node("n").gpu(gpu("GPU-0", 81920).mig(a100_80gb_profiles()))]).await;
        let p = pod().gpu(2).mem_mib(9000).cores(60).name("two").annotation(keys::GPU_SCHEDULER_POLICY, policy);
        let out = filter(&e, &b, &p, &["n"]).await;
        assert_eq!(chosen(&out), "n", "{policy}: {out:?}");
        assert_eq!(allocated(&b, &p), "GPU-0,NVIDIA,9984,15:GPU-0,NVIDIA,9984,15:;", "{policy}");
        assert_eq!(device(&e, "n", 0), (2, 19968, 30, vec![5, 6]), "{policy}");
    }
}

#[actix::test]
async fn instances_booked_past_100_cores_are_accepted_and_the_gpu_then_refuses_for_cores() {
    // GPU-1 holds 2g at 0 and 2 and 1g at 5 and 6 (29 + 29 + 15 + 15 = 88 cores), slice 4 free;
    // GPU-0 is idle. Binpack visits GPU-1 first: its one free slice takes the first instance (88 of
    // 100 cores booked, 0 asked), the revisit finds no placement, and GPU-0 takes the second. GPU-1
    // is then booked 103 cores: HAMi's booking, which the node accepts (its placements are its
    // capacity); the next pod finds less than nothing free there and goes to GPU-0.
    let n = node("n").gpu(gpu("GPU-0", 40960).mig(a100_profiles())).gpu(gpu("GPU-1", 40960).mig(a100_profiles()));
    let (e, b) = engine(&[n]).await;
    let slices = [
        ("2g.10gb", 0, 2, 9984, 29),
        ("2g.10gb", 2, 2, 9984, 29),
        ("1g.5gb", 5, 1, 4864, 15),
        ("1g.5gb", 6, 1, 4864, 15),
    ];
    observe(&e, &b, &holding("busy", "n", "GPU-1", &slices, false)).await;
    assert_eq!(device(&e, "n", 1), (4, 29696, 88, vec![0, 2, 5, 6]));
    let binpack =
        |name: &str, n: u32| pod().gpu(n).mem_mib(4000).name(name).annotation(keys::GPU_SCHEDULER_POLICY, "binpack");
    let p = binpack("two", 2);
    let out = filter(&e, &b, &p, &["n"]).await;
    assert_eq!(chosen(&out), "n", "{out:?}");
    assert_eq!(allocated(&b, &p), "GPU-1,NVIDIA,4864,15:GPU-0,NVIDIA,4864,15:;");
    assert_eq!(device(&e, "n", 1), (5, 34560, 103, vec![0, 2, 4, 5, 6]));
    // 100 − 103 < 0: the next pod, asking no cores, is refused GPU-1 for cores, as in HAMi.
    let q = binpack("next", 1);
    assert_eq!(chosen(&filter(&e, &b, &q, &["n"]).await), "n");
    assert_eq!(allocated(&b, &q), "GPU-0,NVIDIA,4864,15:;");
    let only_gpu1 = binpack("pinned", 1).annotation(keys::NVIDIA_USE_UUID, "GPU-1");
    match filter(&e, &b, &only_gpu1, &["n"]).await {
        FilterOutcome::NoFit { failed } => {
            assert_eq!(
                failed.hami().get("n").map(String::as_str),
                Some("1/2 CardInsufficientCore, 1/2 CardUuidMismatch")
            )
        }
        other => panic!("GPU-1 is full for cores: {other:?}"),
    }
}

#[actix::test]
async fn a_running_init_containers_instances_on_one_gpu_count_once() {
    // HAMi counts an init container's entries on one device entry by entry (the largest, one
    // slot): two 1g instances of a running init container hold one slot and one instance's memory
    // and cores, while both placements stay taken.
    let (e, b) = engine(&[node("n").gpu(gpu("GPU-0", 40960).mig(a100_profiles()))]).await;
    let slices = [("1g.5gb", 6, 1, 4864, 15), ("1g.5gb", 5, 1, 4864, 15)];
    observe(&e, &b, &holding("warmup", "n", "GPU-0", &slices, true)).await;
    assert_eq!(device(&e, "n", 0), (1, 4864, 15, vec![5, 6]));
    // The same two instances in a regular container hold two slots.
    let (e, b) = engine(&[node("n").gpu(gpu("GPU-0", 40960).mig(a100_profiles()))]).await;
    observe(&e, &b, &holding("serve", "n", "GPU-0", &slices, false)).await;
    assert_eq!(device(&e, "n", 0), (2, 9728, 30, vec![5, 6]));
}
