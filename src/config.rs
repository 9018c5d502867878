//! Command-line flags (HAMi's names and defaults, plus hami-rs's own; see docs/configuration.md),
//! each also an env var, and `Config::validate`. The device config file lives in
//! `config/device.rs`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::actor::{DecisionWrite, FilterMode, FilterResult};

/// The device config file, typed in the pure core beside the vendors it configures.
pub use hami_core::config::device;

/// Parses Go duration strings (`5m`, `28s`, `1h30m`, `500ms`, `0`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let err = || format!("{s:?} is not a duration (e.g. 30s, 5m, 1h30m, 500ms)");
    let mut total = 0f64;
    let mut rest = t;
    if rest.is_empty() {
        return Err(err());
    }
    while !rest.is_empty() {
        let n_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if n_end == 0 {
            return Err(err());
        }
        let n: f64 = rest[..n_end].parse().map_err(|_| err())?;
        rest = &rest[n_end..];
        let u_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = match &rest[..u_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        rest = &rest[u_end..];
        total += n * unit;
    }
    if !total.is_finite() || total > 1e9 {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(total))
}

/// Parses Go boolean literals, so `--leader-elect=true` and `--leader-elect=1` both work.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    crate::model::codec::parse_go_bool(s).map_err(|e| e.to_string())
}

#[derive(Debug, Parser)]
#[command(
    name = "hami-rs",
    version,
    about = "A wire-compatible replacement for HAMi's scheduler: admission webhook and kube-scheduler extender for shared GPUs."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the extender (/filter, /bind), the webhook and the status endpoints.
    Serve(Box<ServeArgs>),
    /// Run pods through the real engine against a cluster file and print where each would go.
    Simulate(Box<SimulateArgs>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

/// Whether a pod that fits nowhere for its devices may evict lower-priority pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Preemption {
    #[default]
    Off,
    On,
}

// The engine owns these modes and knows nothing of the command line, so the command line names
// them here (same names and help as a derive on the enums would give).
impl ValueEnum for FilterMode {
    fn value_variants<'a>() -> &'a [Self] {
        &[FilterMode::Snapshot, FilterMode::Messages]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            FilterMode::Snapshot => PossibleValue::new("snapshot")
                .help("Fit over the immutable usage snapshots node actors publish (fast; the default)"),
            FilterMode::Messages => PossibleValue::new("messages")
                .help("Send a Filter message to every candidate node actor and wait for the answers"),
        })
    }
}

impl ValueEnum for crate::actor::Defragment {
    fn value_variants<'a>() -> &'a [Self] {
        use crate::actor::Defragment as D;
        &[D::Off, D::DryRun, D::On]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        use crate::actor::Defragment as D;
        Some(match self {
            D::Off => PossibleValue::new("off").help("Never move running pods (the default)"),
            D::DryRun => PossibleValue::new("dry-run")
                .help("Find the plan that would place a pending pod by moving running pods, and show it; move nothing"),
            D::On => PossibleValue::new("on").help(
                "Carry such a plan out: claim the pending pod's devices and each moved pod's new place, then evict the moved pods one at a time through the Eviction API",
            ),
        })
    }
}

impl ValueEnum for DecisionWrite {
    fn value_variants<'a>() -> &'a [Self] {
        &[DecisionWrite::Filter, DecisionWrite::Bind]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            DecisionWrite::Filter => PossibleValue::new("filter")
                .help("In Filter, as HAMi does: works whether or not kube-scheduler calls hami-rs's bind"),
            DecisionWrite::Bind => PossibleValue::new("bind").help(
                "In Bind, in the same patch as `bind-phase: allocating`, before the Binding: the filter makes no API write. Needs kube-scheduler's `bindVerb` (the chart sets both)",
            ),
        })
    }
}

impl ValueEnum for FilterResult {
    fn value_variants<'a>() -> &'a [Self] {
        &[FilterResult::One, FilterResult::All]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            FilterResult::One => PossibleValue::new("one")
                .help("The one node hami-rs chose, as HAMi answers (kube-scheduler's own scoring never applies)"),
            FilterResult::All => PossibleValue::new("all").help(
                "Every node that fits, scored by /prioritize; the devices are chosen at bind on the node kube-scheduler picks (the decision is then written at bind)",
            ),
        })
    }
}

/// The scheduler's flags, shared by `serve` and `simulate`.
#[derive(Clone, Debug, Args)]
pub struct SchedulerFlags {
    /// Value written to spec.schedulerName by the webhook; also the Event source. HAMi's default is empty; the chart sets hami-scheduler.
    #[arg(long = "scheduler-name", env = "HAMI_SCHEDULER_NAME", default_value = "")]
    pub scheduler_name: String,

    /// Default node policy: binpack or spread (pod annotation hami.io/node-scheduler-policy overrides).
    #[arg(long = "node-scheduler-policy", env = "HAMI_NODE_SCHEDULER_POLICY", default_value = "binpack")]
    pub node_scheduler_policy: String,

    /// Default GPU policy: binpack, spread, topology-aware, mutex, numa or a comma list (pod annotation hami.io/gpu-scheduler-policy overrides).
    #[arg(long = "gpu-scheduler-policy", env = "HAMI_GPU_SCHEDULER_POLICY", default_value = "spread")]
    pub gpu_scheduler_policy: String,

    /// Device config YAML (HAMi's format). Without one, the Helm chart's defaults apply.
    #[arg(long = "device-config-file", env = "HAMI_DEVICE_CONFIG_FILE")]
    pub device_config_file: Option<PathBuf>,

    /// Register Ascend vNPU chips from the device config.
    #[arg(long = "enable-ascend", env = "HAMI_ENABLE_ASCEND", default_value = "false", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub enable_ascend: bool,

    /// Register Iluvatar chips from the device config.
    #[arg(long = "enable-iluvatar", env = "HAMI_ENABLE_ILUVATAR", default_value = "false", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub enable_iluvatar: bool,

    /// Treat pods with schedulerName default-scheduler as ours to take over.
    #[arg(long = "force-overwrite-default-scheduler", env = "HAMI_FORCE_OVERWRITE_DEFAULT_SCHEDULER", default_value = "true", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub force_overwrite_default_scheduler: bool,

    /// Node lock expiry: an older lock is taken over unless its pod still waits for its Allocate.
    #[arg(long = "node-lock-timeout", env = "HAMI_NODE_LOCK_TIMEOUT", default_value = "5m", value_parser = parse_duration)]
    pub node_lock_timeout: Duration,

    /// How long Bind retries lock contention for PodGroup members (0 disables).
    #[arg(long = "node-lock-retry-timeout", env = "HAMI_NODE_LOCK_RETRY_TIMEOUT", default_value = "28s", value_parser = parse_duration)]
    pub node_lock_retry_timeout: Duration,

    /// How long a bind waits for a node lock another pod's bind holds, before failing (PodGroup members wait --node-lock-retry-timeout).
    #[arg(long = "bind-lock-wait", env = "HAMI_BIND_LOCK_WAIT", default_value = "10s", value_parser = parse_duration)]
    pub bind_lock_wait: Duration,

    /// How long a reservation made by Filter waits for its Bind before it is released.
    #[arg(long = "reservation-ttl", env = "HAMI_RESERVATION_TTL", default_value = "30s", value_parser = parse_duration)]
    pub reservation_ttl: Duration,

    /// GPU-aware preemption: for a pod that fits no node for its devices, evict the fewest bound pods of strictly lower priority whose release lets it fit on one node (PodDisruptionBudgets respected), and hold their devices for it. `simulate` shows the evictions without making them.
    #[arg(long = "preemption", env = "HAMI_PREEMPTION", value_enum, default_value = "off")]
    pub preemption: Preemption,

    /// How long the devices a preemption frees are held for the preemptor while its victims terminate; then they are free for any pod again.
    #[arg(long = "preemption-hold", env = "HAMI_PREEMPTION_HOLD", default_value = "2m", value_parser = parse_duration)]
    pub preemption_hold: Duration,

    /// Defragmentation: a pod that fits no node as the cluster is, but would if shared GPUs were packed tighter, gets its devices by moving the fewest running pods (only pods whose ReplicaSet or StatefulSet makes a replacement, or pods annotated `hami.io/movable: "true"`; PodDisruptionBudgets honoured) to devices claimed for their replacements first. `dry-run` shows the plan (console, `kubectl hami why`, logs) and moves nothing.
    #[arg(long = "defragment", env = "HAMI_DEFRAGMENT", value_enum, default_value = "off")]
    pub defragment: crate::actor::Defragment,

    /// Pods one defragmentation plan may move.
    #[arg(long = "defrag-max-moves", env = "HAMI_DEFRAG_MAX_MOVES", default_value = "2")]
    pub defrag_max_moves: usize,

    /// Pods moved from one node within `--defrag-cooldown`.
    #[arg(long = "defrag-max-per-node", env = "HAMI_DEFRAG_MAX_PER_NODE", default_value = "2")]
    pub defrag_max_per_node: usize,

    /// Pods of one controller (ReplicaSet, StatefulSet) moved within `--defrag-cooldown`.
    #[arg(long = "defrag-max-per-controller", env = "HAMI_DEFRAG_MAX_PER_CONTROLLER", default_value = "1")]
    pub defrag_max_per_controller: usize,

    /// Pods moved cluster-wide per minute by defragmentation.
    #[arg(long = "defrag-max-per-minute", env = "HAMI_DEFRAG_MAX_PER_MINUTE", default_value = "10")]
    pub defrag_max_per_minute: usize,

    /// How long a moved pod's replacement (and its node's and controller's budget) is not moved again.
    #[arg(long = "defrag-cooldown", env = "HAMI_DEFRAG_COOLDOWN", default_value = "1h", value_parser = parse_duration)]
    pub defrag_cooldown: Duration,

    /// How long the devices claimed for a pending pod and for each moved pod's replacement wait for them.
    #[arg(long = "defrag-claim-ttl", env = "HAMI_DEFRAG_CLAIM_TTL", default_value = "5m", value_parser = parse_duration)]
    pub defrag_claim_ttl: Duration,

    /// How long the room claimed for a pod group's members (all of them at once, when the group fits whole) waits for them to take it, when the group's PodGroup names no timeout (`scheduleTimeoutSeconds`, Koordinator's `waiting-time`); then it is free for any pod again.
    #[arg(long = "gang-claim-ttl", env = "HAMI_GANG_CLAIM_TTL", default_value = "5m", value_parser = parse_duration)]
    pub gang_claim_ttl: Duration,

    /// How Filter evaluates candidate nodes.
    #[arg(long = "filter-mode", env = "HAMI_FILTER_MODE", value_enum, default_value = "snapshot")]
    pub filter_mode: FilterMode,

    /// When the decision annotations are written: filter (HAMi's way; needed without the extender's bindVerb) or bind (with bindVerb: one pod patch and no API write in the filter).
    #[arg(long = "decision-write", env = "HAMI_DECISION_WRITE", value_enum, default_value = "filter")]
    pub decision_write: DecisionWrite,

    /// What /filter answers: one (the chosen node, as HAMi) or all (every node that fits, for kube-scheduler's prioritizeVerb; implies --decision-write=bind).
    #[arg(long = "filter-result", env = "HAMI_FILTER_RESULT", value_enum, default_value = "one")]
    pub filter_result: FilterResult,

    /// Deadline for a node actor's answer in --filter-mode=messages; a node that misses it fails for that pod.
    #[arg(long = "filter-deadline", env = "HAMI_FILTER_DEADLINE", default_value = "2s", value_parser = parse_duration)]
    pub filter_deadline: Duration,

    /// Number of arbiters (threads) node actors are spread over; 0 means one per core.
    #[arg(long = "arbiters", env = "HAMI_ARBITERS", default_value = "0")]
    pub arbiters: usize,

    /// Log format.
    #[arg(long = "log-format", env = "HAMI_LOG_FORMAT", value_enum, default_value = "human")]
    pub log_format: LogFormat,

    /// klog verbosity, accepted for HAMi compatibility: 0-2 info, 3-4 debug, 5+ trace (RUST_LOG overrides).
    #[arg(short = 'v', long = "v", env = "HAMI_VERBOSITY", default_value = "0")]
    pub verbosity: u8,

    /// Accepted for HAMi compatibility; has no effect.
    #[arg(long = "debug", default_value = "false", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool, hide = true)]
    pub debug: bool,

    /// HAMi's per-vendor resource-name flags are overwritten by the device config there, and ignored here.
    #[arg(long = "cambricon-mlu-name", hide = true)]
    pub dead_cambricon_mlu_name: Option<String>,
    #[arg(long = "cambricon-mlu-memory", hide = true)]
    pub dead_cambricon_mlu_memory: Option<String>,
    #[arg(long = "cambricon-mlu-cores", hide = true)]
    pub dead_cambricon_mlu_cores: Option<String>,
    #[arg(long = "dcu-name", hide = true)]
    pub dead_dcu_name: Option<String>,
    #[arg(long = "dcu-memory", hide = true)]
    pub dead_dcu_memory: Option<String>,
    #[arg(long = "dcu-cores", hide = true)]
    pub dead_dcu_cores: Option<String>,
    #[arg(long = "mthreads-name", hide = true)]
    pub dead_mthreads_name: Option<String>,
    #[arg(long = "mthreads-memory", hide = true)]
    pub dead_mthreads_memory: Option<String>,
    #[arg(long = "mthreads-cores", hide = true)]
    pub dead_mthreads_cores: Option<String>,
    #[arg(long = "metax-name", hide = true)]
    pub dead_metax_name: Option<String>,
    #[arg(long = "metax-vcount", hide = true)]
    pub dead_metax_vcount: Option<String>,
    #[arg(long = "metax-vcore", hide = true)]
    pub dead_metax_vcore: Option<String>,
    #[arg(long = "metax-vmemory", hide = true)]
    pub dead_metax_vmemory: Option<String>,
    #[arg(long = "sgpu-topology-aware", hide = true, num_args = 0..=1, default_missing_value = "true")]
    pub dead_sgpu_topology_aware: Option<String>,
    #[arg(long = "kunlun-name", hide = true)]
    pub dead_kunlun_name: Option<String>,
    #[arg(long = "kunlun-vcount", hide = true)]
    pub dead_kunlun_vcount: Option<String>,
    #[arg(long = "kunlun-vmemory", hide = true)]
    pub dead_kunlun_vmemory: Option<String>,
}

/// `hami-rs serve`.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub sched: SchedulerFlags,

    /// Serve over an in-memory cluster loaded from this file (kubectl get nodes,pods -o json, or YAML) instead of the API server.
    #[arg(long = "cluster-file", env = "HAMI_CLUSTER_FILE")]
    pub cluster_file: Option<PathBuf>,

    /// Main listener: /filter, /bind, /webhook, /healthz, /readyz, / (status page).
    #[arg(long = "http_bind", env = "HAMI_HTTP_BIND", default_value = "127.0.0.1:8080")]
    pub http_bind: SocketAddr,

    /// TLS certificate (PEM); TLS is on when both --cert_file and --key_file are set. Reloaded when it changes.
    #[arg(long = "cert_file", env = "HAMI_CERT_FILE")]
    pub cert_file: Option<PathBuf>,

    /// TLS private key (PEM).
    #[arg(long = "key_file", env = "HAMI_KEY_FILE")]
    pub key_file: Option<PathBuf>,

    /// CA (PEM) whose client certificates may call the extender verbs from outside this pod (a kube-scheduler elsewhere, with the extender's tlsConfig); without it only callers on the loopback may. Needs --cert_file/--key_file. Read at start-up.
    #[arg(long = "client-ca-file", env = "HAMI_CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,

    /// Who may read the console (/) and /usage, which list every tenant's pods: trusted (the extender's callers: loopback, e.g. kubectl port-forward, or a client certificate) or any caller.
    #[arg(long = "console-access", env = "HAMI_CONSOLE_ACCESS", value_enum, default_value = "trusted")]
    pub console_access: ConsoleAccess,

    /// Namespace of the device plugin's ServiceAccount, the only caller /refit answers (its token is checked with a TokenReview).
    #[arg(long = "device-plugin-namespace", env = "HAMI_DEVICE_PLUGIN_NAMESPACE", default_value = "")]
    pub device_plugin_namespace: String,

    /// Name of the device plugin's ServiceAccount; with --device-plugin-namespace empty or this empty, /refit refuses every caller.
    #[arg(long = "device-plugin-service-account", env = "HAMI_DEVICE_PLUGIN_SERVICE_ACCOUNT", default_value = "")]
    pub device_plugin_service_account: String,

    /// Metrics listener (GET /metrics). ":9395" means all interfaces, as in Go.
    #[arg(long = "metrics-bind-address", env = "HAMI_METRICS_BIND_ADDRESS", default_value = ":9395")]
    pub metrics_bind_address: String,

    /// Also emit HAMi's legacy metric names.
    #[arg(long = "legacy-metrics", env = "HAMI_LEGACY_METRICS", default_value = "false", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub legacy_metrics: bool,

    /// Emit HAMi's per-pod device series (hami_vgpu_memory_allocated_bytes, hami_vgpu_core_allocated_ratio, and their legacy twins); false leaves them out, which keeps /metrics small on large clusters.
    #[arg(long = "pod-device-metrics", env = "HAMI_POD_DEVICE_METRICS", default_value = "true", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub pod_device_metrics: bool,

    /// Only nodes with these labels (k=v,k2=v2) are registered.
    #[arg(long = "node-label-selector", env = "HAMI_NODE_LABEL_SELECTOR")]
    pub node_label_selector: Option<String>,

    /// API client requests per second (HAMi's default of 5 throttles scheduling).
    #[arg(long = "kube-qps", env = "HAMI_KUBE_QPS", default_value = "200")]
    pub kube_qps: f32,

    /// API client burst.
    #[arg(long = "kube-burst", env = "HAMI_KUBE_BURST", default_value = "400")]
    pub kube_burst: u32,

    /// API request timeout in seconds (0: none).
    #[arg(long = "kube-timeout", env = "HAMI_KUBE_TIMEOUT", default_value = "0")]
    pub kube_timeout: u64,

    /// Follow the kube-scheduler sidecar's Lease: serve as leader only while it holds it.
    #[arg(long = "leader-elect", env = "HAMI_LEADER_ELECT", default_value = "false", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub leader_elect: bool,

    /// Name of the Lease to follow.
    #[arg(long = "leader-elect-resource-name", env = "HAMI_LEADER_ELECT_RESOURCE_NAME", default_value = "")]
    pub leader_elect_resource_name: String,

    /// Namespace of the Lease to follow.
    #[arg(long = "leader-elect-resource-namespace", env = "HAMI_LEADER_ELECT_RESOURCE_NAMESPACE", default_value = "")]
    pub leader_elect_resource_namespace: String,

    /// Identity prefix matched against the Lease holder (kube-scheduler writes <hostname>_<uuid>); defaults to the hostname.
    #[arg(long = "leader-identity", env = "HAMI_LEADER_IDENTITY")]
    pub leader_identity: Option<String>,

    /// Accepted for HAMi compatibility (pprof routes); has no effect.
    #[arg(long = "profiling", default_value = "false", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool, hide = true)]
    pub profiling: bool,

    /// Largest request body accepted on /filter, /bind and /webhook.
    #[arg(long = "max-body-bytes", env = "HAMI_MAX_BODY_BYTES", default_value = "4194304")]
    pub max_body_bytes: usize,

    /// Allow serving plain HTTP on a non-loopback address (the extender and webhook carry scheduling decisions).
    #[arg(long = "allow-insecure-http", env = "HAMI_ALLOW_INSECURE_HTTP", default_value = "false", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub allow_insecure_http: bool,

    /// How long shutdown waits for in-flight binds.
    #[arg(long = "shutdown-grace", env = "HAMI_SHUTDOWN_GRACE", default_value = "20s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
}

/// Who may read the console and `/usage` (`--console-access`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ConsoleAccess {
    /// The extender's callers only: this pod's loopback (`kubectl port-forward` arrives there) or
    /// a client certificate the `--client-ca-file` CA signed.
    #[default]
    Trusted,
    /// Any caller that reaches the port.
    Any,
}

/// `hami-rs simulate`.
#[derive(Clone, Debug, Args)]
pub struct SimulateArgs {
    #[command(flatten)]
    pub sched: SchedulerFlags,

    /// Cluster: a v1 List (kubectl get nodes,pods,resourcequotas -A -o json) or multi-document YAML.
    #[arg(long = "cluster-file")]
    pub cluster_file: PathBuf,

    /// Pods to place, in order: a v1 List or multi-document YAML of Pods.
    #[arg(long = "pods")]
    pub pods: PathBuf,

    /// Output format.
    #[arg(long = "output", short = 'o', value_enum, default_value = "table")]
    pub output: OutputFormat,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid configuration:\n  {}", .0.join("\n  "))]
pub struct Invalid(pub Vec<String>);

/// The node policies `--node-scheduler-policy` accepts.
const NODE_POLICIES: [&str; 2] = ["binpack", "spread"];
/// The words `--gpu-scheduler-policy` may combine.
const GPU_POLICY_WORDS: [&str; 5] = ["binpack", "spread", "topology-aware", "mutex", "numa"];

impl SchedulerFlags {
    pub fn validate(&self, problems: &mut Vec<String>) {
        if self.reservation_ttl.is_zero() {
            problems.push("--reservation-ttl must be positive".into());
        }
        if self.preemption_hold.is_zero() {
            problems.push("--preemption-hold must be positive".into());
        }
        if self.gang_claim_ttl.is_zero() {
            problems.push("--gang-claim-ttl must be positive".into());
        }
        if self.defrag_claim_ttl.is_zero() {
            problems.push("--defrag-claim-ttl must be positive".into());
        }
        if self.node_lock_timeout.is_zero() {
            problems.push("--node-lock-timeout must be positive".into());
        }
        match &self.device_config_file {
            Some(p) if !p.is_file() => problems.push(format!("--device-config-file {}: no such file", p.display())),
            Some(_) => {
                if let Err(e) = self.device_config() {
                    problems.push(format!("--device-config-file {e}"));
                }
            }
            None => {}
        }
        if !NODE_POLICIES.contains(&self.node_scheduler_policy.as_str()) {
            problems.push(format!(
                "--node-scheduler-policy {:?}: not one of {}",
                self.node_scheduler_policy,
                NODE_POLICIES.join(", ")
            ));
        }
        // A comma list combines keys (`binpack,numa`); HAMi reads any other word as spread.
        for word in self.gpu_scheduler_policy.split(',').map(str::trim) {
            if !GPU_POLICY_WORDS.contains(&word) {
                problems.push(format!(
                    "--gpu-scheduler-policy {:?}: {word:?} is not one of {}",
                    self.gpu_scheduler_policy,
                    GPU_POLICY_WORDS.join(", ")
                ));
            }
        }
    }

    pub fn policy_defaults(&self) -> crate::model::request::PolicyDefaults {
        crate::model::request::PolicyDefaults {
            gpu: self.gpu_scheduler_policy.clone(),
            node: self.node_scheduler_policy.clone(),
        }
    }

    pub fn arbiters(&self) -> usize {
        if self.arbiters > 0 { self.arbiters } else { std::thread::available_parallelism().map_or(2, |n| n.get()) }
    }

    /// Loads the device config file, or the chart's defaults when none is given.
    pub fn device_config(&self) -> Result<device::DeviceConfig, DeviceConfigError> {
        match &self.device_config_file {
            None => Ok(device::DeviceConfig::chart()),
            Some(p) => {
                let text =
                    std::fs::read_to_string(p).map_err(|source| DeviceConfigError::Read { path: p.clone(), source })?;
                device::DeviceConfig::from_yaml(&text)
                    .map_err(|source| DeviceConfigError::Parse { path: p.clone(), source })
            }
        }
    }
}

/// `--device-config-file` could not be read, or is not a device config.
#[derive(Debug, thiserror::Error)]
pub enum DeviceConfigError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: device::Error,
    },
}

/// Go's `":9395"` means every interface.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let t = if s.starts_with(':') { format!("0.0.0.0{s}") } else { s.to_owned() };
    t.parse().map_err(|_| format!("{s:?} is not an address like :9395 or 127.0.0.1:9395"))
}

impl ServeArgs {
    /// Every problem at once, before any socket is bound.
    pub fn validate(&self) -> Result<(), Invalid> {
        let mut p = Vec::new();
        self.sched.validate(&mut p);
        if self.cert_file.is_some() != self.key_file.is_some() {
            p.push("--cert_file and --key_file must be given together".into());
        }
        for f in [&self.cert_file, &self.key_file].into_iter().flatten() {
            if !f.is_file() {
                p.push(format!("{}: no such file", f.display()));
            }
        }
        if let Err(e) = parse_listen(&self.metrics_bind_address) {
            p.push(format!("--metrics-bind-address: {e}"));
        }
        if self.client_ca_file.is_some() && (self.cert_file.is_none() || self.key_file.is_none()) {
            p.push(
                "--client-ca-file needs --cert_file and --key_file: client certificates are asked for over TLS".into(),
            );
        }
        if let Some(ca) = self.client_ca_file.as_ref().filter(|f| !f.is_file()) {
            p.push(format!("--client-ca-file {}: no such file", ca.display()));
        }
        if self.cert_file.is_none() && !self.http_bind.ip().is_loopback() && !self.allow_insecure_http {
            p.push(format!(
                "--http_bind {} is not a loopback address and no --cert_file/--key_file is set; give a certificate or pass --allow-insecure-http",
                self.http_bind
            ));
        }
        if self.leader_elect
            && (self.leader_elect_resource_name.is_empty() || self.leader_elect_resource_namespace.is_empty())
        {
            p.push("--leader-elect needs --leader-elect-resource-name and --leader-elect-resource-namespace".into());
        }
        if self.max_body_bytes < 1024 {
            p.push("--max-body-bytes must be at least 1024".into());
        }
        if let Some(f) = &self.cluster_file
            && !f.is_file()
        {
            p.push(format!("--cluster-file {}: no such file", f.display()));
        }
        if p.is_empty() { Ok(()) } else { Err(Invalid(p)) }
    }
}

impl SimulateArgs {
    pub fn validate(&self) -> Result<(), Invalid> {
        let mut p = Vec::new();
        self.sched.validate(&mut p);
        for (flag, f) in [("--cluster-file", &self.cluster_file), ("--pods", &self.pods)] {
            if !f.is_file() {
                p.push(format!("{flag} {}: no such file", f.display()));
            }
        }
        if p.is_empty() { Ok(()) } else { Err(Invalid(p)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::codec::format_go_duration;

    fn serve(args: &[&str]) -> ServeArgs {
        let mut v = vec!["hami-rs", "serve"];
        v.extend_from_slice(args);
        match Cli::try_parse_from(v).unwrap().command {
            Command::Serve(s) => *s,
            Command::Simulate(_) => panic!("expected serve"),
        }
    }

    #[test]
    fn defaults_are_hamis() {
        let s = serve(&[]);
        assert_eq!(s.http_bind.to_string(), "127.0.0.1:8080");
        assert_eq!(s.metrics_bind_address, ":9395");
        assert_eq!(s.sched.node_scheduler_policy, "binpack");
        assert_eq!(s.sched.gpu_scheduler_policy, "spread");
        assert_eq!(s.sched.node_lock_timeout, Duration::from_secs(300));
        assert_eq!(s.sched.node_lock_retry_timeout, Duration::from_secs(28));
        assert!(s.sched.force_overwrite_default_scheduler);
        assert!(!s.leader_elect);
        assert_eq!(s.sched.scheduler_name, "");
    }

    #[test]
    fn the_charts_invocation_parses() {
        // The flags HAMi's chart passes (TLS files need not exist to parse).
        let s = serve(&[
            "--http_bind=0.0.0.0:443",
            "--scheduler-name=hami-scheduler",
            "--metrics-bind-address=:9395",
            "--node-scheduler-policy=binpack",
            "--gpu-scheduler-policy=spread",
            "--force-overwrite-default-scheduler=true",
            "--leader-elect=true",
            "--leader-elect-resource-name=hami-scheduler",
            "--leader-elect-resource-namespace=kube-system",
            "--debug",
            "-v=4",
            "--enable-ascend=true",
            "--cambricon-mlu-name=cambricon.com/vmlu",
        ]);
        assert_eq!(s.sched.scheduler_name, "hami-scheduler");
        assert!(s.leader_elect);
        assert!(s.sched.enable_ascend);
        assert_eq!(s.sched.verbosity, 4);
    }

    #[test]
    fn go_booleans_and_durations_parse() {
        assert!(!serve(&["--force-overwrite-default-scheduler=F"]).sched.force_overwrite_default_scheduler);
        assert!(serve(&["--leader-elect"]).leader_elect);
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(format_go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(format_go_duration(Duration::from_secs(28)), "28s");
    }

    #[test]
    fn validate_reports_every_problem_at_once() {
        let s =
            serve(&["--http_bind=0.0.0.0:8080", "--cert_file=/nonexistent", "--leader-elect", "--reservation-ttl=0"]);
        let e = s.validate().unwrap_err();
        assert!(e.0.len() >= 4, "{e}");
    }

    #[test]
    fn policy_flags_take_only_the_words_hami_knows() {
        for (node, gpu) in [
            ("binpack", "spread"),
            ("spread", "binpack"),
            ("binpack", "topology-aware"),
            ("spread", "binpack,numa"),
            ("binpack", "mutex"),
        ] {
            let s = serve(&[&format!("--node-scheduler-policy={node}"), &format!("--gpu-scheduler-policy={gpu}")]);
            assert!(s.validate().is_ok(), "{node} {gpu}: {:?}", s.validate().err());
        }
        let s = serve(&["--node-scheduler-policy=spreed", "--gpu-scheduler-policy=binpack,fastest"]);
        let e = s.validate().unwrap_err();
        assert_eq!(e.0.len(), 2, "{e}");
        assert!(e.0[0].contains("\"spreed\"") && e.0[0].contains("binpack, spread"), "{e}");
        assert!(e.0[1].contains("\"fastest\""), "{e}");
    }

    #[test]
    fn plain_http_on_a_public_address_needs_an_explicit_flag() {
        assert!(serve(&["--http_bind=0.0.0.0:8080"]).validate().is_err());
        assert!(serve(&["--http_bind=0.0.0.0:8080", "--allow-insecure-http"]).validate().is_ok());
        assert!(serve(&[]).validate().is_ok());
    }

    #[test]
    fn metrics_address_accepts_go_form() {
        assert_eq!(parse_listen(":9395").unwrap().to_string(), "0.0.0.0:9395");
        assert!(parse_listen("nonsense").is_err());
    }
}
