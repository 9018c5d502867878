//! kube-scheduler's filter call: the pipeline (`run.rs`) over one call's `FilterCycle`
//! (`cycle.rs`), the candidates resolved against the node book's directory (`candidates.rs`), the
//! answers kept per pod shape (`tables.rs`), the evaluation over snapshots (`evaluate.rs`), the
//! decision written onto the pod (`decision.rs`), the no-fit's reasons (`failures.rs`), its
//! outcome (`outcome.rs`), and `/prioritize` over the scores a filter ranked (`prioritize.rs`).

pub(crate) mod candidates;
pub(crate) mod cycle;
pub(crate) mod decision;
pub(crate) mod evaluate;
pub(crate) mod failures;
pub(crate) mod outcome;
pub mod prioritize;
pub(crate) mod run;
pub(crate) mod tables;
