//! The Grafana dashboard: `docs/grafana-dashboard.json` and the chart's copy
//! (`charts/hami-rs/dashboards/hami-rs.json`) are the same valid JSON, and every metric a panel
//! queries is one hami-rs exports.
//!
//! `EXPORTED` is the list of metric names hami-rs serves on its metrics listener. It must match
//! the names in `src/metrics.rs`; `exported_list_matches_src_metrics` fails when either side
//! changes without the other.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Gauge,
    Counter,
    Histogram,
}

/// Every metric name hami-rs exports (keep in step with src/metrics.rs). HAMi's legacy names
/// (`--legacy-metrics`) are left out on purpose: the dashboard must not depend on them.
const EXPORTED: &[(&str, Kind)] = &[
    // HAMi's gauges, same names and labels.
    ("hami_build_info", Kind::Gauge),
    ("hami_gpu_memory_limit_bytes", Kind::Gauge),
    ("hami_gpu_core_limit_ratio", Kind::Gauge),
    ("hami_gpu_memory_allocated_bytes", Kind::Gauge),
    ("hami_gpu_shared_count", Kind::Gauge),
    ("hami_gpu_core_allocated_ratio", Kind::Gauge),
    ("hami_node_gpu_overview", Kind::Gauge),
    ("hami_node_gpu_memory_allocated_ratio", Kind::Gauge),
    ("hami_vgpu_memory_allocated_bytes", Kind::Gauge),
    ("hami_vgpu_core_allocated_ratio", Kind::Gauge),
    ("hami_resource_quota_used", Kind::Gauge),
    ("hami_resource_quota_limit", Kind::Gauge),
    // hami-rs's own.
    ("hami_scheduler_filter_duration_seconds", Kind::Histogram),
    ("hami_scheduler_bind_duration_seconds", Kind::Histogram),
    ("hami_scheduler_phase_duration_seconds", Kind::Histogram),
    ("hami_scheduler_decisions_total", Kind::Counter),
    ("hami_scheduler_rejections_total", Kind::Counter),
    ("hami_scheduler_reservations_expired_total", Kind::Counter),
    ("hami_scheduler_reservations_outstanding", Kind::Gauge),
    ("hami_scheduler_api_requests_total", Kind::Counter),
    ("hami_scheduler_node_lock_waits_total", Kind::Counter),
    ("hami_scheduler_node_lock_timeouts_total", Kind::Counter),
    ("hami_scheduler_node_lock_handovers_total", Kind::Counter),
    ("hami_scheduler_watch_restarts_total", Kind::Counter),
    ("hami_scheduler_binds_elsewhere_total", Kind::Counter),
    ("hami_scheduler_filter_nodes_evaluated_total", Kind::Counter),
    ("hami_scheduler_preemptions_total", Kind::Counter),
    ("hami_scheduler_pod_groups", Kind::Gauge),
    ("hami_scheduler_defrag_plans_total", Kind::Counter),
    ("hami_scheduler_defrag_pods_moved_total", Kind::Counter),
    ("hami_scheduler_defrag_devices_freed_total", Kind::Counter),
    ("hami_scheduler_pod_group_placed_seconds", Kind::Histogram),
    ("hami_scheduler_pod_group_claims_released_total", Kind::Counter),
    ("hami_scheduler_pod_group_decisions_total", Kind::Counter),
    ("hami_scheduler_requests_refused_total", Kind::Counter),
    ("hami_scheduler_filter_unwatched_pods_total", Kind::Counter),
    ("hami_scheduler_preemption_victims_total", Kind::Counter),
    ("hami_scheduler_preemption_freed_device_memory_bytes_total", Kind::Counter),
    ("hami_scheduler_preemption_freed_device_cores_total", Kind::Counter),
    ("hami_scheduler_leader", Kind::Gauge),
    ("hami_scheduler_is_leader", Kind::Gauge),
    ("hami_scheduler_cache_synced", Kind::Gauge),
    ("hami_scheduler_pending_pods", Kind::Gauge),
    ("hami_scheduler_unschedulable_pods", Kind::Gauge),
    ("hami_scheduler_dra_extended_resource_classes", Kind::Gauge),
];

const DOCS_COPY: &str = "docs/grafana-dashboard.json";
const CHART_COPY: &str = "charts/hami-rs/dashboards/hami-rs.json";

fn read(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DOCS_COPY)).unwrap_or_else(|e| panic!("{DOCS_COPY} is not valid JSON: {e}"))
}

/// A series name as PromQL sees it, resolved to the exported metric it belongs to
/// (`<histogram>_bucket`, `_sum` and `_count` belong to the histogram).
fn resolve(series: &str) -> Option<&'static str> {
    if let Some((name, _)) = EXPORTED.iter().find(|(n, k)| *n == series && *k != Kind::Histogram) {
        return Some(name);
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = series.strip_suffix(suffix)
            && let Some((name, _)) = EXPORTED.iter().find(|(n, k)| *n == base && *k == Kind::Histogram)
        {
            return Some(name);
        }
    }
    None
}

/// PromQL functions and aggregation operators (an identifier followed by `(`).
#[rustfmt::skip]
const FUNCTIONS: &[&str] = &[
    "abs", "absent", "absent_over_time", "avg", "avg_over_time", "bottomk", "ceil", "changes", "clamp", "clamp_max",
    "clamp_min", "count", "count_over_time", "count_values", "day_of_month", "day_of_week", "delta", "deriv", "exp",
    "floor", "group", "histogram_quantile", "holt_winters", "hour", "idelta", "increase", "irate", "label_join",
    "label_replace", "last_over_time", "ln", "log10", "log2", "max", "max_over_time", "min", "min_over_time", "minute",
    "month", "predict_linear", "quantile", "quantile_over_time", "rate", "resets", "round", "scalar", "sgn", "sort",
    "sort_desc", "sqrt", "stddev", "stddev_over_time", "stdvar", "sum", "sum_over_time", "time", "timestamp", "topk",
    "vector", "year",
];

/// Keywords followed by a parenthesised list of label names.
const LABEL_LIST_KEYWORDS: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];

/// Other keywords and literals that are not series names.
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "inf", "nan"];

/// The series names a PromQL expression selects. Label matchers (`{…}`), ranges (`[…]`), strings,
/// numbers, Grafana variables (`$x`, `${x}`) and label lists after `by`/`on`/… are skipped.
fn series_names(expr: &str) -> Result<Vec<String>, String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_start = |c: u8| c.is_ascii_alphabetic() || c == b'_' || c == b':';
    let ident_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    // Skips a quoted string starting at `i`, returning the index after it.
    let skip_string = |mut i: usize| -> Result<usize, String> {
        let q = b[i];
        i += 1;
        while i < b.len() && b[i] != q {
            if b[i] == b'\\' && q != b'`' {
                i += 1;
            }
            i += 1;
        }
        if i >= b.len() { Err(format!("unterminated string in {expr:?}")) } else { Ok(i + 1) }
    };
    // Skips a bracketed group (`{…}`, `[…]`, `(…)`) starting at `i`, strings inside included.
    let skip_group = |mut i: usize, open: u8, close: u8| -> Result<usize, String> {
        let mut depth = 0usize;
        while i < b.len() {
            match b[i] {
                b'"' | b'\'' | b'`' => {
                    i = skip_string(i)?;
                    continue;
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(i + 1);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        Err(format!("unbalanced {} in {expr:?}", open as char))
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' | b'\'' | b'`' => i = skip_string(i)?,
            b'{' => i = skip_group(i, b'{', b'}')?,
            b'[' => i = skip_group(i, b'[', b']')?,
            b'$' => {
                i += 1;
                if i < b.len() && b[i] == b'{' {
                    i = skip_group(i, b'{', b'}')?;
                } else {
                    while i < b.len() && ident_char(b[i]) {
                        i += 1;
                    }
                }
            }
            c if c.is_ascii_digit() || (c == b'.' && i + 1 < b.len() && b[i + 1].is_ascii_digit()) => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
            }
            c if ident_start(c) => {
                let start = i;
                while i < b.len() && ident_char(b[i]) {
                    i += 1;
                }
                let word = &expr[start..i];
                let mut j = i;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                let call = j < b.len() && b[j] == b'(';
                // `sum by (le) (…)`: an aggregation whose grouping comes before its argument.
                let next_word = {
                    let mut k = j;
                    while k < b.len() && ident_char(b[k]) {
                        k += 1;
                    }
                    &expr[j..k]
                };
                let grouped_aggregation = FUNCTIONS.contains(&word) && matches!(next_word, "by" | "without");
                if LABEL_LIST_KEYWORDS.contains(&word) {
                    if call {
                        i = skip_group(j, b'(', b')')?;
                    }
                } else if KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) || grouped_aggregation {
                } else if call {
                    if !FUNCTIONS.contains(&word) {
                        return Err(format!("unknown PromQL function {word:?} in {expr:?}"));
                    }
                } else {
                    out.push(word.to_owned());
                }
            }
            _ => i += 1,
        }
    }
    Ok(out)
}

/// Every `expr` of every panel target, rows' nested panels included, with the panel's title.
fn panel_exprs(v: &Value) -> Vec<(String, String)> {
    fn walk(panels: &[Value], out: &mut Vec<(String, String)>) {
        for p in panels {
            let title = p["title"].as_str().unwrap_or("").to_owned();
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push((title.clone(), e.to_owned()));
                }
            }
            if let Some(inner) = p["panels"].as_array() {
                walk(inner, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(v["panels"].as_array().expect("dashboard has panels"), &mut out);
    out
}

#[test]
fn both_copies_are_identical_valid_json() {
    let docs = read(DOCS_COPY);
    let chart = read(CHART_COPY);
    let a: Value = serde_json::from_str(&docs).unwrap_or_else(|e| panic!("{DOCS_COPY}: {e}"));
    let b: Value = serde_json::from_str(&chart).unwrap_or_else(|e| panic!("{CHART_COPY}: {e}"));
    assert_eq!(a, b, "{DOCS_COPY} and {CHART_COPY} differ");
    assert!(
        docs == chart,
        "{DOCS_COPY} and {CHART_COPY} parse the same but are not byte-identical; copy one over the other"
    );
    assert!(a["title"].is_string() && a["uid"].is_string(), "a dashboard needs a title and a uid");
}

#[test]
fn every_panel_queries_only_exported_metrics() {
    let exprs = panel_exprs(&dashboard());
    assert!(!exprs.is_empty(), "no panel expressions found");
    let mut problems = Vec::new();
    for (title, e) in &exprs {
        match series_names(e) {
            Err(err) => problems.push(format!("panel {title:?}: {err}")),
            Ok(names) if names.is_empty() => problems.push(format!("panel {title:?}: no metric in {e:?}")),
            Ok(names) => {
                for n in names {
                    if resolve(&n).is_none() {
                        problems.push(format!("panel {title:?}: {n} is not a metric hami-rs exports ({e})"));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn template_variables_query_exported_metrics() {
    let d = dashboard();
    for var in d["templating"]["list"].as_array().into_iter().flatten() {
        let q = match &var["query"] {
            Value::String(s) => s.clone(),
            Value::Object(o) => o.get("query").and_then(Value::as_str).unwrap_or("").to_owned(),
            _ => String::new(),
        };
        let Some(args) = q.strip_prefix("label_values(").and_then(|r| r.strip_suffix(')')) else {
            continue;
        };
        // label_values(<series selector>, <label>): the label is not a metric.
        let selector = args.rsplit_once(',').map_or(args, |(s, _)| s);
        for n in series_names(selector).unwrap() {
            assert!(resolve(&n).is_some(), "variable {}: {n} is not exported", var["name"]);
        }
    }
}

#[test]
fn the_dashboard_covers_what_it_is_for() {
    let exprs: Vec<String> = panel_exprs(&dashboard()).into_iter().map(|(_, e)| e).collect();
    let used: BTreeSet<&str> =
        exprs.iter().flat_map(|e| series_names(e).unwrap()).filter_map(|n| resolve(&n)).collect();
    for m in [
        "hami_gpu_memory_allocated_bytes",
        "hami_gpu_memory_limit_bytes",
        "hami_gpu_core_allocated_ratio",
        "hami_gpu_core_limit_ratio",
        "hami_scheduler_filter_duration_seconds",
        "hami_scheduler_bind_duration_seconds",
        "hami_scheduler_rejections_total",
        "hami_scheduler_node_lock_waits_total",
        "hami_scheduler_node_lock_handovers_total",
        "hami_scheduler_reservations_expired_total",
        "hami_scheduler_api_requests_total",
    ] {
        assert!(used.contains(m), "no panel shows {m}");
    }
    assert!(
        exprs
            .iter()
            .any(|e| e.contains("histogram_quantile") && e.contains("hami_scheduler_filter_duration_seconds_bucket")),
        "Filter latency percentiles need histogram_quantile over the _bucket series"
    );
}

#[test]
fn exported_list_matches_src_metrics() {
    // Request metrics and HAMi's cluster gauges live in two files; every string literal in either
    // that is a whole metric name ("hami_[a-z0-9_]+") is exported.
    let src = read("src/metrics.rs") + &read("src/metrics/cluster.rs");
    let mut in_src = BTreeSet::new();
    for (at, _) in src.match_indices("\"hami_") {
        let rest = &src[at + 1..];
        let end =
            rest.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')).unwrap_or(rest.len());
        if rest[end..].starts_with('"') {
            in_src.insert(rest[..end].to_owned());
        }
    }
    assert!(!in_src.is_empty(), "found no metric names in src/metrics.rs or src/metrics/cluster.rs");
    let listed: BTreeSet<String> = EXPORTED.iter().map(|(n, _)| (*n).to_owned()).collect();
    let missing: Vec<_> = in_src.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&in_src).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "EXPORTED in tests/chart_dashboard.rs must match src/metrics*.rs: add {missing:?}, remove {stale:?}"
    );
}

#[test]
fn the_promql_scanner_finds_series_and_skips_the_rest() {
    let e = r#"histogram_quantile(0.99, sum by (le, outcome) (rate(hami_scheduler_filter_duration_seconds_bucket{outcome!="x{y}"}[$__rate_interval])))"#;
    assert_eq!(series_names(e).unwrap(), vec!["hami_scheduler_filter_duration_seconds_bucket"]);
    let e = "max by (node) (a_metric{node=~\"$node\"}) / on (node) group_left (x) b_metric offset 5m";
    assert_eq!(series_names(e).unwrap(), vec!["a_metric", "b_metric"]);
    assert!(series_names("made_up_fn(x)").is_err());
    assert_eq!(resolve("hami_scheduler_bind_duration_seconds_count"), Some("hami_scheduler_bind_duration_seconds"));
    assert_eq!(resolve("hami_scheduler_leader_bucket"), None);
    assert_eq!(resolve("up"), None);
}
