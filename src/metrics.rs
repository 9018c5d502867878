//! Request metrics: metric names, the HELP texts registered at start-up and the recording
//! helpers. A leaf recording facade, like `tracing`: every layer (engine, backends, HTTP, wiring)
//! records here, through the `metrics` crate's process-wide recorder, so its own code names no other
//! part of the crate but `model`'s types. One histogram per request, label values from enums;
//! per-node work is summed first, so nothing is recorded per node. HAMi's cluster gauges, rendered
//! from node reports when scraped, live apart in `cluster`.

use std::time::Instant;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::model::reason::{REASONS, Reason, Rejection};

pub mod cluster;

pub type Handle = PrometheusHandle;

pub const FILTER_SECONDS: &str = "hami_scheduler_filter_duration_seconds";
pub const BIND_SECONDS: &str = "hami_scheduler_bind_duration_seconds";
pub const PHASE_SECONDS: &str = "hami_scheduler_phase_duration_seconds";
pub const DECISIONS: &str = "hami_scheduler_decisions_total";
pub const REJECTIONS: &str = "hami_scheduler_rejections_total";
pub const RESERVATIONS_EXPIRED: &str = "hami_scheduler_reservations_expired_total";
pub const RESERVATIONS_OUTSTANDING: &str = "hami_scheduler_reservations_outstanding";
pub const API_REQUESTS: &str = "hami_scheduler_api_requests_total";
pub const LOCK_WAITS: &str = "hami_scheduler_node_lock_waits_total";
pub const LOCK_TIMEOUTS: &str = "hami_scheduler_node_lock_timeouts_total";
pub const LOCK_HANDOVERS: &str = "hami_scheduler_node_lock_handovers_total";
pub const WATCH_RESTARTS: &str = "hami_scheduler_watch_restarts_total";
pub const BINDS_ELSEWHERE: &str = "hami_scheduler_binds_elsewhere_total";
pub const NODES_EVALUATED: &str = "hami_scheduler_filter_nodes_evaluated_total";
pub const PREEMPTIONS: &str = "hami_scheduler_preemptions_total";
pub const PREEMPTION_VICTIMS: &str = "hami_scheduler_preemption_victims_total";
pub const PREEMPTION_FREED_MEMORY: &str = "hami_scheduler_preemption_freed_device_memory_bytes_total";
pub const PREEMPTION_FREED_CORES: &str = "hami_scheduler_preemption_freed_device_cores_total";
pub const REQUESTS_REFUSED: &str = "hami_scheduler_requests_refused_total";
pub const FILTER_UNWATCHED: &str = "hami_scheduler_filter_unwatched_pods_total";
pub const LEADER: &str = "hami_scheduler_leader";
pub const BUILD_INFO: &str = "hami_build_info";
pub const PENDING_PODS: &str = "hami_scheduler_pending_pods";
pub const UNSCHEDULABLE_PODS: &str = "hami_scheduler_unschedulable_pods";
pub const POD_GROUPS: &str = "hami_scheduler_pod_groups";
pub const POD_GROUP_PLACED_SECONDS: &str = "hami_scheduler_pod_group_placed_seconds";
pub const POD_GROUP_CLAIMS_RELEASED: &str = "hami_scheduler_pod_group_claims_released_total";
pub const POD_GROUP_DECISIONS: &str = "hami_scheduler_pod_group_decisions_total";
pub const DEFRAG_PLANS: &str = "hami_scheduler_defrag_plans_total";
pub const DEFRAG_PODS_MOVED: &str = "hami_scheduler_defrag_pods_moved_total";
pub const DEFRAG_DEVICES_FREED: &str = "hami_scheduler_defrag_devices_freed_total";
pub const DRA_EXTENDED_RESOURCE_CLASSES: &str = "hami_scheduler_dra_extended_resource_classes";

/// Latency buckets in seconds, from 50 µs to 30 s (filters are sub-millisecond; binds wait on the API).
const BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0,
];

/// Installs the process-wide Prometheus recorder and its upkeep task. `None` when a recorder is
/// already installed (a second engine in the same process, as in tests).
pub fn install() -> Option<Handle> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
        .ok()?
        .install_recorder()
        .ok()?;
    describe();
    let _ = HOT.set(Hot::register());
    let h = handle.clone();
    // Without the exporter's own listener nothing else runs upkeep.
    tokio::spawn(async move {
        let mut t = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            t.tick().await;
            h.run_upkeep();
        }
    });
    Some(handle)
}

/// HELP texts, registered once at start-up.
pub fn describe() {
    describe_histogram!(FILTER_SECONDS, metrics::Unit::Seconds, "Filter latency, by outcome");
    describe_histogram!(BIND_SECONDS, metrics::Unit::Seconds, "Bind latency, by outcome");
    describe_histogram!(PHASE_SECONDS, metrics::Unit::Seconds, "Time spent in each phase of filter and bind");
    describe_counter!(DECISIONS, "Filter, bind and NUMA refit decisions, by outcome");
    describe_counter!(
        REJECTIONS,
        "Filters that found no node for the pod, once for each HAMi reason word its candidates gave"
    );
    describe_counter!(
        PREEMPTIONS,
        "GPU-aware preemptions by outcome: started (victims evicted, devices held), placed (the preemptor took the held devices), lapsed (the hold ran out), blocked (PodDisruptionBudgets or the Eviction API left no victim), unverified (the pod a filter named is not the cluster's, so nobody is evicted)"
    );
    describe_counter!(PREEMPTION_VICTIMS, "Pods evicted by GPU-aware preemption");
    describe_counter!(PREEMPTION_FREED_MEMORY, "Device memory the evicted pods held, in bytes");
    describe_counter!(PREEMPTION_FREED_CORES, "Device cores (percent of a device) the evicted pods held");
    describe_counter!(RESERVATIONS_EXPIRED, "Reservations released because no bind came within --reservation-ttl");
    describe_gauge!(RESERVATIONS_OUTSTANDING, "Reservations made by filter and not yet bound");
    describe_counter!(API_REQUESTS, "Kubernetes API requests, by verb, resource and result");
    describe_counter!(LOCK_WAITS, "Binds that found the node locked by another pod and waited");
    describe_counter!(LOCK_TIMEOUTS, "Binds that gave up waiting for a node lock");
    describe_counter!(LOCK_HANDOVERS, "Expired node locks taken over from holders that no longer needed them");
    describe_counter!(
        NODES_EVALUATED,
        "Candidate nodes Filter evaluated, by how: fitted, or answered from the answer kept for the pod's shape on an unchanged node (memo)"
    );
    describe_counter!(WATCH_RESTARTS, "Watch streams restarted after an error, by resource");
    describe_counter!(
        BINDS_ELSEWHERE,
        "Binds to a node other than the one the filter reserved (--filter-result=all), by outcome: placed there, or failed because the node no longer fits"
    );
    describe_counter!(
        REQUESTS_REFUSED,
        "Requests refused for who sent them, by door (filter, bind, prioritize, preempt, console, usage, refit, webhook) and why"
    );
    describe_counter!(
        FILTER_UNWATCHED,
        "Filters of a pod this scheduler's pod watch had not delivered yet (kube-scheduler's informer was ahead)"
    );
    describe_gauge!(
        POD_GROUPS,
        "Pod groups (gangs) known, by state: waiting (fewer members than the minimum exist), pending (not placed), claimed (room claimed for every member needed), bound (the minimum bound)"
    );
    describe_histogram!(
        POD_GROUP_PLACED_SECONDS,
        metrics::Unit::Seconds,
        "Time from a group's first member filtered to its minimum of members bound"
    );
    describe_counter!(
        POD_GROUP_CLAIMS_RELEASED,
        "Group members' claims given back before their pods took them, by reason: lapsed, member_deleted, below_minimum, group_deleted, group_failed"
    );
    describe_counter!(
        POD_GROUP_DECISIONS,
        "Group plans at a member's filter, by outcome: claimed (every member needed claimed at once), waiting (too few members exist), short (the members do not fit together), quota (they exceed the namespace's quota together), raced (another plan took the room first)"
    );
    describe_counter!(
        DEFRAG_PLANS,
        "Defragmentation plans by outcome: placed (claims taken, pods moved), blocked (a disruption budget or a refused eviction stopped it), dry_run (shown, nothing moved), lapsed (a claim ran out before its pod came)"
    );
    describe_counter!(
        DEFRAG_PODS_MOVED,
        "Running pods moved (evicted, their replacement's place claimed) by defragmentation"
    );
    describe_counter!(DEFRAG_DEVICES_FREED, "Devices defragmentation freed and claimed for the pod it moved pods for");
    zero_counters();
    describe_gauge!(
        DRA_EXTENDED_RESOURCE_CLASSES,
        "DeviceClasses whose extendedResourceName is a resource hami-rs serves, by resource: DRA may serve that name on nodes without its device plugin, uncounted here"
    );
    describe_gauge!(LEADER, "1 while this replica is the leader");
    describe_gauge!(BUILD_INFO, "The build: version, revision, build date, compiler and platform (always 1)");
    gauge!(BUILD_INFO,
        "version" => env!("CARGO_PKG_VERSION"),
        "revision" => option_env!("HAMI_RS_REVISION").unwrap_or("unknown"),
        "build_date" => option_env!("HAMI_RS_BUILD_DATE").unwrap_or("unknown"),
        "go_version" => "",
        "compiler" => "rustc",
        "platform" => platform())
    .set(1.0);
}

/// The Kubernetes API calls this scheduler makes, as `api_request` labels them.
const API_CALLS: [(&str, &str); 6] = [
    ("get", "pods"),
    ("get", "nodes"),
    ("patch", "pods"),
    ("patch", "nodes"),
    ("create", "pods/binding"),
    ("create", "events"),
];

/// The doors that refuse callers and why each may, as `request_refused` labels them.
const REFUSALS: [(&str, &str); 15] = [
    ("filter", "untrusted_caller"),
    ("bind", "untrusted_caller"),
    ("prioritize", "untrusted_caller"),
    ("preempt", "untrusted_caller"),
    ("console", "untrusted_caller"),
    ("usage", "untrusted_caller"),
    ("refit", "no_token"),
    ("refit", "bad_token"),
    ("refit", "wrong_identity"),
    ("refit", "not_bound"),
    ("refit", "wrong_node"),
    ("refit", "not_configured"),
    ("refit", "review_failed"),
    ("webhook", "not_permitted"),
    ("webhook", "review_failed"),
];

/// Every counter and histogram at zero from the start, so dashboards and alerts that take a rate
/// see a series before the first event rather than "No data".
fn zero_counters() {
    for outcome in ["placed", "no_longer_fits"] {
        counter!(BINDS_ELSEWHERE, "outcome" => outcome).absolute(0);
    }
    for (door, why) in REFUSALS {
        counter!(REQUESTS_REFUSED, "door" => door, "why" => why).absolute(0);
    }
    for name in [LOCK_WAITS, LOCK_TIMEOUTS, LOCK_HANDOVERS, RESERVATIONS_EXPIRED, FILTER_UNWATCHED] {
        counter!(name).absolute(0);
    }
    for o in [Preemption::Started, Preemption::Placed, Preemption::Lapsed, Preemption::Blocked, Preemption::Unverified]
    {
        counter!(PREEMPTIONS, "outcome" => o.as_str()).absolute(0);
    }
    for name in [PREEMPTION_VICTIMS, PREEMPTION_FREED_MEMORY, PREEMPTION_FREED_CORES] {
        counter!(name).absolute(0);
    }
    for reason in ["lapsed", "member_deleted", "below_minimum", "group_deleted", "group_failed"] {
        counter!(POD_GROUP_CLAIMS_RELEASED, "reason" => reason).absolute(0);
    }
    for outcome in ["placed", "blocked", "dry_run", "lapsed"] {
        counter!(DEFRAG_PLANS, "outcome" => outcome).absolute(0);
    }
    counter!(DEFRAG_PODS_MOVED).absolute(0);
    counter!(DEFRAG_DEVICES_FREED).absolute(0);
    for outcome in ["claimed", "waiting", "short", "quota", "raced"] {
        counter!(POD_GROUP_DECISIONS, "outcome" => outcome).absolute(0);
    }
    for o in [Outcome::Scheduled, Outcome::NoFit, Outcome::PassThrough, Outcome::Error] {
        counter!(DECISIONS, "request" => "filter", "outcome" => o.as_str()).absolute(0);
    }
    for o in [Outcome::Bound, Outcome::Error] {
        counter!(DECISIONS, "request" => "bind", "outcome" => o.as_str()).absolute(0);
    }
    for outcome in ["moved", "unchanged", "refused"] {
        counter!(DECISIONS, "request" => "refit", "outcome" => outcome).absolute(0);
    }
    for (verb, resource) in API_CALLS {
        for result in ["ok", "error"] {
            counter!(API_REQUESTS, "verb" => verb, "resource" => resource, "result" => result).absolute(0);
        }
    }
    for resource in ["pods", "nodes", "leases", "resourcequotas"] {
        counter!(WATCH_RESTARTS, "resource" => resource).absolute(0);
    }
    for by in ["fit", "memo"] {
        counter!(NODES_EVALUATED, "by" => by).absolute(0);
    }
    // A histogram registered is rendered with zero counts until its first sample.
    for o in [Outcome::Scheduled, Outcome::NoFit, Outcome::PassThrough, Outcome::Error] {
        let _ = histogram!(FILTER_SECONDS, "outcome" => o.as_str());
    }
    for o in [Outcome::Bound, Outcome::Error] {
        let _ = histogram!(BIND_SECONDS, "outcome" => o.as_str());
    }
    for p in [Phase::Decode, Phase::FanOut, Phase::Reserve, Phase::LockWait, Phase::ApiWrite, Phase::BindBacklog] {
        let _ = histogram!(PHASE_SECONDS, "phase" => p.as_str());
    }
}

fn platform() -> &'static str {
    match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "linux/amd64",
        ("linux", "aarch64") => "linux/arm64",
        _ => "other",
    }
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A filter reserved a node for the pod.
    Scheduled,
    NoFit,
    PassThrough,
    Error,
    /// A bind placed the pod (last: the filter's per-outcome handles are indexed by the others).
    Bound,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Scheduled => "scheduled",
            Outcome::Bound => "bound",
            Outcome::NoFit => "no_fit",
            Outcome::PassThrough => "pass_through",
            Outcome::Error => "error",
        }
    }
}

/// A phase of a request, for the phase histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Decode,
    FanOut,
    Reserve,
    LockWait,
    ApiWrite,
    BindBacklog,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Decode => "decode",
            Phase::FanOut => "fan_out",
            Phase::Reserve => "reserve",
            Phase::LockWait => "lock_wait",
            Phase::ApiWrite => "api_write",
            Phase::BindBacklog => "bind_backlog",
        }
    }
}

/// Handles of the series every filter records, registered once the recorder is installed: a
/// handle records with atomic operations, where a macro call looks its series up by name and
/// labels each time (several per filter, on the hot path).
struct Hot {
    /// By `Outcome as usize`.
    filter_seconds: [metrics::Histogram; 4],
    filter_decisions: [metrics::Counter; 4],
    /// By `Phase as usize`.
    phases: [metrics::Histogram; 6],
    /// Fitted, answered from a memo.
    evaluated: [metrics::Counter; 2],
    /// By `Reason::ALL`'s order, then the node-level reasons of `NODE_REASONS`.
    rejections: [metrics::Counter; REASONS],
    node_rejections: [metrics::Counter; 4],
}

/// The rejection labels beside the device reasons.
const NODE_REASONS: [&str; 4] = ["NodeInsufficientDevice", "NodeUnregistered", "Other", "PodGroup"];

const OUTCOMES: [Outcome; 4] = [Outcome::Scheduled, Outcome::NoFit, Outcome::PassThrough, Outcome::Error];
const PHASES: [Phase; 6] =
    [Phase::Decode, Phase::FanOut, Phase::Reserve, Phase::LockWait, Phase::ApiWrite, Phase::BindBacklog];

impl Hot {
    fn register() -> Hot {
        Hot {
            filter_seconds: OUTCOMES.map(|o| histogram!(FILTER_SECONDS, "outcome" => o.as_str())),
            filter_decisions: OUTCOMES.map(|o| counter!(DECISIONS, "request" => "filter", "outcome" => o.as_str())),
            phases: PHASES.map(|p| histogram!(PHASE_SECONDS, "phase" => p.as_str())),
            evaluated: ["fit", "memo"].map(|by| counter!(NODES_EVALUATED, "by" => by)),
            rejections: Reason::ALL.map(|r| counter!(REJECTIONS, "reason" => r.as_str())),
            node_rejections: NODE_REASONS.map(|r| counter!(REJECTIONS, "reason" => r)),
        }
    }
}

static HOT: std::sync::OnceLock<Hot> = std::sync::OnceLock::new();

pub fn filter_done(outcome: Outcome, started: Instant) {
    let seconds = started.elapsed().as_secs_f64();
    let k = outcome as usize;
    match HOT.get().and_then(|h| Some((h.filter_seconds.get(k)?, h.filter_decisions.get(k)?))) {
        Some((s, d)) => {
            s.record(seconds);
            d.increment(1);
        }
        None => {
            histogram!(FILTER_SECONDS, "outcome" => outcome.as_str()).record(seconds);
            counter!(DECISIONS, "request" => "filter", "outcome" => outcome.as_str()).increment(1);
        }
    }
}

pub fn bind_done(outcome: Outcome, started: Instant) {
    histogram!(BIND_SECONDS, "outcome" => outcome.as_str()).record(started.elapsed().as_secs_f64());
    counter!(DECISIONS, "request" => "bind", "outcome" => outcome.as_str()).increment(1);
}

/// One `/refit` answered: `outcome` is `moved`, `unchanged` or `refused`.
pub fn refit_done(outcome: &'static str) {
    counter!(DECISIONS, "request" => "refit", "outcome" => outcome).increment(1);
}

pub fn phase(p: Phase, started: Instant) {
    let seconds = started.elapsed().as_secs_f64();
    match HOT.get() {
        Some(h) => h.phases[p as usize].record(seconds),
        None => histogram!(PHASE_SECONDS, "phase" => p.as_str()).record(seconds),
    }
}

/// Rejection counts of one filter call, summed over its nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RejectionCounts {
    pub devices: [u64; REASONS],
    pub insufficient_device: u64,
    pub unregistered: u64,
    pub other: u64,
    /// Candidates refused because the pod's group is not placed whole.
    pub group: u64,
}

impl RejectionCounts {
    pub fn add(&mut self, r: &Rejection) {
        use Rejection as R;
        match r {
            R::Devices(t) => {
                for (reason, n) in t.items() {
                    self.devices[reason as usize] += u64::from(n);
                }
            }
            R::NodeInsufficientDevice { .. } => self.insufficient_device += 1,
            R::NodeUnregistered | R::NodeUnusable => self.unregistered += 1,
            R::Timeout | R::NodeLocked => self.other += 1,
        }
    }

    /// The reasons given at least once, as `hami_scheduler_rejections_total` labels them.
    pub fn labels(&self) -> Vec<&'static str> {
        let devices = Reason::ALL.iter().zip(self.devices.iter()).filter(|(_, n)| **n > 0).map(|(r, _)| r.as_str());
        let node = [self.insufficient_device, self.unregistered, self.other, self.group];
        devices.chain(NODE_REASONS.iter().zip(node).filter(|(_, n)| *n > 0).map(|(l, _)| *l)).collect()
    }
}

/// How one filter call evaluated its candidates: `fitted` fitted, `kept` answered from the answer
/// kept for the pod's shape on an unchanged node (labelled `memo`, the name dashboards know).
pub fn nodes_evaluated(fitted: u64, kept: u64) {
    for (k, (by, n)) in [("fit", fitted), ("memo", kept)].into_iter().enumerate() {
        if n == 0 {
            continue;
        }
        match HOT.get() {
            Some(h) => h.evaluated[k].increment(n),
            None => counter!(NODES_EVALUATED, "by" => by).increment(n),
        }
    }
}

/// Records a filter that found no node for its pod: once for each reason among its candidates'
/// rejections (however many nodes gave it), so the rate of a reason is a rate of pods.
pub fn rejections(c: &RejectionCounts) {
    let hot = HOT.get();
    for (k, (r, n)) in Reason::ALL.iter().zip(c.devices.iter()).enumerate() {
        if *n > 0 {
            match hot {
                Some(h) => h.rejections[k].increment(1),
                None => counter!(REJECTIONS, "reason" => r.as_str()).increment(1),
            }
        }
    }
    let node = [c.insufficient_device, c.unregistered, c.other, c.group];
    for (k, (label, n)) in NODE_REASONS.iter().zip(node).enumerate() {
        if n > 0 {
            match hot {
                Some(h) => h.node_rejections[k].increment(1),
                None => counter!(REJECTIONS, "reason" => *label).increment(1),
            }
        }
    }
}

/// What became of a GPU-aware preemption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preemption {
    Started,
    Placed,
    Lapsed,
    Blocked,
    /// A filter named a preemptor the cluster does not have (or has under another UID).
    Unverified,
}

impl Preemption {
    pub fn as_str(self) -> &'static str {
        match self {
            Preemption::Started => "started",
            Preemption::Placed => "placed",
            Preemption::Lapsed => "lapsed",
            Preemption::Blocked => "blocked",
            Preemption::Unverified => "unverified",
        }
    }
}

/// A defragmentation plan's outcome.
pub fn defrag_plan(outcome: &'static str) {
    counter!(DEFRAG_PLANS, "outcome" => outcome).increment(1);
}

/// Pods one defragmentation moved, and the devices it freed for its pod.
pub fn defrag_moved(pods: usize, devices: usize) {
    counter!(DEFRAG_PODS_MOVED).increment(pods as u64);
    counter!(DEFRAG_DEVICES_FREED).increment(devices as u64);
}

/// A group plan's outcome (see `POD_GROUP_DECISIONS`).
pub fn group_decision(outcome: &'static str) {
    counter!(POD_GROUP_DECISIONS, "outcome" => outcome).increment(1);
}

/// Members' claims given back unused, and why.
pub fn group_claims_released(reason: &'static str, n: usize) {
    counter!(POD_GROUP_CLAIMS_RELEASED, "reason" => reason).increment(n as u64);
}

/// A group's minimum of members bound, `seconds` after its first member was filtered.
pub fn group_placed(seconds: f64) {
    histogram!(POD_GROUP_PLACED_SECONDS).record(seconds);
}

/// How many groups are in each state now.
pub fn groups_by_state(counts: &[(&'static str, usize)]) {
    for (state, n) in counts {
        gauge!(POD_GROUPS, "state" => *state).set(*n as f64);
    }
}

pub fn preemption(outcome: Preemption) {
    counter!(PREEMPTIONS, "outcome" => outcome.as_str()).increment(1);
}

/// Victims evicted by one preemption, and the device memory (MiB) and cores they held.
pub fn preempted(victims: usize, mem_mib: u64, cores: u64) {
    counter!(PREEMPTION_VICTIMS).increment(victims as u64);
    counter!(PREEMPTION_FREED_MEMORY).increment(mem_mib.saturating_mul(1 << 20));
    counter!(PREEMPTION_FREED_CORES).increment(cores);
}

/// A request refused for who sent it (see `REFUSALS`).
pub fn request_refused(door: &'static str, why: &'static str) {
    counter!(REQUESTS_REFUSED, "door" => door, "why" => why).increment(1);
}

/// A filter for a pod the pod watch had not delivered yet.
pub fn filter_unwatched() {
    counter!(FILTER_UNWATCHED).increment(1);
}

pub fn reservation_expired() {
    counter!(RESERVATIONS_EXPIRED).increment(1);
}

/// One Kubernetes API request by verb, resource and result.
pub fn api_request(verb: &'static str, resource: &'static str, ok: bool) {
    counter!(API_REQUESTS, "verb" => verb, "resource" => resource, "result" => if ok { "ok" } else { "error" })
        .increment(1);
}

/// A bind found the node locked by another pod and waited.
pub fn lock_wait() {
    counter!(LOCK_WAITS).increment(1);
}

pub fn lock_timeout() {
    counter!(LOCK_TIMEOUTS).increment(1);
}

/// An expired node lock was taken over from a holder that no longer needed it.
pub fn lock_handover() {
    counter!(LOCK_HANDOVERS).increment(1);
}

/// A bind to a node other than the filter's reserved one: placed there, or refused there.
pub fn bind_elsewhere(placed: bool) {
    counter!(BINDS_ELSEWHERE, "outcome" => if placed { "placed" } else { "no_longer_fits" }).increment(1);
}

pub fn watch_restart(resource: &'static str) {
    counter!(WATCH_RESTARTS, "resource" => resource).increment(1);
}

/// Reservations made by filter and not yet bound, as the cluster gauges count them on a scrape.
pub fn reservations_outstanding(n: u64) {
    gauge!(RESERVATIONS_OUTSTANDING).set(n as f64);
}

/// Sets the DeviceClass count of every served resource (0 included, so a gone class drops it).
pub fn dra_extended_resource_classes(counts: &[(String, usize)]) {
    for (resource, n) in counts {
        gauge!(DRA_EXTENDED_RESOURCE_CLASSES, "resource" => resource.clone()).set(*n as f64);
    }
}

pub fn leader(is_leader: bool) {
    gauge!(LEADER).set(if is_leader { 1.0 } else { 0.0 });
}

#[cfg(test)]
mod tests;
