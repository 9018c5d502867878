//! What a run reports, in one shape for the JSON file and the human summary: throughput, latency
//! percentiles, outcomes, errors by kind, the scheduler's memory when this tool started it, the
//! invariant checks and a per-second timeline. Pure: no I/O.

use std::collections::BTreeMap;
use std::fmt::Write;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::driver::{Outcome, Series};
use crate::invariant::Check;

/// Latency percentiles of one endpoint, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    pub count: u64,
    pub min_us: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            count: h.len(),
            min_us: h.min(),
            mean_us: (h.mean() * 10.0).round() / 10.0,
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// One endpoint's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Endpoint {
    /// Requests sent.
    pub requests: u64,
    /// Answers received (any status), per second of the run.
    pub per_second: f64,
    pub latency: Latency,
}

impl Endpoint {
    fn of(requests: u64, s: &Series, secs: f64) -> Endpoint {
        let latency = Latency::of(&s.total);
        let per_second = if secs > 0.0 { (latency.count as f64 / secs * 10.0).round() / 10.0 } else { 0.0 };
        Endpoint { requests, per_second, latency }
    }
}

/// One second of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Second {
    pub second: u64,
    pub filters: u64,
    pub filter_p50_us: u64,
    pub filter_p99_us: u64,
    pub binds: u64,
    pub bind_p50_us: u64,
    pub bind_p99_us: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Outcomes {
    /// Filters answered with exactly one node.
    pub scheduled: u64,
    /// Filters answered with no node and FailedNodes.
    pub no_fit: u64,
    /// Binds answered `{"Error":""}`.
    pub bound: u64,
    /// Load pods per kind.
    pub kinds: BTreeMap<String, u64>,
}

/// The first, middle and last of the RSS samples (none when there are none).
pub fn rss_start_middle_end(samples: &[(f64, u64)]) -> Option<[(f64, u64); 3]> {
    let (first, last) = (samples.first()?, samples.last()?);
    Some([*first, samples[samples.len() / 2], *last])
}

/// The scheduler process this tool started.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Scheduler {
    pub program: String,
    pub pid: u32,
    /// From start until `/readyz` answered (loading the cluster file included).
    pub startup_s: f64,
    /// Resident set once ready, before the load.
    pub rss_ready_kib: Option<u64>,
    /// Peak resident set (`VmHWM`) at the end of the run.
    pub peak_rss_kib: Option<u64>,
    pub rss_end_kib: Option<u64>,
    /// Resident set sampled during the run (warmup included): seconds since the load started, KiB.
    pub rss_samples: Vec<(f64, u64)>,
    /// Its log file, when kept (`--keep-files`).
    pub log: Option<String>,
}

/// The run's settings, echoed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Settings {
    pub nodes: usize,
    pub gpus_per_node: usize,
    pub gpu_model: String,
    pub gpu_mem_mib: u64,
    pub split: u32,
    pub running_pods: usize,
    pub concurrency: usize,
    pub pods: Option<u64>,
    pub duration_s: Option<f64>,
    pub warmup: u64,
    pub seed: u64,
    pub mix: String,
    pub filter_only: bool,
    pub candidates: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// `target`, `embedded` or `kubeconfig`.
    pub mode: String,
    pub target: String,
    pub settings: Settings,
    pub elapsed_s: f64,
    pub filter: Endpoint,
    pub bind: Endpoint,
    pub outcomes: Outcomes,
    /// Every error by kind (`filter no-fit` included); see `error_samples` for one message each.
    pub errors: BTreeMap<String, u64>,
    pub errors_total: u64,
    pub error_samples: BTreeMap<String, String>,
    pub scheduler: Option<Scheduler>,
    pub invariant: Vec<Check>,
    /// False when any check that ran found an over-committed device.
    pub invariant_ok: bool,
    pub timeline: Vec<Second>,
}

fn timeline(f: &Series, b: &Series) -> Vec<Second> {
    let n = f.per_second.len().max(b.per_second.len());
    (0..n)
        .map(|i| {
            let q = |s: &Series, q: f64| {
                s.per_second.get(i).filter(|h| !h.is_empty()).map_or(0, |h| h.value_at_quantile(q))
            };
            let c = |s: &Series| s.per_second.get(i).map_or(0, Histogram::len);
            Second {
                second: i as u64,
                filters: c(f),
                filter_p50_us: q(f, 0.5),
                filter_p99_us: q(f, 0.99),
                binds: c(b),
                bind_p50_us: q(b, 0.5),
                bind_p99_us: q(b, 0.99),
            }
        })
        .collect()
}

impl Report {
    pub fn new(mode: &str, target: &str, settings: Settings, o: &Outcome) -> Report {
        let secs = o.elapsed.as_secs_f64();
        let r = &o.rec;
        Report {
            mode: mode.into(),
            target: target.into(),
            settings,
            elapsed_s: (secs * 1000.0).round() / 1000.0,
            filter: Endpoint::of(r.filters_sent, &r.filter, secs),
            bind: Endpoint::of(r.binds_sent, &r.bind, secs),
            outcomes: Outcomes {
                scheduled: r.scheduled,
                no_fit: r.no_fit,
                bound: r.bound,
                kinds: r.kinds.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            },
            errors: r.errors.clone(),
            errors_total: r.errors_total(),
            error_samples: r
                .error_samples
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            scheduler: None,
            invariant: Vec::new(),
            invariant_ok: true,
            timeline: timeline(&r.filter, &r.bind),
        }
    }

    pub fn set_invariant(&mut self, checks: Vec<Check>) {
        self.invariant_ok = checks.iter().all(|c| !c.checked || c.ok);
        self.invariant = checks;
    }

    /// The human summary.
    pub fn human(&self) -> String {
        let mut s = String::new();
        let st = &self.settings;
        let _ = writeln!(s, "== hami-loadtest: {} {} ==", self.mode, self.target);
        let _ = writeln!(
            s,
            "cluster   {} nodes x {} GPUs ({}, {} MiB, split {}), {} running pods",
            st.nodes, st.gpus_per_node, st.gpu_model, st.gpu_mem_mib, st.split, st.running_pods
        );
        let until = match (st.pods, st.duration_s) {
            (Some(p), _) => format!("{p} pods"),
            (_, Some(d)) => format!("{d}s"),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "load      {until}, concurrency {}, warmup {}, candidates {}, {}, seed {}, mix {}",
            st.concurrency,
            st.warmup,
            st.candidates,
            if st.filter_only { "filter only" } else { "filter + bind" },
            st.seed,
            st.mix
        );
        let _ = writeln!(s, "elapsed   {:.3}s", self.elapsed_s);
        let _ = writeln!(
            s,
            "{:<8} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "", "requests", "per sec", "p50", "p90", "p99", "p99.9", "max", "mean"
        );
        for (name, e) in [("filter", &self.filter), ("bind", &self.bind)] {
            if e.requests == 0 && name == "bind" {
                continue;
            }
            let l = &e.latency;
            let _ = writeln!(
                s,
                "{name:<8} {:>9} {:>10.1} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                e.requests,
                e.per_second,
                ms(l.p50_us),
                ms(l.p90_us),
                ms(l.p99_us),
                ms(l.p999_us),
                ms(l.max_us),
                ms(l.mean_us.round() as u64)
            );
        }
        let o = &self.outcomes;
        let kinds: Vec<String> = o.kinds.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(
            s,
            "outcomes  scheduled {}, no-fit {}, bound {} ({})",
            o.scheduled,
            o.no_fit,
            o.bound,
            kinds.join(", ")
        );
        if self.errors.is_empty() {
            let _ = writeln!(s, "errors    none");
        } else {
            let _ = writeln!(s, "errors    {} in all", self.errors_total);
            for (k, v) in &self.errors {
                let _ = writeln!(s, "  {v:>9}  {k}");
                if let Some(m) = self.error_samples.get(k) {
                    let _ = writeln!(s, "             e.g. {}", m.chars().take(160).collect::<String>());
                }
            }
        }
        if let Some(sc) = &self.scheduler {
            let kib = |k: Option<u64>| k.map_or("-".to_owned(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
            let _ = writeln!(
                s,
                "scheduler pid {}, ready in {:.2}s, RSS ready {}, peak RSS {}, RSS at end {}",
                sc.pid,
                sc.startup_s,
                kib(sc.rss_ready_kib),
                kib(sc.peak_rss_kib),
                kib(sc.rss_end_kib)
            );
            if let Some([a, m, z]) = rss_start_middle_end(&sc.rss_samples) {
                let _ = writeln!(
                    s,
                    "RSS over the run: start {} ({:.0}s), middle {} ({:.0}s), end {} ({:.0}s), {} samples",
                    kib(Some(a.1)),
                    a.0,
                    kib(Some(m.1)),
                    m.0,
                    kib(Some(z.1)),
                    z.0,
                    sc.rss_samples.len()
                );
            }
        }
        for c in &self.invariant {
            let verdict = if !c.checked {
                "not checked".to_owned()
            } else if c.ok {
                format!("ok: {} devices within slots, memory and cores", c.devices)
            } else {
                format!("FAILED: {} of {} devices over-committed", c.violation_count, c.devices)
            };
            let pods = if c.pods > 0 { format!(" ({} pods recounted)", c.pods) } else { String::new() };
            let _ = writeln!(s, "invariant [{}] {verdict}{pods}", c.source);
            for v in &c.violations {
                let _ = writeln!(s, "  {v}");
            }
            if let Some(n) = &c.note {
                let _ = writeln!(s, "  note: {n}");
            }
        }
        s
    }
}

pub fn ms(us: u64) -> String {
    format!("{:.3}ms", us as f64 / 1000.0)
}

/// The ratio of two latencies, hami-rs over the null extender.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Ratio {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Comparison {
    pub hami_rs: Report,
    pub null_extender: Report,
    /// hami-rs latency / null extender latency, per percentile.
    pub ratio: Ratio,
    /// The headline targets: at most this ratio at p50, and at p99.
    pub target_p50: f64,
    pub target_p99: f64,
    pub within_target: bool,
}

impl Comparison {
    pub fn new(hami_rs: Report, null_extender: Report, (target_p50, target_p99): (f64, f64)) -> Comparison {
        let (a, b) = (&hami_rs.filter.latency, &null_extender.filter.latency);
        let r = |x: u64, y: u64| if y == 0 { 0.0 } else { (x as f64 / y as f64 * 100.0).round() / 100.0 };
        let ratio = Ratio {
            p50: r(a.p50_us, b.p50_us),
            p90: r(a.p90_us, b.p90_us),
            p99: r(a.p99_us, b.p99_us),
            p999: r(a.p999_us, b.p999_us),
            max: r(a.max_us, b.max_us),
        };
        let within_target = ratio.p50 > 0.0 && ratio.p50 <= target_p50 && ratio.p99 <= target_p99;
        Comparison { hami_rs, null_extender, ratio, target_p50, target_p99, within_target }
    }

    pub fn human(&self) -> String {
        let (a, b) = (&self.hami_rs.filter.latency, &self.null_extender.filter.latency);
        let mut s = String::new();
        let _ = writeln!(s, "== compare: filter latency, hami-rs vs the null extender ==");
        let _ = writeln!(s, "{:<14} {:>9} {:>9} {:>9} {:>9} {:>9}", "", "p50", "p90", "p99", "p99.9", "max");
        for (name, l) in [("hami-rs", a), ("null", b)] {
            let _ = writeln!(
                s,
                "{name:<14} {:>9} {:>9} {:>9} {:>9} {:>9}",
                ms(l.p50_us),
                ms(l.p90_us),
                ms(l.p99_us),
                ms(l.p999_us),
                ms(l.max_us)
            );
        }
        let r = &self.ratio;
        let _ = writeln!(
            s,
            "{:<14} {:>8.2}x {:>8.2}x {:>8.2}x {:>8.2}x {:>8.2}x",
            "ratio", r.p50, r.p90, r.p99, r.p999, r.max
        );
        let _ = writeln!(
            s,
            "target: hami-rs <= {:.1}x the null extender at p50 and <= {:.1}x at p99: {}",
            self.target_p50,
            self.target_p99,
            if self.within_target { "met" } else { "NOT met" }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Recorder;
    use std::time::Duration;

    #[test]
    fn rss_start_middle_end_picks_first_middle_last() {
        assert_eq!(rss_start_middle_end(&[]), None);
        assert_eq!(rss_start_middle_end(&[(0.0, 7)]), Some([(0.0, 7); 3]));
        let s: Vec<(f64, u64)> = (0..5).map(|i| (i as f64 * 5.0, 100 + i)).collect();
        assert_eq!(rss_start_middle_end(&s), Some([(0.0, 100), (10.0, 102), (20.0, 104)]));
    }

    fn outcome() -> Outcome {
        let mut rec = Recorder::default();
        for i in 0..1000u64 {
            rec.filter.record(Duration::from_millis(i * 3), Duration::from_micros(100 + i));
        }
        rec.filters_sent = 1001;
        rec.scheduled = 990;
        rec.no_fit = 10;
        rec.errors.insert("filter no-fit".into(), 10);
        rec.errors.insert("filter transport: timeout".into(), 1);
        rec.error_samples.insert("filter transport: timeout".into(), "operation timed out".into());
        Outcome { rec, elapsed: Duration::from_secs(3) }
    }

    #[test]
    fn the_json_report_has_every_figure() {
        let mut r =
            Report::new("embedded", "http://127.0.0.1:1", Settings { nodes: 3, ..Settings::default() }, &outcome());
        r.set_invariant(vec![Check::devices("usage", &[], 0)]);
        let v = serde_json::to_value(&r).expect("serialises");
        for k in [
            "mode",
            "target",
            "settings",
            "elapsed_s",
            "filter",
            "bind",
            "outcomes",
            "errors",
            "errors_total",
            "error_samples",
            "scheduler",
            "invariant",
            "invariant_ok",
            "timeline",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        let l = &v["filter"]["latency"];
        for k in ["count", "min_us", "mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"] {
            assert!(l[k].is_number(), "latency.{k}");
        }
        assert_eq!(l["count"], 1000);
        assert!((598..=602).contains(&l["p50_us"].as_u64().unwrap_or(0)), "{l}");
        assert!(l["max_us"].as_u64().unwrap_or(0) >= 1099);
        assert_eq!(v["filter"]["requests"], 1001);
        assert_eq!(v["filter"]["per_second"], 333.3);
        assert_eq!(v["errors_total"], 11);
        assert_eq!(v["outcomes"]["no_fit"], 10);
        assert_eq!(v["settings"]["nodes"], 3);
        assert_eq!(v["invariant_ok"], true);
        assert_eq!(v["invariant"][0]["source"], "usage");
        let t = v["timeline"].as_array().expect("timeline");
        assert_eq!(t.len(), 3);
        assert_eq!(t.iter().map(|s| s["filters"].as_u64().unwrap_or(0)).sum::<u64>(), 1000);
        let human = r.human();
        assert!(
            human.contains("filter") && human.contains("transport: timeout") && human.contains("invariant [usage] ok")
        );
    }

    #[test]
    fn a_failed_check_fails_the_report_and_a_skipped_one_does_not() {
        let mut r = Report::new("target", "t", Settings::default(), &outcome());
        r.set_invariant(vec![Check::skipped("usage", "GET /usage: 404")]);
        assert!(r.invariant_ok);
        let bad = crate::invariant::Device {
            node: "n".into(),
            uuid: "u".into(),
            count: 1,
            mem_total: 1,
            cores_total: 1,
            used: 2,
            mem_used: 0,
            cores_used: 0,
        };
        r.set_invariant(vec![Check::devices("usage", &[bad], 0)]);
        assert!(!r.invariant_ok);
        assert!(r.human().contains("FAILED"));
    }

    #[test]
    fn the_comparison_divides_percentiles() {
        let a = Report::new("embedded", "a", Settings::default(), &outcome());
        let mut b = a.clone();
        b.filter.latency.p50_us = a.filter.latency.p50_us / 2;
        b.filter.latency.p99_us = a.filter.latency.p99_us;
        let c = Comparison::new(a.clone(), b.clone(), (1.5, 2.0));
        assert!((c.ratio.p50 - 2.0).abs() < 0.02);
        assert!((c.ratio.p99 - 1.0).abs() < 0.001);
        assert!(!c.within_target, "2x at p50 misses 1.5x");
        assert!(Comparison::new(a, b, (2.1, 2.0)).within_target);
        let v = serde_json::to_value(&c).expect("serialises");
        assert!(v["hami_rs"].is_object() && v["null_extender"].is_object() && v["ratio"]["p99"].is_number());
        assert!(c.human().contains("ratio"));
    }
}
