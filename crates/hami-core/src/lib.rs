//! hami-core: HAMi's scheduling rules as pure functions, the layers under the scheduler's engine.
//!
//! Module map (dependencies point inward):
//! - [`gosort`]: Go's `sort.Sort`, step for step, for HAMi's tie order (a leaf: imports nothing).
//! - [`model`]: pure domain types, HAMi's byte-compatible annotation codecs, rejection reasons.
//! - [`devices`]: one accelerator family per file behind the `Vendor` trait, and the registry.
//! - [`config`]: the device config file, each vendor's section typed beside its vendor.
//! - [`sched`]: pure per-node fit, scoring, policies, accounting, quota, and the planner that
//!   places many pods on one frozen view of the cluster.
//!
//! Nothing here performs I/O or reads a clock, and the crate depends on no actix, tokio, kube or
//! k8s-openapi crate: the engine and the edges live in the scheduler crate above it.
#![forbid(unsafe_code)]

pub mod config;
pub mod devices;
pub mod gosort;
pub mod model;
pub mod sched;

/// Fixture builders for this crate's tests and the scheduler crate's tests and benchmarks; not
/// part of the library's API (built only for tests, or with the `testing` feature).
#[cfg(any(test, feature = "testing"))]
pub mod testing;
