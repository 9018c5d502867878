//! Configuration the pure layers read: the device config file (`config/device.rs`), which gathers
//! each vendor's section from beside its vendor.

pub mod device;
