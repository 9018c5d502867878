//! `PackedPod`: a cached pod as one allocation. A `PodView` spreads a running pod over some thirty
//! small allocations (every name, annotation value, quantity and list its own), about 1.5 KiB a
//! pod; a cluster's backend holds one per pod for as long as the pod lives. Packed, the same
//! fields take one buffer of about a third of that: strings length-prefixed, map keys written as
//! the code of their interned copy (see `vec_map`), absent fields as one byte.
//!
//! Nothing on the filter path reads a packed pod. Binds, lock checks and watch bookkeeping unpack
//! the one pod they need (a few microseconds) or read the leading fields without unpacking.

use std::sync::Arc;

use super::bytes::{Reader, Writer};
use super::pod::{
    ContainerStateView, ContainerStatusView, ContainerView, EnvVarView, ObjectMetaView, OwnerRefView, PodSpecView,
    PodStatusView, PodView, QuantityText, ResourcesView, SchedulingGroupView, SecurityContextView, TerminatedView,
};
use super::vec_map::{self, VecMap};

/// A pod's fields packed into one buffer. Namespace, name, uid, resource version and node name
/// come first, so they read without unpacking the rest.
#[derive(Clone, PartialEq, Eq)]
pub struct PackedPod(Box<[u8]>);

impl std::fmt::Debug for PackedPod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedPod").field("bytes", &self.0.len()).field("pod", &self.unpack()).finish()
    }
}

impl PackedPod {
    pub fn pack(p: &PodView) -> PackedPod {
        // Every field by name, with no `..`: a field added to the view fails to compile here
        // until it is packed too.
        let PodView {
            metadata:
                ObjectMetaView {
                    name,
                    namespace,
                    uid,
                    annotations,
                    labels,
                    deletion_timestamp,
                    resource_version,
                    owner_references,
                },
            spec:
                PodSpecView {
                    containers,
                    init_containers,
                    node_name,
                    scheduler_name,
                    scheduling_group,
                    priority,
                    preemption_policy,
                },
            status: PodStatusView { phase, start_time, init_container_statuses },
        } = p;
        let mut w = Writer(Vec::with_capacity(256));
        w.str(namespace);
        w.str(name);
        w.str(uid);
        w.opt_str(resource_version.as_deref());
        w.opt_str(node_name.as_deref());
        w.map(annotations, |w, v| w.str(v));
        w.map(labels, |w, v| w.str(v));
        w.opt_str(deletion_timestamp.as_deref());
        w.list(containers, Writer::container);
        w.list(init_containers, Writer::container);
        w.opt_str(scheduler_name.as_deref());
        match scheduling_group {
            None => w.byte(0),
            Some(SchedulingGroupView { pod_group_name }) => {
                w.byte(1);
                w.opt_str(pod_group_name.as_deref());
            }
        }
        w.opt_str(phase.as_deref());
        w.list(init_container_statuses, |w, s| {
            let ContainerStatusView { name, state: ContainerStateView { terminated } } = s;
            w.str(name);
            match terminated {
                None => w.byte(0),
                Some(TerminatedView { exit_code }) => {
                    w.byte(1);
                    // Zig-zag, so small negative codes stay one byte.
                    let e = *exit_code;
                    w.varint(u64::from(((e << 1) ^ (e >> 31)) as u32));
                }
            }
        });
        match priority {
            None => w.byte(0),
            Some(p) => {
                w.byte(1);
                w.varint(u64::from(((p << 1) ^ (p >> 31)) as u32));
            }
        }
        w.opt_str(preemption_policy.as_deref());
        w.opt_str(start_time.as_deref());
        w.list(owner_references, |w, o| {
            let OwnerRefView { kind, name, uid, controller } = o;
            w.str(kind);
            w.str(name);
            w.str(uid);
            w.byte(match controller {
                None => 0,
                Some(false) => 1,
                Some(true) => 2,
            });
        });
        PackedPod(w.0.into_boxed_slice())
    }

    /// The pod as a view again; `None` only if the buffer is not one `pack` wrote.
    pub fn unpack(&self) -> Option<PodView> {
        let mut r = Reader(&self.0);
        let namespace = r.str()?.to_owned();
        let name = r.str()?.to_owned();
        let uid = r.str()?.to_owned();
        let resource_version = r.opt_str()?.map(str::to_owned);
        let node_name = r.opt_str()?.map(str::to_owned);
        let annotations = r.map(|r| r.str().map(str::to_owned))?;
        let labels = r.map(|r| r.str().map(str::to_owned))?;
        let deletion_timestamp = r.opt_str()?.map(str::to_owned);
        let containers = r.list(Reader::container)?;
        let init_containers = r.list(Reader::container)?;
        let scheduler_name = r.opt_str()?.map(str::to_owned);
        let scheduling_group = match r.byte()? {
            0 => None,
            1 => Some(SchedulingGroupView { pod_group_name: r.opt_str()?.map(str::to_owned) }),
            _ => return None,
        };
        let phase = r.opt_str()?.map(str::to_owned);
        let init_container_statuses = r.list(|r| {
            let name = r.str()?.to_owned();
            let terminated = match r.byte()? {
                0 => None,
                1 => {
                    let z = u32::try_from(r.varint()?).ok()?;
                    Some(TerminatedView { exit_code: ((z >> 1) as i32) ^ -((z & 1) as i32) })
                }
                _ => return None,
            };
            Some(ContainerStatusView { name, state: ContainerStateView { terminated } })
        })?;
        let priority = match r.byte()? {
            0 => None,
            1 => {
                let z = u32::try_from(r.varint()?).ok()?;
                Some(((z >> 1) as i32) ^ -((z & 1) as i32))
            }
            _ => return None,
        };
        let preemption_policy = r.opt_str()?.map(str::to_owned);
        let start_time = r.opt_str()?.map(str::to_owned);
        let owner_references = r.list(|r| {
            let (kind, name, uid) = (r.str()?.to_owned(), r.str()?.to_owned(), r.str()?.to_owned());
            let controller = match r.byte()? {
                0 => None,
                1 => Some(false),
                2 => Some(true),
                _ => return None,
            };
            Some(OwnerRefView { kind, name, uid, controller })
        })?;
        if !r.0.is_empty() {
            return None;
        }
        Some(PodView {
            metadata: ObjectMetaView {
                name,
                namespace,
                uid,
                annotations,
                labels,
                deletion_timestamp,
                resource_version,
                owner_references,
            },
            spec: PodSpecView {
                containers,
                init_containers,
                node_name,
                scheduler_name,
                scheduling_group,
                priority,
                preemption_policy,
            },
            status: PodStatusView { phase, start_time, init_container_statuses },
        })
    }

    /// The pod with its annotations and labels changed by `f`: only those two maps are read and
    /// written again, the bytes before and after them are copied as they are (a scheduler's patch
    /// touches nothing else). `None` only if the buffer is not one `pack` wrote.
    pub fn with_meta(&self, f: impl FnOnce(&mut VecMap<String>, &mut VecMap<String>)) -> Option<PackedPod> {
        let (_, mut r) = self.head_and_rest()?;
        let head = self.0.len() - r.0.len();
        let mut annotations = r.map(|r| r.str().map(str::to_owned))?;
        let mut labels = r.map(|r| r.str().map(str::to_owned))?;
        let tail = r.0;
        f(&mut annotations, &mut labels);
        let mut w = Writer(Vec::with_capacity(self.0.len() + 256));
        w.0.extend_from_slice(&self.0[..head]);
        w.map(&annotations, |w, v| w.str(v));
        w.map(&labels, |w, v| w.str(v));
        w.0.extend_from_slice(tail);
        Some(PackedPod(w.0.into_boxed_slice()))
    }

    /// The leading fields, read without unpacking.
    fn head(&self) -> Option<Head<'_>> {
        self.head_and_rest().map(|(h, _)| h)
    }

    /// The leading fields, and a reader at the annotations that follow them.
    fn head_and_rest(&self) -> Option<(Head<'_>, Reader<'_>)> {
        let mut r = Reader(&self.0);
        let head = Head {
            namespace: r.str()?,
            name: r.str()?,
            uid: r.str()?,
            resource_version: r.opt_str()?,
            node_name: r.opt_str()?,
        };
        Some((head, r))
    }

    pub fn namespace(&self) -> &str {
        self.head().map_or("", |h| h.namespace)
    }
    pub fn name(&self) -> &str {
        self.head().map_or("", |h| h.name)
    }
    pub fn uid(&self) -> &str {
        self.head().map_or("", |h| h.uid)
    }
    pub fn resource_version(&self) -> Option<&str> {
        self.head().and_then(|h| h.resource_version)
    }
    /// `spec.nodeName`, when set and not empty.
    pub fn node_name(&self) -> Option<&str> {
        self.head().and_then(|h| h.node_name).filter(|n| !n.is_empty())
    }

    /// One annotation, found by walking the packed map (no copy of the pod).
    pub fn annotation(&self, key: &str) -> Option<&str> {
        let (_, mut r) = self.head_and_rest()?;
        for _ in 0..r.varint()? {
            let found = match r.key_ref()? {
                KeyRef::Code(c) => vec_map::key_of_code(c).is_some_and(|k| &*k == key),
                KeyRef::Text(t) => t == key,
            };
            let v = r.str()?;
            if found {
                return Some(v);
            }
        }
        None
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&PodView> for PackedPod {
    fn from(p: &PodView) -> Self {
        PackedPod::pack(p)
    }
}

struct Head<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
    resource_version: Option<&'a str>,
    node_name: Option<&'a str>,
}

impl Writer {
    /// A key's code plus one, or 0 and the key itself when it has no code.
    fn key(&mut self, k: &str) {
        match vec_map::key_code(k) {
            Some(c) => self.varint(u64::from(c) + 1),
            None => {
                self.byte(0);
                self.str(k);
            }
        }
    }
    fn map<V>(&mut self, m: &VecMap<V>, mut value: impl FnMut(&mut Self, &V)) {
        self.varint(m.len() as u64);
        for (k, v) in m {
            self.key(k);
            value(self, v);
        }
    }
    fn container(&mut self, c: &ContainerView) {
        let ContainerView {
            name,
            resources: ResourcesView { limits, requests },
            restart_policy,
            security_context,
            env,
        } = c;
        self.str(name);
        self.map(limits, |w, q| w.str(&q.0));
        self.map(requests, |w, q| w.str(&q.0));
        self.opt_str(restart_policy.as_deref());
        self.byte(match security_context {
            None => 0,
            Some(SecurityContextView { privileged: None }) => 1,
            Some(SecurityContextView { privileged: Some(false) }) => 2,
            Some(SecurityContextView { privileged: Some(true) }) => 3,
        });
        self.list(env, |w, e| w.str(&e.name));
    }
}

enum KeyRef<'a> {
    Code(u32),
    Text(&'a str),
}

impl<'a> Reader<'a> {
    fn key_ref(&mut self) -> Option<KeyRef<'a>> {
        match self.varint()? {
            0 => self.str().map(KeyRef::Text),
            c => u32::try_from(c - 1).ok().map(KeyRef::Code),
        }
    }
    fn key(&mut self) -> Option<Arc<str>> {
        match self.key_ref()? {
            KeyRef::Code(c) => vec_map::key_of_code(c),
            KeyRef::Text(t) => Some(vec_map::interned(t)),
        }
    }
    fn map<V>(&mut self, mut value: impl FnMut(&mut Self) -> Option<V>) -> Option<VecMap<V>> {
        let n = self.count()?;
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.key()?;
            entries.push((k, value(self)?));
        }
        Some(VecMap::from_entries(entries))
    }
    fn container(&mut self) -> Option<ContainerView> {
        let name = self.str()?.to_owned();
        let limits = self.map(|r| r.str().map(|s| QuantityText(s.to_owned())))?;
        let requests = self.map(|r| r.str().map(|s| QuantityText(s.to_owned())))?;
        let restart_policy = self.opt_str()?.map(str::to_owned);
        let security_context = match self.byte()? {
            0 => None,
            1 => Some(SecurityContextView { privileged: None }),
            2 => Some(SecurityContextView { privileged: Some(false) }),
            3 => Some(SecurityContextView { privileged: Some(true) }),
            _ => return None,
        };
        let env = self.list(|r| r.str().map(|s| EnvVarView { name: s.to_owned() }))?;
        Some(ContainerView {
            name,
            resources: ResourcesView { limits, requests },
            restart_policy,
            security_context,
            env,
        })
    }
}

#[cfg(test)]
mod tests;
