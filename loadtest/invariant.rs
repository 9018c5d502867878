//! The end-of-run invariant: no device is over-committed (slots, memory, cores). Two sources of the
//! final state: a scheduler's `GET /usage` (its own per-device accounting, and the pods it lists
//! with their annotations), or the API server (register annotations against every live pod's
//! `hami.io/vgpu-devices-allocated`). Pure: callers fetch, this module checks.

use std::collections::{BTreeMap, HashMap};

use hami_rs::model::annotations as keys;
use hami_rs::model::codec;
use serde::Serialize;
use serde_json::Value;

/// One device: what it has and what is in use on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub node: String,
    pub uuid: String,
    pub count: u64,
    pub mem_total: u64,
    pub cores_total: u64,
    pub used: u64,
    pub mem_used: u64,
    pub cores_used: u64,
}

/// The outcome of one check, as reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Check {
    /// `usage` (the scheduler's accounting), `annotations` (recounted from the pods' annotations
    /// the scheduler lists) or `api-server`.
    pub source: String,
    pub checked: bool,
    pub ok: bool,
    pub devices: usize,
    /// Pods whose allocation was counted (annotation sources only).
    pub pods: usize,
    pub violation_count: usize,
    /// The first violations, one line each.
    pub violations: Vec<String>,
    /// Why the check could not run, or what it skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

const SHOWN: usize = 20;

impl Check {
    pub fn skipped(source: &str, why: impl Into<String>) -> Check {
        Check { source: source.into(), checked: false, ok: true, note: Some(why.into()), ..Check::default() }
    }

    /// Checks every device: used ≤ count, memUsed ≤ memTotal, coresUsed ≤ coresTotal.
    pub fn devices(source: &str, devs: &[Device], pods: usize) -> Check {
        let mut c = Check { source: source.into(), checked: true, devices: devs.len(), pods, ..Check::default() };
        for d in devs {
            let mut over = Vec::new();
            if d.used > d.count {
                over.push(format!("slots {}/{}", d.used, d.count));
            }
            if d.mem_used > d.mem_total {
                over.push(format!("memory {}/{} MiB", d.mem_used, d.mem_total));
            }
            if d.cores_used > d.cores_total {
                over.push(format!("cores {}/{}", d.cores_used, d.cores_total));
            }
            if !over.is_empty() {
                c.violation_count += 1;
                if c.violations.len() < SHOWN {
                    c.violations.push(format!("{} {}: {}", d.node, d.uuid, over.join(", ")));
                }
            }
        }
        c.ok = c.violation_count == 0;
        c
    }
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// The devices of a `GET /usage` answer (`{"nodes":[{"name","devices":[{"uuid","count","used",…}]}]}`).
pub fn usage_devices(usage: &Value) -> Result<Vec<Device>, String> {
    let nodes = usage.get("nodes").and_then(Value::as_array).ok_or("the answer has no \"nodes\" array")?;
    let mut out = Vec::new();
    for n in nodes {
        let node = n.get("name").and_then(Value::as_str).unwrap_or("").to_owned();
        for d in n.get("devices").and_then(Value::as_array).into_iter().flatten() {
            out.push(Device {
                node: node.clone(),
                uuid: d.get("uuid").and_then(Value::as_str).unwrap_or("").to_owned(),
                count: u(d, "count"),
                mem_total: u(d, "memTotal"),
                cores_total: u(d, "coresTotal"),
                used: u(d, "used"),
                mem_used: u(d, "memUsed"),
                cores_used: u(d, "coresUsed"),
            });
        }
    }
    Ok(out)
}

/// What a pod holds per device, collapsed as HAMi does: over init containers the peak, over
/// regular containers the sum, slots = max(init slots, app entries, 1).
pub fn pod_holdings(allocated: &str, init_containers: usize) -> Result<Vec<(String, Held)>, codec::Error> {
    let containers = codec::decode_pod_devices(allocated)?;
    let mut init: BTreeMap<String, Held> = BTreeMap::new();
    let mut app: BTreeMap<String, Held> = BTreeMap::new();
    for (i, c) in containers.iter().enumerate() {
        for d in c {
            let (mem, cores) = (d.usedmem.get(), u64::from(d.usedcores));
            if i < init_containers {
                let h = init.entry(d.uuid.to_string()).or_default();
                h.slots = 1;
                h.mem = h.mem.max(mem);
                h.cores = h.cores.max(cores);
            } else {
                let h = app.entry(d.uuid.to_string()).or_default();
                h.slots += 1;
                h.mem += mem;
                h.cores += cores;
            }
        }
    }
    let mut out: BTreeMap<String, Held> = app;
    for (uuid, i) in init {
        let h = out.entry(uuid).or_default();
        h.slots = h.slots.max(i.slots);
        h.mem = h.mem.max(i.mem);
        h.cores = h.cores.max(i.cores);
    }
    Ok(out
        .into_iter()
        .map(|(k, mut h)| {
            h.slots = h.slots.max(1);
            (k, h)
        })
        .collect())
}

/// Slots, memory (MiB) and cores one pod holds on one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    pub slots: u64,
    pub mem: u64,
    pub cores: u64,
}

/// A live pod's allocation, as read from the cluster.
pub struct PodAlloc<'a> {
    pub name: String,
    pub allocated: &'a str,
    pub init_containers: usize,
}

/// Adds the pods' holdings to `devs` (matched by UUID, whatever `used` they had) and reports pods
/// whose annotation does not decode or names an unknown device.
pub fn recount(devs: &mut [Device], pods: &[PodAlloc<'_>]) -> Vec<String> {
    let index: HashMap<String, usize> = devs.iter().enumerate().map(|(i, d)| (d.uuid.clone(), i)).collect();
    for d in devs.iter_mut() {
        (d.used, d.mem_used, d.cores_used) = (0, 0, 0);
    }
    let mut notes = Vec::new();
    for p in pods {
        match pod_holdings(p.allocated, p.init_containers) {
            Ok(held) => {
                for (uuid, h) in held {
                    match index.get(&uuid) {
                        Some(&i) => {
                            let d = &mut devs[i];
                            d.used += h.slots;
                            d.mem_used += h.mem;
                            d.cores_used += h.cores;
                        }
                        None => notes.push(format!("pod {} holds unknown device {uuid}", p.name)),
                    }
                }
            }
            Err(e) => notes.push(format!("pod {}: {e}", p.name)),
        }
    }
    notes
}

/// Both checks over a scheduler's `/usage` answer: its own accounting, then a recount from the
/// `hami.io/vgpu-devices-allocated` of the pods it lists (the capacities are its own).
pub fn check_usage(usage: &Value) -> Vec<Check> {
    let devs = match usage_devices(usage) {
        Ok(d) => d,
        Err(e) => return vec![Check::skipped("usage", e)],
    };
    let reported = Check::devices("usage", &devs, 0);
    let pods: Vec<(String, String, usize)> = usage
        .get("pods")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let a = p.pointer(&format!("/annotations/{}", keys::NVIDIA_ALLOCATED.replace('/', "~1")))?.as_str()?;
            let name = format!(
                "{}/{}",
                p.get("namespace").and_then(Value::as_str).unwrap_or(""),
                p.get("name").and_then(Value::as_str).unwrap_or("")
            );
            // `/usage` does not carry the pod spec; the synthetic pods have no init containers.
            Some((name, a.to_owned(), 0))
        })
        .collect();
    let allocs: Vec<PodAlloc<'_>> =
        pods.iter().map(|(n, a, i)| PodAlloc { name: n.clone(), allocated: a, init_containers: *i }).collect();
    let mut recounted = devs;
    let notes = recount(&mut recounted, &allocs);
    let mut c = Check::devices("annotations", &recounted, allocs.len());
    if !notes.is_empty() {
        c.note = Some(format!("{} pods not counted; first: {}", notes.len(), notes[0]));
    }
    vec![reported, c]
}

/// The check over API server objects: every node's register annotation against every live pod
/// (not Succeeded or Failed) assigned to it by `hami.io/vgpu-node`.
pub fn check_objects(nodes: &[Value], pods: &[Value]) -> Check {
    let mut devs = Vec::new();
    for n in nodes {
        let name = n.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        let Some(reg) = n.pointer("/metadata/annotations").and_then(|a| a.get(keys::NVIDIA_REGISTER)) else { continue };
        let Ok(list) = codec::decode_node_devices(reg.as_str().unwrap_or("")) else { continue };
        for d in list {
            devs.push(Device {
                node: name.to_owned(),
                uuid: d.id.to_string(),
                count: u64::from(d.count),
                mem_total: d.devmem.get(),
                cores_total: u64::from(d.devcore),
                used: 0,
                mem_used: 0,
                cores_used: 0,
            });
        }
    }
    let mut live = Vec::new();
    for p in pods {
        let phase = p.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
        let annos = p.pointer("/metadata/annotations");
        let assigned = annos.and_then(|a| a.get(keys::ASSIGNED_NODE)).is_some();
        let Some(alloc) = annos.and_then(|a| a.get(keys::NVIDIA_ALLOCATED)).and_then(Value::as_str) else { continue };
        if !assigned || phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        let name = format!(
            "{}/{}",
            p.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(""),
            p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
        );
        let init = p.pointer("/spec/initContainers").and_then(Value::as_array).map_or(0, Vec::len);
        live.push(PodAlloc { name, allocated: alloc, init_containers: init });
    }
    let notes = recount(&mut devs, &live);
    let mut c = Check::devices("api-server", &devs, live.len());
    if !notes.is_empty() {
        c.note = Some(format!("{} pods not counted; first: {}", notes.len(), notes[0]));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn usage_with(used: u64, mem_used: u64, cores_used: u64, pods: Value) -> Value {
        json!({"nodes": [{"name": "n0", "devices": [
            {"uuid": "GPU-a", "count": 10, "used": 1, "memTotal": 16384, "memUsed": 1000, "coresTotal": 100, "coresUsed": 10},
            {"uuid": "GPU-b", "count": 10, "used": used, "memTotal": 16384, "memUsed": mem_used, "coresTotal": 100, "coresUsed": cores_used},
        ]}], "pods": pods})
    }

    #[test]
    fn a_device_within_capacity_passes() {
        let pods = json!([{"namespace": "ns", "name": "p", "annotations": {keys::NVIDIA_ALLOCATED: "GPU-b,NVIDIA,16384,100:;"}}]);
        let checks = check_usage(&usage_with(10, 16384, 100, pods));
        assert_eq!(checks.len(), 2);
        assert!(checks.iter().all(|c| c.checked && c.ok && c.devices == 2), "{checks:?}");
        assert_eq!(checks[1].pods, 1);
    }

    #[test]
    fn over_committed_usage_is_caught_field_by_field() {
        for (used, mem, cores, what) in [(11, 0, 0, "slots 11/10"), (1, 16385, 0, "memory"), (1, 0, 101, "cores")] {
            let c = &check_usage(&usage_with(used, mem, cores, json!([])))[0];
            assert!(c.checked && !c.ok, "{what}");
            assert_eq!(c.violation_count, 1);
            assert!(c.violations[0].starts_with("n0 GPU-b: ") && c.violations[0].contains(what), "{:?}", c.violations);
        }
    }

    #[test]
    fn over_committed_annotations_are_caught_even_when_the_usage_looks_fine() {
        let pods = json!([
            {"namespace": "ns", "name": "p1", "annotations": {keys::NVIDIA_ALLOCATED: "GPU-a,NVIDIA,10000,0:;"}},
            {"namespace": "ns", "name": "p2", "annotations": {keys::NVIDIA_ALLOCATED: "GPU-a,NVIDIA,10000,0:;"}},
        ]);
        let checks = check_usage(&usage_with(0, 0, 0, pods));
        assert!(checks[0].ok);
        assert!(!checks[1].ok);
        assert!(checks[1].violations[0].contains("memory 20000/16384 MiB"), "{:?}", checks[1].violations);
    }

    #[test]
    fn a_usage_answer_without_nodes_is_not_checked() {
        let c = check_usage(&json!({"error": "nope"}));
        assert!(!c[0].checked && c[0].note.is_some());
    }

    #[test]
    fn api_server_objects_are_recounted_with_init_containers_as_a_peak() {
        let reg = r#"[{"id":"GPU-x","count":2,"devmem":1000,"devcore":100,"type":"NVIDIA-T4","health":true}]"#;
        let nodes = vec![json!({"metadata": {"name": "n", "annotations": {keys::NVIDIA_REGISTER: reg}}})];
        let pod = |name: &str, alloc: &str, init: usize, phase: &str| {
            json!({"metadata": {"namespace": "ns", "name": name, "annotations": {keys::ASSIGNED_NODE: "n", keys::NVIDIA_ALLOCATED: alloc}},
                   "spec": {"initContainers": vec![json!({"name": "i"}); init]}, "status": {"phase": phase}})
        };
        // Init peak 600 and app 300 collapse to 600; the finished pod does not count.
        let ok = vec![
            pod("a", "GPU-x,NVIDIA,600,0:;GPU-x,NVIDIA,300,0:;", 1, "Running"),
            pod("b", "GPU-x,NVIDIA,900,0:;", 0, "Failed"),
        ];
        let c = check_objects(&nodes, &ok);
        assert!(c.ok && c.pods == 1 && c.devices == 1, "{c:?}");
        let over = vec![pod("a", "GPU-x,NVIDIA,600,0:;", 0, "Running"), pod("c", "GPU-x,NVIDIA,600,0:;", 0, "Pending")];
        let c = check_objects(&nodes, &over);
        assert!(!c.ok && c.violation_count == 1, "{c:?}");
        let slots = vec![
            pod("a", "GPU-x,NVIDIA,1,0:;", 0, ""),
            pod("b", "GPU-x,NVIDIA,1,0:;", 0, ""),
            pod("c", "GPU-x,NVIDIA,1,0:;", 0, ""),
        ];
        assert!(check_objects(&nodes, &slots).violations[0].contains("slots 3/2"));
    }
}
