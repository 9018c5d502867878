//! `hami-loadtest`: drives an extender over its HTTP protocol and fakes HAMi's device plugin, so
//! the whole scheduling protocol can run and be measured without GPUs.
//!
//! ```text
//! run            the load generator: --target URL | --embedded | --kubeconfig K --target URL
//! compare        the same filter-only load against the null extender and an embedded hami-rs
//! bodies         the cluster file and N /filter bodies for an outside load tool (wrk)
//! null-extender  hami-rs's HTTP stack answering the first candidate, without scheduling
//! fake-plugin    a fake HAMi device plugin for N fake GPU nodes in a real API server
//! ```

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod allocate;
mod bodies;
mod child;
mod cluster;
mod driver;
mod fake_plugin;
mod invariant;
mod kube_mode;
mod mix;
mod null_extender;
mod plot;
mod report;
mod run;

#[derive(Parser)]
#[command(
    name = "hami-loadtest",
    version,
    about = "Load generator and fake device plugin for HAMi-compatible schedulers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Drive an extender with synthetic pods over the extender HTTP protocol and report
    /// throughput, latency percentiles, errors by kind and an end-of-run invariant check.
    ///
    /// Exit codes: 0 ok, 1 error, 3 a device was over-committed.
    Run(Box<run::RunArgs>),
    /// Run the same filter-only load against the null extender and an embedded hami-rs, and
    /// print the latency ratio (target: hami-rs at most 1.5x the null extender at p50 and 2x at p99).
    Compare(Box<run::CompareArgs>),
    /// Write the synthetic cluster file (for `hami-rs serve --cluster-file`) and N /filter request
    /// bodies, one a line, for an outside load tool (loadtest/wrk/filter.lua, loadtest/wrk-compare.sh).
    Bodies(Box<bodies::BodiesArgs>),
    /// Serve hami-rs's HTTP stack answering the first candidate node without scheduling.
    NullExtender(null_extender::NullArgs),
    /// Run a fake HAMi device plugin for N fake GPU nodes.
    FakePlugin(fake_plugin::FakePluginArgs),
}

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let command = Cli::parse().command;
    // The fake plugin logs each allocation; during a load run those lines would bury the progress.
    let level = if matches!(command, Command::FakePlugin(_) | Command::NullExtender(_)) { "info" } else { "warn" };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into()))
        .init();
    let result = match command {
        // hami-rs's setup: an actix System over a multi-threaded tokio runtime.
        Command::NullExtender(a) => null_extender::run_blocking(a).map(|()| ExitCode::SUCCESS),
        Command::Bodies(a) => bodies::run(*a).map(|()| ExitCode::SUCCESS),
        other => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(rt) => rt.block_on(async_main(other)),
            Err(e) => Err(e.into()),
        },
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hami-loadtest: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn async_main(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(a) => run::run(*a).await,
        Command::Compare(a) => run::compare(*a).await,
        Command::NullExtender(_) | Command::Bodies(_) => Ok(ExitCode::FAILURE),
        Command::FakePlugin(a) => {
            let setup_only = a.setup_only;
            let h = fake_plugin::spawn_forever(a);
            if setup_only {
                h.await??;
            } else {
                tokio::select! {
                    r = h => { r??; }
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
