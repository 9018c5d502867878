//! Pod groups (gangs): which group a pod belongs to, by the first of the four ways training
//! frameworks link pods to a group, and what a group object asks (its minimum and its timeout).
//! The four kinds are Kubernetes' native `scheduling.k8s.io/v1beta1` PodGroup (linked by
//! `spec.schedulingGroup.podGroupName`), scheduler-plugins coscheduling's
//! `scheduling.x-k8s.io/v1alpha1` PodGroup (label), Volcano's `scheduling.volcano.sh/v1beta1`
//! PodGroup (annotation) and Koordinator's gang annotations, which carry the minimum themselves.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::pod::PodView;

/// Coscheduling's label naming the pod's group.
pub const COSCHEDULING_LABEL: &str = super::annotations::POD_GROUP_LABEL;
/// Volcano's annotation naming the pod's group.
pub const VOLCANO_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// Koordinator's annotations: the gang's name, its minimum and how long it waits.
pub const KOORDINATOR_NAME: &str = "gang.scheduling.koordinator.sh/name";
pub const KOORDINATOR_MIN: &str = "gang.scheduling.koordinator.sh/min-available";
pub const KOORDINATOR_WAIT: &str = "gang.scheduling.koordinator.sh/waiting-time";
/// The native PodGroup's condition that kube-scheduler sets False when the group failed.
pub const INITIALLY_SCHEDULED: &str = "PodGroupInitiallyScheduled";

/// Who defines the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupKind {
    /// `scheduling.k8s.io/v1beta1` PodGroup.
    Native,
    /// `scheduling.x-k8s.io/v1alpha1` PodGroup.
    Coscheduling,
    /// `scheduling.volcano.sh/v1beta1` PodGroup.
    Volcano,
    /// Koordinator's gang annotations (no object).
    Koordinator,
}

impl GroupKind {
    pub const WITH_OBJECTS: [GroupKind; 3] = [GroupKind::Native, GroupKind::Coscheduling, GroupKind::Volcano];

    /// The API group and version of the kind's PodGroup object (`None`: annotations only).
    pub fn api_version(self) -> Option<&'static str> {
        match self {
            GroupKind::Native => Some("scheduling.k8s.io/v1beta1"),
            GroupKind::Coscheduling => Some("scheduling.x-k8s.io/v1alpha1"),
            GroupKind::Volcano => Some("scheduling.volcano.sh/v1beta1"),
            GroupKind::Koordinator => None,
        }
    }

    /// The kind a PodGroup object of `api_version` is.
    pub fn of_api_version(api_version: &str) -> Option<GroupKind> {
        GroupKind::WITH_OBJECTS.into_iter().find(|k| k.api_version() == Some(api_version))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GroupKind::Native => "native",
            GroupKind::Coscheduling => "coscheduling",
            GroupKind::Volcano => "volcano",
            GroupKind::Koordinator => "koordinator",
        }
    }
}

/// One group: its kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId {
    pub kind: GroupKind,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a group asks: at least `min` members placed together, within `timeout` when it names one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    pub min: u32,
    pub timeout: Option<Duration>,
    /// A native group kube-scheduler reported failed (`PodGroupInitiallyScheduled` False): what
    /// was claimed for it goes back.
    pub failed: bool,
}

/// The pod's group, by the first way it is linked, and the spec its annotations carry
/// (Koordinator's; the other kinds' specs are their objects'). `None` for a pod of no group.
pub fn group_of(pod: &PodView) -> Option<(GroupId, Option<GroupSpec>)> {
    let ns = || Arc::<str>::from(pod.metadata.namespace.as_str());
    let id = |kind, name: &str| GroupId { kind, namespace: ns(), name: Arc::from(name) };
    if let Some(name) =
        pod.spec.scheduling_group.as_ref().and_then(|g| g.pod_group_name.as_deref()).filter(|n| !n.is_empty())
    {
        return Some((id(GroupKind::Native, name), None));
    }
    if let Some(name) = pod.metadata.labels.get(COSCHEDULING_LABEL).filter(|n| !n.is_empty()) {
        return Some((id(GroupKind::Coscheduling, name), None));
    }
    if let Some(name) = pod.annotation(VOLCANO_ANNOTATION).filter(|n| !n.is_empty()) {
        return Some((id(GroupKind::Volcano, name), None));
    }
    let name = pod.annotation(KOORDINATOR_NAME).filter(|n| !n.is_empty())?;
    // A gang without a readable minimum is no gang: Koordinator ignores it too.
    let min = pod.annotation(KOORDINATOR_MIN)?.trim().parse::<u32>().ok().filter(|m| *m > 0)?;
    let timeout = pod.annotation(KOORDINATOR_WAIT).and_then(parse_duration);
    Some((id(GroupKind::Koordinator, name), Some(GroupSpec { min, timeout, failed: false })))
}

/// A Go duration of whole units (`90s`, `5m`, `1h30m`, `500ms`); a bare number is seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Some(Duration::from_secs(n));
    }
    let (mut millis, mut rest) = (0u64, s);
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (1, 2)
        } else if rest.starts_with('h') {
            (3_600_000, 1)
        } else if rest.starts_with('m') {
            (60_000, 1)
        } else if rest.starts_with('s') {
            (1000, 1)
        } else {
            return None;
        };
        rest = &rest[len..];
        millis = millis.checked_add(n.checked_mul(unit)?)?;
    }
    Some(Duration::from_millis(millis))
}

/// A PodGroup object of one of the three kinds, as read from the API server or a cluster file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodGroupObject {
    pub id: GroupId,
    /// `None` when the object is no gang (a native `basic` policy) or names no usable minimum.
    pub spec: Option<GroupSpec>,
}

/// Why a PodGroup object could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GroupError {
    #[error("not a PodGroup of a known kind (apiVersion {0:?})")]
    Kind(String),
    #[error("PodGroup has no metadata.name")]
    Name,
}

impl PodGroupObject {
    /// Reads a PodGroup object of any of the three kinds from its JSON.
    pub fn from_value(v: &Value) -> Result<PodGroupObject, GroupError> {
        let api = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = GroupKind::of_api_version(api).ok_or_else(|| GroupError::Kind(api.to_owned()))?;
        let meta = |k: &str| v.pointer(&format!("/metadata/{k}")).and_then(Value::as_str).unwrap_or("");
        if meta("name").is_empty() {
            return Err(GroupError::Name);
        }
        let id = GroupId { kind, namespace: Arc::from(meta("namespace")), name: Arc::from(meta("name")) };
        let count = |p: &str| v.pointer(p).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
        let spec = match kind {
            GroupKind::Native => count("/spec/schedulingPolicy/gang/minCount").map(|min| {
                let failed = v.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.get("type").and_then(Value::as_str) == Some(INITIALLY_SCHEDULED)
                            && c.get("status").and_then(Value::as_str) == Some("False")
                    })
                });
                GroupSpec { min, timeout: None, failed }
            }),
            GroupKind::Coscheduling => count("/spec/minMember").map(|min| GroupSpec {
                min,
                timeout: v.pointer("/spec/scheduleTimeoutSeconds").and_then(Value::as_u64).map(Duration::from_secs),
                failed: false,
            }),
            GroupKind::Volcano => count("/spec/minMember").map(|min| GroupSpec { min, timeout: None, failed: false }),
            GroupKind::Koordinator => None,
        };
        Ok(PodGroupObject { id, spec: spec.filter(|s| s.min > 0) })
    }
}

#[cfg(test)]
mod tests;
