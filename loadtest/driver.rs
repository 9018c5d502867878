//! The load itself: C workers, each with its own keep-alive HTTP client, take pod indexes from one
//! counter, build the pod's `/filter` body (before the clock starts), send it, and unless told not
//! to, `/bind` the chosen node. Every answer is classified; latencies go into HDR histograms, in
//! total and per second. A progress line goes to stderr every second. Only the target is called.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use hdrhistogram::Histogram;
use rand::seq::index;
use serde::Deserialize;
use serde_json::Value;

use crate::mix::{self, Kind, PodId, Shape, Shapes, Stream};

/// Which nodes each filter offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidates {
    /// kube-scheduler's: each pod is offered the next window of `numFeasibleNodesToFind` nodes
    /// (see [`window_size`]) in node order, starting where the previous pod's window stopped and
    /// wrapping around. The value is `percentageOfNodesToScore` (0: adaptive).
    Window(u32),
    /// Every node, the same list for every pod.
    All,
    /// K distinct nodes drawn per pod.
    Random(usize),
}

impl FromStr for Candidates {
    type Err = String;
    fn from_str(s: &str) -> Result<Candidates, String> {
        match s.trim() {
            // The percentage comes from its own flag (`--percentage-of-nodes-to-score`).
            "window" => Ok(Candidates::Window(0)),
            "all" => Ok(Candidates::All),
            t => match t.parse::<usize>() {
                Ok(k) if k > 0 => Ok(Candidates::Random(k)),
                _ => Err(format!("{s:?} is neither \"window\", \"all\" nor a positive number")),
            },
        }
    }
}

impl std::fmt::Display for Candidates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Candidates::Window(_) => f.write_str("window"),
            Candidates::All => f.write_str("all"),
            Candidates::Random(k) => write!(f, "{k}"),
        }
    }
}

impl Candidates {
    /// How many names each filter carries on a cluster of `nodes`.
    pub fn per_filter(self, nodes: usize) -> usize {
        match self {
            Candidates::Window(p) => window_size(nodes, p),
            Candidates::All => nodes,
            Candidates::Random(k) => k.min(nodes),
        }
    }

    /// For the report: `window (420 of 1000 nodes, adaptive 42%)`, `all`, `10`.
    pub fn describe(self, nodes: usize) -> String {
        match self {
            Candidates::Window(p) => {
                let how = if p == 0 { format!("adaptive {}%", adaptive_percentage(nodes)) } else { format!("{p}%") };
                format!("window ({} of {nodes} nodes, {how})", window_size(nodes, p))
            }
            other => other.to_string(),
        }
    }
}

/// kube-scheduler's `minFeasibleNodesToFind`: below this many nodes every node is evaluated, and
/// no cycle stops before finding this many feasible nodes.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`: the adaptive percentage's floor.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// kube-scheduler's adaptive `percentageOfNodesToScore` (the configured value 0):
/// `50 - nodes/125`, at least 5.
pub fn adaptive_percentage(nodes: usize) -> usize {
    50usize.saturating_sub(nodes / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
}

/// kube-scheduler's `numFeasibleNodesToFind` (pkg/scheduler/schedule_one.go): how many feasible
/// nodes a scheduling cycle looks for before it stops, and so how many names the extender's
/// `/filter` receives when every node passes the in-tree filters. Every node below 100 nodes or
/// at `percentage` 100; else `nodes * percentage / 100` (the adaptive percentage for 0), at least
/// 100. 1,000 nodes: 420; 5,000: 500; 20,000: 1,000.
pub fn window_size(nodes: usize, percentage: u32) -> usize {
    let percentage = percentage as usize;
    if nodes < MIN_FEASIBLE_NODES_TO_FIND || percentage >= 100 {
        return nodes;
    }
    let percentage = if percentage == 0 { adaptive_percentage(nodes) } else { percentage };
    (nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// Where pod `i`'s window starts: kube-scheduler moves `nextStartNodeIndex` on by the nodes a
/// cycle processed, which is the window when every node is feasible, so pod `i` starts at
/// `i * window` (mod the nodes) whatever order the workers send the pods in.
pub fn window_start(i: u64, window: usize, nodes: usize) -> usize {
    if nodes == 0 {
        return 0;
    }
    let n = nodes as u128;
    ((u128::from(i) % n) * (window as u128 % n) % n) as usize
}

/// When the load stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    Pods(u64),
    For(Duration),
}

/// Duration mode stops at this many pods at the latest.
pub const MAX_PODS: u64 = 100_000_000;

/// Builds the load pods: pod `i` is always the same pod for the same seed and prefix.
pub struct Factory {
    pub shapes: Shapes,
    pub shape: Shape,
    pub seed: u64,
    pub naming: Naming,
    pub nodes: Arc<Vec<String>>,
    pub candidates: Candidates,
    /// Names per filter in window mode.
    window: usize,
    all_names: String,
}

/// Where the load pods live and what they are called: pod `i` is `<prefix>-<i>` in `namespace`,
/// for `scheduler_name`.
#[derive(Clone, Debug)]
pub struct Naming {
    pub namespace: String,
    pub prefix: String,
    pub scheduler_name: String,
}

/// One load pod, ready to send.
pub struct Prepared {
    pub id: PodId,
    pub kind: Kind,
    /// The core/v1 Pod sent in `Pod` (a [`Before`] hook may replace it, UID included).
    pub pod: Value,
    /// The `NodeNames` array, as JSON.
    pub names: String,
}

impl Prepared {
    /// `{"Pod":…,"Nodes":null,"NodeNames":[…]}`.
    pub fn filter_body(&self) -> Vec<u8> {
        let pod = serde_json::to_string(&self.pod).unwrap_or_else(|_| "null".into());
        format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":{}}}"#, self.names).into_bytes()
    }
}

impl Factory {
    pub fn new(
        shapes: Shapes,
        shape: Shape,
        seed: u64,
        naming: Naming,
        nodes: Arc<Vec<String>>,
        candidates: Candidates,
    ) -> Factory {
        let all_names = serde_json::to_string(&*nodes).unwrap_or_else(|_| "[]".into());
        let window = candidates.per_filter(nodes.len());
        Factory { shapes, shape, seed, naming, nodes, candidates, window, all_names }
    }

    pub fn make(&self, i: u64) -> Prepared {
        let mut rng = mix::pod_rng(self.seed, Stream::Load, i);
        let req = self.shapes.request(self.shape, i, &mut rng);
        let id = PodId::new(&self.naming.namespace, &self.naming.prefix, i);
        let pod = mix::pod_json(&id, &req, &self.naming.scheduler_name);
        let n = self.nodes.len();
        let names = match self.candidates {
            Candidates::Random(k) if k < n => {
                let picked: Vec<&str> =
                    index::sample(&mut rng, n, k).into_iter().map(|j| self.nodes[j].as_str()).collect();
                serde_json::to_string(&picked).unwrap_or_else(|_| "[]".into())
            }
            Candidates::Window(_) if self.window < n => {
                let start = window_start(i, self.window, n);
                let picked: Vec<&str> = (0..self.window).map(|k| self.nodes[(start + k) % n].as_str()).collect();
                serde_json::to_string(&picked).unwrap_or_else(|_| "[]".into())
            }
            _ => self.all_names.clone(),
        };
        Prepared { id, kind: req.kind, pod, names }
    }
}

/// Something to do with each pod before its filter (create it in an API server, then send the
/// pod as created). Not timed.
pub trait Before: Send + Sync {
    fn before<'a>(&'a self, p: &'a mut Prepared) -> BoxFuture<'a, Result<(), String>>;
}

/// How a filter answer was taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Exactly one node in `NodeNames`.
    Chosen(String),
    /// No node, `FailedNodes` filled: one of its reasons, as `node: reason`.
    NoFit(String),
    /// Anything else: (kind, a sample message).
    Error(String, String),
}

#[derive(Deserialize)]
struct FilterAnswer {
    #[serde(rename = "NodeNames", default)]
    node_names: Option<Vec<String>>,
    #[serde(rename = "FailedNodes", default)]
    failed_nodes: Option<BTreeMap<String, String>>,
    #[serde(rename = "FailedAndUnresolvableNodes", default)]
    unresolvable: Option<BTreeMap<String, String>>,
    #[serde(rename = "Error", default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct BindAnswer {
    #[serde(rename = "Error", default)]
    error: Option<String>,
}

/// A message's class: digits become `N`, quoted text `"…"`, at most 80 characters, so errors that
/// differ only by pod, node or number count as one kind.
pub fn text_class(s: &str) -> String {
    let mut out = String::new();
    let mut in_quote = false;
    let mut last_digit = false;
    for c in s.chars() {
        if in_quote {
            if c == '"' {
                in_quote = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_quote = true;
                out.push_str("\"…\"");
                last_digit = false;
            }
            '0'..='9' => {
                if !last_digit {
                    out.push('N');
                }
                last_digit = true;
            }
            _ => {
                out.push(c);
                last_digit = false;
            }
        }
        if out.chars().count() >= 80 {
            out.push('…');
            break;
        }
    }
    out
}

fn snippet(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    s.chars().take(300).collect()
}

fn http_status(status: u16, body: &[u8]) -> Option<(String, String)> {
    (status != 200).then(|| (format!("http {status}"), snippet(body)))
}

pub fn classify_filter(status: u16, body: &[u8]) -> Verdict {
    if let Some((k, s)) = http_status(status, body) {
        return Verdict::Error(k, s);
    }
    let a: FilterAnswer = match serde_json::from_slice(body) {
        Ok(a) => a,
        Err(e) => {
            return Verdict::Error("answer is not ExtenderFilterResult JSON".into(), format!("{e}: {}", snippet(body)));
        }
    };
    if let Some(e) = a.error.filter(|e| !e.is_empty()) {
        return Verdict::Error(format!("error: {}", text_class(&e)), e);
    }
    match a.node_names.as_deref() {
        Some([one]) => Verdict::Chosen(one.clone()),
        Some(names) if names.len() > 1 => Verdict::Error(
            "several nodes answered (pass-through?)".into(),
            format!("{} nodes: {}", names.len(), names.iter().take(3).cloned().collect::<Vec<_>>().join(",")),
        ),
        _ => match a.failed_nodes.iter().chain(a.unresolvable.iter()).flat_map(|m| m.iter()).next() {
            Some((node, why)) => Verdict::NoFit(format!("{node}: {why}")),
            None => Verdict::Error("no node and no failed nodes".into(), snippet(body)),
        },
    }
}

pub fn classify_bind(status: u16, body: &[u8]) -> Result<(), (String, String)> {
    if let Some(e) = http_status(status, body) {
        return Err(e);
    }
    match serde_json::from_slice::<BindAnswer>(body) {
        Ok(BindAnswer { error: Some(e) }) if !e.is_empty() => Err((format!("error: {}", text_class(&e)), e)),
        Ok(_) => Ok(()),
        Err(e) => Err(("answer is not ExtenderBindingResult JSON".into(), format!("{e}: {}", snippet(body)))),
    }
}

fn transport_kind(e: &reqwest::Error) -> String {
    let k = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else if e.is_request() {
        "request"
    } else {
        "other"
    };
    format!("transport: {k}")
}

/// Latencies of one endpoint: in total and per second of the run, in microseconds.
pub struct Series {
    pub total: Histogram<u64>,
    pub per_second: Vec<Histogram<u64>>,
}

/// Largest latency kept: a minute.
const MAX_US: u64 = 60_000_000;

fn hist(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, sigfig).expect("constant bounds and 2-3 significant figures are valid")
}

impl Default for Series {
    fn default() -> Series {
        Series { total: hist(3), per_second: Vec::new() }
    }
}

impl Series {
    /// Adds `later`'s latencies; its seconds follow this series' seconds.
    pub fn append(&mut self, later: Series) {
        let _ = self.total.add(&later.total);
        self.per_second.extend(later.per_second);
    }

    pub fn record(&mut self, at: Duration, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(MAX_US).clamp(1, MAX_US);
        self.total.saturating_record(us);
        let sec = at.as_secs() as usize;
        while self.per_second.len() <= sec {
            self.per_second.push(hist(2));
        }
        self.per_second[sec].saturating_record(us);
    }
}

/// Everything a run counted.
#[derive(Default)]
pub struct Recorder {
    pub filter: Series,
    pub bind: Series,
    pub filters_sent: u64,
    pub binds_sent: u64,
    pub scheduled: u64,
    pub no_fit: u64,
    pub bound: u64,
    pub errors: BTreeMap<String, u64>,
    pub error_samples: BTreeMap<String, String>,
    pub kinds: BTreeMap<Kind, u64>,
}

impl Recorder {
    fn error(&mut self, kind: String, sample: String) {
        *self.errors.entry(kind.clone()).or_insert(0) += 1;
        self.error_samples.entry(kind).or_insert(sample);
    }
    pub fn errors_total(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Adds a later phase's counts and latencies to this one's.
    pub fn append(&mut self, later: Recorder) {
        // Both series get the same number of seconds, so filter and bind stay aligned.
        let secs = self.filter.per_second.len().max(self.bind.per_second.len());
        for s in [&mut self.filter, &mut self.bind] {
            while s.per_second.len() < secs {
                s.per_second.push(hist(2));
            }
        }
        self.filter.append(later.filter);
        self.bind.append(later.bind);
        self.filters_sent += later.filters_sent;
        self.binds_sent += later.binds_sent;
        self.scheduled += later.scheduled;
        self.no_fit += later.no_fit;
        self.bound += later.bound;
        for (k, v) in later.errors {
            *self.errors.entry(k).or_insert(0) += v;
        }
        for (k, v) in later.error_samples {
            self.error_samples.entry(k).or_insert(v);
        }
        for (k, v) in later.kinds {
            *self.kinds.entry(k).or_insert(0) += v;
        }
    }
}

/// What the workers need.
pub struct Load {
    pub base: String,
    pub concurrency: usize,
    pub until: Until,
    pub filter_only: bool,
    pub timeout: Duration,
    pub progress: bool,
}

/// The result of one phase.
#[derive(Default)]
pub struct Outcome {
    pub rec: Recorder,
    pub elapsed: Duration,
}

impl Outcome {
    /// Adds a later phase against the same target (its time follows this one's).
    pub fn append(&mut self, later: Outcome) {
        self.rec.append(later.rec);
        self.elapsed += later.elapsed;
    }
}

struct Shared {
    rec: Mutex<Recorder>,
    next: AtomicU64,
    start: Instant,
}

impl Shared {
    fn with<R>(&self, f: impl FnOnce(&mut Recorder) -> R) -> R {
        let mut g = match self.rec.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&mut g)
    }
}

/// An HTTP/1.1 keep-alive client that never goes through a proxy.
pub fn client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .no_proxy()
        .http1_only()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1)
        .pool_idle_timeout(Duration::from_secs(60))
        .timeout(timeout)
        .build()
}

async fn post(c: &reqwest::Client, url: &str, body: Vec<u8>) -> Result<(u16, Vec<u8>), reqwest::Error> {
    let r = c.post(url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body).send().await?;
    let status = r.status().as_u16();
    Ok((status, r.bytes().await?.to_vec()))
}

async fn worker(
    load: Arc<Load>,
    factory: Arc<Factory>,
    before: Option<Arc<dyn Before>>,
    shared: Arc<Shared>,
    client: reqwest::Client,
    first_index: u64,
) {
    let (filter_url, bind_url) = (format!("{}/filter", load.base), format!("{}/bind", load.base));
    loop {
        let i = shared.next.fetch_add(1, Ordering::Relaxed);
        let more = match load.until {
            Until::Pods(n) => i < n,
            Until::For(d) => shared.start.elapsed() < d && i < MAX_PODS,
        };
        if !more {
            break;
        }
        let mut p = factory.make(first_index + i);
        shared.with(|r| *r.kinds.entry(p.kind).or_insert(0) += 1);
        if let Some(b) = &before
            && let Err(e) = b.before(&mut p).await
        {
            shared.with(|r| r.error(format!("create pod: {}", text_class(&e)), e));
            continue;
        }
        let body = p.filter_body();
        let t = Instant::now();
        let res = post(&client, &filter_url, body).await;
        let latency = t.elapsed();
        let at = t.saturating_duration_since(shared.start);
        let verdict = match &res {
            Ok((status, body)) => classify_filter(*status, body),
            Err(e) => Verdict::Error(transport_kind(e), e.to_string()),
        };
        shared.with(|r| {
            r.filters_sent += 1;
            if res.is_ok() {
                r.filter.record(at, latency);
            }
            match &verdict {
                Verdict::Chosen(_) => r.scheduled += 1,
                Verdict::NoFit(why) => {
                    r.no_fit += 1;
                    r.error("filter no-fit".into(), why.clone());
                }
                Verdict::Error(k, s) => r.error(format!("filter {k}"), s.clone()),
            }
        });
        let Verdict::Chosen(node) = verdict else { continue };
        if load.filter_only {
            continue;
        }
        let body =
            serde_json::json!({"PodName": p.id.name, "PodNamespace": p.id.namespace, "PodUID": p.id.uid, "Node": node});
        let t = Instant::now();
        let res = post(&client, &bind_url, body.to_string().into_bytes()).await;
        let latency = t.elapsed();
        let at = t.saturating_duration_since(shared.start);
        shared.with(|r| {
            r.binds_sent += 1;
            match &res {
                Ok((status, body)) => {
                    r.bind.record(at, latency);
                    match classify_bind(*status, body) {
                        Ok(()) => r.bound += 1,
                        Err((k, s)) => r.error(format!("bind {k}"), s),
                    }
                }
                Err(e) => r.error(format!("bind {}", transport_kind(e)), e.to_string()),
            }
        });
    }
}

fn ms(us: u64) -> String {
    format!("{:.2}ms", us as f64 / 1000.0)
}

/// Runs one phase: `load.concurrency` workers over pods `first_index..`, until `load.until`.
pub async fn drive(
    load: Load,
    factory: Arc<Factory>,
    before: Option<Arc<dyn Before>>,
    first_index: u64,
    label: &str,
) -> Result<Outcome, reqwest::Error> {
    let load = Arc::new(load);
    let shared =
        Arc::new(Shared { rec: Mutex::new(Recorder::default()), next: AtomicU64::new(0), start: Instant::now() });
    let mut workers = Vec::with_capacity(load.concurrency);
    for _ in 0..load.concurrency.max(1) {
        let c = client(load.timeout)?;
        workers.push(tokio::spawn(worker(
            load.clone(),
            factory.clone(),
            before.clone(),
            shared.clone(),
            c,
            first_index,
        )));
    }
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let progress = load.progress.then(|| {
        let (shared, label, until) = (shared.clone(), label.to_owned(), load.until);
        tokio::spawn(async move {
            let tty = std::io::stderr().is_terminal();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            let (mut last_f, mut last_b) = (0u64, 0u64);
            let mut printed = false;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = &mut stop_rx => break,
                }
                let line = shared.with(|r| {
                    let (f, b) = (r.filter.total.len(), r.bind.total.len());
                    let goal = match until {
                        Until::Pods(n) => format!("{}/{n} pods", r.filters_sent),
                        Until::For(d) => format!("{}s/{}s", shared.start.elapsed().as_secs(), d.as_secs()),
                    };
                    let mut s = format!(
                        "[{label} {:>4}s] filter {:>6}/s p99 {} | ",
                        shared.start.elapsed().as_secs(),
                        f - last_f,
                        ms(r.filter.total.value_at_quantile(0.99))
                    );
                    if b > 0 || r.binds_sent > 0 {
                        s.push_str(&format!(
                            "bind {:>6}/s p99 {} | ",
                            b - last_b,
                            ms(r.bind.total.value_at_quantile(0.99))
                        ));
                    }
                    s.push_str(&format!("errors {} | {goal}", r.errors_total() - r.no_fit));
                    (last_f, last_b) = (f, b);
                    s
                });
                let mut err = std::io::stderr().lock();
                let _ = if tty { write!(err, "\r\x1b[2K{line}") } else { writeln!(err, "{line}") };
                let _ = err.flush();
                printed = true;
            }
            if printed && tty {
                let _ = writeln!(std::io::stderr());
            }
        })
    });
    for w in workers {
        let _ = w.await;
    }
    let elapsed = shared.start.elapsed();
    let _ = stop_tx.send(());
    if let Some(p) = progress {
        let _ = p.await;
    }
    let rec = std::mem::take(&mut *match shared.rec.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    });
    Ok(Outcome { rec, elapsed })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_answers_are_classified() {
        let chosen =
            br#"{"Nodes":null,"NodeNames":["n1"],"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":""}"#;
        assert_eq!(classify_filter(200, chosen), Verdict::Chosen("n1".into()));
        let nofit = br#"{"Nodes":null,"NodeNames":null,"FailedNodes":{"n1":"1/1 CardInsufficientMemory"},"Error":""}"#;
        assert_eq!(classify_filter(200, nofit), Verdict::NoFit("n1: 1/1 CardInsufficientMemory".into()));
        let err = br#"{"NodeNames":null,"Error":"node lock on node-12 held by ns/p-3"}"#;
        match classify_filter(200, err) {
            Verdict::Error(k, s) => {
                assert_eq!(k, "error: node lock on node-N held by ns/p-N");
                assert!(s.contains("node-12"));
            }
            v => panic!("{v:?}"),
        }
        assert!(matches!(classify_filter(400, b"{\"error\":\"x\"}"), Verdict::Error(k, _) if k == "http 400"));
        assert!(matches!(classify_filter(200, b"<html>"), Verdict::Error(k, _) if k.starts_with("answer is not")));
        assert!(
            matches!(classify_filter(200, br#"{"NodeNames":["a","b"]}"#), Verdict::Error(k, _) if k.starts_with("several"))
        );
        assert!(
            matches!(classify_filter(200, br#"{"NodeNames":[]}"#), Verdict::Error(k, _) if k.starts_with("no node"))
        );
    }

    #[test]
    fn bind_answers_are_classified() {
        assert_eq!(classify_bind(200, br#"{"Error":""}"#), Ok(()));
        assert_eq!(
            classify_bind(200, br#"{"Error":"pod \"p-1\" not found"}"#).map_err(|e| e.0),
            Err("error: pod \"…\" not found".into())
        );
        assert_eq!(classify_bind(500, b"").map_err(|e| e.0), Err("http 500".into()));
    }

    #[test]
    fn the_same_index_builds_the_same_body() {
        let nodes = Arc::new((0..50).map(|i| format!("n{i}")).collect::<Vec<_>>());
        let f = |c| {
            Factory::new(
                Shapes::Mix(crate::mix::Mix::DEFAULT.parse().expect("parses")),
                Shape { gpus_per_node: 8, gpu_mem: 16384 },
                11,
                Naming { namespace: "loadtest".into(), prefix: "lt-x".into(), scheduler_name: "hami-scheduler".into() },
                nodes.clone(),
                c,
            )
        };
        let (a, b) = (f(Candidates::Random(5)), f(Candidates::Random(5)));
        assert_eq!(a.make(7).filter_body(), b.make(7).filter_body());
        assert_ne!(a.make(7).filter_body(), a.make(8).filter_body());
        let v: Value = serde_json::from_slice(&a.make(7).filter_body()).expect("JSON");
        let names = v["NodeNames"].as_array().expect("names");
        assert_eq!(names.len(), 5);
        let mut uniq: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq.len(), 5);
        assert!(v["Nodes"].is_null());
        let all: Value = serde_json::from_slice(&f(Candidates::All).make(1).filter_body()).expect("JSON");
        assert_eq!(all["NodeNames"].as_array().map(Vec::len), Some(50));
        let body = a.make(3).filter_body();
        let args: hami_rs::http::wire::ExtenderArgs<'_> =
            serde_json::from_slice(&body).expect("hami-rs decodes the body");
        assert_eq!(args.pod.map(|p| p.metadata.name), Some("lt-x-3".to_owned()));
        assert_eq!("all".parse::<Candidates>(), Ok(Candidates::All));
        assert_eq!("window".parse::<Candidates>(), Ok(Candidates::Window(0)));
        assert!("0".parse::<Candidates>().is_err());
    }

    #[test]
    fn windows_are_kube_schedulers_num_feasible_nodes_to_find() {
        // Below minFeasibleNodesToFind (100) every node.
        assert_eq!(window_size(1, 0), 1);
        assert_eq!(window_size(99, 0), 99);
        assert_eq!(window_size(99, 10), 99);
        // Adaptive: 50 - nodes/125 percent, at least 5 %, at least 100 nodes.
        assert_eq!(window_size(100, 0), 100, "50 % of 100 is 50, raised to 100");
        assert_eq!(window_size(250, 0), 120, "48 %");
        assert_eq!(window_size(1000, 0), 420, "42 %");
        assert_eq!(window_size(5000, 0), 500, "10 %");
        assert_eq!(window_size(6000, 0), 300, "50 - 48 = 2, raised to 5 %");
        assert_eq!(window_size(20_000, 0), 1000, "5 %");
        assert_eq!(window_size(100_000, 0), 5000, "5 %");
        // A configured percentage.
        assert_eq!(window_size(1000, 30), 300);
        assert_eq!(window_size(1000, 5), 100, "50 raised to 100");
        assert_eq!(window_size(5000, 50), 2500);
        assert_eq!(window_size(1000, 100), 1000);
        assert_eq!(window_size(20_000, 100), 20_000);
        assert_eq!(adaptive_percentage(1000), 42);
        assert_eq!(Candidates::Window(0).describe(1000), "window (420 of 1000 nodes, adaptive 42%)");
        assert_eq!(Candidates::Window(30).describe(1000), "window (300 of 1000 nodes, 30%)");
        assert_eq!(Candidates::Random(5).per_filter(3), 3);
    }

    fn window_factory(nodes: usize, percentage: u32) -> Factory {
        Factory::new(
            Shapes::Four,
            Shape { gpus_per_node: 8, gpu_mem: 16384 },
            1,
            Naming { namespace: "loadtest".into(), prefix: "lt-w".into(), scheduler_name: "hami-scheduler".into() },
            Arc::new((0..nodes).map(|i| format!("n{i}")).collect()),
            Candidates::Window(percentage),
        )
    }

    fn names_of(p: &Prepared) -> Vec<String> {
        serde_json::from_str(&p.names).expect("a JSON array of names")
    }

    #[test]
    fn windows_rotate_in_node_order_and_wrap_around() {
        let f = window_factory(1000, 0);
        let w = |i| names_of(&f.make(i));
        let first = w(0);
        assert_eq!(first.len(), 420);
        assert_eq!((first[0].as_str(), first[419].as_str()), ("n0", "n419"));
        assert_eq!((w(1)[0].as_str(), w(1)[419].as_str()), ("n420", "n839"), "the next pod starts where this stopped");
        let third = w(2);
        assert_eq!((third[0].as_str(), third[159].as_str(), third[160].as_str()), ("n840", "n999", "n0"), "wraps");
        assert_eq!(third[419], "n259");
        assert_eq!(w(3)[0], "n260");
        // 1000 / gcd(1000, 420) = 50 distinct windows, then the rotation repeats.
        assert_eq!(w(50), first);
        assert_ne!(w(49), first);
        // The window depends on the pod index alone, not on the order pods are made in.
        assert_eq!(f.make(7).names, window_factory(1000, 0).make(7).names);
        // A configured percentage; 100 % and small clusters get every node, always from the first.
        assert_eq!(names_of(&window_factory(1000, 30).make(1))[0], "n300");
        for (nodes, pct) in [(1000, 100), (60, 0)] {
            let f = window_factory(nodes, pct);
            assert_eq!(names_of(&f.make(3)).len(), nodes);
            assert_eq!(names_of(&f.make(3))[0], "n0");
        }
        assert_eq!(window_start(u64::MAX, 420, 1000), ((u64::MAX % 1000) * 420 % 1000) as usize);
    }

    #[test]
    fn every_pod_is_a_new_pod() {
        let f = window_factory(200, 0);
        let mut uids: Vec<String> = (0..500).map(|i| f.make(i).id.uid).collect();
        let mut names: Vec<String> = (0..500).map(|i| f.make(i).id.name).collect();
        uids.sort_unstable();
        uids.dedup();
        names.sort_unstable();
        names.dedup();
        assert_eq!((uids.len(), names.len()), (500, 500));
        let kinds: Vec<Kind> = (0..4).map(|i| f.make(i).kind).collect();
        assert_eq!(kinds, [Kind::Cores, Kind::Cores, Kind::Multi, Kind::Percent]);
    }

    #[test]
    fn phases_append_counts_and_seconds() {
        let phase = |n: u64| {
            let mut r = Recorder::default();
            for i in 0..n {
                r.filter.record(Duration::from_millis(i * 10), Duration::from_micros(200));
            }
            r.filters_sent = n;
            r.errors.insert("filter no-fit".into(), 1);
            Outcome { rec: r, elapsed: Duration::from_millis(n * 10) }
        };
        let mut o = phase(150);
        o.append(phase(50));
        assert_eq!(o.rec.filters_sent, 200);
        assert_eq!(o.rec.filter.total.len(), 200);
        assert_eq!(o.rec.filter.per_second.len(), 3);
        assert_eq!(o.rec.bind.per_second.len(), 2, "bind seconds padded to the filter's before appending");
        assert_eq!(o.rec.errors.get("filter no-fit"), Some(&2));
        assert_eq!(o.elapsed, Duration::from_secs(2));
    }

    #[test]
    fn series_keep_the_total_and_each_second() {
        let mut s = Series::default();
        s.record(Duration::from_millis(100), Duration::from_micros(500));
        s.record(Duration::from_millis(2100), Duration::from_micros(1500));
        assert_eq!(s.total.len(), 2);
        assert_eq!(s.per_second.len(), 3);
        assert_eq!(s.per_second[1].len(), 0);
        assert!(s.total.max() >= 1499);
    }
}
