//! The last decisions, for the status page and the console: filters and binds record theirs,
//! node actors the reservations that lapsed without a bind.

use std::collections::VecDeque;
use std::sync::Mutex;

pub use crate::sched::fragmentation::DeviceNeed;

/// A recent decision, for the status page.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RecentDecision {
    pub pod: String,
    pub node: Option<String>,
    pub outcome: &'static str,
    pub detail: String,
    pub unix_s: i64,
    /// A no-fit's reasons on its first nodes (at most `NO_FIT_NODES`), HAMi's reason then the
    /// detail.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<(String, String)>,
    /// A no-fit's request per device, one entry per container and vendor: what the console
    /// measures the free memory of shared devices against.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<DeviceNeed>,
}

/// How many nodes' reasons a no-fit keeps for the status page.
pub(in crate::actor) const NO_FIT_NODES: usize = 20;

const RECENT_DECISIONS: usize = 50;

/// The last decisions, newest last, for the status page: filters and binds record theirs, node
/// actors the reservations that expired without a bind.
#[derive(Debug, Default)]
pub struct Recent(Mutex<VecDeque<RecentDecision>>);

impl Recent {
    pub fn push(&self, d: RecentDecision) {
        if let Ok(mut q) = self.0.lock() {
            if q.len() >= RECENT_DECISIONS {
                q.pop_front();
            }
            q.push_back(d);
        }
    }
    pub fn list(&self) -> Vec<RecentDecision> {
        self.0.lock().map(|q| q.iter().cloned().collect()).unwrap_or_default()
    }
}
