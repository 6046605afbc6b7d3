//! The exporter holds no test double: the demo and the fakes are crates/demo.

use std::path::Path;

use super::*;

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
