//! src/model reads in wings, and within a wing in the order its module doc states.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::*;

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
