//! The library's top-level modules read in layers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::*;

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
