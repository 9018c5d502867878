//! Dependencies point inward: the pure layers (`model`, `devices`, `sched`) and the engine
//! (`actor`) never reach the HTTP layer, the backends, the application wiring or the config (each
//! vendor's config section lives beside it, and `app` builds the engine's config), and the backends
//! never reach the engine; both sides meet in `port`. Checked on the source text, test code aside,
//! so a new `use` that breaks the rule fails here instead of in a reviewer's head.

use std::fs;
use std::path::{Path, PathBuf};

/// Each layer, and the top-level modules its non-test code must not name.
const RULES: &[(&str, &[&str])] = &[
    ("model", &["http", "backend", "app", "actor", "config"]),
    ("devices", &["http", "backend", "app", "actor", "config"]),
    ("sched", &["http", "backend", "app", "actor", "config"]),
    ("actor", &["http", "backend", "app", "config"]),
    ("backend", &["actor", "http", "app"]),
    ("port", &["actor", "http", "app", "backend"]),
    ("admission", &["http", "backend", "app", "actor"]),
    // Only the application wiring builds the server; the tools beside it reuse what the HTTP
    // layer reuses (admission, the engine), not the layer.
    ("simulate", &["http"]),
    ("inspect", &["http"]),
    ("report", &["http"]),
    ("metrics", &["http", "actor", "backend"]),
];

/// The module's own file and every file under its folder, test files left out.
fn files_of(module: &str) -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = vec![src.join(format!("{module}.rs"))];
    let mut dirs = vec![src.join(module)];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if p.is_dir() {
                if name != "tests" {
                    dirs.push(p);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                out.push(p);
            }
        }
    }
    out.retain(|p| p.exists());
    out
}

/// The text before the file's inline test module, if it has one.
fn non_test(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// Every `crate::<module>` the text names, with its line number.
fn names(text: &str, module: &str) -> Vec<usize> {
    let needle = format!("crate::{module}");
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find(&needle) {
            let after = &rest[at + needle.len()..];
            if !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                lines.push(i + 1);
                break;
            }
            rest = after;
        }
    }
    lines
}

fn violations() -> Vec<String> {
    let mut out = Vec::new();
    for (layer, forbidden) in RULES {
        for file in files_of(layer) {
            let text = fs::read_to_string(&file).unwrap_or_default();
            let code = non_test(&text);
            for m in forbidden.iter() {
                for line in names(code, m) {
                    out.push(format!("{}:{line}: {layer} names crate::{m}", file.display()));
                }
            }
        }
    }
    out
}

#[test]
fn dependencies_point_inward() {
    let v = violations();
    assert!(v.is_empty(), "dependencies that point outward:\n{}", v.join("\n"));
}

#[test]
fn the_checker_sees_every_layer_and_finds_a_named_module() {
    for (layer, _) in RULES {
        assert!(!files_of(layer).is_empty(), "no source files found for {layer}");
    }
    assert!(files_of("actor").iter().any(|p| p.ends_with("filter.rs")), "files in subfolders are read");
    assert!(!files_of("actor").iter().any(|p| p.ends_with("tests.rs")), "test files are left out");
    assert!(files_of("devices").iter().any(|p| p.ends_with("nvidia/config.rs")), "a vendor's config module is read");
    assert_eq!(names("use crate::config::device::DeviceConfig;\nmod config;\n", "config"), [1]);
    assert_eq!(names("use crate::backend::memory;\nlet x = crate::backends;\n", "backend"), [1]);
    assert_eq!(names("fn f() { crate::http::routes(); }", "http"), [1]);
    assert_eq!(non_test("use a;\n#[cfg(test)]\nmod tests {\n use crate::backend;\n}\n"), "use a;\n");
}

// --- no import circles ----------------------------------------------------------------------

use std::collections::{BTreeMap, BTreeSet};

/// Every non-test source file of the library as its module path (`actor::filter`), with its code
/// (test modules cut off).
fn modules() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if p.is_dir() {
                if name != "tests" {
                    dirs.push(p);
                }
                continue;
            }
            if !name.ends_with(".rs") || name == "tests.rs" || name == "main.rs" || name == "kubectl_hami.rs" {
                continue;
            }
            let rel = p.strip_prefix(&src).unwrap_or(&p).with_extension("");
            let path: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            let module = if path == ["lib"] { String::new() } else { path.join("::") };
            let text = fs::read_to_string(&p).unwrap_or_default();
            out.insert(module, non_test(&text).to_owned());
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a file's code names: `crate::a::b…` and `super::a…` (with `super::{a, b::c}`
/// groups opened one level), each as a list of segments from the crate root.
fn named_paths(module: &str, code: &str) -> Vec<Vec<String>> {
    let here: Vec<String> =
        if module.is_empty() { Vec::new() } else { module.split("::").map(str::to_owned).collect() };
    let parent: Vec<String> = here[..here.len().saturating_sub(1)].to_vec();
    let mut out = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(is_ident) {
                continue;
            }
            let tails: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                group[..end].split(',').map(|s| s.trim().to_owned()).collect()
            } else {
                let end = rest.find(|c: char| !(is_ident(c) || c == ':')).unwrap_or(rest.len());
                vec![rest[..end].to_owned()]
            };
            for tail in tails {
                let mut path = base.clone();
                path.extend(
                    tail.split("::")
                        .map(str::trim)
                        .filter(|s| !s.is_empty() && s.chars().all(is_ident))
                        .map(str::to_owned),
                );
                out.push(path);
            }
        }
    }
    out
}

/// Edges between modules neither of which contains the other: a module naming its parent's items
/// (or a child's) is the tree itself, not an import between parts.
fn edges(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let within = |a: &str, b: &str| {
        a.is_empty() || b.is_empty() || a == b || b.starts_with(&format!("{a}::")) || a.starts_with(&format!("{b}::"))
    };
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, code) in mods {
        for path in named_paths(m, code) {
            // The longest prefix that is a module.
            let target = (1..=path.len()).rev().map(|n| path[..n].join("::")).find(|p| mods.contains_key(p));
            if let Some(t) = target
                && !within(m, &t)
            {
                out.entry(m.clone()).or_default().insert(t);
            }
        }
    }
    out
}

/// Groups of modules that import each other, directly or round a circle (Tarjan's components of
/// more than one module).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl<'a> T<'a> {
        fn visit(&mut self, v: &'a str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let lw = self.low[w.as_str()];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(lw));
                } else if self.on.contains(w.as_str()) {
                    let iw = self.index[w.as_str()];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    group.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.out.push(group);
                }
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn no_two_modules_import_each_other() {
    let mods = modules();
    let found = circles(&edges(&mods));
    let text: Vec<String> = found.iter().map(|g| g.join(" <-> ")).collect();
    assert!(found.is_empty(), "modules that import each other (directly or round a circle):\n{}", text.join("\n"));
}

#[test]
fn the_circle_finder_finds_a_circle_and_leaves_the_tree_alone() {
    let mods: BTreeMap<String, String> = [
        ("a", "use super::b::X;"),
        ("b", "use crate::a::Y; use crate::c;"),
        ("c", "fn f() {}"),
        ("a::inner", "use super::Z; use crate::a::W;"),
        ("d", "use super::{c, a::inner::V};"),
    ]
    .into_iter()
    .map(|(m, c)| (m.to_owned(), c.to_owned()))
    .collect();
    let e = edges(&mods);
    assert_eq!(circles(&e), [vec!["a".to_owned(), "b".to_owned()]]);
    assert!(!e.contains_key("a::inner"), "a child naming its parent is the tree: {e:?}");
    assert_eq!(e["d"], BTreeSet::from(["a::inner".to_owned(), "c".to_owned()]));
}
