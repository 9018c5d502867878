//! kube-scheduler's bind call: the node's in-process lock (a FIFO queue in its actor), HAMi's
//! node locks, the reservation held through the Binding, and the Events of the outcome. One call
//! is a [`BindCx`]: what it binds, where, and which locks it holds, so each step reads what it
//! needs from one place and every failing exit gives back exactly what was taken.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::actor::messages::{Holding, NotReserved, Reserve, Reserved, Unlock};
use crate::actor::node::NodeAddr;
use crate::actor::{BindError, DecisionWrite, Inner, unix_now};
use crate::devices::LockKind;
use crate::model::annotations as keys;
use crate::model::{NodeName, PodDevices, PodRequest, PodUid, PodView};
use crate::port::{self, Backend, EventType, PodPatch, PodRef, reasons};
use crate::sched::Rejection;
use crate::sched::claim::ClaimKey;

impl<B: Backend> Inner<B> {
    /// kube-scheduler's bind call: lock, write bind-phase and the Binding, commit. On any failure
    /// the locks and the reservation are released, a BindingFailed Event is recorded and the
    /// error is returned. Binding a pod that is already bound to that node succeeds without
    /// doing anything.
    pub async fn bind(self: &Arc<Self>, pod: &PodRef, node: &str) -> Result<(), BindError> {
        let started = Instant::now();
        let r = BindCx::run(self, pod, node).await;
        crate::metrics::bind_done(
            if r.is_ok() { crate::metrics::Outcome::Bound } else { crate::metrics::Outcome::Error },
            started,
        );
        match &r {
            Ok(()) => self.remember(pod, Some(node.to_owned()), crate::metrics::Outcome::Bound.as_str(), String::new()),
            Err(e) => {
                // Every failure is told on the pod, the early ones too: `kubectl describe` is
                // where users look first when a pod stays pending.
                self.event(pod, reasons::BINDING_FAILED, EventType::Warning, e.to_string());
                self.remember(pod, Some(node.to_owned()), crate::metrics::Outcome::Error.as_str(), e.to_string());
            }
        }
        r
    }
}

/// One bind: the pod as kube-scheduler named it and as the API server has it, its request, the
/// node and its actor, and HAMi's node locks this bind holds.
struct BindCx<'a, B: Backend> {
    e: &'a Arc<Inner<B>>,
    pod: &'a PodRef,
    node: &'a str,
    view: Arc<PodView>,
    addr: NodeAddr,
    req: Arc<PodRequest>,
    /// HAMi's node locks taken so far, in order.
    taken: Vec<LockKind>,
}

impl<'a, B: Backend> BindCx<'a, B> {
    /// The bind's steps: find the pod and the node, make sure the pod holds its reservation
    /// there, take the locks, make the reservation binding, write the decision and the Binding.
    async fn run(e: &'a Arc<Inner<B>>, pod: &'a PodRef, node: &'a str) -> Result<(), BindError> {
        let i = e;
        let uid = PodUid::new(&pod.uid);
        // A pod created a moment ago may not have reached the watch cache yet.
        let Some(view) = i.backend.pod_fresh(&pod.namespace, &pod.name).await? else {
            e.delete_pod(&uid);
            return Err(port::Error::PodNotFound(pod.to_string()).into());
        };
        let Some(addr) = i.nodes.addr(node).filter(|_| i.backend.node(node).is_some()) else {
            e.delete_pod(&uid);
            return Err(port::Error::NodeNotFound(node.to_owned()).into());
        };
        if let Some(done) = Self::bound_already(e, &view, pod, node, &addr).await {
            return done;
        }
        let req = Arc::new(i.vendors.pod_request(&view, &i.cfg.defaults).map_err(BindError::Request)?);
        i.pods.scores.forget(&req.uid);
        let mut cx = BindCx { e, pod, node, view, addr, req, taken: Vec::new() };
        // Make sure the reservation is still there; one that expired is taken again (see
        // `reserve_again`).
        match i.nodes.placement(&cx.req.uid) {
            Some(n) if n.as_str() == node => {}
            Some(elsewhere) => cx.move_reservation(&elsewhere).await?,
            None => cx.reserve_again().await?,
        }
        if let Err(e) = cx.lock_node().await {
            cx.release("node lock not taken", true).await;
            return Err(e);
        }
        let devices = match cx.commit_held().await {
            Ok(d) => d,
            Err(e) => {
                cx.unlock_node().await;
                return Err(e);
            }
        };
        cx.write_binding(&devices).await
    }

    /// A pod already bound: to this node, the bind succeeds without a write; elsewhere (an
    /// earlier Binding took effect although its answer was lost), nothing is written, since the
    /// decision on the pod must stay the one for the node it runs on.
    async fn bound_already(
        e: &Arc<Inner<B>>,
        view: &PodView,
        pod: &PodRef,
        node: &str,
        addr: &NodeAddr,
    ) -> Option<Result<(), BindError>> {
        match view.spec.node_name.as_deref().filter(|n| !n.is_empty())? {
            n if n == node => {
                let _ = addr.commit(PodUid::new(&pod.uid)).await;
                Some(Ok(()))
            }
            n => {
                e.unreserve(
                    node,
                    Holding::Reservation { uid: PodUid::new(&pod.uid), only_reserved: false },
                    "already bound elsewhere",
                )
                .await;
                e.observe_pod(view);
                Some(Err(port::Error::AlreadyBound { pod: pod.to_string(), node: n.to_owned() }.into()))
            }
        }
    }

    /// Makes the reservation binding before the Binding is written, so it cannot lapse between
    /// the two: one that expired while the bind waited for the locks is taken again, or the bind
    /// fails. A bound pod is then always counted. Returns the devices held.
    async fn commit_held(&self) -> Result<PodDevices, BindError> {
        let uid = PodUid::new(&self.pod.uid);
        let mailbox = |e| BindError::Mailbox { node: self.node.to_owned(), source: e };
        match self.addr.commit(uid.clone()).await.map_err(mailbox)? {
            Ok(devices) => return Ok(devices),
            Err(NotReserved) => self.reserve_again().await?,
        }
        self.addr.commit(uid).await.map_err(mailbox)?.map_err(|e| BindError::NotReserved {
            pod: self.pod.to_string(),
            node: self.node.to_owned(),
            source: e,
        })
    }

    /// Decision and bind-phase go in one patch, before the Binding: the device plugin finds
    /// everything it reads at Allocate in place, as when Filter wrote the decision.
    async fn write_binding(&self, devices: &PodDevices) -> Result<(), BindError> {
        let (e, pod, node) = (self.e, self.pod, self.node);
        let i = e;
        let at_bind = i.cfg.decision_write == DecisionWrite::Bind;
        let (bind_time, _) = unix_now();
        let mut patch =
            if at_bind { i.decision_patch(&NodeName::new(node), &self.req, devices) } else { PodPatch::default() };
        patch.annotations.extend(PodPatch::bind_phase(bind_time).annotations);
        patch.while_unbound = Some(self.view.metadata.resource_version.clone().unwrap_or_default());
        let write = Instant::now();
        let bound = i.backend.bind(pod, node, &patch).await;
        crate::metrics::phase(crate::metrics::Phase::ApiWrite, write);
        if let Err(err) = bound {
            return self.bind_failed(err).await;
        }
        // Awaited, so the next filter sees the node's lock free once this bind answers.
        let _ = self.addr.unlock(PodUid::new(&pod.uid)).await;
        if i.pods.groups.group_of(&self.view).is_some() {
            // A group member is bound now, before the watch says so: its group counts it.
            let mut bound = (*self.view).clone();
            bound.spec.node_name = Some(node.to_owned());
            i.observe_member(&bound);
        }
        // With the decision written at bind (the fast path), kube-scheduler's own `Scheduled`
        // Event tells the same as BindingSucceed, so that write is saved.
        if !at_bind {
            let message = format!("Successfully binding node [{node}] to {pod}");
            i.event(pod, reasons::BINDING_SUCCEED, EventType::Normal, message);
        }
        Ok(())
    }

    /// The patch or the Binding failed after the devices were committed. The devices go back for
    /// the requeued pod, unless the pod is in fact bound: a write found it bound (a Binding
    /// whose answer was lost), or this failure came without an answer and the pod, read back,
    /// is bound. Then it is counted from what it carries, and a pod bound to `node` is a bind
    /// that succeeded. When it cannot be read back, its devices stay committed (`unsettled`).
    async fn bind_failed(&self, err: port::Error) -> Result<(), BindError> {
        let (e, pod, node) = (self.e, self.pod, self.node);
        let i = e;
        let bound_to = match &err {
            port::Error::AlreadyBound { node: n, .. } => Some(n.clone()),
            _ if err.is_ambiguous() => match i.backend.pod_read(&pod.namespace, &pod.name).await {
                Ok(v) => v.and_then(|v| v.spec.node_name.clone()).filter(|n| !n.is_empty()),
                Err(read) => {
                    tracing::warn!(pod = %pod, %node, error = %err, %read, "bind failed without an answer and the pod cannot be read back; its devices stay committed");
                    i.pods.unsettle(PodUid::new(&pod.uid), NodeName::new(node));
                    self.unlock_node().await;
                    return Err(err.into());
                }
            },
            _ => None,
        };
        let Some(bound_to) = bound_to else {
            self.unlock_node().await;
            self.release("bind failed", false).await;
            return Err(err.into());
        };
        if bound_to == node {
            // What this attempt committed may not be what the pod carries (an earlier attempt's
            // decision): the observation replaces it, with no moment where neither is counted.
            e.observe_read(pod);
            if matches!(err, port::Error::AlreadyBound { .. }) {
                // Bound by an earlier attempt: its plugin has its own lock to answer for.
                self.unlock_node().await;
            } else {
                // This attempt's Binding: HAMi's node lock is the device plugin's to release.
                let _ = self.addr.unlock(PodUid::new(&pod.uid)).await;
            }
            return Ok(());
        }
        self.release("bound elsewhere", false).await;
        e.observe_read(pod);
        self.unlock_node().await;
        Err(port::Error::AlreadyBound { pod: pod.to_string(), node: bound_to }.into())
    }

    /// kube-scheduler picked another node than the one the filter reserved on (it scores every
    /// fitting node with `--filter-result=all`): the guess is given back and the pod fitted on
    /// the picked node by the GPU policy, as a filter choosing that node would. The guess goes
    /// first so the pod is never counted twice against a namespace quota; should the picked node
    /// no longer fit, the bind fails and kube-scheduler filters the pod again.
    async fn move_reservation(&self, from: &NodeName) -> Result<(), BindError> {
        let what = Holding::Reservation { uid: PodUid::new(&self.pod.uid), only_reserved: true };
        self.e.unreserve(from.as_str(), what, "bound elsewhere by kube-scheduler").await;
        let r = self.reserve_again().await;
        crate::metrics::bind_elsewhere(r.is_ok());
        r
    }

    /// Takes the pod's reservation on `node` again after it lapsed (or was never made here, as
    /// after a restart). With the decision written at bind, the pod is fitted on the node afresh:
    /// this bind writes what its device plugin will read. Otherwise the devices Filter wrote on
    /// the pod are what the plugin will read, so exactly those are reserved. Fails if the node
    /// no longer has room.
    async fn reserve_again(&self) -> Result<(), BindError> {
        let i = self.e;
        let (view, pod, node) = (&*self.view, self.pod, self.node);
        if i.cfg.decision_write == DecisionWrite::Bind {
            let fresh = Reserve { pod: self.req.clone(), exact: None, ttl: i.cfg.reservation_ttl, claim: self.claim() };
            return self.answer_reserve(self.addr.reserve(fresh).await, true);
        }
        if view.annotation(keys::ASSIGNED_NODE) != Some(node) {
            return Err(BindError::NotFiltered { pod: pod.to_string(), node: node.to_owned() });
        }
        let devices = match i.vendors.decode_allocation(view) {
            Ok(d) => crate::actor::observe::align(&i.vendors, view, d),
            Err(e) => return Err(BindError::Malformed { pod: pod.to_string(), source: e }),
        };
        let exact =
            Reserve { pod: self.req.clone(), exact: Some(devices), ttl: i.cfg.reservation_ttl, claim: self.claim() };
        self.answer_reserve(self.addr.reserve(exact).await, false)
    }

    /// The claim the pod may reserve from again: a preemptor whose reservation lapsed while its
    /// bind waited still has the capacity claimed for it, if the node keeps it.
    fn claim(&self) -> Option<ClaimKey> {
        let key = ClaimKey::Pod(self.req.uid.clone());
        self.e.pods.has_claim(&key).then_some(key)
    }

    /// A bind's own Reserve answered (`fresh`: a new fit rather than the written devices): a
    /// refusal names what is no longer free.
    fn answer_reserve(
        &self,
        answer: Result<Result<Reserved, Rejection>, actix::MailboxError>,
        fresh: bool,
    ) -> Result<(), BindError> {
        match answer {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(r)) => {
                let snap = self.e.nodes.snapshot(self.node);
                let (pod, node) = (self.pod.to_string(), self.node.to_owned());
                let detail = r.render(snap.as_ref().map_or(&[][..], |s| &s.devices), None);
                Err(if fresh {
                    BindError::NoLongerFits { pod, node, detail }
                } else {
                    BindError::Lapsed { pod, node, detail }
                })
            }
            Err(e) => Err(BindError::Mailbox { node: self.node.to_owned(), source: e }),
        }
    }

    /// Takes the node's in-process lock (queueing behind earlier binds) and then each of HAMi's
    /// node locks the pod needs. HAMi's lock lives on the Node object, so a device plugin still
    /// allocating (or another scheduler) can hold it: then the bind keeps its place, holding the
    /// in-process lock, and tries again a moment later until the wait runs out. Later binds to the
    /// node queue behind it, first come first served, and Filter sends new pods elsewhere.
    async fn lock_node(&mut self) -> Result<(), BindError> {
        let (e, pod, node, addr) = (self.e, self.pod, self.node, &self.addr);
        let i = e;
        let uid = PodUid::new(&pod.uid);
        // HAMi retries contention only for PodGroup members; hami-rs lets every pod wait a bounded
        // time, since the holder is usually a bind whose device plugin answers within moments.
        let pod_group = self.view.is_pod_group_member();
        let (wait, every) = if pod_group {
            (i.cfg.node_lock_retry_timeout, Duration::from_millis(100))
        } else {
            (i.cfg.bind_lock_wait, Duration::from_millis(50))
        };
        let deadline = Instant::now() + wait;
        let kinds = i.lock_kinds(&self.req);
        let started = Instant::now();
        let contention = || port::Error::LockContention {
            node: node.to_owned(),
            within: crate::model::codec::format_go_duration(i.cfg.node_lock_timeout),
        };
        // With no time to wait the lock is tried once, without queueing.
        let queue = !wait.is_zero();
        let ask = addr.lock(uid.clone(), queue);
        let answer = if queue { tokio::time::timeout(wait, ask).await } else { Ok(ask.await) };
        let granted = match answer {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) if !queue => Err(contention().into()),
            Ok(Ok(false)) => Err(BindError::Stopped { node: node.to_owned() }),
            Ok(Err(e)) => Err(BindError::Mailbox { node: node.to_owned(), source: e }),
            Err(_) => {
                // Out of the queue, or give back a grant that raced the timeout.
                addr.do_send(Unlock { uid: uid.clone() });
                Err(contention().into())
            }
        };
        let result = match granted {
            Ok(()) => loop {
                match i.take_locks(pod, node, &kinds).await {
                    Err(e) if e.is_contention() && Instant::now() + every < deadline => {
                        crate::metrics::lock_wait();
                        tokio::time::sleep(every).await;
                    }
                    Err(e) => {
                        let _ = addr.unlock(uid.clone()).await;
                        break Err(e);
                    }
                    Ok(taken) => break Ok(taken),
                }
            },
            Err(e) => Err(e),
        };
        crate::metrics::phase(crate::metrics::Phase::LockWait, started);
        match result {
            Ok(taken) => {
                self.taken = taken;
                Ok(())
            }
            Err(e) if e.is_contention() => {
                crate::metrics::lock_timeout();
                Err(if pod_group && !wait.is_zero() {
                    BindError::PodGroupTimeout {
                        wait: crate::model::codec::format_go_duration(wait),
                        node: node.to_owned(),
                    }
                } else {
                    e
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Lets go of HAMi's node locks this bind took, in reverse, then of the in-process lock.
    async fn unlock_node(&self) {
        for t in self.taken.iter().rev() {
            let _ = self.e.backend.unlock_node(self.node, self.pod, *t).await;
        }
        let _ = self.addr.unlock(PodUid::new(&self.pod.uid)).await;
    }

    /// Drops the pod's reservation here after a failed bind (a committed one too, unless
    /// `only_reserved`).
    async fn release(&self, why: &'static str, only_reserved: bool) {
        let what = Holding::Reservation { uid: PodUid::new(&self.pod.uid), only_reserved };
        self.e.unreserve(self.node, what, why).await;
    }
}
