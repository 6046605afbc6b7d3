//! Command-line contract: bad configuration exits 2 with one line per problem; no NVML exits 1
//! with one line pointing at --demo; docs/metrics.md matches the code.

use std::process::Command;

fn tessera(args: &[&str]) -> (i32, String) {
    tessera_env(args, &[])
}

fn tessera_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env_remove("TESSERA_NVML_LIBRARY")
        .env_remove("TESSERA_DEMO")
        .envs(env.iter().copied())
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
    // The worker process that found it missing does not wrap the supervisor's wording again.
    assert_eq!(last.matches("NVML library not found").count(), 1, "{err}");
    assert!(last.contains("/nonexistent/libnvidia-ml.so.1"), "{err}");
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

/// The page documents the default build, whose `--demo` flags a build without the demo hides.
#[test]
fn the_configuration_page_is_current() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("--print-config-doc")
        .env_remove("TESSERA_DEMO")
        .output()
        .unwrap();
    let generated = String::from_utf8(out.stdout).unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        generated == on_disk,
        "docs/configuration.md is stale: run `cargo run -- --print-config-doc > docs/configuration.md`"
    );
}

#[test]
fn a_bad_environment_variable_or_file_value_names_its_source() {
    let (code, err) = tessera_env(
        &["--web.listen-address=127.0.0.1:0"],
        &[
            ("TESSERA_SAMPLE_INTERVAL", "fast"),
            ("TESSERA_DEMO", "maybe"),
        ],
    );
    assert_eq!(code, 2, "{err}");
    let mut lines: Vec<&str> = err.lines().collect();
    lines.sort();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("tessera: environment variable TESSERA_DEMO (--demo): "),
        "{err}"
    );
    assert!(
        lines[1].starts_with(
            "tessera: environment variable TESSERA_SAMPLE_INTERVAL (--sample.interval): "
        ),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, "kube.dra: sometimes\n").unwrap();
    let (code, err) = tessera(&["--config.file", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with(&format!(
            "tessera: config file {}: kube.dra: ",
            path.display()
        )),
        "{err}"
    );
}

#[test]
fn boolean_flags_need_no_value() {
    // Accepted as written in the README: the run gets as far as loading NVML (exit 1, not 2).
    let (code, err) = tessera_env(
        &[
            "--web.enable-debug",
            "--no-collect.processes",
            "--collect.mig=false",
            "--nvml.library=/nonexistent/libnvidia-ml.so.1",
        ],
        &[("TESSERA_KUBE_DRA", "yes")],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("NVML library not found"), "{err}");
}

#[test]
fn a_taken_port_is_the_last_line_and_logs_have_no_colour() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    // TESSERA_DEMO=1 as users write it; the demo needs no GPU, so only the port can fail.
    let (code, err) = tessera_env(
        &[&format!("--web.listen-address={addr}")],
        &[("TESSERA_DEMO", "1")],
    );
    assert_eq!(code, 1, "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("tessera: cannot listen on {addr}:")),
        "{err}"
    );
    assert!(err.contains("DEMO"), "the demo was not started:\n{err}");
    assert!(
        !err.contains('\u{1b}'),
        "ANSI escape codes in a log that is not a terminal:\n{err}"
    );
}

#[test]
fn install_probe_copies_the_library_and_fails_in_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, err) = tessera(&["install-probe", &dir.path().display().to_string()]);
    assert_eq!(code, 0, "{err}");
    let installed = std::fs::read(dir.path().join("libtessera_probe.so")).expect("installed");
    assert!(installed.starts_with(b"\x7fELF"), "a shared library");
    // Installing again replaces it in place and leaves no staging file behind.
    let (code, _) = tessera(&["install-probe", &dir.path().display().to_string()]);
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);
    let missing = dir.path().join("no/such/dir");
    let (code, err) = tessera(&["install-probe", &missing.display().to_string()]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot install libtessera_probe.so"), "{err}");
}

#[test]
fn a_dcgm_listener_without_dcgm_compat_exits_2() {
    let (code, err) = tessera_env(
        &["--web.dcgm-listen-address=127.0.0.1:0"],
        &[("TESSERA_METRICS_DCGM_COMPAT", "false")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs --metrics.dcgm-compat=true"), "{err}");
    let (code, err) = tessera_env(&[], &[("TESSERA_METRICS_DCGM_COMPAT", "sometimes")]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("environment variable TESSERA_METRICS_DCGM_COMPAT (--metrics.dcgm-compat)"),
        "{err}"
    );
}

#[test]
fn a_bad_fleet_node_exits_2() {
    let (code, err) = tessera_env(&["--demo"], &[("TESSERA_DEMO_FLEET_NODE", "many")]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("environment variable TESSERA_DEMO_FLEET_NODE (--demo.fleet-node)"),
        "{err}"
    );
}
