//! DeviceClasses that let Dynamic Resource Allocation serve an extended resource name hami-rs
//! serves too (`spec.extendedResourceName`, Kubernetes' extended resources through DRA). Such a
//! name is served by DRA on every node that does not advertise it through a device plugin, and
//! those devices are neither seen nor counted here. The book only remembers which classes say so;
//! the watchers, the cluster file and `kubectl hami` fill it, and the console, the gauge and the
//! log read it. No I/O.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// What a DeviceClass naming one of hami-rs's resources means, for logs, the console and
/// `kubectl hami`.
pub const MEANING: &str = "pods asking for this resource may be given devices by DRA on nodes that do not \
advertise it through a device plugin; hami-rs does not see or count those devices";

/// A DeviceClass as hami-rs reads it: its name and the extended resource name it serves, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct DeviceClassView {
    #[serde(default)]
    pub metadata: DeviceClassMeta,
    #[serde(default)]
    pub spec: DeviceClassSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct DeviceClassMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassSpec {
    #[serde(default)]
    pub extended_resource_name: Option<String>,
}

/// One DeviceClass that maps a resource name hami-rs serves.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct DraClass {
    /// The DeviceClass's name.
    pub class: String,
    /// Its `spec.extendedResourceName`.
    pub resource: String,
}

/// What one DeviceClass's arrival or change did to the book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The class now maps `resource` (it did not, or mapped another name).
    Maps(DraClass),
    /// The class no longer maps a served name.
    Gone(DraClass),
    Unchanged,
}

/// The classes mapping a served name, by class name; clones share one book, written by the
/// backend's watcher or loader and read by the console.
#[derive(Clone, Debug, Default)]
pub struct DraBook {
    classes: Arc<RwLock<BTreeMap<String, String>>>,
}

impl DraBook {
    /// Records a DeviceClass as it now is, keeping it only if it names one of `served` (every
    /// vendor's resource names). Idempotent: the same class again is `Unchanged`.
    pub fn apply(&self, class: &DeviceClassView, served: &[String]) -> Change {
        let name = &class.metadata.name;
        let now = class.spec.extended_resource_name.as_deref().filter(|r| served.iter().any(|s| s == r));
        let mut classes = self.classes.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = classes.get(name).cloned();
        match (before, now) {
            (Some(b), Some(n)) if b == n => Change::Unchanged,
            (_, Some(n)) => {
                classes.insert(name.clone(), n.to_owned());
                Change::Maps(DraClass { class: name.clone(), resource: n.to_owned() })
            }
            (Some(b), None) => {
                classes.remove(name);
                Change::Gone(DraClass { class: name.clone(), resource: b })
            }
            (None, None) => Change::Unchanged,
        }
    }

    /// Forgets a deleted DeviceClass.
    pub fn remove(&self, class: &str) -> Change {
        let mut classes = self.classes.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        match classes.remove(class) {
            Some(resource) => Change::Gone(DraClass { class: class.to_owned(), resource }),
            None => Change::Unchanged,
        }
    }

    /// Keeps only the classes named in `present` (after a relist), reporting the others as gone.
    pub fn retain(&self, present: &[String]) -> Vec<DraClass> {
        let mut classes = self.classes.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let gone: Vec<String> = classes.keys().filter(|k| !present.contains(k)).cloned().collect();
        gone.into_iter()
            .filter_map(|class| classes.remove(&class).map(|resource| DraClass { class, resource }))
            .collect()
    }

    /// Every class mapping a served name, sorted by class name.
    pub fn list(&self) -> Vec<DraClass> {
        let classes = self.classes.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        classes.iter().map(|(class, resource)| DraClass { class: class.clone(), resource: resource.clone() }).collect()
    }

    /// How many classes map each of `served`, every one listed (0 where none does), so a gauge
    /// set from it drops back to 0 when a class goes.
    pub fn counts(&self, served: &[String]) -> Vec<(String, usize)> {
        let classes = self.classes.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut served: Vec<String> = served.to_vec();
        served.sort();
        served.dedup();
        served.into_iter().map(|r| (r.clone(), classes.values().filter(|v| **v == r).count())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, resource: Option<&str>) -> DeviceClassView {
        DeviceClassView {
            metadata: DeviceClassMeta { name: name.into(), uid: String::new() },
            spec: DeviceClassSpec { extended_resource_name: resource.map(str::to_owned) },
        }
    }

    #[test]
    fn only_classes_naming_a_served_resource_are_kept() {
        let served: Vec<String> = vec!["nvidia.com/gpu".into(), "nvidia.com/gpumem".into()];
        let book = DraBook::default();
        let apply = |c| book.apply(&c, &served);
        let gpu = DraClass { class: "gpu.example.com".into(), resource: "nvidia.com/gpu".into() };
        assert_eq!(apply(class("gpu.example.com", Some("nvidia.com/gpu"))), Change::Maps(gpu.clone()));
        assert_eq!(apply(class("gpu.example.com", Some("nvidia.com/gpu"))), Change::Unchanged);
        assert_eq!(apply(class("fpga", Some("example.com/fpga"))), Change::Unchanged);
        assert_eq!(apply(class("plain", None)), Change::Unchanged);
        assert_eq!(book.list(), vec![gpu.clone()]);
        assert_eq!(book.counts(&served), vec![("nvidia.com/gpu".into(), 1), ("nvidia.com/gpumem".into(), 0)]);
        // A class that stops naming it, or is deleted, is gone.
        assert_eq!(apply(class("gpu.example.com", None)), Change::Gone(gpu.clone()));
        apply(class("gpu.example.com", Some("nvidia.com/gpu")));
        assert_eq!(book.remove("gpu.example.com"), Change::Gone(gpu));
        assert_eq!(book.remove("gpu.example.com"), Change::Unchanged);
        assert!(book.list().is_empty());
    }

    #[test]
    fn a_relist_drops_the_classes_it_no_longer_has() {
        let served: Vec<String> = vec!["nvidia.com/gpu".into()];
        let book = DraBook::default();
        book.apply(&class("a", Some("nvidia.com/gpu")), &served);
        book.apply(&class("b", Some("nvidia.com/gpu")), &served);
        let gone = book.retain(&["b".into()]);
        assert_eq!(gone, vec![DraClass { class: "a".into(), resource: "nvidia.com/gpu".into() }]);
        assert_eq!(book.counts(&served), vec![("nvidia.com/gpu".into(), 1)]);
    }

    #[test]
    fn a_device_class_reads_from_its_api_json() {
        let v: DeviceClassView = serde_json::from_value(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com", "uid": "u1"},
            "spec": {"selectors": [{"cel": {"expression": "true"}}], "extendedResourceName": "nvidia.com/gpu"}
        }))
        .unwrap();
        assert_eq!(
            v,
            DeviceClassView {
                metadata: DeviceClassMeta { name: "gpu.nvidia.com".into(), uid: "u1".into() },
                spec: DeviceClassSpec { extended_resource_name: Some("nvidia.com/gpu".into()) },
            }
        );
    }
}
