//! The module graph of each crate has no cycles: a module that uses another is never used by
//! it, directly or through others. Read from the sources: an edge `a → b` is a mention of
//! `crate::b`, or of a name the crate root re-exports from `b`, in code of module `a`
//! (comments and `#[cfg(test)]` items are not its code).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Crates of more than one module whose module graphs must be acyclic (`local` and `retry` are
/// one module each).
const CRATES: [&str; 5] = [
    "domain",
    "functions",
    "store",
    "runner-agent",
    "runner-agent/protocol",
];

type Graph = BTreeMap<String, BTreeSet<String>>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The top-level module a source file belongs to (`src/board/post.rs` → `board`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The production code of a file: without comment lines, and cut at its first
/// `#[cfg(test)]` (test modules close the files of this workspace).
fn code_of(text: &str) -> String {
    let production = text.split("#[cfg(test)]").next().unwrap_or_default();
    production
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::name` mentioned in `text`.
fn mentioned(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.insert(name);
        }
        // `use crate::{a, b::c}`: each name in the braces.
        if let Some(list) = rest.strip_prefix('{') {
            let list = &list[..list.find('}').unwrap_or(list.len())];
            for item in list.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        }
    }
    found
}

/// Names the crate root re-exports (`pub use module::{A, B};`), by the module they come from:
/// a mention of `crate::A` is an edge to that module.
fn reexports(src: &Path) -> BTreeMap<String, String> {
    let root = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|p| p.exists())
        .unwrap();
    let text = std::fs::read_to_string(root).unwrap();
    let mut names = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.trim_end_matches(';').split_once("::") else {
            continue;
        };
        for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
            let name = item.trim().rsplit("::").next().unwrap_or_default();
            if !name.is_empty() {
                names.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    names
}

fn graph(krate: &str) -> Graph {
    let src = workspace().join(krate).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(&src, f)).collect();
    let reexported = reexports(&src);
    let mut g = Graph::new();
    for file in &files {
        let Some(from) = module_of(&src, file) else {
            continue;
        };
        let text = code_of(&std::fs::read_to_string(file).unwrap());
        let edges = g.entry(from.clone()).or_default();
        for name in mentioned(&text) {
            let to = reexported.get(&name).cloned().unwrap_or(name);
            if to != from && modules.contains(&to) {
                edges.insert(to);
            }
        }
    }
    g
}

/// A cycle through `start`, if there is one: the path back to it.
fn cycle_from(g: &Graph, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_owned(), vec![start.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((node, path)) = stack.pop() {
        for next in g.get(&node).into_iter().flatten() {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(start.to_owned());
                return Some(cycle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push((next.clone(), longer));
            }
        }
    }
    None
}

#[test]
fn the_module_graph_of_each_crate_is_acyclic() {
    let mut cycles = Vec::new();
    for krate in CRATES {
        let g = graph(krate);
        assert!(!g.is_empty(), "{krate}: no modules read");
        for module in g.keys() {
            if let Some(cycle) = cycle_from(&g, module) {
                cycles.push(format!("{krate}: {}", cycle.join(" → ")));
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn a_cycle_is_found_when_there_is_one() {
    let g: Graph = [
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
        ("d".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]
    .into();
    assert_eq!(cycle_from(&g, "a").unwrap(), ["a", "b", "c", "a"]);
    assert!(cycle_from(&g, "d").is_none());
    assert_eq!(
        mentioned("use crate::{board::x, sessions};\nlet _ = crate::cas::CAS;"),
        BTreeSet::from(["board".into(), "sessions".into(), "cas".into()])
    );
}
