//! The engine: node actors (one per node, spread over a fixed set of arbiters), coordinators (one
//! per filtering thread), and `Engine`, the handle the HTTP layer and the backends use. Filter
//! reads the snapshots node actors publish and asks its thread's coordinator to reserve; Bind
//! takes locks and commits through messages; observations from the cluster go to the owning node
//! actor.
//!
//! ```text
//!  HTTP /filter ──▶ Engine::filter ── fit over snapshots ──▶ Coordinator ──Reserve──▶ NodeActor
//!  HTTP /bind   ──▶ Engine::bind ──Lock──▶ NodeActor; Backend lock + binding; Commit/Unlock
//!  HTTP /refit   ──▶ Engine::refit ──Refit──▶ NodeActor; Backend patch; RefitSettle
//!  watchers     ──▶ Engine::{register_node, observe_pod, delete_pod} ──▶ NodeActor
//! ```

mod bind;
mod candidates;
pub mod config;
pub mod coordinator;
mod cycle;
mod decision;
mod engine;
pub mod error;
mod evaluate;
mod failures;
mod filter;
mod locks;
pub mod messages;
pub mod node;
mod nodes;
mod observe;
mod outcome;
mod pending;
mod pods;
pub mod preemption;
pub mod prioritize;
mod read_side;
mod recent;
pub mod refit;
mod scores;
mod scratch;
mod simulate;
mod state;
mod tables;
mod unreserve;

/// The namespace quota book, which lives with the pure scheduling code.
pub use crate::sched::quota_book as quota;

pub use candidates::Candidates;
pub(crate) use config::RESERVE_CANDIDATES;
pub use config::{DecisionWrite, EngineConfig, FilterMode, FilterResult, SLICE_MIN};
pub use engine::Engine;
pub use error::{BindError, FilterError};
pub use failures::{Failures, NODE_LOCKED, NODE_UNREGISTERED, NODE_USAGE_UNAVAILABLE};
pub use filter::Told;
pub use messages::{NodeReport, Registration};
pub use outcome::FilterOutcome;
pub use pending::{PendingCounts, PendingPod};
pub use recent::{DeviceNeed, Recent, RecentDecision};
pub(crate) use scratch::{SCRATCH, with_scratch};
pub use simulate::Simulation;
pub(crate) use state::{Inner, unix_now};

#[cfg(test)]
mod tests;
