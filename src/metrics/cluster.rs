//! HAMi's cluster gauges: the device, pod and quota gauges HAMi's scheduler exports, and its
//! leader and cache-synced gauges. Names and labels are HAMi's (and, with `--legacy-metrics`,
//! HAMi's old names too), so HAMi's dashboards keep working. They are computed from the node
//! actors' reports and the quota book when `/metrics` is scraped, never on the filter path, and
//! only the leader exports the cluster ones (followers would duplicate them). Rendered as
//! Prometheus text here rather than through the `metrics` crate's recorder, because each scrape
//! draws the whole set afresh.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::devices::Vendors;
use crate::model::DeviceUsage;
use crate::sched::quota_book::{QuotaBook, QuotaEntry};
use crate::sched::report::{AllocReport, AllocState, NodeReport};

const MIB: f64 = 1_048_576.0;

/// HAMi's scheduler-state gauges, on every replica and every scrape: whether this replica leads,
/// and whether it leads with its caches synced (a follower reports 0, as HAMi's does).
pub fn render_state(is_leader: bool, synced: bool) -> String {
    let mut out = String::new();
    let mut leader =
        Family::new("hami_scheduler_is_leader", "1 if this scheduler instance is the current leader, 0 otherwise.");
    leader.sample(&[("zone", "vGPU")], if is_leader { 1.0 } else { 0.0 });
    leader.finish(&mut out);
    let mut cache = Family::new(
        "hami_scheduler_cache_synced",
        "1 if the scheduler's internal node/device cache is fully synced, 0 otherwise.",
    );
    cache.sample(&[("zone", "vGPU")], if is_leader && synced { 1.0 } else { 0.0 });
    cache.finish(&mut out);
    out
}

/// Which of HAMi's series a scrape carries beyond the device and quota gauges.
#[derive(Clone, Copy, Debug)]
pub struct Series {
    /// HAMi's old metric names too (`--legacy-metrics`).
    pub legacy: bool,
    /// The per-pod device series (`--pod-device-metrics`).
    pub pods: bool,
}

/// HAMi's device, pod and quota gauges from the node actors' reports, in that order. With
/// `series.legacy`, HAMi's old metric names follow; without `series.pods`, no per-pod series.
/// Also sets the outstanding-reservations gauge, so the recorder's render shows it as of this
/// scrape.
pub fn render_cluster(reports: &[NodeReport], vendors: &Vendors, quota: Option<&QuotaBook>, series: Series) -> String {
    let mut devices = DeviceGauges::new();
    let mut pods = PodGauges::new();
    let mut quotas = QuotaGauges::new();
    let mut old = series.legacy.then(Legacy::default);
    let mut outstanding = 0u64;
    for r in reports {
        let node = r.name.as_str();
        for d in r.snapshot.devices.iter().filter(|d| !d.info.id.as_str().is_empty()) {
            let labels = DeviceLabels::of(node, d);
            devices.sample(&labels, d, vendors);
            if let Some(old) = &mut old {
                old.device(&labels, d);
            }
        }
        for a in &r.allocs {
            if a.state == AllocState::Reserved {
                outstanding += 1;
            }
            if !series.pods {
                continue;
            }
            for held in PodDevice::each(node, a) {
                pods.sample(&held);
                if let Some(old) = &mut old {
                    old.pod(&held);
                }
            }
        }
    }
    for e in quota.map(QuotaBook::entries).unwrap_or_default() {
        quotas.sample(&e);
        if let Some(old) = &mut old {
            old.quota(&e);
        }
    }
    super::reservations_outstanding(outstanding);
    let mut out = String::new();
    devices.finish(&mut out);
    pods.finish(&mut out);
    quotas.finish(&mut out);
    if let Some(old) = old {
        old.finish(&mut out);
    }
    out
}

/// The pending-pods gauges, on every replica (a follower filters nothing, so reports none):
/// pods the last filter left pending by outcome, every outcome shown, and by each reason of
/// that filter, as kube-scheduler's `scheduler_pending_pods` and `scheduler_unschedulable_pods`
/// count its own queue.
pub fn render_pending<'a>(
    by_outcome: impl IntoIterator<Item = (&'a str, u64)>,
    by_reason: impl IntoIterator<Item = (&'a str, u64)>,
) -> String {
    let mut pending = Family::new(
        super::PENDING_PODS,
        "Pods this scheduler's last filter found no node for (no_fit) or failed (error), until they are placed, bound or deleted",
    );
    let mut counts: BTreeMap<&str, u64> = [("no_fit", 0), ("error", 0)].into_iter().collect();
    counts.extend(by_outcome);
    for (outcome, n) in counts {
        pending.sample(&[("outcome", outcome)], n as f64);
    }
    let mut reasons = Family::new(
        super::UNSCHEDULABLE_PODS,
        "Pending pods by each reason their last filter gave (a pod counts under every reason it was given)",
    );
    for (reason, n) in by_reason {
        reasons.sample(&[("reason", reason)], n as f64);
    }
    let mut out = String::new();
    pending.finish(&mut out);
    reasons.finish(&mut out);
    out
}

/// Prometheus text-format label value escaping.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// One gauge family: its HELP and TYPE lines, then its samples; rendered only if it has one.
struct Family {
    out: String,
    name: &'static str,
    started: bool,
}

impl Family {
    fn new(name: &'static str, help: &str) -> Family {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        Family { out, name, started: false }
    }
    fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        self.started = true;
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", esc(v))).collect();
        let _ = writeln!(self.out, "{}{{{}}} {}", self.name, l.join(","), value);
    }
    fn finish(self, into: &mut String) {
        if self.started {
            into.push_str(&self.out);
        }
    }
}

/// Every gauge but `hami_build_info` carries this label, as in HAMi.
const ZONE: (&str, &str) = ("zone", "vGPU");

/// A registered device's label values, as text, shared by the device gauges and their legacy twins.
struct DeviceLabels<'a> {
    node: &'a str,
    uuid: &'a str,
    idx: String,
    ty: String,
    /// The registered cores (`devcore`), as `device_cores`.
    cores: String,
    /// The registered memory in MiB, as `device_memory_limit`.
    memlim: String,
}

impl<'a> DeviceLabels<'a> {
    fn of(node: &'a str, d: &'a DeviceUsage) -> Self {
        DeviceLabels {
            node,
            uuid: d.info.id.as_str(),
            idx: d.info.index.to_string(),
            ty: d.info.ty.to_string(),
            cores: d.info.devcore.to_string(),
            memlim: d.info.devmem.get().to_string(),
        }
    }
}

/// HAMi's per-device gauges: limits, allocation, sharing and the node overview.
struct DeviceGauges {
    mem_limit: Family,
    core_limit: Family,
    mem_alloc: Family,
    shared: Family,
    core_alloc: Family,
    overview: Family,
    mem_ratio: Family,
}

impl DeviceGauges {
    fn new() -> Self {
        DeviceGauges {
            mem_limit: Family::new("hami_gpu_memory_limit_bytes", "Device memory limit in bytes"),
            core_limit: Family::new("hami_gpu_core_limit_ratio", "Device core limit"),
            mem_alloc: Family::new("hami_gpu_memory_allocated_bytes", "Device memory allocated in bytes"),
            shared: Family::new("hami_gpu_shared_count", "Number of tasks sharing the device"),
            core_alloc: Family::new("hami_gpu_core_allocated_ratio", "Device cores allocated"),
            overview: Family::new("hami_node_gpu_overview", "Device memory allocated in bytes, with its limit"),
            mem_ratio: Family::new("hami_node_gpu_memory_allocated_ratio", "Device memory allocated over its limit"),
        }
    }

    fn sample(&mut self, l: &DeviceLabels, d: &DeviceUsage, vendors: &Vendors) {
        // AMD registers CUs; HAMi's metrics show cores as a percentage.
        let is_amd = vendors.get(d.vendor).name() == "AMD";
        let (core_total, core_used) = if is_amd && d.info.devcore > 0 {
            (100.0, (f64::from(d.used_cores) / f64::from(d.info.devcore) * 100.0).ceil())
        } else {
            (f64::from(d.info.devcore), f64::from(d.used_cores))
        };
        let (node, uuid, idx, ty) = (l.node, l.uuid, l.idx.as_str(), l.ty.as_str());
        let base = [("node", node), ("device_uuid", uuid), ("device_index", idx), ("device_type", ty), ZONE];
        let used_bytes = d.used_mem.get() as f64 * MIB;
        self.mem_limit.sample(&base, d.info.devmem.get() as f64 * MIB);
        self.core_limit.sample(&base, core_total);
        self.mem_alloc.sample(
            &[
                ("node", node),
                ("device_uuid", uuid),
                ("device_index", idx),
                ("device_cores", &l.cores),
                ("device_type", ty),
                ZONE,
            ],
            used_bytes,
        );
        self.shared.sample(&base, f64::from(d.used));
        self.core_alloc.sample(&base, core_used);
        self.overview.sample(
            &[
                ("node", node),
                ("device_uuid", uuid),
                ("device_index", idx),
                ("device_cores", &l.cores),
                ("device_memory_limit", &l.memlim),
                ("device_type", ty),
                ZONE,
            ],
            used_bytes,
        );
        if d.info.devmem.get() > 0 {
            self.mem_ratio.sample(&base, d.used_mem.get() as f64 / d.info.devmem.get() as f64);
        }
    }

    fn finish(self, out: &mut String) {
        for f in [
            self.mem_limit,
            self.core_limit,
            self.mem_alloc,
            self.shared,
            self.core_alloc,
            self.overview,
            self.mem_ratio,
        ] {
            f.finish(out);
        }
    }
}

/// What one pod holds on one device, summed over its containers.
struct PodDevice<'a> {
    namespace: &'a str,
    node: &'a str,
    pod: &'a str,
    uuid: &'a str,
    mem_mib: u64,
    cores: u32,
}

impl<'a> PodDevice<'a> {
    /// Per pod and device, as HAMi's collapsed usage stores it (its `container_index` is 0), in
    /// device-UUID order.
    fn each(node: &'a str, a: &'a AllocReport) -> impl Iterator<Item = PodDevice<'a>> {
        let mut per: BTreeMap<&str, (u64, u32)> = BTreeMap::new();
        for (_, _, e) in a.devices.entries() {
            let p = per.entry(e.uuid.as_str()).or_default();
            p.0 += e.usedmem.get();
            p.1 += e.usedcores;
        }
        per.into_iter().map(move |(uuid, (mem_mib, cores))| PodDevice {
            namespace: &a.namespace,
            node,
            pod: &a.name,
            uuid,
            mem_mib,
            cores,
        })
    }
}

/// HAMi's per-pod gauges: the memory and cores each pod holds on each device.
struct PodGauges {
    vmem: Family,
    vcore: Family,
}

impl PodGauges {
    fn new() -> Self {
        PodGauges {
            vmem: Family::new("hami_vgpu_memory_allocated_bytes", "Memory a pod holds on a device in bytes"),
            vcore: Family::new("hami_vgpu_core_allocated_ratio", "Cores a pod holds on a device"),
        }
    }

    fn sample(&mut self, p: &PodDevice) {
        let labels = [
            ("namespace", p.namespace),
            ("node", p.node),
            ("pod", p.pod),
            ("container_index", "0"),
            ("device_uuid", p.uuid),
            ZONE,
        ];
        self.vmem.sample(&labels, p.mem_mib as f64 * MIB);
        self.vcore.sample(&labels, f64::from(p.cores));
    }

    fn finish(self, out: &mut String) {
        self.vmem.finish(out);
        self.vcore.finish(out);
    }
}

/// HAMi's namespace quota gauges.
struct QuotaGauges {
    used: Family,
    limit: Family,
}

impl QuotaGauges {
    fn new() -> Self {
        QuotaGauges {
            used: Family::new("hami_resource_quota_used", "Namespace quota usage"),
            limit: Family::new("hami_resource_quota_limit", "Namespace quota limit"),
        }
    }

    /// As HAMi labels them: `quota_name` is the device resource the quota limits
    /// (`nvidia.com/gpumem`, the ResourceQuota key without `limits.`), one series per namespace
    /// and resource; the limit is 0 where no ResourceQuota sets one.
    fn sample(&mut self, e: &QuotaEntry) {
        let (ns, res) = (e.namespace.as_str(), e.resource.as_str());
        let lim = e.limit.unwrap_or(0).to_string();
        self.used.sample(&[("namespace", ns), ("quota_name", res), ("limit", &lim), ZONE], e.used as f64);
        if let Some(l) = e.limit {
            self.limit.sample(&[("namespace", ns), ("quota_name", res), ZONE], l as f64);
        }
    }

    fn finish(self, out: &mut String) {
        self.used.finish(out);
        self.limit.finish(out);
    }
}

/// HAMi's old metric names (`--legacy-metrics`), with HAMi's old labels and no HELP or TYPE
/// lines. Grouped by name, as the text format wants each family contiguous, and rendered in name
/// order after the current families.
#[derive(Default)]
struct Legacy(BTreeMap<&'static str, String>);

impl Legacy {
    fn family(&mut self, name: &'static str) -> &mut String {
        self.0.entry(name).or_default()
    }

    fn device(&mut self, l: &DeviceLabels, d: &DeviceUsage) {
        let (idx, cores, memlim) = (&l.idx, &l.cores, &l.memlim);
        let head = format!("nodeid=\"{}\",deviceuuid=\"{}\",deviceidx=\"{idx}\"", esc(l.node), esc(l.uuid));
        let t = format!(",devicetype=\"{}\"", esc(&l.ty));
        let used_bytes = d.used_mem.get() as f64 * MIB;
        let mut line = |name: &'static str, v: f64, extra: &str| {
            let _ = writeln!(self.family(name), "{name}{{{head}{extra}}} {v}");
        };
        line("GPUDeviceMemoryLimit", d.info.devmem.get() as f64 * MIB, &t);
        line("GPUDeviceCoreLimit", f64::from(d.info.devcore), &t);
        line("GPUDeviceMemoryAllocated", used_bytes, &format!(",devicecores=\"{cores}\"{t}"));
        line("GPUDeviceSharedNum", f64::from(d.used), &t);
        line("GPUDeviceCoreAllocated", f64::from(d.used_cores), &t);
        line("nodeGPUOverview", used_bytes, &format!(",devicecores=\"{cores}\",devicememorylimit=\"{memlim}\"{t}"));
        if d.info.devmem.get() > 0 {
            line("nodeGPUMemoryPercentage", d.used_mem.get() as f64 / d.info.devmem.get() as f64, "");
        }
    }

    fn pod(&mut self, p: &PodDevice) {
        let l = format!(
            "{{podnamespace=\"{}\",nodename=\"{}\",podname=\"{}\",containeridx=\"0\",deviceuuid=\"{}\"}}",
            esc(p.namespace),
            esc(p.node),
            esc(p.pod),
            esc(p.uuid)
        );
        let _ = writeln!(self.family("vGPUMemoryAllocated"), "vGPUMemoryAllocated{l} {}", p.mem_mib as f64 * MIB);
        let _ = writeln!(self.family("vGPUCoreAllocated"), "vGPUCoreAllocated{l} {}", p.cores);
    }

    fn quota(&mut self, e: &QuotaEntry) {
        let _ = writeln!(
            self.family("QuotaUsed"),
            "QuotaUsed{{quotanamespace=\"{}\",quotaName=\"{}\",limit=\"{}\"}} {}",
            esc(&e.namespace),
            esc(&e.resource),
            e.limit.unwrap_or(0),
            e.used
        );
    }

    fn finish(self, out: &mut String) {
        for v in self.0.values() {
            out.push_str(v);
        }
    }
}

#[cfg(test)]
mod tests;
