//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::testing::*;

pub const GCU: &str = "enflame.com/gcu";

pub fn gcu() -> EnflameGcu {
    EnflameGcu::new(&EnflameConfig::chart())
}

/// Node `n1` with `n` GCUs (capacity `enflame.com/gcu`).
pub fn gcus(n: u32) -> NodeBuilder {
    node("n1").capacity(GCU, &n.to_string())
}

pub fn ask(n: u32) -> PodBuilder {
    pod().limit(GCU, &n.to_string())
}
