//! Serde mirrors of kube-scheduler's extender v1 types. Field names are the Go names; input keys
//! match case-insensitively, as Go's decoder does; output always carries every field, nulls
//! included. Node names borrow from the request body when they can.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::model::PodView;

/// A node name, borrowed from the body unless the JSON string had escapes.
#[derive(Debug, Deserialize, PartialEq)]
pub struct NameRef<'a>(#[serde(borrow)] pub Cow<'a, str>);

/// `Nodes` in simulation mode: the NodeList's items kept raw so the chosen one is echoed as sent.
#[derive(Debug, Default)]
pub struct NodeList<'a> {
    pub items: Vec<&'a RawValue>,
}

/// POST /filter body. `NodeNames` is kept as the array's text: kube-scheduler sends the same
/// list pod after pod, and a list the engine has seen in that text is not read again.
#[derive(Debug, Default)]
pub struct ExtenderArgs<'a> {
    pub pod: Option<PodView>,
    pub nodes: Option<NodeList<'a>>,
    pub node_names: Option<&'a RawValue>,
}

/// The names of a `NodeNames` array.
pub fn node_names(raw: &RawValue) -> Result<Vec<Cow<'_, str>>, serde_json::Error> {
    let names: Vec<NameRef<'_>> = serde_json::from_str(raw.get())?;
    Ok(names.into_iter().map(|n| n.0).collect())
}

/// A map key compared case-insensitively against the Go field names.
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl Key<'_> {
    fn is(&self, name: &str) -> bool {
        self.0.eq_ignore_ascii_case(name)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for NodeList<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = NodeList<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a NodeList object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<NodeList<'a>, A::Error> {
                let mut out = NodeList::default();
                while let Some(k) = m.next_key::<Key<'de>>()? {
                    if k.is("items") {
                        out.items = m.next_value::<Option<Vec<&'a RawValue>>>()?.unwrap_or_default();
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for ExtenderArgs<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = ExtenderArgs<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an ExtenderArgs object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<ExtenderArgs<'a>, A::Error> {
                let mut out = ExtenderArgs::default();
                while let Some(k) = m.next_key::<Key<'de>>()? {
                    if k.is("Pod") {
                        out.pod = m.next_value()?;
                    } else if k.is("Nodes") {
                        out.nodes = m.next_value()?;
                    } else if k.is("NodeNames") {
                        out.node_names = m.next_value()?;
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// POST /filter answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ExtenderFilterResult<'a> {
    pub nodes: Option<Box<RawValue>>,
    pub node_names: Option<Vec<Cow<'a, str>>>,
    pub failed_nodes: Option<BTreeMap<String, String>>,
    pub failed_and_unresolvable_nodes: Option<BTreeMap<String, String>>,
    pub error: String,
}

impl<'a> ExtenderFilterResult<'a> {
    pub fn error(msg: impl Into<String>) -> Self {
        ExtenderFilterResult {
            nodes: None,
            node_names: None,
            failed_nodes: None,
            failed_and_unresolvable_nodes: None,
            error: msg.into(),
        }
    }
}

/// One entry of the POST /prioritize answer (kube-scheduler's `HostPriorityList`).
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "PascalCase")]
pub struct HostPriority {
    pub host: String,
    pub score: i64,
}

/// POST /bind body.
#[derive(Debug, Default, PartialEq)]
pub struct ExtenderBindingArgs {
    pub pod_name: String,
    pub pod_namespace: String,
    pub pod_uid: String,
    pub node: String,
}

impl<'de> Deserialize<'de> for ExtenderBindingArgs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ExtenderBindingArgs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an ExtenderBindingArgs object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<ExtenderBindingArgs, A::Error> {
                let mut out = ExtenderBindingArgs::default();
                while let Some(k) = m.next_key::<Key<'de>>()? {
                    let slot = if k.is("PodName") {
                        &mut out.pod_name
                    } else if k.is("PodNamespace") {
                        &mut out.pod_namespace
                    } else if k.is("PodUID") {
                        &mut out.pod_uid
                    } else if k.is("Node") {
                        &mut out.node
                    } else {
                        m.next_value::<IgnoredAny>()?;
                        continue;
                    };
                    *slot = m.next_value::<Option<String>>()?.unwrap_or_default();
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

/// POST /bind answer.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "PascalCase")]
pub struct ExtenderBindingResult {
    pub error: String,
}

/// The victims kube-scheduler proposes on one node (`MetaVictims`), and the answer's per node.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct MetaVictims {
    #[serde(rename = "Pods")]
    pub pods: Vec<MetaPod>,
    #[serde(rename = "NumPDBViolations")]
    pub num_pdb_violations: i64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MetaPod {
    #[serde(rename = "UID")]
    pub uid: String,
}

/// POST /preempt answer: the nodes where the victims free what the pod needs, with the victims.
#[derive(Debug, Serialize, PartialEq)]
pub struct ExtenderPreemptionResult {
    #[serde(rename = "NodeNameToMetaVictims")]
    pub node_name_to_meta_victims: BTreeMap<String, MetaVictims>,
}

/// POST /preempt body: the pod, and per node the UIDs of the victims kube-scheduler proposes,
/// from `NodeNameToMetaVictims` (`nodeCacheCapable`) or else from the pods of
/// `NodeNameToVictims`. Keys are matched case-insensitively, as Go decodes them.
#[derive(Debug, Default, PartialEq)]
pub struct ExtenderPreemptionArgs {
    pub pod: Option<PodView>,
    pub victims: BTreeMap<String, MetaVictims>,
}

impl ExtenderPreemptionArgs {
    pub fn from_slice(body: &[u8]) -> Result<ExtenderPreemptionArgs, serde_json::Error> {
        use serde_json::Value;
        fn field<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
            let m = v.as_object()?;
            m.get(name).or_else(|| m.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
        }
        let bad = |what: &str| <serde_json::Error as de::Error>::custom(what);
        let v: Value = serde_json::from_slice(body)?;
        if !v.is_object() {
            return Err(bad("preemption args must be an object"));
        }
        let pod = match field(&v, "Pod") {
            None | Some(Value::Null) => None,
            Some(p) => Some(PodView::deserialize(p)?),
        };
        let mut victims = BTreeMap::new();
        let meta = field(&v, "NodeNameToMetaVictims").filter(|m| !m.is_null());
        let (map, uid_of): (_, fn(&Value) -> Option<&Value>) = match meta {
            Some(m) => (m, |p| field(p, "UID")),
            None => (field(&v, "NodeNameToVictims").unwrap_or(&Value::Null), |p| {
                field(p, "metadata").and_then(|m| field(m, "uid"))
            }),
        };
        if let Some(nodes) = map.as_object() {
            for (node, vs) in nodes {
                let pods = field(vs, "Pods").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
                let mut out = MetaVictims {
                    pods: Vec::with_capacity(pods.len()),
                    num_pdb_violations: field(vs, "NumPDBViolations").and_then(Value::as_i64).unwrap_or(0),
                };
                for p in pods {
                    let uid = uid_of(p).and_then(Value::as_str).ok_or_else(|| bad("a victim without a UID"))?;
                    out.pods.push(MetaPod { uid: uid.to_owned() });
                }
                victims.insert(node.clone(), out);
            }
        } else if !map.is_null() {
            return Err(bad("the victims must be a map of node names"));
        }
        Ok(ExtenderPreemptionArgs { pod, victims })
    }
}
