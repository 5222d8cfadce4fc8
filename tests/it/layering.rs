//! The folder tree is the architecture: this reads every `crate::` path in `src/` (test
//! modules left out) and checks that the top-level modules depend on each other one way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Which top-level modules each may use. `domain` is the bottom floor; `config` feeds every
/// floor from the side; `state` keeps what the scheduler hands it; requests run
/// server → router / scheduler → provider → plugin.
const ALLOWED: &[(&str, &[&str])] = &[
    ("domain", &[]),
    ("logsafe", &[]),
    ("private_fs", &[]),
    ("tasks", &[]),
    ("http_client", &[]),
    ("config", &["domain"]),
    ("logging", &["config", "logsafe"]),
    ("plugin", &["domain", "config", "logsafe", "private_fs", "telemetry", "http_client"]),
    ("telemetry", &["config", "http_client"]),
    ("provider", &["domain", "config", "plugin", "telemetry", "tasks", "http_client"]),
    ("router", &["domain", "config"]),
    ("pricing", &["domain", "config"]),
    ("access", &["domain", "config"]),
    ("scheduler", &["domain", "config", "router"]),
    ("state", &["domain", "config", "scheduler", "private_fs", "access"]),
    ("shared", &["domain", "config", "scheduler", "logsafe", "tasks", "access"]),
    (
        "server",
        &[
            "domain",
            "config",
            "router",
            "scheduler",
            "provider",
            "plugin",
            "state",
            "logging",
            "logsafe",
            "private_fs",
            "telemetry",
            "shared",
            "tasks",
            "pricing",
            "access",
            "http_client",
        ],
    ),
    ("authoring", &["domain", "config", "plugin", "provider"]),
    ("alerts", &["domain", "server"]),
    ("telegram", &["domain", "config", "server", "tasks", "http_client", "alerts"]),
    (
        "startup",
        &[
            "domain",
            "config",
            "plugin",
            "scheduler",
            "server",
            "shared",
            "state",
            "private_fs",
            "tasks",
            "telegram",
            "logsafe",
        ],
    ),
];

/// Top-level module → the top-level modules its files name through `crate::`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap().to_string_lossy().to_string();
            if !rel.ends_with(".rs") || rel == "lib.rs" || rel == "main.rs" || rel.ends_with("/tests.rs") {
                continue;
            }
            let top = rel.split('/').next().unwrap().trim_end_matches(".rs").to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests may reach anywhere; the code above them may not.
            let code = text.split("#[cfg(test)]\nmod ").next().unwrap();
            let used = out.entry(top.clone()).or_default();
            for name in crate_paths(code) {
                if name != top {
                    used.insert(name);
                }
            }
        }
    }
    out
}

/// The first segment after each `crate::`, including inside `use crate::{a::X, b::Y}`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Split at the commas of the outer braces only: `{a::X, b::{Y, Z}}` names a and b.
            let (mut depth, mut part) = (0, String::new());
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.extend(first_segment(&part));
                        part.clear();
                        continue;
                    }
                    _ => {}
                }
                part.push(c);
            }
            names.extend(first_segment(&part));
        } else {
            names.push(rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
        }
    }
    names
}

fn first_segment(part: &str) -> Option<String> {
    let first: String = part.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!first.is_empty()).then_some(first)
}

#[test]
fn modules_depend_on_each_other_one_way() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> =
        ALLOWED.iter().map(|(m, deps)| (*m, deps.iter().copied().collect())).collect();
    let mut wrong = Vec::new();
    for (module, used) in imports() {
        let Some(ok) = allowed.get(module.as_str()) else {
            wrong.push(format!("`{module}` is a new top-level module: give it its place in ALLOWED"));
            continue;
        };
        for name in used {
            if !ok.contains(name.as_str()) {
                wrong.push(format!("`{module}` uses `crate::{name}`"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layering:\n{}", wrong.join("\n"));
}

#[test]
fn the_allowed_imports_themselves_form_no_circle() {
    let allowed: BTreeMap<&str, Vec<&str>> = ALLOWED.iter().map(|(m, deps)| (*m, deps.to_vec())).collect();
    // Depth-first search for a back edge.
    fn visit<'a>(
        m: &'a str,
        allowed: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if done.contains(m) {
            return;
        }
        assert!(!path.contains(&m), "a circle: {} -> {m}", path.join(" -> "));
        path.push(m);
        for dep in allowed.get(m).into_iter().flatten() {
            visit(dep, allowed, path, done);
        }
        path.pop();
        done.insert(m);
    }
    let mut done = BTreeSet::new();
    for m in allowed.keys() {
        visit(m, &allowed, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_reader_finds_grouped_and_inline_paths() {
    let code = "use crate::{config::X, domain::{A, B}};\nfn f() { crate::router::route(); }\nuse crate::state;";
    assert_eq!(crate_paths(code), ["config", "domain", "router", "state"]);
}

#[test]
fn the_modes_reach_the_gateway_only_through_their_dispatcher() {
    let modes = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server/modes");
    for entry in std::fs::read_dir(modes).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        for forbidden in ["dispatch::", "server::Gateway", "super::super::dispatch"] {
            assert!(!text.contains(forbidden), "{} names `{forbidden}`", entry.path().display());
        }
    }
}

/// Each module directly under `src/server/` → the sibling modules its files name, through
/// `crate::server::x`, `super::x` or `super::super::x` (comments and unit tests left out).
fn server_edges() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server");
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let siblings: BTreeSet<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path().file_stem().unwrap().to_string_lossy().to_string())
        .filter(|name| name != "mod")
        .collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in files {
        let rel = path.strip_prefix(&root).unwrap().with_extension("");
        let mut module: Vec<String> = rel.iter().map(|s| s.to_string_lossy().to_string()).collect();
        if module.last().is_some_and(|m| m == "mod" || m == "tests") {
            module.pop();
        }
        let Some(own) = module.first().cloned() else { continue };
        let text = std::fs::read_to_string(&path).unwrap();
        let code: String = text
            .split("#[cfg(test)]\nmod ")
            .next()
            .unwrap()
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let used = out.entry(own.clone()).or_default();
        for (at, _) in code.match_indices("super::").chain(code.match_indices("crate::server::")) {
            // Walk `super::super::…` up from this file's module to the path it names.
            let (mut base, mut rest) = if code[at..].starts_with("crate::server::") {
                (Vec::new(), &code[at + "crate::server::".len()..])
            } else if at >= 2 && &code[at - 2..at] == "::" {
                continue; // the tail of a `super::super::` already walked
            } else {
                (module.clone(), &code[at..])
            };
            while let Some(after) = rest.strip_prefix("super::") {
                base.pop();
                rest = after;
            }
            let named: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let target = base.first().cloned().unwrap_or(named);
            if target != own && siblings.contains(&target) {
                used.insert(target);
            }
        }
    }
    out
}

#[test]
fn the_modules_inside_server_form_no_circle() {
    let edges = server_edges();
    fn visit(m: &str, edges: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) {
        if done.contains(m) {
            return;
        }
        if let Some(at) = path.iter().position(|p| p == m) {
            panic!("a circle inside server/: {} -> {m}", path[at..].join(" -> "));
        }
        path.push(m.to_string());
        for dep in edges.get(m).into_iter().flatten() {
            visit(dep, edges, path, done);
        }
        path.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in edges.keys() {
        visit(m, &edges, &mut Vec::new(), &mut done);
    }
    // The reader sees the edges it must: a door reaches dispatch, dispatch its ticket.
    assert!(edges["chat"].contains("dispatch") && edges["dispatch"].contains("ticket"), "{edges:?}");
}
