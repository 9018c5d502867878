//! The error a backend's calls fail with, in HAMi's wording where HAMi has one. Apart from the
//! trait, so the types the trait's calls carry (a patch's preconditions) can name it.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("pod {0} not found")]
    PodNotFound(String),
    #[error("failed to get node {0}")]
    NodeNotFound(String),
    /// Lock held by another pod (HAMi's wording, so tools matching it keep working).
    #[error("node {node} has been locked within {within}: node lock contention")]
    LockContention { node: String, within: String },
    #[error("node {node}: lock annotation is malformed: {why}")]
    LockMalformed { node: String, why: String },
    /// The API server answered with an error status.
    #[error("{message} ({reason})")]
    Status { code: u16, message: String, reason: String },
    /// The request did not get an answer (connection, timeout, decoding): the error and its
    /// causes.
    #[error("{0}")]
    Transport(String),
    /// Releasing HAMi's node lock kept conflicting with other writers.
    #[error("node {node}: could not release the node lock")]
    UnlockFailed { node: String },
    /// Cambricon's own node lock is fresh.
    #[error("node {node} has been locked within 2 minutes")]
    CambriconLocked { node: String },
    /// A write meant for an unbound pod found it bound (see `PodPatch::while_unbound`); the
    /// backend's cache holds the pod as read then.
    #[error("pod {pod} is already bound to node {node}")]
    AlreadyBound { pod: String, node: String },
    /// A write refused (the in-memory backend's stand-in for the API server's refusals).
    #[error("{0}")]
    Refused(String),
}

impl Error {
    pub fn is_contention(&self) -> bool {
        matches!(self, Error::LockContention { .. })
    }

    /// The request may have taken effect although it failed: no answer came, or the API server
    /// failed while serving it.
    pub fn is_ambiguous(&self) -> bool {
        matches!(self, Error::Transport(_)) || matches!(self, Error::Status { code, .. } if *code >= 500)
    }
}

pub type Result<T> = std::result::Result<T, Error>;
