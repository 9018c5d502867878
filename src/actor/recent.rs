//! The last decisions, for the status page and the console: filters and binds record theirs,
//! node actors the reservations that lapsed without a bind.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::devices::Vendors;
use crate::model::VendorId;
use crate::model::request::{FitKey, VendorParams};

/// A recent decision, for the status page.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RecentDecision {
    pub pod: String,
    pub node: Option<String>,
    pub outcome: &'static str,
    pub detail: String,
    pub unix_s: i64,
    /// A no-fit's reasons on its first nodes (at most `NO_FIT_NODES`), HAMi's reason then the
    /// detail.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<(String, String)>,
    /// A no-fit's request per device, one entry per container and vendor: what the console
    /// measures the free memory of shared devices against.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<DeviceNeed>,
}

/// What one container asks of each of its devices, with the pod's device selection: what the
/// console measures the free memory of shared devices against.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DeviceNeed {
    /// The vendor's name, as devices report it.
    pub vendor: String,
    #[serde(skip)]
    pub vendor_id: VendorId,
    /// Devices the container asks for, each with what follows.
    pub nums: u32,
    /// MiB per device; 0 when the request is a share of the device's memory.
    pub mem: u64,
    /// Percent of the device's memory, when `mem` is 0.
    pub mem_pct: u32,
    pub cores: u32,
    /// The pod's type and UUID selections as its vendor parsed them.
    #[serde(skip)]
    pub params: Option<VendorParams>,
    /// Everything the pod's fit reads, hashed: needs with the same key select alike.
    #[serde(skip)]
    pub shape: Option<FitKey>,
}

impl PartialEq for DeviceNeed {
    fn eq(&self, o: &Self) -> bool {
        (&self.vendor, self.nums, self.mem, self.mem_pct, self.cores) == (&o.vendor, o.nums, o.mem, o.mem_pct, o.cores)
    }
}

impl DeviceNeed {
    /// One device of `nums`, asking `mem` MiB (or `mem_pct` percent when `mem` is 0) and `cores`.
    pub fn new(vendor: &str, nums: u32, mem: u64, mem_pct: u32, cores: u32) -> DeviceNeed {
        DeviceNeed { vendor: vendor.into(), nums, mem, mem_pct, cores, ..DeviceNeed::default() }
    }

    /// Whether a device with this much memory (`total`) and this much free could take one of the
    /// container's devices, its selection aside.
    pub fn fits(&self, vendor: &str, total: u64, free_mem: u64, free_cores: u32) -> bool {
        let mem = if self.mem > 0 { self.mem } else { total * u64::from(self.mem_pct.min(100)) / 100 };
        vendor == self.vendor && free_mem >= mem && free_cores >= self.cores
    }

    /// Whether the pod's selection lets the container use a device of type `ty` and id `uuid`.
    pub fn selects(&self, vendors: &Vendors, ty: &str, uuid: &str) -> bool {
        vendors.get(self.vendor_id).selects(self.params.as_ref(), ty, uuid)
    }
}

/// How many nodes' reasons a no-fit keeps for the status page.
pub(super) const NO_FIT_NODES: usize = 20;

const RECENT_DECISIONS: usize = 50;

/// The last decisions, newest last, for the status page: filters and binds record theirs, node
/// actors the reservations that expired without a bind.
#[derive(Debug, Default)]
pub struct Recent(Mutex<VecDeque<RecentDecision>>);

impl Recent {
    pub fn push(&self, d: RecentDecision) {
        if let Ok(mut q) = self.0.lock() {
            if q.len() >= RECENT_DECISIONS {
                q.pop_front();
            }
            q.push_back(d);
        }
    }
    pub fn list(&self) -> Vec<RecentDecision> {
        self.0.lock().map(|q| q.iter().cloned().collect()).unwrap_or_default()
    }
}
