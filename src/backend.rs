//! The backends: in memory (`memory`, the simulator's and the tests' cluster) and Kubernetes
//! (`kube`, kube-rs against an API server). What they implement, and what the engine calls,
//! is in [`crate::port`], re-exported here for the backends' users.

pub use crate::port::*;

mod dra_events;
pub mod kube;
pub mod memory;

pub use dra_events::tell_dra_change;
