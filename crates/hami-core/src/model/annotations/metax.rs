//! Annotation keys of the Metax GPU vendor (whole devices).

/// Node: JSON object from "number of devices requested" to the topology loss (binpack score).
pub const TOPOLOGY_LOSSES: &str = "metax-tech.com/gpu.topology.losses";
/// Node: JSON object from "number of devices requested" to the topology score (spread score).
pub const TOPOLOGY_SCORES: &str = "metax-tech.com/gpu.topology.scores";
/// Pod: the devices the plugin still has to serve.
pub const TO_ALLOCATE: &str = "hami.io/metax-gpu-devices-to-allocate";
/// Pod: the devices allocated (read back on restart).
pub const ALLOCATED: &str = "hami.io/metax-gpu-devices-allocated";
