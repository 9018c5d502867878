//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::model::pod::QuantityText;
use crate::sched::NodeSnapshot;
use crate::testing::*;

pub const VGPU: &str = "mthreads.com/vgpu";

pub const SMEM: &str = "mthreads.com/sgpu-memory";

pub const SCORE: &str = "mthreads.com/sgpu-core";

/// Node `n1` with `gpus` GPUs of 48 GiB, as the Mthreads plugin reports capacity (16 cores and
/// 96 × 512 MiB per GPU).
pub fn gpus(n: u32) -> NodeBuilder {
    node("n1").capacity(SCORE, &(n * 16).to_string()).capacity(SMEM, &(n * 96).to_string())
}

pub fn idle(n: u32) -> NodeSnapshot {
    gpus(n).snapshot(&vendors())
}

pub fn container(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> ContainerView {
    let mut c = ContainerView { name: "c".into(), ..Default::default() };
    for (k, v) in limits {
        c.resources.limits.insert((*k).to_owned(), QuantityText((*v).to_owned()));
    }
    for (k, v) in requests {
        c.resources.requests.insert((*k).to_owned(), QuantityText((*v).to_owned()));
    }
    c
}

/// `n` GPUs with `units` × 512 MiB and `cores` in total (the webhook's form).
pub fn mt_pod(n: u32, units: u32, cores: u32) -> PodBuilder {
    pod().limit(VGPU, &n.to_string()).limit(SMEM, &units.to_string()).limit(SCORE, &cores.to_string())
}

/// Adds a regular container `name` asking for `units` and `cores` on one GPU.
pub fn and_container(p: PodBuilder, name: &str, units: u32, cores: u32) -> PodBuilder {
    p.container(name).limit(VGPU, "1").limit(SMEM, &units.to_string()).limit(SCORE, &cores.to_string())
}

pub type Limits = Option<(u32, Option<u32>, Option<u32>)>;

pub fn with(mut p: PodBuilder, l: &Limits) -> PodBuilder {
    let Some((n, mem, cores)) = l else { return p };
    p = p.limit(VGPU, &n.to_string());
    if let Some(m) = mem {
        p = p.limit(SMEM, &m.to_string());
    }
    if let Some(c) = cores {
        p = p.limit(SCORE, &c.to_string());
    }
    p
}
