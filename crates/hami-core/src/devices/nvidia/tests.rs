use serde_json::{Map, Value, json};

use super::*;
use crate::devices::NoQuota;
use crate::model::edit::PodEdits;
use crate::model::pod::QuantityText;
use crate::model::{DeviceInfo, DeviceUuid, PodRequest, VendorId};
use crate::sched::fit::{Scratch, fit_pod_devices};
use crate::testing::*;

const GPU_1111: &str = "GPU-1d0c8a42-7be1-4c1e-9a3e-111111111111";
const GPU_2222: &str = "GPU-1d0c8a42-7be1-4c1e-9a3e-222222222222";

fn chart() -> NvidiaConfig {
    NvidiaConfig::chart()
}

fn container(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> ContainerView {
    let mut c = ContainerView { name: "c".into(), ..Default::default() };
    for (k, v) in limits {
        c.resources.limits.insert((*k).to_owned(), QuantityText((*v).to_owned()));
    }
    for (k, v) in requests {
        c.resources.requests.insert((*k).to_owned(), QuantityText((*v).to_owned()));
    }
    c
}

// ---------------------------------------------------------------------------------------------
// Request derivation: what HAMi reads from a container's NVIDIA resources

/// What a request derivation should produce.
#[derive(Debug)]
enum Want {
    /// No NVIDIA request for the container.
    Nothing,
    /// `(nums, memreq, mempct, cores)`.
    Req(u32, u64, u32, u32),
    /// Refused; the message names this resource.
    Refused(&'static str),
}

struct Row {
    what: &'static str,
    cfg: fn(&mut NvidiaConfig),
    limits: &'static [(&'static str, &'static str)],
    requests: &'static [(&'static str, &'static str)],
    want: Want,
}

fn same(_: &mut NvidiaConfig) {}

const GPU: &str = "nvidia.com/gpu";
const MEM: &str = "nvidia.com/gpumem";
const PCT: &str = "nvidia.com/gpumem-percentage";
const CORES: &str = "nvidia.com/gpucores";
const PRIO: &str = "nvidia.com/priority";

#[test]
fn request_derivation_follows_hami_field_by_field() {
    use Want::*;
    let rows = [
        // The count is an integer, else HAMi reads no NVIDIA request; hami-rs refuses a count it
        // cannot use (negative, fractional, unparsable, past int32).
        Row { what: "no count", cfg: same, limits: &[(MEM, "3000")], requests: &[], want: Nothing },
        Row { what: "count 0", cfg: same, limits: &[(GPU, "0")], requests: &[], want: Nothing },
        Row { what: "negative count", cfg: same, limits: &[(GPU, "-1")], requests: &[], want: Refused(GPU) },
        Row { what: "fractional count", cfg: same, limits: &[(GPU, "1.5")], requests: &[], want: Refused(GPU) },
        Row { what: "milli count", cfg: same, limits: &[(GPU, "100m")], requests: &[], want: Refused(GPU) },
        Row { what: "unparsable count", cfg: same, limits: &[(GPU, "one")], requests: &[], want: Refused(GPU) },
        Row {
            what: "count past int32",
            cfg: same,
            limits: &[(GPU, "99999999999999999999")],
            requests: &[],
            want: Refused(GPU),
        },
        Row { what: "count 2", cfg: same, limits: &[(GPU, "2")], requests: &[], want: Req(2, 0, 100, 0) },
        // HAMi's "integer" means exactly representable as an int64: `2k` is 2000.
        Row { what: "count 2k", cfg: same, limits: &[(GPU, "2k")], requests: &[], want: Req(2000, 0, 100, 0) },
        // Quantities come from limits, falling back to requests when the limit is absent.
        Row {
            what: "count in requests only",
            cfg: same,
            limits: &[],
            requests: &[(GPU, "1")],
            want: Req(1, 0, 100, 0),
        },
        Row {
            what: "a non-integer count limit wins over an integer request",
            cfg: same,
            limits: &[(GPU, "1.5")],
            requests: &[(GPU, "1")],
            want: Refused(GPU),
        },
        // Memory: gpumem × max(memoryFactor, 1).
        Row {
            what: "memory",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "3000")],
            requests: &[],
            want: Req(1, 3000, 101, 0),
        },
        Row {
            what: "memory limit wins over the request",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "2000")],
            requests: &[(MEM, "3000")],
            want: Req(1, 2000, 101, 0),
        },
        Row {
            what: "memory from requests",
            cfg: same,
            limits: &[(GPU, "1")],
            requests: &[(MEM, "3000")],
            want: Req(1, 3000, 101, 0),
        },
        Row {
            what: "memory × factor 4",
            cfg: |c| c.memory_factor = 4,
            limits: &[(GPU, "1"), (MEM, "3000")],
            requests: &[],
            want: Req(1, 12000, 101, 0),
        },
        Row {
            what: "factor 0 counts as 1",
            cfg: |c| c.memory_factor = 0,
            limits: &[(GPU, "1"), (MEM, "3000")],
            requests: &[],
            want: Req(1, 3000, 101, 0),
        },
        Row {
            what: "memory at the int32 limit",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "2147483647")],
            requests: &[],
            want: Req(1, 2147483647, 101, 0),
        },
        // HAMi drops the request when memory leaves 0..=2^31-1/factor; hami-rs refuses the pod
        // instead of placing it without a reservation.
        Row {
            what: "memory past the int32 limit",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "2147483648")],
            requests: &[],
            want: Refused(MEM),
        },
        Row {
            what: "memory at 2^31-1 / factor 2",
            cfg: |c| c.memory_factor = 2,
            limits: &[(GPU, "1"), (MEM, "1073741823")],
            requests: &[],
            want: Req(1, 2147483646, 101, 0),
        },
        Row {
            what: "memory past 2^31-1 / factor 2",
            cfg: |c| c.memory_factor = 2,
            limits: &[(GPU, "1"), (MEM, "1073741824")],
            requests: &[],
            want: Refused(MEM),
        },
        Row {
            what: "negative memory",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "-1")],
            requests: &[],
            want: Refused(MEM),
        },
        Row {
            what: "fractional memory",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "1.5")],
            requests: &[],
            want: Refused(MEM),
        },
        Row {
            what: "unparsable memory",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "lots")],
            requests: &[],
            want: Refused(MEM),
        },
        // Percentage: absent → 101 (unset); > 100 → 100; ≤ 0 → 101; else the value. HAMi also reads
        // a non-integer as 101; hami-rs refuses it (the webhook denies it too).
        Row {
            what: "percentage 50",
            cfg: same,
            limits: &[(GPU, "1"), (PCT, "50")],
            requests: &[],
            want: Req(1, 0, 50, 0),
        },
        Row {
            what: "percentage 150 reads as the whole card",
            cfg: same,
            limits: &[(GPU, "1"), (PCT, "150")],
            requests: &[],
            want: Req(1, 0, 100, 0),
        },
        Row {
            what: "percentage 100",
            cfg: same,
            limits: &[(GPU, "1"), (PCT, "100")],
            requests: &[],
            want: Req(1, 0, 100, 0),
        },
        Row {
            what: "percentage from requests",
            cfg: same,
            limits: &[(GPU, "1")],
            requests: &[(PCT, "30")],
            want: Req(1, 0, 30, 0),
        },
        Row {
            what: "percentage with memory keeps both",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "3000"), (PCT, "50")],
            requests: &[],
            want: Req(1, 3000, 50, 0),
        },
        Row {
            what: "percentage 150 with memory",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "3000"), (PCT, "150")],
            requests: &[],
            want: Req(1, 3000, 100, 0),
        },
        Row {
            what: "percentage 0 is unset",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "3000"), (PCT, "0")],
            requests: &[],
            want: Req(1, 3000, 101, 0),
        },
        Row {
            what: "negative percentage is unset",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "3000"), (PCT, "-5")],
            requests: &[],
            want: Req(1, 3000, 101, 0),
        },
        Row {
            what: "negative percentage and no memory is the whole card",
            cfg: same,
            limits: &[(GPU, "1"), (PCT, "-5")],
            requests: &[],
            want: Req(1, 0, 100, 0),
        },
        Row {
            what: "percentage far past 100",
            cfg: same,
            limits: &[(GPU, "1"), (PCT, "1000000000000")],
            requests: &[],
            want: Req(1, 0, 100, 0),
        },
        Row {
            what: "fractional percentage",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "3000"), (PCT, "50.5")],
            requests: &[],
            want: Refused(PCT),
        },
        Row {
            what: "unparsable percentage",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "3000"), (PCT, "half")],
            requests: &[],
            want: Refused(PCT),
        },
        // HAMi's default: percentage unset and memory 0 → defaultMemory when non-zero, else
        // 100 percent.
        Row { what: "no memory at all", cfg: same, limits: &[(GPU, "1")], requests: &[], want: Req(1, 0, 100, 0) },
        Row {
            what: "percentage 0 and no memory",
            cfg: same,
            limits: &[(GPU, "1"), (PCT, "0")],
            requests: &[],
            want: Req(1, 0, 100, 0),
        },
        Row {
            what: "explicit memory 0",
            cfg: same,
            limits: &[(GPU, "1"), (MEM, "0")],
            requests: &[],
            want: Req(1, 0, 100, 0),
        },
        Row {
            what: "defaultMemory",
            cfg: |c| c.default_memory = 2048,
            limits: &[(GPU, "1")],
            requests: &[],
            want: Req(1, 2048, 101, 0),
        },
        Row {
            what: "defaultMemory after percentage 0",
            cfg: |c| c.default_memory = 2048,
            limits: &[(GPU, "1"), (PCT, "0")],
            requests: &[],
            want: Req(1, 2048, 101, 0),
        },
        Row {
            what: "defaultMemory is not used with a percentage",
            cfg: |c| c.default_memory = 2048,
            limits: &[(GPU, "1"), (PCT, "30")],
            requests: &[],
            want: Req(1, 0, 30, 0),
        },
        Row {
            what: "defaultMemory is not used with memory",
            cfg: |c| c.default_memory = 2048,
            limits: &[(GPU, "1"), (MEM, "1000")],
            requests: &[],
            want: Req(1, 1000, 101, 0),
        },
        Row {
            what: "defaultMemory is not scaled by the factor",
            cfg: |c| {
                c.default_memory = 2048;
                c.memory_factor = 4;
            },
            limits: &[(GPU, "1")],
            requests: &[],
            want: Req(1, 2048, 101, 0),
        },
        // Cores: an integer (no check against 100), defaultCores when absent. HAMi also takes
        // defaultCores for a value that is not an integer; hami-rs refuses it.
        Row { what: "cores", cfg: same, limits: &[(GPU, "1"), (CORES, "30")], requests: &[], want: Req(1, 0, 100, 30) },
        Row {
            what: "cores are not range-checked",
            cfg: same,
            limits: &[(GPU, "1"), (CORES, "250")],
            requests: &[],
            want: Req(1, 0, 100, 250),
        },
        Row {
            what: "cores limit wins over the request",
            cfg: same,
            limits: &[(GPU, "1"), (CORES, "30")],
            requests: &[(CORES, "50")],
            want: Req(1, 0, 100, 30),
        },
        Row {
            what: "cores from requests",
            cfg: same,
            limits: &[(GPU, "1")],
            requests: &[(CORES, "50")],
            want: Req(1, 0, 100, 50),
        },
        Row {
            what: "defaultCores when absent",
            cfg: |c| c.default_cores = 25,
            limits: &[(GPU, "1")],
            requests: &[],
            want: Req(1, 0, 100, 25),
        },
        Row {
            what: "fractional cores",
            cfg: |c| c.default_cores = 25,
            limits: &[(GPU, "1"), (CORES, "1.5")],
            requests: &[],
            want: Refused(CORES),
        },
        Row {
            what: "unparsable cores",
            cfg: |c| c.default_cores = 25,
            limits: &[(GPU, "1"), (CORES, "most")],
            requests: &[],
            want: Refused(CORES),
        },
        Row {
            what: "explicit cores 0 beat defaultCores",
            cfg: |c| c.default_cores = 25,
            limits: &[(GPU, "1"), (CORES, "0")],
            requests: &[],
            want: Req(1, 0, 100, 0),
        },
        // hami-rs: negative cores would subtract usage, so the pod is refused (HAMi takes them).
        Row {
            what: "negative cores",
            cfg: same,
            limits: &[(GPU, "1"), (CORES, "-10")],
            requests: &[],
            want: Refused(CORES),
        },
        // Renamed resources: the names come from the device config.
        Row {
            what: "renamed count",
            cfg: |c| c.resource_count_name = "example.com/vgpu".into(),
            limits: &[(GPU, "1")],
            requests: &[],
            want: Nothing,
        },
        Row {
            what: "empty count name disables the vendor",
            cfg: |c| c.resource_count_name = String::new(),
            limits: &[(GPU, "1")],
            requests: &[],
            want: Nothing,
        },
        Row {
            what: "empty percentage name ignores the percentage",
            cfg: |c| c.resource_memory_percentage_name = String::new(),
            limits: &[(GPU, "1"), (MEM, "3000"), (PCT, "50")],
            requests: &[],
            want: Req(1, 3000, 101, 0),
        },
        Row {
            what: "priority does not affect the request",
            cfg: same,
            limits: &[(GPU, "1"), (PRIO, "1")],
            requests: &[],
            want: Req(1, 0, 100, 0),
        },
    ];
    for row in rows {
        let mut cfg = chart();
        (row.cfg)(&mut cfg);
        let v = Nvidia::new(&cfg);
        let c = container(row.limits, row.requests);
        let got = v.request(VendorId(3), &c, &PodView::default());
        match (&row.want, got) {
            (Want::Nothing, Ok(None)) => {}
            (Want::Req(nums, memreq, mempct, cores), Ok(Some(r))) => {
                let want = ContainerRequest {
                    vendor: VendorId(3),
                    nums: *nums,
                    memreq: MemMiB(*memreq),
                    mempct: *mempct,
                    cores: *cores,
                    mode: 0,
                };
                assert_eq!(r, want, "{}", row.what);
            }
            (Want::Refused(name), Err(why)) => assert!(why.to_string().contains(name), "{}: {why}", row.what),
            (want, got) => panic!("{}: wanted {want:?}, got {got:?}", row.what),
        }
    }
}

#[test]
fn a_refused_quantity_refuses_the_whole_pod_request() {
    // A bad memory quantity is an error for the pod, not a request HAMi silently drops.
    let v = vendors();
    let p = pod().gpu(1).mem_mib(1).limit(MEM, "1.5");
    let err = v.pod_request(&p.view(), &defaults()).unwrap_err();
    assert!(err.to_string().contains(MEM), "{err}");
}

#[test]
fn resource_names_list_the_count_first_and_skip_empty_names() {
    let mut cfg = chart();
    cfg.resource_priority_name = String::new();
    assert_eq!(Nvidia::new(&cfg).resource_names(), [GPU, MEM, PCT, CORES]);
    let q = Nvidia::new(&NvidiaConfig { memory_factor: 4, ..chart() }).quota_names();
    assert_eq!((q.memory.as_deref(), q.cores.as_deref(), q.memory_factor), (Some(MEM), Some(CORES), 4));
}

// ---------------------------------------------------------------------------------------------
// Webhook mutation (HAMi's NVIDIA rules)

struct Mutated {
    result: Result<bool, String>,
    container: Value,
    edits: PodEdits,
}

impl Mutated {
    fn limit(&self, name: &str) -> Option<&str> {
        self.container.pointer(&format!("/resources/limits/{}", name.replace('/', "~1")))?.as_str()
    }
    fn env(&self) -> Vec<(String, String)> {
        let Some(env) = self.container.get("env").and_then(Value::as_array) else { return Vec::new() };
        env.iter().map(|e| (e["name"].as_str().unwrap().to_owned(), e["value"].as_str().unwrap().to_owned())).collect()
    }
    fn has_env(&self, name: &str) -> bool {
        self.env().iter().any(|(n, _)| n == name)
    }
}

fn mutate_with(cfg: &NvidiaConfig, mut container: Value, runtime_class: Option<&str>) -> Mutated {
    let v = Nvidia::new(cfg);
    let annotations = Map::new();
    let mut edits = PodEdits::default();
    let result = {
        let mut c = ContainerEdit { container: &mut container, index: 0, is_init: false };
        let mut pod = PodContext { annotations: &annotations, runtime_class_name: runtime_class, edits: &mut edits };
        v.mutate(&mut c, &mut pod).map_err(|e| e.to_string())
    };
    Mutated { result, container, edits }
}

fn mutate(container: Value) -> Mutated {
    mutate_with(&chart(), container, None)
}

#[test]
fn percentage_outside_0_to_100_is_refused_with_hamis_message() {
    // HAMi: the percentage (limits, else requests) must be an integer in 0..=100.
    let cases = [
        (json!({"name": "train", "resources": {"limits": {GPU: "1", PCT: "150"}}}), "150", "train"),
        (json!({"name": "train", "resources": {"limits": {GPU: "1", PCT: "-1"}}}), "-1", "train"),
        (json!({"name": "c", "resources": {"limits": {GPU: "1", PCT: "50.5"}}}), "50.5", "c"),
        (json!({"name": "c", "resources": {"requests": {PCT: "101"}}}), "101", "c"),
        (json!({"name": "c", "resources": {"limits": {PCT: "lots"}}}), "lots", "c"),
        // A bare JSON number is read as its text.
        (json!({"name": "c", "resources": {"limits": {GPU: 1, PCT: 200}}}), "200", "c"),
    ];
    for (c, v, name) in cases {
        let m = mutate(c);
        assert_eq!(
            m.result,
            Err(format!(
                "invalid nvidia.com/gpumem-percentage value {v} in container {name}: must be an integer between 0 and 100"
            ))
        );
    }
    for ok in ["0", "1", "100"] {
        let m = mutate(json!({"name": "c", "resources": {"limits": {GPU: "1", PCT: ok}}}));
        assert!(m.result.is_ok(), "{ok}: {:?}", m.result);
    }
}

#[test]
fn priority_limit_becomes_cuda_task_priority() {
    // HAMi: nvidia.com/priority in limits → env CUDA_TASK_PRIORITY=<value>.
    let m = mutate(json!({"name": "c", "resources": {"limits": {GPU: "1", PRIO: "1"}}}));
    assert_eq!(m.result, Ok(true));
    assert_eq!(m.env(), [("CUDA_TASK_PRIORITY".to_owned(), "1".to_owned())]);
    // Only limits count.
    let m = mutate(json!({"name": "c", "resources": {"limits": {GPU: "1"}, "requests": {PRIO: "1"}}}));
    assert!(!m.has_env("CUDA_TASK_PRIORITY"));
}

#[test]
fn core_policy_other_than_default_is_exported_to_every_container() {
    // HAMi: gpuCorePolicy configured and not `default` → GPU_CORE_UTILIZATION_POLICY on every
    // container, also those without a GPU.
    let cfg = NvidiaConfig { gpu_core_policy: "force".into(), ..chart() };
    for c in [json!({"name": "c", "resources": {"limits": {GPU: "1"}}}), json!({"name": "sidecar"})] {
        let m = mutate_with(&cfg, c, None);
        assert_eq!(m.env(), [("GPU_CORE_UTILIZATION_POLICY".to_owned(), "force".to_owned())]);
    }
    for policy in ["default", ""] {
        let cfg = NvidiaConfig { gpu_core_policy: policy.into(), ..chart() };
        let m = mutate_with(&cfg, json!({"name": "c", "resources": {"limits": {GPU: "1"}}}), None);
        assert!(!m.has_env("GPU_CORE_UTILIZATION_POLICY"), "{policy:?}");
    }
}

#[test]
fn webhook_defaults_count_and_exclusive_cores_as_hami_does() {
    // HAMi: `recognised` when the count is in limits; otherwise defaultGPUNum is injected
    // when cores, memory or percentage is in limits. Then the exclusive-core default: count present
    // (limits or requests), cores absent from both, memory "whole" → gpucores 100.
    struct Case {
        what: &'static str,
        default_gpu_num: u32,
        container: Value,
        recognised: bool,
        count: Option<&'static str>,
        cores: Option<&'static str>,
    }
    let cases = [
        Case {
            what: "count only: whole memory, so 100 cores",
            default_gpu_num: 1,
            container: json!({"resources": {"limits": {GPU: "1"}}}),
            recognised: true,
            count: Some("1"),
            cores: Some("100"),
        },
        Case {
            // Count present, memory present → no cores injected.
            what: "count and memory",
            default_gpu_num: 1,
            container: json!({"resources": {"limits": {GPU: "1", MEM: "3000"}}}),
            recognised: true,
            count: Some("1"),
            cores: None,
        },
        Case {
            what: "memory in requests is still memory",
            default_gpu_num: 1,
            container: json!({"resources": {"limits": {GPU: "1"}, "requests": {MEM: "3000"}}}),
            recognised: true,
            count: Some("1"),
            cores: None,
        },
        Case {
            what: "percentage 100 is whole memory",
            default_gpu_num: 1,
            container: json!({"resources": {"limits": {GPU: "1", PCT: "100"}}}),
            recognised: true,
            count: Some("1"),
            cores: Some("100"),
        },
        Case {
            what: "percentage 100 wins over memory",
            default_gpu_num: 1,
            container: json!({"resources": {"limits": {GPU: "1", MEM: "3000", PCT: "100"}}}),
            recognised: true,
            count: Some("1"),
            cores: Some("100"),
        },
        Case {
            what: "percentage 50 is not whole, even without memory",
            default_gpu_num: 1,
            container: json!({"resources": {"limits": {GPU: "1", PCT: "50"}}}),
            recognised: true,
            count: Some("1"),
            cores: None,
        },
        Case {
            what: "cores given: nothing added",
            default_gpu_num: 1,
            container: json!({"resources": {"limits": {GPU: "1", CORES: "30"}}}),
            recognised: true,
            count: Some("1"),
            cores: Some("30"),
        },
        Case {
            what: "cores in requests count as given",
            default_gpu_num: 1,
            container: json!({"resources": {"limits": {GPU: "1"}, "requests": {CORES: "30"}}}),
            recognised: true,
            count: Some("1"),
            cores: None,
        },
        Case {
            what: "count in requests only: the exclusive default still applies and recognises",
            default_gpu_num: 1,
            container: json!({"resources": {"requests": {GPU: "1"}}}),
            recognised: true,
            count: None,
            cores: Some("100"),
        },
        Case {
            what: "count in requests with memory: not recognised",
            default_gpu_num: 1,
            container: json!({"resources": {"requests": {GPU: "1", MEM: "3000"}}}),
            recognised: false,
            count: None,
            cores: None,
        },
        Case {
            what: "memory limit alone: defaultGPUNum injected, memory given so no cores",
            default_gpu_num: 1,
            container: json!({"resources": {"limits": {MEM: "3000"}}}),
            recognised: true,
            count: Some("1"),
            cores: None,
        },
        Case {
            what: "cores limit alone: defaultGPUNum injected",
            default_gpu_num: 2,
            container: json!({"resources": {"limits": {CORES: "20"}}}),
            recognised: true,
            count: Some("2"),
            cores: Some("20"),
        },
        Case {
            what: "percentage 100 alone: count injected, then 100 cores",
            default_gpu_num: 1,
            container: json!({"resources": {"limits": {PCT: "100"}}}),
            recognised: true,
            count: Some("1"),
            cores: Some("100"),
        },
        Case {
            what: "memory only in requests: no default count",
            default_gpu_num: 1,
            container: json!({"resources": {"requests": {MEM: "3000"}}}),
            recognised: false,
            count: None,
            cores: None,
        },
        Case {
            what: "defaultGPUNum 0 injects nothing",
            default_gpu_num: 0,
            container: json!({"resources": {"limits": {MEM: "3000"}}}),
            recognised: false,
            count: None,
            cores: None,
        },
        Case {
            what: "no GPU resources at all",
            default_gpu_num: 1,
            container: json!({"name": "c"}),
            recognised: false,
            count: None,
            cores: None,
        },
    ];
    for case in cases {
        let cfg = NvidiaConfig { default_gpu_num: case.default_gpu_num, ..chart() };
        let m = mutate_with(&cfg, case.container, None);
        assert_eq!(m.result, Ok(case.recognised), "{}", case.what);
        assert_eq!(m.limit(GPU), case.count, "{}: count", case.what);
        assert_eq!(m.limit(CORES), case.cores, "{}: cores", case.what);
    }
}

#[test]
fn exclusive_default_without_a_memory_name_treats_memory_as_whole() {
    // HAMi: "no memory resource name configured" counts as whole memory.
    let cfg = NvidiaConfig { resource_memory_name: String::new(), ..chart() };
    let m = mutate_with(&cfg, json!({"resources": {"limits": {GPU: "1", MEM: "3000"}}}), None);
    assert_eq!(m.result, Ok(true));
    assert_eq!(m.limit(CORES), Some("100"));
    // Without a core name there is nothing to default.
    let cfg = NvidiaConfig { resource_core_name: String::new(), ..chart() };
    let m = mutate_with(&cfg, json!({"resources": {"limits": {GPU: "1"}}}), None);
    assert_eq!(m.result, Ok(true));
    assert_eq!(m.limit(CORES), None);
}

#[test]
fn recognised_pods_get_the_configured_runtime_class_unless_they_have_one() {
    // HAMi: recognised, no runtimeClassName on the pod, one configured → set it.
    let cfg = NvidiaConfig { runtime_class_name: "nvidia".into(), ..chart() };
    let gpu = json!({"resources": {"limits": {GPU: "1"}}});
    let m = mutate_with(&cfg, gpu.clone(), None);
    assert_eq!(m.edits.runtime_class_name.as_deref(), Some("nvidia"));
    let m = mutate_with(&cfg, gpu.clone(), Some("kata"));
    assert_eq!(m.edits.runtime_class_name, None);
    let m = mutate_with(&cfg, json!({"name": "plain"}), None);
    assert_eq!(m.edits.runtime_class_name, None);
    let m = mutate_with(&chart(), gpu, None);
    assert_eq!(m.edits.runtime_class_name, None, "nothing configured");
}

#[test]
fn overwrite_env_hides_gpus_from_containers_without_a_request() {
    // HAMi: not recognised and overwriteEnv → NVIDIA_VISIBLE_DEVICES=none.
    let cfg = NvidiaConfig { overwrite_env: true, ..chart() };
    let m = mutate_with(&cfg, json!({"name": "plain"}), None);
    assert_eq!(m.result, Ok(false));
    assert_eq!(m.env(), [("NVIDIA_VISIBLE_DEVICES".to_owned(), "none".to_owned())]);
    let m = mutate_with(&cfg, json!({"resources": {"limits": {GPU: "1"}}}), None);
    assert!(!m.has_env("NVIDIA_VISIBLE_DEVICES"));
    let m = mutate(json!({"name": "plain"}));
    assert!(!m.has_env("NVIDIA_VISIBLE_DEVICES"), "overwriteEnv off");
}

#[test]
fn env_is_appended_after_existing_entries() {
    let cfg = NvidiaConfig { gpu_core_policy: "disable".into(), ..chart() };
    let m = mutate_with(
        &cfg,
        json!({"env": [{"name": "A", "value": "1"}], "resources": {"limits": {GPU: "1", PRIO: "0"}}}),
        None,
    );
    let names: Vec<String> = m.env().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["A", "CUDA_TASK_PRIORITY", "GPU_CORE_UTILIZATION_POLICY"]);
}

// ---------------------------------------------------------------------------------------------
// Discovery: the registration (JSON or colon list), pair scores and the cordon list

fn discover(annotations: &[(&str, &str)]) -> Discovery {
    let mut n = NodeView::default();
    n.metadata.name = "a".into();
    for (k, v) in annotations {
        n.metadata.annotations.insert((*k).to_owned(), (*v).to_owned());
    }
    Nvidia::new(&chart()).discover(&n)
}

fn devices(d: Discovery) -> (Vec<DeviceInfo>, Arc<Extra>) {
    match d {
        Discovery::Devices { devices, extra } => {
            let extra = extra.expect("NVIDIA always reports extras").downcast::<Extra>().unwrap();
            (devices, extra)
        }
        Discovery::Absent => panic!("absent"),
        Discovery::Malformed { key, error } => panic!("malformed {key}: {error}"),
    }
}

fn malformed_key(d: Discovery) -> String {
    match d {
        Discovery::Malformed { key, .. } => key,
        _ => panic!("expected a malformed registration"),
    }
}

#[test]
fn registration_reads_the_json_list() {
    // HAMi's documented example: two V100s, one on NUMA 1.
    let reg = format!(
        r#"[{{"id":"{GPU_1111}","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true}},
            {{"id":"{GPU_2222}","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}}]"#
    );
    let (devs, extra) = devices(discover(&[(keys::NVIDIA_REGISTER, &reg)]));
    assert_eq!(devs.len(), 2);
    assert_eq!((devs[0].id.as_str(), devs[0].index, devs[0].numa), (GPU_1111, 0, 0));
    assert_eq!((devs[1].id.as_str(), devs[1].index, devs[1].numa), (GPU_2222, 1, 1));
    assert_eq!((devs[1].count, devs[1].devmem, devs[1].devcore), (10, MemMiB(32768), 100));
    assert_eq!(&*devs[1].mode, "hami-core");
    assert!(devs.iter().all(|d| d.health));
    assert!(extra.cordon.is_empty());
    assert_eq!(extra.scores, PairScores::default());
}

#[test]
fn registration_reads_the_legacy_colon_list() {
    // The colon form: 7 fields (mode hami-core, index 0) and 9 fields.
    let reg = format!(
        "{GPU_1111},10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:{GPU_2222},10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,1,true,1,hami-core:"
    );
    let (devs, _) = devices(discover(&[(keys::NVIDIA_REGISTER, &reg)]));
    assert_eq!(devs.len(), 2);
    assert_eq!((devs[0].index, &*devs[0].mode, devs[0].numa), (0, "hami-core", 0));
    assert_eq!((devs[1].index, &*devs[1].mode, devs[1].numa), (1, "hami-core", 1));
    assert_eq!(&*devs[1].ty, "NVIDIA-Tesla V100-PCIE-32GB");
}

#[test]
fn registration_builder_round_trips_through_discovery() {
    let b = node("a").gpu(gpu("GPU-0", 16384).numa(1)).gpu(gpu("GPU-1", 8192).mig(a100_profiles()));
    let (devs, _) = devices(Nvidia::new(&chart()).discover(&b.view()));
    let want: Vec<DeviceInfo> = b.gpus.iter().map(|g| g.info.clone()).collect();
    assert_eq!(devs, want);
}

#[test]
fn empty_or_missing_registration_means_no_devices() {
    // An empty array or null is "no devices".
    assert!(matches!(discover(&[]), Discovery::Absent));
    assert!(matches!(discover(&[(keys::NVIDIA_REGISTER, "[]")]), Discovery::Absent));
    assert!(matches!(discover(&[(keys::NVIDIA_REGISTER, "null")]), Discovery::Absent));
}

#[test]
fn malformed_registration_is_reported_under_its_key() {
    // A parse error makes the vendor's read fail.
    for reg in [
        "[{",
        r#"{"id":"GPU-0"}"#,
        r#"[{"id":"GPU-0","count":"ten"}]"#,
        "GPU-0,10,32768,100,NVIDIA-T4,0:",
        "GPU-0,10,32768,100,NVIDIA-T4,0,maybe:",
        "no separator",
    ] {
        assert_eq!(malformed_key(discover(&[(keys::NVIDIA_REGISTER, reg)])), keys::NVIDIA_REGISTER, "{reg:?}");
    }
}

#[test]
fn pair_scores_are_read_and_a_bad_value_fails_the_registration() {
    // Pair scores are read; as in HAMi, a parse error fails the whole NVIDIA registration.
    let reg = node("a").gpus(1, 16384).view().metadata.annotations[keys::NVIDIA_REGISTER].clone();
    let scores = r#"[{"uuid":"GPU-a","score":{"GPU-b":400,"GPU-c":20}},{"uuid":"GPU-b","score":{"GPU-a":400,"GPU-c":20}},{"uuid":"GPU-c","score":{"GPU-a":20,"GPU-b":20}}]"#;
    let (_, extra) = devices(discover(&[(keys::NVIDIA_REGISTER, &reg), (keys::NVIDIA_SCORE, scores)]));
    assert_eq!(extra.scores.score("GPU-a", "GPU-b"), 400);
    assert_eq!(extra.scores.score("GPU-c", "GPU-a"), 20);
    assert_eq!(extra.scores.score("GPU-a", "GPU-z"), 0, "missing entries count 0");
    for bad in ["not json", r#"{"uuid":"GPU-a"}"#, r#"[{"uuid":"GPU-a","score":{"GPU-b":"high"}}]"#] {
        let d = discover(&[(keys::NVIDIA_REGISTER, &reg), (keys::NVIDIA_SCORE, bad)]);
        assert_eq!(malformed_key(d), keys::NVIDIA_SCORE, "{bad:?}");
    }
}

#[test]
fn cordon_list_is_trimmed_and_skips_empties() {
    // A cordon list as HAMi documents it: `GPU-a, GPU-c` (spaces tolerated).
    let reg = node("a").gpus(1, 16384).view().metadata.annotations[keys::NVIDIA_REGISTER].clone();
    let (_, extra) = devices(discover(&[(keys::NVIDIA_REGISTER, &reg), (keys::NVIDIA_CORDON, "GPU-a, GPU-c,, ")]));
    assert_eq!(extra.cordon, ["GPU-a", "GPU-c"]);
}

// ---------------------------------------------------------------------------------------------
// Annotations written by Filter (device keys, MIG allocations) and read back

fn decide(n: &NodeBuilder, p: &PodBuilder) -> (crate::sched::NodeSnapshot, PodRequest, Vec<ContainerDevices>) {
    let v = vendors();
    let snap = n.snapshot(&v);
    let req = p.request_with(&v);
    let fit = fit_pod_devices(&snap, &req, &v, &NoQuota, &mut Scratch::default()).unwrap();
    let cs = fit.devices.vendor(VendorId(0)).unwrap().to_vec();
    (snap, req, cs)
}

fn written(snap: &crate::sched::NodeSnapshot, req: &PodRequest, cs: &[ContainerDevices]) -> Vec<(String, String)> {
    let cx = WriteCx { node: &snap.name, devs: &snap.devices, devices: cs, pod: req, unix_s: 1787293239, unix_ns: 0 };
    let mut out = Vec::new();
    Nvidia::new(&chart()).annotations(&cx, &mut out);
    out
}

#[test]
fn worked_example_writes_both_device_keys() {
    // HAMi's worked example: 1 GPU, 3000 MiB, percentage unset, cores = defaultCores (0).
    let n = node("node-a").gpu(gpu(GPU_1111, 32768)).gpu(gpu(GPU_2222, 32768).used(1, 8000, 30));
    let (snap, req, cs) = decide(&n, &pod().name("train-0").gpu(1).mem_mib(3000));
    let want = format!("{GPU_1111},NVIDIA,3000,0:;");
    assert_eq!(
        written(&snap, &req, &cs),
        [(keys::NVIDIA_TO_ALLOCATE.to_owned(), want.clone()), (keys::NVIDIA_ALLOCATED.to_owned(), want)]
    );
}

#[test]
fn count_only_pod_after_the_webhook_takes_the_whole_card() {
    // With the webhook's 100 cores the annotation is `GPU-…1111,NVIDIA,32768,100:;` on a 32 GiB
    // card.
    let n = node("node-a").gpu(gpu(GPU_1111, 32768));
    let (snap, req, cs) = decide(&n, &pod().gpu(1).cores(100));
    assert_eq!(written(&snap, &req, &cs)[1].1, format!("{GPU_1111},NVIDIA,32768,100:;"));
}

#[test]
fn mig_decision_writes_the_mig_allocations_key() {
    // 1g.5gb placed from the top (start 6), as in HAMi's example; the entry takes the profile's
    // memory and cores.
    let n = node("node-a").gpu(gpu("GPU-aa11", 40960).mig(a100_profiles()));
    let (snap, req, cs) = decide(&n, &pod().gpu(1).mem_mib(4000));
    let out = written(&snap, &req, &cs);
    assert_eq!(out[0], (keys::NVIDIA_TO_ALLOCATE.to_owned(), "GPU-aa11,NVIDIA,4864,15:;".to_owned()));
    assert_eq!(out[1], (keys::NVIDIA_ALLOCATED.to_owned(), "GPU-aa11,NVIDIA,4864,15:;".to_owned()));
    assert_eq!(
        out[2],
        (
            keys::NVIDIA_MIG_ALLOCATIONS.to_owned(),
            r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-aa11","profile":"1g.5gb","placement":{"start":6,"size":1}}]"#
                .to_owned()
        )
    );
    assert_eq!(out.len(), 3);
}

#[test]
fn mig_allocations_index_containers_in_the_padded_list() {
    // containerIndex is the position in the NVIDIA list (init containers first,
    // padded), deviceIndex the position inside the container.
    let n = node("node-a").gpu(gpu("GPU-aa11", 40960).mig(a100_profiles()));
    let p = pod().init("setup").main().gpu(2).mem_mib(9000);
    let (snap, req, cs) = decide(&n, &p);
    let out = written(&snap, &req, &cs);
    assert_eq!(out[1].1, ";GPU-aa11,NVIDIA,9984,29:GPU-aa11,NVIDIA,9984,29:;");
    assert_eq!(
        out[2].1,
        concat!(
            r#"[{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-aa11","profile":"2g.10gb","placement":{"start":0,"size":2}},"#,
            r#"{"containerIndex":1,"deviceIndex":1,"gpuUUID":"GPU-aa11","profile":"2g.10gb","placement":{"start":2,"size":2}}]"#
        )
    );
}

fn allocated_pod(annotations: &[(&str, &str)]) -> PodView {
    let mut p = pod();
    for (k, v) in annotations {
        p = p.annotation(k, v);
    }
    p.view()
}

fn slot(profile: &str, start: u32, size: u32) -> Option<MigSlot> {
    Some(MigSlot { profile: Arc::from(profile), placement: MigPlacement { start, size } })
}

#[test]
fn decode_allocation_attaches_mig_slots() {
    let v = Nvidia::new(&chart());
    // No allocated key: nothing to read back.
    assert_eq!(v.decode_allocation(&allocated_pod(&[])).unwrap(), None);

    let mig = r#"[{"containerIndex":1,"deviceIndex":1,"gpuUUID":"GPU-aa11","profile":"2g.10gb","placement":{"start":2,"size":2}},
                  {"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-aa11","profile":"2g.10gb","placement":{"start":0,"size":2}}]"#;
    let p = allocated_pod(&[
        (keys::NVIDIA_ALLOCATED, ";GPU-aa11,NVIDIA,9984,29:GPU-aa11,NVIDIA,9984,29:;"),
        (keys::NVIDIA_MIG_ALLOCATIONS, mig),
    ]);
    let cs = v.decode_allocation(&p).unwrap().unwrap();
    assert_eq!(cs.len(), 3, "the empty piece after the final ';' is kept");
    assert!(cs[0].is_empty());
    assert_eq!(cs[1][0].mig, slot("2g.10gb", 0, 2));
    assert_eq!(cs[1][1].mig, slot("2g.10gb", 2, 2));
    assert_eq!(cs[1][0].usedmem, MemMiB(9984));
}

#[test]
fn decode_allocation_falls_back_by_gpu_and_ignores_bad_mig_values() {
    let v = Nvidia::new(&chart());
    // An entry whose position is gone attaches to the first free entry on its GPU; one whose GPU
    // is not in the pod attaches to no entry (it is read by `decode_held`).
    let mig = r#"[{"containerIndex":5,"deviceIndex":0,"gpuUUID":"GPU-bb22","profile":"1g.5gb","placement":{"start":6,"size":1}},
                  {"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-zz99","profile":"1g.5gb","placement":{"start":5,"size":1}}]"#;
    let p = allocated_pod(&[
        (keys::NVIDIA_ALLOCATED, "GPU-aa11,NVIDIA,4864,15:;GPU-bb22,NVIDIA,4864,15:;"),
        (keys::NVIDIA_MIG_ALLOCATIONS, mig),
    ]);
    let cs = v.decode_allocation(&p).unwrap().unwrap();
    assert_eq!(cs[0][0].mig, None);
    assert_eq!(cs[1][0].mig, slot("1g.5gb", 6, 1));

    // An invalid MIG value is ignored, as HAMi's usage rebuild does.
    for bad in [
        "not json",
        r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"","profile":"1g.5gb","placement":{"start":6,"size":1}}]"#,
    ] {
        let p = allocated_pod(&[
            (keys::NVIDIA_ALLOCATED, "GPU-aa11,NVIDIA,4864,15:;"),
            (keys::NVIDIA_MIG_ALLOCATIONS, bad),
        ]);
        let cs = v.decode_allocation(&p).unwrap().unwrap();
        assert_eq!(cs[0][0].mig, None, "{bad:?}");
    }

    // A malformed device value rejects the pod's annotations as a whole, as in HAMi.
    let p = allocated_pod(&[(keys::NVIDIA_ALLOCATED, "GPU-aa11,NVIDIA,lots,15:;")]);
    assert!(v.decode_allocation(&p).is_err());
}

#[test]
fn mig_reservations_no_entry_consumed_are_read_as_held_placements() {
    // HAMi restores reservations left after every entry took its own, on GPUs the pod has an entry
    // on or not; they keep their placements taken.
    let v = Nvidia::new(&chart());
    let mig = r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-aa11","profile":"1g.5gb","placement":{"start":6,"size":1}},
                  {"containerIndex":0,"deviceIndex":1,"gpuUUID":"GPU-aa11","profile":"1g.5gb","placement":{"start":5,"size":1}},
                  {"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-zz99","profile":"2g.10gb","placement":{"start":0,"size":2}}]"#;
    let p =
        allocated_pod(&[(keys::NVIDIA_ALLOCATED, "GPU-aa11,NVIDIA,4864,15:;"), (keys::NVIDIA_MIG_ALLOCATIONS, mig)]);
    let cs = v.decode_allocation(&p).unwrap().unwrap();
    assert_eq!(cs[0][0].mig, slot("1g.5gb", 6, 1));
    let held = v.decode_held(&p);
    let want = |u: &str, profile: &str, start, size| (DeviceUuid::new(u), slot(profile, start, size).unwrap());
    assert_eq!(held, [want("GPU-aa11", "1g.5gb", 5, 1), want("GPU-zz99", "2g.10gb", 0, 2)]);

    // Every reservation consumed, no MIG key, or an invalid one: nothing held.
    let p = allocated_pod(&[
        (keys::NVIDIA_ALLOCATED, "GPU-aa11,NVIDIA,4864,15:GPU-aa11,NVIDIA,4864,15:;"),
        (keys::NVIDIA_MIG_ALLOCATIONS, mig),
    ]);
    assert_eq!(v.decode_held(&p), [want("GPU-zz99", "2g.10gb", 0, 2)]);
    assert!(v.decode_held(&allocated_pod(&[(keys::NVIDIA_ALLOCATED, "GPU-aa11,NVIDIA,4864,15:;")])).is_empty());
    let p = allocated_pod(&[
        (keys::NVIDIA_ALLOCATED, "GPU-aa11,NVIDIA,4864,15:;"),
        (keys::NVIDIA_MIG_ALLOCATIONS, "not json"),
    ]);
    assert!(v.decode_held(&p).is_empty());
}

#[test]
fn written_mig_annotations_decode_back_to_the_same_slots() {
    let n = node("node-a").gpu(gpu("GPU-aa11", 40960).mig(a100_profiles()));
    let (snap, req, cs) = decide(&n, &pod().gpu(2).mem_mib(4000));
    let out = written(&snap, &req, &cs);
    let p = allocated_pod(&[(&out[1].0, &out[1].1), (&out[2].0, &out[2].1)]);
    let back = Nvidia::new(&chart()).decode_allocation(&p).unwrap().unwrap();
    assert_eq!(back[0][0].mig, slot("1g.5gb", 6, 1));
    assert_eq!(back[0][1].mig, slot("1g.5gb", 5, 1));
    assert_eq!(
        back[0].iter().map(|d| d.mig.clone()).collect::<Vec<_>>(),
        cs[0].iter().map(|d| d.mig.clone()).collect::<Vec<_>>()
    );
    assert_eq!(back[0][0].uuid, DeviceUuid::new("GPU-aa11"));
}

// ---------------------------------------------------------------------------------------------
// Ties between equal devices

/// The NVIDIA list Filter would write for `p` on `n`.
fn placed(n: &NodeBuilder, p: &PodBuilder) -> String {
    let (_, _, cs) = decide(n, p);
    codec::encode_pod_devices(&cs)
}

#[test]
fn two_equal_devices_give_the_pod_the_second() {
    // HAMi: fitInDevices sorts the node's devices with sort.Sort (insertion sort for up to 12,
    // which keeps equal devices in registration order) and NVIDIA's Fit walks the list from the
    // end, so of two idle GPUs GPU-1 is tried first; HAMi's own tests expect exactly this. Key
    // chains end with the device index ascending, so with indexes in registration order the
    // highest index, GPU-1 again, is tried first. Topology-aware collects in walk order and takes
    // the first of equally connected GPUs; MIG devices are walked the same way.
    let two = || node("n1").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-1", 16384));
    let mig = || node("n1").gpu(gpu("GPU-0", 40960).mig(a100_profiles())).gpu(gpu("GPU-1", 40960).mig(a100_profiles()));
    let policy = |p: &str| pod().gpu(1).mem_mib(1000).annotation(keys::GPU_SCHEDULER_POLICY, p);
    let rows = [
        ("spread, the default", two(), pod().gpu(1).mem_mib(1000), "GPU-1,NVIDIA,1000,0:;"),
        ("binpack", two(), policy("binpack"), "GPU-1,NVIDIA,1000,0:;"),
        ("mutex", two(), policy("mutex"), "GPU-1,NVIDIA,1000,0:;"),
        ("topology-aware", two(), policy("topology-aware"), "GPU-1,NVIDIA,1000,0:;"),
        (
            "numa-bind",
            two(),
            pod().gpu(1).mem_mib(1000).annotation(keys::NVIDIA_NUMA_BIND, "true"),
            "GPU-1,NVIDIA,1000,0:;",
        ),
        ("key chain binpack,numa", two(), policy("binpack,numa"), "GPU-1,NVIDIA,1000,0:;"),
        ("key chain spread,numa", two(), policy("spread,numa"), "GPU-1,NVIDIA,1000,0:;"),
        ("key chain numa", two(), policy("numa"), "GPU-1,NVIDIA,1000,0:;"),
        ("two GPUs", two(), pod().gpu(2).mem_mib(1000), "GPU-1,NVIDIA,1000,0:GPU-0,NVIDIA,1000,0:;"),
        (
            "two GPUs, key chain binpack,numa",
            two(),
            pod().gpu(2).mem_mib(1000).annotation(keys::GPU_SCHEDULER_POLICY, "binpack,numa"),
            "GPU-1,NVIDIA,1000,0:GPU-0,NVIDIA,1000,0:;",
        ),
        ("MIG", mig(), pod().gpu(1).mem_mib(4000), "GPU-1,NVIDIA,4864,15:;"),
    ];
    for (what, n, p, want) in rows {
        assert_eq!(placed(&n, &p), want, "{what}");
    }
}

#[test]
fn key_chains_break_ties_by_index_and_single_values_by_registration_order() {
    // A chain's last key is the device index ascending; single-value
    // comparisons have none, so equal devices keep registration order. With the indexes the
    // other way round (GPU-0 has index 5, GPU-1 index 2), the chain tries GPU-0 first and the
    // single values GPU-1.
    let reversed = node("n1").gpu(gpu("GPU-0", 16384).index(5)).gpu(gpu("GPU-1", 16384).index(2));
    let policy = |p: &str| pod().gpu(1).mem_mib(1000).annotation(keys::GPU_SCHEDULER_POLICY, p);
    let rows = [
        ("binpack,numa", "GPU-0,NVIDIA,1000,0:;"),
        ("spread,numa", "GPU-0,NVIDIA,1000,0:;"),
        ("numa", "GPU-0,NVIDIA,1000,0:;"),
        ("spread", "GPU-1,NVIDIA,1000,0:;"),
        ("binpack", "GPU-1,NVIDIA,1000,0:;"),
    ];
    for (text, want) in rows {
        assert_eq!(placed(&reversed, &policy(text)), want, "{text}");
    }
}

#[test]
fn a_pods_containers_share_one_device_order() {
    // HAMi sorts one device list in place for every request of the pod on a node, so ties in a
    // later container's sort keep the order the earlier sorts left, not registration order.
    // GPU-2 is busy, so the first container's spread sort puts it first (GPU-2, GPU-0, GPU-1)
    // and the walk takes GPU-1, leaving it as busy as GPU-2. The second container's sort moves
    // GPU-1 forward, behind GPU-2 (GPU-2, GPU-1, GPU-0), so it gets GPU-0 and then GPU-1; from
    // registration order it would have got GPU-0 and GPU-2.
    let n = node("n1").gpu(gpu("GPU-0", 16384)).gpu(gpu("GPU-1", 16384)).gpu(gpu("GPU-2", 16384).used(1, 4000, 10));
    let p = pod().gpu(1).mem_mib(4000).cores(10).container("second").gpu(2).mem_mib(1000);
    assert_eq!(placed(&n, &p), "GPU-1,NVIDIA,4000,10:;GPU-0,NVIDIA,1000,0:GPU-1,NVIDIA,1000,0:;");
    // Each init container starts again from registration order: both init containers see the
    // busy GPU-2 sorted first and take GPU-1.
    let p = pod().init("a").gpu(1).mem_mib(4000).cores(10).init("b").gpu(1).mem_mib(4000).cores(10).main();
    assert_eq!(placed(&n, &p), "GPU-1,NVIDIA,4000,10:;GPU-1,NVIDIA,4000,10:;;");
}

// ---------------------------------------------------------------------------------------------
// MIG profile choice

#[test]
fn mig_choice_takes_the_smallest_fitting_profile_and_places_small_ones_from_the_top() {
    let profiles = a100_profiles();
    let pl = |start, size| MigPlacement { start, size };
    let choose = |occupied: &[MigPlacement], m: u64| {
        mig::choose(&profiles, occupied, MemMiB(m)).map(|(p, placement)| (p.name.to_string(), placement))
    };
    type Choice = Option<(&'static str, MigPlacement)>;
    let rows: [(&str, &[MigPlacement], u64, Choice); 9] = [
        // HAMi tries 1g.* and 3g.* placements by start descending, others ascending.
        ("1g from the top", &[], 4000, Some(("1g.5gb", pl(6, 1)))),
        ("exactly the profile memory", &[], 4864, Some(("1g.5gb", pl(6, 1)))),
        ("2g from the bottom", &[], 4865, Some(("2g.10gb", pl(0, 2)))),
        ("3g from the top", &[], 15000, Some(("3g.20gb", pl(4, 4)))),
        ("7g", &[], 30000, Some(("7g.40gb", pl(0, 8)))),
        ("next 1g below an occupied one", &[pl(6, 1)], 4000, Some(("1g.5gb", pl(5, 1)))),
        ("3g at 0 when the top is taken", &[pl(4, 4)], 15000, Some(("3g.20gb", pl(0, 4)))),
        // The first profile with enough memory *that still has a free placement*.
        ("nothing fits a full GPU", &[pl(0, 8)], 1, None),
        ("more than every profile", &[], 40193, None),
    ];
    for (what, occ, m, want) in rows {
        assert_eq!(choose(occ, m), want.map(|(n, p)| (n.to_owned(), p)), "{what}");
    }
}

#[test]
fn mig_profiles_are_ordered_by_memory_then_slices() {
    // Profiles are ordered by memoryMB ascending, then sliceCount ascending, stable.
    let profiles = vec![
        mig_profile("2g.10gb", 9984, 29, 2, &[0], 2),
        mig_profile("1g.10gb", 9984, 15, 1, &[3], 2),
        mig_profile("1g.5gb", 4864, 15, 1, &[0], 1),
    ];
    let (p, _) = mig::choose(&profiles, &[], MemMiB(5000)).unwrap();
    assert_eq!(&*p.name, "1g.10gb");
    // A profile without a free placement is passed over for the next larger one.
    let (p, pl) = mig::choose(&profiles, &[MigPlacement { start: 3, size: 1 }], MemMiB(5000)).unwrap();
    assert_eq!((&*p.name, pl), ("2g.10gb", MigPlacement { start: 0, size: 2 }));
}
