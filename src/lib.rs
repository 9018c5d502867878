//! hami-rs: a wire-compatible replacement for the scheduler half of HAMi.
//!
//! Module map (dependencies point inward; `tests/deps.rs` checks the arrows):
//! - [`gosort`]: Go's `sort.Sort`, step for step, for HAMi's tie order (a leaf: imports nothing).
//! - [`model`]: pure domain types, HAMi's byte-compatible annotation codecs, rejection reasons.
//! - [`devices`]: one accelerator family per file behind the `Vendor` trait, and the registry.
//! - [`sched`]: pure per-node fit, scoring, policies, accounting and quota.
//! - [`config`]: command-line flags and the device config file.
//! - [`port`]: the engine's port to a cluster (`Backend`, `Observer`).
//! - [`actor`]: node actors, the coordinator and the `Engine` handle.
//! - [`admission`]: a pod's mutation and validation at creation, for the webhook, `simulate` and
//!   `inspect`.
//! - [`backend`]: the in-memory and Kubernetes implementations of the port.
//! - [`report`]: the JSON shapes of the engine's view (`/usage`, the simulator, the console).
//! - [`metrics`]: request metrics (names and recording helpers) and, in `metrics::cluster`, HAMi's
//!   cluster gauges rendered at scrape time.
//! - [`http`]: the HTTP surface (extender verbs, webhook, console) and who may call each.
//! - [`simulate`], [`inspect`]: the simulator and `kubectl hami`, over the same engine.
//! - [`app`]: wiring and shutdown; [`log_writer`], [`error_text`]: the log's way out and its text.
#![forbid(unsafe_code)]

/// The pure layers live in the `hami-core` crate; they keep their paths here.
pub use hami_core::{devices, gosort, model, sched};

pub mod actor;
pub mod admission;
pub mod app;
pub mod backend;
pub mod clock;
pub mod config;
pub mod error_text;
pub mod http;
pub mod inspect;
pub mod log_writer;
pub mod metrics;
pub mod port;
pub mod report;
pub mod simulate;

/// Fixture builders for this crate's tests, integration tests and benchmarks; not part of the
/// library's API (built only for tests, or with the `testing` feature the dev-dependency on this
/// crate turns on).
#[cfg(any(test, feature = "testing"))]
pub mod testing;
