//! The `hami-rs` binary: parse flags, start logging, run a subcommand on an actix System over a
//! multi-threaded tokio runtime. An invalid configuration exits with code 64 before any socket is bound.

use std::process::ExitCode;

use clap::Parser;
use hami_rs::config::{Cli, Command, LogFormat, SchedulerFlags};
use hami_rs::log_writer::LogWriter;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn init_tracing(flags: &SchedulerFlags) -> LogWriter {
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
    let writer = LogWriter::stderr();
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer.clone()).with_ansi(ansi);
    match flags.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Human => builder.init(),
    }
    writer
}

/// The exit code of an invalid configuration (BSD's EX_USAGE).
const INVALID: u8 = 64;

/// Parses the command line. clap stops at the first value that does not read; to list every
/// problem at once, the flag it names is set aside (its value on the command line dropped, or an
/// environment value overridden by the flag's default) and the line parsed again.
fn parse_cli() -> Result<Cli, ExitCode> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut problems: Vec<String> = Vec::new();
    loop {
        let e = match Cli::try_parse_from(&args) {
            Ok(cli) if problems.is_empty() => return Ok(cli),
            Ok(cli) => {
                // The values that did read may have problems of their own.
                let more = match &cli.command {
                    Command::Serve(a) => a.validate().err(),
                    Command::Simulate(a) => a.validate().err(),
                };
                problems.extend(more.into_iter().flat_map(|i| i.0));
                break;
            }
            Err(e) => e,
        };
        if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
            e.exit();
        }
        // The message without clap's usage and help lines (after the first blank line).
        let text = e.render().to_string();
        let message: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
        problems.push(message.join(" ").trim_start_matches("error: ").to_owned());
        let retry =
            matches!(e.kind(), ErrorKind::InvalidValue | ErrorKind::ValueValidation | ErrorKind::UnknownArgument)
                && problems.len() < 32;
        let flag = match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(s)) => s.split([' ', '=']).next().unwrap_or_default().to_owned(),
            _ => String::new(),
        };
        if !retry || !flag.starts_with("--") || !set_aside(&mut args, &flag) {
            break;
        }
    }
    eprintln!("hami-rs: invalid configuration:");
    for p in &problems {
        eprintln!("  {p}");
    }
    Err(ExitCode::from(INVALID))
}

/// Drops `flag` and its value from `args`; where it was given only in the environment, adds it
/// with its default so the environment's value is not read. False when neither applies.
fn set_aside(args: &mut Vec<std::ffi::OsString>, flag: &str) -> bool {
    let with_value = format!("{flag}=");
    let before = args.len();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        if a == flag {
            // `--flag value`, unless the next word is another flag (a boolean's bare form).
            let takes_next = args.get(i + 1).is_some_and(|v| !v.to_string_lossy().starts_with("--"));
            args.drain(i..if takes_next { i + 2 } else { i + 1 });
        } else if a.starts_with(&with_value) {
            args.remove(i);
        } else {
            i += 1;
        }
    }
    if args.len() != before {
        return true;
    }
    let cmd = <Cli as clap::CommandFactory>::command();
    let long = flag.trim_start_matches("--");
    let default = cmd
        .get_subcommands()
        .flat_map(|c| c.get_arguments())
        .find(|a| a.get_long() == Some(long) && a.get_env().is_some())
        .and_then(|a| a.get_default_values().first().cloned());
    match default {
        Some(d) => {
            let mut v = std::ffi::OsString::from(with_value);
            v.push(d);
            // After the subcommand's name, where its flags are read.
            args.insert(args.len().min(2), v);
            true
        }
        None => false,
    }
}

fn main() -> ExitCode {
    let cli = match parse_cli() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // rustls needs one process-wide crypto provider before any TLS config or kube client exists.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let flags = match &cli.command {
        Command::Serve(a) => &a.sched,
        Command::Simulate(a) => &a.sched,
    };
    let log = init_tracing(flags);
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
    log.flush();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            use hami_rs::app::Error as E;
            // What the operator gave (flags, the device config, the cluster file) is at fault.
            let invalid = e
                .downcast_ref::<E>()
                .is_some_and(|e| matches!(e, E::Config(_) | E::DeviceConfig(_) | E::Cluster(_) | E::MetricsAddress(_)));
            eprintln!("hami-rs: {}", hami_rs::error_text::one_line(e.as_ref()));
            if invalid { ExitCode::from(INVALID) } else { ExitCode::FAILURE }
        }
    }
}
