//! The synthetic cluster: N fake GPU nodes with HAMi's NVIDIA register annotation (the same nodes
//! the fake device plugin creates), and P running pods placed so that every device stays within
//! its slots, memory and cores, carrying exactly the annotations HAMi writes on a bound pod. Written
//! as a `kubectl get nodes,pods -o json` style List for `hami-rs serve --cluster-file`.

use std::io::Write;
use std::path::Path;

use hami_rs::model::ContainerDevice;
use hami_rs::model::annotations as keys;
use hami_rs::model::codec;
use serde_json::{Value, json};

use crate::fake_plugin::{self, FakePluginArgs};
use crate::mix::{self, Mix, PodId, Request, Shape, Stream};

/// The shape of the cluster.
#[derive(Clone, Debug)]
pub struct Spec {
    pub nodes: usize,
    pub gpus_per_node: usize,
    pub gpu_model: String,
    /// MiB per device.
    pub gpu_mem: u64,
    /// Tasks per device.
    pub split: u32,
    pub name_prefix: String,
}

impl Spec {
    /// The fake device plugin's arguments for the same nodes (it builds their annotations).
    pub fn plugin_args(&self) -> FakePluginArgs {
        FakePluginArgs {
            kubeconfig: None,
            nodes: self.nodes,
            name_prefix: self.name_prefix.clone(),
            gpus_per_node: self.gpus_per_node,
            gpu_mem: self.gpu_mem,
            gpu_model: self.gpu_model.clone(),
            split: self.split,
            create_nodes: true,
            answer_handshake: false,
            never_release_lock: false,
            setup_only: true,
        }
    }

    pub fn shape(&self) -> Shape {
        Shape { gpus_per_node: u32::try_from(self.gpus_per_node).unwrap_or(u32::MAX), gpu_mem: self.gpu_mem }
    }

    pub fn node_names(&self) -> Vec<String> {
        fake_plugin::node_names(&self.plugin_args())
    }

    /// The UUID the fake plugin registers for device `i` of `node`.
    pub fn device_uuid(node: &str, i: usize) -> String {
        format!("GPU-{node}-{i}")
    }
}

/// What is in use on one device while placing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Used {
    pub slots: u32,
    pub mem: u64,
    pub cores: u32,
}

/// Whether a task of `mem` MiB and `cores` fits on a device, by HAMi's rules: a free slot, the
/// memory, the cores; a task of 100 cores needs the device to itself, and a core-less task may not
/// join a device whose cores are fully booked.
pub fn fits(u: Used, split: u32, devmem: u64, mem: u64, cores: u32) -> bool {
    u.slots < split
        && devmem.saturating_sub(u.mem) >= mem
        && 100u32.saturating_sub(u.cores) >= cores
        && !(cores == 100 && u.slots > 0)
        && !(u.cores >= 100 && cores == 0)
}

/// A pre-placed running pod.
#[derive(Clone, Debug)]
pub struct Running {
    pub id: PodId,
    pub req: Request,
    pub node: String,
    /// `hami.io/vgpu-devices-allocated` (one container).
    pub allocated: String,
}

/// The nodes and the placed running pods.
pub struct Synthetic {
    pub spec: Spec,
    pub nodes: Vec<String>,
    pub running: Vec<Running>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("only {placed} of {wanted} running pods fit on {nodes} nodes x {gpus} GPUs; lower --running-pods")]
    Full { placed: usize, wanted: usize, nodes: usize, gpus: usize },
    #[error("--nodes and --gpus-per-node must be at least 1")]
    Empty,
    #[error("writing the cluster file {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Namespace of the pre-placed pods.
pub const RUNNING_NAMESPACE: &str = "loadtest-running";

impl Synthetic {
    /// Places `running` pods drawn from `mix` under `seed`, round robin over the nodes (each pod on
    /// the first node from the cursor with room, on the first devices of it with room).
    pub fn build(spec: Spec, running: usize, mix: &Mix, seed: u64) -> Result<Synthetic, Error> {
        if spec.nodes == 0 || spec.gpus_per_node == 0 {
            return Err(Error::Empty);
        }
        let nodes = spec.node_names();
        let mut usage = vec![vec![Used::default(); spec.gpus_per_node]; spec.nodes];
        let mut out = Vec::with_capacity(running);
        let mut cursor = 0usize;
        for i in 0..running {
            let req = Request::draw(mix, spec.shape(), &mut mix::pod_rng(seed, Stream::Running, i as u64));
            let (mem, cores) = (req.mem_on(spec.gpu_mem), req.cores_per_device());
            let mut placed = None;
            for step in 0..spec.nodes {
                let n = (cursor + step) % spec.nodes;
                let free: Vec<usize> = (0..spec.gpus_per_node)
                    .filter(|&d| fits(usage[n][d], spec.split, spec.gpu_mem, mem, cores))
                    .take(req.gpus as usize)
                    .collect();
                if free.len() == req.gpus as usize {
                    placed = Some((n, free));
                    break;
                }
            }
            let Some((n, devs)) = placed else {
                return Err(Error::Full { placed: i, wanted: running, nodes: spec.nodes, gpus: spec.gpus_per_node });
            };
            cursor = (n + 1) % spec.nodes;
            let mut container = Vec::with_capacity(devs.len());
            for d in devs {
                let u = &mut usage[n][d];
                u.slots += 1;
                u.mem += mem;
                u.cores += cores;
                container.push(ContainerDevice::new(&Spec::device_uuid(&nodes[n], d), "NVIDIA", mem, cores));
            }
            out.push(Running {
                id: PodId::new(RUNNING_NAMESPACE, "running", i as u64),
                req,
                node: nodes[n].clone(),
                allocated: codec::encode_pod_devices(&[container]),
            });
        }
        Ok(Synthetic { spec, nodes, running: out })
    }

    pub fn node_json(&self, name: &str) -> Value {
        serde_json::to_value(fake_plugin::node_object(&self.spec.plugin_args(), name)).unwrap_or(Value::Null)
    }

    /// A running pod as HAMi leaves it after the plugin served it: assigned node and time, the
    /// allocated list, an emptied to-allocate list, bind-phase success.
    pub fn running_pod_json(p: &Running, scheduler_name: &str, now: i64) -> Value {
        let mut v = mix::pod_json(&p.id, &p.req, scheduler_name);
        let emptied = ";".repeat(p.allocated.matches(';').count() + 1);
        v["metadata"]["annotations"] = json!({
            keys::ASSIGNED_NODE: p.node,
            keys::ASSIGNED_TIME: now.to_string(),
            keys::NVIDIA_ALLOCATED: p.allocated,
            keys::NVIDIA_TO_ALLOCATE: emptied,
            keys::BIND_PHASE: keys::BIND_PHASE_SUCCESS,
            keys::BIND_TIME: now.to_string(),
        });
        v["metadata"]["labels"][keys::ASSIGNED_NODE] = json!(p.node);
        v["spec"]["nodeName"] = json!(p.node);
        v["status"] = json!({"phase": "Running"});
        v
    }

    /// Writes the cluster as one v1 List, streaming item by item.
    pub fn write(&self, path: &Path, scheduler_name: &str) -> Result<(), Error> {
        let err = |source| Error::Write { path: path.display().to_string(), source };
        let f = std::fs::File::create(path).map_err(err)?;
        let mut w = std::io::BufWriter::new(f);
        let now = chrono::Utc::now().timestamp();
        let mut write = || -> std::io::Result<()> {
            w.write_all(br#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":["#)?;
            let mut first = true;
            let items = self
                .nodes
                .iter()
                .map(|n| self.node_json(n))
                .chain(self.running.iter().map(|p| Synthetic::running_pod_json(p, scheduler_name, now)));
            for item in items {
                if !first {
                    w.write_all(b",\n")?;
                }
                first = false;
                serde_json::to_writer(&mut w, &item)?;
            }
            w.write_all(b"]}\n")?;
            w.flush()
        };
        write().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn spec(nodes: usize, gpus: usize) -> Spec {
        Spec {
            nodes,
            gpus_per_node: gpus,
            gpu_model: "NVIDIA-Tesla T4".into(),
            gpu_mem: 16384,
            split: 10,
            name_prefix: "fake-gpu-".into(),
        }
    }

    #[test]
    fn the_fit_rules_are_hamis() {
        let idle = Used::default();
        assert!(fits(idle, 10, 1000, 1000, 100));
        assert!(!fits(Used { slots: 1, mem: 10, cores: 0 }, 10, 1000, 10, 100), "100 cores is exclusive");
        assert!(!fits(Used { slots: 1, mem: 10, cores: 100 }, 10, 1000, 10, 0), "booked cores");
        assert!(!fits(Used { slots: 10, mem: 0, cores: 0 }, 10, 1000, 0, 0), "slots");
        assert!(!fits(Used { slots: 1, mem: 600, cores: 0 }, 10, 1000, 500, 0), "memory");
        assert!(!fits(Used { slots: 1, mem: 0, cores: 60 }, 10, 1000, 0, 50), "cores");
        assert!(fits(Used { slots: 1, mem: 500, cores: 50 }, 10, 1000, 500, 50));
    }

    #[test]
    fn running_pods_fit_and_their_annotations_decode() {
        let mix: Mix = Mix::DEFAULT.parse().expect("parses");
        let s = Synthetic::build(spec(20, 8), 400, &mix, 9).expect("400 pods fit on 160 GPUs");
        assert_eq!(s.running.len(), 400);
        // Recount from the annotations alone, as a scheduler rebuilding its usage would.
        let mut per: HashMap<String, Used> = HashMap::new();
        for p in &s.running {
            let containers = codec::decode_pod_devices(&p.allocated).expect("the allocated list decodes");
            let devs: Vec<&ContainerDevice> = containers.iter().flatten().collect();
            assert_eq!(devs.len(), p.req.gpus as usize, "{}", p.allocated);
            for d in devs {
                assert!(d.uuid.as_str().starts_with(&format!("GPU-{}-", p.node)), "device on its node");
                assert_eq!(&*d.ty, "NVIDIA");
                let u = per.entry(d.uuid.to_string()).or_default();
                u.slots += 1;
                u.mem += d.usedmem.get();
                u.cores += d.usedcores;
            }
            let v = Synthetic::running_pod_json(p, "hami-scheduler", 1_700_000_000);
            assert_eq!(v["metadata"]["annotations"][keys::ASSIGNED_NODE], p.node.as_str());
            assert_eq!(v["spec"]["nodeName"], p.node.as_str());
            assert_eq!(v["status"]["phase"], "Running");
            let to_allocate = v["metadata"]["annotations"][keys::NVIDIA_TO_ALLOCATE].as_str().expect("a string");
            assert!(codec::decode_pod_devices(to_allocate).expect("decodes").iter().all(Vec::is_empty));
        }
        for (uuid, u) in &per {
            assert!(u.slots <= 10 && u.mem <= 16384 && u.cores <= 100, "{uuid} over-committed: {u:?}");
        }
        let slots: usize = s.running.iter().map(|p| p.req.gpus as usize).sum();
        assert_eq!(slots, per.values().map(|u| u.slots as usize).sum::<usize>());
    }

    #[test]
    fn more_running_pods_than_room_is_an_error() {
        let mix: Mix = "whole:1".parse().expect("parses");
        match Synthetic::build(spec(2, 2), 5, &mix, 1) {
            Err(Error::Full { placed: 4, wanted: 5, .. }) => {}
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("five whole GPUs placed on four"),
        }
    }

    #[test]
    fn the_cluster_file_loads_in_hami_rs() {
        let mix: Mix = Mix::DEFAULT.parse().expect("parses");
        let s = Synthetic::build(spec(3, 4), 12, &mix, 5).expect("fits");
        let dir = std::env::temp_dir().join(format!("hami-loadtest-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("cluster.json");
        s.write(&path, "hami-scheduler").expect("written");
        let objects = hami_rs::backend::memory::ClusterObjects::load(&path).expect("hami-rs parses the file");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(objects.nodes.len(), 3);
        assert_eq!(objects.pods.len(), 12);
        let register = objects.nodes[0].annotation(keys::NVIDIA_REGISTER).expect("register annotation");
        let devs = codec::decode_node_devices(register).expect("decodes");
        assert_eq!(devs.len(), 4);
        assert_eq!((devs[0].count, devs[0].devmem.get()), (10, 16384));
        assert_eq!(devs[0].id.as_str(), Spec::device_uuid("fake-gpu-0", 0));
        let pod = &objects.pods[0];
        assert!(pod.annotation(keys::NVIDIA_ALLOCATED).is_some_and(|a| codec::decode_pod_devices(a).is_ok()));
    }
}
