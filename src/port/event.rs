//! Events as the engine records them (what they are about, their reasons) and the per-object
//! budget that keeps a pod failing over and over from flooding the API server with them.

use super::PodRef;

/// Event type, as core/v1 Events spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum EventType {
    Normal,
    Warning,
}

/// What an Event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ObjectKind {
    Pod,
    Node,
    /// A `resource.k8s.io/v1` DeviceClass (cluster-scoped, like a node).
    DeviceClass,
}

/// An Event on a pod, as HAMi records them, or, for registration problems, on a node.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Event {
    pub object: ObjectKind,
    /// The pod (or, for node Events, the node's name with an empty namespace).
    pub pod: PodRef,
    pub reason: &'static str,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub message: String,
}

pub mod reasons {
    pub const FILTERING_SUCCEED: &str = "FilteringSucceed";
    pub const FILTERING_FAILED: &str = "FilteringFailed";
    pub const BINDING_SUCCEED: &str = "BindingSucceed";
    pub const BINDING_FAILED: &str = "BindingFailed";
    /// hami-rs's own: a node's registration annotation cannot be decoded.
    pub const DEVICE_REGISTRATION_INVALID: &str = "DeviceRegistrationInvalid";
    /// hami-rs's own: a DeviceClass lets DRA serve a resource name hami-rs serves.
    pub const EXTENDED_RESOURCE_SERVED_BY_DRA: &str = "ExtendedResourceServedByDRA";
    pub const NUMA_REFIT_SUCCEED: &str = "NumaRefitSucceed";
    pub const NUMA_REFIT_FAILED: &str = "NumaRefitFailed";
    /// hami-rs's own GPU-aware preemption: on the preemptor, victims are being evicted for it;
    /// on each victim, kube-scheduler's own reason for a pod evicted to make room.
    pub const PREEMPTING: &str = "Preempting";
    pub const PREEMPTED: &str = "Preempted";
    /// Eviction refused, or the victims not gone before the hold ran out.
    pub const PREEMPTION_FAILED: &str = "PreemptionFailed";
}

/// client-go's Event spam filter, which HAMi's recorder applies: per object, a burst of 25 Events,
/// then one every 5 minutes. A pod that keeps failing to schedule must not flood the API server.
pub struct EventBudget {
    buckets: std::collections::HashMap<String, (f64, std::time::Instant)>,
}

impl EventBudget {
    const BURST: f64 = 25.0;
    const REFILL_PER_SEC: f64 = 1.0 / 300.0;
    const MAX_OBJECTS: usize = 100_000;

    pub fn new() -> EventBudget {
        EventBudget { buckets: std::collections::HashMap::new() }
    }

    /// Whether an Event about `object` may be written at `now`.
    pub fn allow(&mut self, object: &str, now: std::time::Instant) -> bool {
        if self.buckets.len() >= Self::MAX_OBJECTS {
            // Forget objects whose bucket has refilled completely: they behave as new ones. If most
            // are still draining (a flood of distinct objects), forget them all: each may then send
            // one more burst, and the map stays bounded with the scan amortised over many calls.
            self.buckets.retain(|_, (tokens, t)| {
                *tokens + now.duration_since(*t).as_secs_f64() * Self::REFILL_PER_SEC < Self::BURST
            });
            if self.buckets.len() >= Self::MAX_OBJECTS / 2 {
                self.buckets.clear();
            }
        }
        let (tokens, last) = self.buckets.entry(object.to_owned()).or_insert((Self::BURST, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * Self::REFILL_PER_SEC).min(Self::BURST);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Default for EventBudget {
    fn default() -> Self {
        EventBudget::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_follow_client_gos_spam_filter() {
        let mut b = EventBudget::new();
        let t = std::time::Instant::now();
        assert_eq!((0..30).filter(|_| b.allow("Pod/ns/p", t)).count(), 25, "a burst of 25");
        assert!(b.allow("Pod/ns/other", t), "other objects are not affected");
        assert!(!b.allow("Pod/ns/p", t + std::time::Duration::from_secs(100)));
        assert!(b.allow("Pod/ns/p", t + std::time::Duration::from_secs(301)), "one more every 5 minutes");
    }

    #[test]
    fn the_event_budget_stays_bounded_under_a_flood_of_distinct_objects() {
        let mut b = EventBudget::new();
        let t = std::time::Instant::now();
        for i in 0..EventBudget::MAX_OBJECTS * 3 {
            assert!(b.allow(&format!("Pod/ns/p{i}"), t), "a new object always gets its first Event");
            assert!(b.buckets.len() <= EventBudget::MAX_OBJECTS, "bounded at {i}");
        }
        // An object still draining its own burst keeps its limit while the map is below the bound.
        let mut b = EventBudget::new();
        assert_eq!((0..30).filter(|_| b.allow("Pod/ns/p", t)).count(), 25);
        assert!(!b.allow("Pod/ns/p", t));
    }
}
