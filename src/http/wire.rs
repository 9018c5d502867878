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

/// POST /filter body.
#[derive(Debug, Default)]
pub struct ExtenderArgs<'a> {
    pub pod: Option<PodView>,
    pub nodes: Option<NodeList<'a>>,
    pub node_names: Option<Vec<NameRef<'a>>>,
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
