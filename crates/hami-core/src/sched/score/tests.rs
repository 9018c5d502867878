use std::sync::Arc;

use super::*;
use crate::model::annotations as keys;
use crate::model::{DeviceInfo, MemMiB, VendorId};
use crate::testing::{gpu, node, pod, vendors};

const NVIDIA: VendorId = VendorId(0);
const OTHER: VendorId = VendorId(1);

fn assert_close(got: f32, want: f32, why: &str) {
    assert!((got - want).abs() < 1e-4, "{why}: got {got}, want {want}");
}

/// A device of `vendor` with the given capacity and starting usage.
fn dev_of(vendor: VendorId, ty: &str, count: u32, mem: u64, cores: u32, used: (u32, u64, u32)) -> DeviceUsage {
    let mut d = DeviceUsage::idle(Arc::new(DeviceInfo::new("GPU-x", 0, count, mem, cores, ty)), vendor);
    d.used = used.0;
    d.used_mem = MemMiB(used.1);
    d.used_cores = used.2;
    d
}

/// An NVIDIA device whose type is the bare vendor word, so a request of the vendor counts.
fn dev(count: u32, mem: u64, cores: u32, used: (u32, u64, u32)) -> DeviceUsage {
    dev_of(NVIDIA, "NVIDIA", count, mem, cores, used)
}

/// An NVIDIA device carrying a model name, as every NVIDIA device plugin registers it.
fn model_dev(count: u32, mem: u64, cores: u32, used: (u32, u64, u32)) -> DeviceUsage {
    dev_of(NVIDIA, "NVIDIA-Tesla T4", count, mem, cores, used)
}

/// The request type word of each test vendor.
fn word(v: VendorId) -> &'static str {
    if v == NVIDIA { "NVIDIA" } else { "OTHER" }
}

fn score(d: &DeviceUsage, reqs: &[ContainerRequest], w: &Weights) -> f32 {
    device_score(d, reqs, w, word)
}

fn req(nums: u32, memreq: u64, mempct: u32, cores: u32) -> ContainerRequest {
    ContainerRequest::new(NVIDIA, nums, memreq, mempct, cores)
}

const W111: Weights = Weights { slot: 1.0, core: 1.0, memory: 1.0 };

/// The two GPUs of HAMi's documented scoring example: A has one task of 8192 MiB and 30 cores, B is
/// idle; both carry a model name, as NVIDIA's device plugin registers them.
fn worked_example() -> Vec<DeviceUsage> {
    worked_example_typed("NVIDIA-Tesla V100-PCIE-32GB")
}

fn worked_example_typed(ty: &str) -> Vec<DeviceUsage> {
    let v = vendors();
    node("a").gpu(gpu("GPU-A", 32768).ty(ty).used(1, 8192, 30)).gpu(gpu("GPU-B", 32768).ty(ty)).snapshot(&v).devices
}

/// That example's request: 4096 MiB and 20 cores of one GPU, parsed as the webhook-mutated pod
/// says.
fn worked_request() -> ContainerRequest {
    pod().gpu(1).mem_mib(4096).cores(20).request_with(&vendors()).containers[0][0]
}

#[test]
fn worked_example_default_score_is_three_and_a_quarter() {
    // HAMi's node default score sums every device's use before the pod:
    // 10 × (1/20 + 30/200 + 8192/65536) = 3.25.
    assert_close(node_default_score(&worked_example()), 3.25, "default score");
}

#[test]
fn worked_example_device_scores_leave_the_request_out_on_model_named_gpus() {
    // HAMi today: the request's type `NVIDIA` is not the model string, so the score is the GPU's
    // use alone: A = 10 × (1/10 + 30/100 + 8192/32768), B = 0.
    let devs = worked_example();
    let r = [worked_request()];
    let v = vendors();
    let by_vendors = |d: &DeviceUsage| device_score(d, &r, &W111, |id| v.get(id).name());
    assert_close(by_vendors(&devs[0]), 6.5, "A");
    assert_close(by_vendors(&devs[1]), 0.0, "B");
}

#[test]
fn worked_example_device_scores_count_the_request_when_the_type_is_the_vendor_word() {
    // With the request counted, as for devices registered with the bare word:
    // A = 10 × (2/10 + 50/100 + 12288/32768), B = 10 × (1/10 + 20/100 + 4096/32768).
    let devs = worked_example_typed("NVIDIA");
    let r = [worked_request()];
    assert_close(score(&devs[0], &r, &W111), 10.75, "A");
    assert_close(score(&devs[1], &r, &W111), 4.25, "B");
}

#[test]
fn worked_example_spread_tries_the_idle_gpu_and_binpack_the_busy_one() {
    // Either way spread tries B first and binpack tries A first.
    let devs = worked_example();
    let r = [worked_request()];
    let scores: Vec<f32> = devs.iter().map(|d| score(d, &r, &W111)).collect();
    let mut out = Vec::new();
    order_devices(&devs, &scores, &GpuPolicy::parse("spread", false), &mut out);
    assert_eq!(out.last(), Some(&1), "spread tries B (position 1) first");
    order_devices(&devs, &scores, &GpuPolicy::parse("binpack", false), &mut out);
    assert_eq!(out.last(), Some(&0), "binpack tries A (position 0) first");
}

struct ScoreRow {
    why: &'static str,
    dev: DeviceUsage,
    reqs: Vec<ContainerRequest>,
    weights: Weights,
    want: f32,
}

#[test]
fn device_score_follows_hamis_formula() {
    let busy = (1, 8192, 30);
    let rows = [
        ScoreRow {
            // HAMi compares the request's type `NVIDIA` with the model string `NVIDIA-Tesla T4`, so
            // the request is not counted: GPU A of the example scores its use alone,
            // 10 × (1/10 + 30/100 + 1/4).
            why: "model-named device leaves the request out",
            dev: model_dev(10, 32768, 100, busy),
            reqs: vec![req(1, 4096, MEMPCT_UNSET, 20)],
            weights: W111,
            want: 6.5,
        },
        ScoreRow {
            // An idle model-named device scores 0 whatever the request.
            why: "idle model-named device",
            dev: model_dev(10, 32768, 100, (0, 0, 0)),
            reqs: vec![req(2, 0, 100, 100)],
            weights: W111,
            want: 0.0,
        },
        ScoreRow {
            // The match is on the type string alone: a device of another vendor whose type
            // is the requested word counts the request, 10 × (1/10 + 20/100 + 4096/32768).
            why: "type equal to the request's word counts whatever the vendor",
            dev: dev_of(OTHER, "NVIDIA", 10, 32768, 100, (0, 0, 0)),
            reqs: vec![req(1, 4096, MEMPCT_UNSET, 20)],
            weights: W111,
            want: 4.25,
        },
        ScoreRow {
            // An idle device with a request-less container scores 0.
            why: "idle device, no request",
            dev: dev(10, 32768, 100, (0, 0, 0)),
            reqs: vec![],
            weights: W111,
            want: 0.0,
        },
        ScoreRow {
            // Without a request of this vendor the score is pure current utilisation; this is the
            // 6.5 HAMi computes for GPU A in its example (request ignored).
            why: "request of another vendor is not counted",
            dev: dev(10, 32768, 100, busy),
            reqs: vec![ContainerRequest::new(OTHER, 1, 4096, MEMPCT_UNSET, 20)],
            weights: W111,
            want: 6.5,
        },
        ScoreRow {
            // Only requests of the device's vendor count, others in the same container do not.
            why: "mixed vendors in one container",
            dev: dev(10, 32768, 100, busy),
            reqs: vec![req(1, 4096, MEMPCT_UNSET, 20), ContainerRequest::new(OTHER, 2, 8192, MEMPCT_UNSET, 50)],
            weights: W111,
            want: 10.75,
        },
        ScoreRow {
            // Each request counts one slot, whatever its nums: 10 × (1/10).
            why: "nums 4 counts one slot",
            dev: dev(10, 32768, 100, (0, 0, 0)),
            reqs: vec![req(4, 0, MEMPCT_UNSET, 0)],
            weights: W111,
            want: 1.0,
        },
        ScoreRow {
            // A percentage request reserves floor(Totalmem × pct / 100): 10 × (1/10 + 1/2).
            why: "50 percent of memory",
            dev: dev(10, 32768, 100, (0, 0, 0)),
            reqs: vec![req(1, 0, 50, 0)],
            weights: W111,
            want: 6.0,
        },
        ScoreRow {
            // The percentage is floored: 1001 × 50 / 100 = 500 (not 500.5), 10 × (1/10 + 500/1001).
            why: "percentage memory is floored",
            dev: dev(10, 1001, 100, (0, 0, 0)),
            reqs: vec![req(1, 0, 50, 0)],
            weights: W111,
            want: 10.0 * (0.1 + 500.0 / 1001.0),
        },
        ScoreRow {
            // 100 percent on a busy device: 10 × (2/10 + 30/100 + (32768 + 8192)/32768).
            why: "whole memory on a busy device",
            dev: dev(10, 32768, 100, busy),
            reqs: vec![req(1, 0, 100, 0)],
            weights: W111,
            want: 17.5,
        },
        ScoreRow {
            // mempct 0 means "not a percentage": memreq counts, 10 × (1/10 + 8192/32768).
            why: "mempct 0 uses memreq",
            dev: dev(10, 32768, 100, (0, 0, 0)),
            reqs: vec![req(1, 8192, 0, 0)],
            weights: W111,
            want: 3.5,
        },
        ScoreRow {
            // mempct 101 is the unset sentinel: memreq counts.
            why: "mempct 101 uses memreq",
            dev: dev(10, 32768, 100, (0, 0, 0)),
            reqs: vec![req(1, 8192, MEMPCT_UNSET, 0)],
            weights: W111,
            want: 3.5,
        },
        ScoreRow {
            // A set percentage wins over memreq in the score (the fit does the opposite: it
            // reserves memreq when one is given): 10 × (1/10 + 16384/32768).
            why: "percentage wins over memreq in the score",
            dev: dev(10, 32768, 100, (0, 0, 0)),
            reqs: vec![req(1, 8192, 50, 0)],
            weights: W111,
            want: 6.0,
        },
        ScoreRow {
            // Count = 0 scores 0, whatever the usage.
            why: "zero count",
            dev: dev(0, 32768, 100, busy),
            reqs: vec![req(1, 4096, MEMPCT_UNSET, 20)],
            weights: W111,
            want: 0.0,
        },
        ScoreRow {
            // Totalcore = 0 scores 0.
            why: "zero cores",
            dev: dev(10, 32768, 0, busy),
            reqs: vec![req(1, 4096, MEMPCT_UNSET, 20)],
            weights: W111,
            want: 0.0,
        },
        ScoreRow {
            // Totalmem = 0 scores 0.
            why: "zero memory",
            dev: dev(10, 0, 100, busy),
            reqs: vec![req(1, 4096, MEMPCT_UNSET, 20)],
            weights: W111,
            want: 0.0,
        },
        ScoreRow {
            // Weights: memory only, GPU A of the example: 10 × 12288/32768.
            why: "memory weight only",
            dev: dev(10, 32768, 100, busy),
            reqs: vec![req(1, 4096, MEMPCT_UNSET, 20)],
            weights: Weights { slot: 0.0, core: 0.0, memory: 1.0 },
            want: 3.75,
        },
        ScoreRow {
            // Weights scale each term: 10 × (2 × 2/10 + 3 × 50/100 + 0).
            why: "weights 2/3/0",
            dev: dev(10, 32768, 100, busy),
            reqs: vec![req(1, 4096, MEMPCT_UNSET, 20)],
            weights: Weights { slot: 2.0, core: 3.0, memory: 0.0 },
            want: 19.0,
        },
    ];
    for r in rows {
        assert_close(score(&r.dev, &r.reqs, &r.weights), r.want, r.why);
    }
}

#[test]
fn weights_annotation_changes_the_device_score() {
    // hami.io/device-scoring-weights (whitespace trimmed) weights the terms.
    let v = vendors();
    let p = pod()
        .gpu(1)
        .mem_mib(4096)
        .cores(20)
        .annotation(keys::DEVICE_SCORING_WEIGHTS, " slot = 0 , core=0,memory=1")
        .request_with(&v);
    let a = &worked_example_typed("NVIDIA")[0];
    assert_close(score(a, &p.containers[0], &p.weights), 3.75, "memory only");
    let plain = pod().gpu(1).mem_mib(4096).cores(20).request_with(&v);
    assert_close(score(a, &plain.containers[0], &plain.weights), 10.75, "default 1/1/1");
}

#[test]
fn node_default_score_sums_every_device_before_the_pod() {
    let rows: [(&str, Vec<DeviceUsage>, f32); 5] = [
        // A node without devices scores 0.
        ("no devices", vec![], 0.0),
        // An idle node scores 0.
        ("idle", vec![dev(10, 16384, 100, (0, 0, 0)), dev(10, 16384, 100, (0, 0, 0))], 0.0),
        // All vendors' devices are summed into one ratio per field:
        // 10 × (5/14 + 50/200 + 8192/32768).
        (
            "two vendors",
            vec![
                dev_of(NVIDIA, "NVIDIA", 10, 16384, 100, (5, 8192, 50)),
                dev_of(OTHER, "OTHER", 4, 16384, 100, (0, 0, 0)),
            ],
            10.0 * (5.0 / 14.0 + 0.25 + 0.25),
        ),
        // Σ Count = 0 gives 0, whatever else is used.
        ("no slots", vec![dev(0, 16384, 100, (0, 8192, 50))], 0.0),
        // Σ Totalcore = 0 gives 0.
        ("no cores", vec![dev(10, 16384, 0, (1, 8192, 0)), dev(10, 16384, 0, (0, 0, 0))], 0.0),
    ];
    for (why, devs, want) in rows {
        assert_close(node_default_score(&devs), want, why);
    }
}

/// Six devices at positions 0–5 (index = position): (NUMA, Used, score).
const DEVS: [(i32, u32, f32); 6] = [(1, 0, 9.0), (0, 2, 5.0), (0, 0, 7.0), (1, 1, 2.0), (0, 0, 5.0), (1, 0, 5.0)];

fn six() -> (Vec<DeviceUsage>, Vec<f32>) {
    let devs = DEVS
        .iter()
        .enumerate()
        .map(|(i, &(numa, used, _))| {
            let mut info = DeviceInfo::new(&format!("GPU-{i}"), i as u32, 10, 16384, 100, "NVIDIA-A100");
            info.numa = numa;
            let mut d = DeviceUsage::idle(Arc::new(info), NVIDIA);
            d.used = used;
            d
        })
        .collect();
    (devs, DEVS.iter().map(|d| d.2).collect())
}

fn order(text: &str, numa: bool, devs: &[DeviceUsage], scores: &[f32]) -> Vec<u16> {
    let mut out = Vec::new();
    order_devices(devs, scores, &GpuPolicy::parse(text, numa), &mut out);
    out
}

#[test]
fn order_devices_follows_every_row_of_the_policy_table() {
    // Expected lists are ascending; the fit walks from the end, so the last position is tried first.
    // Among equal keys, single-value policies keep registration order (Go's insertion sort is
    // stable), so the device registered last is tried first.
    let rows: [(&str, bool, [u16; 6]); 9] = [
        // mutex: Used descending, then NUMA ascending: idle devices, highest NUMA first
        // (pos 5 over pos 0: registered later); scores play no part.
        ("mutex", false, [1, 3, 2, 4, 0, 5]),
        // mutex is matched before the NUMA flag rows.
        ("mutex", true, [1, 3, 2, 4, 0, 5]),
        // NUMA flag + binpack: NUMA descending, then score ascending: the lowest NUMA group,
        // its highest score (pos 2, 7) first, even though pos 0 scores 9.
        ("binpack", true, [3, 5, 0, 1, 4, 2]),
        // NUMA flag + other policy: NUMA ascending, then score descending: the highest NUMA
        // group, its lowest score (pos 3, 2) first.
        ("spread", true, [2, 1, 4, 0, 5, 3]),
        ("topology-aware", true, [2, 1, 4, 0, 5, 3]),
        ("no-such-policy", true, [2, 1, 4, 0, 5, 3]),
        // binpack: score ascending, then NUMA ascending: the highest score first.
        ("binpack", false, [3, 1, 4, 5, 2, 0]),
        // spread: score descending, then NUMA ascending: the lowest score first; among the
        // 5s, NUMA 1 (pos 5) before NUMA 0, and pos 4 before pos 1.
        ("spread", false, [0, 2, 1, 4, 5, 3]),
        // topology-aware sorts like spread (its choice among the fitting devices comes after the
        // walk, by pair scores).
        ("topology-aware", false, [0, 2, 1, 4, 5, 3]),
    ];
    let (devs, scores) = six();
    for (text, numa, want) in rows {
        assert_eq!(order(text, numa, &devs, &scores), want, "{text} (numa flag {numa})");
    }
}

#[test]
fn unknown_and_empty_policies_sort_like_spread() {
    // HAMi sorts anything that is not mutex or binpack (spread, topology-aware, unknown) like
    // spread.
    let (devs, scores) = six();
    let spread = order("spread", false, &devs, &scores);
    for text in ["no-such-policy", "", "Binpack", "numa-bind"] {
        assert_eq!(order(text, false, &devs, &scores), spread, "{text:?}");
    }
}

#[test]
fn key_chains_compare_key_by_key_then_index_ascending() {
    // Comma lists chain keys: binpack = score ascending, spread = score descending, numa = NUMA
    // ascending; all equal → device index ascending (so among ties the highest index is tried
    // first).
    let rows: [(&str, bool, [u16; 6]); 8] = [
        // binpack, then NUMA: the 5s split by NUMA (pos 1, 4 | pos 5), then index.
        ("binpack,numa", false, [3, 1, 4, 5, 2, 0]),
        // spread, then NUMA.
        ("spread,numa", false, [0, 2, 1, 4, 5, 3]),
        // The bare value `numa` is a chain: NUMA ascending, then index.
        ("numa", false, [1, 2, 4, 0, 3, 5]),
        ("numa", true, [1, 2, 4, 0, 3, 5]),
        // With the NUMA flag, numa moves to the front: NUMA ascending, then binpack.
        ("binpack,numa", true, [1, 4, 2, 3, 5, 0]),
        ("spread,numa", true, [2, 1, 4, 0, 5, 3]),
        // mutex in a list is a fit rule, not a sort key: the chain is [spread] and Used plays no
        // part.
        ("spread,mutex", false, [0, 2, 1, 4, 5, 3]),
        // A chain with no sort key is [spread].
        ("mutex,topology-aware", false, [0, 2, 1, 4, 5, 3]),
    ];
    let (devs, scores) = six();
    for (text, numa, want) in rows {
        assert_eq!(order(text, numa, &devs, &scores), want, "{text} (numa flag {numa})");
    }
}

/// Devices with the given indexes, all alike otherwise.
fn indexed(indexes: &[u32]) -> Vec<DeviceUsage> {
    indexes
        .iter()
        .enumerate()
        .map(|(p, &i)| {
            DeviceUsage::idle(Arc::new(DeviceInfo::new(&format!("GPU-{p}"), i, 10, 16384, 100, "x")), NVIDIA)
        })
        .collect()
}

#[test]
fn single_value_ties_keep_registration_order_and_chains_end_with_the_index() {
    // HAMi's single-value comparisons have no index key; Go's insertion sort keeps equal
    // devices where they were, so the device registered last (pos 2) is tried first, whatever
    // its index. Chains end with the device index ascending.
    let devs = indexed(&[2, 0, 1]);
    let scores = [3.0; 3];
    for text in ["spread", "binpack", "mutex", "topology-aware"] {
        assert_eq!(order(text, false, &devs, &scores), [0, 1, 2], "{text}");
        assert_eq!(order(text, true, &devs, &scores), [0, 1, 2], "{text} with the NUMA flag");
    }
    assert_eq!(order("binpack,numa", false, &devs, &scores), [1, 2, 0]);
    assert_eq!(order("numa", true, &devs, &scores), [1, 2, 0]);
}

#[test]
fn two_idle_gpus_give_the_pod_the_second() {
    // HAMi's own expectation: equal devices, the fit walks from the end, the second GPU wins.
    let devs = indexed(&[0, 1]);
    for text in ["spread", "binpack", "mutex", "binpack,numa", "spread,numa", "numa"] {
        assert_eq!(order(text, false, &devs, &[0.0; 2]).last(), Some(&1), "{text}");
    }
}

#[test]
fn each_sort_starts_from_the_order_the_previous_request_left() {
    // HAMi sorts one list in place for every request of a pod on a node, so a tie in the second
    // sort keeps the arrangement the first produced, not registration order.
    let devs = indexed(&[0, 1, 2]);
    let mut out = Vec::new();
    // Binpack on distinct scores puts pos 1 last, then pos 0, then pos 2 ...
    order_devices(&devs, &[5.0, 9.0, 1.0], &GpuPolicy::parse("binpack", false), &mut out);
    assert_eq!(out, [2, 0, 1]);
    // ... and an all-equal sort leaves that arrangement as it is.
    order_devices(&devs, &[0.0; 3], &GpuPolicy::parse("spread", false), &mut out);
    assert_eq!(out, [2, 0, 1]);
    // A buffer of the wrong length starts again from registration order.
    let mut stale = vec![1, 0];
    order_devices(&devs, &[0.0; 3], &GpuPolicy::parse("spread", false), &mut stale);
    assert_eq!(stale, [0, 1, 2]);
}

#[test]
fn more_than_twelve_devices_follow_go_pattern_defeating_quicksort() {
    // Thirteen devices and more leave insertion sort: equal devices no longer keep registration
    // order, and HAMi's walk meets them in the order Go's pdqsort leaves. Sixteen GPUs, the
    // first eight busier, under binpack: the expected list is what Go's sort.Sort gives.
    let idx: Vec<u32> = (0..16).collect();
    let devs = indexed(&idx);
    let scores: Vec<f32> = (0..16).map(|i| if i < 8 { 1.0 } else { 0.0 }).collect();
    assert_eq!(order("binpack", false, &devs, &scores), [12, 10, 15, 14, 13, 11, 8, 9, 1, 7, 6, 5, 0, 4, 3, 2]);
}

#[test]
fn order_devices_handles_no_devices() {
    let mut out = vec![7, 7, 7];
    order_devices(&[], &[], &GpuPolicy::parse("binpack", false), &mut out);
    assert!(out.is_empty());
}

fn ranked(policy: NodePolicy, input: &[(&str, f32)]) -> Vec<String> {
    let mut fits: Vec<(NodeName, f32, ())> = input.iter().map(|&(n, s)| (NodeName::new(n), s, ())).collect();
    rank_nodes(&mut fits, policy);
    fits.into_iter().map(|(n, _, ())| n.to_string()).collect()
}

#[test]
fn rank_nodes_puts_the_best_node_first_per_node_policy() {
    let input = [("b", 3.0), ("a", 3.0), ("c", 1.0), ("d", 5.0)];
    // binpack picks the highest score; equal scores go to the name that sorts first (HAMi leaves
    // ties to goroutine order).
    assert_eq!(ranked(NodePolicy::Binpack, &input), ["d", "a", "b", "c"]);
    // As in HAMi, any unknown node policy sorts like binpack.
    assert_eq!(ranked(NodePolicy::parse("no-such-policy"), &input), ["d", "a", "b", "c"]);
    // spread picks the lowest score; ties still by name.
    assert_eq!(ranked(NodePolicy::Spread, &input), ["c", "a", "b", "d"]);
}

#[test]
fn rank_nodes_breaks_ties_by_name_whatever_the_input_order() {
    // hami-rs breaks node ties deterministically, by name compared as bytes (HAMi breaks them
    // arbitrarily).
    let a = [("node-9", 2.0), ("node-10", 2.0), ("node-1", 2.0)];
    let b = [("node-1", 2.0), ("node-9", 2.0), ("node-10", 2.0)];
    for policy in [NodePolicy::Binpack, NodePolicy::Spread, NodePolicy::Other] {
        assert_eq!(ranked(policy, &a), ["node-1", "node-10", "node-9"], "{policy:?}");
        assert_eq!(ranked(policy, &b), ["node-1", "node-10", "node-9"], "{policy:?}");
    }
}

#[test]
fn rank_keys_order_like_the_policy_then_the_name() {
    let scores = [f32::NEG_INFINITY, -3.5, -0.0, 0.0, 1e-30, 0.5, 1.0, 2.75, f32::MAX, f32::INFINITY];
    for policy in [NodePolicy::Binpack, NodePolicy::Spread] {
        for &a in &scores {
            for &b in &scores {
                for (ra, rb) in [(0, 1), (1, 0), (7, 7), (u32::MAX, 0)] {
                    let want = node_order(policy, a, b).then(ra.cmp(&rb));
                    let got = rank_key(policy, a, ra).cmp(&rank_key(policy, b, rb));
                    assert_eq!(got, want, "{policy:?}: {a} (rank {ra}) against {b} (rank {rb})");
                }
            }
        }
    }
}

proptest::proptest! {
    #[test]
    fn rank_keys_order_any_two_scores_like_the_policy(a in proptest::num::f32::ANY, b in proptest::num::f32::ANY, spread in proptest::bool::ANY) {
        let policy = if spread { NodePolicy::Spread } else { NodePolicy::Binpack };
        proptest::prop_assert_eq!(rank_key(policy, a, 1).cmp(&rank_key(policy, b, 2)), node_order(policy, a, b).then(std::cmp::Ordering::Less));
    }
}
