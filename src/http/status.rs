//! `GET /`: the operator's console, server-rendered with no scripts. The front page stays small at
//! thousands of nodes: a summary (devices by state, memory and cores allocated, fragmentation by
//! device type), every pod left pending by its last filter with why and since when, the last
//! decisions, a heat map with one cell per device and every node named, and a search.
//! `?node=<name>` shows one node's devices with the pods on each; `?state=<state>` lists the
//! devices in that state; `?sort=` orders the nodes; `?q=<text>` lists the nodes, the pods holding
//! devices, the pending pods and the decisions whose names contain it; `?refresh=<s>` reloads.
//! The colours are told apart without hue alone (blues by how full, orange, purple, vermillion
//! and a striped grey), so colour-blind readers read the map too.

use std::collections::BTreeMap;
use std::fmt::Write;

use actix_web::{HttpResponse, web};

use crate::actor::{DeviceNeed, PendingPod, RecentDecision};
use crate::backend::Backend;
use crate::backend::dra::DraClass;
use crate::devices::Vendors;
use crate::report::{DeviceJson, DeviceState, NodeJson, PodsOnDevice};

use super::AppState;

use crate::sched::fragmentation::{self, Fragmentation};

/// How many rows a list shows in full (nodes and pods found, devices in a state, pending pods).
const SEARCH_ROWS: usize = 200;

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

/// MiB as GiB (or TiB from 1024 GiB), one decimal.
fn gib(mib: u64) -> String {
    let g = mib as f64 / 1024.0;
    if g >= 1024.0 { format!("{:.1} TiB", g / 1024.0) } else { format!("{g:.1} GiB") }
}

/// How long ago, in its two largest units.
fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

/// A device's state, as the summary counts it and the heat map colours it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum State {
    Idle,
    Shared,
    /// Shared, with free memory no pending pod's container could use.
    Fragmented,
    Full,
    /// On a node that holds its devices for a preemptor.
    Held,
    /// Takes no new allocations, whatever it holds.
    Cordoned,
    Unhealthy,
}

const STATES: [State; 7] =
    [State::Idle, State::Shared, State::Fragmented, State::Full, State::Held, State::Cordoned, State::Unhealthy];

impl State {
    fn of(n: &NodeJson, d: &DeviceJson, fragmented: bool) -> State {
        match DeviceState::of(n, d) {
            DeviceState::Shared if fragmented => State::Fragmented,
            DeviceState::Shared => State::Shared,
            DeviceState::Idle => State::Idle,
            DeviceState::Full => State::Full,
            DeviceState::Held => State::Held,
            DeviceState::Cordoned => State::Cordoned,
            DeviceState::Unhealthy => State::Unhealthy,
        }
    }
    fn word(self) -> &'static str {
        match self {
            State::Fragmented => "fragmented",
            State::Idle => DeviceState::Idle.word(),
            State::Shared => DeviceState::Shared.word(),
            State::Full => DeviceState::Full.word(),
            State::Held => DeviceState::Held.word(),
            State::Cordoned => DeviceState::Cordoned.word(),
            State::Unhealthy => DeviceState::Unhealthy.word(),
        }
    }
    fn parse(s: &str) -> Option<State> {
        STATES.into_iter().find(|st| st.word() == s)
    }
}

/// The heat map's class for a device: its state, and for a shared one how full (1-3).
fn cell_class(st: State, d: &DeviceJson) -> &'static str {
    match st {
        State::Idle => "i",
        State::Full => "f",
        State::Fragmented => "g",
        State::Held => "h",
        State::Unhealthy => "u",
        State::Cordoned => "c",
        State::Shared => match frac(d.mem_used, d.mem_total).max(frac(d.cores_used.into(), d.cores_total.into())) {
            f if f < 0.34 => "s1",
            f if f < 0.67 => "s2",
            _ => "s3",
        },
    }
}

/// How the nodes are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sort {
    Name,
    /// Most free device memory first.
    Free,
    /// Most device memory allocated first.
    Used,
    /// Most fragmented memory first.
    Fragmented,
}

impl Sort {
    const ALL: [Sort; 4] = [Sort::Name, Sort::Free, Sort::Used, Sort::Fragmented];
    fn word(self) -> &'static str {
        match self {
            Sort::Name => "name",
            Sort::Free => "free",
            Sort::Used => "used",
            Sort::Fragmented => "fragmented",
        }
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
    /// The devices in this state (`idle`, `shared`, `fragmented`, `full`, `held`, `cordoned`,
    /// `unhealthy`).
    pub state: Option<String>,
    /// Node order: `name` (default), `free`, `used`, `fragmented`.
    pub sort: Option<String>,
}

/// What the front page shows.
pub struct View<'a> {
    pub nodes: &'a [NodeJson],
    /// Pods holding devices whose `namespace/name` contains the search, with their node.
    pub pods: &'a [(String, String)],
    pub recent: &'a [RecentDecision],
    pub pending: &'a [PendingPod],
    pub vendors: &'a Vendors,
    /// DeviceClasses that let DRA serve a resource name hami-rs serves.
    pub dra: &'a [DraClass],
    /// Pod groups (gangs), placed all or none.
    pub groups: &'a [crate::actor::GroupReport],
    /// Whole devices a defragmentation could free now, by (vendor, device type).
    pub freeable: &'a [((String, String), usize)],
    pub leader: bool,
    pub now_s: i64,
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.2em;color:#222}h1{font-size:1.3em}h2{font-size:1.05em;margin-top:1.3em}\
table{border-collapse:collapse}td,th{padding:.2em .5em;border:1px solid #ddd;font-size:.85em;vertical-align:top;text-align:left}\
.muted{color:#777}.bad{color:#b71c1c}.map a{display:inline-block;margin:0 6px 3px 0;text-decoration:none;color:#333;font-size:.75em}\
.map i,.k i,.sw{display:inline-block;width:7px;height:12px;margin-right:1px;vertical-align:middle}.k i{margin-left:.8em}\
.i{background:#fff;box-shadow:inset 0 0 0 1px #6b8fb3}.s1{background:#c6dbef}.s2{background:#6baed6}.s3{background:#2171b5}\
.f{background:#08306b}.g{background:#e69f00}.h{background:#cc79a7}.u{background:#d55e00}\
.c{background:repeating-linear-gradient(45deg,#999 0 2px,#ddd 2px 4px)}.x{background:#000}details{font-size:.95em}form{margin-top:1em}";

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

/// Every device's state, by node then device.
fn states(nodes: &[NodeJson], frag: &Fragmentation) -> Vec<Vec<State>> {
    nodes
        .iter()
        .enumerate()
        .map(|(k, n)| {
            n.devices.iter().enumerate().map(|(i, d)| State::of(n, d, frag.fragmented.contains(&(k, i)))).collect()
        })
        .collect()
}

/// The front page, or with `q` the nodes, pods, pending pods and decisions matching it, or with
/// `state` the devices in that state.
pub fn render(v: &View<'_>, q: &Query) -> String {
    let mut s = String::new();
    head(&mut s, "hami-rs", q.refresh);
    let needs: Vec<&DeviceNeed> = v.pending.iter().flat_map(|p| &p.needs).collect();
    let frag = fragmentation::measure(v.nodes, &needs, v.vendors);
    let states = states(v.nodes, &frag);
    let mut counts: BTreeMap<State, usize> = BTreeMap::new();
    for st in states.iter().flatten() {
        *counts.entry(*st).or_default() += 1;
    }
    let devices = || v.nodes.iter().flat_map(|n| &n.devices);
    let (mem_used, mem_total) = devices().fold((0u64, 0u64), |(u, t), d| (u + d.mem_used, t + d.mem_total));
    let (cores_used, cores_total) =
        devices().fold((0u64, 0u64), |(u, t), d| (u + u64::from(d.cores_used), t + u64::from(d.cores_total)));
    let unusable = v.nodes.iter().filter(|n| n.unusable.is_some()).count();
    let _ = write!(
        s,
        r#"<h1>hami-rs</h1><p>{} nodes{}, {} devices; this replica is {}; as of {} UTC. <a href="?refresh=10">refresh every 10 s</a></p>"#,
        v.nodes.len(),
        if unusable > 0 { format!(r#" (<span class="bad">{unusable} unusable</span>)"#) } else { String::new() },
        states.iter().map(Vec::len).sum::<usize>(),
        if v.leader { "the leader" } else { "a follower" },
        time(v.now_s)
    );
    let total = frag.total();
    s.push_str("<table><tr><th>devices</th>");
    for st in STATES {
        let _ = write!(s, "<th>{}</th>", st.word());
    }
    s.push_str(concat!(
        "<th>memory allocated</th><th>cores allocated</th><th>free on shared devices</th>",
        r#"<th title="free memory on shared devices that no pending pod's container could use">fragmented memory</th></tr><tr><td></td>"#
    ));
    for st in STATES {
        let n = counts.get(&st).copied().unwrap_or(0);
        let _ = write!(s, r#"<td><a href="?state={}">{n}</a></td>"#, st.word());
    }
    let _ = write!(
        s,
        "<td>{} / {} ({:.0}%)</td><td>{cores_used} / {cores_total} ({:.0}%)</td><td>{}</td><td>{}</td></tr></table>",
        gib(mem_used),
        gib(mem_total),
        frac(mem_used, mem_total) * 100.0,
        frac(cores_used, cores_total) * 100.0,
        gib(total.shared_free_mib),
        gib(total.fragmented_mib),
    );
    by_type(&mut s, &frag, v.freeable);
    dra(&mut s, v.dra);

    let needle = q.q.as_deref().map(str::trim).filter(|t| !t.is_empty());
    pending(&mut s, v.pending, needle, v.now_s);
    groups(&mut s, v.groups, needle, v.now_s);
    let _ = write!(
        s,
        r#"<form><input name="q" placeholder="node, namespace or pod" value="{}"> <button>search</button></form>"#,
        esc(needle.unwrap_or(""))
    );
    if let Some(st) = q.state.as_deref() {
        in_state(&mut s, v.nodes, &states, st);
    }
    decisions(&mut s, v.recent, needle);
    let sort = q.sort.as_deref().and_then(|w| Sort::ALL.into_iter().find(|x| x.word() == w)).unwrap_or(Sort::Name);
    let order = node_order(v.nodes, &frag, sort);
    match needle {
        Some(t) => {
            pod_rows(&mut s, v.pods, t);
            node_rows(&mut s, v.nodes, &order, t);
        }
        None => heat_map(&mut s, v.nodes, &states, &order, sort),
    }
    s.push_str("</body></html>");
    s
}

/// The DeviceClasses through which DRA may serve a resource name hami-rs serves, and what that means.
fn dra(s: &mut String, classes: &[DraClass]) {
    if classes.is_empty() {
        return;
    }
    let _ = write!(
        s,
        r#"<h2>Served by DRA too ({})</h2><p class="bad">These DeviceClasses name a resource hami-rs serves: {}.</p><table><tr><th>DeviceClass</th><th>extendedResourceName</th></tr>"#,
        classes.len(),
        esc(crate::port::dra::MEANING)
    );
    for c in classes {
        let _ = write!(s, "<tr><td>{}</td><td>{}</td></tr>", esc(&c.class), esc(&c.resource));
    }
    s.push_str("</table>");
}

/// Fragmentation per device type, beside the whole devices free.
fn by_type(s: &mut String, frag: &Fragmentation, freeable: &[((String, String), usize)]) {
    if frag.by_type.is_empty() {
        return;
    }
    s.push_str(concat!(
        "<h2>By device type</h2><table><tr><th>vendor</th><th>type</th><th>devices</th>",
        "<th>idle (whole devices free)</th><th>free on shared devices</th>",
        r#"<th title="free memory on shared devices that no pending pod's container could use">fragmented</th>"#,
        r#"<th title="shared devices whose pods all may move and fit on other shared devices of their type">a defragmentation could free</th></tr>"#
    ));
    for ((vendor, ty), r) in &frag.by_type {
        let could = freeable.iter().find(|((v, t), _)| v == vendor && t == ty).map_or(0, |(_, n)| *n);
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td><td>{} on {} devices</td><td>{could} whole devices</td></tr>",
            esc(vendor),
            esc(ty),
            r.devices,
            r.idle,
            gib(r.idle_mib),
            gib(r.shared_free_mib),
            gib(r.fragmented_mib),
            r.fragmented
        );
    }
    s.push_str("</table>");
}

/// What one container asks of each device, as the pod asked it.
fn need_text(n: &DeviceNeed) -> String {
    let mem = if n.mem > 0 { format!("{} MiB", n.mem) } else { format!("{}% of memory", n.mem_pct) };
    format!("{} × {} {mem}, {} cores", n.nums, esc(&n.vendor), n.cores)
}

/// Every pod the last filter left pending (those matching the search, with one), longest first.
fn pending(s: &mut String, pending: &[PendingPod], needle: Option<&str>, now_s: i64) {
    let hits: Vec<&PendingPod> = pending.iter().filter(|p| needle.is_none_or(|t| p.pod.contains(t))).collect();
    let _ = write!(s, "<h2>Pending ({})</h2>", hits.len());
    if hits.is_empty() {
        s.push_str(r#"<p class="muted">none</p>"#);
        return;
    }
    s.push_str("<table><tr><th>pod</th><th>pending for</th><th>filters</th><th>outcome</th><th>asks per device</th><th>why</th></tr>");
    for p in hits.iter().take(SEARCH_ROWS) {
        let class = if p.outcome == "error" { r#" class="bad""# } else { "" };
        let asks: Vec<String> = p.needs.iter().map(need_text).collect();
        let _ = write!(
            s,
            "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&p.pod),
            age(now_s - p.since_s),
            p.attempts,
            p.outcome,
            asks.join("<br>"),
            esc(&p.detail)
        );
    }
    end_search_table(s, hits.len(), 6);
}

/// Pod groups: members existing against the minimum, claimed and bound, age, and why a group
/// waits.
fn groups(s: &mut String, groups: &[crate::actor::GroupReport], needle: Option<&str>, now_s: i64) {
    let hits: Vec<&crate::actor::GroupReport> =
        groups.iter().filter(|g| needle.is_none_or(|t| g.group.contains(t))).collect();
    if hits.is_empty() {
        return;
    }
    let _ = write!(s, "<h2>Pod groups ({}), placed all or none</h2>", hits.len());
    s.push_str("<table><tr><th>group</th><th>kind</th><th>members / minimum</th><th>claimed</th><th>bound</th><th>state</th><th>age</th><th>why it waits</th></tr>");
    for g in hits.iter().take(SEARCH_ROWS) {
        let min = g.minimum.map_or_else(|| "?".to_owned(), |m| m.to_string());
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{} / {min}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&g.group),
            g.kind,
            g.members,
            g.claimed,
            g.bound,
            g.state,
            g.since_s.map_or_else(String::new, |t| age(now_s - t)),
            esc(g.waiting.as_deref().unwrap_or(""))
        );
    }
    end_search_table(s, hits.len(), 8);
}

/// The devices in state `word`, node by node.
fn in_state(s: &mut String, nodes: &[NodeJson], states: &[Vec<State>], word: &str) {
    let Some(want) = State::parse(word) else {
        let words: Vec<&str> = STATES.iter().map(|st| st.word()).collect();
        let _ = write!(s, r#"<p class="bad">no state “{}”: one of {}</p>"#, esc(word), words.join(", "));
        return;
    };
    let hits: Vec<(&NodeJson, &DeviceJson)> = nodes
        .iter()
        .zip(states)
        .flat_map(|(n, st)| n.devices.iter().zip(st).filter(|(_, st)| **st == want).map(move |(d, _)| (n, d)))
        .collect();
    let _ = write!(
        s,
        "<h2>Devices {} ({})</h2><table><tr><th>node</th><th>#</th><th>type</th><th>memory</th><th>cores</th><th>tasks</th></tr>",
        want.word(),
        hits.len()
    );
    for (n, d) in hits.iter().take(SEARCH_ROWS) {
        let _ = write!(
            s,
            r#"<tr><td><a href="?node={}">{}</a></td><td>{}</td><td>{} {}</td><td>{} / {}</td><td>{}/{}</td><td>{}/{}</td></tr>"#,
            url(&n.name),
            esc(&n.name),
            d.index,
            esc(&d.vendor),
            esc(&d.ty),
            gib(d.mem_used),
            gib(d.mem_total),
            d.cores_used,
            d.cores_total,
            d.used,
            d.count
        );
    }
    end_search_table(s, hits.len(), 6);
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

/// The nodes' indexes in the order asked for (name order is the reports' own).
fn node_order(nodes: &[NodeJson], frag: &Fragmentation, sort: Sort) -> Vec<usize> {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    let mem = |k: usize, f: fn(&DeviceJson) -> u64| nodes[k].devices.iter().map(f).sum::<u64>();
    let stranded = |k: usize| {
        let n = &nodes[k];
        (0..n.devices.len())
            .filter(|i| frag.fragmented.contains(&(k, *i)))
            .map(|i| n.devices[i].mem_total.saturating_sub(n.devices[i].mem_used))
            .sum::<u64>()
    };
    match sort {
        Sort::Name => {}
        Sort::Free => order.sort_by_key(|k| std::cmp::Reverse(mem(*k, |d| d.mem_total.saturating_sub(d.mem_used)))),
        Sort::Used => order.sort_by_key(|k| std::cmp::Reverse(mem(*k, |d| d.mem_used))),
        Sort::Fragmented => order.sort_by_key(|k| std::cmp::Reverse(stranded(*k))),
    }
    order
}

/// One cell per device and the node's name, one link per node, in the order asked for.
fn heat_map(s: &mut String, nodes: &[NodeJson], states: &[Vec<State>], order: &[usize], sort: Sort) {
    s.push_str(concat!(
        r#"<h2>Devices</h2><p class="k">one cell per device:<i class="i"></i>idle<i class="s1"></i><i class="s2"></i><i class="s3"></i>shared, by how full"#,
        r#"<i class="g"></i>fragmented<i class="f"></i>full<i class="h"></i>held for a preemptor<i class="c"></i>cordoned<i class="u"></i>unhealthy<i class="x"></i>node unusable</p><p>sort nodes by:"#
    ));
    for x in Sort::ALL {
        if x == sort {
            let _ = write!(s, " <b>{}</b>", x.word());
        } else {
            let _ = write!(s, r#" <a href="?sort={0}">{0}</a>"#, x.word());
        }
    }
    s.push_str(r#"</p><div class="map">"#);
    for &k in order {
        let n = &nodes[k];
        let _ = write!(s, r#"<a href="?node={}">"#, url(&n.name));
        if n.unusable.is_some() {
            s.push_str(r#"<i class="x"></i>"#);
        }
        for (d, st) in n.devices.iter().zip(&states[k]) {
            let _ = write!(s, r#"<i class="{}"></i>"#, cell_class(*st, d));
        }
        let _ = write!(s, "{}</a>", esc(&n.name));
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

/// Closes a table of `hits` rows shown up to `SEARCH_ROWS`, saying how many were left out.
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

/// The nodes whose name contains `needle`, one row each in the order asked for, at most
/// `SEARCH_ROWS`.
fn node_rows(s: &mut String, nodes: &[NodeJson], order: &[usize], needle: &str) {
    let hits: Vec<&NodeJson> = order.iter().map(|k| &nodes[*k]).filter(|n| n.name.contains(needle)).collect();
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
            r#"<tr><td><a href="?node={}">{}</a>{}</td><td>{}</td><td>{} / {}</td><td>{cu}/{ct}</td></tr>"#,
            url(&n.name),
            esc(&n.name),
            n.unusable
                .as_deref()
                .map_or(String::new(), |u| format!(r#" <span class="bad">unusable: {}</span>"#, esc(u))),
            n.devices.len(),
            gib(mu),
            gib(mt),
        );
    }
    end_search_table(s, hits.len(), 4);
}

/// One node's page: each device with its model, UUID, usage and the pods on it.
/// `fragmented` says which devices hold memory no pending pod could use (none when empty).
pub fn render_node(n: &NodeJson, pods: &PodsOnDevice, fragmented: &[bool], refresh: Option<u32>, now_s: i64) -> String {
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
    for (i, d) in n.devices.iter().enumerate() {
        let st = State::of(n, d, fragmented.get(i).copied().unwrap_or(false));
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
            cell_class(st, d),
            st.word(),
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
    let now = crate::clock::unix_now().0;
    let pending = st.engine.pending_pods();
    let needs: Vec<&DeviceNeed> = pending.iter().flat_map(|p| &p.needs).collect();
    let vendors = st.engine.vendors();
    let html = |body: String| HttpResponse::Ok().content_type("text/html; charset=utf-8").body(body);
    if let Some(name) = q.node.as_deref() {
        let Some(r) = reports.iter().find(|r| r.name.as_str() == name) else {
            return HttpResponse::NotFound()
                .content_type("text/html; charset=utf-8")
                .body(format!(r#"<!doctype html><p>no node {}. <a href="./">all nodes</a></p>"#, esc(name)));
        };
        let pods = crate::report::pods_on_devices(r);
        let n = crate::report::node_json(r, vendors);
        let frag = fragmentation::measure(std::slice::from_ref(&n), &needs, vendors);
        let fragmented: Vec<bool> = (0..n.devices.len()).map(|i| frag.fragmented.contains(&(0, i))).collect();
        return html(render_node(&n, &pods, &fragmented, q.refresh, now));
    }
    let nodes: Vec<NodeJson> = reports.iter().map(|r| crate::report::node_json(r, vendors)).collect();
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
    let recent = st.engine.recent_decisions();
    let dra = st.engine.backend().dra_classes();
    let groups = st.engine.group_reports();
    let freeable = st.engine.defrag_freeable(&reports);
    let view = View {
        nodes: &nodes,
        pods: &pods,
        recent: &recent,
        pending: &pending,
        vendors,
        dra: &dra,
        groups: &groups,
        freeable: &freeable,
        leader,
        now_s: now,
    };
    html(render(&view, &q))
}

/// The console's test devices: NVIDIA, 16384 MiB, 100 cores, 10 slots, healthy.
#[cfg(test)]
mod fixtures {
    pub use crate::testing::report_json::{device, node};
}

#[cfg(test)]
mod tests {
    use super::fixtures::{device, node};
    use super::*;

    #[test]
    fn link_values_keep_only_unreserved_characters() {
        assert_eq!(url("node-1.zone_a~b"), "node-1.zone_a~b");
        assert_eq!(url("a b/c&d=e?f#g"), "a%20b%2Fc%26d%3De%3Ff%23g");
        assert_eq!(url("ü\"<"), "%C3%BC%22%3C");
        assert_eq!(esc("<a href=\"x\">&</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;");
    }

    #[test]
    fn memory_reads_in_gib_and_ages_in_their_two_largest_units() {
        assert_eq!(gib(16384), "16.0 GiB");
        assert_eq!(gib(500), "0.5 GiB");
        assert_eq!(gib(3_276_144_640 / 1000), "3.1 TiB");
        assert_eq!(age(59), "59s");
        assert_eq!(age(3600), "1h 0m");
        assert_eq!(age(3 * 86400 + 7200 + 5), "3d 2h");
        assert_eq!(age(-5), "0s", "a clock that stepped back");
    }

    fn dev(index: u32, mem_used: u64, cores_used: u32, used: u32) -> DeviceJson {
        device("NVIDIA-T4", format!("GPU-<x>-{index}"), index, mem_used, cores_used, used)
    }

    fn decision(pod: &str, outcome: &'static str, detail: &str) -> RecentDecision {
        RecentDecision { pod: pod.into(), outcome, detail: detail.into(), ..RecentDecision::default() }
    }

    fn pending(pod: &str, outcome: &'static str, needs: Vec<DeviceNeed>, since_s: i64) -> PendingPod {
        PendingPod {
            pod: pod.into(),
            outcome,
            detail: "3 nodes do not meet: 3 CardInsufficientMemory".into(),
            reasons: vec!["CardInsufficientMemory"],
            needs,
            since_s,
            last_s: since_s,
            attempts: 4,
        }
    }

    /// The front page of `nodes` with these pending pods and decisions, at `now_s`.
    fn page(nodes: &[NodeJson], pending: &[PendingPod], recent: &[RecentDecision], q: &Query, now_s: i64) -> String {
        let vendors = crate::testing::vendors();
        render(
            &View {
                nodes,
                pods: &[],
                recent,
                pending,
                vendors: &vendors,
                dra: &[],
                groups: &[],
                freeable: &[],
                leader: true,
                now_s,
            },
            q,
        )
    }

    /// The summary's cells by heading.
    fn summary(html: &str) -> BTreeMap<String, String> {
        let start = html.find("<tr><th>devices</th>").expect("a summary");
        let rest = &html[start..];
        let end = rest.find("</table>").expect("the summary ends");
        let rows: Vec<&str> = rest[..end].split("</tr>").collect();
        let heads: Vec<String> =
            rows[0].split("<th").skip(1).map(|c| c[c.find('>').unwrap() + 1..].replace("</th>", "")).collect();
        let cells: Vec<String> = rows[1].split("<td>").skip(1).map(|c| c.replace("</td>", "")).collect();
        let strip = |c: &str| match c.find('>') {
            Some(i) if c.starts_with("<a") => c[i + 1..].trim_end_matches("</a>").to_string(),
            _ => c.to_string(),
        };
        heads.into_iter().zip(cells).map(|(h, c)| (h, strip(&c))).collect()
    }

    #[test]
    fn the_summary_counts_devices_by_state_and_the_map_colours_them() {
        let mut sick = dev(3, 0, 0, 0);
        sick.healthy = false;
        let nodes = vec![node("n<1>", vec![dev(0, 0, 0, 0), dev(1, 4096, 10, 1), dev(2, 16384, 100, 1), sick])];
        let html = page(&nodes, &[], &[], &Query::default(), 0);
        let row = summary(&html);
        let count = |w: &str| row[w].clone();
        assert_eq!(
            ["idle", "shared", "fragmented", "full", "held", "cordoned", "unhealthy"].map(count),
            ["1", "0", "1", "1", "0", "0", "1"],
            "nothing pending: the shared device's free memory is fragmented: {html}"
        );
        assert_eq!(row["memory allocated"], "20.0 GiB / 64.0 GiB (31%)");
        assert_eq!(
            (row["free on shared devices"].as_str(), row["fragmented memory"].as_str()),
            ("12.0 GiB", "12.0 GiB")
        );
        assert!(html.contains(r#"<a href="?state=full">1</a>"#), "each count lists its devices: {html}");
        assert!(
            html.contains(r#"<a href="?node=n%3C1%3E"><i class="i"></i><i class="g"></i><i class="f"></i><i class="u"></i>n&lt;1&gt;</a>"#),
            "{html}"
        );
        assert!(!html.contains("<script"), "no scripts");
    }

    #[test]
    fn a_pending_pod_stays_with_its_needs_and_age_however_many_decisions_and_hours_pass() {
        let huge = pending("team/huge", "no_fit", vec![DeviceNeed::new("NVIDIA", 1, 900_000, 0, 10)], 1_000);
        let broken = PendingPod {
            detail: "nvidia.com/gpumem: 16Gi does not read".into(),
            ..pending("team/bad", "error", vec![], 2_000)
        };
        // An hour of decisions about other pods since.
        let recent: Vec<RecentDecision> =
            (0..50).map(|i| decision(&format!("team/web-{i}"), "scheduled", "8 of 8 nodes fit")).collect();
        let html = page(&[], &[huge, broken], &recent, &Query::default(), 1_000 + 3600);
        assert!(html.contains("<h2>Pending (2)</h2>"), "{html}");
        assert!(
            html.contains("<tr><td>team/huge</td><td>1h 0m</td><td>4</td><td>no_fit</td><td>1 × NVIDIA 900000 MiB, 10 cores</td><td>3 nodes do not meet: 3 CardInsufficientMemory</td></tr>"),
            "longest pending first, with what it asks: {html}"
        );
        assert!(html.contains(r#"<tr class="bad"><td>team/bad</td><td>43m 20s</td>"#), "errors stand out: {html}");
        let q = Query { q: Some("huge".into()), ..Query::default() };
        let html = page(&[], &[pending("team/huge", "no_fit", vec![], 0)], &recent, &q, 0);
        assert!(
            html.contains("<h2>Pending (1)</h2><table><tr><th>pod</th>") && html.contains("<td>team/huge</td>"),
            "{html}"
        );
    }

    #[test]
    fn device_classes_dra_may_serve_a_resource_by_are_listed_with_what_that_means() {
        let vendors = crate::testing::vendors();
        let nodes = [fixtures::node("a", vec![dev(0, 0, 0, 0)])];
        let q = Query::default();
        let plain = render(
            &View {
                nodes: &nodes,
                pods: &[],
                recent: &[],
                pending: &[],
                vendors: &vendors,
                dra: &[],
                groups: &[],
                freeable: &[],
                leader: true,
                now_s: 0,
            },
            &q,
        );
        assert!(!plain.contains("Served by DRA"), "{plain}");
        let dra = [DraClass { class: "gpu.example.com".into(), resource: "nvidia.com/gpu".into() }];
        let html = render(
            &View {
                nodes: &nodes,
                pods: &[],
                recent: &[],
                pending: &[],
                vendors: &vendors,
                dra: &dra,
                groups: &[],
                freeable: &[],
                leader: true,
                now_s: 0,
            },
            &q,
        );
        assert!(html.contains("<h2>Served by DRA too (1)</h2>"), "{html}");
        assert!(html.contains("<tr><td>gpu.example.com</td><td>nvidia.com/gpu</td></tr>"), "{html}");
        assert!(html.contains("hami-rs does not see or count those devices"), "{html}");
    }

    #[test]
    fn a_search_lists_the_matching_nodes_pending_pods_and_decisions_only() {
        let nodes = vec![node("gpu-a", vec![dev(0, 1000, 0, 1)]), node("gpu-b", vec![])];
        let recent = vec![decision("ns/train", "no_fit", "x"), decision("ns/web", "no_fit", "y")];
        let waiting = [pending("ns/train", "no_fit", vec![], 0), pending("ns/web", "no_fit", vec![], 0)];
        let q = Query { q: Some("gpu-a".into()), ..Query::default() };
        let html = page(&nodes, &waiting, &recent, &q, 0);
        assert!(html.contains(r#"<a href="?node=gpu-a">gpu-a</a>"#) && !html.contains(">gpu-b<"), "{html}");
        assert!(!html.contains("ns/web") && html.contains("<h2>Pending (0)</h2>"), "{html}");
        let q = Query { q: Some("train".into()), ..Query::default() };
        let html = page(&nodes, &waiting, &recent, &q, 0);
        assert!(html.contains("ns/train") && !html.contains("<td>ns/web</td>"), "{html}");
    }

    #[test]
    fn cordoned_unhealthy_and_held_devices_count_apart_and_strand_nothing() {
        let mut c = dev(1, 4096, 10, 1);
        c.cordoned = true;
        let mut sick = dev(2, 0, 0, 0);
        (sick.healthy, sick.cordoned) = (false, true);
        let mut held = node("h", vec![dev(0, 4096, 10, 1), dev(1, 0, 0, 0)]);
        held.held_for = Some("uid-urgent".into());
        let html = page(&[node("n", vec![dev(0, 0, 0, 0), c, sick]), held], &[], &[], &Query::default(), 0);
        let row = summary(&html);
        assert_eq!(["idle", "held", "cordoned", "unhealthy"].map(|w| row[w].clone()), ["1", "2", "1", "1"], "{row:?}");
        assert_eq!(row["fragmented memory"], "0.0 GiB", "{row:?}");
        assert!(html.contains(r#"<i class="i"></i><i class="c"></i><i class="u"></i>"#), "{html}");
        assert!(html.contains(r#"<i class="h"></i><i class="h"></i>h</a>"#), "{html}");
    }

    #[test]
    fn fragmentation_reads_the_pending_pods_needs_per_device_type() {
        // Free on shared devices: 12288 (a) and 2384 (b); the full and the idle device count for nothing.
        let devices = vec![dev(0, 4096, 10, 1), dev(1, 14000, 10, 1), dev(2, 8192, 10, 10), dev(3, 0, 0, 0)];
        let nodes = vec![node("n", devices)];
        let needing = |mem| vec![pending("ns/p", "no_fit", vec![DeviceNeed::new("NVIDIA", 1, mem, 0, 0)], 0)];
        let html = page(&nodes, &needing(4000), &[], &Query::default(), 0);
        let row = summary(&html);
        assert_eq!(
            (row["free on shared devices"].as_str(), row["fragmented memory"].as_str()),
            ("14.3 GiB", "2.3 GiB")
        );
        assert_eq!((row["shared"].as_str(), row["fragmented"].as_str()), ("1", "1"));
        assert!(
            html.contains("<tr><td>NVIDIA</td><td>NVIDIA-T4</td><td>4</td><td>1 (16.0 GiB)</td><td>14.3 GiB</td><td>2.3 GiB on 1 devices</td><td>0 whole devices</td></tr>"),
            "{html}"
        );
        let row = summary(&page(&nodes, &needing(2000), &[], &Query::default(), 0));
        assert_eq!(row["fragmented memory"], "0.0 GiB", "either could take it");
    }

    #[test]
    fn a_state_lists_its_devices_and_an_unknown_one_names_the_states() {
        let nodes =
            vec![node("a", vec![dev(0, 16384, 100, 1), dev(1, 0, 0, 0)]), node("b", vec![dev(0, 8192, 100, 1)])];
        let q = Query { state: Some("full".into()), ..Query::default() };
        let html = page(&nodes, &[], &[], &q, 0);
        assert!(html.contains("<h2>Devices full (2)</h2>"), "{html}");
        assert!(html.contains(r#"<tr><td><a href="?node=a">a</a></td><td>0</td><td>NVIDIA NVIDIA-T4</td><td>16.0 GiB / 16.0 GiB</td><td>100/100</td><td>1/10</td></tr>"#), "{html}");
        let q = Query { state: Some("ful".into()), ..Query::default() };
        let html = page(&nodes, &[], &[], &q, 0);
        assert!(
            html.contains("no state “ful”: one of idle, shared, fragmented, full, held, cordoned, unhealthy"),
            "{html}"
        );
    }

    #[test]
    fn nodes_sort_by_free_used_or_fragmented_memory() {
        let nodes = vec![
            node("a", vec![dev(0, 1000, 10, 1)]),
            node("b", vec![dev(0, 9000, 10, 1)]),
            node("c", vec![dev(0, 0, 0, 0)]),
        ];
        let order = |sort: &str| {
            let html = page(&nodes, &[], &[], &Query { sort: Some(sort.into()), ..Query::default() }, 0);
            let map = &html[html.find(r#"<div class="map">"#).unwrap()..];
            map.split(r#"<a href="?node="#).skip(1).map(|a| a[..1].to_string()).collect::<Vec<_>>().join("")
        };
        assert_eq!(order("name"), "abc");
        assert_eq!(order("free"), "cab");
        assert_eq!(order("used"), "bac");
        assert_eq!(order("fragmented"), "abc", "a strands 15384 MiB, b 7384, c nothing");
        assert_eq!(order("nonsense"), "abc", "an unknown order is the name order");
    }

    #[test]
    fn a_no_fit_decision_unfolds_its_per_node_reasons() {
        let mut d = decision("ns/p", "no_fit", "2 nodes do not meet: 2 CardInsufficientMemory");
        d.nodes = vec![("a<".into(), "1/1 CardInsufficientMemory".into()), ("b".into(), "node unregistered".into())];
        let html = page(&[], &[], &[d], &Query::default(), 0);
        assert!(
            html.contains("<details><summary>per node</summary>a&lt;: 1/1 CardInsufficientMemory<br>b: node unregistered<br></details>"),
            "{html}"
        );
    }

    #[test]
    fn pod_groups_are_listed_with_members_minimum_claims_and_why_they_wait() {
        let vendors = crate::testing::vendors();
        let nodes = [node("gpu-a", vec![])];
        let report = |group: &str, state, waiting: Option<&str>| crate::actor::GroupReport {
            group: group.into(),
            kind: "coscheduling",
            minimum: Some(4),
            members: 3,
            claimed: 0,
            bound: 0,
            state,
            since_s: Some(40),
            waiting: waiting.map(str::to_owned),
        };
        let groups = [
            report("ml/train-a", "waiting", Some("train-a: waiting for 3 of 4 members")),
            report("ml/b", "pending", None),
        ];
        let view = |groups| View {
            nodes: &nodes,
            pods: &[],
            recent: &[],
            pending: &[],
            vendors: &vendors,
            dra: &[],
            groups,
            freeable: &[],
            leader: true,
            now_s: 100,
        };
        let html = render(&view(&groups), &Query::default());
        assert!(html.contains("Pod groups (2), placed all or none"), "{html}");
        assert!(html.contains("<td>ml/train-a</td><td>coscheduling</td><td>3 / 4</td><td>0</td><td>0</td><td>waiting</td><td>1m 0s</td><td>train-a: waiting for 3 of 4 members</td>"), "{html}");
        let searched = render(&view(&groups), &Query { q: Some("train".into()), ..Query::default() });
        assert!(searched.contains("Pod groups (1)"), "{searched}");
        assert!(!render(&view(&[]), &Query::default()).contains("Pod groups"));
    }

    #[test]
    fn a_search_lists_the_pods_holding_devices_with_their_node() {
        let pods = vec![("team/train-1".to_string(), "gpu-a".to_string())];
        let q = Query { q: Some("train".into()), ..Query::default() };
        let vendors = crate::testing::vendors();
        let nodes = [node("gpu-a", vec![])];
        let view = View {
            nodes: &nodes,
            pods: &pods,
            recent: &[],
            pending: &[],
            vendors: &vendors,
            dra: &[],
            groups: &[],
            freeable: &[],
            leader: true,
            now_s: 0,
        };
        let html = render(&view, &q);
        assert!(html.contains("Pods holding devices matching “train” (1)"), "{html}");
        assert!(html.contains(r#"<td>team/train-1</td><td><a href="?node=gpu-a">gpu-a</a></td>"#), "{html}");
    }

    #[test]
    fn a_node_page_lists_each_device_with_model_uuid_state_and_pods() {
        let n = node("n", vec![dev(0, 3000, 30, 1), dev(1, 0, 0, 0)]);
        let mut pods = PodsOnDevice::new();
        pods.insert("GPU-<x>-0".into(), vec![("team/train-0".into(), 3000, 30)]);
        let html = render_node(&n, &pods, &[true], Some(1), 0);
        assert!(html.contains("NVIDIA NVIDIA-T4") && html.contains("GPU-&lt;x&gt;-0"), "{html}");
        assert!(html.contains("team/train-0 (3000 MiB, 30 cores)") && html.contains("3000/16384"), "{html}");
        assert!(html.contains(r#"<i class="g" style"#) && html.contains("</i> fragmented</td>"), "{html}");
        assert!(html.contains(r#"content="5""#), "refresh no faster than 5 s");
    }

    #[test]
    fn an_unusable_node_says_why() {
        let mut n = node("n", vec![]);
        n.unusable = Some("bad JSON".into());
        assert!(render_node(&n, &PodsOnDevice::new(), &[], None, 0).contains("unusable: bad JSON"));
        assert!(page(&[n], &[], &[], &Query::default(), 0).contains(r#"<i class="x"></i>"#));
    }

    #[test]
    fn a_node_holding_devices_for_a_preemptor_says_for_whom() {
        let mut n = node("n", vec![]);
        assert!(!render_node(&n, &PodsOnDevice::new(), &[], None, 0).contains("held for a preemptor"));
        n.held_for = Some("uid-urgent".into());
        assert!(
            render_node(&n, &PodsOnDevice::new(), &[], None, 0).contains("held for a preemptor (pod UID uid-urgent)")
        );
    }

    #[test]
    fn the_front_page_stays_under_300_kb_compressed_at_5000_nodes_of_8_devices_every_node_named() {
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
                decision(&format!("team-{i}/pod-{i}"), "no_fit", "5000 nodes do not meet: 5000 CardInsufficientMemory")
            })
            .collect();
        let waiting: Vec<PendingPod> = (0..1000)
            .map(|i| {
                pending(&format!("team-{i}/big-{i}"), "no_fit", vec![DeviceNeed::new("NVIDIA", 2, 12000, 0, 0)], i)
            })
            .collect();
        let html = page(&nodes, &waiting, &recent, &Query::default(), 2000);
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(html.as_bytes()).unwrap();
        let zipped = z.finish().unwrap().len();
        assert!(zipped < 300 * 1024, "{zipped} bytes compressed, {} plain", html.len());
        assert_eq!(html.matches("<a href=\"?node=").count(), 5000, "every node reachable");
        assert!(html.contains("</i>gpu-node-04999</a>"), "named beside its cells");
        assert!(html.contains("… 800 more: narrow the search"), "pending pods beyond the first 200 counted");
    }
}
