//! `/refit` on the wire: HAMi's field names, Go's decoding leniency and Go's marshalling.

use super::*;

use actix_web::App;
use actix_web::test::{TestRequest, call_service, init_service, read_body};

use crate::actor::{Engine, EngineConfig};
use crate::backend::memory::MemoryBackend;
use crate::http::{AppState, Readiness, routes};

fn full() -> RefitArgs {
    RefitArgs {
        pod_uid: "8a7e2f31-1a67-4d7b-8f1e-3a2b1c4d5e6f".into(),
        pod_namespace: "default".into(),
        pod_name: "numa-pod".into(),
        node_name: "node-1".into(),
        container_index: 1,
        container_name: "main".into(),
        device_type: "NVIDIA".into(),
        allowed_device_uuids: vec!["GPU-aaaa".into(), "GPU-bbbb".into()],
    }
}

#[test]
fn the_request_round_trips_with_hamis_field_names() {
    let json = RefitRequest(full()).to_json();
    assert_eq!(
        json,
        r#"{"podUID":"8a7e2f31-1a67-4d7b-8f1e-3a2b1c4d5e6f","podNamespace":"default","podName":"numa-pod","nodeName":"node-1","containerIndex":1,"containerName":"main","deviceType":"NVIDIA","allowedDeviceUUIDs":["GPU-aaaa","GPU-bbbb"]}"#
    );
    assert_eq!(decode(json.as_bytes()).unwrap(), full());
    // The zero value, as Go marshals it: containerName left out, a nil list as null.
    assert_eq!(
        RefitRequest(RefitArgs::default()).to_json(),
        r#"{"podUID":"","podNamespace":"","podName":"","nodeName":"","containerIndex":0,"deviceType":"","allowedDeviceUUIDs":null}"#
    );
}

#[test]
fn request_keys_match_case_insensitively_and_unknown_keys_are_ignored() {
    let body = br#"{"PODUID":"8a7e2f31-1a67-4d7b-8f1e-3a2b1c4d5e6f","podnamespace":"default","PodName":"numa-pod","NODENAME":"node-1","ContainerIndex":1,"containername":"main","DeviceType":"NVIDIA","allowedDeviceUuids":["GPU-aaaa","GPU-bbbb"],"extra":{"x":[1]}} trailing"#;
    assert_eq!(decode(body).unwrap(), full());
    let nulls = br#"{"podUID":null,"containerIndex":null,"allowedDeviceUUIDs":null}"#;
    assert_eq!(decode(nulls).unwrap(), RefitArgs::default());
    assert_eq!(decode(b"").unwrap_err(), "EOF");
    assert!(!decode(b"{not-json").unwrap_err().is_empty());
    assert!(!decode(br#"{"containerIndex":"x"}"#).unwrap_err().is_empty());
}

#[test]
fn the_response_leaves_out_empty_fields_and_escapes_as_go_does() {
    let ok =
        RefitResponse { succeeded: true, container_devices: "GPU-aaaa,NVIDIA,20000,30:".into(), ..Default::default() };
    assert_eq!(ok.to_json(), r#"{"succeeded":true,"containerDevices":"GPU-aaaa,NVIDIA,20000,30:"}"#);
    let back: RefitResponse = serde_json::from_str(&ok.to_json()).unwrap();
    assert_eq!(back, ok);
    let no = RefitResponse::failed("no allowed device fits");
    assert_eq!(no.to_json(), r#"{"succeeded":false,"failureReason":"no allowed device fits"}"#);
    let quoted = RefitResponse::failed("container index 0 is \"main\", not \"<b>&\"");
    assert_eq!(
        quoted.to_json(),
        r#"{"succeeded":false,"failureReason":"container index 0 is \"main\", not \"\u003cb\u003e\u0026\""}"#
    );
}

/// The device plugin's ServiceAccount, as the chart names HAMi's.
const PLUGIN_NS: &str = "kube-system";
const PLUGIN_SA: &str = "hami-device-plugin";
/// The device plugin's token on node-1, one of another ServiceAccount, and one that names no pod.
const PLUGIN_TOKEN: &str = "plugin-token";
const TENANT_TOKEN: &str = "tenant-token";
const UNBOUND_TOKEN: &str = "unbound-token";
const OTHER_NODE_TOKEN: &str = "other-node-token";

const BODY: &[u8] = br#"{"podUID":"u","podNamespace":"default","podName":"p","nodeName":"node-1","deviceType":"NVIDIA","allowedDeviceUUIDs":["GPU-b"]}"#;

/// An app whose /refit answers the device plugin's ServiceAccount (unless `configured` is false),
/// with the tokens above known to the in-memory API server and the plugin's pods on node-1 and
/// node-2.
async fn app(readiness: Readiness, configured: bool) -> web::Data<AppState<MemoryBackend>> {
    use crate::backend::access::{BoundPod, TokenIdentity, service_account_user};
    use crate::testing::pod;
    let backend = MemoryBackend::new(std::time::Duration::from_secs(300));
    let plugin = service_account_user(PLUGIN_NS, PLUGIN_SA);
    for (name, node) in [("plugin-a", "node-1"), ("plugin-b", "node-2")] {
        backend.insert_pod(pod().namespace(PLUGIN_NS).name(name).uid(&format!("uid-{name}")).bound_to(node).view());
    }
    let bound = |name: &str| Some(BoundPod { name: name.into(), uid: format!("uid-{name}") });
    backend.accept_token(PLUGIN_TOKEN, TokenIdentity { username: plugin.clone(), pod: bound("plugin-a") });
    backend.accept_token(OTHER_NODE_TOKEN, TokenIdentity { username: plugin.clone(), pod: bound("plugin-b") });
    backend.accept_token(UNBOUND_TOKEN, TokenIdentity { username: plugin, pod: None });
    let tenant = service_account_user("team-b", "default");
    backend.accept_token(TENANT_TOKEN, TokenIdentity { username: tenant, pod: bound("plugin-a") });
    let engine = Engine::start(EngineConfig::default(), std::sync::Arc::new(crate::testing::vendors()), backend, None);
    let access = crate::http::access::Access {
        device_plugin: configured.then(|| (PLUGIN_NS.to_owned(), PLUGIN_SA.to_owned())),
        ..Default::default()
    };
    web::Data::new(AppState::new(engine, 1 << 20, readiness).with_access(access))
}

async fn post_to(st: web::Data<AppState<MemoryBackend>>, token: Option<&str>, body: &'static [u8]) -> (u16, String) {
    let app = init_service(App::new().app_data(st).configure(routes::<MemoryBackend>)).await;
    let mut req = TestRequest::post().uri("/refit").peer_addr("10.244.3.9:40000".parse().unwrap()).set_payload(body);
    if let Some(t) = token {
        req = req.insert_header(("authorization", format!("Bearer {t}")));
    }
    let res = call_service(&app, req.to_request()).await;
    let status = res.status().as_u16();
    (status, String::from_utf8(read_body(res).await.to_vec()).unwrap())
}

/// A refit from the device plugin on node-1.
async fn post(readiness: Readiness, body: &'static [u8]) -> (u16, String) {
    post_to(app(readiness, true).await, Some(PLUGIN_TOKEN), body).await
}

#[actix_web::test]
async fn every_answer_to_the_device_plugin_is_http_200() {
    let (status, body) = post(Readiness::ready(), b"{not-json").await;
    assert_eq!(status, 200);
    let r: RefitResponse = serde_json::from_str(&body).unwrap();
    assert!(!r.succeeded && !r.failure_reason.is_empty(), "{body}");

    let (status, body) = post(Readiness::ready(), BODY).await;
    assert_eq!(status, 200);
    assert_eq!(body, r#"{"succeeded":false,"failureReason":"pod u is not tracked by the scheduler"}"#);
}

#[actix_web::test]
async fn a_replica_that_may_not_schedule_refuses_at_once() {
    let r = Readiness::ready();
    r.leader.store(false, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(r, BODY).await;
    assert_eq!(status, 200);
    let res: RefitResponse = serde_json::from_str(&body).unwrap();
    assert!(!res.succeeded);
    assert!(res.failure_reason.contains("not the leader"), "{body}");
}

#[actix_web::test]
async fn only_the_device_plugins_token_from_the_requests_node_is_answered() {
    // (token, body, status, what the reason says)
    let cases: &[(Option<&str>, &[u8], u16, &str)] = &[
        (None, BODY, 401, "no bearer token"),
        (Some("forged"), BODY, 401, "does not authenticate"),
        // A malformed body tells an unauthenticated caller nothing about it.
        (Some("forged"), b"{not-json", 401, "does not authenticate"),
        (
            Some(TENANT_TOKEN),
            BODY,
            403,
            "system:serviceaccount:team-b:default is not the device plugin's ServiceAccount system:serviceaccount:kube-system:hami-device-plugin",
        ),
        (Some(UNBOUND_TOKEN), BODY, 403, "not bound to a pod"),
        (Some(OTHER_NODE_TOKEN), BODY, 403, "runs on node \"node-2\", not on \"node-1\""),
    ];
    for (token, body, want, says) in cases {
        let (status, text) = post_to(app(Readiness::ready(), true).await, *token, body).await;
        assert_eq!(status, *want, "{token:?}: {text}");
        let r: RefitResponse = serde_json::from_str(&text).unwrap();
        assert!(!r.succeeded, "{text}");
        assert!(r.failure_reason.starts_with("caller authentication failed: "), "{text}");
        assert!(r.failure_reason.contains(says), "{token:?}: {text}");
    }
    // The plugin's own token, on its own node, reaches the refit itself.
    let (status, text) = post_to(app(Readiness::ready(), true).await, Some(PLUGIN_TOKEN), BODY).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("not tracked by the scheduler"), "{text}");
    // A header that is not exactly `Bearer <token>` carries no token.
    let st = app(Readiness::ready(), true).await;
    let svc = init_service(App::new().app_data(st).configure(routes::<MemoryBackend>)).await;
    for header in [format!("bearer {PLUGIN_TOKEN}"), format!("Basic {PLUGIN_TOKEN}"), "Bearer ".to_owned()] {
        let req = TestRequest::post().uri("/refit").insert_header(("authorization", header.clone())).set_payload(BODY);
        let res = call_service(&svc, req.to_request()).await;
        assert_eq!(res.status().as_u16(), 401, "{header}");
    }
}

#[actix_web::test]
async fn without_a_configured_device_plugin_every_caller_is_refused() {
    for token in [Some(PLUGIN_TOKEN), Some(TENANT_TOKEN), None] {
        let (status, text) = post_to(app(Readiness::ready(), false).await, token, BODY).await;
        assert!(status == 401 || status == 403, "{token:?}: {status} {text}");
        assert!(text.contains("caller authentication failed"), "{text}");
    }
}
