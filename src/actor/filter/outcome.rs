//! What one filter call comes to, as the extender answers it.

use crate::model::NodeName;

use crate::actor::error::FilterError;
use crate::actor::filter::failures::Failures;

/// The answer to one filter call.
#[derive(Debug, PartialEq)]
pub enum FilterOutcome {
    /// The pod requests no device: the candidates are passed through unchanged.
    PassThrough,
    /// Reserved on `node`; the nodes that did not fit are kept, unrendered. With
    /// `FilterResult::All`, `others` holds the other nodes that fit, best first.
    Chosen { node: NodeName, others: Vec<NodeName>, failed: Failures },
    /// No node fits; the reasons, unrendered.
    NoFit { failed: Failures },
    /// The evaluation itself failed (bad request, patch failure).
    Error(FilterError),
}
