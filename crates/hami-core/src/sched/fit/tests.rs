use proptest::prelude::*;

use super::*;
use crate::devices::NoQuota;
use crate::model::annotations as keys;
use crate::model::codec::encode_pod_devices;
use crate::model::device::MigSlot;
use crate::model::{MigPlacement, VendorId};
use crate::sched::NodeSnapshot;
use crate::testing::*;

const NV: VendorId = VendorId(0);

/// What an evaluation gives: the encoded NVIDIA devices, or HAMi's reason text.
type Outcome = Result<String, String>;

/// The pod's NVIDIA annotation on success (HAMi's encoding, one entry per container), HAMi's
/// reason text on failure.
fn eval(snap: &NodeSnapshot, p: &PodBuilder, quota: &dyn QuotaCheck) -> Outcome {
    let v = vendors();
    let req = p.request_with(&v);
    match fit_pod_devices(snap, &req, &v, quota, &mut Scratch::default()) {
        Ok(fit) => Ok(encode_pod_devices(fit.devices.vendor(NV).unwrap_or(&[]))),
        Err(r) => Err(r.hami_text()),
    }
}

fn try_fit(n: &NodeBuilder, p: &PodBuilder) -> Outcome {
    eval(&n.snapshot(&vendors()), p, &NoQuota)
}

fn ok(s: &str) -> Outcome {
    Ok(s.to_owned())
}

fn no(s: &str) -> Outcome {
    Err(s.to_owned())
}

/// A pod asking for `n` GPUs of 1000 MiB each (cores default to 0).
fn small(n: u32) -> PodBuilder {
    pod().gpu(n).mem_mib(1000)
}

/// `n` idle 16 GiB GPUs named `GPU-0` … on node `a`.
fn idle(n: usize) -> NodeBuilder {
    (0..n).fold(node("a"), |b, i| b.gpu(gpu(&format!("GPU-{i}"), 16384)))
}

struct Row {
    what: &'static str,
    node: NodeBuilder,
    pod: PodBuilder,
    want: Outcome,
}

fn check(rows: Vec<Row>) {
    for r in rows {
        assert_eq!(try_fit(&r.node, &r.pod), r.want, "{}", r.what);
    }
}

// ---------------------------------------------------------------------------------------------
// The NVIDIA per-device checks, in HAMi's order; the first failing check counts one for its
// reason and skips the device. Tests are named after the check's number: 1 healthy
// (CardNotHealth); 2 not in hami.io/device-cordon (CardCordoned); 3 type and vgpu-mode selection
// (CardTypeMismatch); 4 numa-bind bookkeeping (a device on a new NUMA node restarts the pick,
// discarding the partial group as NumaNotFit); 5 UUID selection (CardUuidMismatch); 6 Used < Count
// (CardTimeSlicingExhausted); 7 mutex needs Used = 0 (ExclusiveDeviceAllocateConflict); 8 cores
// above 100 clamped to 100; 9 the memory to reserve (absolute, else a percentage of the device);
// 10 namespace quota (ResourceQuotaNotFit); 11 free memory (CardInsufficientMemory); 12 free cores
// (CardInsufficientCore); 13 100 cores on a used 100-core device (ExclusiveDeviceAllocateConflict);
// 14 a core-less task on a fully booked device (CardComputeUnitsExhausted); 15 a free MIG
// placement (CardMigTopologyInfeasible); 16 pick; 17 stop once enough are picked; 18 visit a MIG
// GPU again for the same container. The default GPU policy is `spread`; among equal devices the
// one registered last is tried first (HAMi's sort keeps equal devices in registration order and
// the walk starts from the end).

#[test]
fn check_1_unhealthy_devices_are_skipped() {
    check(vec![
        Row {
            what: "the healthy device is taken",
            node: node("a").gpu(gpu("GPU-0", 16384).unhealthy()).gpu(gpu("GPU-1", 16384)),
            pod: small(1),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "an unhealthy device alone",
            node: node("a").gpu(gpu("GPU-0", 16384).unhealthy()),
            pod: small(1),
            want: no("1/1 CardNotHealth"),
        },
        Row {
            // After the walk: some found, not enough → AllocatedCardsInsufficientRequest.
            what: "one of two healthy for a two-GPU request",
            node: node("a").gpu(gpu("GPU-0", 16384).unhealthy()).gpu(gpu("GPU-1", 16384)),
            pod: small(2),
            want: no("1/2 AllocatedCardsInsufficientRequest, 1/2 CardNotHealth"),
        },
    ]);
}

#[test]
fn check_2_cordoned_devices_take_no_new_allocations() {
    check(vec![
        Row {
            // UUIDs in hami.io/device-cordon → CardCordoned.
            what: "cordoned device skipped",
            node: idle(2).annotation(keys::NVIDIA_CORDON, "GPU-0"),
            pod: small(1),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "every device cordoned, list with spaces",
            node: idle(2).annotation(keys::NVIDIA_CORDON, "GPU-0, GPU-1"),
            pod: small(1),
            want: no("2/2 CardCordoned"),
        },
        Row {
            // Check 1 comes first: an unhealthy cordoned device counts as unhealthy.
            what: "health before cordon",
            node: node("a").gpu(gpu("GPU-0", 16384).unhealthy()).annotation(keys::NVIDIA_CORDON, "GPU-0"),
            pod: small(1),
            want: no("1/1 CardNotHealth"),
        },
    ]);
}

#[test]
fn check_3_type_and_mode_selection() {
    let v100 = || node("a").gpu(gpu("GPU-0", 16384));
    let mixed = || node("a").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-1", 40960).ty("NVIDIA A100-SXM4-40GB"));
    check(vec![
        Row {
            // use-gputype is a case-insensitive substring match of the device type.
            what: "use-gputype matching another model",
            node: v100(),
            pod: small(1).annotation(keys::NVIDIA_USE_TYPE, "A100"),
            want: no("1/1 CardTypeMismatch"),
        },
        Row {
            what: "use-gputype is case-insensitive",
            node: v100(),
            pod: small(1).annotation(keys::NVIDIA_USE_TYPE, "v100"),
            want: ok("GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            what: "use-gputype picks the matching model",
            node: mixed(),
            pod: small(1).annotation(keys::NVIDIA_USE_TYPE, "H100, A100"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "nouse-gputype excludes the model",
            node: mixed(),
            pod: small(1).annotation(keys::NVIDIA_NOUSE_TYPE, "V100"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "nouse-gputype excluding everything",
            node: mixed(),
            pod: small(1).annotation(keys::NVIDIA_NOUSE_TYPE, "NVIDIA"),
            want: no("2/2 CardTypeMismatch"),
        },
        Row {
            what: "a blank use list is no constraint",
            node: v100(),
            pod: small(1).annotation(keys::NVIDIA_USE_TYPE, " , "),
            want: ok("GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            // With nvidia.com/vgpu-mode, the device's mode must be a substring of it.
            what: "vgpu-mode without the device's mode",
            node: v100(),
            pod: small(1).annotation(keys::NVIDIA_VGPU_MODE, "mps"),
            want: no("1/1 CardTypeMismatch"),
        },
        Row {
            what: "vgpu-mode containing the device's mode",
            node: v100(),
            pod: small(1).annotation(keys::NVIDIA_VGPU_MODE, "hami-core,mps"),
            want: ok("GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            what: "vgpu-mode selects the mps device",
            node: node("a").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-1", 16384).mode("mps")),
            pod: small(1).annotation(keys::NVIDIA_VGPU_MODE, "mps"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "no vgpu-mode: any mode",
            node: node("a").gpu(gpu("GPU-0", 16384).mode("mps")),
            pod: small(1),
            want: ok("GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            // Check 2 comes before check 3.
            what: "cordon before type",
            node: v100().annotation(keys::NVIDIA_CORDON, "GPU-0"),
            pod: small(1).annotation(keys::NVIDIA_USE_TYPE, "A100"),
            want: no("1/1 CardCordoned"),
        },
    ]);
}

#[test]
fn check_4_numa_bind_keeps_one_request_on_one_numa_node() {
    let two_and_one = || node("a").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-1", 16384)).gpu(gpu("GPU-2", 16384).numa(1));
    check(vec![
        Row {
            // Without the flag the walk mixes NUMA nodes (spread sorts by score, then NUMA
            // ascending, so among equal scores the higher NUMA is tried first; then GPU-1,
            // registered after GPU-0).
            what: "no numa-bind",
            node: two_and_one(),
            pod: small(2),
            want: ok("GPU-2,NVIDIA,1000,0:GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // GPU-2 (NUMA 1) is picked first; GPU-1 opens NUMA 0, discarding it, and GPU-0
            // completes the group.
            what: "numa-bind restarts on the next NUMA node",
            node: two_and_one(),
            pod: small(2).annotation(keys::NVIDIA_NUMA_BIND, "true"),
            want: ok("GPU-1,NVIDIA,1000,0:GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            // Go boolean literals: `1` is true.
            what: "numa-bind 1",
            node: two_and_one(),
            pod: small(2).annotation(keys::NVIDIA_NUMA_BIND, "1"),
            want: ok("GPU-1,NVIDIA,1000,0:GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            // A value that is not a Go boolean reads as false.
            what: "numa-bind yes",
            node: two_and_one(),
            pod: small(2).annotation(keys::NVIDIA_NUMA_BIND, "yes"),
            want: ok("GPU-2,NVIDIA,1000,0:GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // The discarded devices count as NumaNotFit; the last group's partial pick as
            // AllocatedCardsInsufficientRequest.
            what: "one GPU per NUMA node",
            node: node("a").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-1", 16384).numa(1)),
            pod: small(2).annotation(keys::NVIDIA_NUMA_BIND, "true"),
            want: no("1/2 AllocatedCardsInsufficientRequest, 1/2 NumaNotFit"),
        },
        Row {
            // A topology-aware walk collects without counting down, so HAMi's NumaNotFit test
            // (count still short of the request) never holds: only the last group is reported.
            what: "one GPU per NUMA node, topology-aware",
            node: node("a").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-1", 16384).numa(1)),
            pod: small(2)
                .annotation(keys::NVIDIA_NUMA_BIND, "true")
                .annotation(keys::GPU_SCHEDULER_POLICY, "topology-aware"),
            want: no("1/2 AllocatedCardsInsufficientRequest"),
        },
        Row {
            // In HAMi the restart comes before the UUID and capacity checks, so a device that is
            // then rejected still discards the partial group. GPU-1 is picked, GPU-2 lacks memory,
            // GPU-0 (NUMA 0, excluded by UUID) discards GPU-1.
            what: "restart before the UUID check",
            node: node("a")
                .gpu(gpu("GPU-0", 16384))
                .gpu(gpu("GPU-1", 16384).numa(1))
                .gpu(gpu("GPU-2", 16384).numa(1).used(1, 16000, 0)),
            pod: small(2).annotation(keys::NVIDIA_NUMA_BIND, "true").annotation(keys::NVIDIA_NOUSE_UUID, "GPU-0"),
            want: no("1/3 CardInsufficientMemory, 1/3 CardUuidMismatch, 1/3 NumaNotFit"),
        },
        Row {
            // An unhealthy device never reaches check 4, so it does not restart the group. The
            // walk meets the NUMA 1 pair first, GPU-2 (registered last) before GPU-1.
            what: "unhealthy devices do not restart the group",
            node: node("a")
                .gpu(gpu("GPU-0", 16384).unhealthy())
                .gpu(gpu("GPU-1", 16384).numa(1))
                .gpu(gpu("GPU-2", 16384).numa(1)),
            pod: small(2).annotation(keys::NVIDIA_NUMA_BIND, "true"),
            want: ok("GPU-2,NVIDIA,1000,0:GPU-1,NVIDIA,1000,0:;"),
        },
    ]);
}

#[test]
fn check_5_uuid_selection() {
    check(vec![
        Row {
            // Exact match after trimming each entry.
            what: "use-gpuuuid",
            node: idle(2),
            pod: small(1).annotation(keys::NVIDIA_USE_UUID, " GPU-1 , GPU-9"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "nouse-gpuuuid",
            node: idle(2),
            pod: small(1).annotation(keys::NVIDIA_NOUSE_UUID, "GPU-0"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "use-gpuuuid matches no device",
            node: idle(2),
            pod: small(1).annotation(keys::NVIDIA_USE_UUID, "GPU-9"),
            want: no("2/2 CardUuidMismatch"),
        },
        Row {
            what: "UUIDs are not substrings",
            node: idle(2),
            pod: small(1).annotation(keys::NVIDIA_USE_UUID, "GPU"),
            want: no("2/2 CardUuidMismatch"),
        },
        Row {
            // Reason items are sorted as text.
            what: "one excluded, the other too small",
            node: node("a").gpu(gpu("GPU-0", 4096)).gpu(gpu("GPU-1", 16384)),
            pod: pod().gpu(1).mem_mib(8000).annotation(keys::NVIDIA_NOUSE_UUID, "GPU-1"),
            want: no("1/2 CardInsufficientMemory, 1/2 CardUuidMismatch"),
        },
        Row {
            // Check 3 comes before check 5.
            what: "type before UUID",
            node: idle(1),
            pod: small(1).annotation(keys::NVIDIA_USE_TYPE, "A100").annotation(keys::NVIDIA_USE_UUID, "GPU-9"),
            want: no("1/1 CardTypeMismatch"),
        },
    ]);
}

#[test]
fn check_6_time_slicing_slots() {
    check(vec![
        Row {
            // A device takes a task only while Used < Count.
            what: "every slot taken",
            node: node("a").gpu(gpu("GPU-0", 16384).count(2).used(2, 2000, 20)),
            pod: small(1),
            want: no("1/1 CardTimeSlicingExhausted"),
        },
        Row {
            what: "one slot left",
            node: node("a").gpu(gpu("GPU-0", 16384).count(2).used(1, 2000, 20)),
            pod: small(1),
            want: ok("GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            what: "UUID before slots",
            node: node("a").gpu(gpu("GPU-0", 16384).count(1).used(1, 2000, 20)),
            pod: small(1).annotation(keys::NVIDIA_NOUSE_UUID, "GPU-0"),
            want: no("1/1 CardUuidMismatch"),
        },
    ]);
}

#[test]
fn check_7_mutex_policy_takes_only_idle_devices() {
    let policy = keys::GPU_SCHEDULER_POLICY;
    check(vec![
        Row {
            // Mutex rejects devices with Used > 0.
            what: "mutex on a busy device",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 10)),
            pod: small(1).annotation(policy, "mutex"),
            want: no("1/1 ExclusiveDeviceAllocateConflict"),
        },
        Row {
            what: "mutex takes the idle device",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 10)).gpu(gpu("GPU-1", 16384)),
            pod: small(1).annotation(policy, "mutex"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // `mutex` as a list item is a fit rule too.
            what: "mutex inside a list",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 10)),
            pod: small(1).annotation(policy, "spread,mutex"),
            want: no("1/1 ExclusiveDeviceAllocateConflict"),
        },
        Row {
            // binpack tries the busy device first; mutex rejects it.
            what: "binpack,mutex",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 10)).gpu(gpu("GPU-1", 16384)),
            pod: small(1).annotation(policy, "binpack,mutex"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "without mutex a busy device is shared",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 10)),
            pod: small(1),
            want: ok("GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            what: "slots before mutex",
            node: node("a").gpu(gpu("GPU-0", 16384).count(1).used(1, 1000, 10)),
            pod: small(1).annotation(policy, "mutex"),
            want: no("1/1 CardTimeSlicingExhausted"),
        },
    ]);
}

#[test]
fn check_8_cores_are_clamped_to_100() {
    check(vec![
        Row {
            // Cores above 100 become 100, also in the entry.
            what: "150 cores on an idle device",
            node: idle(1),
            pod: small(1).cores(150),
            want: ok("GPU-0,NVIDIA,1000,100:;"),
        },
        Row {
            // Clamped to 100, the request then means exclusive (check 13), not short of cores.
            what: "150 cores on a shared device",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 0)),
            pod: small(1).cores(150),
            want: no("1/1 ExclusiveDeviceAllocateConflict"),
        },
        Row {
            // The clamp is to 100 whatever the device's core total.
            what: "150 cores on a 200-core device",
            node: node("a").gpu(gpu("GPU-0", 16384).cores(200)),
            pod: small(1).cores(150),
            want: ok("GPU-0,NVIDIA,1000,100:;"),
        },
    ]);
}

#[test]
fn check_9_and_11_memory_absolute_and_percentage() {
    check(vec![
        Row {
            // Check 11: Totalmem − Usedmem ≥ the memory to reserve.
            what: "not enough free memory",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 14000, 0)),
            pod: pod().gpu(1).mem_mib(4096),
            want: no("1/1 CardInsufficientMemory"),
        },
        Row {
            what: "exactly enough free memory",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 12288, 0)),
            pod: pod().gpu(1).mem_mib(4096),
            want: ok("GPU-0,NVIDIA,4096,0:;"),
        },
        Row {
            // Check 9: a percentage reserves floor(Totalmem × mempct / 100).
            what: "percentage of the device",
            node: idle(1),
            pod: pod().gpu(1).mem_pct(50),
            want: ok("GPU-0,NVIDIA,8192,0:;"),
        },
        Row {
            what: "percentage rounds down",
            node: idle(1),
            pod: pod().gpu(1).mem_pct(33),
            want: ok("GPU-0,NVIDIA,5406,0:;"),
        },
        Row {
            // Half of either device scores the same, so GPU-1 (registered last) comes first.
            what: "percentage is per device",
            node: node("a").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-1", 8192)),
            pod: pod().gpu(2).mem_pct(50),
            want: ok("GPU-1,NVIDIA,4096,0:GPU-0,NVIDIA,8192,0:;"),
        },
        Row {
            what: "percentage larger than the free memory",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 10000, 0)),
            pod: pod().gpu(1).mem_pct(50),
            want: no("1/1 CardInsufficientMemory"),
        },
        Row {
            // The memory asked is taken when the percentage allows it, as in HAMi.
            what: "memory and a larger percentage",
            node: idle(1),
            pod: pod().gpu(1).mem_mib(3000).mem_pct(50),
            want: ok("GPU-0,NVIDIA,3000,0:;"),
        },
        Row {
            // HAMi's device plugin (PR 3075) refuses an allocation above the percentage of the
            // card, so a container asking both is given the smaller (HAMi writes 12000, and the
            // pod fails at its node).
            what: "memory and a smaller percentage",
            node: idle(1),
            pod: pod().gpu(1).mem_mib(12000).mem_pct(25),
            want: ok("GPU-0,NVIDIA,4096,0:;"),
        },
        Row {
            // The smaller is what has to be free.
            what: "memory and a smaller percentage on a busy device",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 11000, 0)),
            pod: pod().gpu(1).mem_mib(12000).mem_pct(25),
            want: ok("GPU-0,NVIDIA,4096,0:;"),
        },
        Row {
            // HAMi's default: no memory and no percentage at all means 100 percent.
            what: "whole memory on an idle device",
            node: idle(1),
            pod: pod().gpu(1),
            want: ok("GPU-0,NVIDIA,16384,0:;"),
        },
        Row {
            what: "whole memory on a device with any memory used",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1, 0)),
            pod: pod().gpu(1),
            want: no("1/1 CardInsufficientMemory"),
        },
        Row {
            what: "mutex before memory",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 16384, 0)),
            pod: small(1).annotation(keys::GPU_SCHEDULER_POLICY, "mutex"),
            want: no("1/1 ExclusiveDeviceAllocateConflict"),
        },
    ]);
}

#[test]
fn check_12_cores_must_be_free() {
    check(vec![
        Row {
            // Totalcore − Usedcores ≥ cores.
            what: "not enough free cores",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 0, 80)),
            pod: small(1).cores(30),
            want: no("1/1 CardInsufficientCore"),
        },
        Row {
            what: "exactly enough free cores",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 0, 80)),
            pod: small(1).cores(20),
            want: ok("GPU-0,NVIDIA,1000,20:;"),
        },
        Row {
            what: "memory before cores",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 16000, 80)),
            pod: small(1).cores(30),
            want: no("1/1 CardInsufficientMemory"),
        },
    ]);
}

#[test]
fn check_13_100_cores_means_exclusive() {
    check(vec![
        Row {
            // Totalcore = 100, cores = 100 and Used > 0 → conflict, even though every core is
            // free.
            what: "100 cores on a shared device",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 0)),
            pod: small(1).cores(100),
            want: no("1/1 ExclusiveDeviceAllocateConflict"),
        },
        Row {
            what: "100 cores on an idle device",
            node: idle(1),
            pod: small(1).cores(100),
            want: ok("GPU-0,NVIDIA,1000,100:;"),
        },
        Row {
            // Only devices whose core total is 100 are exclusive.
            what: "100 cores on a shared 200-core device",
            node: node("a").gpu(gpu("GPU-0", 16384).cores(200).used(1, 1000, 50)),
            pod: small(1).cores(100),
            want: ok("GPU-0,NVIDIA,1000,100:;"),
        },
        Row {
            // Check 12 comes first when cores are also short.
            what: "cores before exclusive",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 10)),
            pod: small(1).cores(100),
            want: no("1/1 CardInsufficientCore"),
        },
    ]);
}

#[test]
fn check_14_a_core_less_task_may_not_join_a_fully_booked_device() {
    check(vec![
        Row {
            // Usedcores = Totalcore and cores = 0 → CardComputeUnitsExhausted.
            what: "core-less on a full device",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 100)),
            pod: small(1),
            want: no("1/1 CardComputeUnitsExhausted"),
        },
        Row {
            what: "core-less with cores left",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 90)),
            pod: small(1),
            want: ok("GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            // Totalcore = 0 is never "fully booked".
            what: "core-less on a device without cores",
            node: node("a").gpu(gpu("GPU-0", 16384).cores(0)),
            pod: small(1),
            want: ok("GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            what: "a task with cores on a full device is short of cores",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 1000, 100)),
            pod: small(1).cores(1),
            want: no("1/1 CardInsufficientCore"),
        },
    ]);
}

#[test]
fn after_the_walk_too_few_devices_is_allocated_cards_insufficient() {
    check(vec![
        Row {
            // After the walk: the number found counts as AllocatedCardsInsufficientRequest.
            what: "two of three",
            node: node("a")
                .gpu(gpu("GPU-0", 16384))
                .gpu(gpu("GPU-1", 16384).used(1, 16000, 0))
                .gpu(gpu("GPU-2", 16384)),
            pod: small(3),
            want: no("1/3 CardInsufficientMemory, 2/3 AllocatedCardsInsufficientRequest"),
        },
        Row {
            what: "every reason on its own device",
            node: node("a")
                .gpu(gpu("GPU-0", 16384).unhealthy())
                .gpu(gpu("GPU-1", 16384))
                .gpu(gpu("GPU-2", 16384).used(1, 16000, 0))
                .gpu(gpu("GPU-3", 16384).used(1, 0, 90)),
            pod: small(1).cores(20).annotation(keys::NVIDIA_NOUSE_UUID, "GPU-1"),
            want: no("1/4 CardInsufficientCore, 1/4 CardInsufficientMemory, 1/4 CardNotHealth, 1/4 CardUuidMismatch"),
        },
    ]);
}

#[test]
fn fewer_devices_than_requested_is_node_insufficient_device() {
    check(vec![
        Row {
            // More GPUs asked than the node has → bare NodeInsufficientDevice, before any walk.
            what: "two GPUs asked of one",
            node: idle(1),
            pod: small(2),
            want: no("NodeInsufficientDevice"),
        },
        Row {
            // Unhealthy devices are still candidates for the count check.
            what: "count check counts unhealthy devices",
            node: node("a").gpu(gpu("GPU-0", 16384).unhealthy()).gpu(gpu("GPU-1", 16384).unhealthy()),
            pod: small(2),
            want: no("2/2 CardNotHealth"),
        },
        Row {
            // A non-MIG request on a MIG node is not exempt (vgpu-mode without `mig`).
            what: "hami-core request on a MIG GPU",
            node: node("a").gpu(gpu("GPU-0", 40960).mig(a100_profiles())),
            pod: pod().gpu(2).mem_mib(4000).annotation(keys::NVIDIA_VGPU_MODE, "hami-core"),
            want: no("NodeInsufficientDevice"),
        },
        Row {
            // A node without registered devices is `node unregistered`, as in HAMi.
            what: "no devices",
            node: node("a"),
            pod: small(1),
            want: no("node unregistered"),
        },
    ]);
}

#[test]
fn entries_carry_the_device_index() {
    // The pick records the device's index (not encoded in the annotation, kept for writers).
    let v = vendors();
    let n = node("a").gpu(gpu("GPU-0", 16384).used(1, 8000, 30)).gpu(gpu("GPU-1", 16384).index(7)).snapshot(&v);
    let fit = fit_pod_devices(&n, &small(1).request_with(&v), &v, &NoQuota, &mut Scratch::default()).unwrap();
    let d = &fit.devices.vendor(NV).unwrap()[0][0];
    assert_eq!((d.uuid.as_str(), d.idx, &*d.ty), ("GPU-1", 7, "NVIDIA"));
}

// ---------------------------------------------------------------------------------------------
// Check 10: namespace quota, with the pod's own usage so far.

/// Limits for one namespace, in scheduler units (MiB, cores), on the pod's collapsed usage.
struct Quota {
    namespace: &'static str,
    mem: Option<u64>,
    cores: Option<u32>,
}

impl QuotaCheck for Quota {
    fn fits(&self, namespace: &str, vendor: VendorId, mem: MemMiB, cores: u32) -> bool {
        assert_eq!(vendor, NV);
        namespace != self.namespace
            || (self.mem.is_none_or(|l| mem.get() <= l) && self.cores.is_none_or(|l| cores <= l))
    }
}

fn mem_quota(mib: u64) -> Quota {
    Quota { namespace: "default", mem: Some(mib), cores: None }
}

#[test]
fn check_10_namespace_quota() {
    let snap = |n: NodeBuilder| n.snapshot(&vendors());
    let rows: Vec<(&str, NodeBuilder, PodBuilder, Quota, Outcome)> = vec![
        ("within the memory quota", idle(1), pod().gpu(1).mem_mib(4096), mem_quota(4096), ok("GPU-0,NVIDIA,4096,0:;")),
        ("over the memory quota", idle(1), pod().gpu(1).mem_mib(5000), mem_quota(4096), no("1/1 ResourceQuotaNotFit")),
        (
            "another namespace's quota",
            idle(1),
            pod().gpu(1).mem_mib(5000),
            Quota { namespace: "other", mem: Some(0), cores: Some(0) },
            ok("GPU-0,NVIDIA,5000,0:;"),
        ),
        (
            "over the cores quota",
            idle(1),
            pod().gpu(1).mem_mib(1000).cores(60),
            Quota { namespace: "default", mem: None, cores: Some(50) },
            no("1/1 ResourceQuotaNotFit"),
        ),
        (
            // The clamped cores are what counts.
            "clamped cores within the cores quota",
            idle(1),
            pod().gpu(1).mem_mib(1000).cores(150),
            Quota { namespace: "default", mem: None, cores: Some(100) },
            ok("GPU-0,NVIDIA,1000,100:;"),
        ),
        (
            // Percentage requests are checked in Filter with the device's memory, as in HAMi.
            "percentage memory counts",
            idle(1),
            pod().gpu(1).mem_pct(50),
            mem_quota(5000),
            no("1/1 ResourceQuotaNotFit"),
        ),
        (
            // The walk's earlier picks count: the second 3000 MiB device would make 6000.
            "the second device of one request",
            idle(2),
            pod().gpu(2).mem_mib(3000),
            mem_quota(5000),
            no("1/2 AllocatedCardsInsufficientRequest, 1/2 ResourceQuotaNotFit"),
        ),
        (
            // Earlier containers of the pod count.
            "the second container",
            idle(2),
            pod().gpu(1).mem_mib(3000).container("c2").gpu(1).mem_mib(3000),
            mem_quota(5000),
            no("2/2 ResourceQuotaNotFit"),
        ),
        (
            // Check 10 comes before check 11.
            "quota before memory",
            node("a").gpu(gpu("GPU-0", 16384).used(1, 16000, 0)),
            pod().gpu(1).mem_mib(5000),
            mem_quota(4096),
            no("1/1 ResourceQuotaNotFit"),
        ),
        (
            // The quota sees the init containers' peak: they run one at a time, so two init
            // containers of 4000 MiB hold 4000, not 8000.
            "two init containers count as their peak",
            idle(1),
            pod().init("i1").gpu(1).mem_mib(4000).init("i2").gpu(1).mem_mib(4000).main(),
            mem_quota(5000),
            ok("GPU-0,NVIDIA,4000,0:;GPU-0,NVIDIA,4000,0:;;"),
        ),
        (
            // Per device, max(init peak, sum of regular containers).
            "an init container and an app container on the same device",
            idle(1),
            pod().init("i").gpu(1).mem_mib(4000).main().gpu(1).mem_mib(4000),
            mem_quota(5000),
            ok("GPU-0,NVIDIA,4000,0:;GPU-0,NVIDIA,4000,0:;"),
        ),
        (
            // Per device: binpack puts the init container on GPU-1 (GPU-0 lacks room) and tries the
            // app container on GPU-0 first, where the pod would hold 12000 + 4000; on GPU-1 it
            // holds max(12000, 4000), within the quota.
            "the collapse is per device",
            node("a").gpu(gpu("GPU-0", 16384).used(1, 5000, 0)).gpu(gpu("GPU-1", 16384)),
            pod()
                .annotation(keys::GPU_SCHEDULER_POLICY, "binpack")
                .init("i")
                .gpu(1)
                .mem_mib(12000)
                .main()
                .gpu(1)
                .mem_mib(4000),
            mem_quota(15999),
            ok("GPU-1,NVIDIA,12000,0:;GPU-1,NVIDIA,4000,0:;"),
        ),
        (
            // A sidecar runs beside the app containers: its usage adds to theirs (HAMi counts it as
            // an init container, at its peak).
            "a sidecar and an app container on the same device",
            idle(1),
            pod().sidecar("s").gpu(1).mem_mib(4000).main().gpu(1).mem_mib(4000),
            mem_quota(7999),
            no("1/1 ResourceQuotaNotFit"),
        ),
    ];
    for (what, n, p, q, want) in rows {
        assert_eq!(eval(&snap(n), &p, &q), want, "{what}");
    }
}

// ---------------------------------------------------------------------------------------------
// Check 15 and MIG placement: a MIG GPU serves a request with the smallest profile large
// enough that still has a free placement

fn a100() -> NodeBuilder {
    node("a").gpu(gpu("GPU-aa11", 40960).mig(a100_profiles()))
}

/// The A100 node with MIG instances already in use.
fn a100_using(used: &[(&str, u32, u32)]) -> NodeSnapshot {
    let mut s = a100().snapshot(&vendors());
    for (profile, start, size) in used {
        s.devices[0]
            .mig_used
            .push(MigSlot { profile: (*profile).into(), placement: MigPlacement { start: *start, size: *size } });
        s.devices[0].used += 1;
    }
    s
}

#[test]
fn mig_requests_take_the_smallest_fitting_profile() {
    check(vec![
        Row {
            // The entry takes the profile's memory and cores.
            what: "1g.5gb",
            node: a100(),
            pod: pod().gpu(1).mem_mib(4000),
            want: ok("GPU-aa11,NVIDIA,4864,15:;"),
        },
        Row { what: "2g.10gb", node: a100(), pod: pod().gpu(1).mem_mib(9000), want: ok("GPU-aa11,NVIDIA,9984,29:;") },
        Row { what: "3g.20gb", node: a100(), pod: pod().gpu(1).mem_mib(15000), want: ok("GPU-aa11,NVIDIA,19968,43:;") },
        Row {
            what: "7g.40gb",
            node: a100(),
            pod: pod().gpu(1).mem_mib(30000),
            want: ok("GPU-aa11,NVIDIA,40192,100:;"),
        },
        Row {
            // Passes check 11 (40960 MiB registered) but no profile is that large.
            what: "more than any profile",
            node: a100(),
            pod: pod().gpu(1).mem_mib(40500),
            want: no("1/1 CardMigTopologyInfeasible"),
        },
        Row {
            // A whole-memory MIG request asks for the full registered memory, more than any
            // profile.
            what: "whole memory never fits MIG",
            node: a100(),
            pod: pod().gpu(1),
            want: no("1/1 CardMigTopologyInfeasible"),
        },
        Row {
            // A MIG request is exempt from the count check, and check 18 revisits the GPU for the
            // second instance.
            what: "two instances on one GPU",
            node: a100(),
            pod: pod().gpu(2).mem_mib(4000),
            want: ok("GPU-aa11,NVIDIA,4864,15:GPU-aa11,NVIDIA,4864,15:;"),
        },
        Row {
            // Check 15 on a revisit: three 2g instances fill slices 0–5, and no profile of
            // 9000 MiB or more has a free placement for a fourth. The instances found count as
            // AllocatedCardsInsufficientRequest over the one candidate (HAMi's `n/m` formula).
            what: "four 2g instances do not fit",
            node: a100(),
            pod: pod().gpu(4).mem_mib(9000),
            want: no("1/1 CardMigTopologyInfeasible, 3/1 AllocatedCardsInsufficientRequest"),
        },
        Row {
            // As in HAMi, a revisited MIG GPU is checked as it was before the container, all but
            // its placements: the third 15000 MiB instance passes memory (40960 free) and finds
            // both 3g placements taken by the first two.
            what: "three 3g instances do not fit",
            node: a100(),
            pod: pod().gpu(3).mem_mib(15000),
            want: no("1/1 CardMigTopologyInfeasible, 2/1 AllocatedCardsInsufficientRequest"),
        },
        Row {
            // A `mig` vgpu-mode keeps the exemption.
            what: "vgpu-mode mig",
            node: a100(),
            pod: pod().gpu(2).mem_mib(4000).annotation(keys::NVIDIA_VGPU_MODE, "mig"),
            want: ok("GPU-aa11,NVIDIA,4864,15:GPU-aa11,NVIDIA,4864,15:;"),
        },
    ]);
}

#[test]
fn mig_placements_of_small_profiles_come_from_the_top() {
    // HAMi tries placements of 1g.* and 3g.* by start descending, others ascending, keeping
    // small instances at the top so large ones stay placeable.
    let v = vendors();
    let place = |snap: &NodeSnapshot, mem: u64, n: u32| -> Vec<(String, u32)> {
        let req = pod().gpu(n).mem_mib(mem).request_with(&v);
        let fit = fit_pod_devices(snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
        fit.devices.vendor(NV).unwrap()[0]
            .iter()
            .map(|d| d.mig.as_ref().map(|s| (s.profile.to_string(), s.placement.start)).unwrap())
            .collect()
    };
    let empty = a100_using(&[]);
    assert_eq!(place(&empty, 4000, 2), [("1g.5gb".to_owned(), 6), ("1g.5gb".to_owned(), 5)]);
    assert_eq!(place(&empty, 9000, 2), [("2g.10gb".to_owned(), 0), ("2g.10gb".to_owned(), 2)]);
    assert_eq!(place(&empty, 15000, 2), [("3g.20gb".to_owned(), 4), ("3g.20gb".to_owned(), 0)]);
    // Occupancy from other pods is respected.
    assert_eq!(place(&a100_using(&[("1g.5gb", 6, 1)]), 4000, 1), [("1g.5gb".to_owned(), 5)]);
    assert_eq!(place(&a100_using(&[("3g.20gb", 4, 4)]), 15000, 1), [("3g.20gb".to_owned(), 0)]);
    // A 2g at 0 leaves the 3g at 4 free.
    assert_eq!(place(&a100_using(&[("2g.10gb", 0, 2)]), 15000, 1), [("3g.20gb".to_owned(), 4)]);
}

#[test]
fn mig_placement_must_be_free() {
    type InUse = &'static [(&'static str, u32, u32)];
    let rows: [(&str, InUse, u64, Outcome); 4] = [
        // A MIG GPU with no free placement for any large enough profile is refused
        // CardMigTopologyInfeasible.
        ("a 7g instance fills the GPU", &[("7g.40gb", 0, 8)], 4000, no("1/1 CardMigTopologyInfeasible")),
        (
            "a 3g at 4 and a 2g at 0 leave 1g room",
            &[("3g.20gb", 4, 4), ("2g.10gb", 0, 2)],
            4000,
            ok("GPU-aa11,NVIDIA,4864,15:;"),
        ),
        ("but no 3g room", &[("3g.20gb", 4, 4), ("2g.10gb", 0, 2)], 15000, no("1/1 CardMigTopologyInfeasible")),
        // Every placement of 2g and larger overlaps an instance, though four slices are free.
        (
            "2g placements blocked",
            &[("1g.5gb", 1, 1), ("1g.5gb", 3, 1), ("3g.20gb", 4, 4)],
            9000,
            no("1/1 CardMigTopologyInfeasible"),
        ),
    ];
    for (what, used, mem, want) in rows {
        let s = a100_using(used);
        assert_eq!(eval(&s, &pod().gpu(1).mem_mib(mem), &NoQuota), want, "{what}");
    }
    // Used instances also use slots: a GPU whose every slot is taken is exhausted (check 6).
    let mut s = a100_using(&[]);
    s.devices[0].used = s.devices[0].info.count;
    assert_eq!(eval(&s, &pod().gpu(1).mem_mib(4000), &NoQuota), no("1/1 CardTimeSlicingExhausted"));
}

#[test]
fn mig_and_plain_gpus_on_one_node() {
    // A plain GPU beside a MIG GPU: the request goes to whichever the policy tries first; with
    // vgpu-mode hami-core only the plain GPU qualifies.
    let n = node("a").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-aa11", 40960).mig(a100_profiles()));
    assert_eq!(
        try_fit(&n, &pod().gpu(1).mem_mib(4000).annotation(keys::NVIDIA_VGPU_MODE, "hami-core")),
        ok("GPU-0,NVIDIA,4000,0:;")
    );
    assert_eq!(
        try_fit(&n, &pod().gpu(1).mem_mib(4000).annotation(keys::NVIDIA_VGPU_MODE, "mig")),
        ok("GPU-aa11,NVIDIA,4864,15:;")
    );
}

// ---------------------------------------------------------------------------------------------
// Device order per GPU policy (the walk tries the end of the sorted list first)

#[test]
fn device_order_follows_the_gpu_policy() {
    let policy = keys::GPU_SCHEDULER_POLICY;
    let three = || {
        node("a")
            .gpu(gpu("GPU-0", 16384).used(1, 4000, 10))
            .gpu(gpu("GPU-1", 16384).used(1, 8000, 30))
            .gpu(gpu("GPU-2", 16384))
    };
    check(vec![
        Row {
            // binpack: highest score (fullest) first.
            what: "binpack",
            node: three(),
            pod: small(1).annotation(policy, "binpack"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // spread (also the default): lowest score (emptiest) first.
            what: "spread",
            node: three(),
            pod: small(1).annotation(policy, "spread"),
            want: ok("GPU-2,NVIDIA,1000,0:;"),
        },
        Row { what: "default is spread", node: three(), pod: small(1), want: ok("GPU-2,NVIDIA,1000,0:;") },
        Row {
            what: "unknown sorts like spread",
            node: three(),
            pod: small(1).annotation(policy, "bogus"),
            want: ok("GPU-2,NVIDIA,1000,0:;"),
        },
        Row {
            // Several devices come in the order tried.
            what: "binpack, three devices",
            node: three(),
            pod: small(3).annotation(policy, "binpack"),
            want: ok("GPU-1,NVIDIA,1000,0:GPU-0,NVIDIA,1000,0:GPU-2,NVIDIA,1000,0:;"),
        },
        Row {
            what: "spread, three devices",
            node: three(),
            pod: small(3),
            want: ok("GPU-2,NVIDIA,1000,0:GPU-0,NVIDIA,1000,0:GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // binpack moves on when the fullest device cannot take the request.
            what: "binpack skips a device that does not fit",
            node: three(),
            pod: pod().gpu(1).mem_mib(10000).annotation(policy, "binpack"),
            want: ok("GPU-0,NVIDIA,10000,0:;"),
        },
    ]);
}

#[test]
fn equal_devices_are_tried_last_registered_first_under_single_value_policies() {
    // Single-value policies have no index key and Go's insertion sort keeps equal devices in
    // registration order; the walk starts from the end, so the device registered last is tried
    // first (HAMi's own tests: two idle GPUs, the pod gets the second).
    let policy = keys::GPU_SCHEDULER_POLICY;
    let twins = || {
        node("a")
            .gpu(gpu("GPU-0", 16384).used(1, 4000, 10))
            .gpu(gpu("GPU-1", 16384).used(1, 4000, 10))
            .gpu(gpu("GPU-2", 16384))
    };
    check(vec![
        Row {
            what: "spread over idle devices",
            node: idle(3),
            pod: small(2),
            want: ok("GPU-2,NVIDIA,1000,0:GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "binpack over idle devices",
            node: idle(3),
            pod: small(2).annotation(policy, "binpack"),
            want: ok("GPU-2,NVIDIA,1000,0:GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // The idle GPU-2 sorts first; of the equally full pair, GPU-1 is registered last.
            what: "binpack over equally full devices",
            node: twins(),
            pod: small(1).annotation(policy, "binpack"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "mutex over idle devices",
            node: idle(3),
            pod: small(2).annotation(policy, "mutex"),
            want: ok("GPU-2,NVIDIA,1000,0:GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // The position in the registration order decides, not the registered index: GPU-1
            // has the lower index but was registered last.
            what: "position, not index",
            node: node("a").gpu(gpu("GPU-0", 16384).index(5)).gpu(gpu("GPU-1", 16384).index(2)),
            pod: small(1),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
    ]);
}

#[test]
fn mutex_and_numa_flag_orders() {
    let policy = keys::GPU_SCHEDULER_POLICY;
    let numa = keys::NVIDIA_NUMA_BIND;
    check(vec![
        Row {
            // mutex sorts by Used descending, then NUMA ascending: idle devices, highest NUMA
            // first.
            what: "mutex",
            node: node("a")
                .gpu(gpu("GPU-0", 16384))
                .gpu(gpu("GPU-1", 16384).numa(1))
                .gpu(gpu("GPU-2", 16384).used(1, 0, 0)),
            pod: small(1).annotation(policy, "mutex"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // The NUMA flag with binpack sorts by NUMA descending, then score ascending → the
            // lowest NUMA group first, its fullest device first.
            what: "numa flag, binpack",
            node: node("a")
                .gpu(gpu("GPU-0", 16384).numa(1).used(1, 12000, 50))
                .gpu(gpu("GPU-1", 16384).used(1, 4000, 10))
                .gpu(gpu("GPU-2", 16384)),
            pod: small(1).annotation(policy, "binpack").annotation(numa, "true"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // The NUMA flag with another policy sorts by NUMA ascending, then score descending →
            // the highest NUMA group first, its emptiest device first.
            what: "numa flag, spread",
            node: node("a")
                .gpu(gpu("GPU-0", 16384))
                .gpu(gpu("GPU-1", 16384).numa(1).used(1, 4000, 10))
                .gpu(gpu("GPU-2", 16384).numa(1)),
            pod: small(1).annotation(numa, "true"),
            want: ok("GPU-2,NVIDIA,1000,0:;"),
        },
    ]);
}

#[test]
fn comma_lists_chain_their_keys() {
    let policy = keys::GPU_SCHEDULER_POLICY;
    check(vec![
        Row {
            // The chain `binpack,numa` sorts by score ascending, then NUMA ascending; the walk
            // takes the end, so among equally full devices the higher NUMA node goes first.
            what: "binpack,numa",
            node: node("a")
                .gpu(gpu("GPU-0", 16384).used(1, 4000, 10))
                .gpu(gpu("GPU-1", 16384).numa(1).used(1, 4000, 10))
                .gpu(gpu("GPU-2", 16384)),
            pod: small(1).annotation(policy, "binpack,numa"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            what: "spread,numa",
            node: node("a")
                .gpu(gpu("GPU-0", 16384).used(1, 4000, 10))
                .gpu(gpu("GPU-1", 16384).numa(1))
                .gpu(gpu("GPU-2", 16384)),
            pod: small(1).annotation(policy, "spread,numa"),
            want: ok("GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // In a chain, all keys equal → device index ascending, so the highest index is tried
            // first (with indexes in registration order, the same device as the single-value
            // tie-break).
            what: "chain tie ends with the index",
            node: idle(3),
            pod: small(2).annotation(policy, "binpack,numa"),
            want: ok("GPU-2,NVIDIA,1000,0:GPU-1,NVIDIA,1000,0:;"),
        },
        Row {
            // A chain reads the registered index, not the position: GPU-0 has the higher index.
            what: "chain tie by index, not position",
            node: node("a").gpu(gpu("GPU-0", 16384).index(5)).gpu(gpu("GPU-1", 16384).index(2)),
            pod: small(1).annotation(policy, "spread,numa"),
            want: ok("GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            // The bare value `numa` is a one-key chain.
            what: "numa alone",
            node: node("a").gpu(gpu("GPU-0", 16384).numa(1)).gpu(gpu("GPU-1", 16384)),
            pod: small(1).annotation(policy, "numa"),
            want: ok("GPU-0,NVIDIA,1000,0:;"),
        },
    ]);
}

// ---------------------------------------------------------------------------------------------
// Topology-aware choice by the node's pair scores (hami.io/node-nvidia-score)

/// GPU-a and GPU-b are NVLinked (400), GPU-c is on PCIe (20).
const SCORES_ABC: &str = r#"[{"uuid":"GPU-a","score":{"GPU-b":400,"GPU-c":20}},{"uuid":"GPU-b","score":{"GPU-a":400,"GPU-c":20}},{"uuid":"GPU-c","score":{"GPU-a":20,"GPU-b":20}}]"#;

fn gpus_named(names: &[&str]) -> NodeBuilder {
    names.iter().fold(node("a"), |b, n| b.gpu(gpu(n, 16384)))
}

fn topo(n: u32) -> PodBuilder {
    small(n).annotation(keys::GPU_SCHEDULER_POLICY, "topology-aware")
}

#[test]
fn topology_aware_single_gpu_leaves_well_connected_gpus_alone() {
    check(vec![
        Row {
            // One GPU: HAMi takes the lowest sum of pair scores towards the other collected devices
            // (a: 420, b: 420, c: 40).
            what: "the PCIe GPU",
            node: gpus_named(&["GPU-a", "GPU-b", "GPU-c"]).annotation(keys::NVIDIA_SCORE, SCORES_ABC),
            pod: topo(1),
            want: ok("GPU-c,NVIDIA,1000,0:;"),
        },
        Row {
            // Missing scores count 0; the first minimum in collection order wins, and the walk
            // collects from the end (GPU-c first).
            what: "no scores",
            node: gpus_named(&["GPU-a", "GPU-b", "GPU-c"]),
            pod: topo(1),
            want: ok("GPU-c,NVIDIA,1000,0:;"),
        },
        Row {
            // Only devices passing checks 1–15 are collected: with GPU-c full, a and b tie (400
            // each) and GPU-b, collected first, wins.
            what: "only fitting devices count",
            node: node("a")
                .gpu(gpu("GPU-a", 16384))
                .gpu(gpu("GPU-b", 16384))
                .gpu(gpu("GPU-c", 16384).used(1, 16000, 0))
                .annotation(keys::NVIDIA_SCORE, SCORES_ABC),
            pod: topo(1),
            want: ok("GPU-b,NVIDIA,1000,0:;"),
        },
        Row {
            // `topology-aware` inside a list turns the choice on as well.
            what: "binpack,topology-aware",
            node: gpus_named(&["GPU-a", "GPU-b", "GPU-c"]).annotation(keys::NVIDIA_SCORE, SCORES_ABC),
            pod: small(1).annotation(keys::GPU_SCHEDULER_POLICY, "binpack,topology-aware"),
            want: ok("GPU-c,NVIDIA,1000,0:;"),
        },
    ]);
}

#[test]
fn topology_aware_weighs_each_mig_gpu_once_when_enough_gpus_fit() {
    // A MIG GPU is collected once per free instance; HAMi keeps its first entry only when that
    // leaves as many distinct GPUs as asked, so the request spreads over GPUs instead of landing
    // on one GPU's instances at pair score 0.
    let two = || node("a").gpu(gpu("GPU-0", 40960).mig(a100_profiles())).gpu(gpu("GPU-1", 40960).mig(a100_profiles()));
    let fit = try_fit(&two(), &topo(2)).expect("two MIG GPUs fit two instances");
    let uuids: Vec<&str> = fit.trim_end_matches(":;").split(':').map(|e| e.split(',').next().unwrap_or("")).collect();
    assert_eq!(uuids.len(), 2, "{fit}");
    assert_ne!(uuids[0], uuids[1], "{fit}");
    // One MIG GPU alone still takes two of its instances.
    let one = node("a").gpu(gpu("GPU-0", 40960).mig(a100_profiles()));
    let fit = try_fit(&one, &topo(2)).expect("one MIG GPU fits two instances");
    assert_eq!(fit.matches("GPU-0,").count(), 2, "{fit}");
}

#[test]
fn topology_aware_multi_gpu_takes_the_best_connected_subset() {
    // GPU-a and GPU-b are linked, GPU-c and GPU-d more weakly; spread alone would take d and c.
    let ab = r#"[{"uuid":"GPU-a","score":{"GPU-b":400}},{"uuid":"GPU-b","score":{"GPU-a":400}},{"uuid":"GPU-c","score":{"GPU-d":10}},{"uuid":"GPU-d","score":{"GPU-c":10}}]"#;
    // Only the first device's score towards the second counts, the first being the one collected
    // first (the walk collects c, b, a): a→b is 500 but the pair reads b→a, which is 0.
    let one_way = r#"[{"uuid":"GPU-a","score":{"GPU-b":500}},{"uuid":"GPU-c","score":{"GPU-a":100}}]"#;
    check(vec![
        Row {
            // n > 1 GPUs: HAMi takes the first maximum over n-subsets in collection order
            // (d, c, b, a).
            what: "the linked pair",
            node: gpus_named(&["GPU-a", "GPU-b", "GPU-c", "GPU-d"]).annotation(keys::NVIDIA_SCORE, ab),
            pod: topo(2),
            want: ok("GPU-b,NVIDIA,1000,0:GPU-a,NVIDIA,1000,0:;"),
        },
        Row {
            what: "the NVLink pair",
            node: gpus_named(&["GPU-a", "GPU-b", "GPU-c"]).annotation(keys::NVIDIA_SCORE, SCORES_ABC),
            pod: topo(2),
            want: ok("GPU-b,NVIDIA,1000,0:GPU-a,NVIDIA,1000,0:;"),
        },
        Row {
            what: "scores are read one way",
            node: gpus_named(&["GPU-a", "GPU-b", "GPU-c"]).annotation(keys::NVIDIA_SCORE, one_way),
            pod: topo(2),
            want: ok("GPU-c,NVIDIA,1000,0:GPU-a,NVIDIA,1000,0:;"),
        },
        Row {
            // A cordoned device is not collected, so the best remaining pair wins.
            what: "the linked pair is cordoned",
            node: gpus_named(&["GPU-a", "GPU-b", "GPU-c", "GPU-d"])
                .annotation(keys::NVIDIA_SCORE, ab)
                .annotation(keys::NVIDIA_CORDON, "GPU-a"),
            pod: topo(2),
            want: ok("GPU-d,NVIDIA,1000,0:GPU-c,NVIDIA,1000,0:;"),
        },
        Row {
            // |C| = n: every collected device, in collection order.
            what: "exactly n fit",
            node: gpus_named(&["GPU-a", "GPU-b", "GPU-c"]).annotation(keys::NVIDIA_SCORE, SCORES_ABC),
            pod: topo(3),
            want: ok("GPU-c,NVIDIA,1000,0:GPU-b,NVIDIA,1000,0:GPU-a,NVIDIA,1000,0:;"),
        },
        Row {
            // |C| < n: failure, the collected devices counted as AllocatedCardsInsufficientRequest.
            what: "too few fit",
            node: node("a")
                .gpu(gpu("GPU-a", 16384))
                .gpu(gpu("GPU-b", 16384).used(1, 16000, 0))
                .gpu(gpu("GPU-c", 16384).used(1, 16000, 0)),
            pod: topo(2),
            want: no("1/3 AllocatedCardsInsufficientRequest, 2/3 CardInsufficientMemory"),
        },
    ]);
}

// ---------------------------------------------------------------------------------------------
// Per-node evaluation of a pod's containers

#[test]
fn regular_containers_allocate_cumulatively() {
    check(vec![
        Row {
            // Regular containers fit against one cumulative copy of the usage.
            what: "two containers share a GPU",
            node: idle(1),
            pod: pod().gpu(1).mem_mib(8000).container("c2").gpu(1).mem_mib(8000),
            want: ok("GPU-0,NVIDIA,8000,0:;GPU-0,NVIDIA,8000,0:;"),
        },
        Row {
            // The second container sees the first's usage and, under spread, moves on: the first
            // takes GPU-1 (registered last), the second the now emptier GPU-0.
            what: "spread moves the second container to the emptier GPU",
            node: idle(2),
            pod: pod().gpu(1).mem_mib(8000).container("c2").gpu(1).mem_mib(8000),
            want: ok("GPU-1,NVIDIA,8000,0:;GPU-0,NVIDIA,8000,0:;"),
        },
        Row {
            // A container that cannot fit fails the node with its reason.
            what: "the second container does not fit",
            node: idle(1),
            pod: pod().gpu(1).mem_mib(8000).container("c2").gpu(1).mem_mib(9000),
            want: no("1/1 CardInsufficientMemory"),
        },
        Row {
            what: "the second container finds no free slot",
            node: node("a").gpu(gpu("GPU-0", 16384).count(1)),
            pod: pod().gpu(1).mem_mib(1000).container("c2").gpu(1).mem_mib(1000),
            want: no("1/1 CardTimeSlicingExhausted"),
        },
        Row {
            // The first container's 100 cores make the device exclusive for the second.
            what: "exclusive cores block the second container",
            node: idle(1),
            pod: pod().gpu(1).mem_mib(1000).cores(100).container("c2").gpu(1).mem_mib(1000),
            want: no("1/1 CardComputeUnitsExhausted"),
        },
        Row {
            // One entry per container, empty where the container has no GPU (HAMi can drop such
            // entries).
            what: "a container without GPU in the middle",
            node: idle(1),
            pod: pod().gpu(1).mem_mib(1000).container("plain").container("c3").gpu(1).mem_mib(1000),
            want: ok("GPU-0,NVIDIA,1000,0:;;GPU-0,NVIDIA,1000,0:;"),
        },
        Row {
            what: "a container without GPU first",
            node: idle(1),
            pod: pod().container("c2").gpu(1).mem_mib(1000),
            want: ok(";GPU-0,NVIDIA,1000,0:;"),
        },
    ]);
}

#[test]
fn init_containers_fit_against_a_fresh_copy_and_are_padded() {
    check(vec![
        Row {
            // An init container runs before the app containers, so both may use most of the GPU.
            what: "init and app each take 12000 of 16384",
            node: idle(1),
            pod: pod().init("i").gpu(1).mem_mib(12000).main().gpu(1).mem_mib(12000),
            want: ok("GPU-0,NVIDIA,12000,0:;GPU-0,NVIDIA,12000,0:;"),
        },
        Row {
            // Init containers run one at a time and never see each other.
            what: "two init containers",
            node: idle(1),
            pod: pod().init("i1").gpu(1).mem_mib(12000).init("i2").gpu(1).mem_mib(12000).main(),
            want: ok("GPU-0,NVIDIA,12000,0:;GPU-0,NVIDIA,12000,0:;;"),
        },
        Row {
            // They do see the node's existing usage.
            what: "an init container on a busy GPU",
            node: node("a").gpu(gpu("GPU-0", 16384).used(1, 8000, 0)),
            pod: pod().init("i").gpu(1).mem_mib(12000).main().gpu(1).mem_mib(1000),
            want: no("1/1 CardInsufficientMemory"),
        },
        Row {
            // A device-less init container keeps its (empty) entry, so the app container's devices
            // stay in position 1 (HAMi pads by device model and drops the entry for NVIDIA).
            what: "device-less init container",
            node: idle(1),
            pod: pod().init("i").main().gpu(1).mem_mib(3000),
            want: ok(";GPU-0,NVIDIA,3000,0:;"),
        },
        Row {
            what: "init with GPU, app container without",
            node: idle(1),
            pod: pod().init("i").gpu(1).mem_mib(3000).main(),
            want: ok("GPU-0,NVIDIA,3000,0:;;"),
        },
        Row {
            // Init (1 GPU), app without GPU, app with 2 GPUs. The init container's GPU-1 is not
            // charged to the app containers, which see two idle GPUs in registration order again
            // and also start from GPU-1.
            what: "init, plain app, two-GPU app",
            node: idle(2),
            pod: pod().init("i").gpu(1).mem_mib(2000).cores(30).main().container("c2").gpu(2).mem_mib(4000).cores(50),
            want: ok("GPU-1,NVIDIA,2000,30:;;GPU-1,NVIDIA,4000,50:GPU-0,NVIDIA,4000,50:;"),
        },
    ]);
}

#[test]
fn native_sidecars_add_to_the_app_containers() {
    check(vec![
        Row {
            // A sidecar runs beside the app containers, so its usage is summed with theirs.
            what: "sidecar and app over the GPU",
            node: idle(1),
            pod: pod().sidecar("s").gpu(1).mem_mib(12000).main().gpu(1).mem_mib(12000),
            want: no("1/1 CardInsufficientMemory"),
        },
        Row {
            what: "sidecar and app within the GPU",
            node: idle(1),
            pod: pod().sidecar("s").gpu(1).mem_mib(8000).main().gpu(1).mem_mib(8000),
            want: ok("GPU-0,NVIDIA,8000,0:;GPU-0,NVIDIA,8000,0:;"),
        },
        Row {
            // A plain init container started after a sidecar runs beside it.
            what: "init container after a sidecar",
            node: idle(1),
            pod: pod().sidecar("s").gpu(1).mem_mib(8000).init("i").gpu(1).mem_mib(10000).main().gpu(1).mem_mib(1000),
            want: no("1/1 CardInsufficientMemory"),
        },
        Row {
            // …but not beside a sidecar started after it.
            what: "init container before a sidecar",
            node: idle(1),
            pod: pod().init("i").gpu(1).mem_mib(10000).sidecar("s").gpu(1).mem_mib(8000).main().gpu(1).mem_mib(1000),
            want: ok("GPU-0,NVIDIA,10000,0:;GPU-0,NVIDIA,8000,0:;GPU-0,NVIDIA,1000,0:;"),
        },
    ]);
}

#[test]
fn init_containers_and_sidecars_are_fitted_in_declaration_order() {
    // HAMi's scoring walk: a sidecar stays on the node for every later container, a plain init
    // container is fitted on a copy holding the sidecars declared so far; one card of 10 slots
    // and 100 cores, 10 cores per request.
    let card = |mem: u64| node("a").gpu(gpu("GPU-0", mem));
    let c = |p: PodBuilder| p.cores(10);
    check(vec![
        Row {
            what: "init 5000 then sidecar 8000 on 10000, app without a GPU",
            node: card(10000),
            pod: c(c(pod().init("i").gpu(1).mem_mib(5000)).sidecar("s").gpu(1).mem_mib(8000)).main(),
            want: ok("GPU-0,NVIDIA,5000,10:;GPU-0,NVIDIA,8000,10:;;"),
        },
        Row {
            what: "sidecar 8000 then init 5000 on 10000",
            node: card(10000),
            pod: c(c(pod().sidecar("s").gpu(1).mem_mib(8000)).init("i").gpu(1).mem_mib(5000)).main(),
            want: no("1/1 CardInsufficientMemory"),
        },
        Row {
            what: "init 5000, sidecar 3000, init 4000, app 1000 on 7500",
            node: card(7500),
            pod: c(c(c(c(pod().init("i1").gpu(1).mem_mib(5000)).sidecar("s").gpu(1).mem_mib(3000))
                .init("i2")
                .gpu(1)
                .mem_mib(4000))
            .main()
            .gpu(1)
            .mem_mib(1000)),
            want: ok("GPU-0,NVIDIA,5000,10:;GPU-0,NVIDIA,3000,10:;GPU-0,NVIDIA,4000,10:;GPU-0,NVIDIA,1000,10:;"),
        },
        Row {
            what: "sidecar 4000 and app 4000 on 7500",
            node: card(7500),
            pod: c(c(pod().sidecar("s").gpu(1).mem_mib(4000)).main().gpu(1).mem_mib(4000)),
            want: no("1/1 CardInsufficientMemory"),
        },
    ]);
}

#[test]
fn a_pod_without_device_requests_gets_an_empty_result() {
    let v = vendors();
    let n = idle(1).snapshot(&v);
    let mut s = Scratch::default();
    let fit = fit_pod_devices(&n, &pod().request_with(&v), &v, &NoQuota, &mut s).unwrap();
    assert!(fit.devices.is_empty());
}

#[test]
fn scratch_is_reused_without_leaking_the_previous_result() {
    let v = vendors();
    let n = idle(2).snapshot(&v);
    let mut s = Scratch::default();
    let two = pod().gpu(1).mem_mib(1000).container("c2").gpu(1).mem_mib(1000).request_with(&v);
    fit_pod(&n, &two, &v, &NoQuota, &mut s).unwrap();
    fit_pod(&n, &small(1).request_with(&v), &v, &NoQuota, &mut s).unwrap();
    assert_eq!(encode_pod_devices(s.result.vendor(NV).unwrap()), "GPU-1,NVIDIA,1000,0:;");
    // A failed evaluation does not disturb the next one.
    assert!(fit_pod(&n, &small(3).request_with(&v), &v, &NoQuota, &mut s).is_err());
    fit_pod(&n, &small(2).request_with(&v), &v, &NoQuota, &mut s).unwrap();
    assert_eq!(encode_pod_devices(s.result.vendor(NV).unwrap()), "GPU-1,NVIDIA,1000,0:GPU-0,NVIDIA,1000,0:;");
}

#[test]
fn smoke_one_gpu_fits_on_the_emptier_device_under_spread() {
    let v = vendors();
    let n = node("a").gpu(gpu("GPU-0", 16384).used(1, 8000, 30)).gpu(gpu("GPU-1", 16384)).snapshot(&v);
    let p = pod().gpu(1).mem_mib(4096).cores(20).request_with(&v);
    let mut s = Scratch::default();
    let fit = fit_pod_devices(&n, &p, &v, &NoQuota, &mut s).unwrap();
    let (_, cs) = &fit.devices.0[0];
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0][0].uuid.as_str(), "GPU-1");
    assert_eq!(encode_pod_devices(cs), "GPU-1,NVIDIA,4096,20:;");
}

// ---------------------------------------------------------------------------------------------
// Property: any placement stays within every device's slots, memory and cores.

fn any_gpu() -> impl Strategy<Value = Gpu> {
    (1u32..5, prop::sample::select(vec![4096u64, 16384, 32768]), 0u32..5, 0u64..=100, 0u32..=100).prop_map(
        |(count, mem, used, mem_pct, cores)| {
            let used = used.min(count);
            gpu("GPU", mem).count(count).used(used, mem * mem_pct / 100, cores)
        },
    )
}

fn any_container() -> impl Strategy<Value = (u32, u64, u32)> {
    (1u32..3, 0u64..20000, prop::sample::select(vec![0u32, 10, 30, 50, 100, 150]))
}

proptest! {
    #[test]
    fn placements_stay_within_capacity(
        gpus in prop::collection::vec(any_gpu(), 1..5),
        containers in prop::collection::vec(any_container(), 1..4),
        policy in prop::sample::select(vec!["spread", "binpack", "mutex", "topology-aware", "binpack,numa"]),
    ) {
        let v = vendors();
        let mut n = node("a");
        for (i, g) in gpus.into_iter().enumerate() {
            let mut g = g;
            g.info.id = format!("GPU-{i}").as_str().into();
            n = n.gpu(g);
        }
        let snap = n.snapshot(&v);
        let mut p = pod().annotation(keys::GPU_SCHEDULER_POLICY, policy);
        for (i, (nums, mem, cores)) in containers.iter().enumerate() {
            if i > 0 {
                p = p.container(&format!("c{i}"));
            }
            p = p.gpu(*nums).cores(*cores);
            if *mem > 0 {
                p = p.mem_mib(*mem);
            }
        }
        let req = p.request_with(&v);
        if let Ok(fit) = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()) {
            let mut after = snap.devices.clone();
            for (_, _, e) in fit.devices.entries() {
                let d = after.iter_mut().find(|d| d.info.id == e.uuid).unwrap();
                d.used += 1;
                d.used_mem += e.usedmem;
                d.used_cores += e.usedcores;
            }
            for (before, d) in snap.devices.iter().zip(&after) {
                // Starting usage may already break the invariant; a placement must not add to it.
                if before.within_capacity() {
                    prop_assert!(d.within_capacity(), "{d:?}");
                }
            }
        }
    }
}

#[test]
fn device_score_leaves_the_request_out_on_model_named_gpus() {
    // GPU-0 can be shared by one task, GPU-1 by ten; both idle and model-named. HAMi's device
    // score leaves the request out (its type `NVIDIA` is not the model string), so both score 0
    // and the walk tries GPU-1 (registered last) first: the first container takes GPU-1 and the
    // second, asking for two GPUs, gets GPU-1 again and GPU-0. Counting the request would score
    // GPU-0 at 10 × 1/1 for the first container, which binpack takes, and the second container
    // would no longer fit.
    let n = node("a").gpu(gpu("GPU-0", 16384).count(1)).gpu(gpu("GPU-1", 16384));
    let p = small(1).container("second").gpu(2).mem_mib(1000).annotation(keys::GPU_SCHEDULER_POLICY, "binpack");
    assert_eq!(try_fit(&n, &p), ok("GPU-1,NVIDIA,1000,0:;GPU-1,NVIDIA,1000,0:GPU-0,NVIDIA,1000,0:;"));
    // Devices registered with the bare vendor word do count the request, as in HAMi: then
    // binpack fills GPU-0 first and the pod no longer fits this node.
    let word = node("a").gpu(gpu("GPU-0", 16384).count(1).ty("NVIDIA")).gpu(gpu("GPU-1", 16384).ty("NVIDIA"));
    assert_eq!(try_fit(&word, &p), no("1/2 AllocatedCardsInsufficientRequest, 1/2 CardTimeSlicingExhausted"));
}
