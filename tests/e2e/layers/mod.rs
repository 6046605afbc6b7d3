//! The exporter (crates/exporter, crate `tessera_exporter`; `src/…` below is its `src`): `src/model`,
//! `src/web` and `crates/fake-nvml` read bottom-up: no two of their files import each other,
//! directly or around a circle. Plain types shared by several layers live in a file below all of
//! them (`holding`, `dra_claim`, `figures`, `view`; `web/settings`). `src/model` reads in wings,
//! folders in the order of its module doc: a file imports from its own wing and those below it
//! only. The crate's own modules read in layers the same way (`CRATE_LAYERS`). A new import that
//! closes a circle or runs back up a wing or a layer fails here, naming it. The exporter holds
//! no test double: the demo and the fakes are crates/demo, which the exporter never names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod crate_layers;
mod doubles;
mod model;

/// The exporter library's sources.
fn lib_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/exporter/src")
}

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
    let web = lib_src().join("web");
    let graph = imports(&web, "crate::web::");
    assert!(graph.len() > 3, "web: read {} files", graph.len());
    if let Some(c) = circle(&graph) {
        panic!("src/web has an import circle: {}", c.join(" -> "));
    }
}

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

/// Fails on an import back up the layers, or a circle within one. `modules`: each module, its
/// layer (an index into `layers`, bottom-up) and the modules it imports; `what` names the layers
/// (`src/model's wings`), `one` a single layer (`a wing of src/model`).
fn assert_layered(
    what: &str,
    one: &str,
    layers: &[&str],
    modules: &[(String, usize, BTreeSet<String>)],
) {
    let layer_of: BTreeMap<&str, usize> =
        modules.iter().map(|(n, l, _)| (n.as_str(), *l)).collect();
    let mut within: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut up = Vec::new();
    for (name, layer, imports) in modules {
        let deps = within.entry(name.clone()).or_default();
        for dep in imports.iter().filter(|d| *d != name) {
            let dep_layer = layer_of[dep.as_str()];
            if dep_layer > *layer {
                up.push(format!(
                    "{name} ({}) imports {dep} ({})",
                    layers[*layer], layers[dep_layer]
                ));
            } else if dep_layer == *layer {
                deps.insert(dep.clone());
            }
        }
    }
    assert!(up.is_empty(), "imports run back up {what}: {up:#?}");
    if let Some(c) = circle(&within) {
        panic!("{one} has an import circle: {}", c.join(" -> "));
    }
}

/// A file's code without comments and tests: a test module declared at the top (`#[cfg(test)]
/// mod tests;`) is skipped, a test item with a body ends the code as in [`code_of`].
fn code_without_tests(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut code = Vec::new();
    let mut lines = text.lines().filter(|l| !l.trim_start().starts_with("//"));
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            code.push(line);
            continue;
        }
        let item = lines.by_ref().find(|l| !l.trim_start().starts_with("#["));
        if item.is_none_or(|l| !l.trim_end().ends_with(';')) {
            break;
        }
    }
    code.join("\n")
}

/// Every `.rs` file under `dir`, tests included.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files.push(path);
            }
        }
    }
    files
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

/// The files of a module tree (`dir` and its folders), each named by its path under `dir`
/// without `.rs` (`isolate/link`); a folder's `mod.rs`, the root that declares its children
/// and holds what they share, and test files are left out, as in [`imports`].
fn tree_files(dir: &Path, under: &str, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let name = if under.is_empty() {
            stem.clone()
        } else {
            format!("{under}/{stem}")
        };
        if path.is_dir() {
            tree_files(&path, &name, out);
            continue;
        }
        let test = stem == "tests" || stem.ends_with("_tests");
        if test || stem == "mod" || path.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        out.insert(name, code_of(&path));
    }
}

/// The files of the tree that `code` (the file `name`) names: `super::…` climbs from the file's
/// module, `crate::<root>::…` starts at the tree's root; a brace group names each of its items.
fn tree_imports(
    name: &str,
    code: &str,
    root: &str,
    files: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let module: Vec<&str> = name.split('/').collect();
    let mut found = BTreeSet::new();
    let resolve = |base: &[&str], rest: &str, found: &mut BTreeSet<String>| {
        let mut path: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        for seg in rest.split("::") {
            let seg: String = seg
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if seg.is_empty() {
                return;
            }
            path.push(seg);
            let joined = path.join("/");
            if files.contains_key(&joined) {
                if joined != name {
                    found.insert(joined);
                }
                return;
            }
        }
    };
    let items = |rest: &str| -> Vec<String> {
        match rest.strip_prefix('{') {
            Some(group) => {
                let body = group.split('}').next().unwrap_or("");
                body.split(',').map(|i| i.trim().to_string()).collect()
            }
            None => vec![rest.to_string()],
        }
    };
    for (at, _) in code.match_indices("super::") {
        if code[..at].ends_with("super::") {
            continue;
        }
        let mut rest = &code[at..];
        let mut up = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            rest = r;
            up += 1;
        }
        // The file's module is `module`; `super` is its parent, and so on.
        let Some(depth) = module.len().checked_sub(up) else {
            continue;
        };
        for item in items(rest) {
            resolve(&module[..depth], &item, &mut found);
        }
    }
    let prefix = format!("crate::{root}::");
    for (at, _) in code.match_indices(&prefix) {
        for item in items(&code[at + prefix.len()..]) {
            resolve(&[], &item, &mut found);
        }
    }
    found
}

/// src/source/nvml: the worker process, its supervisors and the GPU threads share one protocol
/// module and import no one another round a circle.
#[test]
fn nvml_has_no_import_circle() {
    let dir = lib_src().join("source/nvml");
    let mut files = BTreeMap::new();
    tree_files(&dir, "", &mut files);
    assert!(files.len() > 12, "nvml: read {} files", files.len());
    let graph: BTreeMap<String, BTreeSet<String>> = files
        .iter()
        .map(|(name, code)| {
            (
                name.clone(),
                tree_imports(name, code, "source::nvml", &files),
            )
        })
        .collect();
    assert!(
        graph["isolate/supervise"].contains("isolate/link"),
        "the reader sees imports: {graph:#?}"
    );
    if let Some(c) = circle(&graph) {
        panic!("src/source/nvml has an import circle: {}", c.join(" -> "));
    }
}

#[test]
fn nvml_imports_are_read_through_braces_and_climbs() {
    let files: BTreeMap<String, String> = ["a", "b", "c", "d/e", "d/f"]
        .into_iter()
        .map(|n| (n.to_string(), String::new()))
        .collect();
    let code = "use super::super::{a, b::Thing};\nuse super::f;\nx = crate::m::c::go();";
    assert_eq!(
        tree_imports("d/e", code, "m", &files),
        ["a", "b", "c", "d/f"]
            .map(String::from)
            .into_iter()
            .collect()
    );
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

/// Every folder of the exporter, as a tree of its own: no import circle among its files, at any
/// depth: no circle of imports anywhere in the product. The crate's top-level
/// modules are held to their layers by `the_crate_reads_in_layers`.
#[test]
fn no_folder_of_the_exporter_has_an_import_circle() {
    fn folders(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.push(path.clone());
                folders(&path, out);
            }
        }
    }
    let src = lib_src();
    let mut dirs = Vec::new();
    folders(&src, &mut dirs);
    assert!(dirs.len() > 20, "read {} folders", dirs.len());
    let mut circles = Vec::new();
    for dir in &dirs {
        let rel = dir
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let root = rel.replace('/', "::");
        let mut files = BTreeMap::new();
        tree_files(dir, "", &mut files);
        let graph: BTreeMap<String, BTreeSet<String>> = files
            .iter()
            .map(|(name, code)| (name.clone(), tree_imports(name, code, &root, &files)))
            .collect();
        if let Some(c) = circle(&graph) {
            circles.push(format!("{rel}: {}", c.join(" -> ")));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}
