//! Helpers shared by the integration tests. They load the built cdylib the
//! way tessera does (nvml-wrapper with `lib_path`) and never link the
//! fake-nvml rlib, so the only NVML state in the process is the library's.
#![allow(dead_code)]

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

pub const SCENARIO_ENV: &str = "TESSERA_FAKE_NVML_SCENARIO";
pub const MIB: u64 = 1 << 20;

/// The cdylib next to the test binary (`target/<profile>/deps/`), else one
/// level up (`target/<profile>/`). `cargo test` rebuilds the one in `deps`
/// but only `cargo build` refreshes the copy above it, so `deps` comes first.
pub fn lib_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    for dir in [deps, deps.parent().expect("profile directory")] {
        let candidate = dir.join("libfake_nvml.so");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("libfake_nvml.so not found next to {}", exe.display());
}

pub fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

/// Writes an ad-hoc scenario into the temp directory and returns its path.
pub fn write_scenario(name: &str, yaml: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("fake-nvml-{}-{name}.yaml", std::process::id()));
    std::fs::write(&path, yaml).expect("write scenario");
    path
}

pub fn init(scenario: &Path) -> Result<Nvml, NvmlError> {
    std::env::set_var(SCENARIO_ENV, scenario);
    Nvml::builder().lib_path(lib_path().as_os_str()).init()
}

/// One NVML for every test in a binary whose tests share a scenario; NVML
/// (and so the fake) is a process-wide singleton, and it is never shut down.
pub fn shared(scenario_name: &str) -> &'static Nvml {
    static NVML: OnceLock<Nvml> = OnceLock::new();
    NVML.get_or_init(|| init(&scenario(scenario_name)).expect("nvmlInit with the fake library"))
}

/// For binaries whose tests each init their own scenario: one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The symbol names the library promises, read from its source so the list
/// cannot drift from what `nvmlInit` accepts in fault injection.
pub fn exported_symbols() -> Vec<String> {
    let src = include_str!("../../src/calls.rs");
    let start = src.find("pub const EXPORTED").expect("EXPORTED list");
    let end = start + src[start..].find("];").expect("end of EXPORTED");
    src[start..end]
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Says that a part of a test could not run here, and why: printed (to the terminal, past the
/// harness' capture) and, under scripts/test.sh, added to the run's list of skipped checks
/// (`$TESSERA_TEST_LOGS/skipped.txt`), which the stage table counts. A check that cannot run
/// must say so, never pass silently.
pub fn report_skipped(test: &str, reason: &str) {
    use std::io::Write;
    let line = format!("SKIPPED: {test}: {reason}");
    // The harness captures stdout and stderr of passing tests; the terminal is not captured.
    if let Ok(mut tty) = std::fs::OpenOptions::new().write(true).open("/dev/tty") {
        let _ = writeln!(tty, "{line}");
    }
    eprintln!("{line}");
    if let Some(dir) = std::env::var_os("TESSERA_TEST_LOGS") {
        let path = Path::new(&dir).join("skipped.txt");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        if let Ok(mut f) = file {
            let _ = writeln!(f, "{line}");
        }
    }
}
