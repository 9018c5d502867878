//! Dependencies point inward: the pure layers (`model`, `vendor`, `sched`) and the engine
//! (`actor`) never reach the HTTP layer, the backends, the application wiring or the config (each
//! vendor's config section lives beside it, and `app` builds the engine's config), and the backends
//! never reach the engine; both sides meet in `port`. Checked on the source text, test code aside,
//! so a new `use` that breaks the rule fails here instead of in a reviewer's head.

use std::fs;
use std::path::{Path, PathBuf};

/// Each layer, and the top-level modules its non-test code must not name.
const RULES: &[(&str, &[&str])] = &[
    ("model", &["http", "backend", "app", "actor", "config"]),
    ("vendor", &["http", "backend", "app", "actor", "config"]),
    ("sched", &["http", "backend", "app", "actor", "config"]),
    ("actor", &["http", "backend", "app", "config"]),
    ("backend", &["actor", "http", "app"]),
    ("port", &["actor", "http", "app", "backend"]),
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
    assert!(files_of("vendor").iter().any(|p| p.ends_with("nvidia/config.rs")), "a vendor's config module is read");
    assert_eq!(names("use crate::config::device::DeviceConfig;\nmod config;\n", "config"), [1]);
    assert_eq!(names("use crate::backend::memory;\nlet x = crate::backends;\n", "backend"), [1]);
    assert_eq!(names("fn f() { crate::http::routes(); }", "http"), [1]);
    assert_eq!(non_test("use a;\n#[cfg(test)]\nmod tests {\n use crate::backend;\n}\n"), "use a;\n");
}
