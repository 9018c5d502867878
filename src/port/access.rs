//! The identities the HTTP layer checks with the API server: who a bearer token belongs to
//! (TokenReview) and who asked for an admission request (the review's userInfo, for a
//! SubjectAccessReview). Plain data; the backends fill and read them.

use std::collections::BTreeMap;

/// A bearer token's owner, as the API server's TokenReview authenticated it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenIdentity {
    /// `system:serviceaccount:<namespace>:<name>` for a ServiceAccount.
    pub username: String,
    /// The pod the token is bound to (a projected ServiceAccount token's
    /// `authentication.kubernetes.io/pod-name` and `pod-uid`), if it is bound to one.
    pub pod: Option<BoundPod>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoundPod {
    pub name: String,
    pub uid: String,
}

/// Where a pod is, as read from the API server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodPlacement {
    pub uid: String,
    /// `spec.nodeName`; empty while the pod is not bound.
    pub node: String,
}

/// The requester of an admission request, as the API server authenticated it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct RequestUser {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The ServiceAccount user name Kubernetes gives `namespace/name`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}
