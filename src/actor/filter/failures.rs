//! The candidates a filter found unfit, kept unrendered until someone asks: a no-fit answer's
//! `FailedNodes`, HAMi's per-reason Events, the log's summary, the simulator's detail.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::actor::filter::tables::Listed;
use crate::model::NodeName;
use crate::sched::{NodeSnapshot, Rejection, failure_text};

/// The summary's words for what is not a device reason.
pub const NODE_UNREGISTERED: &str = "node unregistered";
pub const NODE_USAGE_UNAVAILABLE: &str = "node usage unavailable";
pub const NODE_LOCKED: &str = "node lock contention";
pub const GROUP_NOT_PLACED: &str = "pod group not placed whole";

/// Candidates that did not fit, with what is needed to render their reasons. Rendering builds
/// text, so it happens only when someone asks (a no-fit answer, the simulator, a debug log).
#[derive(Clone, Debug, Default)]
pub struct Failures {
    nodes: Vec<(NodeName, Rejection, Option<Arc<NodeSnapshot>>)>,
    /// Candidates of a resolved list, by their place in it (no name or snapshot copied per node).
    listed: Option<Listed>,
    /// A pod group's reason, the same for every candidate (the group waits for members, or does
    /// not fit together): the nodes and the text that names the group and what is missing.
    group: Option<(Vec<NodeName>, Arc<str>)>,
    /// `summary`, once asked for (the log and the console both want it).
    summary: std::sync::OnceLock<String>,
}

impl Failures {
    /// The candidates of a resolved list that did not fit.
    pub(in crate::actor) fn of_list(listed: Listed) -> Failures {
        Failures { listed: Some(listed), ..Failures::default() }
    }

    /// Every candidate refused for one reason of the pod's group.
    pub fn of_group(nodes: Vec<NodeName>, why: Arc<str>) -> Failures {
        Failures { group: Some((nodes, why)), ..Failures::default() }
    }

    /// The group's reason, when the pod was refused for its group.
    pub fn group_reason(&self) -> Option<&str> {
        self.group.as_ref().map(|(_, w)| &**w)
    }

    /// The nodes pushed one by one (not those of a resolved list): the ones that refused a
    /// reservation after their snapshot said they fit, among others.
    pub fn named(&self) -> Vec<&NodeName> {
        self.nodes.iter().map(|(n, ..)| n).collect()
    }

    pub fn push(&mut self, node: NodeName, rejection: Rejection, snap: Option<Arc<NodeSnapshot>>) {
        self.nodes.push((node, rejection, snap));
        self.summary = std::sync::OnceLock::new();
    }
    /// HAMi's reason, then the detail, per node: for people (logs, the simulator).
    pub fn render(&self) -> BTreeMap<String, String> {
        self.texts(true)
    }
    /// What `FailedNodes` carries per node: HAMi's reason as HAMi writes it (see
    /// [`Rejection::answer`]).
    pub fn hami(&self) -> BTreeMap<String, String> {
        // Most failed nodes share a few texts (`8/8 CardInsufficientMemory`): each distinct one is
        // written once and copied for the others.
        let mut written: Vec<(Rejection, String)> = Vec::new();
        let mut text = |r: &Rejection, snap: &dyn Fn() -> Option<Arc<NodeSnapshot>>| -> String {
            if let Some((_, t)) = written.iter().find(|(w, _)| w.same_answer(r)) {
                return t.clone();
            }
            let t = failure_text(r, snap().as_deref(), false);
            if *r != Rejection::NodeUnusable {
                written.push((*r, t.clone()));
            }
            t
        };
        let mut out = Vec::with_capacity(self.len());
        for (n, r, s) in &self.nodes {
            out.push((n.to_string(), text(r, &|| s.clone())));
        }
        for (n, cell, r) in self.listed.iter().flat_map(|l| l.entries()) {
            // Only an unusable node's text reads its snapshot.
            let snap = || cell.filter(|_| r == Rejection::NodeUnusable).map(|c| c.load());
            out.push((n.to_string(), text(&r, &snap)));
        }
        if let Some((nodes, why)) = &self.group {
            out.extend(nodes.iter().map(|n| (n.to_string(), why.to_string())));
        }
        // Built at once from the sorted pairs rather than by an insertion per node; a node
        // named twice keeps its last text, as inserting would.
        out.into_iter().collect()
    }
    /// The nodes that failed for their devices (not unregistered, unusable, locked or silent),
    /// sorted: where releasing devices could make room.
    pub fn device_nodes(&self) -> Vec<NodeName> {
        let devices = |r: &Rejection| matches!(r, Rejection::Devices(_) | Rejection::NodeInsufficientDevice { .. });
        let listed = self.listed.iter().flat_map(|l| l.reasons()).filter(|(_, r)| devices(r)).map(|(n, _)| n.clone());
        let mut v: Vec<NodeName> =
            self.nodes.iter().filter(|(_, r, _)| devices(r)).map(|(n, ..)| n.clone()).chain(listed).collect();
        v.sort();
        v.dedup();
        v
    }
    /// The first `k` nodes' reasons with their detail, in the order they were found.
    pub fn first(&self, k: usize) -> Vec<(String, String)> {
        self.all_texts(true).take(k).collect()
    }
    fn texts(&self, detail: bool) -> BTreeMap<String, String> {
        self.all_texts(detail).collect()
    }
    /// Every failed node's text, in the order they were found.
    fn all_texts(&self, detail: bool) -> impl Iterator<Item = (String, String)> + '_ {
        let listed = self.listed.iter().flat_map(move |l| l.texts(detail));
        let group = self.group.iter().flat_map(|(nodes, why)| nodes.iter().map(|n| (n.to_string(), why.to_string())));
        self.nodes
            .iter()
            .map(move |(n, r, s)| (n.to_string(), failure_text(r, s.as_deref(), detail)))
            .chain(listed)
            .chain(group)
    }
    /// The nodes each device reason was counted on, by reason word and sorted by name: what
    /// HAMi's per-reason `FilteringFailed` Events name. Rejections without a device count
    /// (`NodeInsufficientDevice`, `node unregistered`) have none, as in HAMi.
    pub fn nodes_by_reason(&self) -> BTreeMap<&'static str, Vec<&str>> {
        let mut by: BTreeMap<&'static str, Vec<&str>> = BTreeMap::new();
        let named = self.nodes.iter().map(|(n, r, _)| (n, *r));
        for (n, r) in named.chain(self.listed.iter().flat_map(|l| l.reasons())) {
            if let Rejection::Devices(t) = r {
                for (reason, _) in t.items() {
                    by.entry(reason.as_str()).or_default().push(n.as_str());
                }
            }
        }
        for nodes in by.values_mut() {
            nodes.sort_unstable();
            nodes.dedup();
        }
        by
    }
    /// One line for a log: on how many nodes each reason was counted, most first, e.g.
    /// `3 CardInsufficientMemory, 1 node unregistered`.
    pub fn summary(&self) -> String {
        self.summary.get_or_init(|| self.count_reasons()).clone()
    }
    fn count_reasons(&self) -> String {
        self.nodes_per_reason().iter().map(|(r, n)| format!("{n} {r}")).collect::<Vec<_>>().join(", ")
    }
    /// On how many nodes each reason was counted, most first (equal counts in name order).
    pub fn nodes_per_reason(&self) -> Vec<(&'static str, usize)> {
        let mut by: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut add = |r: &Rejection| match r {
            Rejection::Devices(t) => t.items().for_each(|(reason, _)| *by.entry(reason.as_str()).or_default() += 1),
            Rejection::NodeInsufficientDevice { .. } => *by.entry("NodeInsufficientDevice").or_default() += 1,
            Rejection::NodeUnregistered | Rejection::NodeUnusable => *by.entry(NODE_UNREGISTERED).or_default() += 1,
            Rejection::Timeout => *by.entry(NODE_USAGE_UNAVAILABLE).or_default() += 1,
            Rejection::NodeLocked => *by.entry(NODE_LOCKED).or_default() += 1,
        };
        for (_, r, _) in &self.nodes {
            add(r);
        }
        for (_, r) in self.listed.iter().flat_map(|l| l.reasons()) {
            add(&r);
        }
        if let Some((nodes, _)) = &self.group {
            *by.entry(GROUP_NOT_PLACED).or_default() += nodes.len();
        }
        let mut counts: Vec<(&str, usize)> = by.into_iter().collect();
        // Stable: equal counts stay in name order.
        counts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        counts
    }
    /// The rejections of every failed node, summed.
    pub fn counts(&self) -> crate::metrics::RejectionCounts {
        let mut c = crate::metrics::RejectionCounts::default();
        for (_, r, _) in &self.nodes {
            c.add(r);
        }
        for (_, r) in self.listed.iter().flat_map(|l| l.reasons()) {
            c.add(&r);
        }
        if let Some((nodes, _)) = &self.group {
            c.group += nodes.len() as u64;
        }
        c
    }
    pub fn len(&self) -> usize {
        self.nodes.len() + self.listed.as_ref().map_or(0, Listed::len) + self.group.as_ref().map_or(0, |(n, _)| n.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PartialEq for Failures {
    fn eq(&self, other: &Self) -> bool {
        self.render() == other.render()
    }
}
