//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::testing::*;

pub fn drs() -> EnflameDrs {
    EnflameDrs::new(&EnflameConfig::chart())
}

pub const DRS: &str = "enflame.com/drs-gcu";

pub fn drs_node(capacity: &str) -> NodeBuilder {
    node("n1").annotation(keys::DRS_CAPACITY, capacity)
}

/// One device (`n1-enflame-drs-0`) of `slices` capacity with the 1/2/4-slice profiles.
pub fn one_device(slices: u32) -> NodeBuilder {
    drs_node(&format!(
        r#"{{"devices":[{{"index":"0","minor":"7","capacity":{slices}}}],"profiles":{{"1g.12gb":"p1","2g.24gb":"p2","4g.48gb":"p4"}}}}"#
    ))
}

pub fn slices(n: u32) -> PodBuilder {
    pod().limit(DRS, &n.to_string())
}

pub fn devices(n: &NodeBuilder) -> Vec<DeviceInfo> {
    match drs().discover(&n.view()) {
        Discovery::Devices { devices, .. } => devices,
        Discovery::Absent => panic!("absent"),
        Discovery::Malformed { key, error } => panic!("malformed {key}: {error}"),
    }
}
