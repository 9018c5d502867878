//! The group book: every pod group (gang) the cluster shows, with its spec (from its PodGroup
//! object, or a Koordinator member's annotations), its members as the pod watch reports them
//! (which exist, which are bound, which are terminating), when it was first filtered and why it
//! waits. Fed by the watchers, read by a member's filter; the claims kept for members are the
//! node actors' (the claim index says where), never this book's. One entry per group behind a
//! `DashMap`, so groups never wait on each other.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dashmap::DashMap;

use crate::model::group::{GroupId, GroupKind, GroupSpec, PodGroupObject, group_of};
use crate::model::{NodeName, PodUid, PodView};
use crate::sched::claim::ClaimKey;

/// One member as the pod watch last showed it.
#[derive(Clone, Debug)]
pub struct Member {
    pub uid: PodUid,
    /// The node the pod is bound to.
    pub bound: Option<NodeName>,
    pub terminating: bool,
}

/// One group.
#[derive(Debug)]
pub struct Group {
    /// `Some(spec)` once its object (or a Koordinator member) was seen; `Some(None)` for an
    /// object that is no gang.
    pub object: Option<Option<GroupSpec>>,
    pub members: BTreeMap<Arc<str>, Member>,
    /// When a member was first filtered (Unix seconds and a clock for the histogram).
    pub first_filtered: Option<(i64, std::time::Instant)>,
    /// When room was last claimed for the group (Unix seconds).
    pub claimed_at: Option<i64>,
    /// The minimum was seen bound (told once).
    pub bound_told: bool,
    /// Why the group's last member filter found no node.
    pub waiting: Option<String>,
    /// Held while a member plans the group, so a group makes one decision at a time.
    pub planning: Arc<tokio::sync::Mutex<()>>,
}

impl Default for Group {
    fn default() -> Self {
        Group {
            object: None,
            members: BTreeMap::new(),
            first_filtered: None,
            claimed_at: None,
            bound_told: false,
            waiting: None,
            planning: Arc::new(tokio::sync::Mutex::new(())),
        }
    }
}

impl Group {
    /// Members that exist and are not on their way out.
    pub fn alive(&self) -> usize {
        self.members.values().filter(|m| !m.terminating).count()
    }
    pub fn bound(&self) -> usize {
        self.members.values().filter(|m| m.bound.is_some() && !m.terminating).count()
    }
}

/// What one group looks like to an operator.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GroupReport {
    pub group: String,
    pub kind: &'static str,
    pub minimum: Option<u32>,
    pub members: usize,
    pub claimed: usize,
    pub bound: usize,
    pub state: &'static str,
    pub since_s: Option<i64>,
    pub waiting: Option<String>,
}

/// The book.
#[derive(Default)]
pub struct GroupBook {
    groups: DashMap<GroupId, Group>,
    member_of: DashMap<PodUid, (GroupId, Arc<str>)>,
    /// Kinds whose API the cluster serves (by kind's place in `GroupKind::WITH_OBJECTS`): the
    /// links of any other kind are ignored, as no object of it can come, so a pod labelled for
    /// coscheduling in a cluster without its CRD is placed as HAMi places it. A kind is served
    /// once a watcher says so or an object of it is seen.
    served: [AtomicBool; 3],
}

/// The claim key of a group's member.
pub fn member_key(id: &GroupId, member: &str) -> ClaimKey {
    ClaimKey::Member { group: Arc::from(id.to_string()), member: Arc::from(member) }
}

fn kind_slot(kind: GroupKind) -> Option<usize> {
    GroupKind::WITH_OBJECTS.iter().position(|k| *k == kind)
}

impl GroupBook {
    /// The pod's group when its kind is served here.
    pub fn group_of(&self, pod: &PodView) -> Option<(GroupId, Option<GroupSpec>)> {
        let (id, spec) = group_of(pod)?;
        match kind_slot(id.kind) {
            Some(k) if !self.served[k].load(Ordering::Relaxed) => None,
            _ => Some((id, spec)),
        }
    }

    /// Whether the cluster serves `kind`'s PodGroup API (an unserved kind's links are ignored:
    /// no object of it can ever come).
    pub fn set_served(&self, kind: GroupKind, served: bool) {
        if let Some(k) = kind_slot(kind) {
            self.served[k].store(served, Ordering::Relaxed);
        }
    }

    /// A pod as the watch shows it: a member's state, or nothing for a pod of no group. Returns
    /// the group when its minimum just came to be bound, with when it was first filtered.
    pub fn observe(&self, pod: &PodView) -> Option<(GroupId, Option<std::time::Instant>)> {
        if self.member_of.is_empty() && group_of(pod).is_none() {
            // The common pod of no group, while no group has members: nothing to do.
            return None;
        }
        let uid = PodUid::new(&pod.metadata.uid);
        // Members are kept whether or not their kind is served yet: a watch's first list may come
        // before the kind's API is known, and its pods are not listed again.
        let Some((id, spec)) = group_of(pod) else {
            // A pod that left its group (labels can change) is a member no more.
            self.forget(&uid);
            return None;
        };
        let name: Arc<str> = Arc::from(pod.metadata.name.as_str());
        let bound = pod.spec.node_name.as_deref().filter(|n| !n.is_empty()).map(NodeName::new);
        let member = Member { uid: uid.clone(), bound, terminating: pod.is_terminating() || pod.is_finished() };
        if let Some(old) = self.member_of.insert(uid.clone(), (id.clone(), name.clone()))
            && old.0 != id
        {
            self.remove_member(&old.0, &old.1, &uid);
        }
        let mut g = self.groups.entry(id.clone()).or_default();
        if spec.is_some() {
            g.object = Some(spec);
        }
        g.members.insert(name, member);
        let min = g.object.flatten().map(|s| s.min as usize)?;
        if !g.bound_told && g.bound() >= min {
            g.bound_told = true;
            g.waiting = None;
            return Some((id, g.first_filtered.map(|(_, t)| t)));
        }
        None
    }

    /// The pod is gone: the member it was, if any, with its group.
    pub fn forget(&self, uid: &PodUid) -> Option<(GroupId, Arc<str>)> {
        let (_, (id, name)) = self.member_of.remove(uid)?;
        self.remove_member(&id, &name, uid);
        Some((id, name))
    }

    fn remove_member(&self, id: &GroupId, name: &str, uid: &PodUid) {
        let empty = match self.groups.get_mut(id) {
            Some(mut g) => {
                if g.members.get(name).is_some_and(|m| m.uid == *uid) {
                    g.members.remove(name);
                }
                g.members.is_empty() && g.object.is_none()
            }
            None => false,
        };
        if empty {
            self.groups.remove_if(id, |_, g| g.members.is_empty() && g.object.is_none());
        }
    }

    /// A PodGroup object as the cluster shows it. Returns the spec it had before.
    pub fn set_object(&self, o: &PodGroupObject) -> Option<Option<GroupSpec>> {
        self.set_served(o.id.kind, true);
        let mut g = self.groups.entry(o.id.clone()).or_default();
        g.object.replace(o.spec)
    }

    /// The PodGroup object is gone; its members stay known (they may be deleted next).
    pub fn remove_object(&self, id: &GroupId) {
        if let Some(mut g) = self.groups.get_mut(id) {
            g.object = None;
            g.claimed_at = None;
            g.bound_told = false;
        }
        self.groups.remove_if(id, |_, g| g.members.is_empty());
    }

    /// Reads the group under its entry's lock; `None` for a group the book does not know.
    pub fn read<R>(&self, id: &GroupId, f: impl FnOnce(&Group) -> R) -> Option<R> {
        self.groups.get(id).map(|g| f(&g))
    }

    /// Changes the group under its entry's lock (made when missing).
    pub fn write<R>(&self, id: &GroupId, f: impl FnOnce(&mut Group) -> R) -> R {
        f(&mut self.groups.entry(id.clone()).or_default())
    }

    /// Every group, for the console and the gauge; `claimed` counts a group's members with a
    /// claim in the index.
    pub fn reports(&self, claimed: impl Fn(&GroupId, &str) -> bool) -> Vec<GroupReport> {
        let mut out: Vec<GroupReport> = self
            .groups
            .iter()
            .map(|e| {
                let (id, g) = (e.key(), e.value());
                let minimum = g.object.flatten().map(|s| s.min);
                let n_claimed = g.members.keys().filter(|m| claimed(id, m)).count();
                let (alive, bound) = (g.alive(), g.bound());
                let state = match minimum {
                    None => "unknown",
                    Some(m) if bound >= m as usize => "bound",
                    Some(_) if n_claimed + bound > 0 && g.claimed_at.is_some() => "claimed",
                    Some(m) if alive < m as usize => "waiting",
                    Some(_) => "pending",
                };
                GroupReport {
                    group: id.to_string(),
                    kind: id.kind.as_str(),
                    minimum,
                    members: alive,
                    claimed: n_claimed,
                    bound,
                    state,
                    since_s: g.first_filtered.map(|(s, _)| s),
                    waiting: g.waiting.clone(),
                }
            })
            .collect();
        out.sort_by(|a, b| a.group.cmp(&b.group));
        out
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.groups.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::group::COSCHEDULING_LABEL;
    use crate::testing::pod;

    fn member(name: &str, uid: &str) -> PodView {
        pod().name(name).namespace("ml").uid(uid).label(COSCHEDULING_LABEL, "g").view()
    }

    #[test]
    fn members_come_and_go_with_the_pod_watch() {
        let book = GroupBook::default();
        let id = GroupId { kind: GroupKind::Coscheduling, namespace: "ml".into(), name: "g".into() };
        book.set_object(&PodGroupObject {
            id: id.clone(),
            spec: Some(GroupSpec { min: 2, timeout: None, failed: false }),
        });
        assert!(book.observe(&member("a", "u1")).is_none());
        assert!(book.observe(&pod().name("x").uid("u9").view()).is_none());
        assert_eq!(book.read(&id, |g| (g.alive(), g.bound())), Some((1, 0)));
        let mut b = member("b", "u2");
        b.spec.node_name = Some("n1".into());
        assert!(book.observe(&b).is_none());
        let mut a = member("a", "u1");
        a.spec.node_name = Some("n2".into());
        // The minimum bound is told once.
        assert_eq!(book.observe(&a).map(|(g, _)| g), Some(id.clone()));
        assert!(book.observe(&a).is_none());
        assert_eq!(book.forget(&PodUid::new("u2")).map(|(_, n)| n.to_string()), Some("b".into()));
        assert_eq!(book.read(&id, |g| g.alive()), Some(1));
        // A pod that drops its label leaves the group.
        book.observe(&pod().name("a").namespace("ml").uid("u1").view());
        assert_eq!(book.read(&id, |g| g.alive()), Some(0));
        book.remove_object(&id);
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn an_unserved_kind_links_no_group() {
        let book = GroupBook::default();
        assert!(book.group_of(&member("a", "u1")).is_none(), "no API, no group");
        book.set_served(GroupKind::Coscheduling, true);
        assert!(book.group_of(&member("a", "u1")).is_some());
        book.set_served(GroupKind::Coscheduling, false);
        assert!(book.group_of(&member("a", "u1")).is_none());
        // Its members are still kept, for when the kind turns out to be served.
        assert!(book.observe(&member("a", "u1")).is_none());
        book.set_served(GroupKind::Coscheduling, true);
        let id = GroupId { kind: GroupKind::Coscheduling, namespace: "ml".into(), name: "g".into() };
        assert_eq!(book.read(&id, |g| g.alive()), Some(1));
    }
}
