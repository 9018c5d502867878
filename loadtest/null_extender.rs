//! The null extender: hami-rs's HTTP stack (actix-web, the same server settings and body reader
//! as `src/http/extender.rs`), reading the whole request (the pod as hami-rs reads it and every
//! candidate name) and answering the first candidate without scheduling. Measuring it beside
//! hami-rs gives the cost of scheduling itself. (hami-rs does not read the names again of a
//! list it has seen in the same text: that saving counts as part of its cost, not the null's.)

use std::net::SocketAddr;

use actix_web::{App, HttpResponse, HttpServer, web};
use hami_rs::http::error::{Error, read_json_body};
use hami_rs::http::wire::{ExtenderBindingResult, ExtenderFilterResult, NameRef};
use hami_rs::model::PodView;

#[derive(Clone, Debug, clap::Args)]
pub struct NullArgs {
    /// Address to listen on (plain HTTP).
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    /// HTTP worker threads (default: actix-web's, one per available CPU, as hami-rs uses).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Largest request body accepted (hami-rs's default).
    #[arg(long, default_value = "4194304")]
    pub max_body_bytes: usize,
}

struct State {
    max_body: usize,
}

fn json<T: serde::Serialize>(v: &T) -> HttpResponse {
    match serde_json::to_vec(v) {
        Ok(b) => HttpResponse::Ok().content_type("application/json").body(b),
        Err(e) => HttpResponse::InternalServerError().body(e.to_string()),
    }
}

/// kube-scheduler's filter request read whole: the pod and every candidate name.
#[derive(serde::Deserialize)]
struct Request<'a> {
    #[serde(rename = "Pod")]
    pod: Option<PodView>,
    #[serde(rename = "NodeNames", borrow)]
    node_names: Option<Vec<NameRef<'a>>>,
}

/// Reads the whole body, then answers the first name.
async fn filter(st: web::Data<State>, payload: web::Payload) -> Result<HttpResponse, Error> {
    let body = read_json_body(payload, st.max_body).await?;
    let args: Request<'_> = serde_json::from_slice(&body)?;
    if args.pod.is_none() {
        return Ok(json(&ExtenderFilterResult::error("extender args missing pod")));
    }
    let first = args.node_names.and_then(|n| n.into_iter().next()).map(|n| n.0);
    let res = match first {
        Some(node) => ExtenderFilterResult {
            nodes: None,
            node_names: Some(vec![node]),
            failed_nodes: None,
            failed_and_unresolvable_nodes: None,
            error: String::new(),
        },
        None => ExtenderFilterResult::error("extender args have no NodeNames"),
    };
    Ok(json(&res))
}

async fn bind(st: web::Data<State>, payload: web::Payload) -> Result<HttpResponse, Error> {
    hami_rs::http::extender::decode_bind(payload, st.max_body).await?;
    Ok(json(&ExtenderBindingResult { error: String::new() }))
}

async fn ok() -> HttpResponse {
    HttpResponse::Ok().body("ok")
}

/// Serves until SIGTERM or SIGINT. Must run on an actix System, as `hami-rs serve` does.
pub async fn serve(a: NullArgs) -> std::io::Result<()> {
    let state = web::Data::new(State { max_body: a.max_body_bytes });
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .route("/filter", web::post().to(filter))
            .route("/bind", web::post().to(bind))
            .route("/healthz", web::get().to(ok))
            .route("/readyz", web::get().to(ok))
    })
    // The same settings as hami-rs's main listener (src/app.rs run_http).
    .client_request_timeout(std::time::Duration::from_secs(15))
    .client_disconnect_timeout(std::time::Duration::from_secs(5))
    .shutdown_timeout(1);
    if let Some(w) = a.workers {
        server = server.workers(w.max(1));
    }
    let server = server.bind(a.listen)?.run();
    tracing::info!(addr = %a.listen, "null extender listening (plain HTTP)");
    server.await
}

/// Runs [`serve`] on its own actix System over a multi-threaded tokio runtime, like hami-rs's main.
pub fn run_blocking(a: NullArgs) -> anyhow::Result<()> {
    let rt = actix_rt::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("the tokio runtime starts")
    });
    rt.block_on(serve(a))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test;

    #[actix_web::test]
    async fn filter_answers_the_first_candidate_and_bind_succeeds() {
        let state = web::Data::new(State { max_body: 1 << 20 });
        let app = test::init_service(
            App::new().app_data(state).route("/filter", web::post().to(filter)).route("/bind", web::post().to(bind)),
        )
        .await;
        let body = r#"{"Pod":{"metadata":{"name":"p","namespace":"ns"}},"Nodes":null,"NodeNames":["b","a"]}"#;
        let req = test::TestRequest::post().uri("/filter").set_payload(body).to_request();
        let res: serde_json::Value = test::call_and_read_body_json(&app, req).await;
        assert_eq!(
            res,
            serde_json::json!({"Nodes": null, "NodeNames": ["b"], "FailedNodes": null, "FailedAndUnresolvableNodes": null, "Error": ""})
        );
        let req = test::TestRequest::post().uri("/filter").set_payload("{not json").to_request();
        assert_eq!(test::call_service(&app, req).await.status(), 400);
        let req = test::TestRequest::post()
            .uri("/bind")
            .set_payload(r#"{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"b"}"#)
            .to_request();
        let res: serde_json::Value = test::call_and_read_body_json(&app, req).await;
        assert_eq!(res, serde_json::json!({"Error": ""}));
    }
}
