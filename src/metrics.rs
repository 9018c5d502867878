//! Metric names and recording helpers. One histogram per request, label values from enums; device
//! gauges are set on commit, release and registration, never on the filter path.

use std::time::Instant;

use metrics::{counter, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

pub type Handle = PrometheusHandle;

/// Installs the process-wide Prometheus recorder and its upkeep task. `None` when a recorder is
/// already installed (a second engine in the same process, as in tests).
pub fn install() -> Option<Handle> {
    let handle = PrometheusBuilder::new().install_recorder().ok()?;
    let h = handle.clone();
    // Without the exporter's own listener nothing else runs upkeep (histogram buckets roll here).
    tokio::spawn(async move {
        let mut t = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            t.tick().await;
            h.run_upkeep();
        }
    });
    Some(handle)
}

pub const FILTER_SECONDS: &str = "hami_scheduler_filter_duration_seconds";
pub const BIND_SECONDS: &str = "hami_scheduler_bind_duration_seconds";
pub const RESERVATIONS_EXPIRED: &str = "hami_scheduler_reservations_expired_total";

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

pub fn filter_done(outcome: Outcome, started: Instant) {
    histogram!(FILTER_SECONDS, "outcome" => outcome.as_str()).record(started.elapsed().as_secs_f64());
}

pub fn bind_done(outcome: Outcome, started: Instant) {
    histogram!(BIND_SECONDS, "outcome" => outcome.as_str()).record(started.elapsed().as_secs_f64());
}

pub fn reservation_expired() {
    counter!(RESERVATIONS_EXPIRED).increment(1);
}

pub const API_REQUESTS: &str = "hami_scheduler_api_requests_total";
pub const LOCK_HANDOVERS: &str = "hami_scheduler_node_lock_handovers_total";
pub const WATCH_RESTARTS: &str = "hami_scheduler_watch_restarts_total";
pub const LEADER: &str = "hami_scheduler_leader";

/// One Kubernetes API request by verb, resource and result.
pub fn api_request(verb: &'static str, resource: &'static str, ok: bool) {
    counter!(API_REQUESTS, "verb" => verb, "resource" => resource, "result" => if ok { "ok" } else { "error" }).increment(1);
}

/// An expired node lock was taken over from a holder that no longer needed it.
pub fn lock_handover() {
    counter!(LOCK_HANDOVERS).increment(1);
}

pub fn watch_restart(resource: &'static str) {
    counter!(WATCH_RESTARTS, "resource" => resource).increment(1);
}

pub fn leader(is_leader: bool) {
    metrics::gauge!(LEADER).set(if is_leader { 1.0 } else { 0.0 });
}

pub const LOCK_WAITS: &str = "hami_scheduler_node_lock_waits_total";

/// A bind found the node locked by another pod and waited.
pub fn lock_wait() {
    counter!(LOCK_WAITS).increment(1);
}
