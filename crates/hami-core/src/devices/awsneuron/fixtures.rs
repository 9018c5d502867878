//! The fixtures of this vendor's tests that the engine-level tests in the scheduler crate share.

use super::*;
use crate::testing::*;

pub const NEURON: &str = "aws.amazon.com/neuron";

pub const CORE: &str = "aws.amazon.com/neuroncore";

pub fn aws() -> AwsNeuron {
    AwsNeuron::new(&AwsNeuronConfig::chart())
}

/// Node `n1` with `devices` Neuron devices of `per` cores each on instance type `ty`.
pub fn neurons(devices: u32, per: u32, ty: &str) -> NodeBuilder {
    node("n1")
        .capacity(NEURON, &devices.to_string())
        .capacity(CORE, &(devices * per).to_string())
        .label(keys::INSTANCE_TYPE_LABEL, ty)
}

pub fn devices(n: u32) -> PodBuilder {
    pod().limit(NEURON, &n.to_string())
}

pub fn cores(n: u32) -> PodBuilder {
    pod().limit(CORE, &n.to_string())
}
