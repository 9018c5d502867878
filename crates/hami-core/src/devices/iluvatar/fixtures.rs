//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::model::DeviceInfo;
use crate::model::codec::encode_node_devices_colon;
use crate::testing::*;

pub const VGPU: &str = "iluvatar.ai/BI-V150-vgpu";

pub const VMEM: &str = "iluvatar.ai/BI-V150.vMem";

pub const VCORE: &str = "iluvatar.ai/BI-V150.vCore";

pub const MR_VGPU: &str = "iluvatar.ai/MR-V100-vgpu";

/// A healthy device as the Iluvatar plugin registers it: 16 slots, `mem` MiB, 100 cores.
pub fn dev(id: &str, i: u32, mem: u64) -> DeviceInfo {
    DeviceInfo { mode: Arc::from("hami-core"), ..DeviceInfo::new(id, i, 16, mem, 100, "BI-V150") }
}

/// Node `n1` registering `devs` for BI-V150 in the colon form.
pub fn chips(devs: &[DeviceInfo]) -> NodeBuilder {
    node("n1").annotation(&keys::register("BI-V150"), &encode_node_devices_colon(devs)).capacity(VGPU, "2")
}

/// `n` devices with `units` × 256 MiB and `cores` each.
pub fn ix_pod(n: u32, units: u32, cores: u32) -> PodBuilder {
    pod().limit(VGPU, &n.to_string()).limit(VMEM, &units.to_string()).limit(VCORE, &cores.to_string())
}

pub type Limits = Option<(u32, Option<u32>, Option<u32>)>;

pub fn with(mut p: PodBuilder, l: &Limits) -> PodBuilder {
    let Some((n, mem, cores)) = l else { return p };
    p = p.limit(VGPU, &n.to_string());
    if let Some(m) = mem {
        p = p.limit(VMEM, &m.to_string());
    }
    if let Some(c) = cores {
        p = p.limit(VCORE, &c.to_string());
    }
    p
}
