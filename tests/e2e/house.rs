//! The repository as a newcomer meets it: docs a user reads, a lab that holds summaries and
//! not raw records, no history in the product's comments.

use std::path::Path;

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

/// Raw records are regenerated on a GPU host, not kept (lab/README.md, "Raw records"): no
/// tracked file passes 1 MB, the lab keeps summaries within 5 MB, and a clone's tree stays small
/// enough to travel beside builds to a GPU host.
const FILE_MAX_BYTES: u64 = 1_000_000;
const LAB_MAX_BYTES: u64 = 5_000_000;
const TREE_MAX_BYTES: u64 = 16_000_000;

/// The tracked files and their sizes.
fn tracked_files(root: &Path) -> Vec<(String, u64)> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .expect("git ls-files runs (the checks read the tracked tree)");
    assert!(out.status.success(), "git ls-files: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
        // A file deleted in the work tree but not yet in the index weighs nothing.
        .filter_map(|p| Some((p.to_string(), root.join(p).metadata().ok()?.len())))
        .collect()
}

/// What is over the size bounds among `files`, in words; empty when nothing is.
fn sizes_over_bounds(files: &[(String, u64)]) -> Vec<String> {
    let mut over: Vec<String> = files
        .iter()
        .filter(|(_, n)| *n > FILE_MAX_BYTES)
        .map(|(p, n)| format!("{p} has {n} bytes, more than {FILE_MAX_BYTES}"))
        .collect();
    let lab: u64 = files
        .iter()
        .filter(|(p, _)| p.starts_with("lab/"))
        .map(|(_, n)| n)
        .sum();
    if lab > LAB_MAX_BYTES {
        over.push(format!("lab/ holds {lab} bytes, more than {LAB_MAX_BYTES}"));
    }
    let tree: u64 = files.iter().map(|(_, n)| n).sum();
    if tree > TREE_MAX_BYTES {
        over.push(format!(
            "the tracked tree holds {tree} bytes, more than {TREE_MAX_BYTES}"
        ));
    }
    over
}

#[test]
fn the_tracked_tree_holds_no_raw_records() {
    let files = tracked_files(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(files.len() > 500, "read {} tracked files", files.len());
    let over = sizes_over_bounds(&files);
    assert!(over.is_empty(), "{over:#?}");
}

#[test]
fn sizes_over_their_bounds_are_found() {
    let mut files = vec![("src/main.rs".to_string(), 10_000)];
    assert!(sizes_over_bounds(&files).is_empty());
    files.push(("lab/data/run/records.tar.xz".into(), FILE_MAX_BYTES + 1));
    assert_eq!(sizes_over_bounds(&files).len(), 1);
    files.extend((0..5).map(|i| (format!("lab/data/{i}.xz"), FILE_MAX_BYTES)));
    files.push(("tests/data/big".into(), TREE_MAX_BYTES));
    // The big test file counts twice: over the bound for one file, and in the tree's.
    assert_eq!(
        sizes_over_bounds(&files).len(),
        4,
        "{:#?}",
        sizes_over_bounds(&files)
    );
}

/// Where `text` names an issue or a run by number (`issue 42`, `run 13`): history, which
/// belongs in lab/diaries and the CHANGELOG, not in the product's code.
fn history_in(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let hit = ["issue ", "Issue ", "run ", "Run "].iter().any(|word| {
            line.match_indices(word).any(|(at, w)| {
                let before = line[..at].chars().next_back();
                let after = line[at + w.len()..].chars().next();
                before.is_none_or(|c| c.is_whitespace() || "(`\"'".contains(c))
                    && after.is_some_and(|c| c.is_ascii_digit())
            })
        });
        if hit {
            found.push(n + 1);
        }
    }
    found
}

/// The `.rs` files under `dir`.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    files_with(dir, &["rs"], out);
}

/// The files under `dir` whose extension is one of `extensions`.
fn files_with(dir: &Path, extensions: &[&str], out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_with(&path, extensions, out);
        } else if path
            .extension()
            .is_some_and(|x| extensions.iter().any(|e| x == *e))
        {
            out.push(path);
        }
    }
}

#[test]
fn the_products_code_carries_no_issue_history() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    assert!(files.len() > 100, "read {} files", files.len());
    // The scripts that build and test it are code too.
    let rust = files.len();
    files_with(&root.join("scripts"), &["sh", "py"], &mut files);
    assert!(
        files.len() > rust + 20,
        "read {} scripts",
        files.len() - rust
    );
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for line in history_in(&text) {
            found.push(format!(
                "{}:{line}",
                f.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(found.is_empty(), "issue or run numbers in code: {found:#?}");
}

#[test]
fn history_in_a_comment_is_found() {
    assert_eq!(
        history_in("// Until issue 42, nothing.\nlet run = 3;\n// run 13's reads"),
        [1, 3]
    );
    assert!(history_in("// rerun 5 times; a dry-run 3 s long\nlet issue = 4;").is_empty());
}

/// Label writes by position (`l[3].1 = …`): a label's place in a list is no name, and a list
/// that grows a label in front silently relabels every series.
fn positional_label_writes(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let hit = line.match_indices("].").any(|(at, _)| {
            let open = line[..at].rfind('[');
            let index_is_number = open.is_some_and(|o| {
                let inside = &line[o + 1..at];
                !inside.is_empty() && inside.chars().all(|c| c.is_ascii_digit())
            });
            let rest = &line[at + 2..];
            let field: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            index_is_number
                && !field.is_empty()
                && rest[field.len()..].trim_start().starts_with("= ")
        });
        if hit {
            found.push(n + 1);
        }
    }
    found
}

#[test]
fn labels_are_set_by_name() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/exporter/src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            positional_label_writes(&text)
                .into_iter()
                .map(move |n| format!("{}:{n}", f.display()))
        })
        .collect();
    assert!(found.is_empty(), "labels written by position: {found:#?}");
}

#[test]
fn a_positional_label_write_is_found() {
    assert_eq!(
        positional_label_writes("let mut l = x;\n    l[3].1 = mode.into();\n"),
        [2]
    );
    assert!(
        positional_label_writes("let a = v[0].1;\nif l[3].1 == x {}\nlabels[i].1 = y;").is_empty()
    );
}
