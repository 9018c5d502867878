//! The engine: node actors (one per node, spread over a fixed set of arbiters), coordinators (one
//! per filtering thread), and `Engine`, the handle the HTTP layer and the backends use
//! (`engine.rs`: every call one line into the state, `state.rs`, and the pipeline that serves
//! it). Filter reads the snapshots node actors publish and reserves on the best node through its
//! thread's coordinator (inline when the node's actor is idle); Bind takes locks and commits
//! through messages; a plan of many parts (a preemption's claim) is taken whole or not at all by
//! the coordinator; everything given back goes through one `Unreserve`; observations from the
//! cluster go to the owning node actor. This file only declares the parts and names what the
//! rest of the crate uses.
//!
//! ```text
//!  HTTP /filter ──▶ Engine ── filter/: fit over snapshots ──▶ Coordinator ──Reserve──▶ NodeActor
//!  HTTP /bind   ──▶ Engine ── bind/: Lock ──▶ NodeActor; Backend lock + binding; Commit/Unlock
//!  HTTP /refit  ──▶ Engine ── refit.rs: Refit ──▶ NodeActor; Backend patch; RefitSettle
//!  preemption/  ──▶ sched::plan over one view ──▶ Coordinator ──TakeAll (claims)──▶ NodeActors
//!  watchers     ──▶ Engine::{register_node, observe_pod, delete_pod} ──▶ NodeActor (Unreserve)
//! ```

mod bind;
mod books;
pub mod config;
pub mod coordinator;
pub mod defrag;
mod engine;
pub mod error;
pub mod filter;
mod gang;
pub mod messages;
pub mod node;
mod observe;
pub mod preemption;
pub mod refit;
mod scratch;
mod simulate;
mod state;
mod unreserve;

/// The namespace quota book, which lives with the pure scheduling code.
pub use crate::sched::quota_book as quota;

pub use books::groups::GroupReport;
pub use books::pending::{PendingCounts, PendingPod};
pub use books::recent::{DeviceNeed, Recent, RecentDecision};
pub(crate) use config::RESERVE_CANDIDATES;
pub use config::{DecisionWrite, DefragLimits, Defragment, EngineConfig, FilterMode, FilterResult, SLICE_MIN};
pub use engine::Engine;
pub use error::{BindError, FilterError};
pub use filter::candidates::Candidates;
pub use filter::failures::{Failures, NODE_LOCKED, NODE_UNREGISTERED, NODE_USAGE_UNAVAILABLE};
pub use filter::outcome::FilterOutcome;
pub use filter::run::Told;
pub use messages::{NodeReport, Registration};
pub(crate) use scratch::{SCRATCH, with_scratch};
pub use simulate::Simulation;
pub(crate) use state::{Inner, unix_now};

#[cfg(test)]
mod tests;
