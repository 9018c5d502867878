//! `Coordinator`: decides and commits placements. It fans `Filter` out to node actors when asked
//! to (bounded, each answer under a deadline); it turns a ranked list of fitting nodes into one
//! reservation (`Decide`: `Reserve` on the best, falling back to the next when the owning actor,
//! which re-validates against its live usage, says no); and it takes a plan whole or not at all
//! (`TakeAll`: every part's reservation or claim on its node, each validated by that node, and
//! at the first refusal everything already taken given back). It keeps no state of its own, so
//! each thread that filters runs one and all decide alike.

use std::sync::{Arc, Weak};
use std::time::Duration;

use actix::{Actor, Context, Handler, Message, ResponseFuture};
use futures::StreamExt;

use crate::model::{NodeName, PodRequest};
use crate::sched::Rejection;

use crate::actor::messages::{Filter, Holding, Reserve, Reserved, TakeClaim};
use crate::actor::node::Book;

/// How many Filter messages are in flight at once during a fan-out.
const FAN_OUT_IN_FLIGHT: usize = 256;

pub struct Coordinator {
    /// Weak: a coordinator kept on a filtering thread must not keep a stopped engine's node
    /// actors alive.
    book: Weak<Book>,
    deadline: Duration,
    ttl: Duration,
}

impl Coordinator {
    pub fn new(book: Weak<Book>, deadline: Duration, ttl: Duration) -> Coordinator {
        Coordinator { book, deadline, ttl }
    }
}

impl Actor for Coordinator {
    type Context = Context<Self>;
}

/// Ask every candidate node actor to fit the pod; a node that misses the deadline fails with
/// `Rejection::Timeout`, an unknown one with `NodeUnregistered`.
#[derive(Message)]
#[rtype(result = "Vec<(NodeName, Result<f32, Rejection>)>")]
pub struct FanOut {
    pub pod: Arc<PodRequest>,
    pub names: Vec<NodeName>,
}

impl Handler<FanOut> for Coordinator {
    type Result = ResponseFuture<Vec<(NodeName, Result<f32, Rejection>)>>;
    fn handle(&mut self, msg: FanOut, _: &mut Context<Self>) -> Self::Result {
        let book = self.book.upgrade();
        let deadline = self.deadline;
        Box::pin(async move {
            let pod = msg.pod;
            futures::stream::iter(msg.names.into_iter().map(|name| {
                let addr = book.as_ref().and_then(|b| b.get(&name).map(|e| e.addr.clone()));
                let pod = pod.clone();
                async move {
                    let r = match addr {
                        None => Err(Rejection::NodeUnregistered),
                        Some(a) => match a.send(Filter { pod }).timeout(deadline).await {
                            Ok(r) => r,
                            Err(_) => Err(Rejection::Timeout),
                        },
                    };
                    (name, r)
                }
            }))
            .buffered(FAN_OUT_IN_FLIGHT)
            .collect()
            .await
        })
    }
}

/// Reserve the pod on the first node of `ranked` that accepts it.
#[derive(Message)]
#[rtype(result = "Decision")]
pub struct Decide {
    pub pod: Arc<PodRequest>,
    pub ranked: Vec<NodeName>,
}

pub enum Decision {
    Reserved {
        node: NodeName,
        reserved: Reserved,
        refused: Vec<(NodeName, Rejection)>,
    },
    /// Every ranked node refused the reservation (usage changed since its snapshot).
    Refused(Vec<(NodeName, Rejection)>),
}

impl Decision {
    /// A node that refused before the coordinator was asked goes first among the refusals.
    pub fn refused_first(&mut self, first: (NodeName, Rejection)) {
        let (Decision::Reserved { refused, .. } | Decision::Refused(refused)) = self;
        refused.insert(0, first);
    }
}

impl Handler<Decide> for Coordinator {
    type Result = ResponseFuture<Decision>;
    fn handle(&mut self, msg: Decide, _: &mut Context<Self>) -> Self::Result {
        let book = self.book.upgrade();
        let (deadline, ttl) = (self.deadline, self.ttl);
        Box::pin(async move {
            let mut refused = Vec::new();
            for node in msg.ranked {
                let Some(addr) = book.as_ref().and_then(|b| b.get(&node).map(|e| e.addr.clone())) else {
                    refused.push((node, Rejection::NodeUnregistered));
                    continue;
                };
                let reserve = addr.reserve(Reserve { pod: msg.pod.clone(), exact: None, ttl, claim: None });
                match tokio::time::timeout(deadline, reserve).await {
                    Ok(Ok(Ok(reserved))) => return Decision::Reserved { node, reserved, refused },
                    Ok(Ok(Err(r))) => refused.push((node, r)),
                    Ok(Err(_)) | Err(_) => refused.push((node, Rejection::Timeout)),
                }
            }
            Decision::Refused(refused)
        })
    }
}

/// Take every part of a plan, all or none: each part's reservation or claim on its node, in
/// order; at the first refusal, everything already taken is given back (through the one
/// `Unreserve`) before the answer, so no other pod ever sees part of a plan that was refused.
#[derive(Message)]
#[rtype(result = "Result<Vec<Taken>, Refusal>")]
pub struct TakeAll {
    pub parts: Vec<Part>,
}

/// One part of a plan: what to take on which node.
pub struct Part {
    pub node: NodeName,
    pub take: Take,
}

pub enum Take {
    /// A reservation (usually of exact devices) for a pod about to be bound.
    Reserve(Reserve),
    /// A claim for a pod not placed yet.
    Claim(TakeClaim),
}

/// What one part took.
#[derive(Debug, PartialEq)]
pub enum Taken {
    Reserved(Reserved),
    Claimed,
}

/// The part a node refused, and why; nothing of the plan is held any more.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub part: usize,
    pub node: NodeName,
    pub rejection: Rejection,
}

impl Part {
    /// What gives this part back once taken.
    fn holding(&self) -> Holding {
        match &self.take {
            Take::Reserve(r) => Holding::Reservation { uid: r.pod.uid.clone(), only_reserved: true },
            Take::Claim(c) => Holding::Claim { key: c.key.clone(), id: Some(c.id) },
        }
    }
}

impl Handler<TakeAll> for Coordinator {
    type Result = ResponseFuture<Result<Vec<Taken>, Refusal>>;
    fn handle(&mut self, msg: TakeAll, _: &mut Context<Self>) -> Self::Result {
        let book = self.book.upgrade();
        let deadline = self.deadline;
        Box::pin(async move {
            let addr_of = |n: &NodeName| book.as_ref().and_then(|b| b.get(n).map(|e| e.addr.clone()));
            let mut taken = Vec::with_capacity(msg.parts.len());
            let mut refusal = None;
            for (k, part) in msg.parts.iter().enumerate() {
                let Some(addr) = addr_of(&part.node) else {
                    refusal = Some((k, Rejection::NodeUnregistered));
                    break;
                };
                let answer = match &part.take {
                    Take::Reserve(r) => {
                        let r =
                            Reserve { pod: r.pod.clone(), exact: r.exact.clone(), ttl: r.ttl, claim: r.claim.clone() };
                        tokio::time::timeout(deadline, addr.reserve(r)).await.map(|a| a.map(|a| a.map(Taken::Reserved)))
                    }
                    Take::Claim(c) => tokio::time::timeout(deadline, addr.take_claim(c.clone()))
                        .await
                        .map(|a| a.map(|a| a.map(|()| Taken::Claimed))),
                };
                match answer {
                    Ok(Ok(Ok(t))) => taken.push(t),
                    Ok(Ok(Err(r))) => {
                        refusal = Some((k, r));
                        break;
                    }
                    Ok(Err(_)) | Err(_) => {
                        // No answer in time: the part may yet be taken, so it is given back too.
                        if let Some(a) = addr_of(&part.node) {
                            let _ = a.unreserve(part.holding()).await;
                        }
                        refusal = Some((k, Rejection::Timeout));
                        break;
                    }
                }
            }
            let Some((k, rejection)) = refusal else { return Ok(taken) };
            for part in msg.parts[..taken.len()].iter().rev() {
                if let Some(a) = addr_of(&part.node) {
                    let _ = a.unreserve(part.holding()).await;
                }
            }
            Err(Refusal { part: k, node: msg.parts[k].node.clone(), rejection })
        })
    }
}
