//! `VecMap`: a string-keyed map kept as one vector sorted by key, with interned keys. Pods carry a
//! handful of annotations, labels and resource quantities each; a `BTreeMap` gives each of those
//! maps a node of eleven slots (about 540 bytes for string pairs) however few entries it holds,
//! and every pod its own copy of the same keys (`hami.io/vgpu-devices-allocated`, `nvidia.com/gpu`).
//! Together they were most of the memory of a cluster's cached pods. A sorted vector holds exactly
//! its entries and iterates in the same order, so the JSON it writes is unchanged; keys are shared
//! through one process-wide set.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, RwLock};

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Keys interned at most: beyond this, keys (arbitrary label keys, say) get their own copy, so
/// the set cannot grow without bound.
const KEYS_KEPT: usize = 4096;

/// The interned keys, each with a code that stays the same for the life of the process (the set
/// only grows), so compact copies of pods (`model::packed`) can name a key by its code.
#[derive(Default)]
struct Keys {
    codes: HashMap<Arc<str>, u32>,
    list: Vec<Arc<str>>,
}

static KEYS: LazyLock<RwLock<Keys>> = LazyLock::new(|| RwLock::new(Keys::default()));

/// The shared copy of `key` and its code, made when it is new and there is room; `None` for the
/// code when there was none.
fn intern_coded(key: &str) -> (Arc<str>, Option<u32>) {
    {
        let keys = KEYS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((k, c)) = keys.codes.get_key_value(key) {
            return (k.clone(), Some(*c));
        }
    }
    let mut keys = KEYS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((k, c)) = keys.codes.get_key_value(key) {
        return (k.clone(), Some(*c));
    }
    let k: Arc<str> = Arc::from(key);
    if keys.list.len() >= KEYS_KEPT {
        return (k, None);
    }
    let code = keys.list.len() as u32;
    keys.list.push(k.clone());
    keys.codes.insert(k.clone(), code);
    (k, Some(code))
}

/// The shared copy of `key`, made when it is new and there is room.
fn intern(key: &str) -> Arc<str> {
    intern_coded(key).0
}

/// The code of `key`, interning it when there is room.
pub(crate) fn key_code(key: &str) -> Option<u32> {
    intern_coded(key).1
}

/// The key with this code.
pub(crate) fn key_of_code(code: u32) -> Option<Arc<str>> {
    KEYS.read().unwrap_or_else(std::sync::PoisonError::into_inner).list.get(code as usize).cloned()
}

/// A key for a map being rebuilt: the shared copy when there is one.
pub(crate) fn interned(key: &str) -> Arc<str> {
    intern(key)
}

/// A map from string keys to `V`, sorted by key, without duplicate keys.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct VecMap<V>(Vec<(Arc<str>, V)>);

impl<V> Default for VecMap<V> {
    fn default() -> Self {
        VecMap(Vec::new())
    }
}

impl<V: fmt::Debug> fmt::Debug for VecMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V> VecMap<V> {
    pub fn new() -> Self {
        VecMap(Vec::new())
    }

    fn find<Q: Borrow<str> + ?Sized>(&self, key: &Q) -> Result<usize, usize> {
        let key = key.borrow();
        self.0.binary_search_by(|(k, _)| (**k).cmp(key))
    }

    pub fn get<Q: Borrow<str> + ?Sized>(&self, key: &Q) -> Option<&V> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    pub fn get_mut<Q: Borrow<str> + ?Sized>(&mut self, key: &Q) -> Option<&mut V> {
        self.find(key).ok().map(|i| &mut self.0[i].1)
    }

    pub fn contains_key<Q: Borrow<str> + ?Sized>(&self, key: &Q) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`, answering the value it replaces.
    pub fn insert(&mut self, key: String, value: V) -> Option<V> {
        let key = key.as_str();
        match self.find(key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (intern(key), value));
                None
            }
        }
    }

    /// The value at `key`, inserted with `f` first when absent.
    pub fn get_or_insert_with(&mut self, key: &str, f: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(key) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (intern(key), f()));
                i
            }
        };
        &mut self.0[i].1
    }

    pub fn remove<Q: Borrow<str> + ?Sized>(&mut self, key: &Q) -> Option<V> {
        self.find(key).ok().map(|i| self.0.remove(i).1)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &V)> + ExactSizeIterator {
        self.0.iter().map(|(k, v)| (&**k, v))
    }

    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = (&str, &mut V)> + ExactSizeIterator {
        self.0.iter_mut().map(|(k, v)| (&**k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| &**k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn retain(&mut self, mut f: impl FnMut(&str, &mut V) -> bool) {
        self.0.retain_mut(|(k, v)| f(k, v));
    }

    /// Drops spare capacity, for maps kept long after they are built.
    pub fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }

    /// Sorts `entries` by key; of equal keys the last wins, as successive inserts would.
    pub(crate) fn from_entries(mut entries: Vec<(Arc<str>, V)>) -> Self {
        // Stable: equal keys stay in insertion order. `dedup_by` drops the later of two equal
        // keys, so its value moves into the one kept first.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            same
        });
        entries.shrink_to_fit();
        VecMap(entries)
    }
}

/// As `BTreeMap`'s: panics when the key is absent, so tests only; the scheduler reads with `get`.
#[cfg(any(test, feature = "testing"))]
impl<V, Q: Borrow<str> + ?Sized> std::ops::Index<&Q> for VecMap<V> {
    type Output = V;
    fn index(&self, key: &Q) -> &V {
        match self.get(key) {
            Some(v) => v,
            None => panic!("key {:?} not in the map", key.borrow()),
        }
    }
}

impl<K: AsRef<str>, V> FromIterator<(K, V)> for VecMap<V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        VecMap::from_entries(iter.into_iter().map(|(k, v)| (intern(k.as_ref()), v)).collect())
    }
}

impl<K: AsRef<str>, V> Extend<(K, V)> for VecMap<V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            let k = k.as_ref();
            match self.find(k) {
                Ok(i) => self.0[i].1 = v,
                Err(i) => self.0.insert(i, (intern(k), v)),
            }
        }
    }
}

impl<K: AsRef<str>, V, const N: usize> From<[(K, V); N]> for VecMap<V> {
    fn from(entries: [(K, V); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl<V> From<std::collections::BTreeMap<String, V>> for VecMap<V> {
    fn from(m: std::collections::BTreeMap<String, V>) -> Self {
        // Already sorted and unique.
        VecMap(m.into_iter().map(|(k, v)| (intern(&k), v)).collect())
    }
}

impl<V> From<VecMap<V>> for std::collections::BTreeMap<String, V> {
    fn from(m: VecMap<V>) -> Self {
        m.0.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}

impl<V> IntoIterator for VecMap<V> {
    type Item = (String, V);
    type IntoIter = std::iter::Map<std::vec::IntoIter<(Arc<str>, V)>, fn((Arc<str>, V)) -> (String, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter().map(|(k, v)| (k.to_string(), v))
    }
}

impl<'a, V> IntoIterator for &'a VecMap<V> {
    type Item = (&'a str, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (Arc<str>, V)>, fn(&'a (Arc<str>, V)) -> (&'a str, &'a V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (&**k, v))
    }
}

impl<V: Serialize> Serialize for VecMap<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(&**k, v)?;
        }
        m.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for VecMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V_<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for V_<V> {
            type Value = VecMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some(InternedKey(k)) = map.next_key()? {
                    let v = map.next_value::<V>()?;
                    entries.push((k, v));
                }
                Ok(VecMap::from_entries(entries))
            }
        }
        d.deserialize_map(V_(std::marker::PhantomData))
    }
}

/// A map key read straight into the interned set: a key seen before costs no copy of its own.
struct InternedKey(Arc<str>);

impl<'de> Deserialize<'de> for InternedKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = InternedKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<InternedKey, E> {
                Ok(InternedKey(intern(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests;
