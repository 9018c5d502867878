//! What `kubectl hami` shows, from the API server with the user's own credentials: the cluster
//! read once (nodes, pods, ResourceQuotas), accounted by the scheduler's own engine in memory, so
//! the figures are the ones hami-rs decides by; nothing is written to the cluster.

use std::fmt::Write;

use k8s_openapi::api::core::v1::{Event, Node, Pod, ResourceQuota};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::actor::Engine;
use crate::backend::memory::{ClusterObjects, MemoryBackend};
use crate::config::SchedulerFlags;
use crate::report::node_json;
use crate::sched::report::NodeReport;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {what} from the API server: {source}")]
    Api {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("the cluster's objects: {0}")]
    Load(#[from] crate::backend::memory::LoadError),
    #[error(transparent)]
    Engine(#[from] crate::app::Error),
    #[error("pod {0} not found")]
    NoPod(String),
    #[error("pod {pod} does not read: {source}")]
    Pod {
        pod: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Every object of `K` in the cluster, as JSON with its kind, as a cluster file holds it.
async fn list_all<K>(client: &kube::Client, kind: &str, what: &'static str) -> Result<Vec<Value>, Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    let items = Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Api { what, source })?
        .items;
    Ok(items.into_iter().map(|o| with_kind(serde_json::to_value(o).unwrap_or_default(), kind)).collect())
}

/// A list's items carry no kind; a cluster file's do.
fn with_kind(mut v: Value, kind: &str) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.insert("kind".into(), kind.into());
        m.insert("apiVersion".into(), "v1".into());
    }
    v
}

/// The cluster as it is now: nodes, pods and ResourceQuotas, one list call each.
pub async fn read_cluster(client: &kube::Client) -> Result<ClusterObjects, Error> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Api { what: "nodes", source })?
        .items;
    let mut items: Vec<Value> =
        nodes.into_iter().map(|n| with_kind(serde_json::to_value(n).unwrap_or_default(), "Node")).collect();
    items.extend(list_all::<Pod>(client, "Pod", "pods").await?);
    items.extend(list_all::<ResourceQuota>(client, "ResourceQuota", "resourcequotas").await?);
    let text = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    Ok(ClusterObjects::parse(&text)?)
}

/// The scheduler's engine over `cluster`, in memory.
pub async fn engine(flags: &SchedulerFlags, cluster: ClusterObjects) -> Result<Engine<MemoryBackend>, Error> {
    Ok(crate::app::memory_engine(flags, cluster).await?)
}

fn pct(used: u64, total: u64) -> String {
    (used.saturating_mul(100)).checked_div(total).map_or_else(|| "-".into(), |p| format!("{p}%"))
}

/// One line per node: its devices, memory, cores and slots taken, and the pods holding them.
pub fn top_nodes(engine: &Engine<MemoryBackend>, reports: &[NodeReport]) -> String {
    let mut rows = vec![[
        "NODE".to_owned(),
        "DEVICES".into(),
        "MEMORY (MiB)".into(),
        "CORES".into(),
        "SLOTS".into(),
        "PODS".into(),
    ]];
    for r in reports {
        let n = node_json(r, engine.vendors());
        if n.devices.is_empty() {
            continue;
        }
        let sum = |f: fn(&crate::report::DeviceJson) -> u64| n.devices.iter().map(f).sum::<u64>();
        let (mu, mt) = (sum(|d| d.mem_used), sum(|d| d.mem_total));
        let (cu, ct) = (sum(|d| d.cores_used.into()), sum(|d| d.cores_total.into()));
        let (su, st) = (sum(|d| d.used.into()), sum(|d| d.count.into()));
        let name = match &n.unusable {
            Some(_) => format!("{} (unusable)", n.name),
            None => n.name.clone(),
        };
        rows.push([
            name,
            n.devices.len().to_string(),
            format!("{mu}/{mt} {}", pct(mu, mt)),
            format!("{cu}/{ct}"),
            format!("{su}/{st}"),
            r.allocs.len().to_string(),
        ]);
    }
    table(&rows)
}

/// One line per device: what it holds and which pods hold it.
pub fn top_gpus(engine: &Engine<MemoryBackend>, reports: &[NodeReport]) -> String {
    let mut rows = vec![[
        "NODE".to_owned(),
        "INDEX".into(),
        "UUID".into(),
        "TYPE".into(),
        "MEMORY (MiB)".into(),
        "CORES".into(),
        "SLOTS".into(),
        "PODS".into(),
    ]];
    for r in reports {
        let on = crate::report::pods_on_devices(r);
        let n = node_json(r, engine.vendors());
        for d in &n.devices {
            rows.push([
                n.name.clone(),
                d.index.to_string(),
                d.uuid.clone(),
                d.ty.clone(),
                format!("{}/{} {}", d.mem_used, d.mem_total, pct(d.mem_used, d.mem_total)),
                format!("{}/{}", d.cores_used, d.cores_total),
                format!(
                    "{}/{}{}",
                    d.used,
                    d.count,
                    match (d.healthy, d.cordoned) {
                        (false, _) => " unhealthy",
                        (true, true) => " cordoned",
                        (true, false) => "",
                    }
                ),
                on.get(&d.uuid)
                    .map(|ps| {
                        ps.iter().map(|(p, m, c)| format!("{p} ({m} MiB, {c} cores)")).collect::<Vec<_>>().join(", ")
                    })
                    .unwrap_or_default(),
            ]);
        }
    }
    table(&rows)
}

/// Columns padded to their widest cell, as kubectl prints them.
fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut width = [0usize; N];
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == N {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}   ", w = width[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Why `namespace/name` is where it is, or pending: its Events, then the fit run afresh against
/// the cluster as read (the pod's own placement, if any, left out), naming each node's reason.
pub async fn why(client: &kube::Client, flags: &SchedulerFlags, namespace: &str, name: &str) -> Result<String, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = pods
        .get_opt(name)
        .await
        .map_err(|source| Error::Api { what: "the pod", source })?
        .ok_or_else(|| Error::NoPod(format!("{namespace}/{name}")))?;
    let mut out = String::new();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    let _ = writeln!(
        out,
        "Pod {namespace}/{name}: {phase}, {}",
        node.as_deref().map_or("not bound".into(), |n| format!("bound to {n}"))
    );

    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let mut events = events.list(&lp).await.map_err(|source| Error::Api { what: "events", source })?.items;
    events.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0).or(e.event_time.clone().map(|t| t.0)));
    let _ = writeln!(out, "\nEvents:");
    if events.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for e in events.iter().rev().take(12).rev() {
        let source = e
            .source
            .as_ref()
            .and_then(|s| s.component.clone())
            .filter(|c| !c.is_empty())
            .or_else(|| e.reporting_component.clone())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<8} {:<24} {:<16} {}",
            e.type_.as_deref().unwrap_or(""),
            e.reason.as_deref().unwrap_or(""),
            source,
            e.message.as_deref().unwrap_or("").replace('\n', " ")
        );
    }

    let mut cluster = read_cluster(client).await?;
    // The pod is fitted as if it were new: whatever it holds now is left out of the cluster.
    cluster.pods.retain(|p| !(p.metadata.namespace == namespace && p.metadata.name == name));
    let engine = engine(flags, cluster).await?;
    let mut view: crate::model::PodView = serde_json::to_value(&pod)
        .and_then(serde_json::from_value)
        .map_err(|source| Error::Pod { pod: format!("{namespace}/{name}"), source })?;
    view.spec.node_name = None;
    // What the scheduler wrote on it goes too, as on a pod being created.
    for k in engine.vendors().scheduler_keys() {
        view.metadata.annotations.remove(k.as_str());
    }
    let webhook = crate::admission::Config { quota: engine.quota().cloned(), ..Default::default() };
    let sim = crate::simulate::simulate_pods_with(&engine, &webhook, vec![view], true).await?;
    let _ = writeln!(out, "\nFit against the cluster as it is now (read-only, this pod's own devices left out):");
    if let Some(r) = sim.pods.first() {
        match (&r.node, &r.error, &r.preempted) {
            (Some(_), _, Some(plan)) => {
                let victims: Vec<String> = plan.victims.iter().map(ToString::to_string).collect();
                let _ = writeln!(
                    out,
                    "  no node fits; evicting these pods of lower priority on {} would let it fit there: {}",
                    plan.node,
                    victims.join(", ")
                );
            }
            (Some(n), _, None) => {
                let _ = writeln!(out, "  fits: hami-rs would choose {n}");
            }
            (None, e, _) => {
                let _ = writeln!(out, "  {}", e.as_deref().unwrap_or("no node fits"));
            }
        }
        for (node, reason) in &r.failed_nodes {
            let _ = writeln!(out, "  {node}: {reason}");
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_every_column_but_the_last_to_its_widest_cell() {
        let rows = [
            ["NODE".to_owned(), "MEMORY".into(), "PODS".into()],
            ["gpu-long-name".to_owned(), "1/2".into(), "a, b".into()],
        ];
        assert_eq!(table(&rows), "NODE            MEMORY   PODS\ngpu-long-name   1/2      a, b\n");
    }

    #[test]
    fn percentages_round_down_and_say_so_when_there_is_nothing() {
        assert_eq!(pct(3000, 32768), "9%");
        assert_eq!(pct(0, 0), "-");
        assert_eq!(pct(16384, 16384), "100%");
    }
}
