//! hami-rs: a wire-compatible replacement for the scheduler half of HAMi.
//!
//! Module map (dependencies point inward):
//! - [`model`]: pure domain types and HAMi's byte-compatible annotation codecs.
//! - [`vendor`]: one accelerator family per file behind the `Vendor` trait, and the registry.
//! - [`sched`]: pure per-node fit, scoring, policies, accounting and quota.
//! - [`config`]: command-line flags and the device config file.
#![forbid(unsafe_code)]

pub mod config;
pub mod model;
pub mod sched;
pub mod vendor;

#[doc(hidden)]
pub mod testing;
