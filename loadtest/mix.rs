//! The pod mix: which kinds of NVIDIA request the synthetic pods carry, in what proportions, and
//! the core/v1 Pod JSON built from one. Every pod is drawn from its own seeded generator, so pod
//! `i` of a run is the same whatever the concurrency or the order workers take pods in. Pure: no I/O.

use std::fmt;
use std::str::FromStr;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::{Value, json};

/// One kind of GPU request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// One whole GPU: `nvidia.com/gpu: 1` and `gpucores: 100` (what the webhook makes of a
    /// whole-memory request), so the device is exclusive.
    Whole,
    /// One GPU, a quarter, an eighth or a sixteenth of its memory in MiB (`gpumem`).
    Fraction,
    /// One GPU, 5, 10, 20 or 25 % of its memory (`gpumem-percentage`).
    Percent,
    /// One GPU, a sixteenth of its memory and 10–50 % of its cores (`gpucores`).
    Cores,
    /// Two or four GPUs of one node, an eighth of each one's memory.
    Multi,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Whole, Kind::Fraction, Kind::Percent, Kind::Cores, Kind::Multi];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Whole => "whole",
            Kind::Fraction => "fraction",
            Kind::Percent => "percent",
            Kind::Cores => "cores",
            Kind::Multi => "multi",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Weighted kinds, parsed from `whole:10,fraction:50,percent:20,cores:10,multi:10`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mix {
    weights: Vec<(Kind, u32)>,
    total: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("mix entry {0:?} is not KIND:WEIGHT")]
    Entry(String),
    #[error("unknown pod kind {0:?} (whole, fraction, percent, cores, multi)")]
    Kind(String),
    #[error("mix weights add up to zero")]
    Empty,
}

impl FromStr for Mix {
    type Err = Error;
    fn from_str(s: &str) -> Result<Mix, Error> {
        let mut weights: Vec<(Kind, u32)> = Vec::new();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (k, w) = entry.split_once(':').ok_or_else(|| Error::Entry(entry.to_owned()))?;
            let kind = Kind::ALL
                .into_iter()
                .find(|x| x.as_str().eq_ignore_ascii_case(k.trim()))
                .ok_or_else(|| Error::Kind(k.trim().to_owned()))?;
            let w: u32 = w.trim().parse().map_err(|_| Error::Entry(entry.to_owned()))?;
            match weights.iter_mut().find(|(x, _)| *x == kind) {
                Some((_, old)) => *old = old.saturating_add(w),
                None => weights.push((kind, w)),
            }
        }
        weights.retain(|(_, w)| *w > 0);
        let total = weights.iter().map(|(_, w)| *w).fold(0u32, u32::saturating_add);
        if total == 0 {
            return Err(Error::Empty);
        }
        Ok(Mix { weights, total })
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.weights.iter().map(|(k, w)| format!("{k}:{w}")).collect();
        f.write_str(&parts.join(","))
    }
}

impl Mix {
    /// The default mix of the issue: mostly fractional requests, some whole and multi-GPU pods.
    pub const DEFAULT: &'static str = "whole:10,fraction:50,percent:20,cores:10,multi:10";

    pub fn pick(&self, rng: &mut StdRng) -> Kind {
        let mut x = rng.random_range(0..self.total);
        for (k, w) in &self.weights {
            if x < *w {
                return *k;
            }
            x -= w;
        }
        // Unreachable while the weights add up to `total`; the first kind keeps it total.
        self.weights.first().map(|(k, _)| *k).unwrap_or(Kind::Fraction)
    }

    /// The share of each kind, in percent.
    #[cfg(test)]
    pub fn shares(&self) -> Vec<(Kind, f64)> {
        self.weights.iter().map(|(k, w)| (*k, f64::from(*w) * 100.0 / f64::from(self.total))).collect()
    }
}

/// The device shape requests are drawn for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub gpus_per_node: u32,
    /// MiB per device.
    pub gpu_mem: u64,
}

/// One pod's NVIDIA request (a single container).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Request {
    pub kind: Kind,
    pub gpus: u32,
    /// `nvidia.com/gpumem` in MiB.
    pub mem_mib: Option<u64>,
    /// `nvidia.com/gpumem-percentage`.
    pub mem_pct: Option<u32>,
    /// `nvidia.com/gpucores`.
    pub cores: Option<u32>,
}

impl Request {
    pub fn draw(mix: &Mix, shape: Shape, rng: &mut StdRng) -> Request {
        let kind = mix.pick(rng);
        let mem = |div: u64| (shape.gpu_mem / div).max(1);
        let one = |kind, mem_mib, mem_pct, cores| Request { kind, gpus: 1, mem_mib, mem_pct, cores };
        match kind {
            Kind::Whole => one(kind, None, None, Some(100)),
            Kind::Fraction => one(kind, Some(mem([4, 8, 16][rng.random_range(0..3)])), None, None),
            Kind::Percent => one(kind, None, Some([5, 10, 20, 25][rng.random_range(0..4)]), None),
            Kind::Cores => one(kind, Some(mem(16)), None, Some([10, 20, 30, 50][rng.random_range(0..4)])),
            Kind::Multi => {
                let gpus = [2u32, 4][rng.random_range(0..2)].min(shape.gpus_per_node.max(1));
                Request { kind, gpus, mem_mib: Some(mem(8)), mem_pct: None, cores: None }
            }
        }
    }

    /// Shape `i % 4` of four fixed requests, small next to any device so a long filter-only run
    /// does not fill the cluster with reservations: (a) one GPU, 1000 MiB, 10 % of its cores;
    /// (b) one GPU, 4000 MiB, 30 %; (c) two GPUs (at most the node's), 2000 MiB each; (d) one GPU,
    /// 25 % of its memory.
    pub fn four(shape: Shape, i: u64) -> Request {
        let one = |kind, mem_mib, mem_pct, cores| Request { kind, gpus: 1, mem_mib, mem_pct, cores };
        match i % 4 {
            0 => one(Kind::Cores, Some(1000), None, Some(10)),
            1 => one(Kind::Cores, Some(4000), None, Some(30)),
            2 => Request {
                kind: Kind::Multi,
                gpus: 2u32.min(shape.gpus_per_node.max(1)),
                mem_mib: Some(2000),
                mem_pct: None,
                cores: None,
            },
            _ => one(Kind::Percent, None, Some(25), None),
        }
    }

    /// The container limits under HAMi's NVIDIA resource names, quantities as strings.
    pub fn limits(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("nvidia.com/gpu".into(), self.gpus.to_string().into());
        if let Some(v) = self.mem_mib {
            m.insert("nvidia.com/gpumem".into(), v.to_string().into());
        }
        if let Some(v) = self.mem_pct {
            m.insert("nvidia.com/gpumem-percentage".into(), v.to_string().into());
        }
        if let Some(v) = self.cores {
            m.insert("nvidia.com/gpucores".into(), v.to_string().into());
        }
        m
    }

    /// Memory this request reserves on each of its devices, on a device of `devmem` MiB: the
    /// MiB asked for, else the percentage of the device, else the whole device (no default memory
    /// is configured).
    pub fn mem_on(&self, devmem: u64) -> u64 {
        match (self.mem_mib, self.mem_pct) {
            (Some(m), _) if m > 0 => m,
            (_, Some(p)) if (1..=100).contains(&p) => devmem * u64::from(p) / 100,
            _ => devmem,
        }
    }

    /// Cores per device, clamped to 100 as HAMi's fit does.
    pub fn cores_per_device(&self) -> u32 {
        self.cores.unwrap_or(0).min(100)
    }
}

/// What the load pods ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shapes {
    /// Each pod drawn from the mix with its own generator.
    Mix(Mix),
    /// The four fixed shapes, pod `i` taking shape `i % 4` (see [`Request::four`]).
    Four,
}

/// `--shapes`: which of [`Shapes`] (the mix itself comes from `--mix`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapesArg {
    Mix,
    Four,
}

impl FromStr for ShapesArg {
    type Err = String;
    fn from_str(s: &str) -> Result<ShapesArg, String> {
        match s.trim() {
            "mix" => Ok(ShapesArg::Mix),
            "four" => Ok(ShapesArg::Four),
            _ => Err(format!("{s:?} is neither \"mix\" nor \"four\"")),
        }
    }
}

impl fmt::Display for Shapes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shapes::Mix(m) => write!(f, "{m}"),
            Shapes::Four => f.write_str("four (1x1000MiB/10c, 1x4000MiB/30c, 2x2000MiB, 1x25%)"),
        }
    }
}

impl Shapes {
    /// Pod `i`'s request; a mix draws from `rng`, the four shapes do not touch it.
    pub fn request(&self, shape: Shape, i: u64, rng: &mut StdRng) -> Request {
        match self {
            Shapes::Mix(m) => Request::draw(m, shape, rng),
            Shapes::Four => Request::four(shape, i),
        }
    }
}

/// splitmix64: decorrelates the per-pod seeds of neighbouring indexes.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Which stream a generator draws for: the load pods and the pre-placed pods never share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Load = 1,
    Running = 2,
}

/// The generator of pod `index` of `stream` under `seed`.
pub fn pod_rng(seed: u64, stream: Stream, index: u64) -> StdRng {
    StdRng::seed_from_u64(mix64(seed ^ mix64(stream as u64) ^ mix64(index.wrapping_mul(0x2545_f491_4f6c_dd1d))))
}

/// Name, namespace and UID of a synthetic pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PodId {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodId {
    /// `<prefix>-<index>` with a UID derived from the prefix and index (stable across runs with
    /// the same prefix, distinct across prefixes).
    pub fn new(namespace: &str, prefix: &str, index: u64) -> PodId {
        let h = prefix.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        let a = mix64(h ^ index);
        let b = mix64(a ^ 0x5851_f42d_4c95_7f2d);
        let uid = format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            (b >> 48) & 0xfff,
            b & 0xffff_ffff_ffff
        );
        PodId { namespace: namespace.to_owned(), name: format!("{prefix}-{index}"), uid }
    }
}

/// A pending core/v1 Pod with one container carrying `req` as limits (and the same requests).
pub fn pod_json(id: &PodId, req: &Request, scheduler_name: &str) -> Value {
    let limits = Value::Object(req.limits());
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": id.name,
            "namespace": id.namespace,
            "uid": id.uid,
            "labels": {"app.kubernetes.io/name": "hami-loadtest", "hami-loadtest/kind": req.kind.as_str()},
        },
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [{
                "name": "main",
                "image": "registry.invalid/hami-loadtest/pause:1",
                "resources": {"limits": limits.clone(), "requests": limits},
            }],
        },
        "status": {"phase": "Pending"},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const SHAPE: Shape = Shape { gpus_per_node: 8, gpu_mem: 16384 };

    fn counts(mix: &Mix, seed: u64, n: u64) -> BTreeMap<Kind, u64> {
        let mut c = BTreeMap::new();
        for i in 0..n {
            let r = Request::draw(mix, SHAPE, &mut pod_rng(seed, Stream::Load, i));
            *c.entry(r.kind).or_insert(0) += 1;
        }
        c
    }

    #[test]
    fn the_mix_parses_and_prints_back() {
        let m: Mix = Mix::DEFAULT.parse().expect("the default mix parses");
        assert_eq!(m.to_string(), Mix::DEFAULT);
        assert_eq!("Whole:1, multi:0".parse::<Mix>().map(|m| m.to_string()), Ok("whole:1".to_owned()));
        assert_eq!("whole:0".parse::<Mix>(), Err(Error::Empty));
        assert!(matches!("gpu:3".parse::<Mix>(), Err(Error::Kind(_))));
        assert!(matches!("whole".parse::<Mix>(), Err(Error::Entry(_))));
        assert!(matches!("whole:x".parse::<Mix>(), Err(Error::Entry(_))));
    }

    #[test]
    fn the_same_seed_draws_the_same_pods_and_another_seed_does_not() {
        let m: Mix = Mix::DEFAULT.parse().expect("parses");
        let draw = |seed| -> Vec<Request> {
            (0..200).map(|i| Request::draw(&m, SHAPE, &mut pod_rng(seed, Stream::Load, i))).collect()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let running: Vec<Request> =
            (0..200).map(|i| Request::draw(&m, SHAPE, &mut pod_rng(7, Stream::Running, i))).collect();
        assert_ne!(draw(7), running);
    }

    #[test]
    fn kinds_come_in_the_proportions_of_their_weights() {
        let m: Mix = Mix::DEFAULT.parse().expect("parses");
        let n = 20_000u64;
        let c = counts(&m, 42, n);
        for (kind, share) in m.shares() {
            let got = c.get(&kind).copied().unwrap_or(0) as f64 * 100.0 / n as f64;
            assert!((got - share).abs() < 1.5, "{kind}: {got:.2}% drawn, {share:.2}% wanted");
        }
        let only: Mix = "cores:3".parse().expect("parses");
        assert_eq!(counts(&only, 1, 500).into_iter().collect::<Vec<_>>(), vec![(Kind::Cores, 500)]);
    }

    #[test]
    fn each_kind_carries_its_resources() {
        let m: Mix = Mix::DEFAULT.parse().expect("parses");
        for i in 0..2000 {
            let r = Request::draw(&m, SHAPE, &mut pod_rng(3, Stream::Load, i));
            let l = r.limits();
            assert_eq!(l.get("nvidia.com/gpu").and_then(Value::as_str), Some(r.gpus.to_string().as_str()));
            match r.kind {
                Kind::Whole => {
                    assert_eq!((r.gpus, r.cores, r.mem_on(16384)), (1, Some(100), 16384));
                    assert!(!l.contains_key("nvidia.com/gpumem"));
                }
                Kind::Fraction => assert!(r.gpus == 1 && r.mem_mib.is_some_and(|m| m < 16384) && r.cores.is_none()),
                Kind::Percent => {
                    let p = r.mem_pct.expect("a percentage");
                    assert_eq!(r.mem_on(16384), 16384 * u64::from(p) / 100);
                    assert!(l.contains_key("nvidia.com/gpumem-percentage"));
                }
                Kind::Cores => assert!(r.cores.is_some_and(|c| c < 100) && r.mem_mib.is_some()),
                Kind::Multi => assert!(r.gpus == 2 || r.gpus == 4),
            }
        }
        let small = Shape { gpus_per_node: 2, gpu_mem: 1000 };
        let multi: Mix = "multi:1".parse().expect("parses");
        for i in 0..50 {
            assert_eq!(Request::draw(&multi, small, &mut pod_rng(1, Stream::Load, i)).gpus, 2);
        }
    }

    #[test]
    fn the_four_shapes_come_in_turn() {
        let four: Vec<Request> = (0..8).map(|i| Request::four(SHAPE, i)).collect();
        assert_eq!(four[..4], four[4..]);
        let limits: Vec<serde_json::Map<String, Value>> = four[..4].iter().map(Request::limits).collect();
        let l = |m: &serde_json::Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
        assert_eq!(l(&limits[0], "nvidia.com/gpumem").as_deref(), Some("1000"));
        assert_eq!(l(&limits[0], "nvidia.com/gpucores").as_deref(), Some("10"));
        assert_eq!(l(&limits[1], "nvidia.com/gpumem").as_deref(), Some("4000"));
        assert_eq!(l(&limits[1], "nvidia.com/gpucores").as_deref(), Some("30"));
        assert_eq!(l(&limits[2], "nvidia.com/gpu").as_deref(), Some("2"));
        assert_eq!(l(&limits[2], "nvidia.com/gpumem").as_deref(), Some("2000"));
        assert_eq!(l(&limits[3], "nvidia.com/gpumem-percentage").as_deref(), Some("25"));
        assert_eq!(l(&limits[3], "nvidia.com/gpucores"), None);
        assert_eq!(Request::four(Shape { gpus_per_node: 1, gpu_mem: 1000 }, 2).gpus, 1);
        assert_eq!("four".parse::<ShapesArg>(), Ok(ShapesArg::Four));
        assert!("five".parse::<ShapesArg>().is_err());
    }

    #[test]
    fn pod_json_is_a_pending_pod_with_the_limits() {
        let id = PodId::new("loadtest", "lt-a", 3);
        assert_eq!(id.name, "lt-a-3");
        assert_eq!(id.uid.len(), 36);
        assert_ne!(id.uid, PodId::new("loadtest", "lt-a", 4).uid);
        assert_ne!(id.uid, PodId::new("loadtest", "lt-b", 3).uid);
        let r = Request { kind: Kind::Fraction, gpus: 1, mem_mib: Some(4096), mem_pct: None, cores: None };
        let p = pod_json(&id, &r, "hami-scheduler");
        assert_eq!(p["metadata"]["uid"], id.uid.as_str());
        assert_eq!(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"], "4096");
        let view: hami_rs::model::PodView = serde_json::from_value(p).expect("hami-rs reads the pod");
        assert_eq!(view.metadata.name, "lt-a-3");
    }
}
