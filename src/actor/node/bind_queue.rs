//! A node's bind lock: one pod's bind holds it at a time, later binds wait in a FIFO queue and
//! are answered when the lock is handed to them, in arrival order. What Filter may read of it
//! (taken or not, how many reservations wait for their bind) is published in `BindState`.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::actor::books::read_side::BindState;
use crate::model::PodUid;

/// The answer to a lock request.
pub enum LockAnswer {
    /// Taken (or already held by this pod): true; held by another and not to be queued: false.
    Now(bool),
    /// Queued behind the holder: resolves when the lock is handed over (an error if the queue
    /// went away with the node).
    Queued(oneshot::Receiver<()>),
}

pub(super) struct BindQueue {
    holder: Option<PodUid>,
    waiters: VecDeque<(PodUid, oneshot::Sender<()>)>,
    state: Arc<BindState>,
}

impl BindQueue {
    pub fn new(state: Arc<BindState>) -> BindQueue {
        BindQueue { holder: None, waiters: VecDeque::new(), state }
    }

    pub fn holder(&self) -> Option<&PodUid> {
        self.holder.as_ref()
    }

    pub fn lock(&mut self, uid: PodUid, queue: bool) -> LockAnswer {
        match &self.holder {
            Some(holder) if *holder != uid && !queue => LockAnswer::Now(false),
            Some(holder) if *holder != uid => {
                let (tx, rx) = oneshot::channel();
                self.waiters.push_back((uid, tx));
                LockAnswer::Queued(rx)
            }
            _ => {
                self.holder = Some(uid);
                self.state.set_locked(true);
                LockAnswer::Now(true)
            }
        }
    }

    /// Releases the lock if `uid` holds it, or takes `uid` out of the queue.
    pub fn unlock(&mut self, uid: &PodUid) {
        if self.holder.as_ref() == Some(uid) {
            self.pass();
        } else {
            self.waiters.retain(|(w, _)| w != uid);
        }
    }

    /// Hands the lock to the first waiter still waiting, or frees it.
    pub fn pass(&mut self) {
        self.holder = None;
        while let Some((uid, tx)) = self.waiters.pop_front() {
            if tx.send(()).is_ok() {
                self.holder = Some(uid);
                return;
            }
        }
        self.state.set_locked(false);
    }

    /// Publishes how many reservations wait for their bind.
    pub fn set_pending(&self, n: usize) {
        self.state.set_pending(n);
    }
}
