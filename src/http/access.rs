//! Who may call which door of the main listener. The extender verbs (`/filter`, `/bind`,
//! `/prioritize`, `/preempt`) bind pods, reserve devices and start evictions with this
//! scheduler's rights, so they answer only kube-scheduler: a caller on this pod's loopback (the
//! chart runs kube-scheduler in the same pod) or one presenting a TLS client certificate that the
//! CA of `--client-ca-file` signed (a kube-scheduler elsewhere). The console and `/usage` list
//! every tenant's pods and are kept to the same callers unless `--console-access=any` opens them.
//! Everyone else gets 403 with a JSON error, a log line and a count in
//! `hami_scheduler_requests_refused_total`. The webhook, `/refit` (which checks its caller's
//! token itself) and the health endpoints answer any caller.
//!
//! ```text
//!  TLS handshake ─▶ on_connect: client chain verified against the CA? ─▶ Certified in the connection
//!  request ─▶ trusted_only: loopback peer or Certified ─▶ handler   (else 403)
//! ```

use std::any::Any;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Extensions, ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, web};

use crate::config::ConsoleAccess;

use super::tls::ClientCa;

/// What the doors check, from the flags. Shared by every request; read-only.
#[derive(Clone, Debug, Default)]
pub struct Access {
    pub console: ConsoleAccess,
    /// The device plugin's ServiceAccount, `(namespace, name)`: the only caller `/refit` answers.
    /// `None` refuses every caller.
    pub device_plugin: Option<(String, String)>,
}

impl Access {
    pub fn from_flags(args: &crate::config::ServeArgs) -> Access {
        let (ns, sa) = (&args.device_plugin_namespace, &args.device_plugin_service_account);
        Access {
            console: args.console_access,
            device_plugin: (!ns.is_empty() && !sa.is_empty()).then(|| (ns.clone(), sa.clone())),
        }
    }
}

/// The application state the middleware reads the doors' rules from (the server's `AppState`).
pub trait Doors: 'static {
    fn access(&self) -> &Access;
}

/// Set on a connection whose TLS client certificate chains to `--client-ca-file`'s CA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Certified;

/// How a caller reached the listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// From this pod's (or host's) loopback.
    Loopback,
    /// With a client certificate the client CA signed.
    Certified,
    /// From anywhere else, or from an address the server could not read.
    Other,
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        // `::1`, and an IPv4 loopback reaching a dual-stack socket as `::ffff:127.x.y.z`.
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// Who the caller is, by its peer address and whether its connection was certified. A request
/// whose peer the server does not know (not a TCP connection) is nobody's.
pub fn classify(peer: Option<SocketAddr>, certified: bool) -> Caller {
    if certified {
        Caller::Certified
    } else if peer.is_some_and(|p| is_loopback(p.ip())) {
        Caller::Loopback
    } else {
        Caller::Other
    }
}

/// The server's `on_connect` hook: marks a TLS connection [`Certified`] when it presented a
/// client chain the CA verifies. The handshake itself accepts any chain whose key the client
/// proved it holds (see [`ClientCa`]), so a webhook call from an API server that presents a
/// certificate of its own still reaches the webhook.
pub fn on_connect(ca: Option<Arc<ClientCa>>) -> impl Fn(&dyn Any, &mut Extensions) + Send + Sync + 'static {
    move |conn, ext| {
        let Some(ca) = ca.as_deref() else { return };
        type Tls = actix_tls::accept::rustls_0_23::TlsStream<actix_web::rt::net::TcpStream>;
        let Some(tls) = conn.downcast_ref::<Tls>() else { return };
        let (_, session) = tls.get_ref();
        if let Some(chain) = session.peer_certificates()
            && ca.verifies(chain)
        {
            ext.insert(Certified);
        }
    }
}

/// The doors a refusal is counted under.
fn door(path: &str) -> &'static str {
    match path {
        "/filter" => "filter",
        "/bind" => "bind",
        "/prioritize" => "prioritize",
        "/preempt" => "preempt",
        "/usage" => "usage",
        _ => "console",
    }
}

/// A 403 with a JSON error, logged and counted.
pub fn refuse(door: &'static str, why: &'static str, peer: Option<SocketAddr>, message: &str) -> HttpResponse {
    crate::metrics::request_refused(door, why);
    let peer = peer.map(|p| p.to_string()).unwrap_or_else(|| "unknown".into());
    tracing::warn!(door, why, peer = %peer, "{message}");
    HttpResponse::Forbidden().json(serde_json::json!({ "error": message }))
}

/// Middleware for the extender verbs: kube-scheduler only.
pub async fn scheduler_only(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    gate(req, next, false).await
}

/// Middleware for the console and `/usage`: kube-scheduler's callers, or anyone with
/// `--console-access=any`.
pub async fn console<S: Doors>(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let open = req.app_data::<web::Data<S>>().is_some_and(|st| st.access().console == ConsoleAccess::Any);
    gate(req, next, open).await
}

async fn gate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
    open: bool,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let peer = req.peer_addr();
    let certified = req.conn_data::<Certified>().is_some();
    if open || classify(peer, certified) != Caller::Other {
        return next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    }
    let door = door(req.path());
    let message = format!(
        "{} answers only kube-scheduler: a caller on this pod's loopback, or one with a client certificate signed by --client-ca-file's CA",
        req.path()
    );
    let res = refuse(door, "untrusted_caller", peer, &message);
    Ok(req.into_response(res))
}

#[cfg(test)]
mod tests;
