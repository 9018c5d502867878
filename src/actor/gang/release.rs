//! When a group's claims go back: a claim lapses (the group's timeout), a member is deleted, the
//! group falls below its minimum before it is whole, its PodGroup is deleted or kube-scheduler
//! reports it failed. A member seen bound keeps its devices (they are its allocation now) and
//! its claim ends. Every release goes through the one release path (`give_back_claim`).

use std::sync::Arc;
use std::time::Duration;

use crate::actor::books::groups::member_key;
use crate::actor::state::Inner;
use crate::model::group::{GroupId, PodGroupObject};
use crate::model::{PodUid, PodView};
use crate::port::Backend;
use crate::sched::claim::ClaimKey;

/// Why claims of a group went back unused (the label of `POD_GROUP_CLAIMS_RELEASED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    Lapsed,
    MemberDeleted,
    BelowMinimum,
    GroupDeleted,
    GroupFailed,
}

impl Released {
    pub fn as_str(self) -> &'static str {
        match self {
            Released::Lapsed => "lapsed",
            Released::MemberDeleted => "member_deleted",
            Released::BelowMinimum => "below_minimum",
            Released::GroupDeleted => "group_deleted",
            Released::GroupFailed => "group_failed",
        }
    }
}

impl<B: Backend> Inner<B> {
    /// A pod as the watch shows it, for its group: a member seen bound ends its claim (its
    /// devices are its allocation now); a group whose minimum is bound is told once.
    pub(crate) fn observe_member(self: &Arc<Self>, pod: &PodView) {
        let groups = &self.pods.groups;
        if let Some((id, first)) = groups.observe(pod) {
            if let Some(t) = first {
                crate::metrics::group_placed(t.elapsed().as_secs_f64());
            }
            tracing::info!(group = %id, "pod group bound: its minimum of members is bound");
        }
        let bound = pod.spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
        if bound && let Some((id, _)) = groups.group_of(pod) {
            let key = member_key(&id, &pod.metadata.name);
            if self.pods.has_claim(&key) {
                self.give_back_claim(&key, None, "member bound");
            }
        }
    }

    /// A deleted pod, for its group: its claim goes back, and so do the others' when the group
    /// is now below its minimum before it was whole.
    pub(crate) fn forget_member(self: &Arc<Self>, uid: &PodUid) {
        let Some((id, name)) = self.pods.groups.forget(uid) else { return };
        let given = usize::from(self.give_back_claim(&member_key(&id, &name), None, "member deleted").is_some());
        if given > 0 {
            crate::metrics::group_claims_released(Released::MemberDeleted.as_str(), given);
        }
        let short = self
            .pods
            .groups
            .read(&id, |g| !g.bound_told && g.object.flatten().is_some_and(|s| g.alive() < s.min as usize))
            .unwrap_or(false);
        if short {
            self.release_group(&id, Released::BelowMinimum);
        }
    }

    /// A PodGroup object as the cluster shows it; one kube-scheduler reports failed gives its
    /// claims back.
    pub(crate) fn observe_pod_group(self: &Arc<Self>, o: &PodGroupObject) {
        let before = self.pods.groups.set_object(o);
        let failed_now = o.spec.is_some_and(|s| s.failed);
        let failed_before = before.flatten().is_some_and(|s| s.failed);
        if failed_now && !failed_before {
            self.release_group(&o.id, Released::GroupFailed);
        }
    }

    /// The PodGroup object is gone: every claim of its members goes back.
    pub(crate) fn delete_pod_group(self: &Arc<Self>, id: &GroupId) {
        self.release_group(id, Released::GroupDeleted);
        self.pods.groups.remove_object(id);
    }

    /// Gives back every claim of the group's members not bound yet.
    pub(crate) fn release_group(self: &Arc<Self>, id: &GroupId, why: Released) {
        let names: Vec<Arc<str>> = self
            .pods
            .groups
            .read(id, |g| g.members.iter().filter(|(_, m)| m.bound.is_none()).map(|(n, _)| n.clone()).collect())
            .unwrap_or_default();
        let given =
            names.iter().filter(|n| self.give_back_claim(&member_key(id, n), None, why.as_str()).is_some()).count();
        self.pods.groups.write(id, |g| g.claimed_at = None);
        if given > 0 {
            tracing::info!(group = %id, claims = given, reason = why.as_str(), "pod group's claims given back");
            crate::metrics::group_claims_released(why.as_str(), given);
        }
    }

    /// Every group as an operator sees it; the gauge of groups by state is set from the same.
    pub(crate) fn group_reports(self: &Arc<Self>) -> Vec<crate::actor::books::groups::GroupReport> {
        let reports = self.pods.groups.reports(|id, m| self.pods.has_claim(&member_key(id, m)));
        let mut by: Vec<(&'static str, usize)> =
            ["waiting", "pending", "claimed", "bound", "unknown"].iter().map(|s| (*s, 0)).collect();
        for r in &reports {
            if let Some(e) = by.iter_mut().find(|(s, _)| *s == r.state) {
                e.1 += 1;
            }
        }
        crate::metrics::groups_by_state(&by);
        reports
    }

    /// After `ttl`, the claims of one plan that no member has taken go back (each only if it is
    /// still that plan's: a later plan's claim of the same member stays).
    pub(crate) fn lapse_group_claims(self: &Arc<Self>, id: GroupId, claims: Vec<(ClaimKey, u64)>, ttl: Duration) {
        let e = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            let given =
                claims.iter().filter(|(k, c)| e.give_back_claim(k, Some(*c), "group claim lapsed").is_some()).count();
            if given > 0 {
                tracing::info!(group = %id, claims = given, "pod group's claims lapsed before its members took them");
                crate::metrics::group_claims_released(Released::Lapsed.as_str(), given);
                e.pods.groups.write(&id, |g| g.claimed_at = None);
            }
        });
    }
}
