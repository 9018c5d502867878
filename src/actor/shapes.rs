//! The pod shapes filtered lately, which node actors answer ahead: after a node's usage changes,
//! its actor fits the new snapshot for each of them on its own thread, so the next filters of
//! those shapes find the answer in the snapshot's memo instead of fitting the node themselves.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::model::PodRequest;

/// As many shapes as a snapshot's memo keeps answers.
const SHAPES_KEPT: usize = crate::sched::MEMO_SLOTS;

/// Requests of the shapes filtered last, one per shape, the most recent last. Only shapes whose
/// answers may come from memos (no namespace quota applies) are noted.
#[derive(Default)]
pub struct Shapes(Mutex<VecDeque<Arc<PodRequest>>>);

impl Shapes {
    pub fn note(&self, req: &Arc<PodRequest>) {
        let Ok(mut q) = self.0.lock() else { return };
        if q.back().is_some_and(|r| r.fit_key == req.fit_key) {
            return;
        }
        if let Some(p) = q.iter().position(|r| r.fit_key == req.fit_key) {
            q.remove(p);
        }
        if q.len() == SHAPES_KEPT {
            q.pop_front();
        }
        q.push_back(req.clone());
    }

    pub fn recent(&self) -> Vec<Arc<PodRequest>> {
        self.0.lock().map(|q| q.iter().cloned().collect()).unwrap_or_default()
    }
}
