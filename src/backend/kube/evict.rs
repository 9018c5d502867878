//! Evictions for preemption: PodDisruptionBudgets read before choosing victims, and the
//! Eviction API (`policy/v1`), which enforces the budgets again when the victims go.

use std::collections::BTreeMap;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Preconditions};

use crate::backend::{Evicted, PodRef, Result};

use super::{KubeBackend, api_err, is_not_found};

impl KubeBackend {
    pub(super) async fn evict_pod(&self, pod: &PodRef) -> Result<Evicted> {
        let params = EvictParams {
            delete_options: Some(DeleteParams {
                preconditions: (!pod.uid.is_empty())
                    .then(|| Preconditions { uid: Some(pod.uid.clone()), resource_version: None }),
                ..DeleteParams::default()
            }),
            ..EvictParams::default()
        };
        let api = self.pods_api(&pod.namespace);
        match self.call("create", "pods/eviction", api.evict(&pod.name, &params)).await {
            Ok(_) => Ok(Evicted::Requested),
            Err(e) if is_not_found(&e) => Ok(Evicted::Gone),
            Err(e) => Err(api_err(e)),
        }
    }

    pub(super) async fn blocked_by_budgets(&self, pods: &[PodRef]) -> Result<Vec<PodRef>> {
        let mut by_ns: BTreeMap<&str, Vec<&PodRef>> = BTreeMap::new();
        for p in pods {
            by_ns.entry(p.namespace.as_str()).or_default().push(p);
        }
        let mut blocked = Vec::new();
        for (ns, pods) in by_ns {
            let api: Api<PodDisruptionBudget> = Api::namespaced(self.client(), ns);
            let budgets =
                self.call("list", "poddisruptionbudgets", api.list(&ListParams::default())).await.map_err(api_err)?;
            if budgets.items.is_empty() {
                continue;
            }
            // Labels are not cached with the pods: read them for the few victims.
            let mut labelled = Vec::with_capacity(pods.len());
            for p in pods {
                match self.call("get", "pods", self.pods_api(ns).get(&p.name)).await {
                    Ok(pod) => labelled.push((p, pod.metadata.labels.unwrap_or_default())),
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(api_err(e)),
                }
            }
            for b in &budgets.items {
                let Some(sel) = b.spec.as_ref().and_then(|s| s.selector.as_ref()) else { continue };
                let allowed = b.status.as_ref().map_or(0, |s| s.disruptions_allowed.unwrap_or(0));
                let hit: Vec<&PodRef> = labelled.iter().filter(|(_, l)| selects(sel, l)).map(|(p, _)| *p).collect();
                if hit.len() as i64 > i64::from(allowed) {
                    blocked.extend(hit.into_iter().cloned());
                }
            }
        }
        blocked.sort_by(|a, b| a.uid.cmp(&b.uid));
        blocked.dedup_by(|a, b| a.uid == b.uid);
        Ok(blocked)
    }
}

/// Whether a label selector selects these labels (an empty selector selects every pod, as a
/// `policy/v1` budget's does).
pub(crate) fn selects(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = sel.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    let by_exprs = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            // An operator this version does not know selects nothing: the pod is kept.
            _ => false,
        }
    });
    by_labels && by_exprs
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn selectors_match_as_kubernetes_does() {
        let pod = labels(&[("app", "batch"), ("tier", "low")]);
        let cases: Vec<(LabelSelector, bool)> = vec![
            (LabelSelector::default(), true),
            (LabelSelector { match_labels: Some(labels(&[("app", "batch")])), ..Default::default() }, true),
            (LabelSelector { match_labels: Some(labels(&[("app", "web")])), ..Default::default() }, false),
            (
                LabelSelector {
                    match_expressions: Some(vec![expr("tier", "In", &["low", "mid"])]),
                    ..Default::default()
                },
                true,
            ),
            (
                LabelSelector { match_expressions: Some(vec![expr("tier", "NotIn", &["low"])]), ..Default::default() },
                false,
            ),
            (LabelSelector { match_expressions: Some(vec![expr("gpu", "NotIn", &["a"])]), ..Default::default() }, true),
            (LabelSelector { match_expressions: Some(vec![expr("app", "Exists", &[])]), ..Default::default() }, true),
            (
                LabelSelector { match_expressions: Some(vec![expr("app", "DoesNotExist", &[])]), ..Default::default() },
                false,
            ),
            (LabelSelector { match_expressions: Some(vec![expr("app", "Gt", &["1"])]), ..Default::default() }, false),
            (
                LabelSelector {
                    match_labels: Some(labels(&[("app", "batch")])),
                    match_expressions: Some(vec![expr("tier", "In", &["high"])]),
                },
                false,
            ),
        ];
        for (sel, want) in cases {
            assert_eq!(selects(&sel, &pod), want, "{sel:?}");
        }
    }
}
