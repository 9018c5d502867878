use std::collections::BTreeMap;

use proptest::prelude::*;

use super::VecMap;

#[derive(Clone, Debug)]
enum Op {
    Insert(String, u8),
    Remove(String),
}

fn key() -> impl Strategy<Value = String> {
    // A small alphabet so that inserts, replacements and removals hit the same keys.
    "[a-d]{0,2}"
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![(key(), any::<u8>()).prop_map(|(k, v)| Op::Insert(k, v)), key().prop_map(Op::Remove)]
}

proptest! {
    /// Every operation answers as `BTreeMap`'s does, and iteration order is the same.
    #[test]
    fn behaves_as_a_btree_map(ops in proptest::collection::vec(op(), 0..64)) {
        let (mut ours, mut theirs) = (VecMap::new(), BTreeMap::new());
        for op in ops {
            match op {
                Op::Insert(k, v) => prop_assert_eq!(ours.insert(k.clone(), v), theirs.insert(k, v)),
                Op::Remove(k) => prop_assert_eq!(ours.remove(&k), theirs.remove(&k)),
            }
            prop_assert_eq!(ours.len(), theirs.len());
        }
        let a: Vec<_> = ours.iter().collect();
        let b: Vec<_> = theirs.iter().map(|(k, v)| (k.as_str(), v)).collect();
        prop_assert_eq!(a, b);
        for k in ["", "a", "ab", "dd", "x"] {
            prop_assert_eq!(ours.get(k), theirs.get(k));
            prop_assert_eq!(ours.contains_key(k), theirs.contains_key(k));
        }
    }

    /// JSON in and out as `BTreeMap`: sorted keys, the last of duplicate keys wins.
    #[test]
    fn json_is_a_btree_maps(entries in proptest::collection::vec((key(), any::<u8>()), 0..16)) {
        let mut text = String::from("{");
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&format!("\"{k}\":{v}"));
        }
        text.push('}');
        let ours: VecMap<u8> = serde_json::from_str(&text).unwrap();
        let theirs: BTreeMap<String, u8> = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(serde_json::to_string(&ours).unwrap(), serde_json::to_string(&theirs).unwrap());
        let collected: VecMap<u8> = entries.into_iter().collect();
        prop_assert_eq!(collected, ours);
    }
}

#[test]
fn reads_escaped_keys_and_keys_of_a_json_value() {
    let m: VecMap<String> = serde_json::from_str(r#"{"a\"b":"1","\u0063":"2"}"#).unwrap();
    assert_eq!(m.get("a\"b").map(String::as_str), Some("1"));
    assert_eq!(m.get("c").map(String::as_str), Some("2"));
    let v: VecMap<String> = serde_json::from_value(serde_json::json!({"k": "v"})).unwrap();
    assert_eq!(v.get("k").map(String::as_str), Some("v"));
}

#[test]
fn rejects_what_is_not_a_map() {
    assert!(serde_json::from_str::<VecMap<String>>("[1]").is_err());
    assert!(serde_json::from_str::<VecMap<String>>("{\"a\":1}").is_err());
}

#[test]
fn maps_share_one_copy_of_each_key() {
    let a: VecMap<String> = serde_json::from_str(r#"{"hami.io/vgpu-node":"a","x":"1"}"#).unwrap();
    let mut b: VecMap<String> = VecMap::new();
    b.insert("hami.io/vgpu-node".to_owned(), "b".to_owned());
    assert!(std::sync::Arc::ptr_eq(&a.0[0].0, &b.0[0].0));
    assert_eq!(a.get("hami.io/vgpu-node").map(String::as_str), Some("a"));
    assert_eq!(b.get("hami.io/vgpu-node").map(String::as_str), Some("b"));
}
