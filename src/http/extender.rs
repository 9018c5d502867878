//! `POST /filter`, `/prioritize`, `/preempt` and `/bind`, kube-scheduler's extender verbs. The body is parsed once, node
//! names borrowed from it (a filter's not read at all when the engine resolved a list from the
//! same text lately); every answer carries every field with Go's names.

use std::borrow::Cow;
use std::time::Instant;

use actix_web::{HttpResponse, web};
use serde_json::value::RawValue;

use crate::actor::{Candidates, FilterOutcome, Simulation};
use crate::backend::{Backend, PodRef};
use crate::metrics::Outcome;
use crate::model::pod::{Annotations, NodeView};
use crate::model::request::{self, PolicyDefaults};

use super::AppState;
use super::error::{Error, read_json_body};
use super::wire::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, ExtenderPreemptionArgs,
    ExtenderPreemptionResult, HostPriority, MetaPod, MetaVictims, node_names,
};

fn json<T: serde::Serialize>(v: &T) -> HttpResponse {
    match serde_json::to_vec(v) {
        Ok(b) => HttpResponse::Ok().content_type("application/json").body(b),
        Err(e) => HttpResponse::InternalServerError().body(e.to_string()),
    }
}

/// Warns of the pod's policy annotations that name no policy: the request ignores them and keeps
/// the configured policy, and without this line a typo would change nothing silently.
fn warn_ignored_policies(defaults: &PolicyDefaults, annotations: &Annotations, pod: &str) {
    for p in request::ignored_policies(annotations, defaults) {
        tracing::warn!(
            pod,
            annotation = p.key,
            value = %p.value,
            configured = %p.configured,
            "ignoring unrecognized {}={:?} on pod {pod}, using configured policy {:?}",
            p.key,
            p.value,
            p.configured
        );
    }
}

pub async fn filter<B: Backend>(st: web::Data<AppState<B>>, payload: web::Payload) -> Result<HttpResponse, Error> {
    let started = Instant::now();
    // Answers refused before the engine sees the pod count as errors too (the engine counts its own).
    let refused = || crate::metrics::filter_done(crate::metrics::Outcome::Error, started);
    let body = read_json_body(payload, st.max_body).await.inspect_err(|_| refused())?;
    let args: ExtenderArgs<'_> = serde_json::from_slice(&body).inspect_err(|_| refused())?;
    crate::metrics::phase(crate::metrics::Phase::Decode, started);
    let Some(pod) = args.pod else {
        refused();
        tracing::warn!("filter: extender args missing pod");
        return Ok(json(&ExtenderFilterResult::error("extender args missing pod")));
    };
    let pod_name = format!("{}/{}", pod.metadata.namespace, pod.metadata.name);
    warn_ignored_policies(&st.engine.config().defaults, &pod.metadata.annotations, &pod_name);
    if let Some(nodes) = &args.nodes {
        let names = args.node_names.map(node_names).transpose().inspect_err(|_| refused())?;
        return Ok(json(&simulate_nodes(&st, &pod, nodes.items.as_slice(), names)));
    }
    let Some(names) = args.node_names else {
        // HAMi's handler panics here; answer with `Error` instead (see docs/compat.md).
        refused();
        tracing::warn!(pod = %pod_name, "filter: extender args have neither Nodes nor NodeNames");
        return Ok(json(&ExtenderFilterResult::error("extender args have neither Nodes nor NodeNames")));
    };
    let names = match st.engine.read_candidates(names.get()) {
        Some(known) => known,
        None => Candidates::read(node_names(names).inspect_err(|_| refused())?, Some(names.get())),
    };
    if !st.is_leader() {
        refused();
        return Ok(json(&ExtenderFilterResult::error(st.not_leader_message())));
    }
    let backend = st.engine.backend();
    let m = &pod.metadata;
    if !backend.watched(&m.namespace, &m.name, &m.uid) {
        // kube-scheduler's informer was ahead of this scheduler's watch. The filter goes on: it
        // reserves for a time and writes only onto the pod itself, which the API server refuses
        // for a pod it does not have; preemption alone needs the cluster's copy, and reads it.
        crate::metrics::filter_unwatched();
    }
    backend.learn_pod(&pod);
    let (outcome, told) = st.engine.filter_telling_later(&pod, &names).await;
    let mut reasons = String::new();
    let mut by_reason = Vec::new();
    let (res, node, verdict) = match outcome {
        FilterOutcome::PassThrough => {
            let res = ExtenderFilterResult {
                nodes: None,
                node_names: Some(names.iter().map(Cow::Borrowed).collect()),
                failed_nodes: None,
                failed_and_unresolvable_nodes: None,
                error: String::new(),
            };
            (res, None, Outcome::PassThrough)
        }
        FilterOutcome::Chosen { node, others, failed } => {
            if tracing::enabled!(tracing::Level::DEBUG) {
                tracing::debug!(pod = %pod_name, failed = ?failed.render(), "nodes that did not fit");
            }
            // Every fitting node (the reserved one first) when kube-scheduler scores them; the
            // others then carry their reasons, as in a no-fit answer.
            let all = st.engine.answers_all();
            let mut node_names = Vec::with_capacity(1 + others.len());
            node_names.push(Cow::Owned(node.to_string()));
            node_names.extend(others.iter().map(|n| Cow::Owned(n.to_string())));
            let res = ExtenderFilterResult {
                nodes: None,
                node_names: Some(node_names),
                failed_nodes: all.then(|| failed.hami()),
                failed_and_unresolvable_nodes: None,
                error: String::new(),
            };
            (res, Some(node.to_string()), Outcome::Scheduled)
        }
        FilterOutcome::NoFit { failed } => {
            reasons = failed.summary();
            by_reason = failed.nodes_per_reason();
            let res = ExtenderFilterResult {
                nodes: None,
                node_names: None,
                failed_nodes: Some(failed.hami()),
                failed_and_unresolvable_nodes: None,
                error: String::new(),
            };
            (res, None, Outcome::NoFit)
        }
        FilterOutcome::Error(e) => (ExtenderFilterResult::error(e.to_string()), None, Outcome::Error),
    };
    let latency_us = started.elapsed().as_micros() as u64;
    let outcome = verdict.as_str();
    match verdict {
        Outcome::Error => {
            tracing::error!(pod = %pod_name, node = "-", outcome, latency_us, error = %res.error, "filter")
        }
        Outcome::NoFit => log_no_fit(&pod_name, outcome, latency_us, &reasons, &by_reason),
        Outcome::Scheduled | Outcome::PassThrough | Outcome::Bound => {
            // The answer goes first: the Event, the console's line and the log line are told
            // on this thread once it is written.
            actix_web::rt::spawn(async move {
                told.tell();
                let node = node.as_deref().unwrap_or("-");
                tracing::info!(pod = %pod_name, node, outcome, latency_us, error = "", "filter");
            });
            return Ok(json(&res));
        }
    }
    told.tell();
    Ok(json(&res))
}

/// A no-fit's log line: the summary, and the number of nodes that gave each reason as a field of
/// its own (`reason.CardInsufficientMemory=3`), so a JSON log can be queried by reason.
fn log_no_fit(pod: &str, outcome: &str, latency_us: u64, reasons: &str, by: &[(&'static str, usize)]) {
    use crate::actor::{NODE_LOCKED, NODE_UNREGISTERED, NODE_USAGE_UNAVAILABLE};
    use crate::model::reason::Reason as R;
    let n = |word: &str| by.iter().find(|(r, _)| *r == word).map(|(_, n)| *n as u64);
    let d = |r: R| n(r.as_str());
    tracing::info!(
        pod,
        node = "-",
        outcome,
        latency_us,
        reasons,
        "reason.CardNotHealth" = d(R::CardNotHealth),
        "reason.CardCordoned" = d(R::CardCordoned),
        "reason.CardTypeMismatch" = d(R::CardTypeMismatch),
        "reason.CardUuidMismatch" = d(R::CardUuidMismatch),
        "reason.NumaNotFit" = d(R::NumaNotFit),
        "reason.CardTimeSlicingExhausted" = d(R::CardTimeSlicingExhausted),
        "reason.ExclusiveDeviceAllocateConflict" = d(R::ExclusiveDeviceAllocateConflict),
        "reason.ResourceQuotaNotFit" = d(R::ResourceQuotaNotFit),
        "reason.CardInsufficientMemory" = d(R::CardInsufficientMemory),
        "reason.CardInsufficientCore" = d(R::CardInsufficientCore),
        "reason.CardComputeUnitsExhausted" = d(R::CardComputeUnitsExhausted),
        "reason.CardMigTopologyInfeasible" = d(R::CardMigTopologyInfeasible),
        "reason.CardNotFoundCustomFilterRule" = d(R::CardNotFoundCustomFilterRule),
        "reason.AllocatedCardsInsufficientRequest" = d(R::AllocatedCardsInsufficientRequest),
        "reason.ModeNotFit" = d(R::ModeNotFit),
        "reason.CardUnhealthy" = d(R::CardUnhealthy),
        "reason.CardQosPolicyMismatch" = d(R::CardQosPolicyMismatch),
        "reason.CardAppClassMismatch" = d(R::CardAppClassMismatch),
        "reason.NodeInsufficientDevice" = n("NodeInsufficientDevice"),
        "reason.NodeUnregistered" = n(NODE_UNREGISTERED),
        "reason.NodeUsageUnavailable" = n(NODE_USAGE_UNAVAILABLE),
        "reason.NodeLocked" = n(NODE_LOCKED),
        "filter"
    );
}

/// kube-scheduler's prioritize verb (`--filter-result=all`): each node named in `NodeNames` with
/// hami-rs's node-policy score on the extender's 0–10 scale. kube-scheduler ignores an extender
/// whose prioritize fails, so a pod that does not read gets an error and every node keeps its
/// plugins' scores.
pub async fn prioritize<B: Backend>(st: web::Data<AppState<B>>, payload: web::Payload) -> Result<HttpResponse, Error> {
    let started = Instant::now();
    let body = read_json_body(payload, st.max_body).await?;
    let args: ExtenderArgs<'_> = serde_json::from_slice(&body)?;
    let Some(pod) = args.pod else {
        return Err(Error::BadRequest("extender args missing pod".into()));
    };
    let Some(names) = args.node_names else {
        return Err(Error::BadRequest("prioritize needs NodeNames (the extender's nodeCacheCapable: true)".into()));
    };
    let names = node_names(names)?;
    let pod_name = format!("{}/{}", pod.metadata.namespace, pod.metadata.name);
    match st.engine.prioritize(&pod, &names).await {
        Ok(scores) => {
            let top =
                scores.iter().filter(|(_, s)| *s == crate::actor::filter::prioritize::MAX_EXTENDER_PRIORITY).count();
            tracing::debug!(pod = %pod_name, nodes = scores.len(), top, latency_us = started.elapsed().as_micros() as u64, "prioritize");
            let list: Vec<HostPriority> =
                scores.into_iter().map(|(host, score)| HostPriority { host, score }).collect();
            Ok(json(&list))
        }
        Err(e) => {
            tracing::warn!(pod = %pod_name, error = %e, "prioritize failed");
            Err(Error::BadRequest(e.to_string()))
        }
    }
}

/// kube-scheduler's preemption verb (the extender's `preemptVerb`): kube-scheduler proposes
/// victims per node by its own resources; the answer keeps the nodes where releasing them, with
/// the fewest more pods of lower priority where needed, lets the pod's devices fit, and drops
/// the others. A pod that does not read is a 400, which fails that preemption attempt.
pub async fn preempt<B: Backend>(st: web::Data<AppState<B>>, payload: web::Payload) -> Result<HttpResponse, Error> {
    let body = read_json_body(payload, st.max_body).await?;
    let args = ExtenderPreemptionArgs::from_slice(&body)?;
    let Some(pod) = args.pod else {
        return Err(Error::BadRequest("extender args missing pod".into()));
    };
    if !st.is_leader() {
        // A follower's view of the nodes may be behind: kube-scheduler's preemption fails this
        // attempt and tries again, rather than evicting by a stale view.
        return Err(Error::Unavailable(st.not_leader_message()));
    }
    let pod_name = format!("{}/{}", pod.metadata.namespace, pod.metadata.name);
    let proposals: std::collections::BTreeMap<String, Vec<String>> =
        args.victims.iter().map(|(n, v)| (n.clone(), v.pods.iter().map(|p| p.uid.clone()).collect())).collect();
    match st.engine.preempt_proposals(&pod, &proposals).await {
        Ok(kept) => {
            tracing::info!(pod = %pod_name, proposed = proposals.len(), kept = kept.len(), "preempt");
            let node_name_to_meta_victims = kept
                .into_iter()
                .map(|(node, uids)| {
                    let num_pdb_violations = args.victims.get(&node).map_or(0, |v| v.num_pdb_violations);
                    let pods = uids.into_iter().map(|uid| MetaPod { uid }).collect();
                    (node, MetaVictims { pods, num_pdb_violations })
                })
                .collect();
            Ok(json(&ExtenderPreemptionResult { node_name_to_meta_victims }))
        }
        Err(e) => {
            tracing::warn!(pod = %pod_name, error = %e, "preempt failed");
            Err(Error::BadRequest(e.to_string()))
        }
    }
}

/// Simulation mode (`Nodes` given, as the cluster autoscaler sends them): the single best Node
/// object is answered as it was sent. A pod that asks for no device gets back every Node (and
/// any names) it was sent, so the autoscaler's ordinary pods are not refused everywhere.
fn simulate_nodes<'a, B: Backend>(
    st: &AppState<B>,
    pod: &crate::model::PodView,
    items: &[&RawValue],
    names: Option<Vec<Cow<'a, str>>>,
) -> ExtenderFilterResult<'a> {
    let views = items
        .iter()
        .map(|raw| serde_json::from_str::<NodeView>(raw.get()).map_err(|e| format!("invalid node in Nodes: {e}")));
    let (nodes, node_names, failed_nodes) = match st.engine.simulate(pod, views) {
        Simulation::Error(e) => return ExtenderFilterResult::error(e),
        Simulation::PassThrough => (node_list(items), names, None),
        Simulation::Ranked { best, failed } => {
            (best.and_then(|k| items.get(k)).and_then(|raw| node_list(&[raw])), None, Some(failed))
        }
    };
    ExtenderFilterResult { nodes, node_names, failed_nodes, failed_and_unresolvable_nodes: None, error: String::new() }
}

/// A NodeList holding `items` as they were sent.
fn node_list(items: &[&RawValue]) -> Option<Box<RawValue>> {
    let mut text = String::from(r#"{"metadata":{},"items":["#);
    for (i, raw) in items.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(raw.get());
    }
    text.push_str("]}");
    RawValue::from_string(text).ok()
}

/// Reads and checks an `ExtenderBindingArgs` body (also what the load test's null extender
/// decodes, so both pay the same).
pub async fn decode_bind(payload: web::Payload, max_body: usize) -> Result<ExtenderBindingArgs, Error> {
    let body = read_json_body(payload, max_body).await?;
    let args: ExtenderBindingArgs = serde_json::from_slice(&body)?;
    if args.pod_name.is_empty() || args.node.is_empty() {
        return Err(Error::BadRequest("PodName and Node are required".into()));
    }
    Ok(args)
}

pub async fn bind<B: Backend>(st: web::Data<AppState<B>>, payload: web::Payload) -> Result<HttpResponse, Error> {
    let started = Instant::now();
    let args = decode_bind(payload, st.max_body).await?;
    let pod = PodRef { namespace: args.pod_namespace, name: args.pod_name, uid: args.pod_uid };
    let guard = st.inflight.enter();
    let r = st.engine.bind(&pod, &args.node).await;
    drop(guard);
    let error = r.err().map(|e| e.to_string()).unwrap_or_default();
    let latency_us = started.elapsed().as_micros() as u64;
    if error.is_empty() {
        tracing::info!(pod = %pod, node = %args.node, outcome = "bound", latency_us, error = %error, "bind");
    } else {
        tracing::error!(pod = %pod, node = %args.node, outcome = "failed", latency_us, error = %error, "bind");
    }
    Ok(json(&ExtenderBindingResult { error }))
}
