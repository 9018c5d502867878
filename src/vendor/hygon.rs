//! Hygon: not implemented yet; registers no devices and matches no pod.

use crate::config::device::HygonConfig;
use crate::model::pod::NodeView;
use crate::model::request::ContainerRequest;
use crate::model::{ContainerView, PodView, VendorId};
use crate::sched::reason::Rejection;

use super::{Discovery, FitCx, Pick, Vendor, WriteCx};

pub struct Hygon {
    word: String,
}

impl Hygon {
    pub fn new(_cfg: &HygonConfig) -> Hygon {
        Hygon { word: String::from("DCU") }
    }
}

impl Vendor for Hygon {
    fn name(&self) -> &str {
        &self.word
    }
    fn resource_names(&self) -> Vec<String> {
        Vec::new()
    }
    fn request(&self, _id: VendorId, _c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, String> {
        Ok(None)
    }
    fn discover(&self, _node: &NodeView) -> Discovery {
        Discovery::Absent
    }
    fn fit(&self, _cx: &FitCx<'_>, _out: &mut Vec<Pick>) -> Result<(), Rejection> {
        Err(Rejection::NodeUnregistered)
    }
    fn allocated_key(&self) -> Option<&str> {
        None
    }
    fn pod_keys(&self) -> Vec<String> {
        Vec::new()
    }
    fn annotations(&self, _cx: &WriteCx<'_>, _out: &mut Vec<(String, String)>) {}
}
