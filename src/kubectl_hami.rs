//! `kubectl-hami`, the kubectl plugin (`kubectl hami …` once it is on the PATH): what the GPUs
//! hold and why a pod is pending, read from the API server with the user's kubeconfig and
//! accounted by hami-rs's own engine in memory. It writes nothing to the cluster.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hami_rs::config::SchedulerFlags;
use hami_rs::inspect;

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-hami",
    version,
    about = "What hami-rs sees: device usage per node and GPU, and why a pod is pending"
)]
struct Cli {
    /// Kubeconfig file; default: KUBECONFIG, ~/.kube/config or the in-cluster account.
    #[arg(long, global = true)]
    kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use; default: its current context.
    #[arg(long, global = true)]
    context: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Device usage: `top nodes` (one line per node) or `top gpus` (one per device, with its pods).
    Top {
        #[arg(value_enum)]
        what: What,
    },
    /// Why a pod is where it is, or pending: its Events, and the fit against the cluster as it is
    /// now, node by node (use the scheduler's policy flags to match its configuration).
    Why {
        /// The pod's name.
        pod: String,
        /// Its namespace.
        #[arg(short, long, default_value = "default")]
        namespace: String,
        #[command(flatten)]
        sched: Box<SchedulerFlags>,
    },
}

/// The scheduler's flags at their defaults (and HAMI_* environment values).
#[derive(Parser, Debug)]
struct Defaults {
    #[command(flatten)]
    sched: SchedulerFlags,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum What {
    Nodes,
    Gpus,
}

async fn client(cli: &Cli) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions { context: cli.context.clone(), ..Default::default() };
    let cfg = match &cli.kubeconfig {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        None if cli.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(cfg)?)
}

async fn run(cli: Cli) -> anyhow::Result<String> {
    let client = client(&cli).await?;
    match &cli.command {
        Command::Top { what } => {
            // The scheduler's defaults: the accounting does not depend on its policies.
            let flags = Defaults::parse_from(["kubectl-hami"]).sched;
            let cluster = inspect::read_cluster(&client).await?;
            let engine = inspect::engine(&flags, cluster).await?;
            let reports = engine.reports().await;
            Ok(match what {
                What::Nodes => inspect::top_nodes(&engine, &reports),
                What::Gpus => inspect::top_gpus(&engine, &reports),
            })
        }
        Command::Why { pod, namespace, sched } => Ok(inspect::why(&client, sched, namespace, pod).await?),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = actix_rt::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("the tokio runtime starts")
    });
    match rt.block_on(run(cli)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kubectl-hami: {}", hami_rs::error_text::one_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
