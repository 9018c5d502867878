//! In-place edits of a pod's JSON for the admission webhook: limits, requests, env, annotations,
//! runtime class. Vendors mutate through these helpers; the webhook diffs before and after.

use serde_json::{Map, Value};

use super::quantity::Quantity;

/// A mutable view of one container inside a pod's JSON.
pub struct ContainerEdit<'a> {
    pub container: &'a mut Value,
    /// Position in the combined list (init containers first).
    pub index: usize,
    pub is_init: bool,
}

fn obj(v: &mut Value) -> Option<&mut Map<String, Value>> {
    if v.is_null() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut()
}

/// The text of a quantity as JSON carries it (string or bare number).
fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl<'a> ContainerEdit<'a> {
    pub fn name(&self) -> &str {
        self.container.get("name").and_then(Value::as_str).unwrap_or("")
    }

    fn resource(&self, list: &str, name: &str) -> Option<String> {
        self.container.get("resources")?.get(list)?.get(name).and_then(quantity_text)
    }
    pub fn limit(&self, name: &str) -> Option<String> {
        self.resource("limits", name)
    }
    pub fn request(&self, name: &str) -> Option<String> {
        self.resource("requests", name)
    }
    /// The limit, else the request.
    pub fn quantity(&self, name: &str) -> Option<String> {
        self.limit(name).or_else(|| self.request(name))
    }
    pub fn has_limit(&self, name: &str) -> bool {
        self.limit(name).is_some()
    }
    pub fn has_any(&self, name: &str) -> bool {
        self.quantity(name).is_some()
    }
    /// Parsed limit-else-request; `Err` carries the raw text when it does not parse.
    pub fn parsed(&self, name: &str) -> Option<Result<Quantity, String>> {
        self.quantity(name).map(|t| Quantity::parse(&t).map_err(|_| t))
    }
    pub fn parsed_limit(&self, name: &str) -> Option<Result<Quantity, String>> {
        self.limit(name).map(|t| Quantity::parse(&t).map_err(|_| t))
    }

    fn set_resource(&mut self, list: &str, name: &str, value: &str) {
        let Some(c) = obj(self.container) else { return };
        let res = c.entry("resources").or_insert(Value::Null);
        let Some(res) = obj(res) else { return };
        let l = res.entry(list).or_insert(Value::Null);
        if let Some(l) = obj(l) {
            l.insert(name.to_owned(), Value::String(value.to_owned()));
        }
    }
    pub fn set_limit(&mut self, name: &str, value: &str) {
        self.set_resource("limits", name, value);
    }
    pub fn set_request(&mut self, name: &str, value: &str) {
        self.set_resource("requests", name, value);
    }

    pub fn has_env(&self, name: &str) -> bool {
        self.container
            .get("env")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|e| e.get("name").and_then(Value::as_str) == Some(name)))
    }
    pub fn push_env(&mut self, name: &str, value: &str) {
        let Some(c) = obj(self.container) else { return };
        let env = c.entry("env").or_insert(Value::Array(Vec::new()));
        if env.is_null() {
            *env = Value::Array(Vec::new());
        }
        if let Some(a) = env.as_array_mut() {
            a.push(serde_json::json!({"name": name, "value": value}));
        }
    }
}

/// Pod-level edits (annotations, runtime class) collected while vendors mutate containers.
#[derive(Default, Debug, Clone, PartialEq)]
pub struct PodEdits {
    pub annotations: Vec<(String, String)>,
    pub runtime_class_name: Option<String>,
}

/// What a vendor can see of the pod while mutating one container.
pub struct PodContext<'a> {
    pub annotations: &'a Map<String, Value>,
    pub runtime_class_name: Option<&'a str>,
    pub edits: &'a mut PodEdits,
}

impl PodContext<'_> {
    pub fn annotation(&self, key: &str) -> Option<&str> {
        if let Some((_, v)) = self.edits.annotations.iter().rev().find(|(k, _)| k == key) {
            return Some(v);
        }
        self.annotations.get(key).and_then(Value::as_str)
    }
    pub fn set_annotation(&mut self, key: &str, value: &str) {
        self.edits.annotations.push((key.to_owned(), value.to_owned()));
    }
    /// Sets `spec.runtimeClassName` unless the pod already has one.
    pub fn default_runtime_class(&mut self, name: &str) {
        if !name.is_empty() && self.runtime_class_name.is_none() && self.edits.runtime_class_name.is_none() {
            self.edits.runtime_class_name = Some(name.to_owned());
        }
    }
}
