//! Simulation mode, as the cluster autoscaler asks it (`Nodes` given in full): each node is read
//! from the object sent, with no usage, and the pod is fitted on each and ranked by its node
//! policy. Nothing is reserved or written, and the engine's own nodes are not consulted.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::actor::Inner;
use crate::devices::{NoQuota, Vendors};
use crate::model::pod::NodeView;
use crate::model::request::NodePolicy;
use crate::model::{NodeName, PodRequest, PodView};
use crate::port::Backend;
use crate::sched::{NodeSnapshot, Scratch, fit, score};

/// What a simulated filter came to.
#[derive(Debug, PartialEq)]
pub enum Simulation {
    /// The pod asks for no device: every node passes.
    PassThrough,
    /// The best node by its place among those sent (`None`: none fits), and HAMi's reason for
    /// each node that does not fit, by name.
    Ranked { best: Option<usize>, failed: BTreeMap<String, String> },
    /// The pod's request or a node does not read.
    Error(String),
}

/// Fitting nodes with their score and place among those sent, and the others' reasons.
type Fitted = (Vec<(NodeName, f32, usize)>, BTreeMap<String, String>);

impl<B: Backend> Inner<B> {
    /// Fits the pod on each node sent (`Err`: a node that did not read, ending the simulation)
    /// and picks the best.
    pub fn simulate(
        self: &Arc<Self>,
        pod: &PodView,
        nodes: impl IntoIterator<Item = Result<NodeView, String>>,
    ) -> Simulation {
        let vendors = &self.vendors;
        let req = match vendors.pod_request(pod, &self.cfg.defaults) {
            Ok(r) => r,
            Err(e) => return Simulation::Error(e.to_string()),
        };
        if !req.requests_devices() {
            return Simulation::PassThrough;
        }
        match fit_each(vendors, &req, nodes) {
            Ok((fits, failed)) => Simulation::Ranked { best: best_of(fits, req.node_policy), failed },
            Err(e) => Simulation::Error(e),
        }
    }
}

/// The pod fitted on each node as its object shows it, with no usage.
fn fit_each(
    vendors: &Vendors,
    req: &PodRequest,
    nodes: impl IntoIterator<Item = Result<NodeView, String>>,
) -> Result<Fitted, String> {
    let (mut fits, mut failed) = (Vec::new(), BTreeMap::new());
    let mut s = Scratch::default();
    for (k, view) in nodes.into_iter().enumerate() {
        let view = view?;
        let snap = snapshot_of(vendors, &view);
        match fit::fit_pod(&snap, req, vendors, &NoQuota, &mut s) {
            Ok(score) => fits.push((snap.name, score, k)),
            Err(r) => {
                failed.insert(view.name().to_owned(), r.answer(snap.unusable.as_deref()));
            }
        }
    }
    Ok((fits, failed))
}

/// A node's devices, idle, as its annotations register them; a malformed one makes it unusable.
fn snapshot_of(vendors: &Vendors, view: &NodeView) -> NodeSnapshot {
    let nd = vendors.discover(view);
    let mut snap = NodeSnapshot::new(NodeName::new(view.name()), nd.devices, nd.extras);
    if let Some((_, key, err)) = nd.malformed.first() {
        snap.unusable = Some(format!("annotation {key} is malformed: {err}").into());
    }
    snap
}

/// The best fitting node's place, by the node policy.
fn best_of(mut fits: Vec<(NodeName, f32, usize)>, policy: NodePolicy) -> Option<usize> {
    score::rank_nodes(&mut fits, policy);
    fits.first().map(|(_, _, k)| *k)
}
