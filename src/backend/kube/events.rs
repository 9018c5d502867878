//! Events on the API server: queued by `record_event` and written by one task under their own
//! rate limit and client-go's per-object spam filter, so recording one never waits on or slows a
//! scheduling write.

use k8s_openapi::api::core::v1::{Event as KEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, PostParams};
use tokio::sync::mpsc;

use crate::backend::{Event, EventBudget, EventType, ObjectKind};

use super::KubeBackend;

impl KubeBackend {
    /// Writes queued Events; a full queue drops Events rather than slowing scheduling.
    pub(super) async fn write_events(self, mut rx: mpsc::Receiver<Event>) {
        let component = self.inner.opts.component.clone();
        let mut budget = EventBudget::new();
        while let Some(e) = rx.recv().await {
            let key = format!("{:?}/{}/{}", e.object, e.pod.namespace, e.pod.name);
            if !budget.allow(&key, std::time::Instant::now()) {
                continue;
            }
            // Events on cluster-scoped objects go to `default`, as kubectl's do.
            let (ns, kind, api_version) = match e.object {
                ObjectKind::Pod => (e.pod.namespace.clone(), "Pod", "v1"),
                ObjectKind::Node => ("default".to_owned(), "Node", "v1"),
                ObjectKind::DeviceClass => ("default".to_owned(), "DeviceClass", "resource.k8s.io/v1"),
            };
            let ev = KEvent {
                metadata: ObjectMeta {
                    generate_name: Some(format!("{}.", e.pod.name)),
                    namespace: Some(ns.clone()),
                    ..Default::default()
                },
                involved_object: ObjectReference {
                    api_version: Some(api_version.into()),
                    kind: Some(kind.into()),
                    name: Some(e.pod.name.clone()),
                    namespace: (e.object == ObjectKind::Pod).then(|| e.pod.namespace.clone()),
                    uid: (!e.pod.uid.is_empty()).then(|| e.pod.uid.clone()),
                    ..Default::default()
                },
                reason: Some(e.reason.to_owned()),
                message: Some(e.message.clone()),
                type_: Some(match e.kind {
                    EventType::Normal => "Normal".into(),
                    EventType::Warning => "Warning".into(),
                }),
                source: Some(EventSource { component: Some(component.clone()), host: None }),
                reporting_component: Some(component.clone()),
                reporting_instance: Some(component.clone()),
                first_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
                last_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
                event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
                action: Some("Scheduling".into()),
                count: Some(1),
                ..Default::default()
            };
            let api: Api<KEvent> = Api::namespaced(self.inner.client.clone(), &ns);
            let params = PostParams::default();
            let created = api.create(&params, &ev);
            if let Err(err) = self.call_within(&self.inner.event_limiter, "create", "events", created).await {
                tracing::debug!(error = %err, reason = e.reason, "event not recorded");
            }
        }
    }
}
