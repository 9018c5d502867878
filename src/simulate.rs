//! `hami-rs simulate`: runs each pod of a file through the real engine, in order (filter, then
//! bind, so each placement counts for the next), over an in-memory cluster, and reports where
//! each pod went, why others did not fit, and what every device holds afterwards.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::actor::preemption::plan::Plan;
use crate::actor::{Engine, FilterOutcome};
use crate::admission;
use crate::backend::PodRef;
use crate::backend::memory::{ClusterObjects, MemoryBackend};
use crate::config::SimulateArgs;
use crate::report::{NodeJson, node_json};

#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodResult {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: Option<String>,
    pub error: Option<String>,
    pub failed_nodes: BTreeMap<String, String>,
    /// Every annotation hami-rs wrote on the pod.
    pub annotations: BTreeMap<String, String>,
    /// With `--preemption=on`: the pods evicted to place this one, and where.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preempted: Option<Plan>,
    /// With `--defragment=on`: the pods moved to place this one (their controllers' next pods
    /// have their new places claimed; a simulation has no controller to make them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<String>,
    /// Their replacements, as their controllers would make them, and where each was placed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<String>,
    /// With `--defragment=dry-run`: the moves that would place this pod, or what blocks them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defragmentation: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Simulation {
    pub pods: Vec<PodResult>,
    pub nodes: Vec<NodeJson>,
    /// Pod groups: each placed whole (its minimum bound) or not at all.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<crate::actor::GroupReport>,
}

/// Runs the simulation.
pub async fn run(args: &SimulateArgs) -> Result<Simulation, crate::app::Error> {
    args.validate()?;
    let cluster = ClusterObjects::load(&args.cluster_file)?;
    let pending = ClusterObjects::load(&args.pods)?;
    let pods = pending.pods;
    // The simulation evicts between filters itself (and reports whom): its engine preempts nothing.
    let mut flags = args.sched.clone();
    flags.preemption = crate::config::Preemption::Off;
    let engine = crate::app::memory_engine(&flags, cluster).await?;
    // PodGroups may come with their pods.
    for g in &pending.groups {
        engine.observe_pod_group(g);
    }
    let webhook = admission::Config::from_flags(&args.sched, engine.quota().cloned());
    simulate_pods_with(&engine, &webhook, pods, args.sched.preemption == crate::config::Preemption::On).await
}

/// Places `pods` one after another on the engine's cluster, with the webhook's default flags.
pub async fn simulate_pods(
    engine: &Engine<MemoryBackend>,
    pods: Vec<crate::model::PodView>,
) -> Result<Simulation, crate::app::Error> {
    let webhook = admission::Config { quota: engine.quota().cloned(), ..admission::Config::default() };
    simulate_pods_with(engine, &webhook, pods, false).await
}

/// Places `pods` one after another: each goes through the webhook's admission, then filter, then
/// bind, so every placement counts for the next pod. With `preempt`, a pod no node fits is
/// placed by evicting the pods a preemption would (see [`Engine::preemption_plan`]).
pub async fn simulate_pods_with(
    engine: &Engine<MemoryBackend>,
    webhook: &admission::Config,
    pods: Vec<crate::model::PodView>,
    preempt: bool,
) -> Result<Simulation, crate::app::Error> {
    let backend = engine.backend().clone();
    let names: Vec<String> = backend.nodes().iter().map(|n| n.metadata.name.clone()).collect();
    let names: Vec<std::borrow::Cow<'_, str>> = names.iter().map(|n| std::borrow::Cow::Borrowed(n.as_str())).collect();
    let mut results: Vec<Option<PodResult>> = Vec::with_capacity(pods.len());
    // Every pod exists before the first is filtered, as pods created together do: a group's
    // members are all there when its first member is planned.
    let mut admitted = Vec::with_capacity(pods.len());
    for mut pod in pods {
        if pod.metadata.namespace.is_empty() {
            pod.metadata.namespace = "default".into();
        }
        if pod.metadata.uid.is_empty() {
            pod.metadata.uid = format!("sim-{}-{}", pod.metadata.namespace, pod.metadata.name);
        }
        let pref = PodRef::of(&pod);
        // Pods reach the scheduler through the webhook, which adds HAMi's defaults (e.g. 100 cores
        // for a whole-GPU request) and denies what HAMi denies.
        let pod = match admission::admit_pod(engine.vendors(), webhook, &engine.config().defaults, &pod) {
            Ok(p) => p,
            Err(e) => {
                results.push(Some(PodResult {
                    namespace: pref.namespace,
                    name: pref.name,
                    uid: pref.uid,
                    node: None,
                    error: Some(format!("denied by the webhook: {e}")),
                    failed_nodes: BTreeMap::new(),
                    annotations: BTreeMap::new(),
                    preempted: None,
                    moved: Vec::new(),
                    replaced: Vec::new(),
                    defragmentation: None,
                }));
                continue;
            }
        };
        backend.insert_pod(pod.clone());
        engine.observe_pod(&pod);
        admitted.push((results.len(), pref, pod));
        results.push(None);
    }
    let defragmenting = engine.config().defragment == crate::actor::Defragment::On;
    let names_of = |b: &MemoryBackend| -> std::collections::BTreeSet<String> {
        b.pods().iter().map(|p| format!("{}/{}", p.metadata.namespace, p.metadata.name)).collect()
    };
    for (at, pref, pod) in admitted {
        let before = if defragmenting { names_of(&backend) } else { Default::default() };
        let cached: Vec<std::sync::Arc<crate::model::PodView>> =
            if defragmenting { backend.pods() } else { Vec::new() };
        let mut outcome = engine.filter(&pod, &names).await;
        let mut preempted = None;
        let mut first_failed = None;
        if let FilterOutcome::NoFit { failed } = &outcome
            && preempt
            && let Ok(req) = engine.request_of(&pod)
            && let Some(plan) = engine.preemption_plan(&pod, &req, failed).await
        {
            // The reasons reported are those that called for the preemption.
            first_failed = Some(failed.render());
            // Evicted: gone from the cluster, so their devices are free for the next filter.
            for v in &plan.victims {
                backend.remove_pod(&v.namespace, &v.name);
                engine.delete_pod(&crate::model::PodUid::new(&v.uid));
            }
            // Every node actor has applied the deletions before the pod is filtered again.
            let _ = engine.reports().await;
            preempted = Some(plan);
            outcome = engine.filter(&pod, &names).await;
        }
        let mut moved = Vec::new();
        let mut replaced = Vec::new();
        if matches!(outcome, FilterOutcome::NoFit { .. }) && defragmenting {
            // The first filter moved what it planned to (evicted at once here); the next one
            // takes the devices claimed for the pod.
            moved = before.difference(&names_of(&backend)).cloned().collect();
            // Each moved pod's controller makes its next pod: the simulation makes it too, and
            // it is placed where its room was claimed.
            for gone in &moved {
                let Some(old) =
                    cached.iter().find(|p| format!("{}/{}", p.metadata.namespace, p.metadata.name) == *gone)
                else {
                    continue;
                };
                let mut next = (**old).clone();
                next.metadata.name = format!("{}-next", old.metadata.name);
                next.metadata.uid = format!("{}-next", old.metadata.uid);
                next.metadata.resource_version = None;
                next.spec.node_name = None;
                next.status = Default::default();
                for k in engine.vendors().scheduler_keys() {
                    next.metadata.annotations.remove(k.as_str());
                    next.metadata.labels.remove(k.as_str());
                }
                backend.insert_pod(next.clone());
                let r = PodRef::of(&next);
                if let FilterOutcome::Chosen { node, .. } = engine.filter(&next, &names).await
                    && engine.bind(&r, node.as_str()).await.is_ok()
                {
                    if let Some(v) = crate::backend::Backend::pod(&backend, &r.namespace, &r.name) {
                        engine.observe_pod(&v);
                    }
                    replaced.push(format!("{r} -> {node}"));
                }
            }
            if !moved.is_empty() {
                let _ = engine.reports().await;
                let again = engine.filter(&pod, &names).await;
                first_failed.get_or_insert_with(|| match &outcome {
                    FilterOutcome::NoFit { failed } => failed.render(),
                    _ => BTreeMap::new(),
                });
                outcome = again;
            }
        }
        let (node, error, failed) = match outcome {
            FilterOutcome::PassThrough => (None, Some("pod requests no devices".to_owned()), BTreeMap::new()),
            FilterOutcome::NoFit { failed } => (None, Some("no node fits".to_owned()), failed.render()),
            FilterOutcome::Error(e) => (None, Some(e.to_string()), BTreeMap::new()),
            FilterOutcome::Chosen { node, failed, .. } => match engine.bind(&pref, node.as_str()).await {
                Ok(()) => {
                    if let Some(v) = crate::backend::Backend::pod(&backend, &pref.namespace, &pref.name) {
                        engine.observe_pod(&v);
                    }
                    (Some(node.to_string()), None, failed.render())
                }
                Err(e) => (None, Some(format!("bind to {node} failed: {e}")), failed.render()),
            },
        };
        let failed = first_failed.unwrap_or(failed);
        let defragmentation = (node.is_none() && engine.config().defragment != crate::actor::Defragment::Off)
            .then(|| engine.pending_pods().into_iter().find(|p| p.pod == pref.to_string()))
            .flatten()
            .and_then(|p| p.detail.split_once("; ").map(|(_, note)| note.to_owned()));
        results[at] = Some(PodResult {
            preempted,
            moved,
            replaced,
            defragmentation,
            annotations: backend.written(&pref.namespace, &pref.name),
            namespace: pref.namespace,
            name: pref.name,
            uid: pref.uid,
            node,
            error,
            failed_nodes: failed,
        });
    }
    let reports = engine.reports().await;
    let nodes = reports.iter().map(|r| node_json(r, engine.vendors())).collect();
    let groups = engine.group_reports();
    Ok(Simulation { pods: results.into_iter().flatten().collect(), nodes, groups })
}

fn short(uuid: &str) -> String {
    if uuid.chars().count() <= 18 {
        uuid.to_owned()
    } else {
        let tail: String = uuid.chars().rev().take(8).collect::<Vec<_>>().into_iter().rev().collect();
        let head: String = uuid.chars().take(8).collect();
        format!("{head}…{tail}")
    }
}

fn bar(used: u64, total: u64, width: usize) -> String {
    let filled = (used.min(total) * width as u64)
        .checked_div(total)
        .map_or(0, |_| (used.min(total) * width as u64).div_ceil(total) as usize);
    format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
}

/// The human-readable report: placements with reasons, then per-node, per-device utilisation.
pub fn render_table(sim: &Simulation) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "PODS");
    let w = sim.pods.iter().map(|p| p.namespace.len() + p.name.len() + 1).max().unwrap_or(3).max(3);
    for p in &sim.pods {
        let id = format!("{}/{}", p.namespace, p.name);
        match &p.node {
            Some(n) => {
                let devs: Vec<String> = p
                    .annotations
                    .iter()
                    .filter(|(k, _)| k.ends_with("-devices-allocated") || k.as_str() == "hami.io/kunlun-allocated")
                    .flat_map(|(_, v)| {
                        v.split([';', ':']).filter(|e| e.contains(',')).map(|e| e.to_owned()).collect::<Vec<_>>()
                    })
                    .map(|e| {
                        let f: Vec<&str> = e.split(',').collect();
                        format!("{} {}MiB {}c", short(f[0]), f.get(2).unwrap_or(&"?"), f.get(3).unwrap_or(&"?"))
                    })
                    .collect();
                let _ = writeln!(s, "  {id:<w$}  -> {n:<12} {}", devs.join(", "));
            }
            None => {
                let _ = writeln!(s, "  {id:<w$}  -- {}", p.error.as_deref().unwrap_or("not placed"));
                for (node, why) in &p.failed_nodes {
                    let _ = writeln!(s, "  {:w$}       {node}: {why}", "");
                }
            }
        }
        if let Some(d) = &p.defragmentation {
            let _ = writeln!(s, "  {:w$}       {d}", "");
        }
        if !p.moved.is_empty() {
            let _ = writeln!(s, "  {:w$}       moved to make room: {}", "", p.moved.join(", "));
            if !p.replaced.is_empty() {
                let _ = writeln!(s, "  {:w$}       replaced by: {}", "", p.replaced.join(", "));
            }
        }
        if let Some(plan) = &p.preempted {
            let victims: Vec<String> = plan.victims.iter().map(ToString::to_string).collect();
            let _ = writeln!(s, "  {:w$}       preempted on {}: {}", "", plan.node, victims.join(", "));
        }
    }
    let placed = sim.pods.iter().filter(|p| p.node.is_some()).count();
    let _ = writeln!(s, "  {placed} of {} pods placed\n", sim.pods.len());
    if !sim.groups.is_empty() {
        let _ = writeln!(s, "GROUPS (all or nothing)");
        for g in &sim.groups {
            let min = g.minimum.map_or_else(|| "?".to_owned(), |m| m.to_string());
            match g.state {
                "bound" => {
                    let _ = writeln!(
                        s,
                        "  {}  placed whole: {} of {} members bound (minimum {min})",
                        g.group, g.bound, g.members
                    );
                }
                _ => {
                    let why = g.waiting.as_deref().unwrap_or("not placed");
                    let _ = writeln!(s, "  {}  not placed ({} members, minimum {min}): {why}", g.group, g.members);
                }
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "DEVICES");
    let _ =
        writeln!(s, "  {:<14} {:<22} {:<28} {:>7}  {:<34} CORES", "NODE", "DEVICE", "TYPE", "SLOTS", "MEMORY (MiB)");
    for n in &sim.nodes {
        if let Some(u) = &n.unusable {
            let _ = writeln!(s, "  {:<14} unusable: {u}", n.name);
        }
        for d in &n.devices {
            let mem = format!("{} {:>6}/{:<6}", bar(d.mem_used, d.mem_total, 10), d.mem_used, d.mem_total);
            let cores = format!(
                "{} {}/{}",
                bar(u64::from(d.cores_used), u64::from(d.cores_total), 10),
                d.cores_used,
                d.cores_total
            );
            let ty: String = d.ty.chars().take(28).collect();
            let health = if d.healthy { "" } else { " (unhealthy)" };
            let _ = writeln!(
                s,
                "  {:<14} {:<22} {:<28} {:>3}/{:<3}  {:<34} {cores}{health}",
                n.name,
                format!("{} #{}", short(&d.uuid), d.index),
                ty,
                d.used,
                d.count,
                mem
            );
        }
    }
    s
}

#[cfg(test)]
mod tests;
/// Each vendor placed through the engine over an in-memory cluster.
#[cfg(test)]
mod vendors;
