//! Reading a cluster file (`kubectl get nodes,pods,resourcequotas -A -o json`, or multi-document
//! YAML) into nodes, pods, quotas and pod groups (and, for `serve`, DeviceClasses), one object at a time: a JSON file is parsed as it is read,
//! and each pod can be packed as soon as it is parsed, so neither the file nor its pods unpacked
//! sit in memory whole.

use serde_json::Value;

use crate::model::PodView;
use crate::model::group::{GroupError, PodGroupObject};

pub use super::BudgetObject;
use crate::model::packed::PackedPod;
use crate::model::pod::NodeView;
use crate::port::dra::DeviceClassView;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("not valid YAML: {0}")]
    Yaml(#[source] serde_yaml::Error),
    #[error("object {index} ({kind}): {source}")]
    Object {
        index: usize,
        kind: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Parses Kubernetes objects from JSON (one object, a List, or an array) or multi-document YAML,
/// flattening `List` objects. Kept for callers that want raw objects; the cluster loader streams.
pub fn parse_objects(text: &str) -> std::result::Result<Vec<Value>, LoadError> {
    let mut out = Vec::new();
    for_each_object(text, &mut |v| {
        out.push(v);
        Ok(())
    })?;
    Ok(out)
}

/// Calls `f` with every object of the file, one at a time: a `List`'s items are streamed, so a
/// large cluster file never sits in memory as one JSON tree.
fn for_each_object(
    text: &str,
    f: &mut dyn FnMut(Value) -> std::result::Result<(), LoadError>,
) -> std::result::Result<(), LoadError> {
    let t = text.trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        return json_objects(serde_json::Deserializer::from_str(text), f);
    }
    for doc in serde_yaml::Deserializer::from_str(text) {
        match serde::de::DeserializeSeed::deserialize(Objects { f: &mut *f, err: None }, doc) {
            Ok(Some(e)) => return Err(e),
            Ok(None) => {}
            Err(e) => return Err(LoadError::Yaml(e)),
        }
    }
    Ok(())
}

/// `for_each_object` over JSON from any source (a string, or a file as it is read).
fn json_objects<'de, R: serde_json::de::Read<'de>>(
    mut d: serde_json::Deserializer<R>,
    f: &mut dyn FnMut(Value) -> std::result::Result<(), LoadError>,
) -> std::result::Result<(), LoadError> {
    match serde::de::DeserializeSeed::deserialize(Objects { f, err: None }, &mut d) {
        Ok(Some(e)) => Err(e),
        Ok(None) => d.end().map_err(LoadError::Json),
        Err(e) => Err(LoadError::Json(e)),
    }
}

/// Flattens a value that is itself a `List` (or an array) into its items.
fn emit(
    v: Value,
    f: &mut dyn FnMut(Value) -> std::result::Result<(), LoadError>,
) -> std::result::Result<(), LoadError> {
    match v {
        Value::Array(a) => a.into_iter().try_for_each(|x| emit(x, f)),
        Value::Object(mut m)
            if m.get("items").is_some_and(Value::is_array)
                && m.get("kind").and_then(Value::as_str).is_none_or(|k| k.ends_with("List")) =>
        {
            match m.remove("items") {
                Some(Value::Array(items)) => items.into_iter().try_for_each(|x| emit(x, f)),
                _ => Ok(()),
            }
        }
        Value::Null => Ok(()),
        other => f(other),
    }
}

/// Streams a document: a top-level array's elements and a List's `items` one by one; any other
/// object whole. The first error `f` returns is carried out as `Some`.
struct Objects<'f> {
    f: &'f mut dyn FnMut(Value) -> std::result::Result<(), LoadError>,
    err: Option<LoadError>,
}

struct Items<'a, 'f>(&'a mut Objects<'f>);

impl<'de> serde::de::DeserializeSeed<'de> for Items<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Items<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of Kubernetes objects")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        while let Some(v) = seq.next_element::<Value>()? {
            if self.0.err.is_none()
                && let Err(e) = emit(v, self.0.f)
            {
                self.0.err = Some(e);
            }
        }
        Ok(())
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Objects<'_> {
    type Value = Option<LoadError>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Objects<'_> {
    type Value = Option<LoadError>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Kubernetes object, a List or an array of objects")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, seq: A) -> std::result::Result<Self::Value, A::Error> {
        serde::de::Visitor::visit_seq(Items(&mut self), seq)?;
        Ok(self.err)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let mut rest = serde_json::Map::new();
        let mut streamed = false;
        while let Some(k) = map.next_key::<String>()? {
            if k == "items" {
                map.next_value_seed(Items(&mut self))?;
                streamed = true;
            } else {
                let v: Value = map.next_value()?;
                rest.insert(k, v);
            }
        }
        let is_list = rest.get("kind").and_then(Value::as_str).is_none_or(|k| k.ends_with("List"));
        if !(streamed && is_list)
            && self.err.is_none()
            && let Err(e) = emit(Value::Object(rest), self.f)
        {
            self.err = Some(e);
        }
        Ok(self.err)
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
}

/// A ResourceQuota as the quota ledger needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaObject {
    pub namespace: String,
    pub name: String,
    pub hard: Vec<(String, i64)>,
}

/// The objects of a cluster file, split by kind.
#[derive(Clone, Debug, Default)]
pub struct ClusterObjects {
    pub nodes: Vec<NodeView>,
    pub pods: Vec<PodView>,
    pub quotas: Vec<QuotaObject>,
    /// PodGroups of the three kinds with objects (native, coscheduling, Volcano).
    pub groups: Vec<PodGroupObject>,
    pub budgets: Vec<BudgetObject>,
}

/// A cluster file's objects with each pod packed as soon as it is read, so a large cluster's
/// pods never sit in memory unpacked all at once (`serve --cluster-file`).
#[derive(Clone, Debug, Default)]
pub struct PackedCluster {
    pub nodes: Vec<NodeView>,
    pub pods: Vec<PackedPod>,
    pub quotas: Vec<QuotaObject>,
    pub groups: Vec<PodGroupObject>,
    pub budgets: Vec<BudgetObject>,
    /// `resource.k8s.io` DeviceClasses, so the simulated cluster reports the ones DRA may serve
    /// a resource name of hami-rs's by.
    pub device_classes: Vec<DeviceClassView>,
}

impl ClusterObjects {
    pub fn parse(text: &str) -> std::result::Result<ClusterObjects, LoadError> {
        ClusterObjects::read(Source::Text(text))
    }

    pub fn load(path: &std::path::Path) -> std::result::Result<ClusterObjects, LoadError> {
        ClusterObjects::read(Source::File(path))
    }

    fn read(source: Source<'_>) -> std::result::Result<ClusterObjects, LoadError> {
        let (mut nodes, mut pods, mut quotas, mut groups) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // DeviceClasses are kept by `serve`'s reading only (see `PackedCluster`).
        let mut ignored = Vec::new();
        let mut budgets = Vec::new();
        let mut sorted = Sorted {
            nodes: &mut nodes,
            quotas: &mut quotas,
            classes: &mut ignored,
            groups: &mut groups,
            budgets: &mut budgets,
        };
        sort_objects(source, &mut sorted, &mut |p| pods.push(p))?;
        Ok(ClusterObjects { nodes, pods, quotas, groups, budgets })
    }
}

impl PackedCluster {
    pub fn parse(text: &str) -> std::result::Result<PackedCluster, LoadError> {
        PackedCluster::read(Source::Text(text))
    }

    pub fn load(path: &std::path::Path) -> std::result::Result<PackedCluster, LoadError> {
        PackedCluster::read(Source::File(path))
    }

    fn read(source: Source<'_>) -> std::result::Result<PackedCluster, LoadError> {
        let (mut nodes, mut pods, mut quotas, mut device_classes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut groups, mut budgets) = (Vec::new(), Vec::new());
        let mut sorted = Sorted {
            nodes: &mut nodes,
            quotas: &mut quotas,
            classes: &mut device_classes,
            groups: &mut groups,
            budgets: &mut budgets,
        };
        sort_objects(source, &mut sorted, &mut |p| pods.push(PackedPod::pack(&p)))?;
        pods.shrink_to_fit();
        Ok(PackedCluster { nodes, pods, quotas, groups, budgets, device_classes })
    }
}

/// Where a cluster's objects are read from.
#[derive(Clone, Copy)]
enum Source<'a> {
    Text(&'a str),
    File(&'a std::path::Path),
}

/// Where each kind of object but pods goes.
struct Sorted<'a> {
    nodes: &'a mut Vec<NodeView>,
    quotas: &'a mut Vec<QuotaObject>,
    classes: &'a mut Vec<DeviceClassView>,
    groups: &'a mut Vec<PodGroupObject>,
    budgets: &'a mut Vec<BudgetObject>,
}

/// Sorts the objects of `source` by kind: nodes, quotas, classes and groups into their lists,
/// each pod to `pod`.
fn sort_objects(
    source: Source<'_>,
    sorted: &mut Sorted<'_>,
    pod: &mut dyn FnMut(PodView),
) -> std::result::Result<(), LoadError> {
    let mut index = 0usize;
    let f = &mut |v| {
        add_object(index, v, sorted, pod)?;
        index += 1;
        Ok(())
    };
    match source {
        Source::Text(text) => for_each_object(text, f),
        Source::File(path) => file_objects(path, f),
    }
}

/// `for_each_object` over a file. JSON is parsed as the file is read, so a large cluster's file
/// (about 90 MiB for 100,000 pods) never sits in memory whole beside what is built from it; YAML
/// is read whole first.
fn file_objects(
    path: &std::path::Path,
    f: &mut dyn FnMut(Value) -> std::result::Result<(), LoadError>,
) -> std::result::Result<(), LoadError> {
    use std::io::{BufRead, Read};
    let err = |source| LoadError::Read { path: path.display().to_string(), source };
    let mut r = std::io::BufReader::with_capacity(1 << 16, std::fs::File::open(path).map_err(err)?);
    // Blank space past the reader's buffer is kept for YAML, which reads the whole text.
    let mut blank = Vec::new();
    let json = loop {
        let buf = r.fill_buf().map_err(err)?;
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => break matches!(buf[i], b'{' | b'['),
            None if buf.is_empty() => break false,
            None => {
                blank.extend_from_slice(buf);
                let n = buf.len();
                r.consume(n);
            }
        }
    };
    if json {
        return json_objects(serde_json::Deserializer::from_reader(r), f);
    }
    let mut text = String::from_utf8(blank).unwrap_or_default();
    r.read_to_string(&mut text).map_err(err)?;
    for_each_object(&text, f)
}

fn add_object(
    index: usize,
    v: Value,
    sorted: &mut Sorted<'_>,
    pod: &mut dyn FnMut(PodView),
) -> std::result::Result<(), LoadError> {
    let Sorted { nodes, quotas, classes, groups, budgets } = sorted;
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("").to_owned();
    let err = |source| LoadError::Object { index, kind: kind.clone(), source };
    match kind.as_str() {
        "Node" => nodes.push(serde_json::from_value(v).map_err(err)?),
        "Pod" => pod(serde_json::from_value(v).map_err(err)?),
        "DeviceClass" => classes.push(serde_json::from_value(v).map_err(err)?),
        "PodDisruptionBudget" => {
            let text = |p: &str| match v.pointer(p) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            };
            let match_labels = v
                .pointer("/spec/selector/matchLabels")
                .and_then(Value::as_object)
                .map(|m| m.iter().filter_map(|(k, x)| Some((k.clone(), x.as_str()?.to_owned()))).collect())
                .unwrap_or_default();
            let meta = |k: &str| v.pointer(&format!("/metadata/{k}")).and_then(Value::as_str).unwrap_or("").to_owned();
            budgets.push(BudgetObject {
                namespace: meta("namespace"),
                name: meta("name"),
                match_labels,
                max_unavailable: text("/spec/maxUnavailable"),
                min_available: text("/spec/minAvailable"),
            });
        }
        "PodGroup" => match PodGroupObject::from_value(&v) {
            Ok(g) => groups.push(g),
            // Another scheduler's PodGroup kind (KAI's, say) is none of hami-rs's business.
            Err(GroupError::Kind(api)) => {
                tracing::debug!(index, api_version = %api, "PodGroup of another kind skipped")
            }
            Err(e) => tracing::warn!(index, error = %e, "PodGroup skipped"),
        },
        "ResourceQuota" => {
            let meta = v.get("metadata");
            let s = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str).unwrap_or("").to_owned();
            let hard = v
                .pointer("/spec/hard")
                .and_then(Value::as_object)
                .map(|h| {
                    h.iter()
                        .filter_map(|(k, q)| {
                            let t = match q {
                                Value::String(s) => s.clone(),
                                Value::Number(n) => n.to_string(),
                                _ => return None,
                            };
                            let n = crate::model::quantity::Quantity::parse(&t).ok()?.as_i64_exact()?;
                            Some((k.clone(), n))
                        })
                        .collect()
                })
                .unwrap_or_default();
            quotas.push(QuotaObject { namespace: s("namespace"), name: s("name"), hard });
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(file: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(file)
    }

    /// What a load gives, in a form two loads can be compared by.
    fn shown(c: &ClusterObjects) -> String {
        format!("{:?}", (&c.nodes, &c.pods, &c.quotas, &c.groups))
    }

    #[test]
    fn a_file_read_as_it_streams_gives_what_its_text_gives() {
        for file in ["cluster.json", "mixed-cluster.json", "pods.yaml", "mixed-pods.yaml"] {
            let text = std::fs::read_to_string(example(file)).expect("example");
            let from_text = ClusterObjects::parse(&text).expect("parses");
            let read = ClusterObjects::load(&example(file)).expect("loads");
            assert!(!read.pods.is_empty() || !read.nodes.is_empty(), "{file}");
            assert_eq!(shown(&read), shown(&from_text), "{file}");
            let packed = PackedCluster::load(&example(file)).expect("loads");
            let unpacked: Vec<PodView> = packed.pods.iter().map(|p| p.unpack().expect("unpacks")).collect();
            assert_eq!(format!("{unpacked:?}"), format!("{:?}", from_text.pods), "{file}");
        }
    }

    #[test]
    fn leading_blank_space_empty_files_and_broken_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).expect("writes");
            p
        };
        // Blank space longer than the reader's buffer before a JSON list.
        let padded = format!(
            "{}{}",
            " \n".repeat(70_000),
            r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"n1"}}]}"#
        );
        let c = ClusterObjects::load(&write("padded.json", &padded)).expect("loads");
        assert_eq!(c.nodes.len(), 1);
        // A file of nothing but blank space goes to the YAML reader, as its text does.
        for (name, text) in [("empty.json", ""), ("blank.yaml", "\n \n")] {
            let loaded = ClusterObjects::load(&write(name, text)).map(|c| shown(&c)).map_err(|e| e.to_string());
            assert_eq!(loaded, ClusterObjects::parse(text).map(|c| shown(&c)).map_err(|e| e.to_string()), "{name}");
        }
        let cut = r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"n1"}},"#;
        assert!(matches!(ClusterObjects::load(&write("cut.json", cut)), Err(LoadError::Json(_))));
        assert!(matches!(PackedCluster::load(&write("trailing.json", "[] []")), Err(LoadError::Json(_))));
        let bad_pod = r#"[{"kind":"Pod","metadata":{"name":7}}]"#;
        assert!(matches!(ClusterObjects::load(&write("bad.json", bad_pod)), Err(LoadError::Object { index: 0, .. })));
        assert!(matches!(ClusterObjects::load(&dir.path().join("missing.json")), Err(LoadError::Read { .. })));
    }
}
