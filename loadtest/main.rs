//! `hami-loadtest`: drives an extender over its HTTP protocol and fakes HAMi's device plugin, so
//! the whole scheduling protocol can run and be measured without GPUs.

use clap::{Parser, Subcommand};

mod fake_plugin;

#[derive(Parser)]
#[command(name = "hami-loadtest", version, about = "Load generator and fake device plugin for HAMi-compatible schedulers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a fake HAMi device plugin for N fake GPU nodes.
    FakePlugin(fake_plugin::FakePluginArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
    ).init();
    match Cli::parse().command {
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
            Ok(())
        }
    }
}
