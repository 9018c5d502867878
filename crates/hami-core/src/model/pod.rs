//! The parts of a core/v1 Pod and Node the scheduler reads, as plain serde mirrors. Decoding skips
//! every other field, so a filter request never materialises the whole pod.

use serde::{Deserialize, Deserializer, Serialize};

use super::quantity::{self, Quantity};
use super::vec_map::VecMap;

pub type Annotations = VecMap<String>;

fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `null_default` for the lists a cached pod keeps: serde grows a list as it reads it, which
/// leaves spare room (four slots for one container) in every pod held for as long as it runs.
fn shrunk_vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut v: Vec<T> = null_default(d)?;
    v.shrink_to_fit();
    Ok(v)
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMetaView {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, deserialize_with = "null_default")]
    pub namespace: String,
    #[serde(default, deserialize_with = "null_default")]
    pub uid: String,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "VecMap::is_empty")]
    pub annotations: Annotations,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "VecMap::is_empty")]
    pub labels: VecMap<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Who made the pod: a pod whose controller makes a replacement may be moved elsewhere.
    #[serde(default, deserialize_with = "shrunk_vec", skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerRefView>,
}

/// One owner of a pod, as `metadata.ownerReferences` names it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRefView {
    #[serde(default, deserialize_with = "null_default")]
    pub kind: String,
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, deserialize_with = "null_default")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

/// A quantity as it appears in JSON: a string (`"16Gi"`) or a bare number.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(transparent)]
pub struct QuantityText(pub String);

impl<'de> Deserialize<'de> for QuantityText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            S(String),
            N(serde_json::Number),
        }
        Ok(QuantityText(match Raw::deserialize(d)? {
            Raw::S(s) => s,
            Raw::N(n) => n.to_string(),
        }))
    }
}

impl QuantityText {
    pub fn parse(&self) -> Result<Quantity, quantity::Error> {
        Quantity::parse(&self.0)
    }
}

pub type ResourceList = VecMap<QuantityText>;

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct ResourcesView {
    #[serde(default, deserialize_with = "null_default")]
    pub limits: ResourceList,
    #[serde(default, deserialize_with = "null_default")]
    pub requests: ResourceList,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct SecurityContextView {
    #[serde(default)]
    pub privileged: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct EnvVarView {
    #[serde(default)]
    pub name: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, deserialize_with = "null_default")]
    pub resources: ResourcesView,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContextView>,
    #[serde(default, deserialize_with = "shrunk_vec", skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVarView>,
}

impl ContainerView {
    /// A native sidecar: an init container with `restartPolicy: Always`.
    pub fn is_sidecar(&self) -> bool {
        self.restart_policy.as_deref() == Some("Always")
    }
    pub fn is_privileged(&self) -> bool {
        self.security_context.as_ref().and_then(|s| s.privileged).unwrap_or(false)
    }
    /// The limit, else the request, for a resource name (HAMi's usual rule).
    pub fn quantity(&self, name: &str) -> Option<&QuantityText> {
        self.resources.limits.get(name).or_else(|| self.resources.requests.get(name))
    }
    /// The limit only (vendors that read limits alone).
    pub fn limit(&self, name: &str) -> Option<&QuantityText> {
        self.resources.limits.get(name)
    }
    pub fn has_env(&self, name: &str) -> bool {
        self.env.iter().any(|e| e.name == name)
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingGroupView {
    #[serde(default)]
    pub pod_group_name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecView {
    #[serde(default, deserialize_with = "shrunk_vec")]
    pub containers: Vec<ContainerView>,
    #[serde(default, deserialize_with = "shrunk_vec", skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<ContainerView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_group: Option<SchedulingGroupView>,
    /// The pod's priority as admission resolved it from its PriorityClass (none: 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// `Never` when the pod may not preempt others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption_policy: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TerminatedView {
    #[serde(default)]
    pub exit_code: i32,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct ContainerStateView {
    #[serde(default)]
    pub terminated: Option<TerminatedView>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct ContainerStatusView {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, deserialize_with = "null_default")]
    pub state: ContainerStateView,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodStatusView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// When the kubelet started the pod (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, deserialize_with = "shrunk_vec", skip_serializing_if = "Vec::is_empty")]
    pub init_container_statuses: Vec<ContainerStatusView>,
}

/// The scheduler's view of a Pod.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct PodView {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMetaView,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: PodSpecView,
    #[serde(default, deserialize_with = "null_default")]
    pub status: PodStatusView,
}

impl PodView {
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotations.get(key).map(String::as_str)
    }
    /// Succeeded or Failed: the pod holds nothing any more.
    pub fn is_finished(&self) -> bool {
        matches!(self.status.phase.as_deref(), Some("Succeeded") | Some("Failed"))
    }
    pub fn is_terminating(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
    /// Init containers first, then regular containers: the order of HAMi's per-container lists.
    pub fn all_containers(&self) -> impl Iterator<Item = &ContainerView> {
        self.spec.init_containers.iter().chain(self.spec.containers.iter())
    }
    /// Every init container that runs to completion has terminated with exit code 0 (and there
    /// is at least one status). Native sidecars keep running, so they are not waited for.
    pub fn init_containers_succeeded(&self) -> bool {
        let st = &self.status.init_container_statuses;
        if st.is_empty() {
            return false;
        }
        let done = |name: &str| {
            st.iter().any(|s| s.name == name && s.state.terminated.as_ref().is_some_and(|t| t.exit_code == 0))
        };
        let plain: Vec<&ContainerView> = self.spec.init_containers.iter().filter(|c| !c.is_sidecar()).collect();
        if plain.iter().all(|c| c.name.is_empty()) {
            // Statuses without names (hand-written cluster files): every status must be a success.
            return st.iter().all(|s| s.state.terminated.as_ref().is_some_and(|t| t.exit_code == 0));
        }
        plain.iter().all(|c| done(&c.name))
    }
    /// The owner that controls the pod (`controller: true`), if any.
    pub fn controller(&self) -> Option<&OwnerRefView> {
        self.metadata.owner_references.iter().find(|o| o.controller == Some(true))
    }
    /// A PodGroup member (label or `spec.schedulingGroup`): Bind retries lock contention.
    pub fn is_pod_group_member(&self) -> bool {
        self.metadata.labels.get(super::annotations::POD_GROUP_LABEL).is_some_and(|v| !v.is_empty())
            || self
                .spec
                .scheduling_group
                .as_ref()
                .and_then(|g| g.pod_group_name.as_deref())
                .is_some_and(|v| !v.is_empty())
    }
}

/// The scheduler's view of a Node: identity, labels, annotations and device capacity.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct NodeView {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMetaView,
    #[serde(default, deserialize_with = "null_default")]
    pub status: NodeStatusView,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct NodeStatusView {
    #[serde(default, deserialize_with = "null_default")]
    pub capacity: ResourceList,
    #[serde(default, deserialize_with = "null_default")]
    pub allocatable: ResourceList,
}

impl NodeView {
    pub fn name(&self) -> &str {
        &self.metadata.name
    }
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotations.get(key).map(String::as_str)
    }
    /// A capacity value as an integer (`Value()`, rounded up); 0 when absent or malformed.
    pub fn capacity(&self, name: &str) -> i64 {
        self.status.capacity.get(name).and_then(|q| q.parse().ok()).map_or(0, |q| q.value_ceil())
    }
    pub fn allocatable(&self, name: &str) -> i64 {
        self.status.allocatable.get(name).and_then(|q| q.parse().ok()).map_or(0, |q| q.value_ceil())
    }
}

#[cfg(test)]
mod tests {
    use super::PodView;

    #[test]
    fn a_cached_pods_lists_hold_no_spare_room() {
        let p: PodView = serde_json::from_str(
            r#"{"metadata":{"name":"p","annotations":{"a":"1","b":"2","c":"3"}},
                "spec":{"containers":[{"name":"c","env":[{"name":"X"}],
                        "resources":{"limits":{"nvidia.com/gpu":"1"}}}]},
                "status":{"initContainerStatuses":[{"name":"i"}]}}"#,
        )
        .unwrap();
        assert_eq!(p.spec.containers.capacity(), 1);
        assert_eq!(p.spec.containers[0].env.capacity(), 1);
        assert_eq!(p.status.init_container_statuses.capacity(), 1);
        assert_eq!(p.metadata.annotations.len(), 3);
        assert_eq!(p.spec.containers[0].limit("nvidia.com/gpu").map(|q| q.0.as_str()), Some("1"));
    }
}
