//! One filter call as its steps see it: the pod as kube-scheduler sent it, its request (which
//! asks for a device) and its candidates. Filter's steps (`filter/run.rs`), its evaluation of the
//! candidates (`evaluate.rs`), preemption (`preemption.rs`) and prioritize's scoring afresh all
//! read from it.

use std::sync::Arc;

use crate::actor::Inner;
use crate::actor::filter::candidates::Candidates;
use crate::model::{PodRequest, PodView};
use crate::port::{Backend, PodRef};

pub(in crate::actor) struct FilterCycle<'a, 'n, B: Backend> {
    pub e: &'a Arc<Inner<B>>,
    pub pod: &'a PodView,
    pub pref: PodRef,
    pub req: Arc<PodRequest>,
    pub names: &'a Candidates<'n>,
}
