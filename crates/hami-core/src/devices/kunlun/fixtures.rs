//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use crate::testing::*;

pub const XPU: &str = "kunlunxin.com/xpu";

pub fn xpus(n: u32) -> NodeBuilder {
    node("n1").capacity(XPU, &n.to_string())
}

pub fn ask(n: u32) -> PodBuilder {
    pod().limit(XPU, &n.to_string())
}
