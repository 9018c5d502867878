//! Fixture builders for tests, benches and the load generator: the pure ones from
//! `hami_core::testing` (nodes with NVIDIA GPUs, pods with device requests:
//! `node("a").gpu(gpu("GPU-a", 16384).used(1, 12288, 30))`, `pod().gpu(1).mem_mib(4096)`), and
//! the ones that need the scheduler's flags or engine.

pub use hami_core::testing::*;

use crate::model::PodView;
use crate::model::pod::NodeView;

/// The scheduler flags `hami-rs simulate` would get with `extra` (e.g. `--enable-iluvatar`).
pub fn scheduler_flags(extra: &[&str]) -> crate::config::SchedulerFlags {
    use clap::Parser;
    let mut args = vec!["hami-rs", "simulate", "--cluster-file", "cluster.yaml", "--pods", "pods.yaml"];
    args.extend_from_slice(extra);
    match crate::config::Cli::try_parse_from(args) {
        Ok(crate::config::Cli { command: crate::config::Command::Simulate(s) }) => s.sched,
        Ok(_) => unreachable!("the simulate subcommand was given"),
        Err(e) => panic!("fixture flags {extra:?} do not parse: {e}"),
    }
}

/// Places `pods` in order through the real engine over an in-memory cluster of `nodes` (filter,
/// then bind, as `hami-rs simulate` does). Needs an actix system (`#[actix::test]`).
pub async fn simulate(nodes: Vec<NodeView>, pods: Vec<PodView>) -> crate::simulate::Simulation {
    let cluster = crate::backend::memory::ClusterObjects { nodes, ..Default::default() };
    let engine = crate::app::memory_engine(&scheduler_flags(&[]), cluster).await.expect("the chart's vendors load");
    crate::simulate::simulate_pods(&engine, pods).await.expect("the simulation runs")
}
