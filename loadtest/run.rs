//! `run` and `compare`: set the synthetic cluster up (a cluster file for a hami-rs this tool
//! starts, or objects in an API server), drive the extender, check the invariant on the final
//! state, and report (stdout summary, `--json-out`, `--plot-out`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use hami_rs::config::parse_duration;
use k8s_openapi::api::core::v1::Pod;

use crate::child::{self, Proc};
use crate::cluster::{self, Synthetic};
use crate::driver::{self, Before, Candidates, Factory, Load, Naming, Outcome, Until};
use crate::invariant::{self, Check};
use crate::kube_mode;
use crate::mix::{Mix, Shapes, ShapesArg};
use crate::plot;
use crate::report::{Comparison, Report, Scheduler, Settings};

/// Exit code when the invariant check found an over-committed device.
pub const EXIT_INVARIANT: u8 = 3;
/// Exit code of `compare --fail-over-target` when the ratio target is missed.
pub const EXIT_TARGET: u8 = 4;

#[derive(Clone, Debug, clap::Args)]
pub struct ClusterArgs {
    /// Synthetic GPU nodes.
    #[arg(long, default_value = "1000")]
    pub nodes: usize,
    /// GPUs on each node.
    #[arg(long, default_value = "8")]
    pub gpus_per_node: usize,
    /// Device model string in the register annotation.
    #[arg(long, default_value = "NVIDIA-Tesla T4")]
    pub gpu_model: String,
    /// Device memory in MiB.
    #[arg(long, default_value = "16384")]
    pub gpu_mem: u64,
    /// Tasks per GPU (the split count).
    #[arg(long, default_value = "10")]
    pub split: u32,
    /// Pods already running before the load, placed so every device stays within capacity
    /// (drawn from the same --mix and --seed, another stream).
    #[arg(long, default_value = "0")]
    pub running_pods: usize,
    /// Node names are <prefix><index>.
    #[arg(long, default_value = "fake-gpu-")]
    pub node_prefix: String,
}

impl ClusterArgs {
    pub fn spec(&self) -> cluster::Spec {
        cluster::Spec {
            nodes: self.nodes,
            gpus_per_node: self.gpus_per_node,
            gpu_model: self.gpu_model.clone(),
            gpu_mem: self.gpu_mem,
            split: self.split,
            name_prefix: self.node_prefix.clone(),
        }
    }
}

/// The load pods: what they ask for, which nodes each filter offers, what they are called.
#[derive(Clone, Debug, clap::Args)]
pub struct PodArgs {
    /// Seed of the pod mix (the same seed sends the same pods).
    #[arg(long, default_value = "1")]
    pub seed: u64,
    /// Pod mix, KIND:WEIGHT,… over whole, fraction, percent, cores, multi: the running pods', and
    /// the load pods' with --shapes mix.
    #[arg(long, default_value = Mix::DEFAULT)]
    pub mix: Mix,
    /// What the load pods ask for: "mix" (drawn from --mix; the default of run and compare) or
    /// "four" (in turn: 1 GPU 1000 MiB 10 cores, 1 GPU 4000 MiB 30 cores, 2 GPUs 2000 MiB each,
    /// 1 GPU 25 % of its memory; the default of bodies).
    #[arg(long)]
    pub shapes: Option<ShapesArg>,
    /// Candidate nodes per filter: "window" (kube-scheduler's: the next numFeasibleNodesToFind
    /// nodes in node order, each pod's window starting where the previous one stopped), "all"
    /// (every node, the same list for every pod), or K nodes drawn per pod.
    #[arg(long, default_value = "window")]
    pub candidates: Candidates,
    /// kube-scheduler's percentageOfNodesToScore, for --candidates window: 0 is adaptive
    /// (50 - nodes/125 percent, at least 5 %), 100 every node; never fewer than 100 nodes.
    #[arg(long, default_value = "0", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub percentage_of_nodes_to_score: u32,
    /// Namespace of the load pods.
    #[arg(long, default_value = "loadtest")]
    pub namespace: String,
    /// Load pods are <prefix>-<index> (default: lt-<hex time>, so reruns against one scheduler differ).
    #[arg(long)]
    pub pod_prefix: Option<String>,
    /// spec.schedulerName of the pods (the default names no scheduler, so nothing else schedules them).
    #[arg(long, default_value = "hami-loadtest")]
    pub scheduler_name: String,
}

impl PodArgs {
    /// `--candidates` with `--percentage-of-nodes-to-score` applied to a window.
    pub fn candidates(&self) -> Candidates {
        match self.candidates {
            Candidates::Window(_) => Candidates::Window(self.percentage_of_nodes_to_score),
            c => c,
        }
    }

    /// `--shapes`, or `default` when not given.
    pub fn shapes(&self, default: ShapesArg) -> Shapes {
        match self.shapes.unwrap_or(default) {
            ShapesArg::Mix => Shapes::Mix(self.mix.clone()),
            ShapesArg::Four => Shapes::Four,
        }
    }

    /// `--pod-prefix`, else lt-<hex unix time>.
    pub fn prefix(&self) -> String {
        self.pod_prefix.clone().unwrap_or_else(|| format!("lt-{:x}", chrono::Utc::now().timestamp()))
    }

    pub fn naming(&self, prefix: &str) -> Naming {
        Naming {
            namespace: self.namespace.clone(),
            prefix: prefix.to_owned(),
            scheduler_name: self.scheduler_name.clone(),
        }
    }

    /// For the report: the load pods' shapes, and the running pods' mix when it differs.
    pub fn describe_shapes(&self, default: ShapesArg) -> String {
        match self.shapes(default) {
            Shapes::Mix(m) => m.to_string(),
            four => format!("{four}; running pods {}", self.mix),
        }
    }
}

#[derive(Clone, Debug, clap::Args)]
pub struct LoadArgs {
    #[command(flatten)]
    pub pod: PodArgs,
    /// Concurrent workers, each with its own keep-alive connection.
    #[arg(long, default_value = "1")]
    pub concurrency: usize,
    /// Run for this long (e.g. 30s, 2m); conflicts with --pods.
    #[arg(long, value_parser = parse_duration, conflicts_with = "pods")]
    pub duration: Option<Duration>,
    /// Send this many pods (default 1000 when --duration is not given).
    #[arg(long)]
    pub pods: Option<u64>,
    /// Only POST /filter; never bind (the filter's reservations then expire by the scheduler's TTL).
    #[arg(long)]
    pub filter_only: bool,
    /// Pods sent before measuring (not counted); compare defaults to 200.
    #[arg(long)]
    pub warmup: Option<u64>,
    /// Per-request timeout.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,
    /// No progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

impl LoadArgs {
    fn until(&self) -> Until {
        match (self.duration, self.pods) {
            (Some(d), _) => Until::For(d),
            (None, Some(n)) => Until::Pods(n),
            (None, None) => Until::Pods(1000),
        }
    }
}

#[derive(Clone, Debug, clap::Args)]
pub struct ChildArgs {
    /// The hami-rs binary to start (default: hami-rs next to this executable).
    #[arg(long)]
    pub hami_rs: Option<PathBuf>,
    /// Extra argument for `hami-rs serve` (repeatable), e.g. --hami-rs-arg=--reservation-ttl=5m.
    #[arg(long = "hami-rs-arg", allow_hyphen_values = true)]
    pub hami_rs_args: Vec<String>,
    /// RUST_LOG for the started hami-rs (default: its own, info; its log goes to a file).
    #[arg(long)]
    pub hami_rs_log: Option<String>,
    /// How long the started scheduler may take to answer /readyz.
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    pub startup_timeout: Duration,
    /// Keep the temporary directory (cluster file, logs).
    #[arg(long)]
    pub keep_files: bool,
    /// How often the started scheduler's resident set is sampled during the run.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub rss_every: Duration,
}

#[derive(Clone, Debug, clap::Args)]
pub struct OutputArgs {
    /// Write the report as JSON here.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
    /// Draw latency over time and latency histograms into this PNG.
    #[arg(long)]
    pub plot_out: Option<PathBuf>,
    /// TrueType font for the PNG's text (default: DejaVu Sans and others from /usr/share/fonts).
    #[arg(long)]
    pub plot_font: Option<PathBuf>,
}

#[derive(Clone, Debug, clap::Args)]
pub struct RunArgs {
    /// Base URL of the extender (http://127.0.0.1:8080); with --kubeconfig, the extender to drive.
    #[arg(long)]
    pub target: Option<String>,
    /// Write the cluster file, start `hami-rs serve --cluster-file` on free loopback ports, drive it, stop it.
    #[arg(long, conflicts_with_all = ["target", "kubeconfig"])]
    pub embedded: bool,
    /// Create the nodes and pods in this API server first (needs --target).
    #[arg(long, requires = "target")]
    pub kubeconfig: Option<PathBuf>,
    /// With --kubeconfig: delete the pods this tool created at the end.
    #[arg(long)]
    pub cleanup: bool,
    /// With --kubeconfig: do not run the fake device plugin during the load (another one serves binds).
    #[arg(long)]
    pub no_fake_plugin: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub child: ChildArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Clone, Debug, clap::Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The load; compare always runs filter-only.
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub child: ChildArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// HTTP workers of the null extender (default: actix-web's, as hami-rs).
    #[arg(long)]
    pub null_workers: Option<usize>,
    /// The headline target at p50: hami-rs at most this many times the null extender.
    #[arg(long, default_value = "1.5")]
    pub target_p50: f64,
    /// The headline target at p99.
    #[arg(long, default_value = "2.0")]
    pub target_p99: f64,
    /// Exit with code 4 when the target is missed.
    #[arg(long)]
    pub fail_over_target: bool,
    /// Both targets run at once and the load is split into this many rounds, alternating between
    /// them, so a busy shared machine weighs on both alike.
    #[arg(long, default_value = "5")]
    pub rounds: u32,
}

fn settings(c: &ClusterArgs, l: &LoadArgs, filter_only: bool, warmup: u64) -> Settings {
    let (pods, duration_s) = match l.until() {
        Until::Pods(n) => (Some(n), None),
        Until::For(d) => (None, Some(d.as_secs_f64())),
    };
    Settings {
        nodes: c.nodes,
        gpus_per_node: c.gpus_per_node,
        gpu_model: c.gpu_model.clone(),
        gpu_mem_mib: c.gpu_mem,
        split: c.split,
        running_pods: c.running_pods,
        concurrency: l.concurrency,
        pods,
        duration_s,
        warmup,
        seed: l.pod.seed,
        mix: l.pod.describe_shapes(ShapesArg::Mix),
        filter_only,
        candidates: l.pod.candidates().describe(c.nodes),
    }
}

/// A temporary directory, removed on drop unless kept.
struct TempDir {
    path: PathBuf,
    keep: bool,
}

impl TempDir {
    fn new(keep: bool) -> anyhow::Result<TempDir> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!("hami-loadtest-{}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(TempDir { path, keep })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("kept {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn normalise_target(t: &str) -> anyhow::Result<String> {
    let url = reqwest::Url::parse(t).with_context(|| format!("--target {t:?} is not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("--target {t:?}: only http and https are supported");
    }
    Ok(t.trim_end_matches('/').to_owned())
}

pub fn synthetic(c: &ClusterArgs, p: &PodArgs) -> anyhow::Result<Synthetic> {
    if c.running_pods > 0 {
        eprintln!("placing {} running pods on {} nodes x {} GPUs…", c.running_pods, c.nodes, c.gpus_per_node);
    }
    Ok(Synthetic::build(c.spec(), c.running_pods, &p.mix, p.seed)?)
}

/// The load pods over `s`'s nodes; `default` is the shapes when `--shapes` is not given.
pub fn factory(s: &Synthetic, p: &PodArgs, prefix: &str, default: ShapesArg) -> Factory {
    Factory::new(p.shapes(default), s.spec.shape(), p.seed, p.naming(prefix), Arc::new(s.nodes.clone()), p.candidates())
}

/// Warmup (not recorded), then the measured load.
async fn phases(
    base: &str,
    f: Arc<Factory>,
    before: Option<Arc<dyn Before>>,
    l: &LoadArgs,
    filter_only: bool,
    warmup: u64,
    label: &str,
) -> anyhow::Result<Outcome> {
    let load = |until| Load {
        base: base.to_owned(),
        concurrency: l.concurrency.max(1),
        until,
        filter_only,
        timeout: l.timeout,
        progress: !l.quiet,
    };
    if warmup > 0 {
        let w =
            driver::drive(load(Until::Pods(warmup)), f.clone(), before.clone(), 0, &format!("{label} warmup")).await?;
        let errs = w.rec.errors_total() - w.rec.no_fit;
        if errs > 0 {
            eprintln!("warmup: {errs} errors (not counted): {:?}", w.rec.errors);
        }
    }
    Ok(driver::drive(load(l.until()), f, before, warmup, label).await?)
}

async fn fetch_usage(base: &str) -> Vec<Check> {
    let client = match reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(300)).build() {
        Ok(c) => c,
        Err(e) => return vec![Check::skipped("usage", e.to_string())],
    };
    let r = match client.get(format!("{base}/usage")).send().await {
        Ok(r) => r,
        Err(e) => return vec![Check::skipped("usage", format!("GET /usage: {e}"))],
    };
    if !r.status().is_success() {
        return vec![Check::skipped("usage", format!("GET /usage answered {} (not a hami-rs?)", r.status()))];
    }
    match r.bytes().await.map_err(|e| e.to_string()).and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => invariant::check_usage(&v),
        Err(e) => vec![Check::skipped("usage", format!("GET /usage: {e}"))],
    }
}

fn hami_rs_path(c: &ChildArgs) -> anyhow::Result<PathBuf> {
    let p = match &c.hami_rs {
        Some(p) => p.clone(),
        None => {
            std::env::current_exe()?.parent().map(|d| d.join("hami-rs")).context("no directory of the executable")?
        }
    };
    if !p.exists() {
        bail!("{} does not exist: build it (cargo build --release --bins) or pass --hami-rs PATH", p.display());
    }
    Ok(p)
}

/// A scheduler process this tool started, with its base URL.
struct Started {
    proc: Proc,
    base: String,
    info: Scheduler,
}

async fn start(
    what: &str,
    program: &Path,
    args: Vec<String>,
    env: Vec<(String, String)>,
    port: u16,
    dir: &Path,
    timeout: Duration,
) -> anyhow::Result<Started> {
    let log = dir.join(format!("{what}.log"));
    eprintln!("starting {what} on 127.0.0.1:{port} (log {})…", log.display());
    let mut proc = Proc::spawn(what, program, &args, &env, &log)?;
    let base = format!("http://127.0.0.1:{port}");
    let ready = match proc.wait_ready(&base, timeout).await {
        Ok(d) => d,
        Err(e) => {
            proc.stop(Duration::from_secs(2)).await;
            return Err(e.into());
        }
    };
    let (_, rss) = proc.memory_kib();
    let info = Scheduler {
        program: program.display().to_string(),
        pid: proc.pid,
        startup_s: (ready.as_secs_f64() * 1000.0).round() / 1000.0,
        rss_ready_kib: rss,
        peak_rss_kib: None,
        rss_end_kib: None,
        rss_samples: Vec::new(),
        log: None,
    };
    Ok(Started { proc, base, info })
}

async fn start_hami(c: &ChildArgs, cluster_file: &Path, dir: &Path) -> anyhow::Result<Started> {
    let program = hami_rs_path(c)?;
    let (port, metrics) = (child::free_port()?, child::free_port()?);
    let mut args = vec![
        "serve".to_owned(),
        "--cluster-file".to_owned(),
        cluster_file.display().to_string(),
        "--http_bind".to_owned(),
        format!("127.0.0.1:{port}"),
        "--metrics-bind-address".to_owned(),
        format!("127.0.0.1:{metrics}"),
    ];
    args.extend(c.hami_rs_args.iter().cloned());
    let env = c.hami_rs_log.iter().map(|l| ("RUST_LOG".to_owned(), l.clone())).collect();
    start("hami-rs", &program, args, env, port, dir, c.startup_timeout).await
}

async fn start_null(c: &ChildArgs, workers: Option<usize>, dir: &Path) -> anyhow::Result<Started> {
    let program = std::env::current_exe()?;
    let port = child::free_port()?;
    let mut args = vec!["null-extender".to_owned(), "--listen".to_owned(), format!("127.0.0.1:{port}")];
    if let Some(w) = workers {
        args.extend(["--workers".to_owned(), w.to_string()]);
    }
    start("null-extender", &program, args, Vec::new(), port, dir, c.startup_timeout).await
}

/// Samples a process's resident set every `every` until finished (a soak's evidence of growth).
struct RssSampler {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Vec<(f64, u64)>>,
}

fn sample_rss(pid: u32, every: Duration) -> RssSampler {
    let (stop, mut stopped) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let start = std::time::Instant::now();
        let mut out = Vec::new();
        let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let (_, Some(rss)) = child::memory_kib(pid) {
                        out.push(((start.elapsed().as_secs_f64() * 10.0).round() / 10.0, rss));
                    }
                }
                _ = &mut stopped => break,
            }
        }
        if let (_, Some(rss)) = child::memory_kib(pid) {
            out.push(((start.elapsed().as_secs_f64() * 10.0).round() / 10.0, rss));
        }
        out
    });
    RssSampler { stop, task }
}

impl RssSampler {
    async fn finish(self) -> Vec<(f64, u64)> {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

/// Reads the peak before anything else (a large `/usage` answer would raise it), then stops.
fn record_memory(s: &mut Started, keep_files: bool) {
    let (hwm, rss) = s.proc.memory_kib();
    s.info.peak_rss_kib = hwm;
    s.info.rss_end_kib = rss;
    if keep_files {
        s.info.log = Some(s.proc.log.display().to_string());
    }
}

fn write_outputs(o: &OutputArgs, json: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(p) = &o.json_out {
        let text = serde_json::to_string_pretty(json)?;
        std::fs::write(p, text + "\n").with_context(|| format!("writing {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn draw(o: &OutputArgs, path: &Path, title: &str, r: &Report, out: &Outcome) {
    let fonts = plot::font_candidates(o.plot_font.as_deref());
    match plot::draw(path, title, &r.timeline, &out.rec.filter.total, &out.rec.bind.total, &fonts) {
        Ok(true) => eprintln!("wrote {}", path.display()),
        Ok(false) => eprintln!("wrote {} (no font found: drawn without text)", path.display()),
        Err(e) => eprintln!("could not draw {}: {e}", path.display()),
    }
}

fn exit_for(r: &Report) -> ExitCode {
    if r.invariant_ok { ExitCode::SUCCESS } else { ExitCode::from(EXIT_INVARIANT) }
}

/// `hami-loadtest run`.
pub async fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let l = &a.load;
    let warmup = l.warmup.unwrap_or(0);
    let prefix = l.pod.prefix();
    let s = synthetic(&a.cluster, &l.pod)?;
    let f = Arc::new(factory(&s, &l.pod, &prefix, ShapesArg::Mix));
    let settings = settings(&a.cluster, l, l.filter_only, warmup);
    let (report, outcome) = if a.embedded {
        let dir = TempDir::new(a.child.keep_files)?;
        let file = dir.path.join("cluster.json");
        eprintln!("writing {}…", file.display());
        s.write(&file, &l.pod.scheduler_name)?;
        drop(s);
        let mut h = start_hami(&a.child, &file, &dir.path).await?;
        let sampler = sample_rss(h.proc.pid, a.child.rss_every);
        let driven = phases(&h.base, f, None, l, l.filter_only, warmup, "hami-rs").await;
        record_memory(&mut h, a.child.keep_files);
        h.info.rss_samples = sampler.finish().await;
        let checks = match &driven {
            Ok(_) => fetch_usage(&h.base).await,
            Err(_) => Vec::new(),
        };
        let base = h.base.clone();
        h.proc.stop(Duration::from_secs(10)).await;
        let o = driven?;
        let mut r = Report::new("embedded", &base, settings, &o);
        r.scheduler = Some(h.info);
        r.set_invariant(checks);
        (r, o)
    } else if let Some(kc) = &a.kubeconfig {
        let target = normalise_target(a.target.as_deref().unwrap_or(""))?;
        let client = crate::fake_plugin::client(Some(kc)).await?;
        eprintln!("creating {} nodes and {} running pods in the API server…", s.nodes.len(), s.running.len());
        let created = kube_mode::setup(&client, &s, &l.pod.namespace, &l.pod.scheduler_name).await?;
        eprintln!("{created} running pods created ({} already there)", s.running.len() - created);
        let plugin = (!l.filter_only && !a.no_fake_plugin).then(|| kube_mode::start_plugin(&s, kc));
        let before: Arc<dyn Before> =
            Arc::new(kube_mode::CreatePods { api: kube::Api::<Pod>::namespaced(client.clone(), &l.pod.namespace) });
        let driven = phases(&target, f, Some(before), l, l.filter_only, warmup, "extender").await;
        if let Some(p) = plugin {
            p.abort();
        }
        let o = driven?;
        let check = match kube_mode::snapshot(&client).await {
            Ok((nodes, pods)) => invariant::check_objects(&nodes, &pods),
            Err(e) => Check::skipped("api-server", e.to_string()),
        };
        if a.cleanup {
            kube_mode::cleanup(&client, &l.pod.namespace).await?;
        }
        let mut r = Report::new("kubeconfig", &target, settings, &o);
        r.set_invariant(vec![check]);
        (r, o)
    } else if let Some(t) = &a.target {
        let target = normalise_target(t)?;
        let o = phases(&target, f, None, l, l.filter_only, warmup, "extender").await?;
        let mut r = Report::new("target", &target, settings, &o);
        r.set_invariant(fetch_usage(&target).await);
        (r, o)
    } else {
        bail!("give --target URL, --embedded, or --kubeconfig K with --target URL");
    };
    print!("{}", report.human());
    write_outputs(&a.output, &report)?;
    if let Some(p) = &a.output.plot_out {
        draw(&a.output, p, &format!("{} ({})", report.mode, report.target), &report, &outcome);
    }
    Ok(exit_for(&report))
}

fn sibling(p: &Path, suffix: &str) -> PathBuf {
    let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "plot".into());
    p.with_file_name(format!("{stem}-{suffix}.png"))
}

/// The compare load: a warmup on each target, then `rounds` rounds, each sending the next share
/// of the pods (or of the duration) to the null extender and then the same pods to hami-rs.
async fn alternate(
    null: &str,
    hami: &str,
    f: Arc<Factory>,
    l: &LoadArgs,
    warmup: u64,
    rounds: u32,
) -> anyhow::Result<(Outcome, Outcome)> {
    let load = |base: &str, until, progress| Load {
        base: base.to_owned(),
        concurrency: l.concurrency.max(1),
        until,
        filter_only: true,
        timeout: l.timeout,
        progress,
    };
    if warmup > 0 {
        for (base, label) in [(null, "null warmup"), (hami, "hami-rs warmup")] {
            driver::drive(load(base, Until::Pods(warmup), false), f.clone(), None, 0, label).await?;
        }
    }
    let (mut null_out, mut hami_out) = (Outcome::default(), Outcome::default());
    let (mut null_next, mut hami_next) = (warmup, warmup);
    for r in 0..u64::from(rounds) {
        let until = match l.until() {
            Until::Pods(n) => Until::Pods(n / u64::from(rounds) + u64::from(r < n % u64::from(rounds))),
            Until::For(d) => Until::For(d / rounds),
        };
        let label = |who: &str| format!("{who} {}/{rounds}", r + 1);
        let o = driver::drive(load(null, until, !l.quiet), f.clone(), None, null_next, &label("null")).await?;
        null_next += o.rec.filters_sent;
        null_out.append(o);
        let o = driver::drive(load(hami, until, !l.quiet), f.clone(), None, hami_next, &label("hami-rs")).await?;
        hami_next += o.rec.filters_sent;
        hami_out.append(o);
    }
    Ok((null_out, hami_out))
}

/// `hami-loadtest compare`: the same filter-only load against the null extender and hami-rs.
pub async fn compare(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let l = &a.load;
    let warmup = l.warmup.unwrap_or(200);
    // Both targets are fresh processes: the same names make the request bodies byte-identical.
    let prefix = l.pod.pod_prefix.clone().unwrap_or_else(|| "lt-compare".into());
    let s = synthetic(&a.cluster, &l.pod)?;
    let f = Arc::new(factory(&s, &l.pod, &prefix, ShapesArg::Mix));
    let settings = settings(&a.cluster, l, true, warmup);
    let dir = TempDir::new(a.child.keep_files)?;
    let file = dir.path.join("cluster.json");
    eprintln!("writing {}…", file.display());
    s.write(&file, &l.pod.scheduler_name)?;
    drop(s);

    let mut n = start_null(&a.child, a.null_workers, &dir.path).await?;
    let mut h = match start_hami(&a.child, &file, &dir.path).await {
        Ok(h) => h,
        Err(e) => {
            n.proc.stop(Duration::from_secs(5)).await;
            return Err(e);
        }
    };
    let driven = alternate(&n.base, &h.base, f, l, warmup, a.rounds.max(1)).await;
    record_memory(&mut n, a.child.keep_files);
    record_memory(&mut h, a.child.keep_files);
    let checks = match &driven {
        Ok(_) => fetch_usage(&h.base).await,
        Err(_) => Vec::new(),
    };
    n.proc.stop(Duration::from_secs(5)).await;
    h.proc.stop(Duration::from_secs(10)).await;
    let (null_out, hami_out) = driven?;
    let mut null_report = Report::new("null-extender", &n.base, settings.clone(), &null_out);
    null_report.scheduler = Some(n.info);
    let mut hami_report = Report::new("embedded", &h.base, settings, &hami_out);
    hami_report.scheduler = Some(h.info);
    hami_report.set_invariant(checks);

    print!("{}\n{}\n", hami_report.human(), null_report.human());
    let cmp = Comparison::new(hami_report, null_report, (a.target_p50, a.target_p99));
    print!("{}", cmp.human());
    write_outputs(&a.output, &cmp)?;
    if let Some(p) = &a.output.plot_out {
        draw(&a.output, &sibling(p, "hami-rs"), "hami-rs", &cmp.hami_rs, &hami_out);
        draw(&a.output, &sibling(p, "null"), "null extender", &cmp.null_extender, &null_out);
    }
    if !cmp.hami_rs.invariant_ok {
        return Ok(ExitCode::from(EXIT_INVARIANT));
    }
    if a.fail_over_target && !cmp.within_target {
        return Ok(ExitCode::from(EXIT_TARGET));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_normalised_and_checked() {
        assert_eq!(normalise_target("http://127.0.0.1:8080/").ok().as_deref(), Some("http://127.0.0.1:8080"));
        assert!(normalise_target("127.0.0.1:8080").is_err());
        assert!(normalise_target("ftp://127.0.0.1/").is_err());
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        a: RunArgs,
    }

    fn parse(extra: &[&str]) -> Result<RunArgs, clap::Error> {
        use clap::Parser;
        Cli::try_parse_from(["run", "--embedded"].iter().chain(extra)).map(|c| c.a)
    }

    #[test]
    fn the_load_sends_kube_schedulers_window_unless_told() {
        let a = parse(&[]).expect("parses");
        assert_eq!(a.load.pod.candidates(), Candidates::Window(0));
        assert_eq!(a.load.pod.shapes(ShapesArg::Mix), Shapes::Mix(Mix::DEFAULT.parse().expect("parses")));
        let a = parse(&["--percentage-of-nodes-to-score", "30"]).expect("parses");
        assert_eq!(a.load.pod.candidates(), Candidates::Window(30));
        let a = parse(&["--candidates", "all", "--percentage-of-nodes-to-score", "30"]).expect("parses");
        assert_eq!(a.load.pod.candidates(), Candidates::All, "the percentage shapes a window only");
        assert_eq!(parse(&["--candidates", "10"]).expect("parses").load.pod.candidates(), Candidates::Random(10));
        assert!(parse(&["--percentage-of-nodes-to-score", "101"]).is_err());
        assert_eq!(parse(&["--shapes", "four"]).expect("parses").load.pod.shapes(ShapesArg::Mix), Shapes::Four);
    }

    #[test]
    fn plot_siblings_keep_the_folder() {
        assert_eq!(sibling(Path::new("/tmp/x/out.png"), "null"), PathBuf::from("/tmp/x/out-null.png"));
    }
}
