//! `src/model`, `src/web` and `crates/fake-nvml` read bottom-up: no two of their files import
//! each other, directly or around a circle. Plain types shared by several layers live in a file below all of them
//! (`holding`, `dra_claim`, `figures`, `view`; `web/settings`). A new import that closes a
//! circle fails here, naming the circle.

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
fn model_and_web_have_no_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for module in ["model", "web"] {
        let graph = imports(&root.join(module), &format!("crate::{module}::"));
        assert!(graph.len() > 3, "{module}: read {} files", graph.len());
        if let Some(c) = circle(&graph) {
            panic!("src/{module} has an import circle: {}", c.join(" -> "));
        }
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
