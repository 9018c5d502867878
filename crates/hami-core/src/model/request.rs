//! A pod's device request, parsed once per Filter call: per container (init containers first) the
//! request of every vendor, plus the pod-level scheduling annotations (policies, weights, NUMA).

use std::any::Any;
use std::sync::Arc;

use smallvec::SmallVec;

use super::annotations as keys;
use super::codec::{self, Weights};
use super::device::{MemMiB, PodUid, VendorId};
use super::pod::{Annotations, ContainerView, PodView, SecurityContextView};

/// The memory-percentage sentinel meaning "not given" (NVIDIA).
pub const MEMPCT_UNSET: u32 = 101;

/// One container's request of one vendor (HAMi's `ContainerDeviceRequest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContainerRequest {
    pub vendor: VendorId,
    /// Number of devices.
    pub nums: u32,
    /// Memory per device in MiB; 0 means "use `mempct`".
    pub memreq: MemMiB,
    /// Percent of each device's memory; [`MEMPCT_UNSET`] when not given.
    pub mempct: u32,
    /// Cores per device (percent of one device for NVIDIA-like vendors).
    pub cores: u32,
    /// Vendor-specific request mode (Enflame DRS: 0 direct slices, -1 memory/core spec).
    pub mode: i32,
}

impl ContainerRequest {
    pub fn new(vendor: VendorId, nums: u32, memreq: u64, mempct: u32, cores: u32) -> Self {
        ContainerRequest { vendor, nums, memreq: MemMiB(memreq), mempct, cores, mode: 0 }
    }
}

/// The requests of one container, at most one per vendor.
pub type ContainerRequests = SmallVec<[ContainerRequest; 1]>;

/// Node policy (`--node-scheduler-policy`, pod `hami.io/node-scheduler-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodePolicy {
    Binpack,
    Spread,
    /// Any other text: sorts like binpack, but vendors that score by policy name give 0.
    Other,
}

impl NodePolicy {
    pub fn parse(s: &str) -> NodePolicy {
        match s {
            "binpack" => NodePolicy::Binpack,
            "spread" => NodePolicy::Spread,
            _ => NodePolicy::Other,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            NodePolicy::Binpack => "binpack",
            NodePolicy::Spread => "spread",
            NodePolicy::Other => "other",
        }
    }
}

/// Single-value GPU policies; each implies the device order HAMi sorts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SingleSort {
    Binpack,
    /// `spread`, `topology-aware` and unknown values.
    Spread,
    Mutex,
}

/// One key of a comma-list GPU policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainKey {
    Binpack,
    Spread,
    Numa,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuSort {
    Single(SingleSort),
    Chain(SmallVec<[ChainKey; 3]>),
}

/// A parsed GPU policy: its device order and the fit rules it switches on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuPolicy {
    pub sort: GpuSort,
    /// `mutex` anywhere: only idle devices may be chosen.
    pub mutex: bool,
    /// `topology-aware` anywhere: NVIDIA chooses among all fitting devices by pair scores.
    pub topology_aware: bool,
    /// NUMA flag (`nvidia.com/numa-bind`).
    pub numa: bool,
    pub text: Arc<str>,
}

impl GpuPolicy {
    /// Parses a policy text as HAMi does: one word is a single policy, a comma list (or `numa`) a
    /// key chain; the pod's NUMA flag puts NUMA first.
    pub fn parse(text: &str, numa: bool) -> GpuPolicy {
        let items: Vec<&str> = text.split(',').map(str::trim).collect();
        let has = |w: &str| items.contains(&w);
        let mutex = has("mutex");
        let topology_aware = has("topology-aware");
        let sort = if !text.contains(',') && text != "numa" {
            GpuSort::Single(match text {
                "binpack" => SingleSort::Binpack,
                "mutex" => SingleSort::Mutex,
                _ => SingleSort::Spread,
            })
        } else {
            let mut chain: SmallVec<[ChainKey; 3]> = SmallVec::new();
            for i in &items {
                let k = match *i {
                    "binpack" => ChainKey::Binpack,
                    "spread" => ChainKey::Spread,
                    "numa" => ChainKey::Numa,
                    _ => continue,
                };
                if !chain.contains(&k) {
                    chain.push(k);
                }
            }
            if chain.is_empty() {
                chain.push(ChainKey::Spread);
            }
            if numa && chain[0] != ChainKey::Numa {
                chain.retain(|k| *k != ChainKey::Numa);
                chain.insert(0, ChainKey::Numa);
            }
            GpuSort::Chain(chain)
        };
        GpuPolicy { sort, mutex, topology_aware, numa, text: Arc::from(text) }
    }
}

/// Per-vendor data a vendor parsed from the pod's annotations once (selection lists, modes).
pub type VendorParams = Arc<dyn Any + Send + Sync>;

/// Everything Filter and Reserve need to know about a pod, parsed once.
#[derive(Clone)]
pub struct PodRequest {
    pub uid: PodUid,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// One entry per container, init containers first; empty where the container requests nothing.
    pub containers: Vec<ContainerRequests>,
    /// Number of init containers at the front of `containers`.
    pub n_init: usize,
    /// Which init containers are native sidecars (`restartPolicy: Always`); same length as `n_init`.
    pub sidecars: Vec<bool>,
    pub gpu_policy: GpuPolicy,
    pub node_policy: NodePolicy,
    pub weights: Weights,
    pub annotations: Annotations,
    /// Indexed by `VendorId`: what each vendor pre-parsed from the pod (None when it has nothing).
    pub vendor_params: Vec<Option<VendorParams>>,
    pub pod_group: bool,
    /// What the pod's fit on a node is read from, hashed (see [`FitKey`]).
    pub fit_key: FitKey,
}

/// Everything a pod's request and its vendors' parameters are read from, hashed: its namespace,
/// annotations, PodGroup membership and every container as the pod view keeps it (name,
/// resources, restart policy, privilege, env names). Two pods with the same key fit every node
/// alike, so Filter may answer the second from the first's evaluation of an unchanged node.
/// 128 bits from two independently seeded hashers: a collision is not a practical concern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FitKey(u128);

impl FitKey {
    pub fn of(pod: &PodView, pod_group: bool) -> FitKey {
        use std::hash::BuildHasher;
        static SEEDS: std::sync::LazyLock<(std::hash::RandomState, std::hash::RandomState)> =
            std::sync::LazyLock::new(|| (std::hash::RandomState::new(), std::hash::RandomState::new()));
        let (a, b) = (&SEEDS.0, &SEEDS.1);
        let (mut ha, mut hb) = (a.build_hasher(), b.build_hasher());
        feed_fit_inputs(&mut ha, pod, pod_group);
        feed_fit_inputs(&mut hb, pod, pod_group);
        use std::hash::Hasher;
        FitKey((u128::from(ha.finish()) << 64) | u128::from(hb.finish()))
    }
}

fn feed_fit_inputs(h: &mut impl std::hash::Hasher, pod: &PodView, pod_group: bool) {
    use std::hash::Hash;
    pod.metadata.namespace.hash(h);
    h.write_usize(pod.metadata.annotations.len());
    for (k, v) in pod.metadata.annotations.iter() {
        k.hash(h);
        v.hash(h);
    }
    pod_group.hash(h);
    h.write_usize(pod.spec.init_containers.len());
    h.write_usize(pod.spec.containers.len());
    for c in pod.all_containers() {
        // Destructured so a field added to the view has to be considered here.
        let ContainerView { name, resources, restart_policy, security_context, env } = c;
        name.hash(h);
        for list in [&resources.limits, &resources.requests] {
            h.write_usize(list.len());
            for (k, v) in list.iter() {
                k.hash(h);
                v.0.hash(h);
            }
        }
        restart_policy.hash(h);
        security_context.as_ref().map(|SecurityContextView { privileged }| *privileged).hash(h);
        h.write_usize(env.len());
        for e in env {
            e.name.hash(h);
        }
    }
}

impl std::fmt::Debug for PodRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodRequest")
            .field("pod", &format_args!("{}/{}", self.namespace, self.name))
            .field("uid", &self.uid)
            .field("containers", &self.containers)
            .field("n_init", &self.n_init)
            .field("gpu_policy", &self.gpu_policy.text)
            .field("node_policy", &self.node_policy)
            .finish()
    }
}

/// Why a pod's scheduling annotations or quantities cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Weights(#[from] codec::Error),
    /// A vendor's quantity the container gives cannot be used; `why` names the resource and
    /// the value.
    #[error("container {container}: unusable {vendor} device request: {why}")]
    Quantity { container: String, vendor: String, why: Unusable },
}

/// Why a vendor refuses a container's device request or its mutation: a quantity that does not
/// parse, is not a whole number or is out of range, or a rule of the vendor's own. The text names
/// the resource and the value; the webhook denies with it and Filter reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    #[error("{resource}: {detail}")]
    Unparsable { resource: String, detail: String },
    #[error("{resource}: {value} is out of range {min}..={max}")]
    OutOfRange { resource: String, value: String, min: i64, max: i64 },
    #[error("{resource}: {value:?} is not an integer")]
    NotInteger { resource: String, value: String },
    /// A vendor's own rule (a combination of values, an annotation, a split), in its words.
    #[error("{0}")]
    Rule(String),
}

impl From<String> for Unusable {
    fn from(why: String) -> Unusable {
        Unusable::Rule(why)
    }
}

impl From<&str> for Unusable {
    fn from(why: &str) -> Unusable {
        Unusable::Rule(why.to_owned())
    }
}

/// Defaults the pod annotations fall back to (`--gpu-scheduler-policy`, `--node-scheduler-policy`).
#[derive(Clone, Debug)]
pub struct PolicyDefaults {
    pub gpu: String,
    pub node: String,
}

/// The GPU policy names a pod's `hami.io/gpu-scheduler-policy` may list.
pub const GPU_POLICY_NAMES: [&str; 5] = ["binpack", "spread", "numa", "mutex", "topology-aware"];
/// The node policy names a pod's `hami.io/node-scheduler-policy` may give.
pub const NODE_POLICY_NAMES: [&str; 2] = ["binpack", "spread"];

/// A pod's GPU policy annotation in its canonical form, or None when it is not one HAMi accepts:
/// a comma list whose every token, trimmed, is one of [`GPU_POLICY_NAMES`] (case-sensitive; an
/// empty token or an empty value is refused whole). The tokens come back trimmed and joined by a
/// bare comma, so ` binpack` sorts as `binpack` and not as an unknown single value would.
pub fn parse_gpu_policy_annotation(value: &str) -> Option<String> {
    let mut out = String::with_capacity(value.len());
    for (i, token) in value.split(',').map(str::trim).enumerate() {
        if !GPU_POLICY_NAMES.contains(&token) {
            return None;
        }
        if i > 0 {
            out.push(',');
        }
        out.push_str(token);
    }
    Some(out)
}

/// A pod's node policy annotation trimmed, or None when it is not exactly one of
/// [`NODE_POLICY_NAMES`] once trimmed (no list, case-sensitive).
pub fn parse_node_policy_annotation(value: &str) -> Option<&str> {
    let v = value.trim();
    NODE_POLICY_NAMES.contains(&v).then_some(v)
}

/// A policy annotation a pod gives that names no policy, so the configured policy is used instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredPolicy {
    /// The annotation key.
    pub key: &'static str,
    /// Its value as the pod gives it.
    pub value: String,
    /// The configured policy that stands (`--gpu-scheduler-policy` or `--node-scheduler-policy`).
    pub configured: String,
}

/// The pod's policy annotations that [`PodRequest::skeleton`] ignores, for the caller to warn
/// about (this crate does not log). Empty for a pod whose policies are valid or not given.
pub fn ignored_policies(annos: &Annotations, defaults: &PolicyDefaults) -> SmallVec<[IgnoredPolicy; 2]> {
    let mut out = SmallVec::new();
    if let Some(v) = annos.get(keys::GPU_SCHEDULER_POLICY).filter(|v| parse_gpu_policy_annotation(v).is_none()) {
        out.push(IgnoredPolicy { key: keys::GPU_SCHEDULER_POLICY, value: v.clone(), configured: defaults.gpu.clone() });
    }
    if let Some(v) = annos.get(keys::NODE_SCHEDULER_POLICY).filter(|v| parse_node_policy_annotation(v).is_none()) {
        out.push(IgnoredPolicy {
            key: keys::NODE_SCHEDULER_POLICY,
            value: v.clone(),
            configured: defaults.node.clone(),
        });
    }
    out
}

impl PodRequest {
    /// Builds the pod-level part; containers, and the weights of a pod that asks for a device,
    /// are filled in by the vendor registry.
    pub fn skeleton(pod: &PodView, defaults: &PolicyDefaults) -> PodRequest {
        let annos = &pod.metadata.annotations;
        let numa = annos.get(keys::NVIDIA_NUMA_BIND).is_some_and(|v| codec::parse_go_bool(v).unwrap_or(false));
        // An annotation that names no policy is ignored, as HAMi does: the configured policy stands
        // (the caller logs it, see `ignored_policies`), and a padded one is read trimmed.
        let gpu_given = annos.get(keys::GPU_SCHEDULER_POLICY).and_then(|v| parse_gpu_policy_annotation(v));
        let gpu_text = gpu_given.as_deref().unwrap_or(defaults.gpu.as_str());
        let node_given = annos.get(keys::NODE_SCHEDULER_POLICY).and_then(|v| parse_node_policy_annotation(v));
        let node_text = node_given.unwrap_or(defaults.node.as_str());
        let pod_group = pod.is_pod_group_member();
        PodRequest {
            uid: PodUid::new(&pod.metadata.uid),
            namespace: Arc::from(pod.metadata.namespace.as_str()),
            name: Arc::from(pod.metadata.name.as_str()),
            containers: Vec::with_capacity(pod.spec.init_containers.len() + pod.spec.containers.len()),
            n_init: pod.spec.init_containers.len(),
            sidecars: pod.spec.init_containers.iter().map(|c| c.is_sidecar()).collect(),
            gpu_policy: GpuPolicy::parse(gpu_text, numa),
            node_policy: NodePolicy::parse(node_text),
            weights: Weights::default(),
            annotations: annos.clone(),
            vendor_params: Vec::new(),
            pod_group,
            fit_key: FitKey::of(pod, pod_group),
        }
    }

    /// Whether any container requests any device.
    pub fn requests_devices(&self) -> bool {
        self.containers.iter().any(|c| !c.is_empty())
    }

    pub fn params(&self, v: VendorId) -> Option<&VendorParams> {
        self.vendor_params.get(usize::from(v.0)).and_then(Option::as_ref)
    }

    /// Whether container `i` (in the combined list) is a regular init container (runs alone).
    pub fn is_plain_init(&self, i: usize) -> bool {
        i < self.n_init && !self.sidecars.get(i).copied().unwrap_or(false)
    }

    /// Vendors requested by any container, in registry order, deduplicated.
    pub fn vendors(&self) -> SmallVec<[VendorId; 2]> {
        let mut v: SmallVec<[VendorId; 2]> = SmallVec::new();
        for c in &self.containers {
            for r in c {
                if !v.contains(&r.vendor) {
                    v.push(r.vendor);
                }
            }
        }
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_key_covers_what_a_fit_is_read_from_and_nothing_else() {
        use crate::model::pod::EnvVarView;
        use crate::testing::pod;
        let base = || pod().gpu(1).mem_mib(4096).name("p1").annotation(keys::GPU_SCHEDULER_POLICY, "binpack");
        let key = |p: PodView| FitKey::of(&p, p.is_pod_group_member());
        let k0 = key(base().view());
        let same = [
            ("another name and uid", base().name("p2").uid("uid-other").view()),
            ("another label", base().label("app", "x").view()),
        ];
        for (what, p) in same {
            assert_eq!(key(p), k0, "{what}");
        }
        let with = |f: &dyn Fn(&mut PodView)| {
            let mut v = base().view();
            f(&mut v);
            v
        };
        let differ = [
            ("another policy", base().annotation(keys::GPU_SCHEDULER_POLICY, "spread").view()),
            ("another annotation", base().annotation(keys::NVIDIA_USE_TYPE, "A100").view()),
            ("another namespace", base().namespace("team-b").view()),
            (
                "more memory",
                pod().gpu(1).mem_mib(4097).name("p1").annotation(keys::GPU_SCHEDULER_POLICY, "binpack").view(),
            ),
            ("a second container", base().container("side").view()),
            ("a sidecar", base().sidecar("s").view()),
            ("a PodGroup", base().label(keys::POD_GROUP_LABEL, "g").view()),
            ("a container renamed", with(&|v| v.spec.containers[0].name = "renamed".into())),
            ("an env var", with(&|v| v.spec.containers[0].env.push(EnvVarView { name: "X".into() }))),
            (
                "privileged",
                with(&|v| v.spec.containers[0].security_context = Some(SecurityContextView { privileged: Some(true) })),
            ),
            ("a restart policy", with(&|v| v.spec.containers[0].restart_policy = Some("Always".into()))),
            (
                "a request beside the limit",
                with(&|v| {
                    v.spec.containers[0]
                        .resources
                        .requests
                        .insert("cpu".into(), crate::model::pod::QuantityText("1".into()));
                }),
            ),
        ];
        let mut seen = vec![k0];
        for (what, p) in differ {
            let k = key(p);
            assert!(!seen.contains(&k), "{what}");
            seen.push(k);
        }
    }

    #[test]
    fn gpu_policy_annotations_are_a_comma_list_of_known_names() {
        // HAMi's validity rule for `hami.io/gpu-scheduler-policy`, and its canonical form.
        let cases: &[(&str, Option<&str>)] = &[
            ("binpack", Some("binpack")),
            ("spread", Some("spread")),
            ("numa", Some("numa")),
            ("mutex", Some("mutex")),
            ("topology-aware", Some("topology-aware")),
            ("binpack,numa", Some("binpack,numa")),
            ("binpack, numa", Some("binpack,numa")),
            ("mutex,topology-aware", Some("mutex,topology-aware")),
            (" binpack", Some("binpack")),
            (" binpack ", Some("binpack")),
            ("\tnuma\n", Some("numa")),
            ("binpack , numa", Some("binpack,numa")),
            ("spread,spread", Some("spread,spread")),
            ("", None),
            ("   ", None),
            ("bogus", None),
            ("binpakc", None),
            ("Binpack", None),
            ("binpack,", None),
            ("binpack,,spread", None),
            (",binpack", None),
            ("binpack,nmua", None),
        ];
        for (value, want) in cases {
            assert_eq!(parse_gpu_policy_annotation(value).as_deref(), *want, "{value:?}");
        }
    }

    #[test]
    fn node_policy_annotations_are_one_trimmed_name() {
        // HAMi's validity rule for `hami.io/node-scheduler-policy`: binpack or spread, trimmed.
        let cases: &[(&str, Option<&str>)] = &[
            ("binpack", Some("binpack")),
            ("spread", Some("spread")),
            (" spread ", Some("spread")),
            ("binpack,spread", None),
            ("numa", None),
            ("Spread", None),
            ("", None),
            ("  ", None),
        ];
        for (value, want) in cases {
            assert_eq!(parse_node_policy_annotation(value), *want, "{value:?}");
        }
    }

    #[test]
    fn an_unrecognised_policy_annotation_keeps_the_configured_policy() {
        use crate::testing::{pod, vendors};
        let vendors = vendors();
        let defaults = |gpu: &str, node: &str| PolicyDefaults { gpu: gpu.into(), node: node.into() };
        // (configured GPU policy, annotation, policy text used)
        let cases = [
            ("binpack", "binpakc", "binpack"),
            ("spread", "binpack,nmua", "spread"),
            ("spread", "topology-aware", "topology-aware"),
            ("spread", " binpack", "binpack"),
            ("binpack", "Binpack", "binpack"),
            ("binpack", "binpack,", "binpack"),
            ("spread", "binpack , numa", "binpack,numa"),
        ];
        for (configured, given, want) in cases {
            let p = pod().gpu(1).mem_mib(1000).annotation(keys::GPU_SCHEDULER_POLICY, given).view();
            let d = defaults(configured, "binpack");
            let req = vendors.pod_request(&p, &d).expect("a valid pod");
            assert_eq!(&*req.gpu_policy.text, want, "{configured} + {given:?}");
            let ignored = ignored_policies(&p.metadata.annotations, &d);
            assert_eq!(ignored.is_empty(), parse_gpu_policy_annotation(given).is_some(), "{given:?}");
        }
        assert_eq!(
            GpuPolicy::parse(" binpack".trim(), false).sort,
            GpuSort::Single(SingleSort::Binpack),
            "a padded binpack sorts as binpack"
        );
        // (configured node policy, annotation, node policy used)
        let cases = [
            ("binpack", "spred", NodePolicy::Binpack),
            ("spread", "binpack,spread", NodePolicy::Spread),
            ("binpack", " spread", NodePolicy::Spread),
            ("binpack", "Spread", NodePolicy::Binpack),
        ];
        for (configured, given, want) in cases {
            let p = pod().gpu(1).mem_mib(1000).annotation(keys::NODE_SCHEDULER_POLICY, given).view();
            let d = defaults("spread", configured);
            assert_eq!(vendors.pod_request(&p, &d).expect("a valid pod").node_policy, want, "{given:?}");
        }
        let p = pod().gpu(1).annotation(keys::NODE_SCHEDULER_POLICY, "spred").view();
        let ignored = ignored_policies(&p.metadata.annotations, &defaults("spread", "binpack"));
        let want =
            IgnoredPolicy { key: keys::NODE_SCHEDULER_POLICY, value: "spred".into(), configured: "binpack".into() };
        assert_eq!(ignored.as_slice(), &[want]);
    }

    #[test]
    fn single_value_policies_sort_as_hami_does() {
        // HAMi policy/gpu_policy.go: binpack, mutex, anything else sorts like spread.
        assert_eq!(GpuPolicy::parse("binpack", false).sort, GpuSort::Single(SingleSort::Binpack));
        assert_eq!(GpuPolicy::parse("spread", false).sort, GpuSort::Single(SingleSort::Spread));
        assert_eq!(GpuPolicy::parse("topology-aware", false).sort, GpuSort::Single(SingleSort::Spread));
        assert!(GpuPolicy::parse("topology-aware", false).topology_aware);
        assert_eq!(GpuPolicy::parse("bogus", false).sort, GpuSort::Single(SingleSort::Spread));
        let m = GpuPolicy::parse("mutex", false);
        assert_eq!(m.sort, GpuSort::Single(SingleSort::Mutex));
        assert!(m.mutex);
    }

    #[test]
    fn comma_lists_become_key_chains() {
        use ChainKey::*;
        let chain = |t: &str, numa: bool| match GpuPolicy::parse(t, numa).sort {
            GpuSort::Chain(c) => c.to_vec(),
            s => panic!("{t}: expected a chain, got {s:?}"),
        };
        assert_eq!(chain("binpack,numa", false), vec![Binpack, Numa]);
        assert_eq!(chain("numa", false), vec![Numa]);
        assert_eq!(chain("spread,spread,binpack", false), vec![Spread, Binpack]);
        // mutex and topology-aware are fit rules, not sort keys; an empty chain means spread.
        assert_eq!(chain("mutex,topology-aware", false), vec![Spread]);
        assert!(GpuPolicy::parse("spread,mutex", false).mutex);
        // With the NUMA flag, numa moves to the front.
        assert_eq!(chain("binpack,numa", true), vec![Numa, Binpack]);
        assert_eq!(chain("binpack,spread", true), vec![Numa, Binpack, Spread]);
    }

    #[test]
    fn node_policy_unknown_values_are_other() {
        assert_eq!(NodePolicy::parse("spread"), NodePolicy::Spread);
        assert_eq!(NodePolicy::parse("binpack"), NodePolicy::Binpack);
        assert_eq!(NodePolicy::parse("Spread"), NodePolicy::Other);
    }
}
