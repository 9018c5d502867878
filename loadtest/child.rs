//! Child processes the load generator starts itself (`hami-rs serve`, the null extender): free
//! loopback ports, waiting for `/readyz`, peak RSS from `/proc`, and stopping (SIGTERM, then kill).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot start {what}: {source}")]
    Spawn {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} exited with {status} before it was ready; last log lines:\n{tail}")]
    Exited { what: String, status: std::process::ExitStatus, tail: String },
    #[error("{what} was not ready within {secs} s; last log lines:\n{tail}")]
    NotReady { what: String, secs: u64, tail: String },
    #[error("no free loopback port: {0}")]
    Port(#[source] std::io::Error),
}

/// A free port on 127.0.0.1 (the socket is closed again, so another process could take it first).
pub fn free_port() -> Result<u16, Error> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(Error::Port)?;
    Ok(l.local_addr().map_err(Error::Port)?.port())
}

/// `VmHWM` (peak resident set) and `VmRSS` of a process, in KiB.
pub fn memory_kib(pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return (None, None) };
    let field = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// A started child with its log file.
pub struct Proc {
    pub what: String,
    pub child: Child,
    pub pid: u32,
    pub log: PathBuf,
}

/// The last `n` lines of a log file.
pub fn tail(path: &Path, n: usize) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Proc {
    /// Starts `program args…` with stdout and stderr appended to `log`, environment `env` added.
    pub fn spawn(
        what: &str,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        log: &Path,
    ) -> Result<Proc, Error> {
        let spawn_err = |source| Error::Spawn { what: format!("{what} ({})", program.display()), source };
        let out = std::fs::File::create(log).map_err(spawn_err)?;
        let err = out.try_clone().map_err(spawn_err)?;
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err).kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().map_err(spawn_err)?;
        let pid = child.id().unwrap_or(0);
        Ok(Proc { what: what.to_owned(), child, pid, log: log.to_owned() })
    }

    /// Polls `GET <base>/readyz` until it answers 200; fails early if the child exits.
    pub async fn wait_ready(&mut self, base: &str, timeout: Duration) -> Result<Duration, Error> {
        let started = Instant::now();
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| Error::Spawn { what: self.what.clone(), source: std::io::Error::other(e) })?;
        let url = format!("{base}/readyz");
        let polls = (timeout.as_millis() / 50).max(1);
        for _ in 0..polls {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Error::Exited { what: self.what.clone(), status, tail: tail(&self.log, 20) });
            }
            if let Ok(r) = client.get(&url).send().await
                && r.status().is_success()
            {
                return Ok(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(Error::NotReady { what: self.what.clone(), secs: timeout.as_secs(), tail: tail(&self.log, 20) })
    }

    pub fn memory_kib(&self) -> (Option<u64>, Option<u64>) {
        memory_kib(self.pid)
    }

    /// SIGTERM, up to `grace` for it to exit, then SIGKILL.
    pub async fn stop(mut self, grace: Duration) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        if let Ok(pid) = libc::pid_t::try_from(self.pid)
            && pid > 0
        {
            // SAFETY: kill(2) has no memory effects; `pid` is our own child, not yet reaped
            // (try_wait above saw it running), so the id cannot have been reused.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        if tokio::time::timeout(grace, self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}
