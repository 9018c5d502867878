//! `bodies`: the synthetic cluster file, written as `run --embedded` writes it, and N ready
//! `/filter` bodies, one per line, for an outside HTTP load tool (wrk with `loadtest/wrk/filter.lua`,
//! driven by `loadtest/wrk-compare.sh`). Nothing is sent.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::mix::ShapesArg;
use crate::run::{self, ClusterArgs, PodArgs};

/// The cluster file's name in `--out`.
pub const CLUSTER_FILE: &str = "cluster.json";
/// The bodies file's name in `--out`.
pub const BODIES_FILE: &str = "bodies.jsonl";

#[derive(Clone, Debug, clap::Args)]
pub struct BodiesArgs {
    /// Directory to write cluster.json (for `hami-rs serve --cluster-file`) and bodies.jsonl into.
    #[arg(long)]
    pub out: PathBuf,
    /// Bodies to write: pods 0..N, one `/filter` body a line.
    #[arg(long, default_value = "20000")]
    pub pods: u64,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub pod: PodArgs,
}

/// `hami-loadtest bodies`.
pub fn run(a: BodiesArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let s = run::synthetic(&a.cluster, &a.pod)?;
    let cluster = a.out.join(CLUSTER_FILE);
    s.write(&cluster, &a.pod.scheduler_name)?;
    let prefix = a.pod.prefix();
    let f = run::factory(&s, &a.pod, &prefix, ShapesArg::Four);
    let bodies = a.out.join(BODIES_FILE);
    let bytes = write_bodies(&bodies, a.pods, |i| f.make(i).filter_body())?;
    eprintln!(
        "wrote {} ({} nodes x {} GPUs, {} running pods)",
        cluster.display(),
        a.cluster.nodes,
        a.cluster.gpus_per_node,
        s.running.len()
    );
    eprintln!(
        "wrote {} ({} bodies, {:.1} MiB; pods {prefix}-0… in {}; candidates {}; shapes {})",
        bodies.display(),
        a.pods,
        bytes as f64 / (1024.0 * 1024.0),
        a.pod.namespace,
        a.pod.candidates().describe(a.cluster.nodes),
        a.pod.describe_shapes(ShapesArg::Four),
    );
    Ok(())
}

/// Writes `body(i)` for `i` in `0..n`, one a line (a body is compact JSON: no newline inside).
/// Returns the bytes written.
fn write_bodies(path: &Path, n: u64, body: impl Fn(u64) -> Vec<u8>) -> anyhow::Result<u64> {
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let mut bytes = 0u64;
    for i in 0..n {
        let b = body(i);
        w.write_all(&b)?;
        w.write_all(b"\n")?;
        bytes += b.len() as u64 + 1;
    }
    w.flush().with_context(|| format!("writing {}", path.display()))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: BodiesArgs,
    }

    #[test]
    fn bodies_are_one_filter_a_line_over_the_cluster_file() {
        let dir = std::env::temp_dir().join(format!("hami-loadtest-bodies-{}", std::process::id()));
        let out = dir.display().to_string();
        let args = [
            "bodies",
            "--out",
            &out,
            "--nodes",
            "300",
            "--gpus-per-node",
            "2",
            "--running-pods",
            "50",
            "--pods",
            "9",
            "--pod-prefix",
            "lt-b",
        ];
        let a = Cli::try_parse_from(args).expect("parses").a;
        assert_eq!(a.pod.candidates(), crate::driver::Candidates::Window(0), "window is the default");
        run(a).expect("written");
        let objects =
            hami_rs::backend::memory::ClusterObjects::load(&dir.join(CLUSTER_FILE)).expect("hami-rs loads it");
        assert_eq!((objects.nodes.len(), objects.pods.len()), (300, 50));
        let text = std::fs::read_to_string(dir.join(BODIES_FILE)).expect("bodies");
        let _ = std::fs::remove_dir_all(&dir);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 9);
        let mut starts = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let args: hami_rs::http::wire::ExtenderArgs<'_> = serde_json::from_str(line).expect("hami-rs decodes it");
            assert_eq!(args.pod.map(|p| p.metadata.name), Some(format!("lt-b-{i}")));
            let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
            let names = v["NodeNames"].as_array().expect("names");
            // 300 nodes: 50 - 300/125 = 48 %, 144 names.
            assert_eq!(names.len(), 144);
            starts.push(names[0].as_str().unwrap_or_default().to_owned());
        }
        assert_eq!(starts[..3], ["fake-gpu-0", "fake-gpu-144", "fake-gpu-288"]);
    }
}
