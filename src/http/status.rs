//! `GET /`: a small server-rendered status page: every node's devices as a grid coloured by
//! memory and core allocation, and the last decisions with their reasons. No JavaScript.

use std::fmt::Write;

use actix_web::{HttpResponse, web};

use crate::actor::RecentDecision;
use crate::backend::Backend;
use crate::report::NodeJson;

use super::AppState;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Green through amber to red as a device fills.
fn colour(frac: f64) -> &'static str {
    match frac {
        f if f <= 0.0 => "#e8f5e9",
        f if f < 0.5 => "#a5d6a7",
        f if f < 0.8 => "#ffe082",
        f if f < 1.0 => "#ffab91",
        _ => "#e57373",
    }
}

fn pct(used: u64, total: u64) -> f64 {
    if total == 0 { 0.0 } else { used as f64 / total as f64 }
}

/// Renders the page from the engine's view.
pub fn render(nodes: &[NodeJson], recent: &[RecentDecision], leader: bool) -> String {
    let mut s = String::new();
    let devices: usize = nodes.iter().map(|n| n.devices.len()).sum();
    let _ = write!(
        s,
        r#"<!doctype html><html><head><meta charset="utf-8"><title>hami-rs</title><style>
body{{font-family:sans-serif;margin:1.5em;color:#222}} h1{{font-size:1.4em}} h2{{font-size:1.1em;margin-top:1.5em}}
table{{border-collapse:collapse}} td,th{{padding:.25em .6em;border:1px solid #ddd;font-size:.85em;vertical-align:top}}
.grid td.dev{{width:9.5em}} .bar{{height:.55em;border:1px solid #999;margin:.15em 0}} .bar span{{display:block;height:100%}}
.muted{{color:#777}} .bad{{color:#b71c1c}}
</style></head><body><h1>hami-rs</h1><p>{} nodes, {} devices; this replica is {}.</p><h2>Devices</h2><table class="grid">"#,
        nodes.len(),
        devices,
        if leader { "the leader" } else { "a follower" }
    );
    for n in nodes {
        let _ = write!(s, "<tr><th>{}</th>", esc(&n.name));
        if let Some(u) = &n.unusable {
            let _ = write!(s, r#"<td class="bad">unusable: {}</td>"#, esc(u));
        }
        if n.devices.is_empty() && n.unusable.is_none() {
            s.push_str(r#"<td class="muted">no devices</td>"#);
        }
        for d in &n.devices {
            let m = pct(d.mem_used, d.mem_total);
            let c = pct(u64::from(d.cores_used), u64::from(d.cores_total));
            let _ = write!(
                s,
                r#"<td class="dev" style="background:{}" title="{}"><b>#{}</b> {}<br>{}/{} MiB<div class="bar"><span style="width:{:.0}%;background:#1565c0"></span></div>{}/{} cores<div class="bar"><span style="width:{:.0}%;background:#6a1b9a"></span></div>{}/{} tasks{}</td>"#,
                colour(m.max(c)),
                esc(&d.uuid),
                d.index,
                esc(&d.vendor),
                d.mem_used,
                d.mem_total,
                (m * 100.0).min(100.0),
                d.cores_used,
                d.cores_total,
                (c * 100.0).min(100.0),
                d.used,
                d.count,
                if d.healthy { "" } else { r#"<br><span class="bad">unhealthy</span>"# }
            );
        }
        s.push_str("</tr>");
    }
    s.push_str(
        "</table><h2>Last decisions</h2><table><tr><th>pod</th><th>node</th><th>outcome</th><th>detail</th></tr>",
    );
    for d in recent.iter().rev() {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&d.pod),
            esc(d.node.as_deref().unwrap_or("-")),
            d.outcome,
            esc(&d.detail)
        );
    }
    if recent.is_empty() {
        s.push_str(r#"<tr><td colspan="4" class="muted">none yet</td></tr>"#);
    }
    s.push_str("</table></body></html>");
    s
}

pub async fn page<B: Backend>(st: web::Data<AppState<B>>) -> HttpResponse {
    let reports = st.engine.reports().await;
    let nodes: Vec<NodeJson> = reports.iter().map(|r| crate::report::node_json(r, st.engine.vendors())).collect();
    let leader = st.readiness.leader.load(std::sync::atomic::Ordering::SeqCst);
    HttpResponse::Ok().content_type("text/html; charset=utf-8").body(render(
        &nodes,
        &st.engine.recent_decisions(),
        leader,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::DeviceJson;

    fn dev(mem_used: u64, cores_used: u32) -> DeviceJson {
        DeviceJson {
            vendor: "NVIDIA".into(),
            uuid: "GPU-<x>".into(),
            ty: "NVIDIA-T4".into(),
            index: 0,
            numa: 0,
            healthy: true,
            count: 10,
            used: 1,
            mem_total: 16384,
            mem_used,
            cores_total: 100,
            cores_used,
        }
    }

    #[test]
    fn the_grid_colours_devices_by_allocation_and_escapes_text() {
        let nodes = vec![NodeJson {
            name: "n<1>".into(),
            devices: vec![dev(0, 0), dev(16384, 100)],
            annotations: None,
            unusable: None,
        }];
        let recent = vec![RecentDecision {
            pod: "a/p".into(),
            node: None,
            outcome: "no-fit",
            detail: "1 < 2".into(),
            unix_s: 0,
        }];
        let html = render(&nodes, &recent, true);
        assert!(html.contains("n&lt;1&gt;") && html.contains("GPU-&lt;x&gt;") && html.contains("1 &lt; 2"));
        assert!(html.contains(colour(0.0)) && html.contains(colour(1.0)));
        assert!(html.contains("16384/16384 MiB") && html.contains("no-fit"));
        assert!(!html.contains("<script"), "no scripts");
    }

    #[test]
    fn an_unusable_node_says_why() {
        let nodes =
            vec![NodeJson { name: "n".into(), devices: vec![], annotations: None, unusable: Some("bad JSON".into()) }];
        assert!(render(&nodes, &[], false).contains("unusable: bad JSON"));
    }
}
