//! What the HTTP layer asks the API server about its callers: TokenReview (who holds a bearer
//! token, and the pod it is bound to), SubjectAccessReview (may a requester do something), and a
//! pod's placement read past the cache (the device plugin's pods are not among the cached ones).

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};

use crate::backend::Result;
use crate::port::access::{BoundPod, PodPlacement, RequestUser, TokenIdentity};

use super::{KubeBackend, api_err, is_not_found};

/// The extra fields the API server adds to a ServiceAccount token bound to a pod.
const POD_NAME: &str = "authentication.kubernetes.io/pod-name";
const POD_UID: &str = "authentication.kubernetes.io/pod-uid";

impl KubeBackend {
    pub(super) async fn token_review(&self, token: &str) -> Result<Option<TokenIdentity>> {
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.to_owned(), audiences: None },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client());
        let done =
            self.call("create", "tokenreviews", api.create(&PostParams::default(), &review)).await.map_err(api_err)?;
        let Some(status) = done.status.filter(|s| s.authenticated == Some(true)) else { return Ok(None) };
        let Some(user) = status.user else { return Ok(None) };
        let extra = user.extra.unwrap_or_default();
        let one = |k: &str| extra.get(k).and_then(|v| v.first()).cloned().filter(|s| !s.is_empty());
        let pod = match (one(POD_NAME), one(POD_UID)) {
            (Some(name), Some(uid)) => Some(BoundPod { name, uid }),
            _ => None,
        };
        Ok(Some(TokenIdentity { username: user.username.unwrap_or_default(), pod }))
    }

    pub(super) async fn access_review(&self, user: &RequestUser, verb: &str, resource: &str) -> Result<bool> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.username.clone()),
                uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone().into_iter().collect::<BTreeMap<_, _>>()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.to_owned()),
                    resource: Some(resource.to_owned()),
                    group: Some(String::new()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client());
        let done = self
            .call("create", "subjectaccessreviews", api.create(&PostParams::default(), &review))
            .await
            .map_err(api_err)?;
        Ok(done.status.is_some_and(|s| s.allowed && s.denied != Some(true)))
    }

    pub(super) async fn read_placement(&self, namespace: &str, name: &str) -> Result<Option<PodPlacement>> {
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        match self.call("get", "pods", api.get(name)).await {
            Ok(p) => Ok(Some(PodPlacement {
                uid: p.metadata.uid.unwrap_or_default(),
                node: p.spec.and_then(|s| s.node_name).unwrap_or_default(),
            })),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(api_err(e)),
        }
    }
}
