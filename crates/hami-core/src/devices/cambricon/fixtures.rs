//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::sched::NodeSnapshot;
use crate::testing::*;

pub const VMLU: &str = "cambricon.com/vmlu";

pub const VMEM: &str = "cambricon.com/mlu.smlu.vmemory";

pub const VCORE: &str = "cambricon.com/mlu.smlu.vcore";

pub fn mlu() -> VendorId {
    vendors().by_name(WORD).expect("Cambricon is registered")
}

/// Node `n1` with `cards` MLUs of 24576 MiB each, as the Cambricon plugin reports capacity
/// (100 vcore and 96 × 256 MiB of vmemory per card).
pub fn mlus(cards: u32) -> NodeBuilder {
    node("n1").capacity(VCORE, &(cards * 100).to_string()).capacity(VMEM, &(cards * 96).to_string())
}

/// A pod asking for `n` MLUs with `units` × 256 MiB and `cores` each.
pub fn mlu_pod(n: u32, units: u32, cores: u32) -> PodBuilder {
    pod().limit(VMLU, &n.to_string()).limit(VMEM, &units.to_string()).limit(VCORE, &cores.to_string())
}

pub fn idle(cards: u32) -> NodeSnapshot {
    mlus(cards).snapshot(&vendors())
}

pub fn with(mut p: PodBuilder, l: &Option<(u32, Option<u32>, Option<u32>)>) -> PodBuilder {
    let Some((n, mem, cores)) = l else { return p };
    p = p.limit(VMLU, &n.to_string());
    if let Some(m) = mem {
        p = p.limit(VMEM, &m.to_string());
    }
    if let Some(c) = cores {
        p = p.limit(VCORE, &c.to_string());
    }
    p
}
