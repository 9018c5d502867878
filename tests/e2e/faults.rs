//! Fault scenarios: SIGKILLs of hami-rs during a burst, an API server outage, binds whose
//! reservation expired or whose pod was deleted, a node deleted or with a malformed registration,
//! node locks that are never released or never answered, and leader failover under a steady load.
//! Each has its own control plane; every wait is bounded and says what it waited for.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::cluster::*;
use crate::harness::*;
use crate::{bind_on, filter_on, single};

/// The schedulerName of pods only the tests' direct `/filter` and `/bind` calls touch.
const BY_HAND: &str = "e2e-by-hand";

/// Prints the scenario's wall time when dropped, also when the scenario fails.
struct Wall {
    tag: &'static str,
    start: Instant,
}

impl Wall {
    fn new(tag: &'static str) -> Wall {
        Wall { tag, start: Instant::now() }
    }
}

impl Drop for Wall {
    fn drop(&mut self) {
        let how = if std::thread::panicking() { " (failed)" } else { "" };
        println!("e2e[{}]: wall time {:.1} s{how}", self.tag, self.start.elapsed().as_secs_f64());
    }
}

/// A small seeded generator (xorshift64*), so the "random" moments are the same on every run.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % n.max(1)
    }
}

const SMALL: [(&str, &str); 3] =
    [("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "2000"), ("nvidia.com/gpucores", "10")];

/// Pins a pod to one node (the fake nodes carry `kubernetes.io/hostname`).
fn on_node(mut p: Pod, node: &str) -> Pod {
    let spec = p.spec.get_or_insert_with(Default::default);
    spec.node_selector = Some([("kubernetes.io/hostname".to_owned(), node.to_owned())].into_iter().collect());
    p
}

/// The pods whose names start with `prefix`.
fn named<'a>(pods: &'a [Pod], prefix: &str) -> Vec<&'a Pod> {
    pods.iter().filter(|p| name(p).starts_with(prefix)).collect()
}

/// Waits until every one of the `n` pods named `<prefix>…` is bound and allocated by the plugin.
async fn wait_all_bound(client: &kube::Client, prefix: &str, n: usize, timeout: Duration) -> Vec<Pod> {
    wait_for(&format!("all {n} pods {prefix}* to be bound and allocated"), timeout, || async {
        let pods = list_pods(client).await;
        let ours: Vec<Pod> = named(&pods, prefix).into_iter().cloned().collect();
        let waiting: Vec<String> = ours
            .iter()
            .filter(|p| node_name(p).is_none() || annotation(p, BIND_PHASE) != Some("success"))
            .map(|p| {
                let cond = p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
                    .and_then(|c| c.message.clone())
                    .unwrap_or_default();
                format!(
                    "{} (node {:?}, bind-phase {:?}, {cond:.160})",
                    name(p),
                    node_name(p),
                    annotation(p, BIND_PHASE)
                )
            })
            .collect();
        if ours.len() == n && waiting.is_empty() {
            Ok(ours)
        } else {
            Err(format!(
                "{} of {n} exist, {} not yet bound and allocated, e.g. {:?}",
                ours.len(),
                waiting.len(),
                &waiting[..waiting.len().min(5)]
            ))
        }
    })
    .await
}

/// The messages of the namespace's Events with `reason`, digits replaced by `N` (so one line
/// stands for every node and pod), with their counts, most frequent first.
async fn event_messages(client: &kube::Client, reason: &str) -> Vec<(String, usize)> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NS);
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for e in api.list(&Default::default()).await.map(|l| l.items).unwrap_or_default() {
        if e.reason.as_deref() != Some(reason) {
            continue;
        }
        let (mut m, mut in_number) = (String::new(), false);
        for c in e.message.as_deref().unwrap_or("").chars() {
            if !c.is_ascii_digit() {
                m.push(c);
            } else if !in_number {
                m.push('N');
            }
            in_number = c.is_ascii_digit();
        }
        *by.entry(m).or_insert(0) += e.count.unwrap_or(1).max(1) as usize;
    }
    let mut v: Vec<(String, usize)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// The node's `hami.io/mutex.lock`, as the API server has it.
async fn lock_of(client: &kube::Client, node: &str) -> Option<String> {
    let n = Api::<Node>::all(client.clone()).get(node).await.unwrap_or_else(|e| panic!("e2e: get node {node}: {e}"));
    n.metadata.annotations.and_then(|a| a.get(NODE_LOCK).cloned())
}

/// The pod's entry in hami-rs's `/usage`, if it holds or reserves anything.
async fn usage_entry(hami: &Hami, pod: &str) -> Option<Value> {
    let u = hami.usage().await.unwrap_or_else(|e| panic!("e2e: {} /usage: {e}", hami.name));
    u["pods"].as_array().into_iter().flatten().find(|p| p["name"] == pod).cloned()
}

/// Waits until hami-rs's `/usage` no longer lists the pod (released, expired or gone).
async fn wait_not_in_usage(hami: &Hami, pod: &str, why: &str) {
    wait_for(&format!("{} to drop pod {pod} from /usage ({why})", hami.name), Duration::from_secs(30), || async {
        let u = hami.usage().await?;
        match u["pods"].as_array().into_iter().flatten().find(|p| p["name"] == pod) {
            None => Ok(()),
            Some(e) => Err(format!("still listed: {e}")),
        }
    })
    .await;
}

/// Deletes the pod at once (grace period 0: there is no kubelet to confirm) and waits until the
/// API server no longer has it.
async fn delete_now(client: &kube::Client, pod: &str) {
    let api = pods_api(client);
    let dp = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    api.delete(pod, &dp).await.unwrap_or_else(|e| panic!("e2e: deleting pod {pod}: {e}"));
    wait_for(&format!("pod {pod} to be gone from the API server"), Duration::from_secs(30), || async {
        match api.get_opt(pod).await {
            Ok(None) => Ok(()),
            Ok(Some(p)) => Err(format!("still there (deletionTimestamp {:?})", p.metadata.deletion_timestamp)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
}

/// `POST /bind` for the pod as the API server has it now.
async fn bind_now(hami: &Hami, client: &kube::Client, pod: &str, node: &str) -> (String, Duration) {
    let (http, url) = hami.client();
    bind_on(http, url, get_pod(client, pod).await, node.to_owned()).await
}

/// Merge-patches annotations onto a node.
async fn annotate_node(client: &kube::Client, node: &str, key: &str, value: Option<&str>) {
    let body = json!({"metadata": {"annotations": {key: value}}});
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap_or_else(|e| panic!("e2e: annotating node {node}: {e}"));
}

/// Waits until `/usage` lists every pod in `bound` on its node as committed, and no device over
/// its capacity: the usage hami-rs rebuilt after a restart covers what was bound before it.
/// Returns the last state seen before that, if it was not so at once.
async fn wait_rebuilt(hami: &Hami, bound: &[&Pod]) -> Option<String> {
    let want: BTreeMap<String, String> =
        bound.iter().filter_map(|p| Some((name(p).to_owned(), node_name(p)?.to_owned()))).collect();
    let last: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let note = |e: String| {
        *last.lock().unwrap() = Some(e.clone());
        e
    };
    wait_for(
        &format!("{} to rebuild the usage of the {} pods bound before the SIGKILL", hami.name, want.len()),
        Duration::from_secs(60),
        || async {
            let u = hami.usage().await?;
            let have: BTreeMap<&str, (&str, &str)> = u["pods"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| Some((p["name"].as_str()?, (p["node"].as_str()?, p["state"].as_str()?))))
                .collect();
            let missing: Vec<String> = want
                .iter()
                .filter(|(p, n)| have.get(p.as_str()) != Some(&(n.as_str(), "committed")))
                .map(|(p, n)| format!("{p} on {n}: {:?}", have.get(p.as_str())))
                .collect();
            let over: Vec<String> = u["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|n| n["devices"].as_array().into_iter().flatten())
                .filter(|d| {
                    d["used"].as_u64() > d["count"].as_u64()
                        || d["memUsed"].as_u64() > d["memTotal"].as_u64()
                        || d["coresUsed"].as_u64() > d["coresTotal"].as_u64()
                })
                .map(|d| d.to_string())
                .collect();
            if !over.is_empty() {
                return Err(note(format!("devices over capacity in /usage: {over:?}")));
            }
            if missing.is_empty() {
                Ok(())
            } else {
                Err(note(format!(
                    "{} not committed where bound, e.g. {:?}",
                    missing.len(),
                    &missing[..missing.len().min(5)]
                )))
            }
        },
    )
    .await;
    last.into_inner().unwrap()
}

/// Node locks held, at this moment, by pods not bound yet (a bind between its lock and its
/// Binding), as `node: lock`.
fn mid_bind_locks(s: &Summary, pods: &[Pod]) -> Vec<String> {
    s.locks
        .iter()
        .filter(|(_, lock)| {
            let holder = lock.rsplit(',').next().unwrap_or("");
            pods.iter().any(|p| name(p) == holder && node_name(p).is_none())
        })
        .map(|(n, l)| format!("{n}: {l}"))
        .collect()
}

// --- g: SIGKILL three times during a burst ------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn g_three_sigkills_during_a_burst_of_500_pods_rebuild_usage_and_bind_every_pod() {
    let wall = Wall::new("g");
    let cp = ControlPlane::start("g").await;
    // 400 GPUs: the whole burst fits (about half the memory and cores), so every pod must bind.
    let nodes = FakeNodes::new("gpu-g-", 50, 8);
    let (mut plugin, mut hami, mut ks) = single(&cp, &nodes, &[]).await;
    const PODS: usize = 500;
    let mut rng = Rng::new(0x5eed_0009);
    // One kill in each part of the burst: once a drawn number of pods is bound, after a drawn delay.
    let plan: Vec<(usize, u64)> = [(40u64, 150u64), (190, 300), (340, 450)]
        .iter()
        .map(|&(lo, hi)| ((lo + rng.below(hi - lo)) as usize, rng.below(1500)))
        .collect();
    println!("e2e[g]: SIGKILL plan (bound pods, then delay in ms): {plan:?}");

    let start = Instant::now();
    create_all(&cp.client, burst("gk", PODS, 23)).await;
    let created_s = start.elapsed().as_secs_f64();
    let mut rows: Vec<String> = Vec::new();
    let mut bound_at: Vec<usize> = Vec::new();
    let mut rebuilt_s: Vec<f64> = Vec::new();
    let mut checks = 0usize;
    for (i, &(at, delay)) in plan.iter().enumerate() {
        let k = i + 1;
        wait_for(&format!("{at} pods bound before SIGKILL #{k}"), Duration::from_secs(300), || async {
            let n = bound_count(&list_pods(&cp.client).await);
            if n >= at { Ok(()) } else { Err(format!("{n} bound")) }
        })
        .await;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let pid = hami.pid().unwrap_or(0);
        hami.kill9();
        let killed_s = start.elapsed().as_secs_f64();
        // A Binding already sent may still land; look after the process is gone.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pods = list_pods_checked(&cp.client).await;
        let bound_now: Vec<&Pod> = pods.iter().filter(|p| node_name(p).is_some()).collect();
        let s = check_invariants_with(&cp.client, Allow { lenient_locks: true, ..Allow::default() }).await;
        let mid = mid_bind_locks(&s, &pods);
        let t = Instant::now();
        hami.restart().await;
        hami.wait_ready(Duration::from_secs(60)).await;
        let ready_s = t.elapsed().as_secs_f64();
        let before_rebuilt = wait_rebuilt(&hami, &bound_now).await;
        rebuilt_s.push(t.elapsed().as_secs_f64());
        if let Some(b) = &before_rebuilt {
            println!("e2e[g]: after restart #{k}, before the usage was rebuilt: {b}");
        }
        // Over-commit is checked again with whatever the restarted process has bound meanwhile.
        let s2 = check_invariants_with(&cp.client, Allow { lenient_locks: true, ..Allow::default() }).await;
        checks += 2;
        bound_at.push(bound_now.len());
        rows.push(format!(
            "SIGKILL #{k} (pid {pid}) at {killed_s:.1} s with {} of {PODS} bound ({} locks held, mid-bind: {mid:?}); ready again {ready_s:.1} s after the restart, usage rebuilt; {} bound when checked again",
            bound_now.len(),
            s.locks.len(),
            s2.bound
        ));
    }
    let all = wait_all_bound(&cp.client, "gk-", PODS, Duration::from_secs(600)).await;
    hami.assert_running();
    plugin.assert_running();
    ks.assert_running();
    let last_bind_s = start.elapsed().as_secs_f64();
    let s = check_invariants_with(&cp.client, Allow { stale_elsewhere: true, ..Allow::default() }).await;
    checks += 1;
    wait_usage_matches(&hami, &s, Duration::from_secs(90)).await;
    let reasons = event_reasons(&cp.client).await;
    println!("e2e[g]: {PODS} pods created in {created_s:.1} s");
    for r in &rows {
        println!("e2e[g]: {r}");
    }
    let mut after = Vec::new();
    for (i, b) in bound_at.iter().enumerate() {
        let next = bound_at.get(i + 1).copied().unwrap_or(all.len());
        after.push(format!(
            "kill #{}: {b} bound before, {} more bound before the next kill or the end",
            i + 1,
            next - b
        ));
    }
    println!("e2e[g]: {}", after.join("; "));
    println!(
        "e2e[g]: {} restarts survived; all {} pods bound and allocated {last_bind_s:.1} s after the first create; {}; Events {reasons:?}",
        plan.len(),
        all.len(),
        s.line()
    );
    let rebuilt: Vec<String> = rebuilt_s.iter().map(|t| format!("{t:.1}")).collect();
    println!(
        "e2e summary g: {} restarts survived, {}/{PODS} bound, usage rebuilt {} s after each restart, over-committed devices 0 in {checks} invariant checks, locks left {} ({} stale), wall {:.1} s",
        plan.len(),
        s.bound,
        rebuilt.join("/"),
        s.locks.len(),
        s.stale_locks,
        wall.start.elapsed().as_secs_f64()
    );
}

// --- h: the API server stopped for 30 s ---------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn h_an_api_server_outage_of_30_s_mid_burst_keeps_hami_rs_answering_and_loses_nothing() {
    let wall = Wall::new("h");
    let cp = ControlPlane::start("h").await;
    let nodes = FakeNodes::new("gpu-h-", 30, 8);
    let (mut plugin, mut hami, mut ks) = single(&cp, &nodes, &[]).await;
    const PODS: usize = 300;
    const AFTER: usize = 40;
    let probe = create(&cp.client, &pod("probe", &SMALL, &[], Some(BY_HAND))).await;
    let names = nodes.names();
    let filter_body = json!({"Pod": probe, "Nodes": null, "NodeNames": names});

    let start = Instant::now();
    create_all(&cp.client, burst("hb", PODS, 31)).await;
    let before = wait_for("100 pods of the burst to be bound", Duration::from_secs(300), || async {
        let n = bound_count(&list_pods(&cp.client).await);
        if n >= 100 { Ok(n) } else { Err(format!("{n} bound")) }
    })
    .await;

    cp.stop_apiserver().await;
    let down = Instant::now();
    let stopped_at_s = start.elapsed().as_secs_f64();
    let mut healthz: BTreeMap<String, usize> = BTreeMap::new();
    let mut filters: Vec<(f64, Result<Value, String>)> = Vec::new();
    let mut last_filter: Option<Instant> = None;
    while down.elapsed() < Duration::from_secs(30) {
        let h = match hami.get("/healthz").await {
            Ok((code, _)) => code.to_string(),
            Err(e) => format!("no answer: {e}"),
        };
        *healthz.entry(h).or_insert(0) += 1;
        if last_filter.is_none_or(|t| t.elapsed() >= Duration::from_secs(5)) {
            last_filter = Some(Instant::now());
            let t = Instant::now();
            let r = hami.post("/filter", &filter_body).await;
            filters.push((t.elapsed().as_secs_f64(), r));
        }
        hami.assert_running();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let stopped_for = down.elapsed();
    cp.start_apiserver().await;
    let outage = down.elapsed();
    let back = Instant::now();
    hami.assert_running();
    println!(
        "e2e[h]: kube-apiserver stopped at {stopped_at_s:.1} s with {before} of {PODS} bound, kept down {:.1} s, serving again after {:.1} s",
        stopped_for.as_secs_f64(),
        outage.as_secs_f64()
    );
    println!("e2e[h]: /healthz during the outage: {healthz:?}");
    for (took, r) in &filters {
        match r {
            Ok(v) => println!(
                "e2e[h]: /filter during the outage answered in {took:.3} s: Error {:?}, NodeNames {}",
                v["Error"], v["NodeNames"]
            ),
            Err(e) => println!("e2e[h]: /filter during the outage: no answer after {took:.1} s: {e}"),
        }
    }
    assert_eq!(
        healthz.keys().collect::<Vec<_>>(),
        vec!["200"],
        "/healthz answered 200 throughout the outage: {healthz:?}"
    );
    assert!(!filters.is_empty());
    for (took, r) in &filters {
        let v = r.as_ref().unwrap_or_else(|e| panic!("/filter during the outage got no answer ({took:.1} s): {e}"));
        let err = v["Error"].as_str().unwrap_or("");
        assert!(!err.is_empty(), "/filter during the outage answers with an error: {v}");
        assert!(v["NodeNames"].is_null(), "/filter during the outage chooses no node: {v}");
        // Clear: it says the API server could not be reached, not only that some request failed.
        assert!(err.contains("Connection refused"), "/filter during the outage says why it failed: {err:?}");
    }

    // The process and the others lived through it; the watches resume: new pods are scheduled.
    plugin.assert_running();
    ks.assert_running();
    hami.wait_ready(Duration::from_secs(60)).await;
    // The filters that failed during the outage left nothing reserved.
    wait_not_in_usage(&hami, "probe", "its filters failed during the outage").await;
    // Pods that fit next to others: a whole-GPU pod needs a GPU nobody touched, which depends on
    // where the burst landed (a burst spreads over more nodes while the best ones are locked by
    // binds), not on the outage this scenario is about.
    let whole = |p: &Pod| {
        let limits =
            p.spec.as_ref().and_then(|s| s.containers[0].resources.as_ref()?.limits.clone()).unwrap_or_default();
        limits.len() == 1
    };
    let after: Vec<Pod> = burst("ha", 2 * AFTER, 37).into_iter().filter(|p| !whole(p)).take(AFTER).collect();
    assert_eq!(after.len(), AFTER);
    create_all(&cp.client, after).await;
    wait_all_bound(&cp.client, "hb-", PODS, Duration::from_secs(600)).await;
    wait_all_bound(&cp.client, "ha-", AFTER, Duration::from_secs(300)).await;
    // The probe, by hand, now filters and binds.
    let node = filter_on(&hami, &cp.client, "probe", &names.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let (err, _) = bind_now(&hami, &cp.client, "probe", &node).await;
    assert_eq!(err, "", "the probe binds after the outage");
    wait_allocated(&cp.client, "probe", Duration::from_secs(60)).await;
    let all_bound_after = back.elapsed();
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(120)).await;
    hami.assert_running();
    let reasons = event_reasons(&cp.client).await;
    println!(
        "e2e[h]: after the outage all {PODS} + {AFTER} pods bound, last {:.1} s after the first create; {}; Events {reasons:?}",
        start.elapsed().as_secs_f64(),
        s.line()
    );
    for (m, n) in event_messages(&cp.client, "BindingFailed").await.iter().take(5) {
        println!("e2e[h]: BindingFailed x{n}: {m}");
    }
    let text = filters.first().and_then(|(_, r)| r.as_ref().ok()).and_then(|v| v["Error"].as_str()).unwrap_or("");
    println!(
        "e2e summary h: outage {:.1} s (kube-apiserver serving again {:.1} s after the stop), /healthz 200 x{} during it, filter errors during the outage {}/{} (text: {text:?}), all {} pods bound {:.1} s after the API server was back, over-committed devices 0, locks left {}, wall {:.1} s",
        stopped_for.as_secs_f64(),
        outage.as_secs_f64(),
        healthz.get("200").copied().unwrap_or(0),
        filters.len(),
        filters.len(),
        s.bound,
        all_bound_after.as_secs_f64(),
        s.locks.len(),
        wall.start.elapsed().as_secs_f64()
    );
}

// --- i: bind after the reservation expired ------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn i_a_bind_after_its_reservation_expired_succeeds_on_free_devices_and_fails_on_taken_ones() {
    let wall = Wall::new("i");
    let cp = ControlPlane::start("i").await;
    let nodes = FakeNodes::new("gpu-i-", 2, 1);
    let (_plugin, hami, _ks) = single(&cp, &nodes, &["--reservation-ttl", "1s"]).await;
    let [n0, n1] = [0, 1].map(|i| format!("{}{i}", nodes.prefix));
    // Two of these do not fit on one 16384 MiB GPU.
    let big = [("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "10000"), ("nvidia.com/gpucores", "30")];
    for p in ["free", "late", "taker"] {
        create(&cp.client, &pod(p, &big, &[], Some(BY_HAND))).await;
    }

    // 1. The reservation expires, nothing else takes the devices: the bind re-takes them.
    assert_eq!(filter_on(&hami, &cp.client, "free", &[&n0]).await, n0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_not_in_usage(&hami, "free", "its 1 s reservation expired").await;
    let (err, took) = bind_now(&hami, &cp.client, "free", &n0).await;
    let free_took = took;
    println!("e2e[i]: bind 3 s after filter, reservation expired, devices free: {err:?} in {took:?}");
    assert_eq!(err, "", "a bind whose reservation expired succeeds while its devices are free");
    wait_allocated(&cp.client, "free", Duration::from_secs(30)).await;
    let e = usage_entry(&hami, "free").await;
    assert_eq!(e.as_ref().map(|e| (&e["node"], &e["state"])), Some((&json!(n0), &json!("committed"))), "{e:?}");

    // 2. It expires and another pod takes the devices: the late bind fails and says why.
    assert_eq!(filter_on(&hami, &cp.client, "late", &[&n1]).await, n1);
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_not_in_usage(&hami, "late", "its 1 s reservation expired").await;
    assert_eq!(filter_on(&hami, &cp.client, "taker", &[&n1]).await, n1, "the expired reservation freed n1");
    let (err, _) = bind_now(&hami, &cp.client, "taker", &n1).await;
    assert_eq!(err, "", "taker binds");
    let (err, took) = bind_now(&hami, &cp.client, "late", &n1).await;
    println!("e2e[i]: bind 3 s after filter, devices taken by another pod meanwhile: {err:?} in {took:?}");
    assert!(
        err.contains("expired") && err.contains("no longer free"),
        "a bind whose expired reservation's devices were taken fails with a clear error: {err:?}"
    );
    // The figures are the pod's request and what is free on the device (as /filter words them),
    // not the device's total after adding the pod and its capacity.
    assert!(
        err.contains("requested 10000 MiB, free 6384 MiB"),
        "the error of the late bind gives the pod's request (10000 MiB) and the device's free memory (16384 - 10000 held \
         by taker = 6384 MiB): {err:?}"
    );
    wait_allocated(&cp.client, "taker", Duration::from_secs(30)).await;
    let late = get_pod(&cp.client, "late").await;
    assert_eq!(node_name(&late), None, "late is not bound");
    assert_ne!(annotation(&late, BIND_PHASE), Some("allocating"), "late never got as far as its bind-phase");
    let is_expired = |m: &str| m == err;
    wait_events(&cp.client, "late", &[("BindingFailed", &is_expired)], Duration::from_secs(30)).await;
    assert_eq!(usage_entry(&hami, "late").await, None, "late reserves nothing");
    wait_for(&format!("the lock on {n1} to be released"), Duration::from_secs(30), || async {
        match lock_of(&cp.client, &n1).await {
            None => Ok(()),
            Some(l) => Err(l),
        }
    })
    .await;
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(30)).await;
    println!(
        "e2e summary i: bind after an expired reservation on free devices bound in {:.1} ms; on devices taken meanwhile refused in {:.1} ms ({err:?}); nothing left reserved, locks left {}, wall {:.1} s",
        free_took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e3,
        s.locks.len(),
        wall.start.elapsed().as_secs_f64()
    );
}

// --- j: the pod deleted between filter and bind -------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn j_a_pod_deleted_between_filter_and_bind_fails_its_bind_and_leaves_no_lock_or_reservation() {
    let wall = Wall::new("j");
    let cp = ControlPlane::start("j").await;
    let nodes = FakeNodes::new("gpu-j-", 2, 1);
    let (_plugin, hami, _ks) = single(&cp, &nodes, &[]).await;
    let n0 = format!("{}0", nodes.prefix);
    for p in ["raced", "gone", "next"] {
        create(&cp.client, &pod(p, &SMALL, &[], Some(BY_HAND))).await;
    }
    let mut lines = Vec::new();
    // 1. Deleted, and the bind comes at once (hami-rs may not have seen the deletion yet).
    // 2. Deleted, and hami-rs has seen it go.
    for (p, wait_seen) in [("raced", false), ("gone", true)] {
        assert_eq!(filter_on(&hami, &cp.client, p, &[&n0]).await, n0);
        assert!(usage_entry(&hami, p).await.is_some(), "{p} is reserved after its filter");
        let before = get_pod(&cp.client, p).await;
        delete_now(&cp.client, p).await;
        if wait_seen {
            wait_not_in_usage(&hami, p, "the pod was deleted").await;
        }
        let (http, url) = hami.client();
        let (err, took) = bind_on(http, url, before, n0.clone()).await;
        lines.push(format!("{p}: bind answered {err:?} in {took:?}"));
        assert!(err.contains("not found"), "the bind of deleted pod {p} fails saying so: {err:?}");
        wait_not_in_usage(&hami, p, "its bind failed").await;
        assert_eq!(lock_of(&cp.client, &n0).await, None, "no lock left on {n0} after {p}'s failed bind");
    }
    println!("e2e[j]: {}", lines.join("; "));
    // The node is not blocked.
    assert_eq!(filter_on(&hami, &cp.client, "next", &[&n0]).await, n0);
    let (err, _) = bind_now(&hami, &cp.client, "next", &n0).await;
    assert_eq!(err, "", "a later pod binds to {n0}");
    wait_allocated(&cp.client, "next", Duration::from_secs(30)).await;
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(30)).await;
    println!(
        "e2e summary j: binds of pods deleted after their filter refused 2/2 ({}), no reservation or lock left, the node bound the next pod, locks left {}, wall {:.1} s",
        lines.join("; "),
        s.locks.len(),
        wall.start.elapsed().as_secs_f64()
    );
}

// --- k: a node deleted with pods on it ----------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn k_a_node_deleted_with_pods_on_it_loses_its_allocations_and_new_pods_go_elsewhere() {
    let wall = Wall::new("k");
    let cp = ControlPlane::start("k").await;
    let nodes = FakeNodes::new("gpu-k-", 3, 2);
    let (_plugin, hami, _ks) = single(&cp, &nodes, &[]).await;
    let frac = [("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "4000"), ("nvidia.com/gpucores", "20")];
    let spread = [("hami.io/node-scheduler-policy", "spread")];
    // Spread pods reach every node, binpack ones pile onto one.
    create_all(&cp.client, (0..3).map(|i| pod(&format!("ks-{i}"), &frac, &spread, None)).collect()).await;
    wait_all_bound(&cp.client, "ks-", 3, Duration::from_secs(120)).await;
    create_all(&cp.client, (0..3).map(|i| pod(&format!("kb-{i}"), &frac, &[], None)).collect()).await;
    wait_all_bound(&cp.client, "kb-", 3, Duration::from_secs(120)).await;
    let pods = list_pods(&cp.client).await;
    let mut per_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in &pods {
        per_node.entry(node_name(p).unwrap().to_owned()).or_default().push(name(p).to_owned());
    }
    let victim = per_node.iter().max_by_key(|(_, v)| v.len()).map(|(n, _)| n.clone()).unwrap();
    let others: Vec<String> = nodes.names().into_iter().filter(|n| *n != victim).collect();
    assert!(others.iter().any(|n| per_node.contains_key(n)), "pods on other nodes too: {per_node:?}");
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(30)).await;
    let devices_of = |u: &Value, node: &str| -> Option<Value> {
        u["nodes"].as_array().into_iter().flatten().find(|n| n["name"] == node).map(|n| n["devices"].clone())
    };
    let before = hami.usage().await.unwrap();

    let node_api: Api<Node> = Api::all(cp.client.clone());
    let victim_obj = node_api.get(&victim).await.unwrap();
    let deleted = Instant::now();
    node_api
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("e2e: deleting node {victim}: {e}"));
    let on_victim = |u: &Value| -> (bool, Vec<String>) {
        let listed = u["nodes"].as_array().into_iter().flatten().any(|n| n["name"] == victim.as_str());
        let held = u["pods"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["node"] == victim.as_str())
            .filter_map(|p| p["name"].as_str().map(str::to_owned))
            .collect();
        (listed, held)
    };
    let gone = wait_for(&format!("{victim} and its allocations to leave /usage"), Duration::from_secs(60), || async {
        let u = hami.usage().await?;
        match on_victim(&u) {
            (false, held) if held.is_empty() => Ok(u),
            (listed, held) => Err(format!("node listed: {listed}; pods held there: {held:?}")),
        }
    })
    .await;
    let left_after = deleted.elapsed();
    for n in &others {
        assert_eq!(devices_of(&gone, n), devices_of(&before, n), "{n}'s devices and usage are unaffected");
    }
    let mut problems: Vec<String> = Vec::new();
    // A later update to a pod of the deleted node (a status change, the pod GC's condition) must
    // not bring the node or its allocations back. The pods created next come later on the same
    // pod watch, so once they are bound the update has been seen.
    let orphan = per_node[&victim][0].clone();
    let body = json!({"metadata": {"labels": {"e2e-touched": "after-node-delete"}}});
    pods_api(&cp.client).patch(&orphan, &PatchParams::default(), &Patch::Merge(&body)).await.unwrap();

    create_all(&cp.client, (0..4).map(|i| pod(&format!("kn-{i}"), &frac, &[], None)).collect()).await;
    let new = wait_all_bound(&cp.client, "kn-", 4, Duration::from_secs(120)).await;
    let placed: Vec<String> = new.iter().filter_map(node_name).map(str::to_owned).collect();
    assert!(placed.iter().all(|n| *n != victim), "new pods go to the remaining nodes: {placed:?}");
    let (listed, back) = on_victim(&hami.usage().await.unwrap());
    if listed || !back.is_empty() {
        problems.push(format!(
            "after an update to pod {orphan}, still bound to the deleted node {victim}, /usage lists that node again: {listed}, with allocations of {back:?}"
        ));
    }
    let gone_nodes = [victim.clone()];
    let s = check_invariants_with(&cp.client, Allow { gone_nodes: &gone_nodes, ..Allow::default() }).await;
    if let Err(d) = usage_matches_within(&hami, &s, Duration::from_secs(30)).await {
        problems.push(format!("with {victim} deleted, /usage does not match the pods on the remaining nodes: {d}"));
    }
    println!(
        "e2e[k]: deleted {victim} holding {:?}; its allocations left /usage, other nodes unchanged; new pods on {placed:?}; {} ({} pods still bound to the deleted node)",
        per_node[&victim],
        s.line(),
        s.on_gone_nodes
    );

    // The node comes back under the same name (a kubelet registering again) while its pods are
    // still bound to it: their devices are in use there again.
    let mut again = victim_obj.clone();
    again.metadata = kube::api::ObjectMeta {
        name: again.metadata.name.clone(),
        labels: again.metadata.labels.clone(),
        annotations: again.metadata.annotations.clone().map(|mut a| {
            a.remove(NODE_LOCK);
            a
        }),
        ..Default::default()
    };
    let created_again = Instant::now();
    node_api
        .create(&Default::default(), &again)
        .await
        .unwrap_or_else(|e| panic!("e2e: creating node {victim} again: {e}"));
    node_api.patch(&victim, &PatchParams::default(), &Patch::Merge(json!({"spec": {"taints": null}}))).await.unwrap();
    wait_nodes_registered(&hami, &nodes.names(), nodes.gpus).await;
    let s = check_invariants(&cp.client).await;
    if let Err(d) = usage_matches_within(&hami, &s, Duration::from_secs(30)).await {
        let (_, held) = on_victim(&hami.usage().await.unwrap());
        problems.push(format!(
            "{victim} created again under the same name: /usage counts {held:?} there, but the API server has {:?} bound to it ({d})",
            per_node[&victim]
        ));
    }
    let counted_after = created_again.elapsed();
    println!("e2e[k]: {victim} created again; the pods still bound to it: {:?}", per_node[&victim]);
    assert!(problems.is_empty(), "e2e: a deleted node's allocations:\n  {}", problems.join("\n  "));
    println!(
        "e2e summary k: node deleted with {} pods on it, its allocations left /usage {:.1} s after the delete, other nodes unchanged, {} new pods bound elsewhere, created again: its {} pods counted again {:.1} s after the create, over-committed devices 0, locks left {}, wall {:.1} s",
        per_node[&victim].len(),
        left_after.as_secs_f64(),
        placed.len(),
        per_node[&victim].len(),
        counted_after.as_secs_f64(),
        s.locks.len(),
        wall.start.elapsed().as_secs_f64()
    );
}

// --- l: a malformed registration ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn l_a_malformed_register_annotation_takes_only_that_node_out_until_it_is_fixed() {
    let wall = Wall::new("l");
    let cp = ControlPlane::start("l").await;
    let nodes = FakeNodes::new("gpu-l-", 3, 2);
    let (_plugin, hami, _ks) = single(&cp, &nodes, &[]).await;
    let names = nodes.names();
    let n0 = names[0].clone();
    let frac = [("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "4000"), ("nvidia.com/gpucores", "20")];
    // Something already runs on n0.
    create(&cp.client, &on_node(pod("l-before", &frac, &[], None), &n0)).await;
    wait_allocated(&cp.client, "l-before", Duration::from_secs(90)).await;
    let node_api: Api<Node> = Api::all(cp.client.clone());
    let original = node_api.get(&n0).await.unwrap().metadata.annotations.unwrap()[REGISTER].clone();

    let garbage = "{this is not a device list";
    let broken = Instant::now();
    annotate_node(&cp.client, &n0, REGISTER, Some(garbage)).await;
    let why = wait_for(&format!("{n0} to be marked unusable in /usage"), Duration::from_secs(60), || async {
        let u = hami.usage().await?;
        let n = u["nodes"].as_array().into_iter().flatten().find(|n| n["name"] == n0.as_str()).cloned();
        match n.as_ref().and_then(|n| n["unusable"].as_str()) {
            Some(w) => Ok(w.to_owned()),
            None => Err(format!("{n:?}")),
        }
    })
    .await;
    let out_after = broken.elapsed();
    let is_reason = |m: &str| m == why;
    let ev = wait_events(&cp.client, &n0, &[("DeviceRegistrationInvalid", &is_reason)], Duration::from_secs(30)).await;
    let ev = ev.iter().find(|e| e.reason.as_deref() == Some("DeviceRegistrationInvalid")).unwrap();
    assert_eq!(ev.type_.as_deref(), Some("Warning"), "{ev:?}");
    assert_eq!(ev.involved_object.kind.as_deref(), Some("Node"), "{ev:?}");

    // The reason reaches FailedNodes; other nodes still take pods.
    create(&cp.client, &pod("l-hand", &frac, &[], Some(BY_HAND))).await;
    let p = get_pod(&cp.client, "l-hand").await;
    let only = hami.post("/filter", &json!({"Pod": p, "Nodes": null, "NodeNames": [n0]})).await.unwrap();
    let failed = only["FailedNodes"][n0.as_str()].as_str().unwrap_or("").to_owned();
    println!("e2e[l]: {n0} unusable: {why:?}; /filter on it alone: FailedNodes[{n0}] = {failed:?}");
    assert!(only["NodeNames"].is_null() && failed.contains(&why), "FailedNodes says why {n0} is out: {only}");
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    let chosen = filter_on(&hami, &cp.client, "l-hand", &all).await;
    assert_ne!(chosen, n0, "a pod offered every node goes to a healthy one");
    // Through kube-scheduler: new pods bind to the other nodes; one pinned to n0 waits.
    create(&cp.client, &on_node(pod("l-pinned", &frac, &[], None), &n0)).await;
    create_all(&cp.client, (0..4).map(|i| pod(&format!("l-new-{i}"), &frac, &[], None)).collect()).await;
    let new = wait_all_bound(&cp.client, "l-new-", 4, Duration::from_secs(120)).await;
    let placed: Vec<&str> = new.iter().filter_map(node_name).collect();
    assert!(placed.iter().all(|n| *n != n0), "no new pod on {n0}: {placed:?}");
    let says_why = |m: &str| m.contains(&why);
    wait_events(&cp.client, "l-pinned", &[("FailedScheduling", &says_why)], Duration::from_secs(60)).await;
    assert_eq!(node_name(&get_pod(&cp.client, "l-pinned").await), None, "the pod pinned to {n0} waits");

    // Fixed: n0 is back, with what it held before.
    let fixed = Instant::now();
    annotate_node(&cp.client, &n0, REGISTER, Some(&original)).await;
    wait_nodes_registered(&hami, &names, nodes.gpus).await;
    wait_for(&format!("{n0} to be usable again"), Duration::from_secs(60), || async {
        let u = hami.usage().await?;
        let n = u["nodes"].as_array().into_iter().flatten().find(|n| n["name"] == n0.as_str()).cloned();
        match n.as_ref().map(|n| n["unusable"].is_null()) {
            Some(true) => Ok(()),
            _ => Err(format!("{n:?}")),
        }
    })
    .await;
    let back_after = fixed.elapsed();
    assert_eq!(filter_on(&hami, &cp.client, "l-hand", &[&n0]).await, n0, "{n0} is chosen again once fixed");
    let (err, _) = bind_now(&hami, &cp.client, "l-hand", &n0).await;
    assert_eq!(err, "", "l-hand binds to {n0}");
    wait_allocated(&cp.client, "l-hand", Duration::from_secs(60)).await;
    // kube-scheduler requeues the pod it pinned meanwhile only on events its NodeAffinity plugin
    // cares about (an annotation change is not one), or after 5 minutes: a new pinned pod shows
    // that n0 schedules again through it.
    delete_now(&cp.client, "l-pinned").await;
    create(&cp.client, &on_node(pod("l-pinned-after", &frac, &[], None), &n0)).await;
    let pinned = wait_allocated(&cp.client, "l-pinned-after", Duration::from_secs(120)).await;
    assert_eq!(node_name(&pinned), Some(n0.as_str()));
    let s = check_invariants(&cp.client).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(60)).await;
    println!(
        "e2e[l]: meanwhile new pods went to {placed:?} and one pinned to {n0} waited; after the fix l-hand and l-pinned-after bound to {n0}; {}",
        s.line()
    );
    println!(
        "e2e summary l: malformed registration took only {n0} out ({:.1} s after the write: {why:?}), {} new pods bound to the other nodes while a pod pinned to {n0} waited, {n0} usable again {:.1} s after the fix and took 2 pods, over-committed devices 0, locks left {}, wall {:.1} s",
        out_after.as_secs_f64(),
        placed.len(),
        back_after.as_secs_f64(),
        s.locks.len(),
        wall.start.elapsed().as_secs_f64()
    );
}

// --- m: node locks never released, or never answered --------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn m_node_locks_of_a_stuck_plugin_are_taken_over_only_once_their_holder_no_longer_needs_them() {
    let wall = Wall::new("m");
    let cp = ControlPlane::start("m").await;
    let ok_nodes = FakeNodes::new("gpu-m-", 1, 2);
    // Its plugin answers every Allocate but never releases the lock.
    let stuck_nodes = FakeNodes::new("gpu-mstuck-", 1, 2);
    // No plugin at all after set-up: nobody answers an Allocate there.
    let mute_nodes = FakeNodes::new("gpu-mmute-", 1, 2);
    let mut ok_plugin = FakePlugin::start(&cp, &ok_nodes).await;
    let mut stuck_plugin =
        FakePlugin::start_with(&cp, &stuck_nodes, "fake-plugin-stuck", &["--never-release-lock"]).await;
    let _mute = FakePlugin::start_with(&cp, &mute_nodes, "fake-plugin-mute", &["--setup-only"]).await;
    let mut hami = Hami::start(&cp, "hami-rs", &["--node-lock-timeout", "3s", "--bind-lock-wait", "3s"]).await;
    hami.wait_ready(Duration::from_secs(60)).await;
    let (ok, stuck, mute) =
        (ok_nodes.names()[0].clone(), stuck_nodes.names()[0].clone(), mute_nodes.names()[0].clone());
    wait_nodes_registered(&hami, &[ok.clone(), stuck.clone(), mute.clone()], 2).await;
    cp.apply_webhook(&hami.url()).await;
    let mut ks = KubeScheduler::start(&cp, "kube-scheduler", &hami.url(), SchedulerOpts::default()).await;

    // 1. Never released, but answered: each later bind takes the lock over at once.
    create_all(&cp.client, (0..3).map(|i| on_node(pod(&format!("m-stuck-{i}"), &SMALL, &[], None), &stuck)).collect())
        .await;
    wait_all_bound(&cp.client, "m-stuck-", 3, Duration::from_secs(120)).await;
    let left = lock_of(&cp.client, &stuck).await;
    println!("e2e[m]: 3 pods bound one after the other on {stuck}, whose plugin never releases; its lock now {left:?}");
    let holder = left.as_deref().and_then(|l| l.rsplit(',').next()).unwrap_or("");
    assert!(holder.starts_with("m-stuck-"), "the lock {left:?} stays with the last pod, the plugin never released it");

    // 2. Never answered: the holder still waits for its Allocate.
    for p in ["m-h1", "m-w", "m-h2"] {
        create(&cp.client, &pod(p, &SMALL, &[], Some(BY_HAND))).await;
    }
    assert_eq!(filter_on(&hami, &cp.client, "m-h1", &[&mute]).await, mute);
    let (err, _) = bind_now(&hami, &cp.client, "m-h1", &mute).await;
    assert_eq!(err, "", "m-h1 binds to {mute}");
    let lock = lock_of(&cp.client, &mute).await.unwrap_or_default();
    assert!(lock.ends_with(",default,m-h1"), "m-h1 holds {mute}'s lock: {lock:?}");
    assert_eq!(annotation(&get_pod(&cp.client, "m-h1").await, BIND_PHASE), Some("allocating"));

    let mut lines = Vec::new();
    let contention = |what: &str, err: &str, took: Duration, lines: &mut Vec<String>| {
        lines.push(format!("{what}: {err:?} after {took:?}"));
        assert!(err.contains("node lock contention"), "{what}: fails with contention: {err:?}");
    };
    assert_eq!(filter_on(&hami, &cp.client, "m-w", &[&mute]).await, mute);
    let (err, took) = bind_now(&hami, &cp.client, "m-w", &mute).await;
    contention("bind while the holder waits for its Allocate", &err, took, &mut lines);

    // Expired (3 s), holder still pending and unanswered: not taken over either.
    let locked_at = chrono::DateTime::parse_from_rfc3339(lock.split(',').next().unwrap_or("")).unwrap();
    let age = wait_for("the lock to be older than --node-lock-timeout 3s", Duration::from_secs(30), || async {
        let age = chrono::Utc::now().signed_duration_since(locked_at);
        if age > chrono::Duration::seconds(5) { Ok(age) } else { Err(format!("{age}")) }
    })
    .await;
    assert_eq!(filter_on(&hami, &cp.client, "m-w", &[&mute]).await, mute);
    let (err, took) = bind_now(&hami, &cp.client, "m-w", &mute).await;
    contention(&format!("bind under the expired lock ({} s old)", age.num_seconds()), &err, took, &mut lines);
    assert_eq!(lock_of(&cp.client, &mute).await.as_deref(), Some(lock.as_str()), "the expired lock still names m-h1");
    let h1 = get_pod(&cp.client, "m-h1").await;
    assert_eq!((node_name(&h1), annotation(&h1, BIND_PHASE)), (Some(mute.as_str()), Some("allocating")));

    // The holder is answered (as its plugin would, without releasing): the lock is taken over.
    let body = json!({"metadata": {"annotations": {BIND_PHASE: "success"}}});
    pods_api(&cp.client).patch("m-h1", &PatchParams::default(), &Patch::Merge(&body)).await.unwrap();
    assert_eq!(filter_on(&hami, &cp.client, "m-w", &[&mute]).await, mute);
    let (err, took) = wait_for("m-w's bind once m-h1 was answered", Duration::from_secs(60), || async {
        let (err, took) = bind_now(&hami, &cp.client, "m-w", &mute).await;
        if err.is_empty() { Ok((err, took)) } else { Err(err) }
    })
    .await;
    lines.push(format!("bind after the holder was answered: {err:?} after {took:?}"));
    assert!(lock_of(&cp.client, &mute).await.unwrap_or_default().ends_with(",default,m-w"), "m-w took the lock over");

    // The new holder is removed instead: deleted, the lock is taken over.
    assert_eq!(filter_on(&hami, &cp.client, "m-h2", &[&mute]).await, mute);
    let (err, took) = bind_now(&hami, &cp.client, "m-h2", &mute).await;
    contention("bind while m-w waits for its Allocate", &err, took, &mut lines);
    delete_now(&cp.client, "m-w").await;
    wait_not_in_usage(&hami, "m-w", "the pod was deleted").await;
    assert_eq!(filter_on(&hami, &cp.client, "m-h2", &[&mute]).await, mute);
    let (err, took) = bind_now(&hami, &cp.client, "m-h2", &mute).await;
    lines.push(format!("bind after the holder was deleted: {err:?} after {took:?}"));
    assert_eq!(err, "", "once the holder is deleted its lock is taken over");
    assert!(lock_of(&cp.client, &mute).await.unwrap_or_default().ends_with(",default,m-h2"));

    // Meanwhile the healthy node schedules as usual.
    create_all(&cp.client, (0..2).map(|i| on_node(pod(&format!("m-ok-{i}"), &SMALL, &[], None), &ok)).collect()).await;
    wait_all_bound(&cp.client, "m-ok-", 2, Duration::from_secs(120)).await;
    for l in &lines {
        println!("e2e[m]: {mute}: {l}");
    }

    // 3. A lock without owner (nobody to ask whether it is still needed) is judged by its age:
    //    taken over only once older than --node-lock-timeout. The fresh one is dated 60 s ahead,
    //    so it cannot expire during the 3 s the bind waits for it.
    create(&cp.client, &pod("m-bare", &SMALL, &[], Some(BY_HAND))).await;
    let stamp =
        |secs: i64| (chrono::Utc::now() + chrono::Duration::seconds(secs)).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let fresh = stamp(60);
    annotate_node(&cp.client, &ok, NODE_LOCK, Some(&fresh)).await;
    crate::wait_lock_seen(&hami, &ok, &fresh).await;
    assert_eq!(filter_on(&hami, &cp.client, "m-bare", &[&ok]).await, ok);
    let (err, took) = bind_now(&hami, &cp.client, "m-bare", &ok).await;
    let mut bare = vec![format!("bind under a fresh lock without owner: {err:?} after {took:?}")];
    assert!(err.contains("node lock contention"), "a fresh lock without owner is respected: {err:?}");
    assert_eq!(lock_of(&cp.client, &ok).await.as_deref(), Some(fresh.as_str()), "the fresh lock stays");
    let old = stamp(-10);
    annotate_node(&cp.client, &ok, NODE_LOCK, Some(&old)).await;
    crate::wait_lock_seen(&hami, &ok, &old).await;
    assert_eq!(filter_on(&hami, &cp.client, "m-bare", &[&ok]).await, ok);
    let (err, took) = bind_now(&hami, &cp.client, "m-bare", &ok).await;
    bare.push(format!("bind under a lock without owner 10 s old: {err:?} after {took:?}"));
    assert_eq!(err, "", "an expired lock without owner is taken over");
    wait_allocated(&cp.client, "m-bare", Duration::from_secs(60)).await;
    // The plugin writes bind-phase success first and releases the node lock after it.
    wait_for(&format!("the plugin to release the lock on {ok}"), Duration::from_secs(30), || async {
        match lock_of(&cp.client, &ok).await {
            None => Ok(()),
            Some(l) => Err(format!("locked: {l}")),
        }
    })
    .await;
    for l in &bare {
        println!("e2e[m]: {ok}: {l}");
    }
    hami.assert_running();
    ok_plugin.assert_running();
    stuck_plugin.assert_running();
    ks.assert_running();
    let unchecked = [stuck.clone()];
    let s = check_invariants_with(&cp.client, Allow { unchecked_locks: &unchecked, ..Allow::default() }).await;
    wait_usage_matches(&hami, &s, Duration::from_secs(60)).await;
    println!("e2e[m]: {}", s.line());
    println!(
        "e2e summary m: never-released lock taken over by each of 3 binds on {stuck}; on {mute} (no plugin) a bind under a lock whose holder still waits failed with contention 3/3 (once with the lock {} s old, past the 3 s timeout), taken over once the holder was answered and once it was deleted; on {ok} a lock without owner was respected while fresh and taken over once expired; over-committed devices 0, wall {:.1} s",
        age.num_seconds(),
        wall.start.elapsed().as_secs_f64()
    );
}

// --- n: leader failover under load -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn n_leader_failover_under_a_steady_stream_of_pods_neither_loses_nor_double_allocates() {
    let wall = Wall::new("n");
    let cp = ControlPlane::start("n").await;
    let nodes = FakeNodes::new("gpu-n-", 16, 4);
    let _plugin = FakePlugin::start(&cp, &nodes).await;
    let ids = ["replica-a", "replica-b"];
    let mut pairs = replica_pairs(&cp, &ids).await;
    let leader = wait_for("exactly one hami-rs to be ready", Duration::from_secs(90), || async {
        match (pairs[0].0.readyz().await, pairs[1].0.readyz().await) {
            (Some(200), Some(503)) => Ok(0usize),
            (Some(503), Some(200)) => Ok(1usize),
            other => Err(format!("/readyz: {other:?}")),
        }
    })
    .await;
    let follower = 1 - leader;
    wait_nodes_registered(&pairs[leader].0, &nodes.names(), nodes.gpus).await;
    wait_nodes_registered(&pairs[follower].0, &nodes.names(), nodes.gpus).await;

    // A steady stream: one pod every 200 ms, for about 10 s before the kill, through the
    // failover and after it. The pods skip the webhook (its URL names one replica) and carry what
    // it would have written.
    const PODS: usize = 200;
    const KILL_AFTER: usize = 50;
    let stream_pod = |i: usize| {
        let mut p = pod(&format!("ns-{i:03}"), &SMALL, &[], Some(SCHEDULER_NAME));
        p.metadata.labels.get_or_insert_with(Default::default).insert("hami.io/webhook".into(), "ignore".into());
        p
    };
    let client = cp.client.clone();
    let start = Instant::now();
    let stream = tokio::spawn(async move {
        let mut created_at = Vec::with_capacity(PODS);
        for i in 0..PODS {
            create(&client, &stream_pod(i)).await;
            created_at.push(start.elapsed().as_secs_f64());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        created_at
    });
    wait_for(&format!("{KILL_AFTER} stream pods to be created"), Duration::from_secs(120), || async {
        let n = named(&list_pods(&cp.client).await, "ns-").len();
        if n >= KILL_AFTER { Ok(()) } else { Err(format!("{n} created")) }
    })
    .await;
    // Kill inside a bind when one is caught: a node lock taken for a pod not bound yet.
    let in_bind = crate::mid_bind(&cp.client, Duration::from_secs(3)).await;
    let bound_before = bound_count(&list_pods(&cp.client).await);
    {
        let (hami, ks) = &mut pairs[leader];
        ks.kill9();
        hami.kill9();
    }
    let killed = Instant::now();
    let killed_at_s = start.elapsed().as_secs_f64();
    // Invariants sampled while the stream goes on and the follower takes over.
    let mut samples = 0usize;
    let lenient = Allow { lenient_locks: true, ..Allow::default() };
    while pairs[follower].0.readyz().await != Some(200) {
        assert!(
            killed.elapsed() < Duration::from_secs(120),
            "e2e: {} not ready 120 s after the leader pair was killed",
            ids[follower]
        );
        pairs[follower].0.assert_running();
        check_invariants_with(&cp.client, lenient).await;
        samples += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let failover = killed.elapsed();
    let created_by_failover = named(&list_pods(&cp.client).await, "ns-").len();
    let bound_at_failover = bound_count(&list_pods(&cp.client).await);
    let created_at = tokio::time::timeout(Duration::from_secs(120), stream).await.expect("the stream ends").unwrap();
    let created_after = created_at.iter().filter(|t| **t > killed_at_s + failover.as_secs_f64()).count();
    while bound_count(&list_pods(&cp.client).await) < PODS && killed.elapsed() < Duration::from_secs(400) {
        check_invariants_with(&cp.client, lenient).await;
        samples += 1;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let all = wait_all_bound(&cp.client, "ns-", PODS, Duration::from_secs(300)).await;
    pairs[follower].0.assert_running();
    pairs[follower].1.assert_running();
    let s = check_invariants_with(&cp.client, Allow { stale_elsewhere: true, ..Allow::default() }).await;
    samples += 1;
    wait_usage_matches(&pairs[follower].0, &s, Duration::from_secs(90)).await;
    match &in_bind {
        Some((node, lock)) => {
            println!("e2e[n]: leader pair killed while binding: {node} locked ({lock}) for a pod not bound yet")
        }
        None => println!("e2e[n]: leader pair killed with no bind caught between its node lock and its Binding"),
    }
    println!(
        "e2e[n]: stream of {PODS} pods, one per 200 ms, the last created at {:.1} s; leader {} pair killed at {killed_at_s:.1} s ({KILL_AFTER} created, {bound_before} bound); {} ready {:.1} s later ({created_by_failover} created, {bound_at_failover} bound by then; {created_after} created after that); all {} bound in the end, {} after the kill; {samples} invariant checks during the switch; {}",
        created_at.last().copied().unwrap_or(0.0),
        ids[leader],
        ids[follower],
        failover.as_secs_f64(),
        all.len(),
        all.len() - bound_before,
        s.line()
    );
    println!(
        "e2e summary n: failover {:.1} s (leader pair SIGKILLed{}; {} ready), {}/{PODS} bound, over-committed devices 0 in {samples} invariant checks, locks left {} ({} stale), wall {:.1} s",
        failover.as_secs_f64(),
        if in_bind.is_some() { " inside a bind" } else { "" },
        ids[follower],
        s.bound,
        s.locks.len(),
        s.stale_locks,
        wall.start.elapsed().as_secs_f64()
    );
}
