//! Annotation keys of the AwsNeuron vendor.
