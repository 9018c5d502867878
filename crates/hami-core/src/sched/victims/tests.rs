use proptest::prelude::*;

use super::*;
use crate::devices::NoQuota;
use crate::sched::{NodeSnapshot, Scratch, fit};
use crate::testing::{NodeBuilder, charge, gpu, node, pod, vendors};

/// A node of `gpus` idle devices of 16384 MiB, 100 cores and `slots` slots each.
fn cluster(gpus: usize, slots: u32) -> NodeSnapshot {
    let mut n: NodeBuilder = node("n");
    for i in 0..gpus {
        let mut g = gpu(&format!("GPU-{i}"), 16384);
        g.info.count = slots;
        n = n.gpu(g);
    }
    n.snapshot(&vendors())
}

/// The victims for a pod asking one device with `mem` MiB and `cores` cores, by the real fit.
fn search(snap: &NodeSnapshot, holders: &[Holder<'_>], mem: u64, cores: u32) -> Option<Vec<usize>> {
    let v = vendors();
    let req = pod().gpu(1).mem_mib(mem).cores(cores).name("hi").request_with(&v);
    let mut s = Scratch::default();
    let mut fits = |devs: &[DeviceUsage]| {
        let node = NodeSnapshot::new(snap.name.clone(), devs.to_vec(), snap.extras.clone());
        fit::fit_pod(&node, &req, &v, &NoQuota, &mut s).is_ok()
    };
    fewest(&snap.devices, holders, &mut fits)
}

struct H {
    gpu: usize,
    mem: u64,
    priority: i32,
    started: i64,
    evictable: bool,
}

fn h(gpu: usize, mem: u64, priority: i32) -> H {
    H { gpu, mem, priority, started: 0, evictable: true }
}

fn charges(hs: &[H]) -> Vec<Vec<Charge>> {
    hs.iter().map(|x| vec![charge(&format!("GPU-{}", x.gpu), 1, x.mem, 0)]).collect()
}

fn holders<'a>(hs: &[H], cs: &'a [Vec<Charge>]) -> Vec<Holder<'a>> {
    hs.iter()
        .zip(cs)
        .map(|(x, c)| Holder { priority: x.priority, started: x.started, evictable: x.evictable, charges: c })
        .collect()
}

#[test]
fn the_victims_are_the_fewest_then_the_lowest_priorities_then_the_latest_started() {
    struct Case {
        what: &'static str,
        hs: Vec<H>,
        mem: u64,
        want: Option<Vec<usize>>,
    }
    let started = |mut x: H, t| {
        x.started = t;
        x
    };
    let fixed = |mut x: H| {
        x.evictable = false;
        x
    };
    let cases = [
        Case {
            what: "one pod frees enough",
            hs: vec![h(0, 10000, 1), h(1, 10000, 1)],
            mem: 12000,
            want: Some(vec![0]),
        },
        Case {
            what: "one pod of higher priority beats two of lower",
            hs: vec![h(0, 6000, 1), h(0, 6000, 2), h(1, 12000, 8)],
            mem: 12000,
            want: Some(vec![2]),
        },
        Case {
            what: "among single pods, the lowest priority",
            hs: vec![h(0, 12000, 5), h(1, 12000, 3)],
            mem: 12000,
            want: Some(vec![1]),
        },
        Case {
            what: "among equal priorities, the most recently started",
            hs: vec![started(h(0, 12000, 3), 200), started(h(1, 12000, 3), 100)],
            mem: 12000,
            want: Some(vec![0]),
        },
        Case {
            what: "two on one device when no single pod is enough",
            hs: vec![h(0, 8000, 1), h(0, 8000, 2), h(1, 9000, 1), h(1, 7000, 9)],
            mem: 16000,
            want: Some(vec![0, 1]),
        },
        Case {
            what: "a pod that may not be evicted stays",
            hs: vec![fixed(h(0, 12000, 1)), h(1, 12000, 9)],
            mem: 12000,
            want: Some(vec![1]),
        },
        Case {
            what: "nothing evictable",
            hs: vec![fixed(h(0, 12000, 1)), fixed(h(1, 12000, 1))],
            mem: 12000,
            want: None,
        },
        Case { what: "more than a device holds", hs: vec![h(0, 1000, 1)], mem: 20000, want: None },
    ];
    let snap = cluster(2, 10);
    for c in cases {
        let cs = charges(&c.hs);
        assert_eq!(search(&snap, &holders(&c.hs, &cs), c.mem, 0), c.want, "{}", c.what);
    }
}

#[test]
fn beyond_the_exhaustive_pool_the_greedy_pass_evicts_the_lowest_priorities() {
    // 26 pods of 600 MiB on one device (784 MiB free): 2 000 MiB needs three of them gone.
    let snap = cluster(1, 100);
    let hs: Vec<H> = (0..26).map(|i| h(0, 600, 100 - i)).collect();
    let cs = charges(&hs);
    assert_eq!(search(&snap, &holders(&hs, &cs), 2000, 0), Some(vec![23, 24, 25]));
}

#[test]
fn cores_count_as_memory_does() {
    let snap = cluster(1, 10);
    let cs = [vec![charge("GPU-0", 1, 1000, 60)], vec![charge("GPU-0", 1, 1000, 30)]];
    let hs = [
        Holder { priority: 1, started: 0, evictable: true, charges: &cs[0] },
        Holder { priority: 0, started: 0, evictable: true, charges: &cs[1] },
    ];
    assert_eq!(search(&snap, &hs, 1000, 50), Some(vec![0]), "only the 60-core pod frees 50 cores");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Whatever the holders, the victims found are evictable and their release makes the pod
    /// fit; no smaller set would (the search is exhaustive up to three); and `None` means that
    /// evicting every evictable pod would not be enough.
    #[test]
    fn victims_free_enough_and_no_fewer_would(
        pods in prop::collection::vec((0usize..2, 1u64..9000, -3i32..3, any::<bool>()), 0..8),
        mem in 1000u64..16384,
    ) {
        let snap = cluster(2, 4);
        let hs: Vec<H> = pods.iter().map(|&(g, m, p, e)| H { gpu: g, mem: m, priority: p, started: 0, evictable: e }).collect();
        let cs = charges(&hs);
        let holders = holders(&hs, &cs);
        let v = vendors();
        let req = pod().gpu(1).mem_mib(mem).name("hi").request_with(&v);
        let mut s = Scratch::default();
        let mut fits = |devs: &[DeviceUsage]| {
            let node = NodeSnapshot::new(snap.name.clone(), devs.to_vec(), snap.extras.clone());
            fit::fit_pod(&node, &req, &v, &NoQuota, &mut s).is_ok()
        };
        let evictable: Vec<usize> = (0..hs.len()).filter(|&i| hs[i].evictable).collect();
        match fewest(&snap.devices, &holders, &mut fits) {
            None => prop_assert!(evictable.is_empty() || !fits(&usage_without(&snap.devices, &holders, &evictable))),
            Some(set) => {
                prop_assert!(!set.is_empty());
                prop_assert!(set.iter().all(|&i| hs[i].evictable));
                prop_assert!(fits(&usage_without(&snap.devices, &holders, &set)));
                if set.len() <= EXACT_SIZE + 1 {
                    for smaller in 1..set.len() {
                        for other in combos(&evictable, smaller) {
                            prop_assert!(!fits(&usage_without(&snap.devices, &holders, &other)), "{other:?} is smaller than {set:?}");
                        }
                    }
                }
            }
        }
    }
}

/// Every subset of `pool` with `k` members.
fn combos(pool: &[usize], k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for (a, &i) in pool.iter().enumerate() {
        for mut rest in combos(&pool[a + 1..], k - 1) {
            rest.insert(0, i);
            out.push(rest);
        }
    }
    out
}
