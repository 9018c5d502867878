//! What the watchers are started with: which nodes to watch, whose Lease to follow, which pod
//! is this scheduler's own, which resource names a DeviceClass may not claim unnoticed.

/// Following the kube-scheduler sidecar's Lease: HAMi does not campaign, it leads while the Lease's
/// holder starts with its hostname and has not expired.
#[derive(Clone, Debug)]
pub struct LeaderOptions {
    pub lease_name: String,
    pub lease_namespace: String,
    /// This replica's identity prefix (the hostname, as kube-scheduler writes `<hostname>_<uuid>`).
    pub identity: String,
}

#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    pub node_selector: Option<String>,
    pub leader: Option<LeaderOptions>,
    /// Namespace and name of this scheduler's own pod (`POD_NAMESPACE`, `POD_NAME`).
    pub own_pod: Option<(String, String)>,
    /// Every vendor's resource names: a DeviceClass naming one is reported.
    pub served_resources: Vec<String>,
}
