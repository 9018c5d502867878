//! The processes of an end-to-end test: a control plane (etcd and kube-apiserver, started by
//! `control-plane.sh`), hami-rs, kube-scheduler and the fake device plugin. Each process logs to a
//! file under the test's directory. Everything a test starts is killed when its handle drops, also
//! when the test panics; the control plane goes last, and on a failure it prints the tail of every
//! log and keeps the directory.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::cluster::{self, wait_for};

/// The profile name of kube-scheduler and the `--scheduler-name` of hami-rs.
pub const SCHEDULER_NAME: &str = "hami-scheduler";
/// Every test's pods live here (namespaces cannot be deleted without a controller-manager).
pub const NS: &str = "default";
/// The Lease kube-scheduler elects itself on, followed by hami-rs.
pub const LEASE_NAME: &str = "hami-scheduler";
pub const LEASE_NAMESPACE: &str = "kube-system";

const HOW_TO_BUILD: &str = "build them with `tests/e2e/build-bins.sh` (needs Go 1.24+ and the Go module proxy; \
     the binaries are cached under ~/.cache/hami-rs), or run the whole suite with `tests/e2e/run.sh`";

fn e2e_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/e2e")
}

/// The hami-rs binary the tests run: `HAMI_E2E_HAMI_BIN` if set (e.g. a release build, for
/// timings), else the one cargo built with the tests.
pub fn hami_bin() -> PathBuf {
    std::env::var_os("HAMI_E2E_HAMI_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_hami-rs")), PathBuf::from)
}

/// The hami-loadtest binary (the fake device plugin): `HAMI_E2E_LOADTEST_BIN` if set, else the one
/// beside the hami-rs binary cargo built with the tests. It belongs to the workspace's other crate
/// (loadtest/), whose binaries cargo does not build for this package's tests: `tests/e2e/run.sh`
/// builds it first (`cargo build -p hami-loadtest`), as does `cargo build --bins` at the root.
pub fn loadtest_bin() -> PathBuf {
    std::env::var_os("HAMI_E2E_LOADTEST_BIN")
        .map_or_else(|| Path::new(env!("CARGO_BIN_EXE_hami-rs")).with_file_name("hami-loadtest"), PathBuf::from)
}

/// Installs the TLS provider kube and reqwest use (idempotent).
pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

// --- ports ------------------------------------------------------------------------------------

static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

fn fresh(p: u16) -> bool {
    let mut g = HANDED_OUT.lock().unwrap();
    g.get_or_insert_with(HashSet::new).insert(p)
}

/// A loopback port nothing listens on now (and not handed out before in this process).
pub fn free_port() -> u16 {
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let p = l.local_addr().unwrap().port();
        if fresh(p) {
            return p;
        }
    }
    panic!("e2e: no free loopback port found");
}

/// A port p with p and p+1 both free (etcd's client and peer ports).
pub fn free_port_pair() -> u16 {
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let p = l.local_addr().unwrap().port();
        if p < u16::MAX && TcpListener::bind(("127.0.0.1", p + 1)).is_ok() && fresh(p) && fresh(p + 1) {
            return p;
        }
    }
    panic!("e2e: no two adjacent free loopback ports found");
}

// --- processes --------------------------------------------------------------------------------

/// A child process in its own process group, with stdout and stderr appended to `log`. Dropping
/// it kills the whole group with SIGKILL.
pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    child: Option<Child>,
    /// Where [`Proc::tracked`] recorded the pid; removed when the process is killed.
    pid_file: Option<PathBuf>,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command, log: PathBuf) -> Proc {
        let f = File::options().create(true).append(true).open(&log).unwrap();
        cmd.stdin(Stdio::null()).stdout(f.try_clone().unwrap()).stderr(f).process_group(0);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("e2e: cannot start {name} ({}): {e}", cmd.get_program().to_string_lossy()));
        Proc { name: name.to_owned(), log, child: Some(child), pid_file: None }
    }

    /// Records the pid as `<pids>/proc-<name>`, next to etcd's and kube-apiserver's, so that
    /// `control-plane.sh stop` ends this process too: `run.sh` stops every test directory that
    /// way when its time box runs out and the test process is killed without its drop handlers.
    pub fn tracked(mut self, pids: &Path) -> Proc {
        if let Some(pid) = self.pid() {
            let f = pids.join(format!("proc-{}", self.name));
            if std::fs::write(&f, pid.to_string()).is_ok() {
                self.pid_file = Some(f);
            }
        }
        self
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The exit status, if the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// SIGKILL to the process group, then reaps the child.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let pid = c.id() as libc::pid_t;
            // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = c.kill();
            let _ = c.wait();
            if let Ok(mut f) = File::options().append(true).open(&self.log) {
                use std::io::Write;
                let _ = writeln!(f, "---- e2e: {} (pid {pid}) killed with SIGKILL ----", self.name);
            }
        }
        if let Some(f) = self.pid_file.take() {
            let _ = std::fs::remove_file(f);
        }
    }

    /// Panics with the log's tail if the process has exited.
    pub fn assert_running(&mut self) {
        if let Some(st) = self.exited() {
            panic!("e2e: {} exited ({st}); last lines of {}:\n{}", self.name, self.log.display(), tail(&self.log, 40));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The last `lines` lines of a file (at most the last 256 KiB are read).
pub fn tail(path: &Path, lines: usize) -> String {
    let Ok(mut f) = File::open(path) else { return format!("({} cannot be read)", path.display()) };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(256 * 1024)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// --- control plane ----------------------------------------------------------------------------

/// Stops what `control-plane.sh start` started and decides the directory's fate. Kept apart from
/// [`ControlPlane`] so a failed start is cleaned up too.
struct CpGuard {
    dir: PathBuf,
    tmp: Option<tempfile::TempDir>,
    pgid: Option<libc::pid_t>,
    /// Process groups of `control-plane.sh start-apiserver` runs (a restarted kube-apiserver).
    more_pgids: Mutex<Vec<libc::pid_t>>,
}

impl Drop for CpGuard {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(e2e_dir().join("control-plane.sh"))
            .arg("stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let more = self.more_pgids.lock().map(|v| v.clone()).unwrap_or_default();
        for pgid in self.pgid.into_iter().chain(more) {
            // SAFETY: signals a process group control-plane.sh started (etcd, kube-apiserver).
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        let keep = std::thread::panicking() || std::env::var_os("HAMI_E2E_KEEP").is_some();
        if std::thread::panicking() {
            let logs = self.dir.join("logs");
            let mut files: Vec<PathBuf> = std::fs::read_dir(&logs)
                .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            files.sort();
            for f in files {
                eprintln!("\n===== {} (last 60 lines) =====\n{}", f.display(), tail(&f, 60));
            }
        }
        if keep && let Some(t) = self.tmp.take() {
            let p = t.keep();
            eprintln!("e2e: test directory kept at {} (logs in {}/logs)", p.display(), p.display());
        }
    }
}

/// etcd + kube-apiserver on free loopback ports, with the PKI and kubeconfigs of
/// `control-plane.sh`, RBAC applied, and an admin client.
pub struct ControlPlane {
    pub dir: PathBuf,
    pub bin: PathBuf,
    pub client: kube::Client,
    /// The Kubernetes version of kube-apiserver and kube-scheduler.
    pub k8s_version: String,
    /// `--feature-gates` of the kube-schedulers the test starts, when its flavor has any.
    feature_gates: Option<&'static str>,
    guard: CpGuard,
}

/// Which Kubernetes a test's control plane runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flavor {
    /// `HAMI_E2E_K8S_VERSION` (default 1.34.2), as it comes: every scenario but the native gang's.
    #[default]
    Default,
    /// `HAMI_E2E_GANG_K8S_VERSION` (default 1.37.2) with Kubernetes' native gang on: the feature
    /// gate `GenericWorkload` on kube-apiserver and on every kube-scheduler the test starts, and
    /// `scheduling.k8s.io/v1beta1` served (PodGroups, Workloads). That kube-apiserver refuses
    /// `--advertise-address=127.0.0.1` unless nothing reconciles the `kubernetes` Service's
    /// endpoints (`--endpoint-reconciler-type=none`).
    NativeGang,
}

impl Flavor {
    fn k8s_version(self) -> String {
        match self {
            Flavor::Default => env_or("HAMI_E2E_K8S_VERSION", "1.34.2"),
            Flavor::NativeGang => env_or("HAMI_E2E_GANG_K8S_VERSION", "1.37.2"),
        }
    }

    fn feature_gates(self) -> Option<&'static str> {
        match self {
            Flavor::Default => None,
            Flavor::NativeGang => Some("GenericWorkload=true"),
        }
    }

    /// kube-apiserver's flags beyond `control-plane.sh`'s own.
    fn apiserver_flags(self) -> String {
        match self.feature_gates() {
            None => String::new(),
            Some(gates) => format!(
                "--feature-gates={gates} --runtime-config=scheduling.k8s.io/v1beta1=true --endpoint-reconciler-type=none"
            ),
        }
    }
}

fn env_or(k: &str, d: &str) -> String {
    std::env::var(k).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| d.to_owned())
}

/// Where `build-bins.sh` caches the control-plane binaries of Kubernetes `k8s` (same defaults as
/// the script).
fn control_plane_bin_dir(k8s: &str) -> PathBuf {
    let etcd = env_or("HAMI_E2E_ETCD_VERSION", "3.6.16");
    let cache = match std::env::var("HAMI_E2E_CACHE").ok().filter(|v| !v.is_empty()) {
        Some(c) => PathBuf::from(c),
        None => match std::env::var("XDG_CACHE_HOME").ok().filter(|v| !v.is_empty()) {
            Some(x) => PathBuf::from(x).join("hami-rs"),
            None => PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into())).join(".cache/hami-rs"),
        },
    };
    cache.join(format!("bin-k8s-v{k8s}-etcd-v{etcd}"))
}

fn check_binaries(k8s: &str) -> PathBuf {
    for (name, p) in [("hami-rs", hami_bin()), ("hami-loadtest", loadtest_bin())] {
        assert!(p.is_file(), "e2e: {name} binary {} is missing; build it with `cargo build --bins`", p.display());
    }
    let bin = control_plane_bin_dir(k8s);
    for b in ["etcd", "kube-apiserver", "kube-scheduler"] {
        let p = bin.join(b);
        assert!(
            p.is_file(),
            "e2e: {} is missing; {HOW_TO_BUILD} (with HAMI_E2E_K8S_VERSION={k8s} for this version)",
            p.display()
        );
    }
    for tool in ["openssl", "curl", "bash"] {
        let ok = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "e2e: `{tool}` is required (apt-get install {tool})");
    }
    bin
}

fn read_yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("e2e: {}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .filter_map(|d| {
            let v: serde_yaml::Value = serde::Deserialize::deserialize(d).unwrap();
            (!v.is_null()).then(|| serde_json::to_value(v).unwrap())
        })
        .collect()
}

async fn apply<K>(api: Api<K>, doc: Value)
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(doc).unwrap();
    let name = obj.meta().name.clone().unwrap();
    api.patch(&name, &PatchParams::apply("hami-e2e").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("e2e: applying {} {name}: {e}", K::kind(&())));
}

/// Applies the RBAC objects of a manifest (ClusterRole, ClusterRoleBinding, Role, RoleBinding).
async fn apply_rbac_manifest(client: &kube::Client, path: &Path) {
    for doc in read_yaml_docs(path) {
        let ns = doc["metadata"]["namespace"].as_str().unwrap_or(NS).to_owned();
        let c = client.clone();
        match doc["kind"].as_str().unwrap_or("") {
            "ClusterRole" => apply::<ClusterRole>(Api::all(c), doc).await,
            "ClusterRoleBinding" => apply::<ClusterRoleBinding>(Api::all(c), doc).await,
            "Role" => apply::<Role>(Api::namespaced(c, &ns), doc).await,
            "RoleBinding" => apply::<RoleBinding>(Api::namespaced(c, &ns), doc).await,
            k => panic!("e2e: {}: unexpected kind {k:?}", path.display()),
        }
    }
}

pub async fn client_from(kubeconfig: &Path) -> kube::Client {
    init();
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    kube::Client::try_from(cfg).unwrap()
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver for the test `test`, applies `rbac.yaml` (hami-rs) and
    /// `scheduler-rbac.yaml` (kube-scheduler's Lease).
    pub async fn start(test: &str) -> ControlPlane {
        ControlPlane::start_flavor(test, Flavor::Default).await
    }

    /// [`ControlPlane::start`] with the Kubernetes of `flavor`.
    pub async fn start_flavor(test: &str, flavor: Flavor) -> ControlPlane {
        init();
        let k8s_version = flavor.k8s_version();
        let bin = check_binaries(&k8s_version);
        let tmp = tempfile::Builder::new().prefix(&format!("hami-e2e-{test}-")).tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let mut guard = CpGuard { dir: dir.clone(), tmp: Some(tmp), pgid: None, more_pgids: Mutex::new(Vec::new()) };
        let (etcd_port, api_port) = (free_port_pair(), free_port());
        println!(
            "e2e[{test}]: control plane in {} (Kubernetes {k8s_version}, etcd :{etcd_port}, apiserver :{api_port})",
            dir.display()
        );

        let log = dir.join("logs/control-plane.log");
        let mut cmd = Command::new("bash");
        cmd.arg(e2e_dir().join("control-plane.sh"))
            .arg("start")
            .arg(&dir)
            .env("HAMI_E2E_ETCD_PORT", etcd_port.to_string())
            .env("HAMI_E2E_APISERVER_PORT", api_port.to_string())
            .env("HAMI_E2E_K8S_VERSION", &k8s_version)
            .env("HAMI_E2E_APISERVER_FLAGS", flavor.apiserver_flags());
        let mut script = Proc::spawn("control-plane.sh", cmd, log.clone());
        guard.pgid = script.pid().map(|p| p as libc::pid_t);
        let started = Instant::now();
        let status = loop {
            if let Some(s) = script.exited() {
                break s;
            }
            assert!(
                started.elapsed() < Duration::from_secs(180),
                "e2e: control-plane.sh did not finish within 180 s:\n{}",
                tail(&log, 40)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // The script has exited; its process group (etcd, kube-apiserver) lives on in the guard.
        std::mem::forget(script);
        assert!(
            status.success(),
            "e2e: the control plane did not start ({status}); {HOW_TO_BUILD}. control-plane.sh said:\n{}",
            tail(&log, 40)
        );

        let client = client_from(&dir.join("admin.kubeconfig")).await;
        {
            let ns: Api<Namespace> = Api::all(client.clone());
            wait_for("namespaces default and kube-system", Duration::from_secs(60), || {
                let ns = ns.clone();
                async move {
                    for n in [NS, LEASE_NAMESPACE] {
                        ns.get(n).await.map_err(|e| format!("{n}: {e}"))?;
                    }
                    Ok(())
                }
            })
            .await;
        }
        apply_rbac_manifest(&client, &e2e_dir().join("rbac.yaml")).await;
        apply_rbac_manifest(&client, &e2e_dir().join("scheduler-rbac.yaml")).await;
        ControlPlane { dir, bin, client, k8s_version, feature_gates: flavor.feature_gates(), guard }
    }

    /// Runs `control-plane.sh <cmd> DIR` to its end (at most `timeout`), its output appended to
    /// `logs/control-plane.log`; panics with that log's tail when it fails. Returns the process
    /// group it ran in (what it started in the background lives on there).
    async fn script(&self, cmd: &str, timeout: Duration) -> libc::pid_t {
        let log = self.log("control-plane");
        let mut c = Command::new("bash");
        c.arg(e2e_dir().join("control-plane.sh")).arg(cmd).arg(&self.dir);
        let mut script = Proc::spawn(&format!("control-plane.sh {cmd}"), c, log.clone());
        let pgid = script.pid().unwrap_or(0) as libc::pid_t;
        if cmd == "start-apiserver" {
            self.guard.more_pgids.lock().unwrap().push(pgid);
        }
        let started = Instant::now();
        let status = loop {
            if let Some(s) = script.exited() {
                break s;
            }
            assert!(
                started.elapsed() < timeout,
                "e2e: control-plane.sh {cmd} did not finish within {timeout:?}:\n{}",
                tail(&log, 40)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // Whatever it started in the background stays in its process group.
        std::mem::forget(script);
        assert!(status.success(), "e2e: control-plane.sh {cmd} failed ({status}):\n{}", tail(&log, 40));
        pgid
    }

    /// Stops kube-apiserver only (SIGTERM, then SIGKILL after 15 s); etcd keeps running. Returns
    /// once the process is gone.
    pub async fn stop_apiserver(&self) {
        self.script("stop-apiserver", Duration::from_secs(30)).await;
    }

    /// Starts kube-apiserver again with the flags and ports it had, and waits for its /readyz.
    pub async fn start_apiserver(&self) {
        self.script("start-apiserver", Duration::from_secs(120)).await;
    }

    pub fn kubeconfig(&self, who: &str) -> PathBuf {
        self.dir.join(format!("{who}.kubeconfig"))
    }

    pub fn log(&self, name: &str) -> PathBuf {
        self.guard.dir.join("logs").join(format!("{name}.log"))
    }

    /// Where `control-plane.sh` keeps the pids of what it stops.
    pub fn pids(&self) -> PathBuf {
        self.dir.join("pids")
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join("pki/ca.crt")
    }

    /// Registers hami-rs at `url` as the mutating webhook for pod CREATE, then
    /// waits until a dry-run canary pod comes back mutated (the apiserver picks it up
    /// asynchronously).
    pub async fn apply_webhook(&self, url: &str) {
        use base64::Engine as _;
        let ca = std::fs::read(self.ca()).unwrap();
        let doc = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "hami-webhook"},
            "webhooks": [{
                "name": "vgpu.hami.io",
                "admissionReviewVersions": ["v1", "v1beta1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "reinvocationPolicy": "Never",
                "timeoutSeconds": 10,
                "clientConfig": {
                    "url": format!("{url}/webhook"),
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
                },
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "*"}],
                "namespaceSelector": {"matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]},
                "objectSelector": {"matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]},
            }]
        });
        apply::<MutatingWebhookConfiguration>(Api::all(self.client.clone()), doc).await;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        let canary = cluster::pod("webhook-canary", &[("nvidia.com/gpu", "1")], &[], None);
        wait_for(&format!("the webhook at {url} to mutate a dry-run canary pod"), Duration::from_secs(60), || {
            let (pods, canary) = (pods.clone(), canary.clone());
            async move {
                let pp = PostParams { dry_run: true, field_manager: None };
                let p = pods.create(&pp, &canary).await.map_err(|e| e.to_string())?;
                let sn = p.spec.as_ref().and_then(|s| s.scheduler_name.clone()).unwrap_or_default();
                if sn == SCHEDULER_NAME { Ok(()) } else { Err(format!("canary came back with schedulerName {sn:?}")) }
            }
        })
        .await;
    }
}

/// The chart's matchCondition for the update guard: an annotation under `hami.io/` changes.
fn update_guard_condition() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/hami-rs/files/update-guard.cel");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("e2e: {}: {e}", path.display())).trim().to_owned()
}

impl ControlPlane {
    /// Registers `hami` as the chart's update guard: a ValidatingWebhookConfiguration for pod
    /// UPDATEs with the chart's matchConditions (the user `own` left out, an annotation under
    /// `hami.io/` changing) and failurePolicy Fail. Returns once hami-rs has answered a dry-run
    /// update of a canary pod (the API server picks the configuration up asynchronously).
    pub async fn apply_update_guard(&self, hami: &Hami, own: &str) {
        use base64::Engine as _;
        let ca = std::fs::read(self.ca()).unwrap();
        let doc = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "hami-webhook"},
            "webhooks": [{
                "name": "guard.vgpu.hami.io",
                "admissionReviewVersions": ["v1", "v1beta1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "timeoutSeconds": 10,
                "clientConfig": {
                    "url": format!("{}/webhook", hami.url()),
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
                },
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"], "scope": "Namespaced"}],
                "matchConditions": [
                    {"name": "not-the-scheduler-itself", "expression": format!("request.userInfo.username != '{own}'")},
                    {"name": "a-hami-annotation-changes", "expression": update_guard_condition()},
                ],
            }]
        });
        apply::<ValidatingWebhookConfiguration>(Api::all(self.client.clone()), doc).await;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        let mut canary = cluster::pod("guard-canary", &[], &[], Some("nobody"));
        canary.metadata.labels.get_or_insert_default().insert("hami.io/webhook".into(), "ignore".into());
        pods.create(&PostParams::default(), &canary).await.expect("the guard canary is created");
        let log = hami.log.clone();
        wait_for("hami-rs to answer an update of the guard canary", Duration::from_secs(60), || {
            let (pods, log) = (pods.clone(), log.clone());
            async move {
                let patch = json!({"metadata": {"annotations": {"hami.io/bind-phase": "canary"}}});
                let pp = PatchParams { dry_run: true, ..PatchParams::default() };
                pods.patch("guard-canary", &pp, &Patch::Merge(&patch)).await.map_err(|e| e.to_string())?;
                if plain_log(&log).contains("pod=default/guard-canary") {
                    Ok(())
                } else {
                    Err("hami-rs has not seen the canary's update yet".to_owned())
                }
            }
        })
        .await;
        let _ = pods.delete("guard-canary", &Default::default()).await;
    }
}

/// A network namespace of the test's own, joined to the host by a veth pair: a caller in it
/// reaches a listener on `0.0.0.0` at [`NetNs::host_ip`] from [`NetNs::ip`], not from the
/// loopback, as another pod reaches a pod's port. No traffic leaves the machine. Needs root and
/// `ip` (iproute2); removed when dropped.
pub struct NetNs {
    name: String,
    host_if: String,
    pub host_ip: String,
    pub ip: String,
}

impl NetNs {
    pub fn new(test: &str) -> NetNs {
        let id = std::process::id() % 10_000;
        let name = format!("hami-e2e-{test}-{id}");
        let (host_if, ns_if) = (format!("he{id}h"), format!("he{id}n"));
        let octet = 1 + id % 250;
        let (host_ip, ip) = (format!("10.213.{octet}.1"), format!("10.213.{octet}.2"));
        let run = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().unwrap_or_else(|e| {
                panic!("e2e: `ip` (iproute2) is required for the network namespace of scenario {test}: {e}")
            });
            assert!(out.status.success(), "e2e: ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        // Left over from a run that was killed.
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let _ = Command::new("ip").args(["link", "del", &host_if]).output();
        run(&["netns", "add", &name]);
        let ns = NetNs { name: name.clone(), host_if: host_if.clone(), host_ip: host_ip.clone(), ip: ip.clone() };
        run(&["link", "add", &host_if, "type", "veth", "peer", "name", &ns_if]);
        run(&["link", "set", &ns_if, "netns", &name]);
        run(&["addr", "add", &format!("{host_ip}/30"), "dev", &host_if]);
        run(&["link", "set", &host_if, "up"]);
        run(&["netns", "exec", &name, "ip", "addr", "add", &format!("{ip}/30"), "dev", &ns_if]);
        run(&["netns", "exec", &name, "ip", "link", "set", &ns_if, "up"]);
        run(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
        ns
    }

    /// `curl` inside the namespace (TLS not verified: the attacker does not care): the status
    /// code and the body.
    pub fn curl(&self, method: &str, url: &str, headers: &[&str], body: Option<&str>) -> (u16, String) {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, "curl", "-sk", "--max-time", "10", "-X", method, "-w", "\n%{http_code}"]);
        for h in headers {
            c.args(["-H", h]);
        }
        if let Some(b) = body {
            c.args(["-H", "Content-Type: application/json", "--data-binary", b]);
        }
        let out = c.arg(url).output().expect("e2e: curl in the network namespace");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
        (code.trim().parse().unwrap_or(0), body.to_owned())
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.host_if]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

// --- hami-rs ----------------------------------------------------------------------------------

/// One hami-rs process (TLS with `pki/hami.{crt,key}`, Kubernetes backend as the
/// `hami-scheduler` service account), restartable on the same ports.
pub struct Hami {
    pub name: String,
    pub port: u16,
    pub metrics_port: u16,
    args: Vec<String>,
    kubeconfig: PathBuf,
    log: PathBuf,
    pids: PathBuf,
    proc: Option<Proc>,
    http: reqwest::Client,
}

impl Hami {
    /// Starts hami-rs with the common flags plus `extra`, and waits for `/healthz`.
    pub async fn start(cp: &ControlPlane, name: &str, extra: &[&str]) -> Hami {
        Hami::start_on(cp, name, "127.0.0.1", extra).await
    }

    /// [`Hami::start`] with the main listener on `ip` (`0.0.0.0`: reachable from other network
    /// namespaces too, as a pod's port is from other pods).
    pub async fn start_on(cp: &ControlPlane, name: &str, ip: &str, extra: &[&str]) -> Hami {
        let (port, metrics_port) = (free_port(), free_port());
        let pki = cp.dir.join("pki");
        let mut args: Vec<String> = [
            "serve",
            "--http_bind",
            &format!("{ip}:{port}"),
            "--cert_file",
            &pki.join("hami.crt").to_string_lossy(),
            "--key_file",
            &pki.join("hami.key").to_string_lossy(),
            "--metrics-bind-address",
            &format!("127.0.0.1:{metrics_port}"),
            "--scheduler-name",
            SCHEDULER_NAME,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let ca = reqwest::Certificate::from_pem(&std::fs::read(cp.ca()).unwrap()).unwrap();
        let http = reqwest::Client::builder()
            .use_rustls_tls()
            .add_root_certificate(ca)
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap();
        let mut h = Hami {
            name: name.to_owned(),
            port,
            metrics_port,
            args,
            kubeconfig: cp.kubeconfig("hami"),
            log: cp.log(name),
            pids: cp.pids(),
            proc: None,
            http,
        };
        h.spawn();
        h.wait_healthy().await;
        h
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(hami_bin());
        cmd.args(&self.args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", std::env::var("HAMI_E2E_RUST_LOG").unwrap_or_else(|_| "info".into()))
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE");
        self.proc = Some(Proc::spawn(&self.name, cmd, self.log.clone()).tracked(&self.pids));
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The running process's id.
    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().and_then(Proc::pid)
    }

    pub fn assert_running(&mut self) {
        if let Some(p) = self.proc.as_mut() {
            p.assert_running();
        }
    }

    async fn wait_healthy(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            self.assert_running();
            if let Ok((200, _)) = self.get("/healthz").await {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "e2e: {} did not answer /healthz on {} within 30 s:\n{}",
                self.name,
                self.url(),
                tail(&self.log, 40)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `/readyz` answers 200 (leader and caches synced).
    pub async fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            self.assert_running();
            let r = self.get("/readyz").await;
            if let Ok((200, _)) = r {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "e2e: {} /readyz not 200 within {timeout:?} (last: {r:?}):\n{}",
                self.name,
                tail(&self.log, 40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGKILL, no shutdown.
    pub fn kill9(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill9();
        }
    }

    /// Kills the process if it still runs and starts a new one with the same flags and ports.
    pub async fn restart(&mut self) {
        self.kill9();
        self.spawn();
        self.wait_healthy().await;
    }

    pub async fn get(&self, path: &str) -> Result<(u16, String), String> {
        let r = self.http.get(format!("{}{path}", self.url())).send().await.map_err(|e| format!("{e:?}"))?;
        let code = r.status().as_u16();
        Ok((code, r.text().await.map_err(|e| e.to_string())?))
    }

    pub async fn readyz(&self) -> Option<u16> {
        self.get("/readyz").await.ok().map(|(c, _)| c)
    }

    /// A client and base URL for requests made from another task.
    pub fn client(&self) -> (reqwest::Client, String) {
        (self.http.clone(), self.url())
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, String> {
        let r =
            self.http.post(format!("{}{path}", self.url())).json(body).send().await.map_err(|e| format!("{e:?}"))?;
        r.json().await.map_err(|e| e.to_string())
    }

    /// `GET /usage`.
    pub async fn usage(&self) -> Result<Value, String> {
        let (code, body) = self.get("/usage").await?;
        if code != 200 {
            return Err(format!("/usage answered {code}: {body}"));
        }
        serde_json::from_str(&body).map_err(|e| e.to_string())
    }

    pub async fn metrics(&self) -> Result<String, String> {
        let r = self
            .http
            .get(format!("http://127.0.0.1:{}/metrics", self.metrics_port))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        r.text().await.map_err(|e| e.to_string())
    }

    /// `hami_scheduler_api_requests_total` summed by (verb, resource), results together.
    pub async fn api_requests(&self) -> BTreeMap<(String, String), f64> {
        let text = self.metrics().await.unwrap_or_else(|e| panic!("e2e: {} /metrics: {e}", self.name));
        let mut out = BTreeMap::new();
        for line in text.lines().filter(|l| l.starts_with("hami_scheduler_api_requests_total{")) {
            let (labels, value) = line.rsplit_once(' ').unwrap();
            let labels = labels.trim_start_matches("hami_scheduler_api_requests_total{").trim_end_matches('}');
            let get = |k: &str| {
                labels
                    .split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .find(|(key, _)| key.trim() == k)
                    .map(|(_, v)| v.trim_matches('"').to_owned())
                    .unwrap_or_default()
            };
            *out.entry((get("verb"), get("resource"))).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
        }
        out
    }
}

// --- kube-scheduler ---------------------------------------------------------------------------

/// How a kube-scheduler runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct SchedulerOpts<'a> {
    /// Elect on the Lease `kube-system/hami-scheduler` (15 s lease).
    pub leader_elect: bool,
    /// Run under this hostname (its own UTS namespace), so the Lease holder is `<hostname>_<uuid>`.
    pub hostname: Option<&'a str>,
    /// `clientConnection.qps` (burst twice that); kube-scheduler's defaults (50, 100) when unset.
    pub client_qps: Option<u32>,
    /// Call hami-rs's prioritize verb (for hami-rs with `--filter-result=all`), weight 1.
    pub prioritize: bool,
    /// `percentageOfNodesToScore`: how many of the feasible nodes kube-scheduler looks for before
    /// it stops (and sends to the extender); kube-scheduler's adaptive default when unset
    /// (50 % less 1 % per 125 nodes, at least 5 % and 100 nodes).
    pub percentage_of_nodes_to_score: Option<u32>,
}

/// The top-level `percentageOfNodesToScore` line of a kube-scheduler configuration, if set.
fn percentage_line(p: Option<u32>) -> String {
    p.map_or_else(String::new, |p| format!("percentageOfNodesToScore: {p}\n"))
}

/// The `clientConnection` section of a kube-scheduler configuration.
fn client_connection(kubeconfig: &Path, qps: Option<u32>) -> String {
    let mut s = format!("clientConnection:\n  kubeconfig: {}\n", kubeconfig.display());
    if let Some(q) = qps {
        s.push_str(&format!("  qps: {q}\n  burst: {}\n", 2 * q));
    }
    s
}

pub struct KubeScheduler {
    proc: Proc,
}

/// Fails the test with an explanation when UTS namespaces are not available.
fn check_unshare() {
    let out =
        Command::new("unshare").args(["--uts", "--fork", "--kill-child", "sh", "-c", "hostname e2e-probe"]).output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "e2e: `unshare --uts` failed ({}): {}; the leader-election test runs each kube-scheduler under its own hostname and needs root (or CAP_SYS_ADMIN)",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("e2e: `unshare` (util-linux) is required for the leader-election test: {e}"),
    }
}

impl KubeScheduler {
    /// Starts kube-scheduler with one profile `hami-scheduler` and hami-rs at `hami_url` as its
    /// extender (filter + bind, TLS verified with the test CA), and waits for its `/healthz`.
    pub async fn start(cp: &ControlPlane, name: &str, hami_url: &str, opts: SchedulerOpts<'_>) -> KubeScheduler {
        let election = if opts.leader_elect {
            format!(
                "  leaderElect: true\n  resourceLock: leases\n  resourceName: {LEASE_NAME}\n  resourceNamespace: {LEASE_NAMESPACE}\n  \
                 leaseDuration: 15s\n  renewDeadline: 10s\n  retryPeriod: 2s\n"
            )
        } else {
            "  leaderElect: false\n".to_owned()
        };
        let managed: String = [
            "nvidia.com/gpu",
            "nvidia.com/gpumem",
            "nvidia.com/gpucores",
            "nvidia.com/gpumem-percentage",
            "nvidia.com/priority",
            "hygon.com/dcunum",
            "hygon.com/dcumem",
            "hygon.com/dcucores",
            "hygon.com/hcunum",
            "hygon.com/hcumem",
            "hygon.com/hcucores",
        ]
        .iter()
        .map(|r| format!("  - {{name: {r}, ignoredByScheduler: true}}\n"))
        .collect();
        let prioritize = if opts.prioritize { "  prioritizeVerb: prioritize\n" } else { "" };
        let config = format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{cc}{pct}\
             leaderElection:\n{election}profiles:\n- schedulerName: {SCHEDULER_NAME}\nextenders:\n- urlPrefix: \"{hami_url}\"\n  \
             filterVerb: filter\n{prioritize}  bindVerb: bind\n  nodeCacheCapable: true\n  weight: 1\n  httpTimeout: 30s\n  enableHTTPS: true\n  \
             tlsConfig:\n    caFile: {ca}\n  managedResources:\n{managed}",
            cc = client_connection(&cp.kubeconfig("scheduler"), opts.client_qps),
            pct = percentage_line(opts.percentage_of_nodes_to_score),
            ca = cp.ca().display(),
        );
        KubeScheduler::launch(cp, name, &config, opts.hostname).await
    }

    /// Starts kube-scheduler with its default profile (`default-scheduler`) and no extender, the
    /// reference for throughput; `nvidia.com/gpumem`, `gpumem-percentage` and `gpucores` are left
    /// out of NodeResourcesFit (no node advertises them), `nvidia.com/gpu` is checked against the
    /// nodes' allocatable. Of `opts`, only `client_qps` and `percentage_of_nodes_to_score` apply.
    pub async fn start_default(cp: &ControlPlane, name: &str, opts: SchedulerOpts<'_>) -> KubeScheduler {
        let config = format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{cc}{pct}\
             leaderElection:\n  leaderElect: false\nprofiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  \
             - name: NodeResourcesFit\n    args:\n      apiVersion: kubescheduler.config.k8s.io/v1\n      \
             kind: NodeResourcesFitArgs\n      \
             ignoredResources: [nvidia.com/gpumem, nvidia.com/gpumem-percentage, nvidia.com/gpucores]\n",
            cc = client_connection(&cp.kubeconfig("scheduler"), opts.client_qps),
            pct = percentage_line(opts.percentage_of_nodes_to_score),
        );
        KubeScheduler::launch(cp, name, &config, None).await
    }

    /// Writes `config` to `<name>.yaml`, starts kube-scheduler with it and waits for `/healthz`.
    async fn launch(cp: &ControlPlane, name: &str, config: &str, hostname: Option<&str>) -> KubeScheduler {
        let port = free_port();
        let cfg_path = cp.dir.join(format!("{name}.yaml"));
        std::fs::write(&cfg_path, config).unwrap();
        let ks = cp.bin.join("kube-scheduler");
        let mut ks_args = vec![
            format!("--config={}", cfg_path.display()),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            "-v=2".to_owned(),
        ];
        if let Some(gates) = cp.feature_gates {
            ks_args.push(format!("--feature-gates={gates}"));
        }
        let cmd = match hostname {
            Some(host) => {
                check_unshare();
                let mut c = Command::new("unshare");
                c.args(["--uts", "--fork", "--kill-child", "sh", "-c", "hostname \"$0\" && exec \"$@\"", host])
                    .arg(&ks)
                    .args(&ks_args);
                c
            }
            None => {
                let mut c = Command::new(&ks);
                c.args(&ks_args);
                c
            }
        };
        let mut proc = Proc::spawn(name, cmd, cp.log(name)).tracked(&cp.pids());
        let insecure = reqwest::Client::builder()
            .use_rustls_tls()
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            proc.assert_running();
            let r = insecure.get(format!("https://127.0.0.1:{port}/healthz")).send().await;
            if r.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "e2e: {name} did not answer /healthz within 60 s:\n{}",
                tail(&proc.log, 40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        KubeScheduler { proc }
    }

    pub fn kill9(&mut self) {
        self.proc.kill9();
    }

    pub fn assert_running(&mut self) {
        self.proc.assert_running();
    }
}

// --- fake device plugin -----------------------------------------------------------------------

/// The fake GPU nodes a [`FakePlugin`] creates: `<prefix>0…<prefix>{nodes-1}`, each with `gpus`
/// GPUs of `mem` MiB and `split` slots.
#[derive(Clone, Debug)]
pub struct FakeNodes {
    pub nodes: usize,
    pub prefix: String,
    pub gpus: usize,
    pub mem: u64,
    pub split: u32,
}

impl FakeNodes {
    pub fn new(prefix: &str, nodes: usize, gpus: usize) -> FakeNodes {
        FakeNodes { nodes, prefix: prefix.to_owned(), gpus, mem: 16384, split: 4 }
    }
    pub fn names(&self) -> Vec<String> {
        (0..self.nodes).map(|i| format!("{}{i}", self.prefix)).collect()
    }
}

/// A running fake device plugin. Every Allocate it fails is logged as `allocation failed`; when
/// the handle drops (and the test has not failed already) their number must be the number the
/// test declared with [`FakePlugin::expect_failures`], 0 unless it did.
pub struct FakePlugin {
    proc: Proc,
    expected_failures: usize,
}

impl FakePlugin {
    /// Starts `hami-loadtest fake-plugin --create-nodes` and waits until every node exists with
    /// its register annotation and without taints.
    pub async fn start(cp: &ControlPlane, nodes: &FakeNodes) -> FakePlugin {
        FakePlugin::start_with(cp, nodes, "fake-plugin", &[]).await
    }

    /// [`FakePlugin::start`] logging to `logs/<name>.log`, with `extra` flags
    /// (`--never-release-lock`; `--setup-only` creates the nodes and exits: nobody answers their
    /// binds then).
    pub async fn start_with(cp: &ControlPlane, nodes: &FakeNodes, name: &str, extra: &[&str]) -> FakePlugin {
        let setup_only = extra.contains(&"--setup-only");
        let mut cmd = Command::new(loadtest_bin());
        cmd.arg("fake-plugin")
            .arg("--kubeconfig")
            .arg(cp.kubeconfig("plugin"))
            .args(["--nodes", &nodes.nodes.to_string()])
            .args(["--name-prefix", &nodes.prefix])
            .args(["--gpus-per-node", &nodes.gpus.to_string()])
            .args(["--gpu-mem", &nodes.mem.to_string()])
            .args(["--split", &nodes.split.to_string()])
            .arg("--create-nodes")
            .args(extra)
            .env("RUST_LOG", "info");
        let mut proc = Proc::spawn(name, cmd, cp.log(name));
        if !setup_only {
            proc = proc.tracked(&cp.pids());
        }
        let api: Api<Node> = Api::all(cp.client.clone());
        let names = nodes.names();
        // Three requests per node, one node at a time: 60 s, and more for a thousand nodes.
        let setup_s = 60 + nodes.nodes as u64 / 10;
        let deadline = Instant::now() + Duration::from_secs(setup_s);
        loop {
            if !setup_only {
                proc.assert_running();
            } else if let Some(st) = proc.exited()
                && !st.success()
            {
                panic!("e2e: {name} --setup-only failed ({st}):\n{}", tail(&proc.log, 40));
            }
            let list = api.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
            let ready = names.iter().all(|n| {
                list.iter().any(|node| {
                    node.metadata.name.as_deref() == Some(n.as_str())
                        && node
                            .metadata
                            .annotations
                            .as_ref()
                            .is_some_and(|a| a.contains_key("hami.io/node-nvidia-register"))
                        && node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_none_or(|t| t.is_empty())
                })
            });
            if ready {
                return FakePlugin { proc, expected_failures: 0 };
            }
            assert!(
                Instant::now() < deadline,
                "e2e: {name} did not set up {} nodes {}… within {setup_s} s:\n{}",
                names.len(),
                nodes.prefix,
                tail(&proc.log, 40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub fn assert_running(&mut self) {
        self.proc.assert_running();
    }

    /// The Allocate calls this plugin failed on purpose by the end of the test.
    pub fn expect_failures(&mut self, n: usize) {
        self.expected_failures = n;
    }

    /// The lines of the plugin's log, without terminal colours.
    pub fn log_lines(&self) -> Vec<String> {
        plain_log(&self.proc.log).lines().map(str::to_owned).collect()
    }

    /// Each `allocate` step the plugin logged for pod `pod`, in order (the `step=` objects).
    pub fn steps(&self, pod: &str) -> Vec<Value> {
        self.step_lines(pod, " allocate ")
    }

    /// Each `allocation failed` line the plugin logged for pod `pod` (the `step=` objects).
    pub fn failures(&self, pod: &str) -> Vec<Value> {
        self.step_lines(pod, " allocation failed ")
    }

    fn step_lines(&self, pod: &str, what: &str) -> Vec<Value> {
        let needle = format!(" pod={NS}/{pod} ");
        self.log_lines()
            .iter()
            .filter(|l| l.contains(what) && l.contains(&needle))
            .map(|l| {
                let json = l.split_once(" step=").map(|(_, j)| j.trim()).unwrap_or_default();
                serde_json::from_str(json).unwrap_or_else(|e| panic!("e2e: a plugin step is not JSON ({e}): {l}"))
            })
            .collect()
    }
}

impl Drop for FakePlugin {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let failed: Vec<String> = self.log_lines().into_iter().filter(|l| l.contains(" allocation failed ")).collect();
        assert_eq!(
            failed.len(),
            self.expected_failures,
            "e2e: {} failed {} Allocate calls, {} expected:\n{}",
            self.proc.name,
            failed.len(),
            self.expected_failures,
            failed.join("\n")
        );
    }
}

/// A log file's text without the terminal colours it may carry.
pub fn plain_log(path: &Path) -> String {
    let raw = std::fs::read_to_string(path).unwrap_or_default();
    let mut log = String::with_capacity(raw.len());
    let mut rest = raw.as_str();
    while let Some(i) = rest.find('\u{1b}') {
        log.push_str(&rest[..i]);
        rest = rest[i..].split_once('m').map_or("", |(_, r)| r);
    }
    log.push_str(rest);
    log
}

/// One hami-rs and one kube-scheduler per id, both electing on the shared Lease (the chart's
/// pairs): kube-scheduler under the id as hostname, hami-rs with the id as leader identity.
pub async fn replica_pairs(cp: &ControlPlane, ids: &[&str]) -> Vec<(Hami, KubeScheduler)> {
    let mut pairs = Vec::new();
    for id in ids {
        let hami = Hami::start(
            cp,
            &format!("hami-rs-{id}"),
            &[
                "--leader-elect",
                "--leader-elect-resource-name",
                LEASE_NAME,
                "--leader-elect-resource-namespace",
                LEASE_NAMESPACE,
                "--leader-identity",
                id,
            ],
        )
        .await;
        let ks = KubeScheduler::start(
            cp,
            &format!("kube-scheduler-{id}"),
            &hami.url(),
            SchedulerOpts { leader_elect: true, hostname: Some(id), ..SchedulerOpts::default() },
        )
        .await;
        pairs.push((hami, ks));
    }
    pairs
}
