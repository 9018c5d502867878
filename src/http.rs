//! The HTTP surface (actix-web): `/filter`, `/bind`, `/prioritize`, `/preempt`, `/refit`,
//! `/webhook`, `/healthz`, `/readyz`, `/usage`, the console, who may call each (`access`), and the
//! listener's TLS. Only this module and `app.rs` import actix-web. Handlers decode once and hand
//! the engine plain types.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::middleware::{Compress, from_fn};
use actix_web::{HttpResponse, web};

use crate::actor::Engine;
use crate::backend::Backend;

pub mod access;
pub mod error;
pub mod extender;
pub mod refit;
pub mod status;
pub mod tls;
pub mod webhook;
pub mod wire;

/// Counts requests that must finish before shutdown (binds in flight).
#[derive(Clone, Default)]
pub struct Inflight(Arc<AtomicUsize>);

pub struct InflightGuard(Arc<AtomicUsize>);

impl Inflight {
    pub fn enter(&self) -> InflightGuard {
        self.0.fetch_add(1, Ordering::SeqCst);
        InflightGuard(self.0.clone())
    }
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

pub use crate::backend::Readiness;

pub struct AppState<B: Backend> {
    pub engine: Engine<B>,
    pub max_body: usize,
    pub readiness: Readiness,
    pub inflight: Inflight,
    /// The admission webhook's flags and quota book.
    pub webhook: Arc<crate::admission::Config>,
    /// Who may call which door.
    pub access: access::Access,
}

impl<B: Backend> AppState<B> {
    /// The webhook starts with the flags' defaults and no quota; see [`AppState::with_webhook`].
    pub fn new(engine: Engine<B>, max_body: usize, readiness: Readiness) -> AppState<B> {
        AppState {
            engine,
            max_body,
            readiness,
            inflight: Inflight::default(),
            webhook: Arc::new(crate::admission::Config::default()),
            access: access::Access::default(),
        }
    }
    pub fn with_access(mut self, access: access::Access) -> AppState<B> {
        self.access = access;
        self
    }
    pub fn with_webhook(mut self, cfg: crate::admission::Config) -> AppState<B> {
        self.webhook = Arc::new(cfg);
        self
    }
    pub fn is_leader(&self) -> bool {
        self.readiness.is_ready()
    }
    /// HAMi's followers hang until the caller's timeout; hami-rs answers at once.
    pub fn not_leader_message(&self) -> String {
        if self.readiness.leader.load(Ordering::SeqCst) {
            "scheduler caches are not synced yet; retry shortly".into()
        } else {
            "this hami-rs replica is not the leader; kube-scheduler should call its own local extender".into()
        }
    }
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().finish()
}

async fn readyz<B: Backend>(st: web::Data<AppState<B>>) -> HttpResponse {
    if st.readiness.is_ready() {
        HttpResponse::Ok().body("ok")
    } else {
        HttpResponse::ServiceUnavailable().body(st.not_leader_message())
    }
}

#[derive(serde::Deserialize)]
struct UsageQuery {
    node: Option<String>,
}

/// Every node's devices and pods, or one node's with `?node=`.
async fn usage<B: Backend>(st: web::Data<AppState<B>>, q: web::Query<UsageQuery>) -> HttpResponse {
    let mut reports = st.engine.reports().await;
    if let Some(node) = q.node.as_deref() {
        reports.retain(|r| r.name.as_str() == node);
        if reports.is_empty() {
            return HttpResponse::NotFound().json(serde_json::json!({ "error": format!("no node {node}") }));
        }
    }
    let u = crate::report::usage(&reports, st.engine.vendors(), st.engine.backend());
    HttpResponse::Ok().json(u)
}

/// Routes of the main listener. The extender verbs answer only kube-scheduler, the console and
/// `/usage` only its callers unless opened (see `access`); the webhook, `/refit` (which checks its
/// caller's token) and the health endpoints answer anyone.
pub fn routes<B: Backend>(cfg: &mut web::ServiceConfig) {
    let scheduler_only = |path: &str| web::resource(path.to_owned()).wrap(from_fn(access::scheduler_only));
    cfg.service(scheduler_only("/filter").route(web::post().to(extender::filter::<B>)))
        .service(scheduler_only("/prioritize").route(web::post().to(extender::prioritize::<B>)))
        .service(scheduler_only("/preempt").route(web::post().to(extender::preempt::<B>)))
        .service(scheduler_only("/bind").route(web::post().to(extender::bind::<B>)))
        .route("/refit", web::post().to(refit::refit::<B>))
        .route("/webhook", web::post().to(webhook::webhook::<B>))
        // HEAD as GET (the server sends no body for it), for probes and link checkers.
        .route("/healthz", web::get().to(healthz))
        .route("/healthz", web::head().to(healthz))
        .route("/readyz", web::get().to(readyz::<B>))
        .route("/readyz", web::head().to(readyz::<B>))
        // The two large answers are compressed when the client asks; the extender's are not
        // (kube-scheduler's Go client asks for gzip on every call, and they are small). The gate
        // is the outer layer, so a refusal is never compressed work.
        .service(
            web::resource("/usage")
                .wrap(Compress::default())
                .wrap(from_fn(access::console::<B>))
                .route(web::get().to(usage::<B>))
                .route(web::head().to(usage::<B>)),
        )
        .service(
            web::resource("/")
                .wrap(Compress::default())
                .wrap(from_fn(access::console::<B>))
                .route(web::get().to(status::page::<B>))
                .route(web::head().to(status::page::<B>)),
        );
}

#[cfg(test)]
mod tests;
