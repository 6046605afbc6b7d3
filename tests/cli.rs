//! Command-line contract: bad configuration exits 2 with one line per problem; no NVML exits 1
//! with one line pointing at --demo; docs/metrics.md matches the code.

use std::process::Command;

fn tessera(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env_remove("TESSERA_NVML_LIBRARY")
        .output()
        .expect("run tessera");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_bad_value_is_reported_and_exits_2() {
    let (code, err) = tessera(&[
        "--web.listen-address=nope",
        "--sample.interval=fast",
        "--log.format=xml",
    ]);
    assert_eq!(code, 2, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "one line per problem:\n{err}");
    assert!(lines.iter().all(|l| l.starts_with("tessera: --")), "{err}");
}

#[test]
fn unknown_flag_exits_2() {
    let (code, _) = tessera(&["--no-such-flag"]);
    assert_eq!(code, 2);
}

#[test]
fn bad_config_file_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, "sample.interval: [not, a, duration\n").unwrap();
    let (code, err) = tessera(&["--config.file", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("tessera: cannot read config file"), "{err}");
}

#[test]
fn missing_nvml_is_one_clear_line_and_exit_1() {
    let (code, err) = tessera(&[
        "--nvml.library=/nonexistent/libnvidia-ml.so.1",
        "--web.listen-address=127.0.0.1:0",
    ]);
    assert_eq!(code, 1, "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("NVML library not found") && last.contains("--demo"),
        "{err}"
    );
}

#[test]
fn metrics_doc_is_current() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("--print-metrics-doc")
        .output()
        .unwrap();
    let generated = String::from_utf8(out.stdout).unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md");
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        generated == on_disk,
        "docs/metrics.md is stale: run `cargo run -- --print-metrics-doc > docs/metrics.md`"
    );
}
