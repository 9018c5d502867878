//! Scenario x3: end-to-end throughput of Kubernetes 1.37's native gang, through kube-scheduler
//! with hami-rs as its extender against kube-scheduler's native gang alone (no extender), each on
//! a fresh control plane of that version with the gang on. G native PodGroups of M one-GPU
//! members (1024 MiB each) on N fake nodes of 8 GPUs; every group's PodGroup and members are
//! created together, groups `HAMI_E2E_GANG_TPUT_CREATORS` (4) at a time, and a watch records when
//! each member is first seen bound. Not part of the regular run: it is skipped unless
//! `HAMI_E2E_THROUGHPUT` is set.
//!
//! It prints one `e2e summary x3:` line: per run, pods/s (members over the time from the first
//! create to the last bind) and the p50 and p99 over groups of the time from a group's creation
//! to its last member bound; with hami-rs, the invariants (no device over-committed, each group
//! bound whole).
//!
//! Settings: `HAMI_E2E_GANG_TPUT_GROUPS` (20), `HAMI_E2E_GANG_TPUT_MEMBERS` (8),
//! `HAMI_E2E_GANG_TPUT_NODES` (20), `HAMI_E2E_GANG_TPUT_TIMEOUT` (300 s per run).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::cluster::*;
use crate::gangs::{create_pods, native_group};
use crate::harness::*;
use crate::throughput::{Seen, env_num, quantile, watch_binds};

/// A one-GPU member of the native group `group` for the scheduler `scheduler`.
fn member(name: &str, group: &str, scheduler: &str) -> Value {
    let p = pod(name, &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "1024")], &[], Some(scheduler));
    let mut v = serde_json::to_value(p).expect("a pod");
    v["spec"]["schedulingGroup"] = json!({"podGroupName": group});
    v
}

/// One run's figures.
struct GangRun {
    pods: usize,
    bound: usize,
    bound_s: f64,
    /// Per group, creation to its last member bound (seconds), sorted.
    groups: Vec<f64>,
    whole: usize,
}

impl GangRun {
    fn rate(&self) -> f64 {
        self.bound as f64 / self.bound_s
    }
    fn q(&self, q: f64) -> f64 {
        quantile(&self.groups, q)
    }
    fn line(&self) -> String {
        format!(
            "{:.1} pods/s ({} of {} bound in {:.1} s), group created to all bound p50 {:.2} s p99 {:.2} s, {} groups whole",
            self.rate(),
            self.bound,
            self.pods,
            self.bound_s,
            self.q(0.5),
            self.q(0.99),
            self.whole
        )
    }
}

/// Creates the groups and their members, `creators` groups at a time, and waits for every member
/// to be bound (at most `timeout`).
async fn gang_burst(
    client: &kube::Client,
    scheduler: &str,
    groups: usize,
    members: usize,
    creators: usize,
    timeout: Duration,
) -> GangRun {
    let total = groups * members;
    let seen: Seen = Arc::default();
    let watch = watch_binds(client, total, seen.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let created: Arc<Mutex<BTreeMap<usize, Instant>>> = Arc::default();
    let start = Instant::now();
    futures::stream::iter(0..groups)
        .map(|g| {
            let (client, created, scheduler) = (client.clone(), created.clone(), scheduler.to_owned());
            async move {
                let name = format!("x3-g{g:03}");
                created.lock().unwrap().insert(g, Instant::now());
                native_group(&client, &name, members as u32).await;
                let pods = (0..members).map(|m| member(&format!("{name}-{m}"), &name, &scheduler)).collect();
                create_pods(&client, pods).await;
            }
        })
        .buffer_unordered(creators)
        .collect::<Vec<()>>()
        .await;
    let left = timeout.saturating_sub(start.elapsed());
    if let Ok(r) = tokio::time::timeout(left, watch).await {
        r.unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    let created = created.lock().unwrap().clone();
    let mut per_group = Vec::new();
    let mut whole = 0;
    for (g, at) in &created {
        let binds: Vec<Instant> = (0..members).filter_map(|m| seen.get(&format!("x3-g{g:03}-{m}")).copied()).collect();
        if binds.len() == members {
            whole += 1;
            let last = binds.iter().max().copied().unwrap_or(*at);
            per_group.push(last.saturating_duration_since(*at).as_secs_f64());
        }
    }
    per_group.sort_by(f64::total_cmp);
    let last = seen.values().max().copied();
    let bound_s = match last {
        Some(l) if seen.len() == total => l.saturating_duration_since(start).as_secs_f64(),
        _ => timeout.as_secs_f64(),
    };
    GangRun { pods: total, bound: seen.len(), bound_s, groups: per_group, whole }
}

#[tokio::test(flavor = "multi_thread")]
async fn x3_throughput_of_native_gangs_with_hami_rs_against_the_native_gang_alone() {
    if std::env::var_os("HAMI_E2E_THROUGHPUT").is_none() {
        println!("e2e[x3]: skipped (set HAMI_E2E_THROUGHPUT=1 to measure gang throughput)");
        return;
    }
    let groups: usize = env_num("HAMI_E2E_GANG_TPUT_GROUPS", 20);
    let members: usize = env_num("HAMI_E2E_GANG_TPUT_MEMBERS", 8);
    let nodes = FakeNodes::new("gpu-x3-", env_num::<usize>("HAMI_E2E_GANG_TPUT_NODES", 20), 8);
    let creators: usize = env_num("HAMI_E2E_GANG_TPUT_CREATORS", 4);
    let timeout = Duration::from_secs(env_num::<u64>("HAMI_E2E_GANG_TPUT_TIMEOUT", 300));

    let with = {
        let cp = ControlPlane::start_flavor("x3-hami", Flavor::NativeGang).await;
        let (mut plugin, mut hami, _ks) = crate::single(&cp, &nodes, &[]).await;
        let run = gang_burst(&cp.client, SCHEDULER_NAME, groups, members, creators, timeout).await;
        hami.assert_running();
        plugin.assert_running();
        wait_bound_allocated(&cp.client, timeout).await;
        let s = check_invariants(&cp.client).await;
        let m = hami.metrics().await.unwrap_or_default();
        println!(
            "e2e[x3]: with hami-rs: {}; group plans claimed {}, short {}, waiting {}; {}",
            run.line(),
            metric(&m, "hami_scheduler_pod_group_decisions_total", &["outcome=\"claimed\""]),
            metric(&m, "hami_scheduler_pod_group_decisions_total", &["outcome=\"short\""]),
            metric(&m, "hami_scheduler_pod_group_decisions_total", &["outcome=\"waiting\""]),
            s.line()
        );
        run
    };
    let alone = {
        let cp = ControlPlane::start_flavor("x3-alone", Flavor::NativeGang).await;
        let _setup = FakePlugin::start_with(&cp, &nodes, "fake-plugin-setup", &["--setup-only"]).await;
        let _ks = KubeScheduler::start_default(&cp, "kube-scheduler-default", SchedulerOpts::default()).await;
        let run = gang_burst(&cp.client, "default-scheduler", groups, members, creators, timeout).await;
        println!("e2e[x3]: kube-scheduler's native gang alone: {}", run.line());
        run
    };
    println!(
        "e2e summary x3: Kubernetes 1.37 native gang, {groups} groups x {members} one-GPU members on {} nodes x 8 GPUs: with hami-rs {} ({:.2} of alone); alone {}",
        nodes.nodes,
        with.line(),
        with.rate() / alone.rate(),
        alone.line()
    );
    assert_eq!(with.whole, groups, "e2e[x3]: every group bound whole with hami-rs");
}
