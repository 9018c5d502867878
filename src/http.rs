//! The HTTP surface (actix-web): `/filter`, `/bind`, `/prioritize`, `/preempt`, `/refit`,
//! `/webhook`, `/healthz`, `/readyz`, `/usage`, the console, who may call each (`access`), and the
//! listener's TLS. Only this module and `app.rs` import actix-web. Handlers decode once and hand
//! the engine plain types.

use actix_web::middleware::{Compress, from_fn};
use actix_web::{HttpResponse, web};

use crate::backend::Backend;

pub mod access;
pub mod error;
pub mod extender;
pub mod refit;
mod state;
pub mod status;
pub mod tls;
pub mod webhook;
pub mod wire;

pub use state::{AppState, Inflight, InflightGuard, Readiness};

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
                .wrap(from_fn(access::console::<AppState<B>>))
                .route(web::get().to(usage::<B>))
                .route(web::head().to(usage::<B>)),
        )
        .service(
            web::resource("/")
                .wrap(Compress::default())
                .wrap(from_fn(access::console::<AppState<B>>))
                .route(web::get().to(status::page::<B>))
                .route(web::head().to(status::page::<B>)),
        );
}

#[cfg(test)]
mod tests;
