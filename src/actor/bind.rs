//! kube-scheduler's bind call: the node's in-process lock (a FIFO queue in its actor), HAMi's
//! node locks, the reservation held through the Binding, and the Events of the outcome.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::messages::{NotReserved, Reserve, Reserved, Unlock};
use super::node::NodeAddr;
use super::{BindError, DecisionWrite, Engine, unix_now};
use crate::model::annotations as keys;
use crate::model::{NodeName, PodDevices, PodRequest, PodUid, PodView};
use crate::port::{self, Backend, EventType, PodPatch, PodRef, reasons};
use crate::sched::Rejection;
use crate::vendor::LockKind;
impl<B: Backend> Engine<B> {
    /// kube-scheduler's bind call: lock, write bind-phase and the Binding, commit. On any failure
    /// the locks and the reservation are released, a BindingFailed Event is recorded and the
    /// error is returned. Binding a pod that
    /// is already bound to that node succeeds without doing anything.
    pub async fn bind(&self, pod: &PodRef, node: &str) -> Result<(), BindError> {
        let started = Instant::now();
        let r = self.bind_steps(pod, node).await;
        crate::metrics::bind_done(
            if r.is_ok() { crate::metrics::Outcome::Scheduled } else { crate::metrics::Outcome::Error },
            started,
        );
        match &r {
            Ok(()) => self.remember(pod, Some(node.to_owned()), "bound", String::new()),
            Err(e) => {
                // Every failure is told on the pod, the early ones too: `kubectl describe` is
                // where users look first when a pod stays pending.
                self.event(pod, reasons::BINDING_FAILED, EventType::Warning, e.to_string());
                self.remember(pod, Some(node.to_owned()), "bind-failed", e.to_string());
            }
        }
        r
    }

    /// The bind's steps: find the pod and the node, make sure the pod holds its reservation
    /// there, take the locks, make the reservation binding, write the decision and the Binding.
    async fn bind_steps(&self, pod: &PodRef, node: &str) -> Result<(), BindError> {
        let (view, addr) = self.bind_target(pod, node).await?;
        if let Some(done) = self.bound_already(&view, pod, node, &addr).await {
            return done;
        }
        let i = &*self.inner;
        let req = Arc::new(i.vendors.pod_request(&view, &i.cfg.defaults).map_err(BindError::Request)?);
        i.scores.forget(&req.uid);
        // Make sure the reservation is still there; one that expired is taken again (see
        // `reserve_again`).
        let held = i.placements.get(&req.uid).map(|n| n.clone());
        match held {
            Some(n) if n.as_str() == node => {}
            Some(elsewhere) => self.move_reservation(&view, &req, pod, &elsewhere, node, &addr).await?,
            None => self.reserve_again(&view, &req, pod, node, &addr).await?,
        }
        let taken = match self.lock_node(&view, &req, pod, node, &addr).await {
            Ok(taken) => taken,
            Err(e) => {
                self.release(pod, node, "node lock not taken", true).await;
                return Err(e);
            }
        };
        let devices = match self.commit_held(&view, &req, pod, node, &addr).await {
            Ok(d) => d,
            Err(e) => {
                self.unlock_node(pod, node, &taken, &addr).await;
                return Err(e);
            }
        };
        self.write_binding(&view, &req, pod, node, &addr, &taken, &devices).await
    }

    /// The pod as the API server has it now and the node's actor; a pod or node that is gone
    /// drops what the pod held.
    async fn bind_target(&self, pod: &PodRef, node: &str) -> Result<(Arc<PodView>, NodeAddr), BindError> {
        let i = &*self.inner;
        let uid = PodUid::new(&pod.uid);
        // A pod created a moment ago may not have reached the watch cache yet.
        let Some(view) = i.backend.pod_fresh(&pod.namespace, &pod.name).await? else {
            self.delete_pod(&uid);
            return Err(port::Error::PodNotFound(pod.to_string()).into());
        };
        let Some(addr) = i.book.get(node).map(|e| e.addr.clone()).filter(|_| i.backend.node(node).is_some()) else {
            self.delete_pod(&uid);
            return Err(port::Error::NodeNotFound(node.to_owned()).into());
        };
        Ok((view, addr))
    }

    /// A pod already bound: to this node, the bind succeeds without a write; elsewhere (an
    /// earlier Binding took effect although its answer was lost), nothing is written, since the
    /// decision on the pod must stay the one for the node it runs on.
    async fn bound_already(
        &self,
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
                self.release(pod, node, "already bound elsewhere", false).await;
                self.observe_pod(view);
                Some(Err(port::Error::AlreadyBound { pod: pod.to_string(), node: n.to_owned() }.into()))
            }
        }
    }

    /// Makes the reservation binding before the Binding is written, so it cannot lapse between
    /// the two: one that expired while the bind waited for the locks is taken again, or the bind
    /// fails. A bound pod is then always counted. Returns the devices held.
    async fn commit_held(
        &self,
        view: &PodView,
        req: &Arc<PodRequest>,
        pod: &PodRef,
        node: &str,
        addr: &NodeAddr,
    ) -> Result<PodDevices, BindError> {
        let uid = PodUid::new(&pod.uid);
        let mailbox = |e| BindError::Mailbox { node: node.to_owned(), source: e };
        match addr.commit(uid.clone()).await.map_err(mailbox)? {
            Ok(devices) => return Ok(devices),
            Err(NotReserved) => self.reserve_again(view, req, pod, node, addr).await?,
        }
        addr.commit(uid).await.map_err(mailbox)?.map_err(|e| BindError::NotReserved {
            pod: pod.to_string(),
            node: node.to_owned(),
            source: e,
        })
    }

    /// Decision and bind-phase go in one patch, before the Binding: the device plugin finds
    /// everything it reads at Allocate in place, as when Filter wrote the decision.
    #[allow(clippy::too_many_arguments)]
    async fn write_binding(
        &self,
        view: &PodView,
        req: &PodRequest,
        pod: &PodRef,
        node: &str,
        addr: &NodeAddr,
        taken: &[LockKind],
        devices: &PodDevices,
    ) -> Result<(), BindError> {
        let i = &*self.inner;
        let at_bind = i.cfg.decision_write == DecisionWrite::Bind;
        let (bind_time, _) = unix_now();
        let mut patch =
            if at_bind { self.decision_patch(&NodeName::new(node), req, devices) } else { PodPatch::default() };
        patch.annotations.extend(PodPatch::bind_phase(bind_time).annotations);
        patch.while_unbound = Some(view.metadata.resource_version.clone().unwrap_or_default());
        let write = Instant::now();
        let bound = i.backend.bind(pod, node, &patch).await;
        crate::metrics::phase(crate::metrics::Phase::ApiWrite, write);
        if let Err(e) = bound {
            return self.bind_failed(pod, node, taken, addr, e).await;
        }
        // Awaited, so the next filter sees the node's lock free once this bind answers.
        let _ = addr.unlock(PodUid::new(&pod.uid)).await;
        // With the decision written at bind (the fast path), kube-scheduler's own `Scheduled`
        // Event tells the same as BindingSucceed, so that write is saved.
        if !at_bind {
            let message = format!("Successfully binding node [{node}] to {pod}");
            self.event(pod, reasons::BINDING_SUCCEED, EventType::Normal, message);
        }
        Ok(())
    }

    /// The patch or the Binding failed after the devices were committed. The devices go back for
    /// the requeued pod, unless the pod is in fact bound: a write found it bound (a Binding
    /// whose answer was lost), or this failure came without an answer and the pod, read back,
    /// is bound. Then it is counted from what it carries, and a pod bound to `node` is a bind
    /// that succeeded. When it cannot be read back, its devices stay committed (`unsettled`).
    async fn bind_failed(
        &self,
        pod: &PodRef,
        node: &str,
        taken: &[LockKind],
        addr: &NodeAddr,
        e: port::Error,
    ) -> Result<(), BindError> {
        let i = &*self.inner;
        let bound_to = match &e {
            port::Error::AlreadyBound { node: n, .. } => Some(n.clone()),
            _ if e.is_ambiguous() => match i.backend.pod_read(&pod.namespace, &pod.name).await {
                Ok(v) => v.and_then(|v| v.spec.node_name.clone()).filter(|n| !n.is_empty()),
                Err(read) => {
                    tracing::warn!(pod = %pod, %node, error = %e, %read, "bind failed without an answer and the pod cannot be read back; its devices stay committed");
                    i.unsettled.insert(PodUid::new(&pod.uid), NodeName::new(node));
                    self.unlock_node(pod, node, taken, addr).await;
                    return Err(e.into());
                }
            },
            _ => None,
        };
        let Some(bound_to) = bound_to else {
            self.unlock_node(pod, node, taken, addr).await;
            self.release(pod, node, "bind failed", false).await;
            return Err(e.into());
        };
        if bound_to == node {
            // What this attempt committed may not be what the pod carries (an earlier attempt's
            // decision): the observation replaces it, with no moment where neither is counted.
            self.observe_read(pod);
            if matches!(e, port::Error::AlreadyBound { .. }) {
                // Bound by an earlier attempt: its plugin has its own lock to answer for.
                self.unlock_node(pod, node, taken, addr).await;
            } else {
                // This attempt's Binding: HAMi's node lock is the device plugin's to release.
                let _ = addr.unlock(PodUid::new(&pod.uid)).await;
            }
            return Ok(());
        }
        self.release(pod, node, "bound elsewhere", false).await;
        self.observe_read(pod);
        self.unlock_node(pod, node, taken, addr).await;
        Err(port::Error::AlreadyBound { pod: pod.to_string(), node: bound_to }.into())
    }

    /// kube-scheduler picked another node than the one the filter reserved on (it scores every
    /// fitting node with `--filter-result=all`): the guess is given back and the pod fitted on
    /// the picked node by the GPU policy, as a filter choosing that node would. The guess goes
    /// first so the pod is never counted twice against a namespace quota; should the picked node
    /// no longer fit, the bind fails and kube-scheduler filters the pod again.
    async fn move_reservation(
        &self,
        view: &PodView,
        req: &Arc<PodRequest>,
        pod: &PodRef,
        from: &NodeName,
        node: &str,
        addr: &NodeAddr,
    ) -> Result<(), BindError> {
        self.release(pod, from.as_str(), "bound elsewhere by kube-scheduler", true).await;
        let r = self.reserve_again(view, req, pod, node, addr).await;
        crate::metrics::bind_elsewhere(r.is_ok());
        r
    }

    /// Takes the pod's reservation on `node` again after it lapsed (or was never made here, as
    /// after a restart). With the decision written at bind, the pod is fitted on the node afresh:
    /// this bind writes what its device plugin will read. Otherwise the devices Filter wrote on
    /// the pod are what the plugin will read, so exactly those are reserved. Fails if the node
    /// no longer has room.
    async fn reserve_again(
        &self,
        view: &PodView,
        req: &Arc<PodRequest>,
        pod: &PodRef,
        node: &str,
        addr: &NodeAddr,
    ) -> Result<(), BindError> {
        let i = &*self.inner;
        if i.cfg.decision_write == DecisionWrite::Bind {
            let fresh = Reserve { pod: req.clone(), exact: None, ttl: i.cfg.reservation_ttl };
            return self.answer_reserve(addr.reserve(fresh).await, pod, node, true);
        }
        if view.annotation(keys::ASSIGNED_NODE) != Some(node) {
            return Err(BindError::NotFiltered { pod: pod.to_string(), node: node.to_owned() });
        }
        let devices = match i.vendors.decode_allocation(view) {
            Ok(d) => self.align(view, d),
            Err(e) => return Err(BindError::Malformed { pod: pod.to_string(), source: e }),
        };
        let exact = Reserve { pod: req.clone(), exact: Some(devices), ttl: i.cfg.reservation_ttl };
        self.answer_reserve(addr.reserve(exact).await, pod, node, false)
    }

    /// A bind's own Reserve answered (`fresh`: a new fit rather than the written devices): a
    /// refusal names what is no longer free.
    fn answer_reserve(
        &self,
        answer: Result<Result<Reserved, Rejection>, actix::MailboxError>,
        pod: &PodRef,
        node: &str,
        fresh: bool,
    ) -> Result<(), BindError> {
        match answer {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(r)) => {
                let snap = self.snapshot(node);
                let (pod, node) = (pod.to_string(), node.to_owned());
                let detail = r.render(snap.as_ref().map_or(&[][..], |s| &s.devices), None);
                Err(if fresh {
                    BindError::NoLongerFits { pod, node, detail }
                } else {
                    BindError::Lapsed { pod, node, detail }
                })
            }
            Err(e) => Err(BindError::Mailbox { node: node.to_owned(), source: e }),
        }
    }

    /// Takes the node's in-process lock (queueing behind earlier binds) and then each of HAMi's
    /// node locks the pod needs. HAMi's lock lives on the Node object, so a device plugin still
    /// allocating (or another scheduler) can hold it: then the bind keeps its place, holding the
    /// in-process lock, and tries again a moment later until the wait runs out. Later binds to the
    /// node queue behind it, first come first served, and Filter sends new pods elsewhere.
    async fn lock_node(
        &self,
        view: &PodView,
        req: &PodRequest,
        pod: &PodRef,
        node: &str,
        addr: &NodeAddr,
    ) -> Result<Vec<LockKind>, BindError> {
        let i = &*self.inner;
        let uid = PodUid::new(&pod.uid);
        // HAMi retries contention only for PodGroup members; hami-rs lets every pod wait a bounded
        // time, since the holder is usually a bind whose device plugin answers within moments.
        let pod_group = view.is_pod_group_member();
        let (wait, every) = if pod_group {
            (i.cfg.node_lock_retry_timeout, Duration::from_millis(100))
        } else {
            (i.cfg.bind_lock_wait, Duration::from_millis(50))
        };
        let deadline = Instant::now() + wait;
        let kinds = self.lock_kinds(req);
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
                match self.take_locks(pod, node, &kinds).await {
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
            other => other,
        }
    }

    /// Lets go of HAMi's node locks this bind took, in reverse, then of the in-process lock.
    async fn unlock_node(&self, pod: &PodRef, node: &str, taken: &[LockKind], addr: &NodeAddr) {
        for t in taken.iter().rev() {
            let _ = self.inner.backend.unlock_node(node, pod, *t).await;
        }
        let _ = addr.unlock(PodUid::new(&pod.uid)).await;
    }

    /// Drops the pod's reservation on `node` after a failed bind (a committed one too, unless
    /// `only_reserved`).
    async fn release(&self, pod: &PodRef, node: &str, why: &str, only_reserved: bool) {
        tracing::debug!(pod = %pod, %node, why, "releasing reservation after a failed bind");
        if let Some(a) = self.inner.book.get(node).map(|e| e.addr.clone()) {
            let _ = a.release(PodUid::new(&pod.uid), only_reserved).await;
        }
    }

    /// HAMi's node locks the pod needs, sorted: every vendor it requests in any container (HAMi
    /// locks for regular containers only, so two init-only pods' Allocates race on one node).
    pub(super) fn lock_kinds(&self, req: &PodRequest) -> Vec<LockKind> {
        let mut kinds: Vec<LockKind> =
            req.vendors().iter().map(|v| self.inner.vendors.get(*v).lock()).filter(|k| *k != LockKind::None).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// Takes each of HAMi's node locks once, in order; on the first failure the ones already
    /// taken are released again, in reverse.
    pub(super) async fn take_locks(
        &self,
        pod: &PodRef,
        node: &str,
        kinds: &[LockKind],
    ) -> Result<Vec<LockKind>, BindError> {
        let b = &self.inner.backend;
        let mut taken: Vec<LockKind> = Vec::with_capacity(kinds.len());
        for k in kinds {
            if let Err(e) = b.lock_node(node, pod, *k).await {
                for t in taken.iter().rev() {
                    let _ = b.unlock_node(node, pod, *t).await;
                }
                return Err(e.into());
            }
            taken.push(*k);
        }
        Ok(taken)
    }
}
