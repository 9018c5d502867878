//! hami-rs: a wire-compatible replacement for the scheduler half of HAMi.
//!
//! Module map (dependencies point inward):
//! - [`gosort`]: Go's `sort.Sort`, step for step, for HAMi's tie order (a leaf: imports nothing).
//! - [`model`]: pure domain types, HAMi's byte-compatible annotation codecs, rejection reasons.
//! - [`devices`]: one accelerator family per file behind the `Vendor` trait, and the registry.
//! - [`sched`]: pure per-node fit, scoring, policies, accounting and quota.
//! - [`config`]: command-line flags and the device config file.
//! - [`actor`]: node actors, the coordinator and the `Engine` handle.
//! - [`admission`]: a pod's mutation and validation at creation, for the webhook, `simulate` and
//!   `inspect`.
//! - [`backend`]: the `Backend` trait and its in-memory and Kubernetes implementations.
//! - [`metrics`]: metric names and recording helpers.
#![forbid(unsafe_code)]

pub mod actor;
pub mod admission;
pub mod app;
pub mod backend;
pub mod config;
pub mod devices;
pub mod error_text;
pub mod gosort;
pub mod http;
pub mod inspect;
pub mod log_writer;
pub mod metrics;
pub mod model;
pub mod port;
pub mod report;
pub mod sched;
pub mod simulate;

/// Fixture builders for this crate's tests, integration tests and benchmarks; not part of the
/// library's API (built only for tests, or with the `testing` feature the dev-dependency on this
/// crate turns on).
#[cfg(any(test, feature = "testing"))]
pub mod testing;
