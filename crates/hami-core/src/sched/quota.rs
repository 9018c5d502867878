//! Namespace quota on HAMi's memory and core resources, as pure arithmetic. Usage is tracked per
//! namespace and resource name whether or not a quota exists; limits come from ResourceQuota
//! `spec.hard` keys `limits.<resource>` with integer values.

use std::collections::HashMap;

/// One namespace's limit on one resource, and which ResourceQuota set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    pub quota_name: String,
    pub value: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// Scheduler units (MiB after the memory factor, or cores). Never below 0.
    pub used: i64,
    pub limit: Option<Limit>,
}

/// What a fit asks of the ledger for one vendor.
#[derive(Clone, Copy, Debug)]
pub struct Ask<'a> {
    pub memory_resource: Option<&'a str>,
    pub cores_resource: Option<&'a str>,
    /// Limits are in request units; usage is in MiB. Only factors above 1 scale.
    pub memory_factor: u64,
    pub mem: u64,
    pub cores: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Ledger {
    map: HashMap<String, HashMap<String, Entry>>,
}

impl Ledger {
    /// Replaces every limit `quota_name` sets in `namespace` with `hard` (resource → value).
    pub fn set_quota(&mut self, namespace: &str, quota_name: &str, hard: &[(String, i64)]) {
        let ns = self.map.entry(namespace.to_owned()).or_default();
        for e in ns.values_mut() {
            if e.limit.as_ref().is_some_and(|l| l.quota_name == quota_name) {
                e.limit = None;
            }
        }
        for (res, v) in hard {
            ns.entry(res.clone()).or_default().limit = Some(Limit { quota_name: quota_name.to_owned(), value: *v });
        }
    }

    /// A deleted ResourceQuota clears its limits; usage stays.
    pub fn remove_quota(&mut self, namespace: &str, quota_name: &str) {
        self.set_quota(namespace, quota_name, &[]);
    }

    /// Adds (or with a negative delta removes) usage; usage never drops below 0.
    pub fn add(&mut self, namespace: &str, resource: &str, delta: i64) {
        if resource.is_empty() || delta == 0 {
            return;
        }
        let e = self.map.entry(namespace.to_owned()).or_default().entry(resource.to_owned()).or_default();
        e.used = e.used.saturating_add(delta).max(0);
    }

    pub fn entry(&self, namespace: &str, resource: &str) -> Option<&Entry> {
        self.map.get(namespace)?.get(resource)
    }

    /// Every entry, for metrics.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, &Entry)> {
        self.map.iter().flat_map(|(ns, m)| m.iter().map(move |(r, e)| (ns.as_str(), r.as_str(), e)))
    }

    /// Whether the namespace can take `ask` more. A namespace with no entry fits; an explicit
    /// limit of 0 blocks every positive request.
    pub fn fits(&self, namespace: &str, ask: &Ask<'_>) -> bool {
        let Some(ns) = self.map.get(namespace) else { return true };
        let over = |res: Option<&str>, add: u64, factor: i64| -> bool {
            let Some(e) = res.and_then(|r| ns.get(r)) else { return false };
            let Some(l) = &e.limit else { return false };
            let add = i64::try_from(add).unwrap_or(i64::MAX);
            add > 0 && e.used.saturating_add(add) > l.value.saturating_mul(factor)
        };
        let f = if ask.memory_factor > 1 { i64::try_from(ask.memory_factor).unwrap_or(1) } else { 1 };
        !over(ask.memory_resource, ask.mem, f) && !over(ask.cores_resource, ask.cores, 1)
    }
}

/// Reads a ResourceQuota's `spec.hard` entries that name one of `resources` as `limits.<name>`
/// with an integer value.
pub fn hard_limits<'a>(hard: impl IntoIterator<Item = (&'a str, i64)>, resources: &[String]) -> Vec<(String, i64)> {
    hard.into_iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("limits.")?;
            resources.iter().any(|r| r == name).then(|| (name.to_owned(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(mem: u64, cores: u64) -> Ask<'static> {
        Ask {
            memory_resource: Some("nvidia.com/gpumem"),
            cores_resource: Some("nvidia.com/gpucores"),
            memory_factor: 1,
            mem,
            cores,
        }
    }

    #[test]
    fn a_namespace_without_quota_always_fits() {
        let l = Ledger::default();
        assert!(l.fits("ns", &ask(1 << 30, 1000)));
    }

    #[test]
    fn memory_and_core_limits_bound_usage_plus_request() {
        // HAMi quota.go: Used + request > Limit fails.
        let mut l = Ledger::default();
        l.set_quota("ns", "q", &[("nvidia.com/gpumem".into(), 8000), ("nvidia.com/gpucores".into(), 100)]);
        l.add("ns", "nvidia.com/gpumem", 6000);
        assert!(l.fits("ns", &ask(2000, 0)));
        assert!(!l.fits("ns", &ask(2001, 0)));
        assert!(l.fits("ns", &ask(0, 100)));
        assert!(!l.fits("ns", &ask(0, 101)));
    }

    #[test]
    fn a_zero_limit_blocks_positive_requests_only() {
        let mut l = Ledger::default();
        l.set_quota("ns", "q", &[("nvidia.com/gpumem".into(), 0)]);
        assert!(!l.fits("ns", &ask(1, 0)));
        assert!(l.fits("ns", &ask(0, 30)));
    }

    #[test]
    fn memory_factor_scales_the_limit() {
        // Cambricon: limits in 256 MiB units, usage in MiB.
        let mut l = Ledger::default();
        l.set_quota("ns", "q", &[("cambricon.com/mlu.smlu.vmemory".into(), 4)]);
        let a = |mem| Ask {
            memory_resource: Some("cambricon.com/mlu.smlu.vmemory"),
            cores_resource: None,
            memory_factor: 256,
            mem,
            cores: 0,
        };
        assert!(l.fits("ns", &a(1024)));
        assert!(!l.fits("ns", &a(1025)));
    }

    #[test]
    fn deleting_a_quota_clears_limits_but_keeps_usage() {
        let mut l = Ledger::default();
        l.set_quota("ns", "q", &[("nvidia.com/gpumem".into(), 10)]);
        l.add("ns", "nvidia.com/gpumem", 10);
        l.remove_quota("ns", "q");
        assert!(l.fits("ns", &ask(100, 0)));
        assert_eq!(l.entry("ns", "nvidia.com/gpumem").map(|e| e.used), Some(10));
    }

    #[test]
    fn usage_never_goes_negative() {
        let mut l = Ledger::default();
        l.add("ns", "r", 5);
        l.add("ns", "r", -50);
        assert_eq!(l.entry("ns", "r").map(|e| e.used), Some(0));
    }

    #[test]
    fn only_integer_limits_keys_of_known_resources_count() {
        let res = vec!["nvidia.com/gpumem".to_owned()];
        let h = hard_limits(
            [("limits.nvidia.com/gpumem", 5), ("requests.nvidia.com/gpumem", 7), ("limits.nvidia.com/gpu", 2)],
            &res,
        );
        assert_eq!(h, vec![("nvidia.com/gpumem".to_owned(), 5)]);
    }
}
