//! `src/model`, `src/web` and `crates/fake-nvml` read bottom-up: no two of their files import
//! each other, directly or around a circle. Plain types shared by several layers live in a file
//! below all of them (`holding`, `dra_claim`, `figures`, `view`; `web/settings`). `src/model`
//! reads in wings, folders in the order of its module doc: a file imports from its own wing and
//! those below it only. A new import that closes a circle or runs back up a wing fails here,
//! naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each non-test file of `dir` and the sibling files its code names (`super::x`, or `x` after
/// `prefix`: `crate::<m>::` for a module, `crate::` for a crate's root).
fn imports(dir: &Path, prefix: &str) -> BTreeMap<String, BTreeSet<String>> {
    let files: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|n| n != "mod" && n != "lib" && !n.ends_with("_tests"))
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(format!("{n}.rs"))).unwrap();
            (n, text)
        })
        .collect();
    let names: BTreeSet<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    files
        .iter()
        .map(|(name, text)| {
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let mut deps = BTreeSet::new();
            for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for prefix in ["super::", prefix] {
                    for (at, _) in line.match_indices(prefix) {
                        let rest = &line[at + prefix.len()..];
                        let dep: String = rest
                            .chars()
                            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                            .collect();
                        if dep != *name && names.contains(dep.as_str()) {
                            deps.insert(dep);
                        }
                    }
                }
            }
            (name.clone(), deps)
        })
        .collect()
}

/// One circle among the files, if any: a path that comes back to where it started.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut c = path[at..].to_vec();
            c.push(node.to_owned());
            return Some(c);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for dep in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(graph, dep, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(graph, n, &mut Vec::new(), &mut done))
}

#[test]
fn web_has_no_import_circle() {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/web");
    let graph = imports(&web, "crate::web::");
    assert!(graph.len() > 3, "web: read {} files", graph.len());
    if let Some(c) = circle(&graph) {
        panic!("src/web has an import circle: {}", c.join(" -> "));
    }
}

/// src/model's wings, bottom-up (its module doc): a folder, or files at the top of src/model.
const MODEL_WINGS: [(&str, &[&str]); 7] = [
    ("inputs", &[]),
    ("dra", &[]),
    ("cluster", &["cluster"]),
    ("holding", &[]),
    ("compute", &[]),
    ("view", &[]),
    ("join", &[]),
];

/// The code of a file before its tests, comments left out.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let before_tests = text.split("#[cfg(test)]").next().unwrap_or("");
    before_tests
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each non-test file of the model: its module name (a wing's `mod.rs` takes the wing's), its
/// wing's place in `MODEL_WINGS`, and its code.
fn model_files(model: &Path) -> Vec<(String, usize, String)> {
    let mut files = Vec::new();
    for (wing, (name, single)) in MODEL_WINGS.iter().enumerate() {
        for f in *single {
            files.push((f.to_string(), wing, code_of(&model.join(format!("{f}.rs")))));
        }
        if !single.is_empty() {
            continue;
        }
        let dir = model.join(name);
        assert!(dir.is_dir(), "src/model/{name} is missing");
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let test = stem == "tests" || stem.ends_with("_tests");
            if test || path.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let module = if stem == "mod" {
                name.to_string()
            } else {
                stem
            };
            files.push((module, wing, code_of(&path)));
        }
    }
    files
}

/// The model files that `code` names (`x::`, however reached), among `names`.
fn named(code: &str, names: &BTreeSet<&str>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for name in names {
        let token = format!("{name}::");
        for (at, _) in code.match_indices(&token) {
            let before = code[..at].chars().next_back();
            if before.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_')) {
                found.insert(name.to_string());
            }
        }
    }
    found
}

#[test]
fn model_reads_in_wings() {
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model");
    let files = model_files(&model);
    assert!(files.len() > 20, "model: read {} files", files.len());
    let wing_of: BTreeMap<&str, usize> = files.iter().map(|(n, w, _)| (n.as_str(), *w)).collect();
    let names: BTreeSet<&str> = wing_of.keys().copied().collect();
    let mut within: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut up = Vec::new();
    for (name, wing, code) in &files {
        let deps = within.entry(name.clone()).or_default();
        for dep in named(code, &names).into_iter().filter(|d| d != name) {
            let dep_wing = wing_of[dep.as_str()];
            if dep_wing > *wing {
                up.push(format!(
                    "{name} ({}) imports {dep} ({})",
                    MODEL_WINGS[*wing].0, MODEL_WINGS[dep_wing].0
                ));
            } else if dep_wing == *wing {
                deps.insert(dep);
            }
        }
    }
    assert!(
        up.is_empty(),
        "imports run back up src/model's wings: {up:#?}"
    );
    if let Some(c) = circle(&within) {
        panic!(
            "a wing of src/model has an import circle: {}",
            c.join(" -> ")
        );
    }
}

#[test]
fn fake_nvml_has_no_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/fake-nvml/src");
    let graph = imports(&src, "crate::");
    assert!(graph.len() > 10, "fake-nvml: read {} files", graph.len());
    if let Some(c) = circle(&graph) {
        panic!("crates/fake-nvml has an import circle: {}", c.join(" -> "));
    }
}

#[test]
fn a_circle_is_found() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(circle(&g).unwrap(), ["a", "b", "c", "a"]);
    let mut g = g;
    g.get_mut("c").unwrap().clear();
    assert_eq!(circle(&g), None);
}
