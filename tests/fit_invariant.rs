//! The allocation invariant (STYLE.md, "Property tests"): whatever `fit_pod_devices` accepts,
//! collapsed into per-device charges (init containers at their peak, regular containers summed) and
//! applied to the node's usage, keeps every device within its slot count, memory and cores. Random
//! NVIDIA nodes, random pods.

use std::sync::LazyLock;

use proptest::prelude::*;
use proptest::sample::select;

use hami_rs::devices::{NoQuota, Vendors};
use hami_rs::model::annotations as keys;
use hami_rs::model::{DeviceUuid, PodRequest};
use hami_rs::sched::accounting::{Layout, apply, collapse};
use hami_rs::sched::fit::fit_pod_devices;
use hami_rs::sched::{NodeSnapshot, Scratch};
use hami_rs::testing::{Gpu, NodeBuilder, PodBuilder, gpu, node, pod, vendors};

static VENDORS: LazyLock<Vendors> = LazyLock::new(vendors);

/// Policies the property draws from: device orders, topology-aware choice and mutex.
const POLICIES: [&str; 5] = ["binpack", "spread", "mutex", "topology-aware", "binpack,numa"];

/// One GPU: 1–10 slots, 1024–81920 MiB, 100 cores, NUMA 0–2, one in ten unhealthy. Each usage
/// field is often idle, sometimes anywhere within capacity, sometimes exactly full.
fn any_gpu() -> impl Strategy<Value = Gpu> {
    (1u32..=10, 1024u64..=81920).prop_flat_map(|(count, mem)| {
        (
            prop_oneof![3 => Just(0), 2 => 0..=count, 1 => Just(count)],
            prop_oneof![3 => Just(0), 2 => 0..=mem, 1 => Just(mem)],
            prop_oneof![3 => Just(0u32), 2 => 0u32..=100, 1 => Just(100)],
            0i32..=2,
            prop::bool::weighted(0.1),
        )
            .prop_map(move |(slots, used_mem, cores, numa, sick)| {
                let g = gpu("GPU", mem).count(count).used(slots, used_mem, cores).numa(numa);
                if sick { g.unhealthy() } else { g }
            })
    })
}

fn any_node() -> impl Strategy<Value = NodeBuilder> {
    prop::collection::vec(any_gpu(), 1..=8).prop_map(|gpus| {
        gpus.into_iter().enumerate().fold(node("n"), |n, (i, mut g)| {
            g.info.id = DeviceUuid::new(&format!("GPU-{i}"));
            n.gpu(g)
        })
    })
}

/// One container's NVIDIA limits: count, optional memory, percentage and cores.
#[derive(Clone, Debug)]
struct Limits {
    nums: u32,
    mem: Option<u64>,
    pct: Option<u32>,
    cores: Option<u32>,
}

/// A container that requests nothing (one in five) or some NVIDIA GPUs: mostly one, mostly small
/// memory and cores, sometimes whole devices (100 cores, 100 percent, or the default whole memory).
fn any_container() -> impl Strategy<Value = Option<Limits>> {
    let limits = (
        prop_oneof![3 => Just(1u32), 1 => 1u32..=4],
        prop::option::of(prop_oneof![3 => 1u64..=4096, 1 => 1u64..=40960]),
        prop::option::weighted(0.3, 0u32..=100),
        prop::option::of(prop_oneof![3 => 0u32..=50, 1 => Just(100), 1 => 0u32..=120]),
    )
        .prop_map(|(nums, mem, pct, cores)| Limits { nums, mem, pct, cores });
    prop_oneof![1 => Just(None), 4 => limits.prop_map(Some)]
}

#[derive(Clone, Debug)]
struct PodSpec {
    /// Init containers in order; true for a native sidecar.
    inits: Vec<(bool, Option<Limits>)>,
    apps: Vec<Option<Limits>>,
    policy: &'static str,
    numa_bind: bool,
}

fn any_pod() -> impl Strategy<Value = PodSpec> {
    (
        prop::collection::vec((any::<bool>(), any_container()), 0..=2),
        prop::collection::vec(any_container(), 1..=3),
        select(&POLICIES[..]),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(inits, apps, policy, numa_bind)| PodSpec { inits, apps, policy, numa_bind })
}

fn with_limits(mut p: PodBuilder, l: &Option<Limits>) -> PodBuilder {
    let Some(l) = l else { return p };
    p = p.gpu(l.nums);
    if let Some(m) = l.mem {
        p = p.mem_mib(m);
    }
    if let Some(pct) = l.pct {
        p = p.mem_pct(pct);
    }
    if let Some(c) = l.cores {
        p = p.cores(c);
    }
    p
}

fn build_pod(s: &PodSpec) -> PodRequest {
    let mut p = with_limits(pod(), &s.apps[0]);
    for (i, l) in s.apps.iter().enumerate().skip(1) {
        p = with_limits(p.container(&format!("c{i}")), l);
    }
    for (i, (sidecar, l)) in s.inits.iter().enumerate() {
        let name = format!("i{i}");
        p = with_limits(if *sidecar { p.sidecar(&name) } else { p.init(&name) }, l);
    }
    p = p.annotation(keys::GPU_SCHEDULER_POLICY, s.policy);
    if s.numa_bind {
        p = p.annotation(keys::NVIDIA_NUMA_BIND, "true");
    }
    p.request_with(&VENDORS)
}

fn check(snap: &NodeSnapshot, req: &PodRequest, spec: &PodSpec) -> Result<(), TestCaseError> {
    let mut s = Scratch::default();
    let Ok(fit) = fit_pod_devices(snap, req, &VENDORS, &NoQuota, &mut s) else { return Ok(()) };
    let before = |u: &DeviceUuid| snap.devices.iter().find(|d| &d.info.id == u);

    // One entry per container per vendor, empty where unused (HAMi pads by device model and so
    // can leave a vendor's list short; hami-rs keeps every container's position).
    for (_, list) in &fit.devices.0 {
        prop_assert_eq!(list.len(), req.containers.len(), "entries per vendor list");
    }
    for (ci, reqs) in req.containers.iter().enumerate() {
        let Some(r) = reqs.first() else {
            for (_, list) in &fit.devices.0 {
                prop_assert!(list[ci].is_empty(), "container {} requests nothing", ci);
            }
            continue;
        };
        let picked = &fit.devices.vendor(r.vendor).unwrap()[ci];
        // Ok means the request got exactly `nums` distinct, healthy devices.
        prop_assert_eq!(picked.len(), r.nums as usize, "container {}", ci);
        let mut ids: Vec<&str> = picked.iter().map(|d| d.uuid.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(ids.len(), picked.len(), "container {} got a device twice", ci);
        for d in picked {
            let dev = before(&d.uuid).unwrap();
            prop_assert!(dev.health, "container {} got unhealthy {}", ci, d.uuid);
            // Under mutex only devices idle before the pod are chosen.
            if spec.policy == "mutex" {
                prop_assert_eq!(dev.used, 0, "mutex container {} got busy {}", ci, d.uuid);
            }
        }
        // With numa-bind, one request's devices share a NUMA node.
        if spec.numa_bind {
            let numa = before(&picked[0].uuid).unwrap().info.numa;
            prop_assert!(picked.iter().all(|d| before(&d.uuid).unwrap().info.numa == numa), "container {}", ci);
        }
    }

    // STYLE.md: the placement applied to the node stays within every device's capacity, both
    // while init containers may run (their peak counts) and after they are released (only the
    // regular containers count).
    let info = |u: &DeviceUuid| before(u).map(|d| d.info.clone());
    for init_released in [false, true] {
        let layout = Layout { n_init: req.n_init, sidecars: req.sidecars.clone(), init_released };
        let charges = collapse(&fit.devices, &layout, &VENDORS, &info);
        let mut devs = snap.devices.clone();
        let unmatched = apply(&mut devs, &charges);
        prop_assert!(unmatched.0.is_empty(), "unmatched {:?}", unmatched);
        for d in &devs {
            prop_assert!(
                d.within_capacity(),
                "{} over capacity (init released {}): used {}/{}, mem {}/{}, cores {}/{}; charges {:?}",
                d.info.id,
                init_released,
                d.used,
                d.info.count,
                d.used_mem.get(),
                d.info.devmem.get(),
                d.used_cores,
                d.info.devcore,
                charges
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn accepted_placements_never_overcommit_a_device(n in any_node(), spec in any_pod()) {
        let snap = n.snapshot(&VENDORS);
        let req = build_pod(&spec);
        check(&snap, &req, &spec)?;
    }
}

#[test]
fn the_property_sees_accepted_placements() {
    // Guards the generator: an idle node takes a one-GPU pod, so the invariant is exercised.
    let snap = node("n").gpus(2, 16384).snapshot(&VENDORS);
    let spec = PodSpec {
        inits: vec![(false, Some(Limits { nums: 1, mem: Some(4096), pct: None, cores: Some(30) }))],
        apps: vec![Some(Limits { nums: 2, mem: None, pct: Some(50), cores: None })],
        policy: "binpack",
        numa_bind: false,
    };
    let req = build_pod(&spec);
    let mut s = Scratch::default();
    assert!(fit_pod_devices(&snap, &req, &VENDORS, &NoQuota, &mut s).is_ok());
    check(&snap, &req, &spec).unwrap();
}
