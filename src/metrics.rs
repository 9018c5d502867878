//! Metric names, recording helpers and the HAMi cluster gauges. Request metrics go through the
//! `metrics` crate (one histogram per request, label values from enums; per-node work is summed
//! first, so nothing is recorded per node). HAMi's device, pod and quota gauges keep HAMi's names
//! and labels, so HAMi's dashboards keep working, and are computed from the node actors' reports
//! when scraped, never on the filter path; only the leader exports them.

use std::fmt::Write;
use std::time::Instant;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::devices::Vendors;
use crate::sched::quota_book::QuotaBook;
use crate::sched::reason::{REASONS, Reason};
use crate::sched::report::{AllocState, NodeReport};

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
    describe_counter!(REJECTIONS, "Candidate nodes rejected, by HAMi reason word");
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
        "Candidate nodes Filter evaluated, by how: fitted, or answered from what was kept (the list's answer table or the node snapshot's memo)"
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
    zero_counters();
    describe_gauge!(LEADER, "1 while this replica is the leader");
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
    for o in [Outcome::Scheduled, Outcome::NoFit, Outcome::PassThrough, Outcome::Error] {
        counter!(DECISIONS, "request" => "filter", "outcome" => o.as_str()).absolute(0);
    }
    for o in [Outcome::Scheduled, Outcome::Error] {
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
    for o in [Outcome::Scheduled, Outcome::Error] {
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
    Scheduled,
    NoFit,
    PassThrough,
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Scheduled => "scheduled",
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
    node_rejections: [metrics::Counter; 3],
}

/// The rejection labels beside the device reasons.
const NODE_REASONS: [&str; 3] = ["NodeInsufficientDevice", "NodeUnregistered", "Other"];

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
    match HOT.get() {
        Some(h) => {
            h.filter_seconds[outcome as usize].record(seconds);
            h.filter_decisions[outcome as usize].increment(1);
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

/// Rejection counts of one filter call, summed over its nodes before anything is recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RejectionCounts {
    pub devices: [u64; REASONS],
    pub insufficient_device: u64,
    pub unregistered: u64,
    pub other: u64,
}

impl RejectionCounts {
    pub fn add(&mut self, r: &crate::sched::Rejection) {
        self.count(r, |c, n| *c += n);
    }

    /// Takes back what `add` counted for `r`.
    pub fn remove(&mut self, r: &crate::sched::Rejection) {
        self.count(r, |c, n| *c = c.saturating_sub(n));
    }

    fn count(&mut self, r: &crate::sched::Rejection, f: impl Fn(&mut u64, u64)) {
        use crate::sched::Rejection as R;
        match r {
            R::Devices(t) => {
                for (reason, n) in t.items() {
                    f(&mut self.devices[reason as usize], u64::from(n));
                }
            }
            R::NodeInsufficientDevice { .. } => f(&mut self.insufficient_device, 1),
            R::NodeUnregistered | R::NodeUnusable => f(&mut self.unregistered, 1),
            R::Timeout | R::NodeLocked => f(&mut self.other, 1),
        }
    }
}

/// How one filter call evaluated its candidates: `fitted` fitted, `memo` answered from what was
/// kept (the candidate list's answer table, or the snapshots' memos).
pub fn nodes_evaluated(fitted: u64, memo: u64) {
    for (k, (by, n)) in [("fit", fitted), ("memo", memo)].into_iter().enumerate() {
        if n == 0 {
            continue;
        }
        match HOT.get() {
            Some(h) => h.evaluated[k].increment(n),
            None => counter!(NODES_EVALUATED, "by" => by).increment(n),
        }
    }
}

/// Records the rejection reasons of one filter call.
pub fn rejections(c: &RejectionCounts) {
    let hot = HOT.get();
    for (k, (r, n)) in Reason::ALL.iter().zip(c.devices.iter()).enumerate() {
        if *n > 0 {
            match hot {
                Some(h) => h.rejections[k].increment(*n),
                None => counter!(REJECTIONS, "reason" => r.as_str()).increment(*n),
            }
        }
    }
    let node = [c.insufficient_device, c.unregistered, c.other];
    for (k, (label, n)) in NODE_REASONS.iter().zip(node).enumerate() {
        if n > 0 {
            match hot {
                Some(h) => h.node_rejections[k].increment(n),
                None => counter!(REJECTIONS, "reason" => *label).increment(n),
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

pub fn leader(is_leader: bool) {
    gauge!(LEADER).set(if is_leader { 1.0 } else { 0.0 });
}

// --- HAMi's cluster gauges -----------------------------------------------------------------------

/// Prometheus text-format label value escaping.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

struct Family {
    out: String,
    name: &'static str,
    started: bool,
}

impl Family {
    fn new(name: &'static str, help: &str) -> Family {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        Family { out, name, started: false }
    }
    fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        self.started = true;
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", esc(v))).collect();
        let _ = writeln!(self.out, "{}{{{}}} {}", self.name, l.join(","), value);
    }
    fn finish(self, into: &mut String) {
        if self.started {
            into.push_str(&self.out);
        }
    }
}

const MIB: f64 = 1_048_576.0;

/// HAMi's scheduler-state gauges, on every replica and every scrape: whether this replica leads,
/// and whether it leads with its caches synced (a follower reports 0, as HAMi's does).
pub fn render_state(is_leader: bool, synced: bool) -> String {
    let mut out = String::new();
    let mut leader =
        Family::new("hami_scheduler_is_leader", "1 if this scheduler instance is the current leader, 0 otherwise.");
    leader.sample(&[("zone", "vGPU")], if is_leader { 1.0 } else { 0.0 });
    leader.finish(&mut out);
    let mut cache = Family::new(
        "hami_scheduler_cache_synced",
        "1 if the scheduler's internal node/device cache is fully synced, 0 otherwise.",
    );
    cache.sample(&[("zone", "vGPU")], if is_leader && synced { 1.0 } else { 0.0 });
    cache.finish(&mut out);
    out
}

/// HAMi's device, pod and quota gauges from the node actors' reports. With `legacy`, HAMi's old
/// metric names are rendered too.
pub fn render_cluster(reports: &[NodeReport], vendors: &Vendors, quota: Option<&QuotaBook>, legacy: bool) -> String {
    let z = ("zone", "vGPU");
    let mut mem_limit = Family::new("hami_gpu_memory_limit_bytes", "Device memory limit in bytes");
    let mut core_limit = Family::new("hami_gpu_core_limit_ratio", "Device core limit");
    let mut mem_alloc = Family::new("hami_gpu_memory_allocated_bytes", "Device memory allocated in bytes");
    let mut shared = Family::new("hami_gpu_shared_count", "Number of tasks sharing the device");
    let mut core_alloc = Family::new("hami_gpu_core_allocated_ratio", "Device cores allocated");
    let mut overview = Family::new("hami_node_gpu_overview", "Device memory allocated in bytes, with its limit");
    let mut mem_ratio = Family::new("hami_node_gpu_memory_allocated_ratio", "Device memory allocated over its limit");
    let mut vmem = Family::new("hami_vgpu_memory_allocated_bytes", "Memory a pod holds on a device in bytes");
    let mut vcore = Family::new("hami_vgpu_core_allocated_ratio", "Cores a pod holds on a device");
    let mut q_used = Family::new("hami_resource_quota_used", "Namespace quota usage");
    let mut q_limit = Family::new("hami_resource_quota_limit", "Namespace quota limit");
    let mut outstanding = 0u64;
    // Legacy families are grouped by name, as the text format wants each family contiguous.
    let mut legacy_out: std::collections::BTreeMap<&'static str, String> = std::collections::BTreeMap::new();
    for r in reports {
        let node = r.name.as_str();
        for d in &r.snapshot.devices {
            if d.info.id.as_str().is_empty() {
                continue;
            }
            let uuid = d.info.id.as_str();
            let idx = d.info.index.to_string();
            let ty = d.info.ty.to_string();
            let cores = d.info.devcore.to_string();
            let memlim = d.info.devmem.get().to_string();
            // AMD registers CUs; HAMi's metrics show cores as a percentage.
            let is_amd = vendors.get(d.vendor).name() == "AMD";
            let (core_total, core_used) = if is_amd && d.info.devcore > 0 {
                (100.0, (f64::from(d.used_cores) / f64::from(d.info.devcore) * 100.0).ceil())
            } else {
                (f64::from(d.info.devcore), f64::from(d.used_cores))
            };
            let base = [
                ("node", node),
                ("device_uuid", uuid),
                ("device_index", idx.as_str()),
                ("device_type", ty.as_str()),
                z,
            ];
            mem_limit.sample(&base, d.info.devmem.get() as f64 * MIB);
            core_limit.sample(&base, core_total);
            mem_alloc.sample(
                &[
                    ("node", node),
                    ("device_uuid", uuid),
                    ("device_index", &idx),
                    ("device_cores", &cores),
                    ("device_type", &ty),
                    z,
                ],
                d.used_mem.get() as f64 * MIB,
            );
            shared.sample(&base, f64::from(d.used));
            core_alloc.sample(&base, core_used);
            overview.sample(
                &[
                    ("node", node),
                    ("device_uuid", uuid),
                    ("device_index", &idx),
                    ("device_cores", &cores),
                    ("device_memory_limit", &memlim),
                    ("device_type", &ty),
                    z,
                ],
                d.used_mem.get() as f64 * MIB,
            );
            if d.info.devmem.get() > 0 {
                mem_ratio.sample(&base, d.used_mem.get() as f64 / d.info.devmem.get() as f64);
            }
            if legacy {
                let mut l = |k: &'static str, v: f64, extra: &str| {
                    let line = format!(
                        "{k}{{nodeid=\"{}\",deviceuuid=\"{}\",deviceidx=\"{idx}\"{extra}}} {v}\n",
                        esc(node),
                        esc(uuid)
                    );
                    legacy_out.entry(k).or_default().push_str(&line);
                };
                let t = format!(",devicetype=\"{}\"", esc(&ty));
                l("GPUDeviceMemoryLimit", d.info.devmem.get() as f64 * MIB, &t);
                l("GPUDeviceCoreLimit", f64::from(d.info.devcore), &t);
                l("GPUDeviceMemoryAllocated", d.used_mem.get() as f64 * MIB, &format!(",devicecores=\"{cores}\"{t}"));
                l("GPUDeviceSharedNum", f64::from(d.used), &t);
                l("GPUDeviceCoreAllocated", f64::from(d.used_cores), &t);
                l(
                    "nodeGPUOverview",
                    d.used_mem.get() as f64 * MIB,
                    &format!(",devicecores=\"{cores}\",devicememorylimit=\"{memlim}\"{t}"),
                );
                if d.info.devmem.get() > 0 {
                    l("nodeGPUMemoryPercentage", d.used_mem.get() as f64 / d.info.devmem.get() as f64, "");
                }
            }
        }
        for a in &r.allocs {
            if a.state == AllocState::Reserved {
                outstanding += 1;
            }
            // Per pod and device, as HAMi's collapsed usage stores it (container_index is 0).
            let mut per: std::collections::BTreeMap<&str, (u64, u32)> = std::collections::BTreeMap::new();
            for (_, _, e) in a.devices.entries() {
                let p = per.entry(e.uuid.as_str()).or_default();
                p.0 += e.usedmem.get();
                p.1 += e.usedcores;
            }
            for (uuid, (mem, cores)) in per {
                let labels = [
                    ("namespace", &*a.namespace),
                    ("node", node),
                    ("pod", &*a.name),
                    ("container_index", "0"),
                    ("device_uuid", uuid),
                    z,
                ];
                vmem.sample(&labels, mem as f64 * MIB);
                vcore.sample(&labels, f64::from(cores));
                if legacy {
                    let l = format!(
                        "{{podnamespace=\"{}\",nodename=\"{}\",podname=\"{}\",containeridx=\"0\",deviceuuid=\"{}\"}}",
                        esc(&a.namespace),
                        esc(node),
                        esc(&a.name),
                        esc(uuid)
                    );
                    let _ = writeln!(
                        legacy_out.entry("vGPUMemoryAllocated").or_default(),
                        "vGPUMemoryAllocated{l} {}",
                        mem as f64 * MIB
                    );
                    let _ =
                        writeln!(legacy_out.entry("vGPUCoreAllocated").or_default(), "vGPUCoreAllocated{l} {cores}");
                }
            }
        }
    }
    if let Some(q) = quota {
        for e in q.entries() {
            // As HAMi labels them: `quota_name` is the device resource the quota limits
            // (`nvidia.com/gpumem`, the ResourceQuota key without `limits.`), one series per
            // namespace and resource; the limit is 0 where no ResourceQuota sets one.
            let (ns, res, used, limit) = (e.namespace, e.resource, e.used, e.limit);
            let lim = limit.unwrap_or(0).to_string();
            q_used.sample(&[("namespace", &ns), ("quota_name", &res), ("limit", &lim), z], used as f64);
            if let Some(l) = limit {
                q_limit.sample(&[("namespace", &ns), ("quota_name", &res), z], l as f64);
            }
            if legacy {
                let _ = writeln!(
                    legacy_out.entry("QuotaUsed").or_default(),
                    "QuotaUsed{{quotanamespace=\"{}\",quotaName=\"{}\",limit=\"{lim}\"}} {used}",
                    esc(&ns),
                    esc(&res)
                );
            }
        }
    }
    gauge!(RESERVATIONS_OUTSTANDING).set(outstanding as f64);
    let mut out = String::new();
    for f in [mem_limit, core_limit, mem_alloc, shared, core_alloc, overview, mem_ratio, vmem, vcore, q_used, q_limit] {
        f.finish(&mut out);
    }
    for v in legacy_out.values() {
        out.push_str(v);
    }
    out
}

#[cfg(test)]
mod tests;
