//! A real `hami-rs serve --cluster-file examples/cluster.json` process over HTTP. Its `/metrics`:
//! HAMi's gauge names, labels and values against what the example cluster holds,
//! the device gauges following a bind, the request histograms and counters, and the legacy names
//! only behind `--legacy-metrics`. Its log at info: one line per request, no pod spec or values.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const MIB: f64 = 1_048_576.0;

/// One sample of the text exposition format.
#[derive(Clone, Debug, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the Prometheus text format (the subset any exporter writes: no timestamps needed).
fn parse(text: &str) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (head, value) = line.rsplit_once(' ').ok_or_else(|| format!("no value in {line:?}"))?;
        let value = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse::<f64>().map_err(|e| format!("{line:?}: {e}"))?,
        };
        let (name, labels) = match head.split_once('{') {
            None => (head.to_owned(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').ok_or_else(|| format!("unclosed labels in {line:?}"))?;
                (name.to_owned(), parse_labels(body).map_err(|e| format!("{line:?}: {e}"))?)
            }
        };
        out.push(Sample { name, labels, value });
    }
    Ok(out)
}

fn parse_labels(body: &str) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    let mut chars = body.chars().peekable();
    loop {
        while chars.peek() == Some(&',') || chars.peek() == Some(&' ') {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(labels);
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if chars.next() != Some('"') {
            return Err(format!("label {key} has no quoted value"));
        }
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('\\') => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => return Err("dangling escape".into()),
                },
                Some('"') => break,
                Some(c) => value.push(c),
                None => return Err(format!("label {key} is not closed")),
            }
        }
        labels.insert(key, value);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}

/// A `hami-rs serve` child, killed on drop.
struct Serve {
    child: Child,
    base: String,
    metrics: String,
    http: reqwest::Client,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// Stops the process as Kubernetes does (SIGTERM) and waits for it to exit: its log is then
    /// complete, the lines it held in memory written out.
    fn stop(mut self) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: signals our own child, which has not been waited for yet.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "SIGTERM sent");
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.child.try_wait().expect("the child's status").is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("hami-rs did not exit within 20 s of SIGTERM");
    }

    async fn start(extra: &[&str]) -> Serve {
        Serve::start_logging(extra, Stdio::inherit(), "warn").await
    }

    async fn start_logging(extra: &[&str], log: Stdio, level: &str) -> Serve {
        let (port, metrics_port) = (free_port(), free_port());
        let cluster = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cluster.json");
        let child = Command::new(env!("CARGO_BIN_EXE_hami-rs"))
            .args(["serve", "--cluster-file", cluster])
            .arg(format!("--http_bind=127.0.0.1:{port}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .args(extra)
            .env("RUST_LOG", level)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("hami-rs starts");
        let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(10)).build().expect("a client");
        let s = Serve {
            child,
            base: format!("http://127.0.0.1:{port}"),
            metrics: format!("http://127.0.0.1:{metrics_port}/metrics"),
            http,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = s.http.get(format!("{}/readyz", s.base)).send().await.is_ok_and(|r| r.status().is_success());
            let scraped = s.http.get(&s.metrics).send().await.is_ok_and(|r| r.status().is_success());
            if ready && scraped {
                return s;
            }
            assert!(Instant::now() < deadline, "hami-rs did not answer /readyz and /metrics within 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn scrape(&self) -> Vec<Sample> {
        let r = self.http.get(&self.metrics).send().await.expect("GET /metrics");
        assert!(r.status().is_success(), "/metrics answered {}", r.status());
        let ctype = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        assert!(ctype.starts_with("text/plain"), "content type {ctype:?}");
        parse(&r.text().await.expect("a body")).expect("the text exposition format")
    }

    async fn post(&self, path: &str, body: &Value) -> Value {
        let r = self.http.post(format!("{}{path}", self.base)).json(body).send().await.expect("POST");
        assert!(r.status().is_success(), "{path} answered {}", r.status());
        r.json().await.expect("a JSON answer")
    }

    /// Scrapes until `ok` holds (the device gauges follow commits, not the request itself).
    async fn scrape_until(&self, what: &str, ok: impl Fn(&[Sample]) -> bool) -> Vec<Sample> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.scrape().await;
            if ok(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "within 10 s: {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn find<'a>(s: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    s.iter()
        .filter(|x| x.name == name && labels.iter().all(|(k, v)| x.labels.get(*k).map(String::as_str) == Some(*v)))
        .collect()
}

fn one(s: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let f = find(s, name, labels);
    assert_eq!(f.len(), 1, "exactly one {name}{labels:?}, found {f:?}");
    f[0].value
}

fn sum(s: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    find(s, name, labels).iter().map(|x| x.value).sum()
}

/// Per device UUID, (MiB, cores, pods) that the example cluster's live pods hold, read straight
/// from their `hami.io/vgpu-devices-allocated` annotations (finished pods hold nothing).
fn example_usage() -> BTreeMap<String, (f64, f64, f64)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cluster.json")).expect("file");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    let mut out = BTreeMap::new();
    for pod in v["items"].as_array().expect("items").iter().filter(|i| i["kind"] == "Pod") {
        if matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed")) {
            continue;
        }
        let Some(a) = pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"].as_str() else { continue };
        for dev in a.split([';', ':']).filter(|d| !d.is_empty()) {
            let f: Vec<&str> = dev.split(',').collect();
            let e = out.entry(f[0].to_owned()).or_insert((0.0, 0.0, 0.0));
            e.0 += f[2].parse::<f64>().expect("MiB");
            e.1 += f[3].parse::<f64>().expect("cores");
            e.2 += 1.0;
        }
    }
    out
}

fn gpu_pod(name: &str, mem_mib: u64) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"schedulerName": "hami-scheduler", "containers": [{
            "name": "main", "image": "cuda",
            "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem_mib.to_string()}}
        }]}
    })
}

fn filter_args(pod: Value) -> Value {
    json!({"Pod": pod, "Nodes": null, "NodeNames": ["node-a", "node-b", "node-c", "node-cpu"]})
}

#[tokio::test]
async fn metrics_show_hamis_gauges_for_the_example_cluster_and_follow_filters_and_binds() {
    let serve = Serve::start(&[]).await;
    let s = serve.scrape().await;

    // hami_build_info: the one metric without `zone`.
    let info = find(&s, "hami_build_info", &[]);
    assert_eq!(info.len(), 1, "{info:?}");
    assert_eq!(info[0].value, 1.0);
    assert_eq!(info[0].labels.get("version").map(String::as_str), Some(env!("CARGO_PKG_VERSION")));
    for k in ["revision", "build_date", "go_version", "compiler", "platform"] {
        assert!(info[0].labels.contains_key(k), "hami_build_info has {k}: {:?}", info[0].labels);
    }
    assert!(!info[0].labels.contains_key("zone"));
    for x in s.iter().filter(|x| x.name.starts_with("hami_") && !x.name.starts_with("hami_scheduler_")) {
        if x.name != "hami_build_info" {
            assert_eq!(x.labels.get("zone").map(String::as_str), Some("vGPU"), "{x:?}");
        }
    }

    // Counters are there at zero before their first event, so a rate over them is never "No data".
    for (name, labels) in [
        ("hami_scheduler_node_lock_waits_total", vec![]),
        ("hami_scheduler_node_lock_timeouts_total", vec![]),
        ("hami_scheduler_node_lock_handovers_total", vec![]),
        ("hami_scheduler_reservations_expired_total", vec![]),
        ("hami_scheduler_api_requests_total", vec![("verb", "patch"), ("resource", "nodes"), ("result", "error")]),
        ("hami_scheduler_decisions_total", vec![("request", "bind"), ("outcome", "error")]),
        ("hami_scheduler_decisions_total", vec![("request", "filter"), ("outcome", "no_fit")]),
        ("hami_scheduler_binds_elsewhere_total", vec![("outcome", "placed")]),
        ("hami_scheduler_filter_duration_seconds_count", vec![("outcome", "error")]),
        ("hami_scheduler_bind_duration_seconds_count", vec![("outcome", "bound")]),
        ("hami_scheduler_phase_duration_seconds_count", vec![("phase", "bind_backlog")]),
        ("hami_scheduler_preemptions_total", vec![("outcome", "started")]),
        ("hami_scheduler_preemption_victims_total", vec![]),
    ] {
        assert_eq!(one(&s, name, &labels), 0.0, "{name} {labels:?} at zero from the start");
    }

    // Limits of a device as registered: node-a's GPU 0 is a 32768 MiB V100.
    let a0 = "GPU-a0000000-0000-4000-8000-000000000000";
    let dev = [("node", "node-a"), ("device_uuid", a0), ("device_index", "0")];
    assert_eq!(one(&s, "hami_gpu_memory_limit_bytes", &dev), 32768.0 * MIB);
    assert_eq!(one(&s, "hami_gpu_core_limit_ratio", &dev), 100.0);
    let limit = find(&s, "hami_gpu_memory_limit_bytes", &dev)[0];
    assert_eq!(limit.labels.get("device_type").map(String::as_str), Some("NVIDIA-Tesla V100-PCIE-32GB"));
    let overview = find(&s, "hami_node_gpu_overview", &dev);
    assert_eq!(overview.len(), 1);
    assert_eq!(overview[0].labels.get("device_memory_limit").map(String::as_str), Some("32768"));
    assert_eq!(overview[0].labels.get("device_cores").map(String::as_str), Some("100"));

    // Usage exactly as the pods' annotations say, device by device (done-0 has finished).
    let usage = example_usage();
    assert_eq!(usage.len(), 3, "{usage:?}");
    for (uuid, (mem, cores, pods)) in &usage {
        let d = [("device_uuid", uuid.as_str())];
        assert_eq!(one(&s, "hami_gpu_memory_allocated_bytes", &d), mem * MIB, "{uuid}");
        assert_eq!(one(&s, "hami_gpu_core_allocated_ratio", &d), *cores, "{uuid}");
        assert_eq!(one(&s, "hami_gpu_shared_count", &d), *pods, "{uuid}");
        assert_eq!(one(&s, "hami_node_gpu_overview", &d), mem * MIB, "{uuid}");
    }
    let a1 = [("device_uuid", "GPU-a0000000-0000-4000-8000-000000000001")];
    assert_eq!(one(&s, "hami_gpu_shared_count", &a1), 0.0, "the finished pod frees its device");
    assert_eq!(one(&s, "hami_gpu_memory_allocated_bytes", &a1), 0.0);
    let ratio = one(&s, "hami_node_gpu_memory_allocated_ratio", &dev);
    assert!((ratio - 8000.0 / 32768.0).abs() < 1e-9, "{ratio}");
    let pod = [("namespace", "team-a"), ("pod", "notebook-0"), ("node", "node-a"), ("container_index", "0")];
    assert_eq!(
        one(&s, "hami_vgpu_memory_allocated_bytes", &[pod.as_slice(), &[("device_uuid", a0)]].concat()),
        8000.0 * MIB
    );
    assert_eq!(one(&s, "hami_vgpu_core_allocated_ratio", &pod), 30.0);
    assert!(find(&s, "hami_vgpu_memory_allocated_bytes", &[("pod", "done-0")]).is_empty());
    assert!(find(&s, "GPUDeviceMemoryLimit", &[]).is_empty(), "legacy names only behind --legacy-metrics");
    assert_eq!(one(&s, "hami_scheduler_leader", &[]), 1.0, "serve --cluster-file is always the leader");
    // HAMi's own state gauges, with the zone label its registry adds to every scheduler gauge.
    assert_eq!(one(&s, "hami_scheduler_is_leader", &[("zone", "vGPU")]), 1.0, "HAMi's leader gauge");
    assert_eq!(one(&s, "hami_scheduler_cache_synced", &[("zone", "vGPU")]), 1.0, "the file is loaded before serving");

    let total_mem = |s: &[Sample]| sum(s, "hami_gpu_memory_allocated_bytes", &[]);
    let total_pods = |s: &[Sample]| sum(s, "hami_gpu_shared_count", &[]);
    let count = |s: &[Sample], name: &str, labels: &[(&str, &str)]| sum(s, &format!("{name}_count"), labels);
    let (mem0, pods0) = (total_mem(&s), total_pods(&s));
    let filters0 = count(&s, "hami_scheduler_filter_duration_seconds", &[("outcome", "scheduled")]);

    // A pod that fits: filter, then bind to the node it got.
    let answer = serve.post("/filter", &filter_args(gpu_pod("scrape-fit", 1000))).await;
    let node = answer["NodeNames"][0].as_str().expect("a node").to_owned();
    let held = serve.scrape().await;
    assert_eq!(one(&held, "hami_scheduler_reservations_outstanding", &[]), 1.0, "the reservation, in the next scrape");
    let bound = serve
        .post(
            "/bind",
            &json!({"PodName": "scrape-fit", "PodNamespace": "default", "PodUID": "uid-scrape-fit", "Node": node}),
        )
        .await;
    assert_eq!(bound["Error"].as_str().unwrap_or(""), "", "{bound}");
    let s = serve
        .scrape_until("the bound pod's 1000 MiB show in the device gauges", |s| {
            total_mem(s) == mem0 + 1000.0 * MIB && total_pods(s) == pods0 + 1.0
        })
        .await;
    assert_eq!(one(&s, "hami_vgpu_memory_allocated_bytes", &[("pod", "scrape-fit"), ("node", &node)]), 1000.0 * MIB);
    assert_eq!(count(&s, "hami_scheduler_filter_duration_seconds", &[("outcome", "scheduled")]), filters0 + 1.0);
    assert_eq!(count(&s, "hami_scheduler_bind_duration_seconds", &[("outcome", "bound")]), 1.0);
    assert_eq!(one(&s, "hami_scheduler_decisions_total", &[("request", "bind"), ("outcome", "bound")]), 1.0);
    assert!(one(&s, "hami_scheduler_decisions_total", &[("request", "filter"), ("outcome", "scheduled")]) >= 1.0);
    let evaluated = sum(&s, "hami_scheduler_filter_nodes_evaluated_total", &[]);
    assert!(evaluated >= 4.0, "the filter's four candidates were evaluated: {evaluated}");
    for phase in ["decode", "fan_out", "reserve", "lock_wait", "api_write"] {
        assert!(
            count(&s, "hami_scheduler_phase_duration_seconds", &[("phase", phase)]) >= 1.0,
            "phase {phase} recorded"
        );
    }
    // A histogram's buckets are cumulative and end in +Inf = _count.
    let buckets = find(&s, "hami_scheduler_bind_duration_seconds_bucket", &[("outcome", "bound")]);
    assert!(buckets.len() >= 5, "{buckets:?}");
    assert!(buckets.windows(2).all(|w| w[0].value <= w[1].value), "cumulative: {buckets:?}");
    assert_eq!(one(&s, "hami_scheduler_bind_duration_seconds_bucket", &[("outcome", "bound"), ("le", "+Inf")]), 1.0);
    assert!(sum(&s, "hami_scheduler_bind_duration_seconds_sum", &[]) > 0.0);

    // A pod no GPU can hold: a no-fit decision, and the refused pod counted once under each
    // reason its candidates gave (however many GPUs or nodes gave it).
    let answer = serve.post("/filter", &filter_args(gpu_pod("scrape-too-big", 200_000))).await;
    assert!(answer["NodeNames"].as_array().is_none_or(Vec::is_empty), "{answer}");
    let s = serve.scrape().await;
    assert_eq!(one(&s, "hami_scheduler_decisions_total", &[("request", "filter"), ("outcome", "no_fit")]), 1.0);
    assert_eq!(count(&s, "hami_scheduler_filter_duration_seconds", &[("outcome", "no_fit")]), 1.0);
    // Every registered GPU lacks memory except node-b's cordoned one; node-cpu has no devices.
    let gpus = find(&s, "hami_gpu_memory_limit_bytes", &[]).len() as f64;
    assert_eq!(gpus, 10.0, "node-a 2, node-b 4, node-c 4");
    assert_eq!(one(&s, "hami_scheduler_rejections_total", &[("reason", "CardInsufficientMemory")]), 1.0);
    assert_eq!(one(&s, "hami_scheduler_rejections_total", &[("reason", "CardCordoned")]), 1.0);
    assert_eq!(
        one(&s, "hami_scheduler_rejections_total", &[("reason", "NodeUnregistered")]),
        1.0,
        "node-cpu, in the refused pod's filter only (the placed pod's filter counts nothing)"
    );
    assert_eq!(total_mem(&s), mem0 + 1000.0 * MIB, "a failed filter reserves nothing");
}

#[tokio::test]
async fn legacy_metrics_add_hamis_old_names_with_their_labels() {
    let serve = Serve::start(&["--legacy-metrics"]).await;
    let s = serve.scrape().await;
    let a0 = "GPU-a0000000-0000-4000-8000-000000000000";
    let dev = [("nodeid", "node-a"), ("deviceuuid", a0), ("deviceidx", "0")];
    assert_eq!(one(&s, "GPUDeviceMemoryLimit", &dev), 32768.0 * MIB);
    assert_eq!(one(&s, "GPUDeviceCoreLimit", &dev), 100.0);
    assert_eq!(one(&s, "GPUDeviceMemoryAllocated", &dev), 8000.0 * MIB);
    assert_eq!(one(&s, "GPUDeviceCoreAllocated", &dev), 30.0);
    assert_eq!(one(&s, "GPUDeviceSharedNum", &dev), 1.0);
    assert_eq!(one(&s, "vGPUMemoryAllocated", &[("podname", "notebook-0"), ("nodename", "node-a")]), 8000.0 * MIB);
    // The new names stay.
    assert_eq!(one(&s, "hami_gpu_memory_limit_bytes", &[("node", "node-a"), ("device_uuid", a0)]), 32768.0 * MIB);
}

#[tokio::test]
async fn the_info_log_has_a_line_per_request_and_no_pod_spec_or_values() {
    let path = std::env::temp_dir().join(format!("hami-rs-serve-log-{}.txt", std::process::id()));
    let file = std::fs::File::create(&path).expect("a log file");
    let serve = Serve::start_logging(&["--scheduler-name=hami-scheduler"], Stdio::from(file), "info").await;
    let marker = "s3cr3t-value-7f1d";
    let mut pod = gpu_pod("log-fit", 1000);
    pod["spec"].as_object_mut().map(|s| s.remove("schedulerName"));
    pod["metadata"]["annotations"] = json!({"team.example/token": marker});
    pod["spec"]["containers"][0]["env"] = json!([{"name": "API_KEY", "value": marker}]);
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "review-1", "operation": "CREATE", "namespace": "default", "object": pod.clone()}
    });
    let admitted = serve.post("/webhook", &review).await;
    assert_eq!(admitted["response"]["allowed"], true, "{admitted}");
    assert!(admitted["response"]["patch"].is_string(), "the pod is mutated: {admitted}");
    let answer = serve.post("/filter", &filter_args(pod)).await;
    let node = answer["NodeNames"][0].as_str().expect("a node").to_owned();
    let bind = json!({"PodName": "log-fit", "PodNamespace": "default", "PodUID": "uid-log-fit", "Node": node});
    assert_eq!(serve.post("/bind", &bind).await["Error"].as_str().unwrap_or(""), "");
    serve.stop();
    let log = std::fs::read_to_string(&path).expect("the log");
    let _ = std::fs::remove_file(&path);
    assert!(!log.contains(marker), "a pod's annotation or env value reached the log:\n{log}");
    for never in ["\"containers\"", "\"spec\"", "nvidia.com/gpumem", "API_KEY"] {
        assert!(!log.contains(never), "the log shows pod spec text {never}:\n{log}");
    }
    let lines = |what: &str| log.lines().filter(|l| l.contains(" INFO ") && l.contains(what)).count();
    assert_eq!(lines("filter"), 1, "one info line per filter:\n{log}");
    assert_eq!(lines("bind"), 1, "one info line per bind:\n{log}");
    let filter = log.lines().find(|l| l.contains(" INFO ") && l.contains("filter")).unwrap_or_default();
    for field in ["pod=default/log-fit", "node=", node.as_str(), "outcome=", "latency_us="] {
        assert!(filter.contains(field), "the filter line has {field}: {filter}");
    }
}

#[tokio::test]
async fn the_log_gives_no_fit_reasons_at_info_refused_requests_at_warn_and_errors_at_error() {
    let path = std::env::temp_dir().join(format!("hami-rs-serve-levels-{}.txt", std::process::id()));
    let file = std::fs::File::create(&path).expect("a log file");
    let serve = Serve::start_logging(&["--scheduler-name=hami-scheduler"], Stdio::from(file), "info").await;
    let too_big = serve.post("/filter", &filter_args(gpu_pod("log-too-big", 10_000_000))).await;
    assert!(too_big["FailedNodes"].is_object(), "{too_big}");
    let mut unreadable = gpu_pod("log-unreadable", 1000);
    unreadable["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = json!("16Gi");
    let failed = serve.post("/filter", &filter_args(unreadable)).await;
    assert_ne!(failed["Error"].as_str().unwrap_or(""), "", "{failed}");
    let r = serve.http.post(format!("{}/filter", serve.base)).body("{not json").send().await.expect("POST");
    assert_eq!(r.status().as_u16(), 400);
    let s = serve.scrape().await;
    let errors = one(&s, "hami_scheduler_decisions_total", &[("request", "filter"), ("outcome", "error")]);
    assert_eq!(errors, 2.0, "the unreadable request and the refused body are both counted");
    serve.stop();
    let log = std::fs::read_to_string(&path).expect("the log");
    let _ = std::fs::remove_file(&path);
    let line = |level: &str, what: &str| {
        log.lines()
            .find(|l| l.contains(level) && l.contains(what))
            .unwrap_or_else(|| panic!("no {level} {what}:\n{log}"))
    };
    let no_fit = line(" INFO ", "log-too-big");
    assert!(no_fit.contains("outcome=\"no_fit\""), "{no_fit}");
    assert!(no_fit.contains("reason.CardInsufficientMemory="), "each reason a field: {no_fit}");
    assert!(no_fit.contains("reasons=") && no_fit.contains("CardInsufficientMemory"), "the reasons: {no_fit}");
    assert!(line(" ERROR ", "log-unreadable").contains("outcome=\"error\""));
    assert!(line(" WARN ", "request refused").contains("status=400"));
}

#[tokio::test]
async fn metrics_are_gzipped_when_the_scraper_asks() {
    use std::io::Read;
    let serve = Serve::start(&[]).await;
    let plain = serve.http.get(&serve.metrics).send().await.expect("GET").text().await.expect("text");
    let r = serve.http.get(&serve.metrics).header("accept-encoding", "gzip").send().await.expect("GET gzip");
    assert_eq!(r.headers().get("content-encoding").and_then(|v| v.to_str().ok()), Some("gzip"));
    let zipped = r.bytes().await.expect("a body");
    assert!(zipped.len() * 3 < plain.len(), "{} bytes against {}", zipped.len(), plain.len());
    let mut text = String::new();
    flate2::read::GzDecoder::new(&zipped[..]).read_to_string(&mut text).expect("gzip");
    assert!(parse(&text).expect("the text format").iter().any(|x| x.name == "hami_build_info"));
}

/// Runs `hami-rs` with `args` and `env` to its end (killed after 20 s, a run that should have
/// stopped at once): exit code (None when killed) and stderr.
fn run_to_end(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hami-rs"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hami-rs runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("waitable").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("its output");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn an_invalid_configuration_exits_64_listing_every_problem_once() {
    let (code, err) = run_to_end(
        &[
            "serve",
            "--cluster-file=examples/cluster.json",
            "--reservation-ttl=abc",
            "--node-scheduler-policy=spreed",
            "--gpu-scheduler-policy",
            "binpack,fastest",
            "--http_bind=127.0.0.1:0",
        ],
        &[("HAMI_BIND_LOCK_WAIT", "zz")],
    );
    assert_eq!(code, Some(64), "{err}");
    for problem in ["--reservation-ttl", "--bind-lock-wait", "\"spreed\"", "\"fastest\""] {
        assert_eq!(err.matches(problem).count(), 1, "{problem} named once:\n{err}");
    }
    assert!(!err.contains("listening"), "nothing listened:\n{err}");

    let dir = std::env::temp_dir().join(format!("hami-rs-bad-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let bad = dir.join("device-config.yaml");
    std::fs::write(&bad, "nvidia: [\n").expect("written");
    let flag = format!("--device-config-file={}", bad.display());
    let (code, err) = run_to_end(&["serve", "--cluster-file=examples/cluster.json", &flag], &[]);
    assert_eq!(code, Some(64), "{err}");
    assert_eq!(err.matches("not valid YAML").count(), 1, "the reason once:\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_port_in_use_fails_before_anything_claims_to_listen() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = format!("--http_bind={}", taken.local_addr().expect("its address"));
    let (code, err) = run_to_end(
        &["serve", "--cluster-file=examples/cluster.json", &addr, "--metrics-bind-address=127.0.0.1:0"],
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("cannot listen on"), "{err}");
    assert!(!err.contains("extender and webhook listening"), "{err}");
}

#[test]
fn the_parser_reads_labels_escapes_and_infinities() {
    let s = parse("# HELP x y\nx{a=\"1\",b=\"q\\\"uote\"} 2.5\ny 3\nz_bucket{le=\"+Inf\"} +Inf\n").expect("parses");
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].labels.get("b").map(String::as_str), Some("q\"uote"));
    assert_eq!(s[0].value, 2.5);
    assert_eq!(s[1].name, "y");
    assert!(s[2].value.is_infinite());
    assert!(parse("x{a=\"1\" 2").is_err());
    assert!(parse("novalue").is_err());
}
