//! What the engine is configured with (`app::engine_config` builds it from the flags): how
//! filters evaluate and answer, when the decision is written, reservation and lock timings,
//! arbiters and preemption.

use std::time::Duration;

use crate::model::request::PolicyDefaults;

/// How Filter evaluates candidate nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterMode {
    /// Fit over the immutable usage snapshots node actors publish (fast; the default).
    Snapshot,
    /// Send a Filter message to every candidate node actor and wait for the answers.
    Messages,
}

/// When the scheduling decision is written onto the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionWrite {
    /// In Filter, as HAMi does: works whether or not kube-scheduler calls hami-rs's bind.
    Filter,
    /// In Bind, in the same patch as `bind-phase: allocating`, before the Binding: the filter
    /// makes no API write. Needs kube-scheduler's `bindVerb` (the chart sets both).
    Bind,
}

/// What `/filter` answers when the pod fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterResult {
    /// The one node hami-rs chose, as HAMi answers: kube-scheduler's own scoring never applies.
    One,
    /// Every node that fits, with `/prioritize` scoring them: kube-scheduler weighs hami-rs's
    /// node policy with its own plugins, and the devices are chosen at bind on the node it picks.
    All,
}

/// What the engine needs to know from the flags (`app::engine_config` reads them).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub defaults: PolicyDefaults,
    pub reservation_ttl: Duration,
    pub node_lock_timeout: Duration,
    pub node_lock_retry_timeout: Duration,
    /// How long any pod's bind waits for a node lock held by another pod (PodGroup members wait
    /// `node_lock_retry_timeout`, as in HAMi).
    pub bind_lock_wait: Duration,
    pub filter_mode: FilterMode,
    pub decision_write: DecisionWrite,
    pub filter_result: FilterResult,
    pub filter_deadline: Duration,
    pub arbiters: usize,
    /// From this many candidates on, a filter is fitted in one slice per arbiter at the same
    /// time. Below it one thread is faster: waking another arbiter costs more than fitting a
    /// thousand nodes saves (measured on two cores: 1 000 nodes 25 % slower sliced, 5 000 nodes
    /// 20 % faster; docs/performance.md).
    pub slice_min: usize,
    /// With GPU-aware preemption on: how long the devices it frees are held for the preemptor.
    pub preemption_hold: Option<Duration>,
    /// How long a pod group's claims wait for its members when its PodGroup names no timeout.
    pub gang_claim_ttl: Duration,
    /// Moving running pods to place a pod that fits only if shared GPUs were packed tighter.
    pub defragment: Defragment,
    pub defrag: DefragLimits,
}

/// `--defragment`: off, plans shown but nothing moved, or plans carried out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Defragment {
    #[default]
    Off,
    DryRun,
    On,
}

/// What a defragmentation may move, and how often.
#[derive(Clone, Debug)]
pub struct DefragLimits {
    /// Pods moved by one plan.
    pub per_plan: usize,
    /// Pods moved from one node within `window`.
    pub per_node: usize,
    /// Pods of one controller moved within `window`.
    pub per_controller: usize,
    /// Pods moved cluster-wide per minute.
    pub per_minute: usize,
    /// How long a moved pod's replacement is not moved again.
    pub cooldown: Duration,
    /// How long the room claimed for a moved pod's replacement and for the pending pod waits.
    pub claim_ttl: Duration,
    /// The scheduler's own namespace, whose pods never move.
    pub own_namespace: Option<String>,
}

impl Default for DefragLimits {
    fn default() -> Self {
        DefragLimits {
            per_plan: 2,
            per_node: 2,
            per_controller: 1,
            per_minute: 10,
            cooldown: Duration::from_secs(3600),
            claim_ttl: Duration::from_secs(300),
            own_namespace: None,
        }
    }
}

/// How long a group's claims wait for its members by default: long enough for kube-scheduler to
/// filter every member of a large group through its backoff, short enough that a job that never
/// starts gives its room back within minutes.
pub const GANG_CLAIM_TTL: Duration = Duration::from_secs(300);

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            defaults: PolicyDefaults { gpu: "spread".into(), node: "binpack".into() },
            reservation_ttl: Duration::from_secs(30),
            node_lock_timeout: Duration::from_secs(300),
            node_lock_retry_timeout: Duration::from_secs(28),
            bind_lock_wait: Duration::from_secs(10),
            filter_mode: FilterMode::Snapshot,
            decision_write: DecisionWrite::Filter,
            filter_result: FilterResult::One,
            filter_deadline: Duration::from_secs(2),
            arbiters: 2,
            slice_min: SLICE_MIN,
            preemption_hold: None,
            gang_claim_ttl: GANG_CLAIM_TTL,
            defragment: Defragment::Off,
            defrag: DefragLimits::default(),
        }
    }
}

/// The default `EngineConfig::slice_min`.
pub const SLICE_MIN: usize = 2048;

/// How many of the best fitting nodes the coordinator may try to reserve on.
pub(crate) const RESERVE_CANDIDATES: usize = 16;
