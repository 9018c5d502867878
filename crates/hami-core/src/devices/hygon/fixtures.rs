//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::model::DeviceInfo;
use crate::model::annotations::hygon as keys;
use crate::model::codec::encode_node_devices_colon;
use crate::sched::NodeSnapshot;
use crate::testing::*;

pub const DCUNUM: &str = "hygon.com/dcunum";

pub const DCUMEM: &str = "hygon.com/dcumem";

pub const DCUCORES: &str = "hygon.com/dcucores";

pub fn dcu() -> VendorId {
    vendors().by_name(WORD).expect("Hygon is registered")
}

/// A healthy DCU as the Hygon plugin registers it: 10 slots, `mem` MiB, 100 cores.
pub fn dcu_dev(i: u32, ty: &str, mem: u64) -> DeviceInfo {
    DeviceInfo { mode: Arc::from("hami-core"), ..DeviceInfo::new(&format!("DCU-{i}"), i, 10, mem, 100, ty) }
}

/// Node `n1` registering `devs` in the colon form, with the count allocatable.
pub fn dcus(devs: &[DeviceInfo]) -> NodeBuilder {
    node("n1").annotation(keys::REGISTER, &encode_node_devices_colon(devs)).capacity(DCUNUM, &devs.len().to_string())
}

/// `n` idle 16 GiB `DCU-Z100` devices.
pub fn idle(n: u32) -> NodeSnapshot {
    let devs: Vec<DeviceInfo> = (0..n).map(|i| dcu_dev(i, "DCU-Z100", 16384)).collect();
    dcus(&devs).snapshot(&vendors())
}

pub fn dcu_pod(n: u32, mem: u64, cores: u32) -> PodBuilder {
    pod().limit(DCUNUM, &n.to_string()).limit(DCUMEM, &mem.to_string()).limit(DCUCORES, &cores.to_string())
}

pub type Limits = Option<(u32, Option<u64>, Option<u32>)>;

pub fn with(mut p: PodBuilder, l: &Limits) -> PodBuilder {
    let Some((n, mem, cores)) = l else { return p };
    p = p.limit(DCUNUM, &n.to_string());
    if let Some(m) = mem {
        p = p.limit(DCUMEM, &m.to_string());
    }
    if let Some(c) = cores {
        p = p.limit(DCUCORES, &c.to_string());
    }
    p
}
