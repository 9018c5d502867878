//! `Coordinator`: picks the node for a pod. It fans `Filter` out to node actors when asked to
//! (bounded, each answer under a deadline), and turns a ranked list of fitting nodes into one
//! reservation: `Reserve` on the best, falling back to the next when the owning actor, which
//! re-validates against its live usage, says no. It keeps no state of its own, so each thread
//! that filters runs one (`Engine::coordinator`) and all decide alike.

use std::sync::{Arc, Weak};
use std::time::Duration;

use actix::{Actor, Context, Handler, Message, ResponseFuture};
use futures::StreamExt;

use crate::model::{NodeName, PodRequest};
use crate::sched::Rejection;

use super::messages::{Filter, Reserve, Reserved};
use super::node::Book;

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
                let reserve = addr.reserve(Reserve { pod: msg.pod.clone(), exact: None, ttl });
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
