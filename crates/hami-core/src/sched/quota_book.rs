//! The namespace quota book shared by node actors: limits from ResourceQuotas, usage from every
//! allocation. Fit reads a per-namespace copy taken once per evaluation; a reservation checks and
//! adds its usage atomically under that namespace's entry, so concurrent reservations on
//! different nodes cannot exceed a limit together. The arithmetic is `sched::quota`. Shared, so
//! concurrent: a `DashMap` per namespace, no I/O.

use dashmap::DashMap;

use crate::devices::{QuotaCheck, QuotaNames, Vendors};
use crate::model::{MemMiB, VendorId};
use crate::sched::accounting::Charge;
use crate::sched::quota::{Ask, Ledger};

/// Memory (MiB) and cores per vendor one pod holds.
pub type Usage = Vec<(VendorId, u64, u64)>;

/// What a set of charges adds to quota usage.
pub fn usage_of(charges: &[Charge]) -> Usage {
    let mut u: Usage = Vec::new();
    for c in charges {
        match u.iter_mut().find(|(v, _, _)| *v == c.vendor) {
            Some(e) => {
                e.1 = e.1.saturating_add(c.mem.get());
                e.2 = e.2.saturating_add(u64::from(c.cores));
            }
            None => u.push((c.vendor, c.mem.get(), u64::from(c.cores))),
        }
    }
    u
}

/// One namespace's usage of one resource, and the limit a ResourceQuota sets on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaEntry {
    pub namespace: String,
    pub resource: String,
    pub quota_name: Option<String>,
    pub used: i64,
    pub limit: Option<i64>,
}

pub struct QuotaBook {
    names: Vec<QuotaNames>,
    resources: Vec<String>,
    ns: DashMap<String, Ledger>,
}

/// One namespace's quota as fit sees it during one evaluation.
pub struct NamespaceQuota<'a> {
    book: &'a QuotaBook,
    ledger: Ledger,
}

impl NamespaceQuota<'_> {
    /// Leaves out a pod's own earlier usage from this copy (a repeated reservation of the pod).
    pub fn without(mut self, namespace: &str, usage: &Usage) -> Self {
        let mut l = std::mem::take(&mut self.ledger);
        self.book.apply(&mut l, namespace, usage, -1);
        self.ledger = l;
        self
    }

    /// Whether `namespace` may take all of `usage` more at once (a pod group's members together).
    pub fn admits(&self, namespace: &str, usage: &Usage) -> bool {
        usage
            .iter()
            .all(|(v, mem, cores)| self.book.ask(*v, *mem, *cores).is_none_or(|a| self.ledger.fits(namespace, &a)))
    }
}

impl QuotaCheck for NamespaceQuota<'_> {
    fn fits(&self, namespace: &str, vendor: VendorId, mem: MemMiB, cores: u32) -> bool {
        self.book.ask(vendor, mem.get(), u64::from(cores)).is_none_or(|a| self.ledger.fits(namespace, &a))
    }
}

impl QuotaBook {
    pub fn new(vendors: &Vendors) -> QuotaBook {
        let names: Vec<QuotaNames> = vendors.iter().map(|(_, v)| v.quota_names()).collect();
        let mut resources: Vec<String> =
            names.iter().flat_map(|n| n.memory.iter().chain(n.cores.iter()).cloned()).collect();
        resources.sort();
        resources.dedup();
        QuotaBook { names, resources, ns: DashMap::new() }
    }

    fn ask(&self, vendor: VendorId, mem: u64, cores: u64) -> Option<Ask<'_>> {
        let n = self.names.get(usize::from(vendor.0))?;
        if n.memory.is_none() && n.cores.is_none() {
            return None;
        }
        Some(Ask {
            memory_resource: n.memory.as_deref(),
            cores_resource: n.cores.as_deref(),
            memory_factor: n.memory_factor,
            mem,
            cores,
        })
    }

    /// Replaces the limits one ResourceQuota sets (`spec.hard`, every key; only integer
    /// `limits.<memory or core resource>` entries count).
    pub fn set_quota(&self, namespace: &str, name: &str, hard: &[(String, i64)]) {
        let limits = crate::sched::quota::hard_limits(hard.iter().map(|(k, v)| (k.as_str(), *v)), &self.resources);
        self.ns.entry(namespace.to_owned()).or_default().set_quota(namespace, name, &limits);
    }

    pub fn remove_quota(&self, namespace: &str, name: &str) {
        if let Some(mut l) = self.ns.get_mut(namespace) {
            l.remove_quota(namespace, name);
        }
    }

    /// A copy of the namespace's quota for one evaluation, or `None` when it has no limit.
    pub fn view(&self, namespace: &str) -> Option<NamespaceQuota<'_>> {
        let l = self.ns.get(namespace)?;
        let limited = l.entries().any(|(_, _, e)| e.limit.is_some());
        limited.then(|| NamespaceQuota { book: self, ledger: l.clone() })
    }

    fn apply(&self, l: &mut Ledger, namespace: &str, usage: &Usage, sign: i64) {
        for (v, mem, cores) in usage {
            if let Some(n) = self.names.get(usize::from(v.0)) {
                if let Some(r) = &n.memory {
                    l.add(namespace, r, sign.saturating_mul(i64::try_from(*mem).unwrap_or(i64::MAX)));
                }
                if let Some(r) = &n.cores {
                    l.add(namespace, r, sign.saturating_mul(i64::try_from(*cores).unwrap_or(i64::MAX)));
                }
            }
        }
    }

    /// Adds `usage` if every vendor's part fits the namespace's limits; atomic per namespace.
    pub fn try_add(&self, namespace: &str, usage: &Usage) -> bool {
        self.try_replace(namespace, None, usage)
    }

    /// Swaps a pod's earlier usage `old` for `new` if `new` fits once `old` is gone; otherwise
    /// leaves `old` in place. One step under the namespace's entry.
    pub fn try_replace(&self, namespace: &str, old: Option<&Usage>, new: &Usage) -> bool {
        let mut l = self.ns.entry(namespace.to_owned()).or_default();
        if let Some(o) = old {
            self.apply(&mut l, namespace, o, -1);
        }
        let fits = new.iter().all(|(v, mem, cores)| self.ask(*v, *mem, *cores).is_none_or(|a| l.fits(namespace, &a)));
        if fits {
            self.apply(&mut l, namespace, new, 1);
        } else if let Some(o) = old {
            self.apply(&mut l, namespace, o, 1);
        }
        fits
    }

    /// Takes `old` out, and if `check` then fits the namespace's limits, puts `hold` in its place;
    /// otherwise puts `old` back. One step under the namespace's entry. The refit checks the
    /// pod's usage after the move (`check`) but holds, until its write is settled, what covers
    /// both before and after (`hold`), so a concurrent reservation cannot take what a rollback
    /// would need again.
    pub fn try_swap(&self, namespace: &str, old: &Usage, check: &Usage, hold: &Usage) -> bool {
        let mut l = self.ns.entry(namespace.to_owned()).or_default();
        self.apply(&mut l, namespace, old, -1);
        let fits = check.iter().all(|(v, mem, cores)| self.ask(*v, *mem, *cores).is_none_or(|a| l.fits(namespace, &a)));
        self.apply(&mut l, namespace, if fits { hold } else { old }, 1);
        fits
    }

    /// Adds usage that exists whatever the limits say (pods already on a node).
    pub fn add(&self, namespace: &str, usage: &Usage) {
        let mut l = self.ns.entry(namespace.to_owned()).or_default();
        self.apply(&mut l, namespace, usage, 1);
    }

    /// Swaps `old` for `new` whatever the limits say (a pod the cluster shows changed), in one step.
    pub fn replace(&self, namespace: &str, old: Option<&Usage>, new: &Usage) {
        let mut l = self.ns.entry(namespace.to_owned()).or_default();
        if let Some(o) = old {
            self.apply(&mut l, namespace, o, -1);
        }
        self.apply(&mut l, namespace, new, 1);
    }

    pub fn remove(&self, namespace: &str, usage: &Usage) {
        if let Some(mut l) = self.ns.get_mut(namespace) {
            self.apply(&mut l, namespace, usage, -1);
        }
    }

    /// Every namespace's usage and limit per resource, for metrics.
    pub fn entries(&self) -> Vec<QuotaEntry> {
        let mut out = Vec::new();
        for e in self.ns.iter() {
            for (ns, res, en) in e.value().entries() {
                out.push(QuotaEntry {
                    namespace: ns.to_owned(),
                    resource: res.to_owned(),
                    quota_name: en.limit.as_ref().map(|l| l.quota_name.clone()),
                    used: en.used,
                    limit: en.limit.as_ref().map(|l| l.value),
                });
            }
        }
        out.sort_by(|a, b| (&a.namespace, &a.resource).cmp(&(&b.namespace, &b.resource)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::vendors;

    #[test]
    fn concurrent_reservations_cannot_exceed_a_limit_together() {
        // The check and the add are one step (docs/compat.md, "Quota" under "Cluster state").
        let v = vendors();
        let book = std::sync::Arc::new(QuotaBook::new(&v));
        book.set_quota("ns", "q", &[("limits.nvidia.com/gpumem".into(), 10_000)]);
        let nv = v.by_name("NVIDIA").unwrap();
        let ok: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..10).filter(|_| book.try_add("ns", &vec![(nv, 1000, 0)])).count()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(ok, 10, "exactly the limit is handed out");
        assert!(!book.view("ns").unwrap().fits("ns", nv, MemMiB(1), 0));
        book.remove("ns", &vec![(nv, 1000, 0)]);
        assert!(book.view("ns").unwrap().fits("ns", nv, MemMiB(1000), 0));
    }

    #[test]
    fn namespaces_without_limits_have_no_view() {
        let v = vendors();
        let book = QuotaBook::new(&v);
        let nv = v.by_name("NVIDIA").unwrap();
        book.add("free", &vec![(nv, 5000, 10)]);
        assert!(book.view("free").is_none());
        assert!(book.view("unknown").is_none());
    }
}
