//! `kubectl-hami`, the kubectl plugin (`kubectl hami …` once it is on the PATH): what the GPUs
//! hold and why a pod is pending, read from the API server with the user's kubeconfig and
//! accounted by hami-rs's own engine in memory, with the scheduler's configuration read from its
//! Deployment. It writes nothing to the cluster.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hami_rs::inspect::{self, SchedulerConfig, TopFilter};

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
    /// The namespace; default: the context's namespace, else `default`. `top` lists only this
    /// namespace's pods when given.
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    /// Every namespace (`why` finds the pod by name in whichever namespace has it).
    #[arg(short = 'A', long, global = true)]
    all_namespaces: bool,
    /// Where hami-rs runs (its Deployment, labelled app.kubernetes.io/name=hami-rs, holds the
    /// scheduler's configuration); default: found in any namespace.
    #[arg(long, global = true)]
    scheduler_namespace: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Device usage: `top nodes [NODE]` (one line per node) or `top gpus [NODE]` (one per device,
    /// with its pods).
    Top {
        #[arg(value_enum)]
        what: What,
        /// Only this node.
        node: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
        /// Order: name, memory (most allocated first), free (most free memory first), pods.
        #[arg(long, default_value = "name", value_parser = clap::builder::PossibleValuesParser::new(inspect::SORT_KEYS))]
        sort_by: String,
    },
    /// Why a pod is where it is, or pending: its Events and, when it is not bound, its fit
    /// against the cluster as it is now with the scheduler's configuration: the reasons counted,
    /// the nodes closest to fitting and what they lack, and a preemption that would place it.
    Why {
        /// The pod's name.
        pod: String,
        /// List every node's reason, not only the closest.
        #[arg(long)]
        all: bool,
        /// Output format.
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
    },
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum What {
    Nodes,
    Gpus,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Table,
    Wide,
    Json,
    Yaml,
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

fn print<T: serde::Serialize>(value: &T, output: Output) -> anyhow::Result<String> {
    Ok(match output {
        Output::Yaml => serde_yaml::to_string(value)?,
        _ => serde_json::to_string_pretty(value)? + "\n",
    })
}

async fn run(cli: Cli) -> anyhow::Result<String> {
    let client = client(&cli).await?;
    match &cli.command {
        Command::Top { what, node, output, sort_by } => {
            // The accounting does not depend on the scheduler's policies: its defaults will do.
            let cfg = SchedulerConfig::defaults("top counts what is allocated")?;
            let cluster = inspect::read_cluster(&client).await?;
            let engine = inspect::engine(&cfg.flags, cluster).await?;
            let reports = engine.reports().await;
            let f = TopFilter {
                node: node.clone(),
                namespace: cli.namespace.clone().filter(|_| !cli.all_namespaces),
                sort_by: Some(sort_by.clone()),
            };
            let wide = *output == Output::Wide;
            let dra = inspect::dra_classes(&client, &engine.vendors().resource_names()).await;
            match what {
                What::Nodes => {
                    let rows = inspect::node_rows(&engine, &reports, &f)?;
                    match output {
                        Output::Table | Output::Wide => Ok(inspect::node_table(&rows, wide) + &inspect::dra_note(&dra)),
                        _ => print(&rows, *output),
                    }
                }
                What::Gpus => {
                    let rows = inspect::gpu_rows(&engine, &reports, &f)?;
                    match output {
                        Output::Table | Output::Wide => Ok(inspect::gpu_table(&rows, wide) + &inspect::dra_note(&dra)),
                        _ => print(&rows, *output),
                    }
                }
            }
        }
        Command::Why { pod, all, output } => {
            let namespace = cli.namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned());
            let found = inspect::find_pod(&client, &namespace, cli.all_namespaces, pod).await?;
            let cfg = inspect::scheduler_config(&client, cli.scheduler_namespace.as_deref()).await?;
            let why = inspect::why(&client, &cfg, &found).await?;
            match output {
                Output::Table | Output::Wide => Ok(inspect::why_text(&why, *all || *output == Output::Wide)),
                _ => print(&why, *output),
            }
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kubectl-hami: the async runtime did not start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rt = actix_rt::System::with_tokio_rt(move || rt);
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
