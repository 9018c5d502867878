//! The one shape of a pod write: which annotations and labels change, under which precondition,
//! and the merge-patch body the Kubernetes backend sends for it.

#[cfg(doc)]
use super::Error;

/// One merge patch of a pod's metadata: annotations to set (`Some`) or remove (`None`), labels to set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodPatch {
    pub annotations: Vec<(String, Option<String>)>,
    pub labels: Vec<(String, String)>,
    /// Write only while the pod is unbound: the resource version of the copy that showed it so
    /// (empty when that copy has none). A decision must never land on a pod that already runs
    /// elsewhere (a Binding whose answer was lost, then a retry choosing another node): such a
    /// write fails with [`Error::AlreadyBound`] and changes nothing.
    pub while_unbound: Option<String>,
    /// Write only onto this exact resource version of the pod (the copy the caller decided
    /// from; empty: no precondition). A conflict fails the write, with no retry: the NUMA refit
    /// rewrites entries by position, which must not land on a pod that changed since.
    pub at_version: Option<String>,
}

impl PodPatch {
    /// What every bind writes before the Binding: `bind-phase: allocating` and the bind time.
    pub fn bind_phase(bind_time: i64) -> PodPatch {
        use crate::model::annotations as keys;
        PodPatch {
            annotations: vec![
                (keys::BIND_PHASE.into(), Some(keys::BIND_PHASE_ALLOCATING.into())),
                (keys::BIND_TIME.into(), Some(bind_time.to_string())),
            ],
            labels: Vec::new(),
            while_unbound: None,
            at_version: None,
        }
    }

    /// The `{"metadata":{"annotations":{…},"labels":{…}}}` merge-patch body; with
    /// `resource_version`, the API server applies it only to that version of the pod.
    pub fn to_merge_patch(&self, resource_version: Option<&str>) -> serde_json::Value {
        let annos: serde_json::Map<String, serde_json::Value> = self
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().map_or(serde_json::Value::Null, serde_json::Value::String)))
            .collect();
        let mut meta = serde_json::Map::new();
        meta.insert("annotations".into(), serde_json::Value::Object(annos));
        if !self.labels.is_empty() {
            let labels: serde_json::Map<String, serde_json::Value> =
                self.labels.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
            meta.insert("labels".into(), serde_json::Value::Object(labels));
        }
        if let Some(rv) = resource_version.filter(|rv| !rv.is_empty()) {
            meta.insert("resourceVersion".into(), serde_json::Value::String(rv.to_owned()));
        }
        serde_json::json!({ "metadata": meta })
    }
}
