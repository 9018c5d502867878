//! `NodeActor`: one per node, the only writer of that node's device usage, reservations and
//! in-process bind lock. Its state and every change to it are a [`NodeCore`]; the actor runs the
//! core's changes one message at a time, arms its reservation timer and publishes an immutable
//! snapshot after every change for Filter to read. Handlers are synchronous and short; they call
//! `sched` and never await the cluster.
//!
//! ```text
//! Free ──Reserve──▶ Reserved ──Commit──▶ Committed ──Unreserve(Pod)──▶ Free
//!                      └──Unreserve / TTL──▶ Free   (restart: PodObserved rebuilds both)
//! TakeClaim ──▶ Claimed ──Reserve (its pod)──▶ Reserved;  Claimed ──Unreserve / expiry──▶ Free
//! ```
//!
//! A reservation or a bind step from a sender whose node actor is idle (nothing queued, nothing
//! running) is applied on the sender's own thread ([`NodeAddr`]): the same core under the same
//! lock, after everything sent before it, so the actor's invariant holds unchanged and the
//! common filter pays no wake-up of another CPU.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use actix::dev::{Request, ToEnvelope};
use actix::{
    Actor, ActorContext, AsyncContext, Context, Handler, MailboxError, Message, MessageResult, ResponseFuture,
};
use dashmap::DashMap;

use crate::actor::messages::*;
use crate::devices::Vendors;
use crate::model::{NodeName, PodDevices, PodUid};
use crate::sched::{NodeSnapshot, Rejection};

pub use self::core::{NodeConfig, NodeCore, SharedQuota};
pub use crate::actor::books::read_side::BindState;
pub use crate::actor::books::read_side::SnapCell;
use bind_queue::LockAnswer;

mod bind_queue;
pub mod claims;
mod cluster;
mod core;
mod ledger;
mod record;
mod refit;
mod tombstones;

/// The shared address book entry of a node: its actor, its latest snapshot, and the state of its
/// binds (written by the actor only; Filter reads it to prefer nodes no bind is busy with).
pub struct NodeEntry {
    pub addr: NodeAddr,
    pub snap: Arc<SnapCell>,
    pub binds: Arc<BindState>,
}

pub type Book = DashMap<NodeName, NodeEntry>;

/// A node's core and how many messages were sent to it through [`NodeAddr`].
pub struct NodeCell {
    core: Mutex<NodeCore>,
    sent: AtomicU64,
}

impl NodeCell {
    fn new(cfg: NodeConfig) -> Arc<NodeCell> {
        Arc::new(NodeCell { core: Mutex::new(NodeCore::new(cfg)), sent: AtomicU64::new(0) })
    }
    /// A handler that panicked left the core as any handler leaves it between messages (each
    /// change is checked before it is applied), so a poisoned lock still holds a whole core.
    fn lock(&self) -> MutexGuard<'_, NodeCore> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How the engine reaches a node actor: every message sent through it is counted, so a sender
/// can tell the actor is idle, and then apply a reservation or a bind step itself.
#[derive(Clone)]
pub struct NodeAddr {
    addr: actix::Addr<NodeActor>,
    cell: Arc<NodeCell>,
}

impl NodeAddr {
    /// Starts the node's actor on `arbiter`.
    pub fn start(cfg: NodeConfig, arbiter: &actix::ArbiterHandle) -> NodeAddr {
        let cell = NodeCell::new(cfg);
        let c = cell.clone();
        let addr = NodeActor::start_in_arbiter(arbiter, move |_| NodeActor::of(c));
        NodeAddr { addr, cell }
    }

    pub fn send<M>(&self, msg: M) -> Request<NodeActor, M>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        NodeActor: Handler<M>,
        <NodeActor as Actor>::Context: ToEnvelope<NodeActor, M>,
    {
        self.cell.sent.fetch_add(1, Ordering::SeqCst);
        self.addr.send(msg)
    }

    pub fn do_send<M>(&self, msg: M)
    where
        M: Message + Send + 'static,
        M::Result: Send,
        NodeActor: Handler<M>,
        <NodeActor as Actor>::Context: ToEnvelope<NodeActor, M>,
    {
        self.cell.sent.fetch_add(1, Ordering::SeqCst);
        self.addr.do_send(msg)
    }

    pub fn connected(&self) -> bool {
        self.addr.connected()
    }

    /// The core, when its actor is idle: no handler runs (the lock is free) and every message
    /// sent through a `NodeAddr` was applied (handlers count them under the lock). What the
    /// caller then applies comes after all of them, as if it had been the next message.
    fn idle(&self) -> Option<MutexGuard<'_, NodeCore>> {
        let core = self.cell.core.try_lock().ok()?;
        (!core.stopped && core.done == self.cell.sent.load(Ordering::SeqCst)).then_some(core)
    }

    /// `Reserve`, on this thread when the actor is idle.
    pub async fn reserve(&self, msg: Reserve) -> Result<Result<Reserved, Rejection>, MailboxError> {
        match self.reserve_here(msg) {
            Ok(r) => Ok(r),
            Err(msg) => self.send(msg).await,
        }
    }

    /// `Reserve` applied on this thread if the actor is idle; the message back if it is not.
    pub fn reserve_here(&self, msg: Reserve) -> Result<Result<Reserved, Rejection>, Reserve> {
        let Some(mut core) = self.idle() else { return Err(msg) };
        let r = core.reserve(msg);
        core.ask_timer(&self.addr);
        Ok(r)
    }

    /// `Commit`, on this thread when the actor is idle.
    pub async fn commit(&self, uid: PodUid) -> Result<Result<PodDevices, NotReserved>, MailboxError> {
        if let Some(mut core) = self.idle() {
            return Ok(core.commit(&uid));
        }
        self.send(Commit { uid }).await
    }

    /// `Unreserve`, on this thread when the actor is idle.
    pub async fn unreserve(&self, what: Holding) -> Result<bool, MailboxError> {
        if let Some(mut core) = self.idle() {
            return Ok(core.unreserve(&what));
        }
        self.send(Unreserve(what)).await
    }

    /// `Unreserve` without waiting for the answer: applied on this thread when the actor is
    /// idle, sent otherwise (a watcher's deletions then cost no wake-up either).
    pub fn unreserve_soon(&self, what: Holding) {
        if let Some(mut core) = self.idle() {
            core.unreserve(&what);
            return;
        }
        self.do_send(Unreserve(what));
    }

    /// `TakeClaim`, on this thread when the actor is idle.
    pub async fn take_claim(&self, msg: TakeClaim) -> Result<Result<(), Rejection>, MailboxError> {
        if let Some(mut core) = self.idle() {
            let r = core.take_claim(msg);
            core.ask_timer(&self.addr);
            return Ok(r);
        }
        self.send(msg).await
    }

    /// `Lock`, taken on this thread when the actor is idle (a wait for the holder still waits).
    pub async fn lock(&self, uid: PodUid, queue: bool) -> Result<bool, MailboxError> {
        let answer = match self.idle() {
            Some(mut core) => core.binds.lock(uid, queue),
            None => return self.send(Lock { uid, queue }).await,
        };
        Ok(match answer {
            LockAnswer::Now(taken) => taken,
            LockAnswer::Queued(rx) => rx.await.is_ok(),
        })
    }

    /// A pod the cluster shows on the node, applied on this thread when the actor is idle (a
    /// watcher's observations then cost no wake-up either).
    pub fn pod_observed(&self, msg: PodObserved) {
        if let Some(mut core) = self.idle() {
            core.observe(msg);
            core.ask_timer(&self.addr);
            return;
        }
        self.do_send(msg);
    }

    /// `Unlock`, on this thread when the actor is idle.
    pub async fn unlock(&self, uid: PodUid) -> Result<(), MailboxError> {
        if let Some(mut core) = self.idle() {
            core.binds.unlock(&uid);
            return Ok(());
        }
        self.send(Unlock { uid }).await
    }
}

/// The actor around a node's core: its mailbox and its timer.
pub struct NodeActor {
    cell: Arc<NodeCell>,
    /// The timer armed for the earliest reservation deadline.
    armed: Option<actix::SpawnHandle>,
}

impl Actor for NodeActor {
    type Context = Context<Self>;
}

impl NodeActor {
    fn of(cell: Arc<NodeCell>) -> NodeActor {
        NodeActor { cell, armed: None }
    }

    /// The empty snapshot a node starts with, before its actor has read any device.
    pub fn initial_snapshot(name: &NodeName, vendors: &Vendors) -> Arc<NodeSnapshot> {
        Arc::new(NodeSnapshot::new(name.clone(), Vec::new(), vec![None; vendors.len()]))
    }

    /// Runs one message's change on the core, counted as applied, then arms the timer.
    fn apply<R>(&mut self, ctx: &mut Context<Self>, op: impl FnOnce(&mut NodeCore) -> R) -> R {
        let cell = self.cell.clone();
        let mut core = cell.lock();
        core.done += 1;
        let r = op(&mut core);
        self.rearm(&mut core, ctx);
        r
    }

    /// Keeps one timer armed, for the earliest deadline.
    fn rearm(&mut self, core: &mut NodeCore, ctx: &mut Context<Self>) {
        core.timer.asked = false;
        if !core.timer_needed() {
            return;
        }
        let Some(next) = core.next_deadline().map(core::on_tick) else { return };
        if let Some(h) = self.armed.take() {
            ctx.cancel_future(h);
        }
        let h = ctx.run_later(next.saturating_duration_since(tokio::time::Instant::now()), |act, ctx| {
            act.armed = None;
            let cell = act.cell.clone();
            let mut core = cell.lock();
            core.timer.at = None;
            core.expire_due();
            act.rearm(&mut core, ctx);
        });
        self.armed = Some(h);
        core.timer.at = Some(next);
    }
}

/// Arms the timer for a reservation a sender applied on its own thread.
#[derive(Message)]
#[rtype(result = "()")]
struct ArmTimer;

impl Handler<ArmTimer> for NodeActor {
    type Result = ();
    fn handle(&mut self, _: ArmTimer, ctx: &mut Context<Self>) {
        let cell = self.cell.clone();
        self.rearm(&mut cell.lock(), ctx);
    }
}

impl Handler<Filter> for NodeActor {
    type Result = MessageResult<Filter>;
    fn handle(&mut self, msg: Filter, ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.apply(ctx, |c| c.filter(&msg.pod)))
    }
}

impl Handler<Reserve> for NodeActor {
    type Result = MessageResult<Reserve>;
    fn handle(&mut self, msg: Reserve, ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.apply(ctx, |c| c.reserve(msg)))
    }
}

impl Handler<Commit> for NodeActor {
    type Result = Result<PodDevices, NotReserved>;
    fn handle(&mut self, msg: Commit, ctx: &mut Context<Self>) -> Self::Result {
        self.apply(ctx, |c| c.commit(&msg.uid))
    }
}

impl Handler<Unreserve> for NodeActor {
    type Result = bool;
    fn handle(&mut self, msg: Unreserve, ctx: &mut Context<Self>) -> bool {
        self.apply(ctx, |c| c.unreserve(&msg.0))
    }
}

impl Handler<TakeClaim> for NodeActor {
    type Result = Result<(), Rejection>;
    fn handle(&mut self, msg: TakeClaim, ctx: &mut Context<Self>) -> Self::Result {
        self.apply(ctx, |c| c.take_claim(msg))
    }
}

impl Handler<Lock> for NodeActor {
    type Result = ResponseFuture<bool>;
    fn handle(&mut self, msg: Lock, ctx: &mut Context<Self>) -> Self::Result {
        match self.apply(ctx, |c| c.binds.lock(msg.uid, msg.queue)) {
            LockAnswer::Now(taken) => Box::pin(async move { taken }),
            LockAnswer::Queued(rx) => Box::pin(async move { rx.await.is_ok() }),
        }
    }
}

impl Handler<Unlock> for NodeActor {
    type Result = ();
    fn handle(&mut self, msg: Unlock, ctx: &mut Context<Self>) {
        self.apply(ctx, |c| c.binds.unlock(&msg.uid));
    }
}

impl Handler<Settle> for NodeActor {
    type Result = ();
    fn handle(&mut self, _: Settle, ctx: &mut Context<Self>) {
        self.apply(ctx, |_| ());
    }
}

impl Handler<Report> for NodeActor {
    type Result = MessageResult<Report>;
    fn handle(&mut self, _: Report, ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.apply(ctx, |c| c.report()))
    }
}

impl Handler<NodeRegistered> for NodeActor {
    type Result = MessageResult<NodeRegistered>;
    fn handle(&mut self, msg: NodeRegistered, ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.apply(ctx, |c| c.register(msg.node)))
    }
}

impl Handler<VendorHealth> for NodeActor {
    type Result = ();
    fn handle(&mut self, msg: VendorHealth, ctx: &mut Context<Self>) {
        self.apply(ctx, |c| c.vendor_health(msg.unhealthy));
    }
}

impl Handler<NodeRemoved> for NodeActor {
    type Result = ();
    fn handle(&mut self, _: NodeRemoved, ctx: &mut Context<Self>) {
        self.apply(ctx, |c| c.remove_node());
        ctx.stop();
    }
}

impl Handler<PodObserved> for NodeActor {
    type Result = ();
    fn handle(&mut self, msg: PodObserved, ctx: &mut Context<Self>) {
        self.apply(ctx, |c| c.observe(msg));
    }
}

impl Handler<Refit> for NodeActor {
    type Result = MessageResult<Refit>;
    fn handle(&mut self, msg: Refit, ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.apply(ctx, |c| c.refit(&msg)))
    }
}

impl Handler<RefitSettle> for NodeActor {
    type Result = ();
    fn handle(&mut self, msg: RefitSettle, ctx: &mut Context<Self>) {
        self.apply(ctx, |c| c.refit_settle(msg));
    }
}

impl NodeCore {
    /// After a change applied on a sender's thread: asks the actor to arm the timer if needed.
    pub(super) fn ask_timer(&mut self, addr: &actix::Addr<NodeActor>) {
        if self.timer_needed() && !self.timer.asked {
            self.timer.asked = true;
            addr.do_send(ArmTimer);
        }
    }
}

#[cfg(test)]
mod tests;
