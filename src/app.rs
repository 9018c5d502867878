//! Wiring: vendors, backend, engine, the HTTP listeners, metrics and graceful shutdown. `serve`
//! with `--cluster-file` runs over the in-memory backend; without it, over the Kubernetes API.

use std::sync::Arc;

use actix_web::{App, HttpServer, web};

use crate::actor::{Engine, EngineConfig};
use crate::backend::Backend;
use crate::backend::memory::{ClusterObjects, MemoryBackend};
use crate::config::{ServeArgs, parse_listen};
use crate::http::{self, AppState, Readiness};
use crate::vendor::{Enable, Vendors};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] crate::config::Invalid),
    #[error("device config: {0}")]
    DeviceConfig(String),
    #[error("cluster file: {0}")]
    Cluster(#[from] crate::backend::memory::LoadError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

pub fn vendors_from(flags: &crate::config::SchedulerFlags) -> Result<Arc<Vendors>, Error> {
    let cfg = flags.device_config().map_err(Error::DeviceConfig)?;
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
    for n in objects.nodes {
        backend.insert_node(n.clone());
        engine.register_node(Arc::new(n)).await;
    }
    for p in objects.pods {
        backend.insert_pod(p.clone());
        engine.observe_pod(&p);
    }
    let _ = engine.reports().await;
}

/// Builds an engine over a cluster file.
pub async fn memory_engine(
    args_sched: &crate::config::SchedulerFlags,
    cluster: ClusterObjects,
) -> Result<Engine<MemoryBackend>, Error> {
    let vendors = vendors_from(args_sched)?;
    let backend = MemoryBackend::new(args_sched.node_lock_timeout);
    let engine = Engine::start(EngineConfig::from_flags(args_sched), vendors, backend, None);
    load_cluster(&engine, cluster).await;
    Ok(engine)
}

async fn render_metrics(h: web::Data<crate::metrics::Handle>) -> actix_web::HttpResponse {
    actix_web::HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(h.render())
}

/// `hami-rs serve`.
pub async fn serve(args: ServeArgs) -> Result<(), Error> {
    args.validate()?;
    let metrics = crate::metrics::install();
    let Some(path) = &args.cluster_file else {
        return Err(Error::Other(
            "serve without --cluster-file needs the Kubernetes backend, which this build does not include yet".into(),
        ));
    };
    let cluster = ClusterObjects::load(path)?;
    let engine = memory_engine(&args.sched, cluster).await?;
    tracing::info!(nodes = engine.node_names().len(), file = %path.display(), "serving an in-memory cluster");
    run_http(&args, engine, Readiness::ready(), metrics).await
}

/// Serves the main listener and the metrics listener until SIGTERM/SIGINT, then drains binds.
pub async fn run_http<B: Backend>(
    args: &ServeArgs,
    engine: Engine<B>,
    readiness: Readiness,
    metrics: Option<crate::metrics::Handle>,
) -> Result<(), Error> {
    let state = web::Data::new(AppState::new(engine, args.max_body_bytes, readiness));
    let st = state.clone();
    let main = HttpServer::new(move || App::new().app_data(st.clone()).configure(http::routes::<B>))
        .client_request_timeout(std::time::Duration::from_secs(15))
        .shutdown_timeout(args.shutdown_grace.as_secs().max(1))
        .bind(args.http_bind)
        .map_err(|source| Error::Listen { addr: args.http_bind.to_string(), source })?
        .run();
    tracing::info!(addr = %args.http_bind, "extender listening (plain HTTP)");
    let metrics_server = match metrics {
        Some(h) => {
            let addr = parse_listen(&args.metrics_bind_address).map_err(Error::Other)?;
            let h = web::Data::new(h);
            let srv = HttpServer::new(move || {
                App::new().app_data(h.clone()).route("/metrics", web::get().to(render_metrics))
            })
            .workers(1)
            .bind(addr)
            .map_err(|source| Error::Listen { addr: addr.to_string(), source })?
            .run();
            tracing::info!(%addr, "metrics listening");
            Some(srv)
        }
        None => None,
    };
    let mh = metrics_server.as_ref().map(|s| s.handle());
    let r = main.await.map_err(|e| Error::Other(e.to_string()));
    if let Some(h) = mh {
        h.stop(true).await;
    }
    // actix-web's graceful stop already waited for in-flight requests; binds included.
    tracing::info!(inflight_binds = state.inflight.count(), "stopped");
    r
}
