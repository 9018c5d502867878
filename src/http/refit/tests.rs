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

async fn post(readiness: Readiness, body: &'static [u8]) -> (u16, String) {
    let backend = MemoryBackend::new(std::time::Duration::from_secs(300));
    let engine = Engine::start(EngineConfig::default(), std::sync::Arc::new(crate::testing::vendors()), backend, None);
    let st = web::Data::new(AppState::new(engine, 1 << 20, readiness));
    let app = init_service(App::new().app_data(st).configure(routes::<MemoryBackend>)).await;
    let res = call_service(&app, TestRequest::post().uri("/refit").set_payload(body).to_request()).await;
    let status = res.status().as_u16();
    (status, String::from_utf8(read_body(res).await.to_vec()).unwrap())
}

#[actix_web::test]
async fn every_refit_answer_is_http_200() {
    let (status, body) = post(Readiness::ready(), b"{not-json").await;
    assert_eq!(status, 200);
    let r: RefitResponse = serde_json::from_str(&body).unwrap();
    assert!(!r.succeeded && !r.failure_reason.is_empty(), "{body}");

    let (status, body) = post(Readiness::ready(), br#"{"podUID":"u","podNamespace":"default","podName":"p","nodeName":"n","deviceType":"NVIDIA","allowedDeviceUUIDs":["GPU-b"]}"#).await;
    assert_eq!(status, 200);
    assert_eq!(body, r#"{"succeeded":false,"failureReason":"pod u is not tracked by the scheduler"}"#);
}

#[actix_web::test]
async fn a_replica_that_may_not_schedule_refuses_at_once() {
    let r = Readiness::ready();
    r.leader.store(false, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(r, br#"{"podUID":"u","podNamespace":"default","podName":"p","nodeName":"n","deviceType":"NVIDIA","allowedDeviceUUIDs":["GPU-b"]}"#).await;
    assert_eq!(status, 200);
    let res: RefitResponse = serde_json::from_str(&body).unwrap();
    assert!(!res.succeeded);
    assert!(res.failure_reason.contains("not the leader"), "{body}");
}
