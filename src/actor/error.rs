//! Why a filter or a bind failed, as values. Their texts are what kube-scheduler shows in the
//! pod's events and what the Events say, HAMi's wording where HAMi has one.

use crate::model::codec;
use crate::model::request;
use crate::port;

use crate::actor::messages::NotReserved;

/// Why a filter call could not decide (a node that does not fit is not an error).
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// HAMi's wording for a bad `hami.io/device-scoring-weights`.
    #[error("calcScore failed {source} for pod {pod}")]
    Weights { pod: String, source: codec::Error },
    #[error("pod {pod}: {source}")]
    Request { pod: String, source: request::Error },
    #[error("coordinator unavailable: {0}")]
    Coordinator(actix::MailboxError),
    #[error("the engine is stopping")]
    Stopping,
    /// Writing the decision onto the pod failed.
    #[error(transparent)]
    Backend(#[from] port::Error),
}

/// Why a bind failed.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// Pod or node not found, HAMi's node lock contended, or an API write failed.
    #[error(transparent)]
    Backend(#[from] port::Error),
    #[error("{0}")]
    Request(request::Error),
    #[error("pod {pod} was not filtered onto node {node}")]
    NotFiltered { pod: String, node: String },
    #[error("pod {pod}: device annotations are malformed: {source}")]
    Malformed { pod: String, source: codec::Error },
    /// The reservation lapsed and the devices written on the pod are taken.
    #[error("reservation of pod {pod} on node {node} expired and its devices are no longer free: {detail}")]
    Lapsed { pod: String, node: String, detail: String },
    /// With the decision written at bind: the pod holds nothing on the node (its reservation
    /// lapsed, or the scheduler restarted since the filter) and no longer fits there.
    #[error("pod {pod} no longer fits node {node}: {detail}")]
    NoLongerFits { pod: String, node: String, detail: String },
    #[error("pod {pod} on node {node}: {source}")]
    NotReserved { pod: String, node: String, source: NotReserved },
    /// HAMi's wording for a PodGroup member that waited `--node-lock-retry-timeout` in vain.
    #[error("timed out after {wait} waiting for node {node} to be unlocked: node lock contention")]
    PodGroupTimeout { wait: String, node: String },
    #[error("node {node}: {source}")]
    Mailbox { node: String, source: actix::MailboxError },
    #[error("node {node}: its actor stopped")]
    Stopped { node: String },
}

impl BindError {
    /// Another pod's bind or HAMi's node lock held the node the whole wait.
    pub fn is_contention(&self) -> bool {
        matches!(self, BindError::Backend(e) if e.is_contention()) || matches!(self, BindError::PodGroupTimeout { .. })
    }
}

/// Errors compare by what they say: tests and the simulator's reports compare outcomes.
impl PartialEq for FilterError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}
