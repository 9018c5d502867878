//! Pure domain types shared by every layer: ids and units, devices and their usage, pods' device
//! requests and allocations, HAMi's annotation keys, and the byte-compatible codecs between them.
//! Nothing here performs I/O, reads a clock or imports actix, kube, tokio or http.

pub mod annotations;
pub mod bytes;
pub mod codec;
pub mod device;
pub mod edit;
pub mod group;
pub mod numa_alignment;
pub mod packed;
pub mod pod;
pub mod quantity;
pub mod reason;
pub mod request;
pub mod vec_map;

pub use device::{
    ContainerDevice, ContainerDevices, DeviceInfo, DeviceUsage, DeviceUuid, MemMiB, MigPlacement, MigProfile, NodeName,
    PodDevices, PodUid, VendorId,
};
pub use pod::{ContainerView, PodView};
pub use request::{ContainerRequest, PodRequest};
