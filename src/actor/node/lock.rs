//! A node's bind lock: one pod's bind holds it at a time, later binds wait in a FIFO queue and
//! are answered when the lock is handed to them, in arrival order.

use std::sync::atomic::Ordering;

use actix::{Context, Handler, ResponseFuture};
use tokio::sync::oneshot;

use super::NodeActor;
use crate::actor::messages::{Lock, Unlock};

impl Handler<Lock> for NodeActor {
    type Result = ResponseFuture<bool>;
    fn handle(&mut self, msg: Lock, _: &mut Context<Self>) -> Self::Result {
        match &self.lock {
            Some(holder) if *holder != msg.uid && !msg.queue => Box::pin(async { false }),
            Some(holder) if *holder != msg.uid => {
                let (tx, rx) = oneshot::channel();
                self.waiters.push_back((msg.uid, tx));
                Box::pin(async move { rx.await.is_ok() })
            }
            _ => {
                self.lock = Some(msg.uid);
                self.binds.locked.store(true, Ordering::Relaxed);
                Box::pin(async { true })
            }
        }
    }
}

impl Handler<Unlock> for NodeActor {
    type Result = ();
    fn handle(&mut self, msg: Unlock, _: &mut Context<Self>) {
        if self.lock.as_ref() == Some(&msg.uid) {
            self.pass_lock();
        } else {
            self.waiters.retain(|(uid, _)| *uid != msg.uid);
        }
    }
}

impl NodeActor {
    /// Hands the bind lock to the first waiter still waiting, or frees it.
    pub(super) fn pass_lock(&mut self) {
        self.lock = None;
        while let Some((uid, tx)) = self.waiters.pop_front() {
            if tx.send(()).is_ok() {
                self.lock = Some(uid);
                return;
            }
        }
        self.binds.locked.store(false, Ordering::Relaxed);
    }
}
