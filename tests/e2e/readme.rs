//! The README and docs index against what ships: README's sample output comes from the demo at
//! default detail (modulo values), its test command is the one CI runs, its size stays a guide's,
//! docs/configuration.md names exactly the flags `--help` does, and docs/README.md reaches every
//! page.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{fake_library, free_port, http_get, workspace};

fn read(rel: &str) -> String {
    std::fs::read_to_string(workspace().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The lines of README's fenced block that follows the `demo-sample` marker.
fn readme_sample(readme: &str) -> Vec<String> {
    let after = readme
        .split_once("<!-- demo-sample")
        .map(|(_, rest)| rest)
        .expect("README has a <!-- demo-sample --> marker before its sample output");
    let mut lines = after.lines().skip_while(|l| !l.starts_with("```"));
    lines.next();
    lines
        .take_while(|l| !l.starts_with("```"))
        .map(str::to_owned)
        .collect()
}

/// A sample line without its value, `name{labels}`, with the `node` label's value blanked: the
/// demo names its node after the host it runs on.
fn series_key(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    // Label values may hold spaces; the value follows the last closing brace, or the name.
    let key = match line.rfind('}') {
        Some(i) => &line[..=i],
        None => line.split_whitespace().next()?,
    };
    const NODE: &str = "node=\"";
    Some(match key.find(NODE) {
        Some(i) => {
            let rest = &key[i + NODE.len()..];
            let end = rest.find('"').unwrap_or(rest.len());
            format!("{}{}{}", &key[..i + NODE.len()], "<node>", &rest[end..])
        }
        None => key.to_owned(),
    })
}

struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn readme_sample_comes_from_the_default_demo() {
    let readme = read("README.md");
    let sample = readme_sample(&readme);
    assert!(
        (5..=12).contains(&sample.len()),
        "README's sample should be about 10 lines, has {}",
        sample.len()
    );
    let want: Vec<String> = sample.iter().filter_map(|l| series_key(l)).collect();
    assert_eq!(want.len(), sample.len(), "every sample line is a series");

    let port = free_port();
    // As README runs it: `--demo` and nothing else that changes the exposition.
    let _demo = Demo(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("--demo")
            .arg(format!("--nvml.library={}", fake_library().display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .env_remove("TESSERA_DEMO")
            .env_remove("TESSERA_METRICS_DETAIL")
            .env_remove("TESSERA_KUBE_NODE_NAME")
            .env_remove("NODE_NAME")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tessera --demo"),
    );
    // Some series (probe figures, energy) appear a few samples in: wait for all of them.
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut missing: Vec<&String> = want.iter().collect();
    while Instant::now() < deadline {
        if let Ok((200, _, body)) = http_get(port, "/metrics") {
            let have: BTreeSet<String> = body.lines().filter_map(series_key).collect();
            missing = want.iter().filter(|k| !have.contains(*k)).collect();
            if missing.is_empty() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!(
        "README's sample lines the demo does not serve (name and labels compared):\n{missing:#?}"
    );
}

#[test]
fn readme_keeps_the_test_command_ci_runs() {
    let readme = read("README.md");
    let ci = read(".ci/run");
    assert!(
        ci.contains("scripts/test.sh"),
        ".ci/run calls scripts/test.sh"
    );
    assert!(
        readme.contains("\ncargo run --release -- --demo ")
            && readme.contains("\nscripts/test.sh "),
        "README's two set-up commands are `cargo run --release -- --demo` and `scripts/test.sh`"
    );
}

/// Paragraphs of prose: split at blank lines and list items; code, tables, headings and HTML
/// comments are not prose.
fn paragraphs(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut fenced = false;
    for line in md.lines() {
        let t = line.trim_start();
        if t.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let list_item = t.starts_with("- ")
            || t.starts_with("* ")
            || t.split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        let not_prose = fenced
            || t.is_empty()
            || t.starts_with('|')
            || t.starts_with('#')
            || t.starts_with("<!--");
        if not_prose || list_item {
            if !cur.trim().is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            cur.clear();
            if not_prose {
                continue;
            }
        }
        cur.push(' ');
        cur.push_str(t);
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

#[test]
fn readme_reads_as_a_guide() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 150, "README has {lines} lines (at most 150)");
    let longest = paragraphs(&readme)
        .into_iter()
        .max_by_key(|p| p.split_whitespace().count())
        .unwrap_or_default();
    let words = longest.split_whitespace().count();
    assert!(
        words <= 100,
        "README's longest paragraph has {words} words (at most 100):\n{longest}"
    );
}

/// Long flags named in `text`: `--name` with dots and dashes, not followed by `=`.
fn long_flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i + 2 < b.len() {
        let starts = b[i] == b'-'
            && b[i + 1] == b'-'
            && b[i + 2].is_ascii_lowercase()
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-'));
        if starts {
            let mut j = i + 2;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'.' || b[j] == b'-') {
                j += 1;
            }
            out.insert(text[i..j].trim_end_matches(['.', '-']).to_owned());
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn configuration_doc_names_exactly_the_flags_of_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("--help")
        .output()
        .expect("tessera --help");
    let help = String::from_utf8_lossy(&out.stdout);
    let in_help: BTreeSet<String> = long_flags(&help)
        .into_iter()
        .filter(|f| f != "--help" && f != "--version")
        .collect();
    let doc = read("docs/configuration.md");
    // The table's first column: `| `--flag` | default | meaning |`.
    let in_doc: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `--"))
        .filter_map(|l| l.split('`').next())
        .map(|f| format!("--{f}"))
        .collect();
    let undocumented: Vec<_> = in_help.difference(&in_doc).collect();
    let unknown: Vec<_> = in_doc.difference(&in_help).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "docs/configuration.md and --help disagree: missing from the doc {undocumented:?}, \
         not in --help {unknown:?}"
    );
}

#[test]
fn docs_index_reaches_every_page_and_design_is_in_the_repo() {
    let index = read("docs/README.md");
    let docs = workspace().join("docs");
    let mut pages: Vec<String> = std::fs::read_dir(&docs)
        .expect("docs/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "README.md")
        .collect();
    pages.sort();
    let unlinked: Vec<_> = pages
        .iter()
        .filter(|p| !index.contains(&format!("]({p})")))
        .collect();
    assert!(
        unlinked.is_empty(),
        "docs/README.md does not link {unlinked:?}"
    );
    assert!(read("README.md").contains("](docs/README.md)"));

    // Every pointer to the design document names the copy in the repository.
    for dir in ["src", "docs", "crates"] {
        for path in files(&workspace().join(dir)) {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for (n, line) in text.lines().enumerate() {
                let stale = line.contains("DESIGN.md") || line.contains("DESIGN in the README");
                assert!(
                    !stale,
                    "{}:{}: cites a design file outside the repository",
                    path.display(),
                    n + 1
                );
            }
        }
    }
}

fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target" || n == "data") {
                continue;
            }
            out.extend(files(&p));
        } else if p.extension().is_some_and(|x| x == "rs" || x == "md") {
            out.push(p);
        }
    }
    out
}

/// The folders a newcomer meets, by name: every top-level folder, every folder of src/ and every
/// crate must appear at the start of a line of CONTRIBUTING.md's Repository map (which README
/// links to), so that moving or adding one without saying where fails here.
#[test]
fn the_repository_map_names_every_folder() {
    let contributing = read("CONTRIBUTING.md");
    let start = contributing
        .find("## Repository")
        .expect("CONTRIBUTING.md has a Repository section");
    let map: String = contributing[start..]
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .map(|l| format!("{l}\n"))
        .collect();
    let dirs = |rel: &str| -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(workspace().join(rel))
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.') && n != "target")
            .collect();
        out.sort();
        out
    };
    let mut missing = Vec::new();
    for d in dirs(".") {
        if !map
            .split_whitespace()
            .any(|w| w.starts_with(&format!("{d}/")))
        {
            missing.push(format!("{d}/"));
        }
    }
    // The exporter's folders are named as the map lists them, under crates/exporter/: `src/…`.
    for (parent, prefix) in [
        ("src", "src/"),
        ("crates/exporter/src", "src/"),
        ("crates", "crates/"),
    ] {
        for d in dirs(parent) {
            let name = format!("{prefix}{d}");
            if !map
                .split_whitespace()
                .any(|w| w.trim_end_matches('/') == name)
            {
                missing.push(name);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "CONTRIBUTING.md's Repository map does not name {missing:?}:\n{map}"
    );
}
