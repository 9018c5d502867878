//! `GET /`: the operator's console, server-rendered with no scripts. The front page stays small at
//! thousands of nodes: a summary (devices by state, memory and cores allocated, pods the last
//! decisions left pending and why), the last decisions, a heat map with one cell per device and
//! one link per node, and a search. `?node=<name>` shows one node's devices with the pods on each;
//! `?q=<text>` lists the nodes, the pods holding devices and the decisions whose names contain it;
//! `?refresh=<s>` reloads.

use std::collections::BTreeMap;
use std::fmt::Write;

use actix_web::{HttpResponse, web};

use crate::actor::{DeviceNeed, RecentDecision};
use crate::backend::Backend;
use crate::report::{DeviceJson, NodeJson, PodsOnDevice};

use super::AppState;

/// Up to how many nodes the heat map names each one beside its cells.
const NAMED_NODES: usize = 100;
/// How many nodes, and how many pods, a search lists in full.
const SEARCH_ROWS: usize = 200;
/// How far back a pending pod's request counts when the console measures fragmentation.
const PENDING_WINDOW_S: i64 = 3600;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A query value in a link: everything but RFC 3986's unreserved characters percent-encoded.
fn url(s: &str) -> String {
    const QUERY: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');
    percent_encoding::utf8_percent_encode(s, QUERY).to_string()
}

fn frac(used: u64, total: u64) -> f64 {
    if total == 0 { 0.0 } else { used as f64 / total as f64 }
}

/// A device's state, as the summary counts it and the heat map colours it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum State {
    Idle,
    Shared,
    Full,
    Unhealthy,
    /// Takes no new allocations, whatever it holds.
    Cordoned,
}

const STATES: [State; 5] = [State::Idle, State::Shared, State::Full, State::Unhealthy, State::Cordoned];

impl State {
    fn of(d: &DeviceJson) -> State {
        if !d.healthy {
            State::Unhealthy
        } else if d.cordoned {
            State::Cordoned
        } else if d.used == 0 {
            State::Idle
        } else if d.used >= d.count || d.mem_used >= d.mem_total || d.cores_used >= d.cores_total {
            State::Full
        } else {
            State::Shared
        }
    }
    fn word(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Shared => "shared",
            State::Full => "full",
            State::Unhealthy => "unhealthy",
            State::Cordoned => "cordoned",
        }
    }
}

/// The heat map's class for a device: its state, and for a shared one how full (0-3).
fn cell_class(d: &DeviceJson) -> &'static str {
    match State::of(d) {
        State::Idle => "i",
        State::Full => "f",
        State::Unhealthy => "u",
        State::Cordoned => "c",
        State::Shared => match frac(d.mem_used, d.mem_total).max(frac(d.cores_used.into(), d.cores_total.into())) {
            f if f < 0.34 => "s1",
            f if f < 0.67 => "s2",
            _ => "s3",
        },
    }
}

/// What the page is asked for.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Query {
    /// One node's page.
    pub node: Option<String>,
    /// Nodes, pods and decisions whose names contain this text.
    pub q: Option<String>,
    /// Reload every so many seconds (5 at least).
    pub refresh: Option<u32>,
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.2em;color:#222}h1{font-size:1.3em}h2{font-size:1.05em;margin-top:1.3em}\
table{border-collapse:collapse}td,th{padding:.2em .5em;border:1px solid #ddd;font-size:.85em;vertical-align:top;text-align:left}\
.muted{color:#777}.bad{color:#b71c1c}.map a{display:inline-block;margin:0 6px 3px 0;text-decoration:none;color:#333;font-size:.8em}\
.map i{display:inline-block;width:7px;height:12px;margin-right:1px}.i{background:#e8f5e9}.s1{background:#a5d6a7}\
.s2{background:#ffe082}.s3{background:#ffab91}.f{background:#e57373}.u{background:#555}.c{background:#90a4ae}.x{background:#b71c1c}\
details{font-size:.95em}.k i{display:inline-block;width:9px;height:9px;margin:0 .2em 0 .8em}";

fn head(s: &mut String, title: &str, refresh: Option<u32>) {
    let _ = write!(s, r#"<!doctype html><html><head><meta charset="utf-8"><title>{}</title>"#, esc(title));
    if let Some(r) = refresh {
        let _ = write!(s, r#"<meta http-equiv="refresh" content="{}">"#, r.max(5));
    }
    let _ = write!(s, "<style>{STYLE}</style></head><body>");
}

fn time(unix_s: i64) -> String {
    chrono::DateTime::from_timestamp(unix_s, 0).map_or_else(|| unix_s.to_string(), |t| t.format("%H:%M:%S").to_string())
}

/// Memory free on shared devices (MiB), and how much of it no request pending since
/// `since_s` could use: a shared device (one with a slot left) is of use to a request when it has
/// the memory and the cores that one container asks of one device.
fn fragmentation(devices: &[&DeviceJson], pending: &[&RecentDecision], since_s: i64) -> (u64, u64) {
    let needs: Vec<&DeviceNeed> = pending.iter().filter(|d| d.unix_s >= since_s).flat_map(|d| &d.needs).collect();
    let mut free = 0;
    let mut stranded = 0;
    for d in devices.iter().filter(|d| State::of(d) == State::Shared) {
        let mem = d.mem_total.saturating_sub(d.mem_used);
        let cores = d.cores_total.saturating_sub(d.cores_used);
        free += mem;
        if !needs.iter().any(|n| n.fits(&d.vendor, d.mem_total, mem, cores)) {
            stranded += mem;
        }
    }
    (free, stranded)
}

/// The front page, or with `q` the nodes, pods and decisions matching it; `pods` are the pods
/// holding devices whose `namespace/name` contains `q`, with their node.
pub fn render(
    nodes: &[NodeJson],
    pods: &[(String, String)],
    recent: &[RecentDecision],
    leader: bool,
    q: &Query,
    now_s: i64,
) -> String {
    let mut s = String::new();
    head(&mut s, "hami-rs", q.refresh);
    let devices: Vec<&DeviceJson> = nodes.iter().flat_map(|n| &n.devices).collect();
    let mut states: BTreeMap<State, usize> = BTreeMap::new();
    for d in &devices {
        *states.entry(State::of(d)).or_default() += 1;
    }
    let (mem_used, mem_total) = devices.iter().fold((0u64, 0u64), |(u, t), d| (u + d.mem_used, t + d.mem_total));
    let (cores_used, cores_total) =
        devices.iter().fold((0u64, 0u64), |(u, t), d| (u + u64::from(d.cores_used), t + u64::from(d.cores_total)));
    // Pods the latest decision about which left them pending, with why.
    let mut latest: BTreeMap<&str, &RecentDecision> = BTreeMap::new();
    for d in recent {
        latest.insert(d.pod.as_str(), d);
    }
    let pending: Vec<&RecentDecision> =
        latest.values().copied().filter(|d| d.outcome == "no-fit" || d.outcome == "error").collect();
    let (free_shared, stranded) = fragmentation(&devices, &pending, now_s - PENDING_WINDOW_S);
    let unusable = nodes.iter().filter(|n| n.unusable.is_some()).count();
    let _ = write!(
        s,
        r#"<h1>hami-rs</h1><p>{} nodes{}, {} devices; this replica is {}; as of {} UTC. <a href="?refresh=10">refresh every 10 s</a></p>"#,
        nodes.len(),
        if unusable > 0 { format!(r#" (<span class="bad">{unusable} unusable</span>)"#) } else { String::new() },
        devices.len(),
        if leader { "the leader" } else { "a follower" },
        time(now_s)
    );
    s.push_str("<table><tr><th>devices</th>");
    for st in STATES {
        let _ = write!(s, "<th>{}</th>", st.word());
    }
    s.push_str(concat!(
        "<th>memory allocated</th><th>cores allocated</th><th>free on shared devices</th>",
        r#"<th title="free memory on shared devices that no request pending in the last hour could use">fragmented</th></tr><tr><td></td>"#
    ));
    for st in STATES {
        let _ = write!(s, "<td>{}</td>", states.get(&st).copied().unwrap_or(0));
    }
    let _ = write!(
        s,
        "<td>{mem_used} / {mem_total} MiB ({:.0}%)</td><td>{cores_used} / {cores_total} ({:.0}%)</td><td>{free_shared} MiB</td><td>{stranded} MiB</td></tr></table>",
        frac(mem_used, mem_total) * 100.0,
        frac(cores_used, cores_total) * 100.0
    );

    let needle = q.q.as_deref().map(str::trim).filter(|t| !t.is_empty());
    let pending: Vec<&RecentDecision> =
        pending.into_iter().filter(|d| needle.is_none_or(|t| d.pod.contains(t))).collect();
    let _ = write!(s, "<h2>Pending after their last decision ({})</h2>", pending.len());
    if pending.is_empty() {
        s.push_str(r#"<p class="muted">none</p>"#);
    } else {
        s.push_str("<table><tr><th>pod</th><th>outcome</th><th>why</th></tr>");
        for d in pending {
            let _ = write!(s, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&d.pod), d.outcome, esc(&d.detail));
        }
        s.push_str("</table>");
    }

    let _ = write!(
        s,
        r#"<form><input name="q" placeholder="node, namespace or pod" value="{}"> <button>search</button></form>"#,
        esc(needle.unwrap_or(""))
    );
    decisions(&mut s, recent, needle);
    match needle {
        Some(t) => {
            pod_rows(&mut s, pods, t);
            node_rows(&mut s, nodes, t);
        }
        None => heat_map(&mut s, nodes),
    }
    s.push_str("</body></html>");
    s
}

fn decisions(s: &mut String, recent: &[RecentDecision], needle: Option<&str>) {
    s.push_str(
        "<h2>Last decisions</h2><table><tr><th>time</th><th>pod</th><th>node</th><th>outcome</th><th>detail</th></tr>",
    );
    let mut any = false;
    for d in recent.iter().rev() {
        if needle.is_some_and(|t| !d.pod.contains(t) && !d.node.as_deref().is_some_and(|n| n.contains(t))) {
            continue;
        }
        any = true;
        let class = if d.outcome == "error" { r#" class="bad""# } else { "" };
        let _ = write!(
            s,
            "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}",
            time(d.unix_s),
            esc(&d.pod),
            esc(d.node.as_deref().unwrap_or("-")),
            d.outcome,
            esc(&d.detail)
        );
        if !d.nodes.is_empty() {
            s.push_str("<details><summary>per node</summary>");
            for (n, why) in &d.nodes {
                let _ = write!(s, "{}: {}<br>", esc(n), esc(why));
            }
            s.push_str("</details>");
        }
        s.push_str("</td></tr>");
    }
    if !any {
        s.push_str(r#"<tr><td colspan="5" class="muted">none</td></tr>"#);
    }
    s.push_str("</table>");
}

/// One cell per device, one link per node; the title says the node and its devices' states.
fn heat_map(s: &mut String, nodes: &[NodeJson]) {
    s.push_str(
        r#"<h2>Devices</h2><p class="k">one cell per device:<i class="i"></i>idle<i class="s1"></i><i class="s2"></i><i class="s3"></i>shared, by how full<i class="f"></i>full<i class="u"></i>unhealthy<i class="c"></i>cordoned<i class="x"></i>node unusable</p><div class="map">"#,
    );
    for n in nodes {
        let _ = write!(s, r#"<a href="?node={}" title="{}">"#, url(&n.name), esc(&n.name));
        if n.unusable.is_some() {
            s.push_str(r#"<i class="x"></i>"#);
        }
        for d in &n.devices {
            let _ = write!(s, r#"<i class="{}"></i>"#, cell_class(d));
        }
        // Names beside the cells while they fit on a screen; beyond, the link's title says it.
        if nodes.len() <= NAMED_NODES {
            let _ = write!(s, "{} ", esc(&n.name));
        }
        s.push_str("</a>");
    }
    s.push_str("</div>");
}

/// The pods that matched the search, each with a link to its node.
fn pod_rows(s: &mut String, pods: &[(String, String)], needle: &str) {
    let _ = write!(s, "<h2>Pods holding devices matching “{}” ({})</h2>", esc(needle), pods.len());
    if pods.is_empty() {
        return;
    }
    s.push_str("<table><tr><th>pod</th><th>node</th></tr>");
    for (pod, node) in pods.iter().take(SEARCH_ROWS) {
        let _ = write!(s, r#"<tr><td>{}</td><td><a href="?node={}">{}</a></td></tr>"#, esc(pod), url(node), esc(node));
    }
    end_search_table(s, pods.len(), 2);
}

/// Closes a search table of `hits` rows shown up to `SEARCH_ROWS`, saying how many were left out.
fn end_search_table(s: &mut String, hits: usize, columns: usize) {
    if hits > SEARCH_ROWS {
        let _ = write!(
            s,
            r#"<tr><td colspan="{columns}" class="muted">… {} more: narrow the search</td></tr>"#,
            hits - SEARCH_ROWS
        );
    }
    s.push_str("</table>");
}

/// The nodes whose name contains `needle`, one row each, at most `SEARCH_ROWS`.
fn node_rows(s: &mut String, nodes: &[NodeJson], needle: &str) {
    let hits: Vec<&NodeJson> = nodes.iter().filter(|n| n.name.contains(needle)).collect();
    let _ = write!(
        s,
        "<h2>Nodes matching “{}” ({})</h2><table><tr><th>node</th><th>devices</th><th>memory</th><th>cores</th></tr>",
        esc(needle),
        hits.len()
    );
    for n in hits.iter().take(SEARCH_ROWS) {
        let (mu, mt) = n.devices.iter().fold((0u64, 0u64), |(u, t), d| (u + d.mem_used, t + d.mem_total));
        let (cu, ct) = n
            .devices
            .iter()
            .fold((0u64, 0u64), |(u, t), d| (u + u64::from(d.cores_used), t + u64::from(d.cores_total)));
        let _ = write!(
            s,
            r#"<tr><td><a href="?node={}">{}</a>{}</td><td>{}</td><td>{mu}/{mt} MiB</td><td>{cu}/{ct}</td></tr>"#,
            url(&n.name),
            esc(&n.name),
            n.unusable
                .as_deref()
                .map_or(String::new(), |u| format!(r#" <span class="bad">unusable: {}</span>"#, esc(u))),
            n.devices.len()
        );
    }
    end_search_table(s, hits.len(), 4);
}

/// One node's page: each device with its model, UUID, usage and the pods on it.
pub fn render_node(n: &NodeJson, pods: &PodsOnDevice, refresh: Option<u32>, now_s: i64) -> String {
    let mut s = String::new();
    head(&mut s, &format!("hami-rs: {}", n.name), refresh);
    let _ = write!(s, r#"<p><a href="./">all nodes</a></p><h1>{}</h1><p>as of {} UTC</p>"#, esc(&n.name), time(now_s));
    if let Some(u) = &n.unusable {
        let _ = write!(s, r#"<p class="bad">unusable: {}</p>"#, esc(u));
    }
    if let Some(uid) = &n.held_for {
        let _ = write!(
            s,
            r#"<p class="bad">held for a preemptor (pod UID {}): the devices its victims are freeing take no other pod</p>"#,
            esc(uid)
        );
    }
    s.push_str("<table><tr><th>#</th><th>model</th><th>UUID</th><th>state</th><th>memory (MiB)</th><th>cores</th><th>tasks</th><th>pods</th></tr>");
    for d in &n.devices {
        let on = pods.get(&d.uuid).map_or(String::new(), |ps| {
            ps.iter().map(|(p, m, c)| format!("{} ({m} MiB, {c} cores)", esc(p))).collect::<Vec<_>>().join("<br>")
        });
        let _ = write!(
            s,
            r#"<tr><td>{}</td><td>{} {}</td><td>{}</td><td><i class="{}" style="display:inline-block;width:9px;height:9px"></i> {}</td><td>{}/{}</td><td>{}/{}</td><td>{}/{}</td><td>{}</td></tr>"#,
            d.index,
            esc(&d.vendor),
            esc(&d.ty),
            esc(&d.uuid),
            cell_class(d),
            State::of(d).word(),
            d.mem_used,
            d.mem_total,
            d.cores_used,
            d.cores_total,
            d.used,
            d.count,
            on
        );
    }
    if n.devices.is_empty() {
        s.push_str(r#"<tr><td colspan="8" class="muted">no devices</td></tr>"#);
    }
    s.push_str("</table></body></html>");
    s
}

pub async fn page<B: Backend>(st: web::Data<AppState<B>>, q: web::Query<Query>) -> HttpResponse {
    let reports = st.engine.reports().await;
    let now = chrono::Utc::now().timestamp();
    let html = |body: String| HttpResponse::Ok().content_type("text/html; charset=utf-8").body(body);
    if let Some(name) = q.node.as_deref() {
        let Some(r) = reports.iter().find(|r| r.name.as_str() == name) else {
            return HttpResponse::NotFound()
                .content_type("text/html; charset=utf-8")
                .body(format!(r#"<!doctype html><p>no node {}. <a href="./">all nodes</a></p>"#, esc(name)));
        };
        let pods = crate::report::pods_on_devices(r);
        return html(render_node(&crate::report::node_json(r, st.engine.vendors()), &pods, q.refresh, now));
    }
    let nodes: Vec<NodeJson> = reports.iter().map(|r| crate::report::node_json(r, st.engine.vendors())).collect();
    let leader = st.readiness.leader.load(std::sync::atomic::Ordering::SeqCst);
    let mut pods = Vec::new();
    if let Some(t) = q.q.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        for r in &reports {
            for a in &r.allocs {
                let pod = format!("{}/{}", a.namespace, a.name);
                if pod.contains(t) {
                    pods.push((pod, r.name.to_string()));
                }
            }
        }
        pods.sort();
    }
    html(render(&nodes, &pods, &st.engine.recent_decisions(), leader, &q, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_values_keep_only_unreserved_characters() {
        assert_eq!(url("node-1.zone_a~b"), "node-1.zone_a~b");
        assert_eq!(url("a b/c&d=e?f#g"), "a%20b%2Fc%26d%3De%3Ff%23g");
        assert_eq!(url("ü\"<"), "%C3%BC%22%3C");
        assert_eq!(esc("<a href=\"x\">&</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;");
    }

    fn dev(index: u32, mem_used: u64, cores_used: u32, used: u32) -> DeviceJson {
        DeviceJson {
            vendor: "NVIDIA".into(),
            uuid: format!("GPU-<x>-{index}"),
            ty: "NVIDIA-T4".into(),
            index,
            numa: 0,
            healthy: true,
            cordoned: false,
            count: 10,
            used,
            mem_total: 16384,
            mem_used,
            cores_total: 100,
            cores_used,
        }
    }

    fn node(name: &str, devices: Vec<DeviceJson>) -> NodeJson {
        NodeJson { name: name.into(), devices, annotations: None, unusable: None, held_for: None }
    }

    fn decision(pod: &str, outcome: &'static str, detail: &str) -> RecentDecision {
        RecentDecision { pod: pod.into(), outcome, detail: detail.into(), ..RecentDecision::default() }
    }

    #[test]
    fn the_summary_counts_devices_by_state_and_the_map_colours_them() {
        let mut sick = dev(3, 0, 0, 0);
        sick.healthy = false;
        let nodes = vec![node("n<1>", vec![dev(0, 0, 0, 0), dev(1, 4096, 10, 1), dev(2, 16384, 100, 1), sick])];
        let html = render(&nodes, &[], &[], true, &Query::default(), 0);
        assert!(html.contains("<th>idle</th><th>shared</th><th>full</th><th>unhealthy</th>"), "{html}");
        assert!(html.contains("<td>1</td><td>1</td><td>1</td><td>1</td>"), "one of each: {html}");
        assert!(
            html.contains("20480 / 65536 MiB (31%)") && html.contains("12288 MiB"),
            "allocated and stranded: {html}"
        );
        assert!(html.contains(r#"<a href="?node=n%3C1%3E" title="n&lt;1&gt;"><i class="i"></i><i class="s1"></i><i class="f"></i><i class="u"></i>n&lt;1&gt; </a>"#), "{html}");
        assert!(!html.contains("<script"), "no scripts");
    }

    #[test]
    fn pending_pods_show_their_last_reason_and_errors_stand_out() {
        let recent = vec![
            decision("a/p", "no-fit", "2 nodes do not meet: 2 CardInsufficientMemory"),
            decision("a/q", "no-fit", "1 < 2"),
            decision("a/q", "scheduled", "2 of 2 nodes fit"),
            decision("a/r", "error", "nvidia.com/gpumem: 16Gi does not read"),
        ];
        let html = render(&[], &[], &recent, true, &Query::default(), 0);
        assert!(html.contains("Pending after their last decision (2)"), "q was placed after: {html}");
        assert!(html.contains("<td>a/p</td><td>no-fit</td><td>2 nodes do not meet: 2 CardInsufficientMemory</td>"));
        assert!(html.contains(r#"<tr class="bad"><td>00:00:00</td><td>a/r</td>"#), "{html}");
        assert!(html.contains("1 &lt; 2"), "escaped");
    }

    #[test]
    fn a_search_lists_the_matching_nodes_and_decisions_only() {
        let nodes = vec![node("gpu-a", vec![dev(0, 1000, 0, 1)]), node("gpu-b", vec![])];
        let recent = vec![decision("ns/train", "no-fit", "x"), decision("ns/web", "no-fit", "y")];
        let q = Query { q: Some("gpu-a".into()), ..Query::default() };
        let html = render(&nodes, &[], &recent, true, &q, 0);
        assert!(html.contains(r#"<a href="?node=gpu-a">gpu-a</a>"#) && !html.contains(">gpu-b<"), "{html}");
        assert!(!html.contains("ns/web"), "{html}");
        let q = Query { q: Some("train".into()), ..Query::default() };
        let html = render(&nodes, &[], &recent, true, &q, 0);
        assert!(html.contains("ns/train") && !html.contains("<td>ns/web</td>"), "{html}");
    }

    #[test]
    fn a_cordoned_device_counts_apart_and_is_not_shared_memory() {
        let mut c = dev(1, 4096, 10, 1);
        c.cordoned = true;
        let mut sick = dev(2, 0, 0, 0);
        (sick.healthy, sick.cordoned) = (false, true);
        let html = render(&[node("n", vec![dev(0, 0, 0, 0), c, sick])], &[], &[], true, &Query::default(), 0);
        assert!(html.contains("<th>unhealthy</th><th>cordoned</th>"), "{html}");
        assert!(html.contains("<td>1</td><td>0</td><td>0</td><td>1</td><td>1</td>"), "unhealthy first: {html}");
        assert!(html.contains("<td>0 MiB</td><td>0 MiB</td>"), "a cordoned device strands nothing: {html}");
        assert!(html.contains(r#"<i class="i"></i><i class="c"></i><i class="u"></i>"#), "{html}");
    }

    #[test]
    fn fragmentation_is_the_free_memory_of_shared_devices_no_recent_pending_request_could_use() {
        // Free on shared devices: 12288 (a) and 2384 (b); a full and an idle device count for nothing.
        let devices = [dev(0, 4096, 10, 1), dev(1, 14000, 10, 1), dev(2, 8192, 10, 10), dev(3, 0, 0, 0)];
        let nodes = vec![node("n", devices.to_vec())];
        let need = |mem, mem_pct, cores| DeviceNeed { vendor: "NVIDIA".into(), mem, mem_pct, cores };
        let pending = |needs: Vec<DeviceNeed>, unix_s| RecentDecision {
            pod: format!("ns/p{unix_s}"),
            outcome: "no-fit",
            needs,
            unix_s,
            ..RecentDecision::default()
        };
        let frag = |recent: &[RecentDecision]| {
            let refs: Vec<&DeviceJson> = nodes[0].devices.iter().collect();
            let pending: Vec<&RecentDecision> = recent.iter().collect();
            fragmentation(&refs, &pending, 10_000 - PENDING_WINDOW_S)
        };
        assert_eq!(frag(&[]), (14672, 14672), "nothing pending: all of it");
        assert_eq!(frag(&[pending(vec![need(4000, 0, 0)], 10_000)]), (14672, 2384), "a could take it");
        assert_eq!(frag(&[pending(vec![need(2000, 0, 95)], 10_000)]), (14672, 14672), "no device has the cores");
        assert_eq!(frag(&[pending(vec![need(2000, 0, 0)], 10_000)]), (14672, 0), "either could");
        assert_eq!(frag(&[pending(vec![need(0, 50, 0)], 10_000)]), (14672, 2384), "half a device: a");
        assert_eq!(frag(&[pending(vec![need(2000, 0, 0)], 10_000 - 3601)]), (14672, 14672), "over an hour old");
        let html = render(&nodes, &[], &[pending(vec![need(4000, 0, 0)], 10_000)], true, &Query::default(), 10_000);
        assert!(html.contains("<td>14672 MiB</td><td>2384 MiB</td>"), "{html}");
    }

    #[test]
    fn a_no_fit_decision_unfolds_its_per_node_reasons() {
        let mut d = decision("ns/p", "no-fit", "2 nodes do not meet: 2 CardInsufficientMemory");
        d.nodes = vec![("a<".into(), "1/1 CardInsufficientMemory".into()), ("b".into(), "node unregistered".into())];
        let html = render(&[], &[], &[d], true, &Query::default(), 0);
        assert!(
            html.contains("<details><summary>per node</summary>a&lt;: 1/1 CardInsufficientMemory<br>b: node unregistered<br></details>"),
            "{html}"
        );
    }

    #[test]
    fn a_search_lists_the_pods_holding_devices_with_their_node() {
        let pods = vec![("team/train-1".to_string(), "gpu-a".to_string())];
        let q = Query { q: Some("train".into()), ..Query::default() };
        let html = render(&[node("gpu-a", vec![])], &pods, &[], true, &q, 0);
        assert!(html.contains("Pods holding devices matching “train” (1)"), "{html}");
        assert!(html.contains(r#"<td>team/train-1</td><td><a href="?node=gpu-a">gpu-a</a></td>"#), "{html}");
    }

    #[test]
    fn a_node_page_lists_each_device_with_model_uuid_and_pods() {
        let mut n = node("n", vec![dev(0, 3000, 30, 1), dev(1, 0, 0, 0)]);
        n.unusable = None;
        let mut pods = PodsOnDevice::new();
        pods.insert("GPU-<x>-0".into(), vec![("team/train-0".into(), 3000, 30)]);
        let html = render_node(&n, &pods, Some(1), 0);
        assert!(html.contains("NVIDIA NVIDIA-T4") && html.contains("GPU-&lt;x&gt;-0"), "{html}");
        assert!(html.contains("team/train-0 (3000 MiB, 30 cores)") && html.contains("3000/16384"), "{html}");
        assert!(html.contains(r#"content="5""#), "refresh no faster than 5 s");
    }

    #[test]
    fn an_unusable_node_says_why() {
        let mut n = node("n", vec![]);
        n.unusable = Some("bad JSON".into());
        assert!(render_node(&n, &PodsOnDevice::new(), None, 0).contains("unusable: bad JSON"));
        assert!(render(&[n], &[], &[], false, &Query::default(), 0).contains(r#"<i class="x"></i>"#));
    }

    #[test]
    fn a_node_holding_devices_for_a_preemptor_says_for_whom() {
        let mut n = node("n", vec![]);
        assert!(!render_node(&n, &PodsOnDevice::new(), None, 0).contains("held for a preemptor"));
        n.held_for = Some("uid-urgent".into());
        assert!(render_node(&n, &PodsOnDevice::new(), None, 0).contains("held for a preemptor (pod UID uid-urgent)"));
    }

    #[test]
    fn the_front_page_stays_under_300_kb_compressed_at_5000_nodes_of_8_devices() {
        use std::io::Write as _;
        let nodes: Vec<NodeJson> = (0..5000)
            .map(|i| {
                node(
                    &format!("gpu-node-{i:05}"),
                    (0..8).map(|k| dev(k, u64::from(k) * 1500 * (i % 3), 10 * k, k % 3)).collect(),
                )
            })
            .collect();
        let recent: Vec<RecentDecision> = (0..50)
            .map(|i| {
                decision(&format!("team-{i}/pod-{i}"), "no-fit", "5000 nodes do not meet: 5000 CardInsufficientMemory")
            })
            .collect();
        let html = render(&nodes, &[], &recent, true, &Query::default(), 0);
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(html.as_bytes()).unwrap();
        let zipped = z.finish().unwrap().len();
        assert!(zipped < 300 * 1024, "{zipped} bytes compressed, {} plain", html.len());
        assert_eq!(html.matches("<a href=\"?node=").count(), 5000, "every node reachable");
    }
}
