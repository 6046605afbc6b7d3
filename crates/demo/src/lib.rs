//! `--demo`: a built-in 9-GPU H100 node for machines without a GPU. It runs the exporter's one
//! real code path against the fake NVML library (built with the workspace), a procfs tree
//! written to a temp directory, and — once attribution lands — a fake kubelet and API server.
//! Nothing here is used unless `--demo` is given: tessera never serves fake data silently.
//! The binary links this crate only with its cargo feature `demo` (on by default); the release
//! image is built without it (scripts/image.sh), so it holds neither this crate nor the fake NVML.
//! The fake kubelet and API server ([`fakes`]) also back the tests.

pub mod cluster;
pub mod cpu;
pub mod dra;
pub mod fakes;
pub mod fleet;
pub mod plan;
pub mod probe;
pub mod repeat;
mod wiring;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::fakes::apiserver::{FakeApiServer, FakeCluster};
use crate::fakes::kubelet::FakeKubelet;
use tessera_exporter::model::GpuSample;
pub use wiring::simulation;

/// The demo scenario ships inside the binary so `--demo` works from any directory.
pub const SCENARIO: &str = include_str!("../../fake-nvml/scenarios/demo.yaml");
/// Environment variable the fake NVML library reads its scenario path from.
pub const SCENARIO_ENV: &str = "TESSERA_FAKE_NVML_SCENARIO";
const FAKE_LIBRARY: &str = "libfake_nvml.so";

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("demo: the fake NVML library {FAKE_LIBRARY} was not found next to the tessera binary (looked in {looked}); build it with `cargo build --release` or pass --nvml.library")]
    LibraryMissing { looked: String },
    #[error("demo: cannot prepare the demo node in a temp directory: {0}")]
    Io(#[from] std::io::Error),
    #[error("demo: the built-in scenario is invalid: {0}")]
    Scenario(#[from] serde_yaml::Error),
    #[error("demo: {TIME_SCALE_ENV}={0:?} is not a number between 0.01 and 1")]
    TimeScale(String),
}

/// Test-only: runs the scenario's clock faster (0.1: the 120 s loop in 12 s), so a test sees
/// every phase of the loop in seconds. Unset, the demo runs as shipped.
pub const TIME_SCALE_ENV: &str = "TESSERA_DEMO_TIME_SCALE";

/// The scenario with its phase times and loop period multiplied by `factor`.
fn scale_time(text: &str, factor: f64) -> Result<String, DemoError> {
    use serde_yaml::Value;
    let mut doc: Value = serde_yaml::from_str(text)?;
    doc.apply_merge()?;
    let scale = |v: &mut Value| {
        if let Some(ms) = v.as_u64() {
            *v = Value::from((ms as f64 * factor).round() as u64);
        }
    };
    if let Some(r) = doc.get_mut("repeat_after_ms") {
        scale(r);
    }
    if let Some(phases) = doc.get_mut("phases").and_then(Value::as_sequence_mut) {
        for at in phases.iter_mut().filter_map(|p| p.get_mut("at_ms")) {
            scale(at);
        }
    }
    Ok(serde_yaml::to_string(&doc)?)
}

fn time_scale() -> Result<Option<f64>, DemoError> {
    let Some(raw) = std::env::var_os(TIME_SCALE_ENV) else {
        return Ok(None);
    };
    let raw = raw.to_string_lossy().into_owned();
    match raw.trim().parse::<f64>() {
        Ok(f) if (0.01..=1.0).contains(&f) => Ok(Some(f)),
        _ => Err(DemoError::TimeScale(raw)),
    }
}

/// Files the demo node needs, kept alive (and removed) with this value.
pub struct DemoNode {
    pub dir: tempfile::TempDir,
    pub library: PathBuf,
    pub scenario: PathBuf,
    pub procfs: PathBuf,
    /// The scenario this node runs: the built-in one, or a fleet member's variant of it.
    pub scenario_text: String,
    pub fleet: Option<fleet::FleetNode>,
    _cpu: repeat::Repeating,
}

#[derive(Deserialize)]
struct ScenarioProcesses {
    #[serde(default)]
    phases: Vec<PhaseProcesses>,
    #[serde(default)]
    repeat_after_ms: Option<u64>,
}

#[derive(Deserialize)]
struct PhaseProcesses {
    #[serde(default)]
    at_ms: u64,
    #[serde(default)]
    processes: Vec<DemoProcess>,
}

#[derive(Deserialize)]
struct DemoProcess {
    pid: u32,
    #[serde(default)]
    comm: Option<String>,
    #[serde(default)]
    sm_util: u32,
    /// CPU the fake process uses, in percent of a core (default: 30 when it runs kernels).
    #[serde(default)]
    cpu_percent: Option<f64>,
}

/// The fake NVML library, beside the binary or where cargo builds it.
pub fn find_fake_library() -> Result<PathBuf, DemoError> {
    tessera_exporter::install::beside_binary(FAKE_LIBRARY).map_err(|looked| {
        DemoError::LibraryMissing {
            looked: looked
                .iter()
                .map(|c| c.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    })
}

/// Writes a procfs tree with a `comm` for every process in `scenario`.
pub fn write_procfs(scenario: &str, root: &Path) -> Result<(), DemoError> {
    let parsed: ScenarioProcesses = serde_yaml::from_str(scenario)?;
    for p in parsed.phases.iter().flat_map(|ph| &ph.processes) {
        let dir = root.join(p.pid.to_string());
        std::fs::create_dir_all(&dir)?;
        let comm = p.comm.as_deref().unwrap_or("python3");
        // As the kernel does: comm holds at most 15 bytes.
        let cut = comm
            .char_indices()
            .map(|(i, c)| i + c.len_utf8())
            .take_while(|&e| e <= 15)
            .last()
            .unwrap_or(0);
        std::fs::write(dir.join("comm"), format!("{}\n", &comm[..cut]))?;
    }
    Ok(())
}

/// `fleet_index`: run as that node of a simulated fleet ([`fleet`]) rather than the demo node.
pub fn prepare(library: Option<&Path>, fleet_index: Option<u32>) -> Result<DemoNode, DemoError> {
    let library = match library {
        Some(l) => l.to_path_buf(),
        None => find_fake_library()?,
    };
    let dir = tempfile::Builder::new().prefix("tessera-demo-").tempdir()?;
    let fleet = fleet_index.map(fleet::FleetNode::new);
    let mut scenario_text = match &fleet {
        Some(f) => f.scenario(SCENARIO)?,
        None => SCENARIO.to_owned(),
    };
    if let Some(factor) = time_scale()? {
        scenario_text = scale_time(&scenario_text, factor)?;
    }
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(&scenario, &scenario_text)?;
    let procfs = dir.path().join("proc");
    write_procfs(&scenario_text, &procfs)?;
    let cpu = cpu::start(&scenario_text, &procfs)?;
    Ok(DemoNode {
        dir,
        library,
        scenario,
        procfs,
        scenario_text,
        fleet,
        _cpu: cpu,
    })
}

impl DemoNode {
    /// Where the demo kubelet listens: known before it starts, so the settings can name it.
    pub fn kubelet_socket(&self) -> PathBuf {
        self.dir.path().join("kubelet.sock")
    }
}

/// The demo's kubelet (a gRPC server on a socket in the demo's temp dir) and API server
/// (loopback HTTP), serving the pods of [`plan::demo_pods`] and GPU 8's DRA claim ([`dra`]).
pub struct DemoServices {
    pub kubelet: FakeKubelet,
    pub api: FakeApiServer,
}

impl DemoServices {
    pub async fn stop(self) {
        self.api.stop();
        self.kubelet.stop().await;
    }
}

pub async fn start_services(
    node: &DemoNode,
    node_name: &str,
    gpus: &[GpuSample],
) -> Result<DemoServices, DemoError> {
    let (mut pods, allocatable) = plan::demo_pods(gpus);
    let dra = dra::demo(gpus, node_name);
    // A fleet node whose DRA GPU is vacant still publishes the device, but nobody claims it.
    let dra_vacant = node.fleet.as_ref().is_some_and(|f| f.is_vacant(dra::GPU));
    if let Some(f) = &node.fleet {
        f.keep_pods(&mut pods, gpus);
    }
    if !dra_vacant {
        pods.extend(dra.pods);
    }
    cluster::write_cgroups(&pods, &node.procfs)?;
    let kubelet = FakeKubelet::start(
        &node.kubelet_socket(),
        cluster::kubelet_state(&pods, allocatable),
    )
    .await?;
    let labels = BTreeMap::from(
        [
            ("nvidia.com/gpu.present", "true"),
            ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
            ("nvidia.com/mig.strategy", "mixed"),
            ("nvidia.com/mig.capable", "true"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    );
    let api = FakeApiServer::start(FakeCluster {
        pods: pods.iter().map(|p| p.to_pod(node_name)).collect(),
        nodes: vec![cluster::node(node_name, labels)],
        slices: vec![dra.slice],
        claims: if dra_vacant { vec![] } else { vec![dra.claim] },
        ..Default::default()
    })
    .await?;
    Ok(DemoServices { kubelet, api })
}

#[cfg(test)]
mod tests;
