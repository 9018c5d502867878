//! Annotation and label keys of the AWS Neuron vendor.

/// Node label: the EC2 instance type, kept in each device's custom info as `AWSNodeType`.
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
/// Pod: what the scheduler allocated (there is no to-allocate key).
pub const ALLOCATED: &str = "hami.io/aws-neuron-devices-allocated";
/// Pod: comma list of device indexes, or of core indexes for core requests.
pub const NEURON_IDS: &str = "AWS_NEURON_IDS";
/// Pod: the core resource name, written only for core requests.
pub const RESOURCE_TYPE: &str = "NEURON_RESOURCE_TYPE";
/// Pod: unix-ns of the decision.
pub const ALLOC_TIME: &str = "NEURON_ALLOC_TIME";
/// Pod: `"false"` until the device plugin has served the pod.
pub const ALLOCATED_FLAG: &str = "NEURON_ALLOCATED";
/// Pod: the chosen node.
pub const PREDICATE_NODE: &str = "aws.amazon.com/predicate-node";
/// Pod: only these device ids (single-device requests only).
pub const USE_UUID: &str = "aws.amazon.com/use-neuron-uuid";
/// Pod: never these device ids (single-device requests only).
pub const NOUSE_UUID: &str = "aws.amazon.com/nouse-neuron-uuid";
