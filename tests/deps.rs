//! Dependencies point inward. The pure layers (`model`, `devices`, `sched`, `gosort`) are the
//! `hami-core` crate, which depends on no actix, tokio, kube or k8s-openapi crate, so the compiler
//! keeps the engine and the edges out of them; inside it, `model` never names `devices` or
//! `sched`, and `devices` never names `sched`. In the scheduler crate, the engine (`actor`) never
//! reaches the HTTP layer, the backends, the application wiring or the config (`app` builds the
//! engine's config), and the backends never reach the engine; both sides meet in `port`. Checked
//! on the source text, test code aside, so a new `use` that breaks the rule fails here instead of
//! in a reviewer's head. Then no two modules of either crate may import each other, a parent and
//! its child included.

use std::fs;
use std::path::{Path, PathBuf};

/// The scheduler crate's sources.
fn root_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The pure core's sources.
fn core_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/hami-core/src")
}

/// Each layer (its crate's sources, its name), and the top-level modules its non-test code must
/// not name.
fn rules() -> Vec<(PathBuf, &'static str, &'static [&'static str])> {
    let (core, root) = (core_src(), root_src());
    vec![
        (core.clone(), "model", &["devices", "sched", "config"]),
        (core.clone(), "devices", &["sched", "config"]),
        (core.clone(), "gosort", &["model", "devices", "sched", "config"]),
        (root.clone(), "actor", &["http", "backend", "app", "config"]),
        (root.clone(), "backend", &["actor", "http", "app"]),
        (root.clone(), "port", &["actor", "http", "app", "backend"]),
        (root.clone(), "admission", &["http", "backend", "app", "actor"]),
        // Only the application wiring builds the server; the tools beside it reuse what the HTTP
        // layer reuses (admission, the engine), not the layer.
        (root.clone(), "simulate", &["http"]),
        (root.clone(), "inspect", &["http"]),
        (root.clone(), "report", &["http"]),
        (root, "metrics", &["http", "actor", "backend"]),
    ]
}

/// Whether a file is test code: a `tests.rs`, anything under a `tests` folder, or a vendor's
/// `fixtures.rs` (built only for tests).
fn is_test_file(p: &Path) -> bool {
    p.file_name().is_some_and(|n| n == "tests.rs" || n == "fixtures.rs")
        || p.components().any(|c| c.as_os_str() == "tests")
}

/// The module's own file and every file under its folder, test files left out.
fn files_of(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut out = vec![src.join(format!("{module}.rs"))];
    let mut dirs = vec![src.join(module)];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if !is_test_file(&p) {
                    dirs.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") && !is_test_file(&p) {
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
    for (src, layer, forbidden) in rules() {
        for file in files_of(&src, layer) {
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

/// The crates the pure core must never depend on: with none of them in its manifest, no code in
/// it can reach a runtime, an actor or the API server.
const NOT_IN_CORE: &[&str] = &["actix", "actix-web", "actix-rt", "tokio", "kube", "k8s-openapi", "reqwest", "hyper"];

/// The crate names a manifest's dependency tables list.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_deps = l.ends_with("dependencies]");
            continue;
        }
        if in_deps && let Some((name, _)) = l.split_once('=') {
            let name = name.trim();
            if !name.is_empty() && !name.starts_with('#') {
                out.push(name.to_owned());
            }
        }
    }
    out
}

#[test]
fn the_pure_core_depends_on_no_runtime_actor_or_kubernetes_crate() {
    let manifest = fs::read_to_string(core_src().join("../Cargo.toml")).unwrap_or_default();
    let deps = dependencies(&manifest);
    assert!(deps.iter().any(|d| d == "serde"), "the core's manifest was read: {deps:?}");
    let bad: Vec<&String> = deps.iter().filter(|d| NOT_IN_CORE.contains(&d.as_str())).collect();
    assert!(bad.is_empty(), "hami-core depends on {bad:?}");
    assert_eq!(dependencies("[dependencies]\ntokio = \"1\"\n[features]\nx = []\n"), ["tokio"]);
}

#[test]
fn the_checker_sees_every_layer_and_finds_a_named_module() {
    for (src, layer, _) in rules() {
        assert!(!files_of(&src, layer).is_empty(), "no source files found for {layer}");
    }
    let root = root_src();
    assert!(files_of(&root, "actor").iter().any(|p| p.ends_with("filter.rs")), "files in subfolders are read");
    assert!(!files_of(&root, "actor").iter().any(|p| p.ends_with("tests.rs")), "test files are left out");
    let core = core_src();
    assert!(
        files_of(&core, "devices").iter().any(|p| p.ends_with("nvidia/config.rs")),
        "a vendor's config module is read"
    );
    assert!(!files_of(&core, "devices").iter().any(|p| p.ends_with("fixtures.rs")), "fixtures are test code");
    assert_eq!(names("use crate::config::device::DeviceConfig;\nmod config;\n", "config"), [1]);
    assert_eq!(names("use crate::backend::memory;\nlet x = crate::backends;\n", "backend"), [1]);
    assert_eq!(names("fn f() { crate::http::routes(); }", "http"), [1]);
    assert_eq!(non_test("use a;\n#[cfg(test)]\nmod tests {\n use crate::backend;\n}\n"), "use a;\n");
}

// --- no import circles ----------------------------------------------------------------------

use std::collections::{BTreeMap, BTreeSet};

/// Every non-test source file of one crate as its module path (`actor::filter`), with its code
/// (test modules cut off).
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if p.is_dir() {
                if !is_test_file(&p) {
                    dirs.push(p);
                }
                continue;
            }
            if !name.ends_with(".rs") || is_test_file(&p) || name == "main.rs" || name == "kubectl_hami.rs" {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap_or(&p).with_extension("");
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

fn segments(module: &str) -> Vec<String> {
    if module.is_empty() { Vec::new() } else { module.split("::").map(str::to_owned).collect() }
}

/// The tails a path names after its prefix: one path, or each entry of a `{a, b::c}` group
/// (opened one level).
fn tails(rest: &str) -> Vec<String> {
    if let Some(group) = rest.strip_prefix('{') {
        let end = group.find('}').unwrap_or(group.len());
        group[..end].split(',').map(|s| s.trim().to_owned()).collect()
    } else {
        let end = rest.find(|c: char| !(is_ident(c) || c == ':')).unwrap_or(rest.len());
        vec![rest[..end].trim_end_matches(':').to_owned()]
    }
}

/// `tail`'s segments from `base`, every leading `super` one level up.
fn resolve(mut base: Vec<String>, tail: &str) -> Vec<String> {
    for seg in tail.split("::").map(str::trim).filter(|s| !s.is_empty()) {
        if seg == "super" {
            base.pop();
        } else if seg == "self" {
        } else if seg.chars().all(is_ident) {
            base.push(seg.to_owned());
        } else {
            break;
        }
    }
    base
}

/// The lines of `code` that are not re-exports: a module that only re-exports a child's item
/// (`pub use filter::Told;`) hands it on, it does not use it.
fn without_reexports(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut in_reexport = false;
    for line in code.lines() {
        let l = line.trim_start();
        if !in_reexport
            && (l.starts_with("pub use ") || l.starts_with("pub(crate) use ") || l.starts_with("pub(super) use "))
        {
            in_reexport = !l.trim_end().ends_with(';');
            continue;
        }
        if in_reexport {
            in_reexport = !l.trim_end().ends_with(';');
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The paths a file's code names, each as a list of segments from the crate root: `crate::a::b…`,
/// `super::a…` (any number of `super`s), `self::a…`, and a path starting with one of the
/// module's own children (`filter::run`), with `{a, b::c}` groups opened one level. Re-exports are
/// left out (see `without_reexports`).
fn named_paths(module: &str, code: &str, children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let here = segments(module);
    let code = without_reexports(code);
    let mut out = Vec::new();
    let mut at = 0;
    let bytes = code.as_bytes();
    while at < code.len() {
        // Bytes, not chars: an identifier is ASCII, so a word starts only on a char boundary.
        let ident = |b: u8| b.is_ascii() && is_ident(b as char);
        let starts_word = ident(bytes[at]) && (at == 0 || !ident(bytes[at - 1]));
        let after_colons = at >= 2 && &bytes[at - 2..at] == b"::";
        if !starts_word || after_colons {
            at += 1;
            continue;
        }
        let end = code[at..].find(|c: char| !is_ident(c)).map_or(code.len(), |n| at + n);
        let word = &code[at..end];
        let rest = &code[end..];
        let Some(rest) = rest.strip_prefix("::") else {
            at = end;
            continue;
        };
        let base = match word {
            "crate" => Some(Vec::new()),
            "super" => Some(resolve(here.clone(), "super")),
            "self" => Some(here.clone()),
            w if children.contains(w) => Some(resolve(here.clone(), w)),
            _ => None,
        };
        if let Some(base) = base {
            for tail in tails(rest) {
                out.push(resolve(base.clone(), &tail));
            }
        }
        at = end;
    }
    out
}

/// The items each module re-exports (`pub use a::b::{X, Y as Z};`), by the name it hands them on
/// under, with the module each comes from.
fn reexports(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (m, code) in mods {
        let mut stmt = String::new();
        for line in code.lines() {
            let l = line.trim();
            if stmt.is_empty() && !(l.starts_with("pub use ") || l.starts_with("pub(crate) use ")) {
                continue;
            }
            stmt.push_str(l);
            stmt.push(' ');
            if !l.ends_with(';') {
                continue;
            }
            let body = stmt.split_once("use ").map_or("", |(_, b)| b).trim_end_matches([';', ' ']).to_owned();
            stmt.clear();
            let (prefix, names) = match body.split_once('{') {
                Some((p, n)) => (
                    p.trim_end_matches(':').to_owned(),
                    n.trim_end_matches('}').split(',').map(str::trim).map(str::to_owned).collect::<Vec<_>>(),
                ),
                None => match body.rsplit_once("::") {
                    Some((p, n)) => (p.to_owned(), vec![n.to_owned()]),
                    None => continue,
                },
            };
            let first = prefix.split("::").next().unwrap_or_default();
            let children: BTreeSet<String> = BTreeSet::from([first.to_owned()]);
            let base = match first {
                "crate" | "super" | "self" => named_paths(m, &format!("x = {prefix}::_;"), &children),
                _ => vec![resolve(segments(m), &prefix)],
            };
            let Some(from) =
                base.first().map(|p| p.iter().filter(|s| *s != "_").cloned().collect::<Vec<_>>().join("::"))
            else {
                continue;
            };
            for n in names {
                let (orig, as_name) = n.split_once(" as ").map_or((n.as_str(), n.as_str()), |(o, a)| (o, a));
                if orig.contains("::") || orig == "*" || orig == "self" || orig.is_empty() {
                    continue;
                }
                out.entry(m.clone()).or_default().insert(as_name.trim().to_owned(), from.clone());
                let _ = orig;
            }
        }
    }
    out
}

/// The module a path names: its longest prefix that is a module, followed through re-exports to
/// the module that defines the item.
fn target(
    path: &[String],
    mods: &BTreeMap<String, String>,
    re: &BTreeMap<String, BTreeMap<String, String>>,
) -> Option<String> {
    let n = (0..=path.len()).rev().find(|&n| mods.contains_key(&path[..n].join("::")))?;
    let mut t = path[..n].join("::");
    let mut item = path.get(n).cloned();
    // A re-export chain is short; the bound keeps a cycle of re-exports from looping.
    for _ in 0..8 {
        let Some(from) = item.as_ref().and_then(|i| re.get(&t).and_then(|r| r.get(i))) else { break };
        if !mods.contains_key(from) || *from == t {
            break;
        }
        t = from.clone();
        item = item.clone();
    }
    Some(t)
}

/// Edges between modules: a module naming another's items, a parent its child's and a child its
/// parent's included. A path to a module itself (`mod filter;`, or naming `crate::actor` to reach
/// `crate::actor::filter`) is not an edge: only the module that defines what is named is.
fn edges(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let re = reexports(mods);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, code) in mods {
        let prefix = if m.is_empty() { String::new() } else { format!("{m}::") };
        let children: BTreeSet<String> = mods
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix).filter(|rest| !rest.is_empty() && !rest.contains("::")))
            .map(str::to_owned)
            .collect();
        for path in named_paths(m, code, &children) {
            if let Some(t) = target(&path, mods, &re)
                && t != *m
                // The crate root only declares modules.
                && !t.is_empty()
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
    for src in [root_src(), core_src()] {
        let mods = modules(&src);
        let e = edges(&mods);
        let found = circles(&e);
        // Each circle with the edges inside it, so the import to cut can be read off.
        let text: Vec<String> = found
            .iter()
            .map(|g| {
                let inside: Vec<String> = g
                    .iter()
                    .flat_map(|m| {
                        e.get(m).into_iter().flatten().filter(|t| g.contains(t)).map(move |t| format!("  {m} -> {t}"))
                    })
                    .collect();
                format!("{}\n{}", g.join(" <-> "), inside.join("\n"))
            })
            .collect();
        assert!(
            found.is_empty(),
            "modules of {} that import each other (directly or round a circle):\n{}",
            src.display(),
            text.join("\n")
        );
    }
}

fn mods_of(list: &[(&str, &str)]) -> BTreeMap<String, String> {
    list.iter().map(|(m, c)| ((*m).to_owned(), (*c).to_owned())).collect()
}

#[test]
fn the_circle_finder_finds_a_circle_and_leaves_the_tree_alone() {
    let mods = mods_of(&[
        ("a", "use super::b::X;"),
        ("b", "use crate::a::Y; use crate::c;"),
        ("c", "fn f() {}"),
        ("a::inner", "fn g() {}"),
        ("d", "use super::{c, a::inner::V};"),
    ]);
    let e = edges(&mods);
    assert_eq!(circles(&e), [vec!["a".to_owned(), "b".to_owned()]]);
    assert_eq!(e["d"], BTreeSet::from(["a::inner".to_owned(), "c".to_owned()]));
}

#[test]
fn a_parent_and_a_child_that_use_each_others_items_are_a_circle() {
    // The parent calls its child's function and the child reads the parent's type.
    let mods =
        mods_of(&[("p", "mod kid;\nfn f() { kid::run(); }\npub struct State;"), ("p::kid", "use super::State;")]);
    assert_eq!(circles(&edges(&mods)), [vec!["p".to_owned(), "p::kid".to_owned()]]);
    // A parent that only declares and re-exports its children is not a party: the child reaching
    // the re-exported name reaches its sibling that defines it.
    let mods = mods_of(&[
        ("p", "mod kid;\nmod state;\npub use state::State;\npub use kid::{run, other as renamed};"),
        ("p::kid", "use crate::p::State;\npub fn run() {}\npub fn other() {}"),
        ("p::state", "pub struct State;"),
    ]);
    let e = edges(&mods);
    assert!(circles(&e).is_empty(), "{e:?}");
    assert_eq!(e["p::kid"], BTreeSet::from(["p::state".to_owned()]));
    assert!(!e.contains_key("p"), "re-exports are not uses: {e:?}");
}

#[test]
fn super_super_climbs_two_levels() {
    let mods = mods_of(&[
        ("a", "pub struct Top;"),
        ("a::b", "pub struct Mid;"),
        ("a::b::c", "use super::super::Top;\nuse super::Mid;"),
        ("x", "fn f() { crate::a::b::c::go(); }"),
    ]);
    let e = edges(&mods);
    assert_eq!(e["a::b::c"], BTreeSet::from(["a".to_owned(), "a::b".to_owned()]));
    assert_eq!(e["x"], BTreeSet::from(["a::b::c".to_owned()]));
    assert_eq!(resolve(segments("a::b::c"), "super::super::Top"), ["a", "Top"]);
}
