//! Shared harness for end-to-end tests: run the real `tessera` binary against the fake NVML
//! library and scrape it over HTTP.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The runtime the fake kubelet and API server run on while a test drives the exporter.
pub fn fake_cluster_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// tessera depends on the fake-nvml crate, so cargo builds the cdylib into `deps/` beside the
/// binary; a copy one level up exists only when fake-nvml itself was built, and can be stale.
pub fn fake_library() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_tessera"));
    let lib = bin
        .parent()
        .map(|d| d.join("deps").join("libfake_nvml.so"))
        .unwrap_or_default();
    assert!(
        lib.is_file(),
        "fake NVML library missing at {}",
        lib.display()
    );
    lib
}

pub fn scenario(name: &str) -> PathBuf {
    workspace().join("crates/fake-nvml/scenarios").join(name)
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port")
}

/// A plain HTTP/1.0 GET, enough for tests without an HTTP client dependency.
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String, String)> {
    let (status, head, body) = http_get_raw(port, path, "")?;
    let body = String::from_utf8(body)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok((status, head, body))
}

/// The same with extra request header lines (each ending in CRLF); the body as bytes.
pub fn http_get_raw(
    port: u16,
    path: &str,
    headers: &str,
) -> std::io::Result<(u16, String, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n{headers}\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let body = raw.get(split + 4..).unwrap_or_default().to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, head, body))
}

pub struct Exporter {
    pub child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    _cpu: tessera_demo::repeat::Repeating,
}

type ProcfsHook = Box<dyn FnOnce(&Path)>;

pub struct ExporterBuilder {
    scenario: PathBuf,
    env: Vec<(String, std::ffi::OsString)>,
    procfs_hook: Option<ProcfsHook>,
    /// Talk to a kubelet and an API server (the test passes their flags); off by default.
    cluster: bool,
    args: Vec<String>,
    procfs: Vec<(u32, Vec<u8>)>,
    /// Lead a process group of its own (its workers in it), as a service manager starts it.
    own_process_group: bool,
}

impl ExporterBuilder {
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn env(mut self, key: &str, value: impl Into<std::ffi::OsString>) -> Self {
        self.env.push((key.to_owned(), value.into()));
        self
    }

    /// Adds files to the procfs tree before the exporter starts (e.g. cgroup files).
    pub fn with_procfs(mut self, hook: impl FnOnce(&Path) + 'static) -> Self {
        self.procfs_hook = Some(Box::new(hook));
        self
    }

    /// Starts the exporter as the leader of a process group of its own, so a test can signal
    /// the group as a terminal's Ctrl-C or systemd's stop does ([`Exporter::stop_group`]).
    pub fn own_process_group(mut self) -> Self {
        self.own_process_group = true;
        self
    }

    pub fn with_cluster(mut self) -> Self {
        self.cluster = true;
        self
    }

    /// Runs against a fake cluster: the fake API server at `api_url` (kubeconfig in `dir`),
    /// the pods' cgroups in the procfs tree and the fake kubelet on `kubelet_socket`.
    pub fn in_fake_cluster(
        self,
        dir: &Path,
        api_url: &str,
        plans: Vec<tessera_demo::cluster::PodPlan>,
        kubelet_socket: &Path,
    ) -> Self {
        use tessera_demo::cluster;
        self.with_cluster()
            .env(
                "KUBECONFIG",
                cluster::write_kubeconfig(dir, api_url).expect("kubeconfig"),
            )
            .with_procfs(move |root| cluster::write_cgroups(&plans, root).expect("cgroups"))
            .arg(format!(
                "--kubelet.pod-resources-socket={}",
                kubelet_socket.display()
            ))
            .arg("--kubelet.poll-interval=1s")
    }

    /// A process name to put in the test's procfs tree.
    pub fn comm(mut self, pid: u32, name: &[u8]) -> Self {
        self.procfs.push((pid, name.to_vec()));
        self
    }

    pub fn start(self) -> Exporter {
        let exporter = self.start_unready();
        exporter.wait_until("ready", |e| {
            e.get("/readyz").map(|(s, _)| s == 200).unwrap_or(false)
        });
        exporter
    }

    /// Starts without waiting for readiness (for exporters that must not become ready).
    pub fn start_unready(self) -> Exporter {
        let dir = tempfile::tempdir().expect("tempdir");
        let procfs = dir.path().join("proc");
        let scenario_text = std::fs::read_to_string(&self.scenario).expect("scenario");
        tessera_demo::write_procfs(&scenario_text, &procfs).expect("procfs from scenario");
        let cpu = tessera_demo::cpu::start(&scenario_text, &procfs).expect("cpu ticker");
        for (pid, name) in &self.procfs {
            let d = procfs.join(pid.to_string());
            std::fs::create_dir_all(&d).expect("procfs");
            let mut name = name.clone();
            name.push(b'\n');
            std::fs::write(d.join("comm"), name).expect("comm");
        }
        std::fs::create_dir_all(&procfs).expect("procfs");
        if let Some(hook) = self.procfs_hook {
            hook(&procfs);
        }
        let port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
        if self.own_process_group {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        let child = command
            .arg(format!("--nvml.library={}", fake_library().display()))
            .arg(format!("--path.procfs={}", procfs.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--kube.node-name=test-node")
            // A test that passes its own --sample.interval gets that instead.
            .args(
                (!self.args.iter().any(|a| a.starts_with("--sample.interval")))
                    .then_some("--sample.interval=100ms"),
            )
            .arg("--activity.window=2s")
            .args(if self.cluster {
                &[][..]
            } else {
                &["--kubelet.enabled=false", "--kube.enabled=false"][..]
            })
            // Every family, so the e2e tests and goldens cover the whole surface; a test
            // that passes its own --metrics.detail gets that instead.
            .args(
                (!self.args.iter().any(|a| a.starts_with("--metrics.detail")))
                    .then_some("--metrics.detail=full"),
            )
            .args(&self.args)
            .env("TESSERA_FAKE_NVML_SCENARIO", &self.scenario)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tessera");
        Exporter {
            child,
            port,
            dir,
            _cpu: cpu,
        }
    }
}

impl Exporter {
    pub fn builder(scenario: impl AsRef<Path>) -> ExporterBuilder {
        ExporterBuilder {
            scenario: scenario.as_ref().to_path_buf(),
            env: Vec::new(),
            procfs_hook: None,
            cluster: false,
            args: Vec::new(),
            procfs: Vec::new(),
            own_process_group: false,
        }
    }

    pub fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        http_get(self.port, path).map(|(s, _, b)| (s, b))
    }

    pub fn metrics(&self) -> String {
        let (status, body) = self.get("/metrics").expect("scrape");
        assert_eq!(status, 200, "scrape failed: {body}");
        body
    }

    /// Polls until `cond` holds, or panics after 20 s with `what`.
    pub fn wait_until(&self, what: &str, mut cond: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if cond(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("timed out waiting for {what}");
    }

    /// Waits until the scrape contains `line` (a full series line without value, or a prefix).
    pub fn wait_for_series(&self, needle: &str) -> String {
        let mut last = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            last = self.get("/metrics").map(|(_, b)| b).unwrap_or_default();
            if last.lines().any(|l| l.starts_with(needle)) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("timed out waiting for a series starting with {needle}\nlast scrape:\n{last}");
    }

    /// Waits for two more published samples, so windowed figures (GPM) cover only the present.
    pub fn settle(&self) -> String {
        let stamp = |m: &str| value(m, "tessera_last_sample_timestamp_seconds{").unwrap_or(0.0);
        let start = stamp(&self.metrics());
        let mut last = String::new();
        self.wait_until("two more samples", |e| {
            last = e.metrics();
            stamp(&last) >= start + 0.15
        });
        last
    }

    pub fn stop(self) -> String {
        // SIGTERM, to exercise graceful shutdown.
        let pid = self.child.id() as i32;
        self.stop_with(pid)
    }

    /// SIGTERM to the exporter's whole process group (started with
    /// [`ExporterBuilder::own_process_group`]): every process in it gets the signal at once.
    pub fn stop_group(self) -> String {
        let group = -(self.child.id() as i32);
        self.stop_with(group)
    }

    fn stop_with(mut self, target: i32) -> String {
        // SAFETY: kill(2) on our own child's pid or process group.
        unsafe {
            libc::kill(target, libc::SIGTERM);
        }
        let status = self.child.wait().expect("wait");
        let mut log = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = err.read_to_string(&mut log);
        }
        assert!(status.success(), "tessera exited with {status:?}\n{log}");
        log
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Families whose values move with time; golden files keep their names but not their values.
const VOLATILE: &[&str] = &[
    "tessera_last_sample_timestamp_seconds",
    "tessera_collector_duration_seconds",
    "tessera_sample_duration_seconds",
    "gpu_energy_joules_total",
    // Integrated over the samples' real intervals, like the counter it splits.
    "gpu_energy_unattributed_joules_total",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "gpu_container_idle_seconds_total",
    // Flips from 0 to 1 once the CPU window shows a holder quiet: asserted, not golden.
    "gpu_container_idle{",
    "gpu_container_activity_unknown_seconds_total",
    "gpu_container_busy_seconds_total",
    // Integrated over the samples' real intervals, like the busy seconds.
    "gpu_compute_busy_seconds_total",
    "gpu_compute_attributed_seconds_total",
    "gpu_compute_split_disputed_total",
    "gpu_pod_attributed_seconds_total",
    "gpu_pod_unattributed_seconds_total",
    "tessera_samples_total",
    "tessera_build_info",
];

/// Series left out of a golden file: which of them exist follows the machine's timing. What NVML
/// calls cost (tessera_nvml_calls_total, _call_cpu_seconds_total, _call_seconds_total): counts
/// follow the samples taken, times the machine, and the fallback calls made (utilization_rates
/// where a sample buffer had nothing new) how fast the samples came, which differs under
/// emulation (scripts/test-arm64.sh).
const MACHINE_DEPENDENT: &[&str] = &["tessera_nvml_call"];

/// Sorted series lines, volatile values masked: stable across runs and machines.
pub fn normalize(exposition: &str) -> String {
    let mut lines: Vec<String> = exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter(|l| !MACHINE_DEPENDENT.iter().any(|m| l.starts_with(m)))
        .map(|l| {
            if VOLATILE.iter().any(|v| l.starts_with(v)) {
                match l.rsplit_once(' ') {
                    Some((series, _)) => format!("{series} <volatile>"),
                    None => l.to_owned(),
                }
            } else {
                l.to_owned()
            }
        })
        .collect();
    lines.sort();
    lines.join("\n") + "\n"
}

/// Compares with `tests/golden/<name>.txt`. `TESSERA_UPDATE_GOLDEN=1` rewrites it: regenerate
/// only on purpose, and review the diff. `TESSERA_GOLDEN_OUT=DIR` also writes what was compared
/// to `DIR/<name>.txt`.
pub fn assert_golden(name: &str, exposition: &str) {
    let path = workspace().join("tests/golden").join(format!("{name}.txt"));
    let got = normalize(exposition);
    // scripts/test-arm64.sh compares, byte for byte, what an emulated arm64 run compared here.
    if let Some(dir) = std::env::var_os("TESSERA_GOLDEN_OUT") {
        std::fs::write(Path::new(&dir).join(format!("{name}.txt")), &got)
            .expect("write exposition");
    }
    if std::env::var_os("TESSERA_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "golden file {} missing; run with TESSERA_UPDATE_GOLDEN=1",
            path.display()
        )
    });
    if let Some(diff) = golden_diff(&want, &got) {
        panic!("exposition differs from {}:\n{diff}", path.display());
    }
}

/// Same series, same values — numbers within a small tolerance, since windowed figures (GPM
/// averages) carry float noise that rounding alone cannot tame at half-way points.
fn golden_diff(want: &str, got: &str) -> Option<String> {
    let parse = |text: &str| -> std::collections::BTreeMap<String, String> {
        text.lines()
            .filter_map(|l| l.rsplit_once(' '))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    let (w, g) = (parse(want), parse(got));
    let close = |a: &str, b: &str| match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => (x - y).abs() <= 0.002_f64.max(1e-3 * x.abs().max(y.abs())),
        _ => a == b,
    };
    let mut diff: Vec<String> = Vec::new();
    for (k, v) in &w {
        match g.get(k) {
            None => diff.push(format!("- {k} {v}")),
            Some(gv) if !close(v, gv) => diff.push(format!("~ {k} {v} -> {gv}")),
            _ => {}
        }
    }
    diff.extend(
        g.iter()
            .filter(|(k, _)| !w.contains_key(*k))
            .map(|(k, v)| format!("+ {k} {v}")),
    );
    (!diff.is_empty()).then(|| diff.into_iter().take(40).collect::<Vec<_>>().join("\n"))
}

/// The value of the first series that starts with `prefix`.
pub fn value(exposition: &str, prefix: &str) -> Option<f64> {
    exposition
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
}

/// Starts the stand-in probe (`tests/support/fake_probe_client.py`) on `socket`; `args` are its
/// options (its `--help` lists them).
pub fn fake_probe_client<S: AsRef<std::ffi::OsStr>>(socket: &Path, args: &[S]) -> Child {
    let script = workspace().join("tests/support/fake_probe_client.py");
    assert!(script.is_file(), "{} missing", script.display());
    Command::new("python3")
        .arg(script)
        .arg(socket)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs the fake probe client")
}

/// Processes a test started, killed when it ends, passing or not.
pub struct Clients(pub Vec<Child>);

impl Drop for Clients {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A child process killed (and reaped) when the test lets go of it, pass or panic.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One exposition line: family, labels, value.
pub type Sample = (String, std::collections::BTreeMap<String, String>, f64);

/// Every sample of an exposition. Label values must hold no `",`: the demo's names do not, and
/// a plain split keeps this readable where a real parser would not add a check.
pub fn parse_samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter(|l| !MACHINE_DEPENDENT.iter().any(|m| l.starts_with(m)))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let value: f64 = value.parse().ok()?;
            let (name, rest) = series.split_once('{').unwrap_or((series, "}"));
            let mut labels = std::collections::BTreeMap::new();
            for kv in rest.trim_end_matches('}').split("\",") {
                if let Some((k, v)) = kv.split_once("=\"") {
                    labels.insert(k.to_owned(), v.trim_end_matches('"').to_owned());
                }
            }
            Some((name.to_owned(), labels, value))
        })
        .collect()
}
