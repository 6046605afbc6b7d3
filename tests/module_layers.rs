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

/// src/model's wings, bottom-up (its module doc): a folder, or files at the top of src/model.
const MODEL_WINGS: [(&str, &[&str]); 8] = [
    ("inputs", &[]),
    ("dra", &[]),
    ("cluster", &["cluster"]),
    ("holding", &[]),
    ("compute", &[]),
    ("energy", &[]),
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

/// One non-test file of the model.
struct ModelFile {
    /// Its module name; a wing's `mod.rs` takes the wing's.
    name: String,
    /// Its wing's place in `MODEL_WINGS`.
    wing: usize,
    /// Whether it is a folder wing's file other than its `mod.rs`, whose `super::` is the wing.
    in_folder: bool,
    code: String,
}

/// Each non-test file of the model.
fn model_files(model: &Path) -> Vec<ModelFile> {
    let mut files = Vec::new();
    for (wing, (name, single)) in MODEL_WINGS.iter().enumerate() {
        for f in *single {
            files.push(ModelFile {
                name: f.to_string(),
                wing,
                in_folder: false,
                code: code_of(&model.join(format!("{f}.rs"))),
            });
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
            let in_folder = stem != "mod";
            let module = if in_folder { stem } else { name.to_string() };
            files.push(ModelFile {
                name: module,
                wing,
                in_folder,
                code: code_of(&path),
            });
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

/// The items a path names after `rest` (what follows `super::` or `crate::…::`): one, or
/// each of a brace group's.
fn path_items(rest: &str) -> Vec<String> {
    match rest.strip_prefix('{') {
        Some(group) => group
            .split('}')
            .next()
            .unwrap_or("")
            .split(',')
            .map(|i| i.trim().to_string())
            .collect(),
        None => vec![rest.to_string()],
    }
}

/// The first segment of a path item (`a` of `a::B`, `x` of `x as y`).
fn first_segment(item: &str) -> String {
    item.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The model files that a file's code imports: every `x::` naming one (`super::x::`,
/// `crate::model::x::`, `x::` after a `use`), and the wing's own module for an item that a
/// folder's file reaches through `super::` (or `crate::model::<wing>::`) without naming a file:
/// an item the wing's `mod.rs` defines or re-exports.
fn model_imports(f: &ModelFile, names: &BTreeSet<&str>) -> BTreeSet<String> {
    let mut found = named(&f.code, names);
    if f.in_folder {
        let wing = MODEL_WINGS[f.wing].0;
        let wing_path = format!("crate::model::{wing}::");
        let climbs = f
            .code
            .match_indices("super::")
            .filter(|(at, _)| !f.code[..*at].ends_with("super::"))
            .map(|(at, m)| &f.code[at + m.len()..])
            .chain(
                f.code
                    .match_indices(&wing_path)
                    .map(|(at, m)| &f.code[at + m.len()..]),
            );
        for rest in climbs {
            for item in path_items(rest) {
                let seg = first_segment(&item);
                if !seg.is_empty() && seg != "super" && !names.contains(seg.as_str()) {
                    found.insert(wing.to_string());
                }
            }
        }
    }
    found.remove(&f.name);
    found
}

/// Each wing's files in the order src/model's module doc states them, bottom-up: the names in
/// backticks of the doc's line for that wing (`` `compute/`: `figures`, …, then `compute`
/// itself … ``), paths and file names left out.
fn stated_orders(model_doc: &str) -> BTreeMap<String, Vec<String>> {
    let mut bullets: Vec<String> = Vec::new();
    for line in model_doc.lines().filter_map(|l| l.strip_prefix("//!")) {
        if let Some(b) = line.strip_prefix(" - ") {
            bullets.push(b.to_string());
        } else if let (Some(last), true) = (bullets.last_mut(), line.starts_with("   ")) {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    let mut orders = BTreeMap::new();
    for b in bullets {
        let quoted: Vec<&str> = b.split('`').skip(1).step_by(2).collect();
        let Some(first) = quoted.first() else {
            continue;
        };
        let wing = first.trim_end_matches('/').to_string();
        let files = quoted
            .iter()
            .skip(usize::from(first.ends_with('/')))
            .filter(|q| q.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .map(|q| q.to_string())
            .collect();
        orders.insert(wing, files);
    }
    orders
}

/// Where a wing's files climb the order the module doc states, and the files the doc leaves
/// out, in words.
fn climbs_of_the_stated_order(
    files: &[ModelFile],
    imports: &[BTreeSet<String>],
    orders: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (f, deps) in files.iter().zip(imports) {
        let wing = MODEL_WINGS[f.wing].0;
        let order = orders.get(wing).map(Vec::as_slice).unwrap_or(&[]);
        let Some(rank) = order.iter().position(|n| *n == f.name) else {
            wrong.push(format!("{wing}: model/mod.rs does not place `{}`", f.name));
            continue;
        };
        for dep in deps {
            let same_wing = files.iter().any(|g| g.name == *dep && g.wing == f.wing);
            match order.iter().position(|n| n == dep) {
                Some(at) if same_wing && at > rank => wrong.push(format!(
                    "{wing}: {} imports {dep}, which the order places above it",
                    f.name
                )),
                _ => {}
            }
        }
    }
    wrong
}

#[test]
fn model_reads_in_wings() {
    let model = lib_src().join("model");
    let files = model_files(&model);
    assert!(files.len() > 20, "model: read {} files", files.len());
    let names: BTreeSet<&str> = files.iter().map(|f| f.name.as_str()).collect();
    let imports: Vec<_> = files.iter().map(|f| model_imports(f, &names)).collect();
    let modules: Vec<_> = files
        .iter()
        .zip(&imports)
        .map(|(f, deps)| (f.name.clone(), f.wing, deps.clone()))
        .collect();
    let doc = std::fs::read_to_string(model.join("mod.rs")).unwrap();
    let orders = stated_orders(&doc);
    assert!(orders.len() >= 7, "the module doc's wings: {orders:?}");
    let wrong = climbs_of_the_stated_order(&files, &imports, &orders);
    assert!(
        wrong.is_empty(),
        "src/model against its stated order: {wrong:#?}"
    );
    let wings: Vec<&str> = MODEL_WINGS.iter().map(|(w, _)| *w).collect();
    assert_layered("src/model's wings", "a wing of src/model", &wings, &modules);
}

/// A folder's file that reaches its wing's `mod.rs` through `super::` climbs above itself when
/// the doc places it below the wing, and is found; so is a file the doc leaves out.
#[test]
fn a_super_climb_of_the_stated_order_is_found() {
    let doc =
        "//! Model.\n//! - `w/`: `low`, `mid`, then `w` itself (`w/mod.rs`),\n//!   and `high`\n";
    let orders = stated_orders(doc);
    assert_eq!(orders["w"], ["low", "mid", "w", "high"]);
    let file = |name: &str, in_folder: bool, code: &str| ModelFile {
        name: name.to_string(),
        wing: MODEL_WINGS
            .iter()
            .position(|(w, _)| *w == "compute")
            .unwrap(),
        in_folder,
        code: code.to_string(),
    };
    let mut orders = orders;
    orders.insert("compute".into(), orders["w"].clone());
    orders.get_mut("compute").unwrap()[2] = "compute".into();
    let files = vec![
        file("low", true, "use super::{Shared, mid::Thing};"),
        file("mid", true, "use super::low::x;"),
        file(
            "compute",
            false,
            "use self::mid::Thing;\nuse super::Sample;",
        ),
        file("high", true, "use super::Everything;"),
        file("stray", true, ""),
    ];
    let names: BTreeSet<&str> = files.iter().map(|f| f.name.as_str()).collect();
    let imports: Vec<_> = files.iter().map(|f| model_imports(f, &names)).collect();
    assert_eq!(
        imports[0],
        ["compute", "mid"].map(String::from).into_iter().collect()
    );
    let wrong = climbs_of_the_stated_order(&files, &imports, &orders);
    assert_eq!(
        wrong,
        [
            "compute: low imports compute, which the order places above it",
            "compute: low imports mid, which the order places above it",
            "compute: model/mod.rs does not place `stray`",
        ]
    );
}

/// The library's top-level modules, bottom-up: a module imports (`crate::x`) from its own layer
/// and those below only, and a layer has no circle. src/main.rs, the binary (and crates/demo,
/// which it links with the `demo` feature), stands above them all. docs/design.md ("Adding a setting or a source") counts a flag's path against these.
const CRATE_LAYERS: [(&str, &[&str]); 5] = [
    // Values and decisions: flag text into typed values; the pure model.
    ("base", &["options", "model"]),
    // What the exporter is built from: the sources, the exposition, HTTP serving, the log.
    ("components", &["source", "metrics", "web", "log"]),
    // The one writer: reads the sources, joins, encodes, publishes.
    ("sampler", &["sampler"]),
    // What runs beside it: the scrape routes, the subcommands.
    ("services", &["server", "install", "advise"]),
    // The assembly: every component's flags gathered and resolved into `Settings` (config),
    // and the exporter built from them (app).
    ("assembly", &["config", "app"]),
];

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

/// The code of a top-level module: `src/<name>.rs`, or every file under `src/<name>/`, tests
/// left out.
fn module_code(src: &Path, name: &str) -> String {
    let file = src.join(format!("{name}.rs"));
    if file.is_file() {
        return code_without_tests(&file);
    }
    let mut code = String::new();
    let mut dirs = vec![src.join(name)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let test = stem == "tests" || stem.ends_with("_tests");
            if !test && path.extension().is_some_and(|x| x == "rs") {
                code.push_str(&code_without_tests(&path));
                code.push('\n');
            }
        }
    }
    code
}

#[test]
fn the_crate_reads_in_layers() {
    let src = lib_src();
    let layer_of: BTreeMap<&str, usize> = CRATE_LAYERS
        .iter()
        .enumerate()
        .flat_map(|(layer, (_, modules))| modules.iter().map(move |m| (*m, layer)))
        .collect();
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
        .collect();
    let placed: BTreeSet<&str> = layer_of.keys().copied().collect();
    assert_eq!(
        declared, placed,
        "src/lib.rs's modules and CRATE_LAYERS differ"
    );
    let modules: Vec<_> = layer_of
        .iter()
        .map(|(name, layer)| {
            let code = module_code(&src, name);
            let imports = layer_of
                .keys()
                .filter(|dep| {
                    let token = format!("crate::{dep}");
                    code.match_indices(&token).any(|(at, _)| {
                        let after = code[at + token.len()..].chars().next();
                        after.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
                    })
                })
                .map(|dep| dep.to_string())
                .collect();
            (name.to_string(), *layer, imports)
        })
        .collect();
    let layers: Vec<&str> = CRATE_LAYERS.iter().map(|(l, _)| *l).collect();
    assert_layered(
        "the crate's layers",
        "a layer of the crate",
        &layers,
        &modules,
    );
}

/// Each line of code (comments left out, tests included) in a `.rs` file under `dir` that names
/// a demo or fakes, in any case: a flag, a type, a field or a string.
fn code_naming_doubles(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for path in rust_files(dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            // A comment, whole-line or trailing (` // `, so a URL's `//` stays code).
            let code = match line.trim_start() {
                l if l.starts_with("//") => "",
                l => l.split_once(" // ").map_or(l, |(code, _)| code),
            };
            let lower = code.to_lowercase();
            if lower.contains("demo") || lower.contains("fakes") {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    found
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

/// Why `lib` (a crate's `src`, with its manifest beside it) holds a test double: a demo or fake
/// module, a `demo` feature, fake-nvml as a dependency, or a line of code naming a demo or fakes.
fn test_doubles_in(src: &Path) -> Vec<String> {
    let mut found = code_naming_doubles(src);
    for name in ["demo", "fakes"] {
        for path in [src.join(name), src.join(format!("{name}.rs"))] {
            if path.exists() {
                found.push(format!("{} exists", path.display()));
            }
        }
    }
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    for line in lib.lines().map(str::trim) {
        let item = line.strip_prefix("pub ").unwrap_or(line);
        if item.starts_with("mod demo") || item.starts_with("mod fakes") {
            found.push(format!("lib.rs declares `{line}`"));
        }
    }
    let manifest = std::fs::read_to_string(src.join("../Cargo.toml")).unwrap();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with("demo =") || line.starts_with("fake-nvml") {
            found.push(format!("Cargo.toml has `{line}`"));
        }
    }
    found
}

/// Release images build the binary without the demo; the exporter itself must not carry it
/// either, so that no build of the library can serve fake data (crates/demo holds it).
#[test]
fn the_exporter_holds_no_demo_or_fake() {
    let found = test_doubles_in(&lib_src());
    assert!(
        found.is_empty(),
        "the exporter holds test doubles: {found:?}"
    );
}

/// A line of code naming the demo is found; one that only mentions it in a comment is not.
#[test]
fn code_naming_the_demo_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cli.rs");
    std::fs::write(
        &file,
        "/// Serve the demo.\nlet x = 1; // the demo\nlet url = \"http://x\";\n",
    )
    .unwrap();
    assert!(code_naming_doubles(dir.path()).is_empty());
    for code in [
        "pub demo: DemoArgs,",
        "#[arg(long = \"Demo\")]",
        "use crate::fakes::kubelet;",
    ] {
        std::fs::write(&file, format!("//! A module.\n{code}\n")).unwrap();
        let found = code_naming_doubles(dir.path());
        assert_eq!(found.len(), 1, "{code}: {found:?}");
        assert!(found[0].ends_with(&format!(":2: {code}")), "{found:?}");
    }
}

/// Every `.rs` file under `dir`, tests and comments included, that names the demo crate.
fn files_naming_the_demo(dir: &Path) -> Vec<String> {
    rust_files(dir)
        .into_iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            text.contains("tessera_demo") || text.contains("tessera-demo")
        })
        .map(|path| path.display().to_string())
        .collect()
}

/// The demo depends on the exporter, never the other way: no product module (tests included)
/// imports it, and the manifest does not name it.
#[test]
fn no_product_module_imports_the_demo() {
    let src = lib_src();
    let naming = files_naming_the_demo(&src);
    assert!(naming.is_empty(), "the exporter names the demo: {naming:?}");
    let manifest = std::fs::read_to_string(src.join("../Cargo.toml")).unwrap();
    assert!(
        !manifest.contains("tessera-demo"),
        "crates/exporter/Cargo.toml names the demo"
    );
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

/// docs/ holds what a user reads; run data, run diaries and GPU scripts live in lab/
/// (CONTRIBUTING.md). These bounds keep the lab from growing back into docs/.
const DOCS_MAX_BYTES: u64 = 1_000_000;
const VALIDATION_MAX_LINES: usize = 300;

fn tree_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            if p.is_dir() {
                tree_bytes(&p)
            } else {
                p.metadata().unwrap().len()
            }
        })
        .sum()
}

/// What is over the bounds in a docs folder, in words; empty when nothing is.
fn docs_over_bounds(docs: &Path) -> Vec<String> {
    let mut over = Vec::new();
    let bytes = tree_bytes(docs);
    if bytes > DOCS_MAX_BYTES {
        over.push(format!(
            "docs/ holds {bytes} bytes, more than {DOCS_MAX_BYTES}: run data belongs in lab/data/"
        ));
    }
    let lines = std::fs::read_to_string(docs.join("validation.md"))
        .unwrap()
        .lines()
        .count();
    if lines > VALIDATION_MAX_LINES {
        over.push(format!(
            "docs/validation.md has {lines} lines, more than {VALIDATION_MAX_LINES}: \
             run diaries belong in lab/diaries/"
        ));
    }
    over
}

#[test]
fn docs_stay_small() {
    let over = docs_over_bounds(&Path::new(env!("CARGO_MANIFEST_DIR")).join("docs"));
    assert!(over.is_empty(), "{over:#?}");
}

#[test]
fn docs_over_their_bounds_are_found() {
    let dir = std::env::temp_dir().join(format!("tessera-docs-bounds-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let page = dir.join("validation.md");
    std::fs::write(&page, "line\n".repeat(VALIDATION_MAX_LINES)).unwrap();
    assert!(docs_over_bounds(&dir).is_empty());
    std::fs::write(&page, "line\n".repeat(VALIDATION_MAX_LINES + 1)).unwrap();
    let data = vec![b'x'; DOCS_MAX_BYTES as usize];
    std::fs::write(dir.join("data/run.jsonl"), data).unwrap();
    let over = docs_over_bounds(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(over.len(), 2, "{over:#?}");
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
