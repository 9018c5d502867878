//! The `hami-rs` binary: parse flags, start logging, run a subcommand on an actix System over a
//! multi-threaded tokio runtime. An invalid configuration exits with code 64 before any socket is bound.

use std::process::ExitCode;

use clap::Parser;
use hami_rs::config::{Cli, Command, LogFormat, SchedulerFlags};

fn init_tracing(flags: &SchedulerFlags) {
    use tracing_subscriber::EnvFilter;
    // klog's -v maps onto levels: 0-2 info, 3-4 debug, 5+ trace; RUST_LOG wins when set.
    let level = match flags.verbosity {
        0..=2 => "info",
        3..=4 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(format!("hami_rs={level},warn")));
    // Colour codes only for a terminal: a log file or a collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match flags.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Human => builder.init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // rustls needs one process-wide crypto provider before any TLS config or kube client exists.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let flags = match &cli.command {
        Command::Serve(a) => &a.sched,
        Command::Simulate(a) => &a.sched,
    };
    init_tracing(flags);
    let rt = actix_rt::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("the tokio runtime starts")
    });
    let result: anyhow::Result<()> = rt.block_on(async move {
        match cli.command {
            Command::Serve(a) => hami_rs::app::serve(*a).await.map_err(anyhow::Error::from),
            Command::Simulate(a) => {
                let sim = hami_rs::simulate::run(&a).await?;
                match a.output {
                    hami_rs::config::OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&sim)?),
                    hami_rs::config::OutputFormat::Table => print!("{}", hami_rs::simulate::render_table(&sim)),
                }
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let invalid =
                e.downcast_ref::<hami_rs::app::Error>().is_some_and(|e| matches!(e, hami_rs::app::Error::Config(_)));
            eprintln!("hami-rs: {e:#}");
            if invalid { ExitCode::from(64) } else { ExitCode::FAILURE }
        }
    }
}
