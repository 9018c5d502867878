//! A group member's filter: answered from its claim, or the group planned whole and claimed for
//! every member it needs, or no node with the group's reason.

use std::sync::Arc;

use crate::actor::books::groups::member_key;
use crate::actor::books::pods::Claimed;
use crate::actor::coordinator::{Part, Take, TakeAll};
use crate::actor::filter::cycle::FilterCycle;
use crate::actor::filter::run::Told;
use crate::actor::messages::{Reserve, TakeClaim};
use crate::actor::{Failures, FilterOutcome};
use crate::model::group::{GroupId, GroupSpec};
use crate::model::{NodeName, PodRequest};
use crate::port::Backend;
use crate::sched::claim::ClaimKey;
use crate::sched::plan::group::{Member, describe, place_group};
use crate::sched::plan::{Node, Placement, View};
use crate::sched::quota_book::usage_of;

/// How often a group is planned again when another plan took part of its room between its plan
/// and its claims.
const PLAN_ROUNDS: usize = 3;

/// How long a member waits for the release of victims the API server no longer has.
const VICTIMS_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
const VICTIMS_RELEASE_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// The members one plan places, with their requests.
pub(super) struct Planned {
    pub names: Vec<Arc<str>>,
    pub reqs: Vec<Arc<PodRequest>>,
}

impl Planned {
    /// The members as the planner takes them: the filtered member (`own`) within its
    /// candidates' places, the others anywhere.
    pub(super) fn members<'a>(&'a self, own: &str, within: &'a [usize]) -> Vec<Member<'a>> {
        self.names
            .iter()
            .zip(&self.reqs)
            .map(|(n, r)| Member { req: r, within: (**n == *own).then_some(within) })
            .collect()
    }
}

/// How long a member's filter that finds its group short of members reads the count again, and
/// how often.
const MEMBERS_WAIT: std::time::Duration = std::time::Duration::from_millis(250);
const MEMBERS_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// Why a plan did not place the group: the reason, and whether evictions could help (not when
/// the namespace's quota is what refuses it).
struct Refused {
    why: String,
    room: bool,
}

impl<B: Backend> FilterCycle<'_, '_, B> {
    /// The filter of a gang member; `None` for a pod of no gang (or one its group does not
    /// need to place with others: beyond the minimum), which the filter places as any pod.
    pub(in crate::actor) async fn gang(&self) -> Option<(FilterOutcome, Told)> {
        let e = self.e;
        let groups = &e.pods.groups;
        let (id, _) = groups.group_of(self.pod)?;
        // The watch may not have shown this member yet.
        groups.observe(self.pod);
        let spec = match groups.read(&id, |g| g.object).flatten() {
            Some(Some(spec)) => spec,
            // A PodGroup that is no gang (a `basic` policy, no minimum).
            Some(None) => return None,
            None => {
                let why = format!("{}: waiting for its PodGroup object ({})", id.name, kind_object(&id));
                return Some(self.group_waits(&id, why));
            }
        };
        let member: Arc<str> = Arc::from(self.pod.metadata.name.as_str());
        let planning = groups.write(&id, |g| {
            g.first_filtered.get_or_insert_with(|| (crate::actor::state::unix_now().0, std::time::Instant::now()));
            g.planning.clone()
        });
        // One decision per group at a time: the members' filters of one group wait for each
        // other; other groups go on.
        let _one = planning.lock().await;
        let key = member_key(&id, &member);
        if let Some(held) = e.pods.claim(&key) {
            if self.names.contains(held.node.as_str()) {
                if let Some(placed) = self.reserve_from_claim(&key, &held).await {
                    return Some(placed);
                }
                if !held.victims.is_empty() {
                    // Claimed beside pods evicted for the group: it waits for them to leave.
                    if let Some(placed) = self.reserve_once_victims_left(&key, &held).await {
                        return Some(placed);
                    }
                    let why = format!(
                        "{}: waiting for the {} pods evicted for it on node {} to leave",
                        id.name,
                        held.victims.len(),
                        held.node
                    );
                    return Some(self.group_refused(&id, why));
                }
                // The node no longer keeps it (it lapsed there): planned again below.
                e.pods.forget_claim(&key, Some(held.id));
            } else {
                // Not among its candidates: planned again within them, the others' claims kept.
                let planned = self.members_of(&id, vec![member.clone()])?;
                return Some(self.plan_and_claim(&id, spec, planned, Some(held)).await);
            }
        }
        let min = spec.min as usize;
        // kube-scheduler may see members this scheduler's watch has not shown yet; refused now, a
        // member would wait for an event that already came (its unschedulable queue's flush,
        // minutes later). Short of members, the count is read again for a moment.
        let until = std::time::Instant::now() + MEMBERS_WAIT;
        let (alive, bound, held, others) = loop {
            let counted = groups
                .read(&id, |g| {
                    let mut held = 0;
                    let mut others = Vec::new();
                    for (name, m) in g.members.iter().filter(|(_, m)| !m.terminating && m.bound.is_none()) {
                        let claimed = e.pods.has_claim(&member_key(&id, name)) || e.nodes.placement(&m.uid).is_some();
                        if claimed {
                            held += 1;
                        } else if **name != *member {
                            others.push(name.clone());
                        }
                    }
                    (g.alive(), g.bound(), held, others)
                })
                .unwrap_or_default();
            if counted.0 >= min || std::time::Instant::now() >= until {
                break counted;
            }
            tokio::time::sleep(MEMBERS_POLL).await;
        };
        if alive < min {
            let why = format!("{}: waiting for {alive} of {min} members", id.name);
            return Some(self.group_waits(&id, why));
        }
        let need = min.saturating_sub(bound + held);
        if need == 0 {
            // The group has its minimum placed or claimed: this member is one more.
            return None;
        }
        let mut names = vec![member];
        names.extend(others.into_iter().take(need - 1));
        let planned = self.members_of(&id, names)?;
        Some(self.plan_and_claim(&id, spec, planned, None).await)
    }

    /// The members' requests: this pod's own, the others' from the cluster's pods. A member that
    /// cannot be read is left to its own filter (`None` when it is this pod).
    fn members_of(&self, id: &GroupId, names: Vec<Arc<str>>) -> Option<Planned> {
        let mut planned = Planned { names: Vec::with_capacity(names.len()), reqs: Vec::with_capacity(names.len()) };
        for name in names {
            let req = if *name == *self.pod.metadata.name {
                self.req.clone()
            } else {
                let Some(pod) = self.e.backend.pod(&id.namespace, &name) else { continue };
                match self.e.request_of(&pod) {
                    Ok(r) if r.requests_devices() => r,
                    // A member asking no device needs no room here.
                    _ => continue,
                }
            };
            planned.names.push(name);
            planned.reqs.push(req);
        }
        (!planned.names.is_empty()).then_some(planned)
    }

    /// Plans `planned` whole on one view (this member within its candidates) and claims each
    /// placement through `TakeAll`; then this member reserves from its claim. `replacing`: this
    /// member's old claim, given back once the new one is taken.
    async fn plan_and_claim(
        &self,
        id: &GroupId,
        spec: GroupSpec,
        planned: Planned,
        replacing: Option<Arc<Claimed>>,
    ) -> (FilterOutcome, Told) {
        let e = self.e;
        let ttl = spec.timeout.unwrap_or(e.cfg.gang_claim_ttl);
        for _ in 0..PLAN_ROUNDS {
            let (names, placements) = match self.plan(id, &planned) {
                Ok(p) => p,
                Err(Refused { why, room }) => {
                    // Evictions for every member or none, with preemption on.
                    if room
                        && replacing.is_none()
                        && let Some(evicting) = self.preempt_for_group(id, spec, &planned).await
                    {
                        return self.group_refused(id, evicting);
                    }
                    return self.group_refused(id, why);
                }
            };
            let mut parts = Vec::with_capacity(placements.len());
            let mut kept = Vec::with_capacity(placements.len());
            for (k, p) in placements.into_iter().enumerate() {
                let key = member_key(id, &planned.names[k]);
                let claim_id = e.pods.next_claim_id();
                let node = names[p.node].clone();
                kept.push((key.clone(), node.clone(), claim_id));
                let claim = TakeClaim {
                    key,
                    id: claim_id,
                    pod: planned.reqs[k].clone(),
                    devices: p.devices,
                    ttl,
                    gone: Vec::new(),
                };
                parts.push(Part { node, take: Take::Claim(claim) });
            }
            match e.nodes.coordinator().send(TakeAll { parts }).await {
                Ok(Ok(_)) => {}
                Ok(Err(refusal)) => {
                    tracing::debug!(group = %id, node = %refusal.node, "a member's claim was refused; planning the group again");
                    continue;
                }
                Err(_) => return (FilterOutcome::Error(crate::actor::FilterError::Stopping), Told::NOTHING),
            }
            crate::metrics::group_decision("claimed");
            let own = member_key(id, &self.pod.metadata.name);
            let mut held = None;
            for (key, node, claim_id) in &kept {
                let claimed = Arc::new(Claimed { node: node.clone(), id: *claim_id, victims: Vec::new() });
                if *key == own {
                    held = Some(claimed.clone());
                }
                e.pods.keep_claim(key.clone(), claimed);
            }
            if let Some(old) = replacing.as_ref().filter(|old| held.as_ref().is_some_and(|h| h.node != old.node)) {
                e.unreserve_soon(
                    old.node.as_str(),
                    crate::actor::messages::Holding::Claim { key: own.clone(), id: Some(old.id) },
                    "member planned again within its candidates",
                );
            }
            let now = crate::actor::state::unix_now().0;
            e.pods.groups.write(id, |g| {
                g.claimed_at = Some(now);
                g.waiting = None;
            });
            let names: Vec<String> = kept.iter().map(|(k, n, _)| format!("{k} on {n}")).collect();
            tracing::info!(group = %id, claims = %names.join(", "), ttl_s = ttl.as_secs(), "pod group planned whole; room claimed for every member it needs");
            e.lapse_group_claims(id.clone(), kept.iter().map(|(k, _, c)| (k.clone(), *c)).collect(), ttl);
            return match held {
                Some(h) => match self.reserve_from_claim(&own, &h).await {
                    Some(placed) => placed,
                    None => self.group_refused(id, format!("{}: the claim of {} was lost", id.name, own)),
                },
                // This member was not among those planned (it asks for no device): placed as
                // claimed room allows, by the ordinary filter's next call.
                None => self.group_refused(id, format!("{}: claimed for its other members", id.name)),
            };
        }
        crate::metrics::group_decision("raced");
        let why =
            format!("{}: its members' room was taken by other pods while it was planned; it is planned again", id.name);
        self.group_refused(id, why)
    }

    /// The plan of `planned` on the nodes' published snapshots: the view's node names and every
    /// member's placement, or the group's reason and the decision's outcome.
    #[allow(clippy::type_complexity)]
    fn plan(&self, id: &GroupId, planned: &Planned) -> Result<(Vec<NodeName>, Vec<Placement>), Refused> {
        let e = self.e;
        let (kept_names, snaps): (Vec<NodeName>, Vec<_>) = e.nodes.snapshots().into_iter().unzip();
        let within = self.candidate_places(kept_names.iter().map(NodeName::as_str));
        let view = View { nodes: snaps.iter().map(|s| Node { snapshot: s, holders: Vec::new() }).collect() };
        let members = planned.members(&self.pod.metadata.name, &within);
        let placed = e.with_planner(&self.req, |w| place_group(&view, &members, w));
        let quota_view = e.quota.as_deref().and_then(|q| q.view(&id.namespace));
        match placed {
            Ok(placements) => {
                let usage = usage_of(&placements.iter().flat_map(|p| p.charges.iter().cloned()).collect::<Vec<_>>());
                if quota_view.as_ref().is_some_and(|q| !q.admits(&id.namespace, &usage)) {
                    crate::metrics::group_decision("quota");
                    let why = format!(
                        "{}: its {} members together exceed the device quota of namespace {} (ResourceQuotaNotFit)",
                        id.name,
                        placements.len(),
                        id.namespace
                    );
                    return Err(Refused { why, room: false });
                }
                Ok((kept_names, placements))
            }
            Err(short) => {
                crate::metrics::group_decision("short");
                let n = planned.names.len();
                let missing = short.missing.len();
                let first = short.missing.first().map(|&k| describe(&planned.reqs[k], &e.vendors)).unwrap_or_default();
                let verb = if missing == 1 { "needs" } else { "need" };
                let why = format!("{}: {} of {n} members fit; {missing} {verb} {first}", id.name, short.fit);
                Err(Refused { why, room: true })
            }
        }
    }

    /// The places in a view of nodes named `names` of this filter's candidates, in view order. One
    /// pass over each list: a candidate list is not searched once per node.
    pub(in crate::actor) fn candidate_places<'n>(&self, names: impl Iterator<Item = &'n str>) -> Vec<usize> {
        let at: std::collections::HashMap<&str, usize> = names.enumerate().map(|(k, n)| (n, k)).collect();
        let mut within: Vec<usize> = self.names.iter().filter_map(|n| at.get(n).copied()).collect();
        within.sort_unstable();
        within.dedup();
        within
    }

    /// Reserves this member on its claimed node from its claim (the node lends the claim to the
    /// reservation) and answers that node; `None` when the node no longer keeps the claim.
    async fn reserve_from_claim(&self, key: &ClaimKey, held: &Claimed) -> Option<(FilterOutcome, Told)> {
        let e = self.e;
        let addr = e.nodes.addr(held.node.as_str())?;
        let msg = Reserve { pod: self.req.clone(), exact: None, ttl: e.cfg.reservation_ttl, claim: Some(key.clone()) };
        let reserved = match addr.reserve(msg).await {
            Ok(Ok(r)) => r,
            _ => return None,
        };
        let node = held.node.clone();
        let fits = vec![(node.clone(), reserved.score, ())];
        Some(self.placed(node, &reserved, &fits, 1, Failures::default()).await)
    }

    /// A member claimed beside victims: once the API server has none of them, their release by
    /// this scheduler's watch is moments away, so the reservation is tried again for a short
    /// while. `None` while a victim is still there.
    async fn reserve_once_victims_left(&self, key: &ClaimKey, held: &Claimed) -> Option<(FilterOutcome, Told)> {
        if !self.e.victims_gone(&held.victims).await {
            return None;
        }
        let until = std::time::Instant::now() + VICTIMS_RELEASE_WAIT;
        while std::time::Instant::now() < until {
            tokio::time::sleep(VICTIMS_RELEASE_POLL).await;
            if let Some(placed) = self.reserve_from_claim(key, held).await {
                return Some(placed);
            }
        }
        None
    }

    /// No node for this member, for its group's reason, on every candidate; nothing is held.
    fn group_waits(&self, id: &GroupId, why: String) -> (FilterOutcome, Told) {
        crate::metrics::group_decision("waiting");
        self.group_refused(id, why)
    }

    fn group_refused(&self, id: &GroupId, why: String) -> (FilterOutcome, Told) {
        tracing::debug!(pod = %self.pref, group = %id, reason = %why, "pod group not placed");
        self.e.pods.groups.write(id, |g| g.waiting = Some(why.clone()));
        let nodes: Vec<NodeName> = self.names.iter().map(NodeName::new).collect();
        let failed = Failures::of_group(nodes, Arc::from(why));
        let counts = failed.counts();
        crate::metrics::rejections(&counts);
        self.e.no_fit_events(&self.pref, &failed, self.names.len());
        self.e.remember_no_fit(&self.pref, &self.req, &failed, &counts);
        (FilterOutcome::NoFit { failed }, Told::NOTHING)
    }
}

/// The object a group of this kind waits for, as `kubectl get` names it.
fn kind_object(id: &GroupId) -> String {
    match id.kind.api_version() {
        Some(api) => format!("{api} PodGroup {}", id),
        None => format!("gang {id}"),
    }
}
