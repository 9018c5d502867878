//! The books the engine keeps beside its node actors: the node book (`nodes.rs`: actors,
//! snapshots, the directory, answer tables, placements), the pod book (`pods.rs`: unsettled
//! bindings, the claim index, scores, pending pods; `pending.rs`, `scores.rs`), the pod groups
//! (`groups.rs`), the read side
//! node actors publish (`read_side.rs`) and the recent decisions (`recent.rs`).

pub(crate) mod groups;
pub(crate) mod moves;
pub(crate) mod nodes;
pub(crate) mod pending;
pub(crate) mod pods;
pub(crate) mod read_side;
pub(crate) mod recent;
pub(crate) mod scores;
