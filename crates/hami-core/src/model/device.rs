//! Devices as a node registers them (`DeviceInfo`), their usage (`DeviceUsage`), the entries a pod's
//! allocation annotation carries (`ContainerDevice`), and the ids and units they are measured in.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

macro_rules! arc_str_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Arc<str>);

        impl $name {
            pub fn new(s: &str) -> Self {
                Self(Arc::from(s))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::new(s)
            }
        }
        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

arc_str_id!(
    /// A Kubernetes node name, interned when the node is first seen.
    NodeName
);
arc_str_id!(
    /// A device id as registered by the device plugin (`GPU-8f0c…` for NVIDIA).
    DeviceUuid
);
arc_str_id!(
    /// A pod's `metadata.uid`: the key of reservations.
    PodUid
);

/// Device memory in MiB, HAMi's unit everywhere (annotations, registration, accounting).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MemMiB(pub u64);

impl MemMiB {
    pub const ZERO: MemMiB = MemMiB(0);
    pub fn get(self) -> u64 {
        self.0
    }
    pub fn saturating_sub(self, o: MemMiB) -> MemMiB {
        MemMiB(self.0.saturating_sub(o.0))
    }
}
impl std::ops::Add for MemMiB {
    type Output = MemMiB;
    fn add(self, o: MemMiB) -> MemMiB {
        MemMiB(self.0.saturating_add(o.0))
    }
}
impl std::ops::AddAssign for MemMiB {
    fn add_assign(&mut self, o: MemMiB) {
        self.0 = self.0.saturating_add(o.0);
    }
}
impl fmt::Display for MemMiB {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} MiB", self.0)
    }
}

/// Percent of one device's compute (100 = the whole device) for NVIDIA-like vendors; vendors with
/// other core units (Mthreads' 16 cores, AMD CUs, Neuron core masks) reuse the same field.
pub type Cores = u32;

/// Index of a vendor in the process's vendor registry (see `vendor::Vendors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VendorId(pub u8);

/// One MIG profile a device can host, as published by the NVIDIA device plugin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigProfile {
    pub name: Arc<str>,
    #[serde(rename = "memoryMB")]
    pub memory_mb: u32,
    pub core: u32,
    pub slice_count: u32,
    pub placements: Vec<MigPlacement>,
}

/// A MIG GPU-instance position: slices `[start, start + size)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MigPlacement {
    pub start: u32,
    pub size: u32,
}

impl MigPlacement {
    pub fn overlaps(self, o: MigPlacement) -> bool {
        self.start < o.start.saturating_add(o.size) && o.start < self.start.saturating_add(self.size)
    }
}

/// A device as its node registers it. Immutable once registered; shared by every snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceInfo {
    pub id: DeviceUuid,
    pub index: u32,
    /// How many tasks may share the device (the split count).
    pub count: u32,
    pub devmem: MemMiB,
    pub devcore: Cores,
    /// Model string (`NVIDIA-Tesla V100-PCIE-32GB`), or the vendor word for synthesised devices.
    pub ty: Arc<str>,
    pub numa: i32,
    /// NVIDIA: `hami-core`, `mig` or `mps`; empty for most other vendors.
    pub mode: Arc<str>,
    pub mig_profiles: Arc<[MigProfile]>,
    pub health: bool,
    /// Vendor extras passed through untouched (Ascend `NetworkID`, Vastai `AIC`, …).
    pub custom: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
}

impl DeviceInfo {
    /// A healthy device with the given capacity; the other fields take their zero values.
    pub fn new(id: &str, index: u32, count: u32, devmem: u64, devcore: Cores, ty: &str) -> Self {
        DeviceInfo {
            id: DeviceUuid::new(id),
            index,
            count,
            devmem: MemMiB(devmem),
            devcore,
            ty: Arc::from(ty),
            numa: 0,
            mode: Arc::from(""),
            mig_profiles: Arc::from(Vec::new()),
            health: true,
            custom: None,
        }
    }

    pub fn is_mig(&self) -> bool {
        &*self.mode == "mig"
    }

    /// A string field of `custominfo`, if present.
    pub fn custom_str(&self, key: &str) -> Option<&str> {
        self.custom.as_ref()?.get(key)?.as_str()
    }
}

/// A realised or reserved MIG instance on a device.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MigSlot {
    pub profile: Arc<str>,
    pub placement: MigPlacement,
}

/// Task classes some vendors co-locate by (Metax sGPU online/offline pods).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TaskClass {
    #[default]
    Plain,
    Online,
    Offline,
}

/// The registration's numbers every fit and score reads, kept beside the usage: read through
/// `info`, each device of a filter's candidates costs a cache miss (the records are spread over
/// the heap), which profiling showed as the largest single cost of a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub count: u32,
    pub devmem: MemMiB,
    pub devcore: Cores,
    pub numa: i32,
    pub index: u32,
    pub mig: bool,
}

impl Capacity {
    pub fn of(info: &DeviceInfo) -> Capacity {
        Capacity {
            count: info.count,
            devmem: info.devmem,
            devcore: info.devcore,
            numa: info.numa,
            index: info.index,
            mig: info.is_mig(),
        }
    }
}

/// A device and what is allocated on it in one snapshot. Cheap to clone: the static part is shared.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceUsage {
    pub info: Arc<DeviceInfo>,
    /// A copy of `info`'s numbers, made with the usage and never changed apart from `info`.
    pub cap: Capacity,
    pub vendor: VendorId,
    /// Slots in use (tasks sharing the device).
    pub used: u32,
    pub used_mem: MemMiB,
    pub used_cores: Cores,
    /// False when registered unhealthy, or marked so by the usage rebuild (a MIG pod on a non-MIG GPU).
    pub health: bool,
    pub mig_used: Vec<MigSlot>,
    /// Tasks per class (online, offline, plain) for vendors that co-locate by class.
    pub classes: [u16; 3],
    /// QoS policy the device currently runs (Metax sGPU); `None` when unknown.
    pub qos: Option<Arc<str>>,
}

impl DeviceUsage {
    pub fn idle(info: Arc<DeviceInfo>, vendor: VendorId) -> Self {
        DeviceUsage {
            health: info.health,
            cap: Capacity::of(&info),
            info,
            vendor,
            used: 0,
            used_mem: MemMiB::ZERO,
            used_cores: 0,
            mig_used: Vec::new(),
            classes: [0; 3],
            qos: None,
        }
    }
    pub fn free_mem(&self) -> MemMiB {
        self.cap.devmem.saturating_sub(self.used_mem)
    }
    pub fn free_cores(&self) -> Cores {
        self.cap.devcore.saturating_sub(self.used_cores)
    }
    /// Whether usage stays within the device's slot count, memory and cores: the invariant. Read
    /// from the registration itself, not the copy the fit reads. A MIG device's capacity is its
    /// placements (each instance is chosen where no other is): the cores its instances are
    /// charged, each profile's share rounded up by the device plugin (seven `1g` instances of 15
    /// on an A100), may add up past 100.
    pub fn within_capacity(&self) -> bool {
        let cores_ok = self.used_cores <= self.info.devcore || self.info.is_mig();
        self.used <= self.info.count && self.used_mem <= self.info.devmem && cores_ok
    }
    pub fn class_count(&self, c: TaskClass) -> u16 {
        self.classes[c as usize]
    }
}

/// One device entry of a pod's allocation annotation: `uuid,type,usedmem,usedcores`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ContainerDevice {
    pub uuid: DeviceUuid,
    /// The vendor word (`NVIDIA`), or for AMD the device's product string.
    pub ty: Arc<str>,
    pub usedmem: MemMiB,
    pub usedcores: Cores,
    /// Device index on the node; not encoded in the annotation (decodes as 0).
    pub idx: u32,
    /// The MIG instance chosen for this entry (written to `hami.io/vgpu-mig-allocations`).
    pub mig: Option<MigSlot>,
}

impl ContainerDevice {
    pub fn new(uuid: &str, ty: &str, usedmem: u64, usedcores: Cores) -> Self {
        ContainerDevice {
            uuid: DeviceUuid::new(uuid),
            ty: Arc::from(ty),
            usedmem: MemMiB(usedmem),
            usedcores,
            idx: 0,
            mig: None,
        }
    }
}

/// The devices one container got from one vendor.
pub type ContainerDevices = Vec<ContainerDevice>;

/// A pod's devices, per vendor, one entry per container (init containers first).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodDevices(pub Vec<(VendorId, Vec<ContainerDevices>)>);

impl PodDevices {
    pub fn vendor(&self, v: VendorId) -> Option<&[ContainerDevices]> {
        self.0.iter().find(|(id, _)| *id == v).map(|(_, c)| c.as_slice())
    }
    pub fn vendor_mut(&mut self, v: VendorId, containers: usize) -> &mut Vec<ContainerDevices> {
        let i = match self.0.iter().position(|(id, _)| *id == v) {
            Some(i) => i,
            None => {
                self.0.push((v, vec![ContainerDevices::new(); containers]));
                self.0.len() - 1
            }
        };
        &mut self.0[i].1
    }
    /// Every device entry of every vendor and container.
    pub fn entries(&self) -> impl Iterator<Item = (VendorId, usize, &ContainerDevice)> {
        self.0
            .iter()
            .flat_map(|(v, cs)| cs.iter().enumerate().flat_map(move |(i, c)| c.iter().map(move |d| (*v, i, d))))
    }
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|(_, cs)| cs.iter().all(|c| c.is_empty()))
    }
}
