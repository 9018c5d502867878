//! The engine's port to a cluster: the `Backend` trait through which every read of the
//! cluster's pods and every write the scheduler makes (pod annotation patches, node locks,
//! bindings, Events) goes, the `Observer` trait through which a backend's watchers report what
//! changes, and the types both sides share. The engine and the backends depend on this module,
//! never on each other: the in-memory backend (backend/memory.rs) serves the simulator and unit
//! tests, the Kubernetes backend (backend/kube.rs) real clusters.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::model::PodView;

pub mod access;
mod backend;
pub mod dra;
mod error;
mod event;
mod lock;
mod observer;
mod patch;

pub use backend::{Backend, Evicted};
pub use error::{Error, Result};
pub use event::{Event, EventBudget, EventType, ObjectKind, reasons};
pub use lock::{CAMBRICON_LOCK_TIMEOUT, LockVerdict, holder_needs_lock, judge_lock, lock_holder_to_ask, lock_taken};
pub use observer::Observer;
pub use patch::PodPatch;

/// A pod's identity as the extender names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    /// The identity of a pod as it was sent or read.
    pub fn of(pod: &PodView) -> PodRef {
        let m = &pod.metadata;
        PodRef { namespace: m.namespace.clone(), name: m.name.clone(), uid: m.uid.clone() }
    }
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Whether this replica may schedule: leader (or no election) and caches synced. The backend's
/// election and watchers set it; the HTTP layer reads it.
#[derive(Clone)]
pub struct Readiness {
    pub leader: Arc<AtomicBool>,
    pub synced: Arc<AtomicBool>,
}

impl Readiness {
    /// Always leader, already synced (in-memory backend, no election).
    pub fn ready() -> Readiness {
        Readiness { leader: Arc::new(AtomicBool::new(true)), synced: Arc::new(AtomicBool::new(true)) }
    }
    pub fn is_ready(&self) -> bool {
        self.leader.load(Ordering::SeqCst) && self.synced.load(Ordering::SeqCst)
    }
}

/// A cached pod unpacked for a reader. A buffer `PackedPod::pack` did not write is a bug; the pod
/// reads as absent and the log says so.
pub(crate) fn unpacked(p: &crate::model::packed::PackedPod) -> Option<Arc<PodView>> {
    let v = p.unpack();
    if v.is_none() {
        tracing::error!(pod = %format_args!("{}/{}", p.namespace(), p.name()), bytes = p.len(), "a cached pod could not be unpacked");
    }
    v.map(Arc::new)
}
