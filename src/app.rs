//! Wiring: vendors, backend, engine, the HTTP listeners, metrics and graceful shutdown. `serve`
//! with `--cluster-file` runs over the in-memory backend; without it, over the Kubernetes API.

use std::sync::Arc;

use actix_web::{App, HttpServer, web};

use crate::actor::{DecisionWrite, Engine, EngineConfig, FilterResult};
use crate::backend::Backend;
use crate::backend::kube::watch::{self, LeaderOptions, WatchOptions};
use crate::backend::kube::{KubeBackend, KubeOptions};
use crate::backend::memory::{ClusterObjects, MemoryBackend, PackedCluster, QuotaObject};
use crate::config::{SchedulerFlags, ServeArgs, parse_listen};
use crate::devices::{Enable, Vendors};
use crate::http::{self, AppState, Readiness};
use crate::model::pod::NodeView;
use crate::sched::quota_book::QuotaBook;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] crate::config::Invalid),
    #[error("device config: {0}")]
    DeviceConfig(#[from] crate::config::DeviceConfigError),
    #[error("cluster file: {0}")]
    Cluster(#[from] crate::backend::memory::LoadError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Kube(#[from] crate::backend::kube::ConnectError),
    #[error("TLS: {0}")]
    Tls(#[from] http::tls::Error),
    #[error("--metrics-bind-address: {0}")]
    MetricsAddress(String),
    #[error("HTTP server: {0}")]
    Serve(std::io::Error),
}

/// The engine's config from the scheduler flags. Built here, not in the engine, so the engine never
/// depends on the command line's types.
pub fn engine_config(f: &SchedulerFlags) -> EngineConfig {
    EngineConfig {
        defaults: f.policy_defaults(),
        reservation_ttl: f.reservation_ttl,
        node_lock_timeout: f.node_lock_timeout,
        node_lock_retry_timeout: f.node_lock_retry_timeout,
        bind_lock_wait: f.bind_lock_wait,
        filter_mode: f.filter_mode,
        // Every fitting node is answered, so the node, and the devices with it, is known only
        // at bind.
        decision_write: if f.filter_result == FilterResult::All { DecisionWrite::Bind } else { f.decision_write },
        filter_result: f.filter_result,
        filter_deadline: f.filter_deadline,
        arbiters: f.arbiters(),
        slice_min: crate::actor::SLICE_MIN,
        preemption_hold: (f.preemption == crate::config::Preemption::On).then_some(f.preemption_hold),
        gang_claim_ttl: f.gang_claim_ttl,
        defragment: f.defragment,
        defrag: crate::actor::DefragLimits {
            per_plan: f.defrag_max_moves,
            per_node: f.defrag_max_per_node,
            per_controller: f.defrag_max_per_controller,
            per_minute: f.defrag_max_per_minute,
            cooldown: f.defrag_cooldown,
            claim_ttl: f.defrag_claim_ttl,
            own_namespace: std::env::var("POD_NAMESPACE").ok().filter(|n| !n.is_empty()),
        },
    }
}

pub fn vendors_from(flags: &SchedulerFlags) -> Result<Arc<Vendors>, Error> {
    let cfg = flags.device_config()?;
    let v = Vendors::from_config(&cfg, Enable { ascend: flags.enable_ascend, iluvatar: flags.enable_iluvatar });
    for (_, vendor) in v.iter() {
        if vendor.resource_names().is_empty() {
            tracing::warn!(vendor = vendor.name(), "no resource names configured: this vendor matches no pod");
        }
    }
    Ok(Arc::new(v))
}

/// Loads a cluster file into the in-memory backend and the engine, then waits until every node
/// actor has processed what it was sent, so the first filter sees the whole file.
pub async fn load_cluster(engine: &Engine<MemoryBackend>, objects: ClusterObjects) {
    let backend = engine.backend().clone();
    register_nodes(engine, objects.nodes).await;
    for g in &objects.groups {
        engine.observe_pod_group(g);
    }
    for b in objects.budgets {
        backend.add_budget(b);
    }
    // One copy of each pod, shared by the backend and the observation.
    for (i, p) in objects.pods.into_iter().enumerate() {
        let p = backend.insert_pod(p);
        engine.observe_pod(&p);
        settle_now_and_then(engine, i).await;
    }
    engine.settle().await;
}

/// Loads a cluster whose pods were packed as they were read: each is unpacked only to be
/// observed, one at a time.
pub async fn load_packed_cluster(engine: &Engine<MemoryBackend>, objects: PackedCluster) {
    let backend = engine.backend().clone();
    let served = engine.vendors().resource_names();
    let book = backend.dra();
    for c in &objects.device_classes {
        let change = book.apply(c, &served);
        crate::backend::tell_dra_change(&backend, book, &served, &change, &c.metadata.uid);
    }
    register_nodes(engine, objects.nodes).await;
    for g in &objects.groups {
        engine.observe_pod_group(g);
    }
    for b in objects.budgets {
        backend.add_budget(b);
    }
    for (i, p) in objects.pods.into_iter().enumerate() {
        if let Some(view) = p.unpack() {
            engine.observe_pod(&view);
        }
        backend.insert_packed(p);
        settle_now_and_then(engine, i).await;
    }
    engine.settle().await;
}

/// Observations sent to node actors between two waits for them while loading.
const LOAD_BATCH: usize = 4096;

/// Waits for the node actors after every `LOAD_BATCH` observations: sent all at once, a large
/// cluster's observations would all sit in mailboxes together, and the memory they took would
/// stay with the process after they were applied.
async fn settle_now_and_then(engine: &Engine<MemoryBackend>, i: usize) {
    if i % LOAD_BATCH == LOAD_BATCH - 1 {
        engine.settle().await;
    }
}

async fn register_nodes(engine: &Engine<MemoryBackend>, nodes: Vec<NodeView>) {
    for n in nodes {
        // One copy, shared by the backend and the node's registration.
        let n = Arc::new(n);
        engine.backend().insert_node_shared(n.clone());
        engine.register_node(n).await;
    }
}

/// Builds an engine over a cluster file, with the file's ResourceQuotas enforced.
pub async fn memory_engine(
    args_sched: &crate::config::SchedulerFlags,
    cluster: ClusterObjects,
) -> Result<Engine<MemoryBackend>, Error> {
    let engine = start_memory_engine(args_sched, &cluster.quotas)?;
    load_cluster(&engine, cluster).await;
    Ok(engine)
}

/// An engine over an empty in-memory cluster that enforces `quotas`.
fn start_memory_engine(
    args_sched: &crate::config::SchedulerFlags,
    quotas: &[QuotaObject],
) -> Result<Engine<MemoryBackend>, Error> {
    let vendors = vendors_from(args_sched)?;
    let backend = MemoryBackend::new(args_sched.node_lock_timeout);
    let quota = Arc::new(QuotaBook::new(&vendors));
    for q in quotas {
        quota.set_quota(&q.namespace, &q.name, &q.hard);
    }
    Ok(Engine::start(engine_config(args_sched), vendors, backend, Some(quota)))
}

/// This host's name, the default leader identity (kube-scheduler's holder is `<hostname>_<uuid>`).
fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_owned()))
        .unwrap_or_default()
}

/// `serve` against the Kubernetes API: watchers, the registration loop, leader following.
async fn serve_kube(args: &ServeArgs, metrics: Option<crate::metrics::Handle>) -> Result<(), Error> {
    let vendors = vendors_from(&args.sched)?;
    let component = if args.sched.scheduler_name.is_empty() {
        "hami-scheduler".to_owned()
    } else {
        args.sched.scheduler_name.clone()
    };
    let opts = KubeOptions {
        qps: args.kube_qps,
        burst: args.kube_burst,
        timeout: (args.kube_timeout > 0).then(|| std::time::Duration::from_secs(args.kube_timeout)),
        component,
        lock_timeout: args.sched.node_lock_timeout,
    };
    let backend = KubeBackend::connect(opts).await?;
    let quota = Arc::new(QuotaBook::new(&vendors));
    let engine = Engine::start(engine_config(&args.sched), vendors, backend.clone(), Some(quota.clone()));
    let readiness = Readiness {
        leader: Arc::new(std::sync::atomic::AtomicBool::new(!args.leader_elect)),
        synced: Arc::new(std::sync::atomic::AtomicBool::new(false)),
    };
    let leader = args.leader_elect.then(|| LeaderOptions {
        lease_name: args.leader_elect_resource_name.clone(),
        lease_namespace: args.leader_elect_resource_namespace.clone(),
        identity: args.leader_identity.clone().unwrap_or_else(hostname),
    });
    let own_pod = match (std::env::var("POD_NAMESPACE"), std::env::var("POD_NAME")) {
        (Ok(ns), Ok(name)) if !ns.is_empty() && !name.is_empty() => Some((ns, name)),
        _ => None,
    };
    let opts = WatchOptions {
        node_selector: args.node_label_selector.clone(),
        leader,
        own_pod,
        served_resources: engine.vendors().resource_names(),
    };
    watch::start(engine.clone(), backend, readiness.clone(), quota, opts);
    tracing::info!("serving the Kubernetes API's cluster");
    run_http(args, engine, readiness, metrics).await
}

/// Renders HAMi's cluster gauges (leader only) for the metrics listener.
type ClusterGauges = Arc<dyn Fn() -> futures::future::BoxFuture<'static, String> + Send + Sync>;

struct MetricsState {
    handle: crate::metrics::Handle,
    cluster: ClusterGauges,
    readiness: Readiness,
}

async fn render_metrics(st: web::Data<MetricsState>) -> actix_web::HttpResponse {
    // The cluster gauges first: they also set `reservations_outstanding`, which the recorder's
    // render then shows as of this scrape rather than the one before.
    let cluster = (st.cluster)().await;
    let mut body = st.handle.render();
    let (leader, synced) = (&st.readiness.leader, &st.readiness.synced);
    let ordering = std::sync::atomic::Ordering::SeqCst;
    body.push_str(&crate::metrics::cluster::render_state(leader.load(ordering), synced.load(ordering)));
    body.push_str(&cluster);
    actix_web::HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(body)
}

/// `hami-rs serve`.
pub async fn serve(args: ServeArgs) -> Result<(), Error> {
    args.validate()?;
    let metrics = crate::metrics::install();
    let Some(path) = &args.cluster_file else {
        return serve_kube(&args, metrics).await;
    };
    let cluster = PackedCluster::load(path)?;
    let engine = start_memory_engine(&args.sched, &cluster.quotas)?;
    load_packed_cluster(&engine, cluster).await;
    tracing::info!(nodes = engine.node_names().len(), file = %path.display(), "serving an in-memory cluster");
    run_http(&args, engine, Readiness::ready(), metrics).await
}

/// Serves the main listener (TLS when a certificate is given, reloaded when the files change) and
/// the metrics listener until SIGTERM/SIGINT; stopping waits for in-flight requests, binds included.
pub async fn run_http<B: Backend>(
    args: &ServeArgs,
    engine: Engine<B>,
    readiness: Readiness,
    metrics: Option<crate::metrics::Handle>,
) -> Result<(), Error> {
    // Leader election (when on) moves the gauge from here; without it this replica leads for good.
    crate::metrics::leader(readiness.leader.load(std::sync::atomic::Ordering::SeqCst));
    let webhook = crate::admission::Config::from_flags(&args.sched, engine.quota().cloned());
    let access = http::access::Access::from_flags(args);
    if access.device_plugin.is_none() {
        tracing::warn!(
            "no --device-plugin-namespace/--device-plugin-service-account: /refit refuses every caller, so NUMA refits fail"
        );
    }
    let state =
        web::Data::new(AppState::new(engine, args.max_body_bytes, readiness).with_webhook(webhook).with_access(access));
    let client_ca = args.client_ca_file.as_deref().map(http::tls::ClientCa::load).transpose()?;
    let st = state.clone();
    let server = HttpServer::new(move || App::new().app_data(st.clone()).configure(http::routes::<B>))
        .on_connect(http::access::on_connect(client_ca.clone()))
        // Idle connections stay open longer than Go clients keep them (net/http: 90 s), so the
        // API server and kube-scheduler close them first: when the server closes one, a request
        // the client is sending on it that moment fails ("broken pipe"), and Go does not retry a
        // POST.
        .keep_alive(std::time::Duration::from_secs(120))
        .client_request_timeout(std::time::Duration::from_secs(15))
        .client_disconnect_timeout(std::time::Duration::from_secs(5))
        .shutdown_timeout(args.shutdown_grace.as_secs().max(1));
    let listen = |source| Error::Listen { addr: args.http_bind.to_string(), source };
    let main = match (&args.cert_file, &args.key_file) {
        (Some(cert), Some(key)) => {
            let (cfg, handle) = http::tls::load(cert, key, client_ca.as_ref())?;
            http::tls::watch(handle, cert.clone(), key.clone(), std::time::Duration::from_secs(5));
            let bound = server.bind_rustls_0_23(args.http_bind, (*cfg).clone()).map_err(listen)?;
            tracing::info!(addr = %args.http_bind, "extender and webhook listening (TLS)");
            bound.run()
        }
        _ => {
            let bound = server.bind(args.http_bind).map_err(listen)?;
            tracing::info!(addr = %args.http_bind, "extender and webhook listening (plain HTTP)");
            bound.run()
        }
    };
    let metrics_handle = match metrics {
        Some(handle) => {
            let addr = parse_listen(&args.metrics_bind_address).map_err(Error::MetricsAddress)?;
            let (engine, ready) = (state.engine.clone(), state.readiness.clone());
            let series = crate::metrics::cluster::Series { legacy: args.legacy_metrics, pods: args.pod_device_metrics };
            // Only the leader exports cluster gauges; followers would duplicate them.
            let cluster: ClusterGauges = Arc::new(move || {
                let (engine, ready) = (engine.clone(), ready.clone());
                Box::pin(async move {
                    let c = engine.pending_counts();
                    let mut out = crate::metrics::cluster::render_pending(c.by_outcome, c.by_reason);
                    if !ready.leader.load(std::sync::atomic::Ordering::SeqCst) {
                        return out;
                    }
                    let reports = engine.reports().await;
                    out.push_str(&crate::metrics::cluster::render_cluster(
                        &reports,
                        engine.vendors(),
                        engine.quota().map(|q| &**q),
                        series,
                    ));
                    out
                })
            });
            let h = web::Data::new(MetricsState { handle, cluster, readiness: state.readiness.clone() });
            let srv = HttpServer::new(move || {
                App::new()
                    .app_data(h.clone())
                    .wrap(actix_web::middleware::Compress::default())
                    .route("/metrics", web::get().to(render_metrics))
            })
            .workers(1)
            .disable_signals()
            .bind(addr)
            .map_err(|source| Error::Listen { addr: addr.to_string(), source })?
            .run();
            tracing::info!(%addr, "metrics listening");
            let handle = srv.handle();
            actix_rt::spawn(srv);
            Some(handle)
        }
        None => None,
    };
    let r = main.await.map_err(Error::Serve);
    if let Some(h) = metrics_handle {
        h.stop(true).await;
    }
    tracing::info!(inflight = state.inflight.count(), "stopped");
    r
}

#[cfg(test)]
mod tests;
