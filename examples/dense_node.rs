//! A dense simulated GPU node for scripts/bench-scrape.sh: 8 × H100, each split into
//! 7 × 1g.10gb MIG instances, 500 processes, 300 pods time-slicing those instances.
//!
//! It writes a fake-nvml scenario, a procfs tree (`comm` and cgroup files) and a kubeconfig into
//! a temp dir, serves a fake kubelet (pod-resources gRPC on a UNIX socket) and a fake API server
//! (loopback HTTP) from this process, then runs the release `tessera` binary against them — the
//! exporter's real code paths, with only the outside world simulated. It prints one line,
//! `tessera pid=<pid> url=<metrics url>`, once tessera is started, and keeps everything up
//! until it gets SIGINT or SIGTERM (then stops tessera and removes the temp dir).
//!
//! ```sh
//! cargo build --release --bin tessera --example dense_node
//! target/release/examples/dense_node --listen 127.0.0.1:19949 [--gpus 8 --procs 500 --pods 300]
//!     [--tessera target/release/tessera] [--library target/release/libfake_nvml.so] [--interval 1s]
//! ```

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use tessera_demo::cluster::{self, ContainerPlan, PodPlan};
use tessera_demo::fakes::apiserver::{FakeApiServer, FakeCluster};
use tessera_demo::fakes::kubelet::FakeKubelet;

const NODE: &str = "dense-node-01";
const MIG_PER_GPU: usize = 7;
const RESOURCE: &str = "nvidia.com/mig-1g.10gb.shared";

struct Args {
    listen: String,
    tessera: PathBuf,
    library: Option<PathBuf>,
    gpus: usize,
    procs: usize,
    pods: usize,
    interval: String,
}

fn parse_args() -> Result<Args, Box<dyn Error>> {
    let release = std::env::current_exe()?
        .parent() // examples/
        .and_then(Path::parent) // release/
        .map(Path::to_path_buf)
        .ok_or("cannot tell where the release binaries are")?;
    let mut args = Args {
        listen: "127.0.0.1:19949".into(),
        tessera: release.join("tessera"),
        library: None,
        gpus: 8,
        procs: 500,
        pods: 300,
        interval: "1s".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--listen" => args.listen = value()?,
            "--tessera" => args.tessera = value()?.into(),
            "--library" => args.library = Some(value()?.into()),
            "--interval" => args.interval = value()?,
            "--gpus" => args.gpus = value()?.parse()?,
            "--procs" => args.procs = value()?.parse()?,
            "--pods" => args.pods = value()?.parse()?,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    if args.gpus == 0 || args.pods == 0 {
        return Err("--gpus and --pods must be at least 1".into());
    }
    Ok(args)
}

fn gpu_uuid(g: usize) -> String {
    format!("GPU-de05e000-{g:04x}-4000-8000-00000000d00d")
}

fn mig_uuid(g: usize, m: usize) -> String {
    format!("MIG-de05e000-{g:04x}-4000-8000-{m:012x}")
}

/// The node: who runs where. Pod `i` holds MIG instance `i % instances` as replica
/// `i / instances`; process `j` belongs to pod `j % pods` and runs on that pod's instance.
struct Layout {
    gpus: usize,
    pods: Vec<PodPlan>,
    /// (pid, gpu, instance index on that GPU), in pid order.
    processes: Vec<(u32, usize, usize)>,
    replicas: usize,
}

fn layout(a: &Args) -> Layout {
    let instances = a.gpus * MIG_PER_GPU;
    let replicas = a.pods.div_ceil(instances);
    let mut pods: Vec<PodPlan> = (0..a.pods)
        .map(|i| {
            let d = i % instances;
            let namespace = format!("team-{}", i % 12);
            let workload = format!("serve-{}", i / 8);
            PodPlan {
                namespace: namespace.clone(),
                name: format!("{workload}-{}", i % 8),
                owner: Some(("StatefulSet".into(), workload.clone())),
                labels: BTreeMap::from([
                    ("app".to_owned(), workload),
                    ("team".to_owned(), namespace),
                ]),
                containers: vec![ContainerPlan {
                    name: "main".into(),
                    devices: vec![(
                        RESOURCE.into(),
                        vec![format!(
                            "{}::{}",
                            mig_uuid(d / MIG_PER_GPU, d % MIG_PER_GPU),
                            i / instances
                        )],
                    )],
                    pids: Vec::new(),
                    ..Default::default()
                }],
                ..Default::default()
            }
        })
        .collect();
    let mut processes = Vec::with_capacity(a.procs);
    for j in 0..a.procs {
        let i = j % a.pods;
        let d = i % instances;
        let pid = 200_000 + j as u32;
        pods[i].containers[0].pids.push(pid);
        processes.push((pid, d / MIG_PER_GPU, d % MIG_PER_GPU));
    }
    Layout {
        gpus: a.gpus,
        pods,
        processes,
        replicas,
    }
}

/// The fake-nvml scenario (crates/fake-nvml/README.md): every GPU in MIG mode with seven
/// 1g.10gb instances, one phase with every process running.
fn scenario(l: &Layout) -> String {
    let mut y = String::from("# Generated by examples/dense_node.rs\ngpus:\n");
    for g in 0..l.gpus {
        let _ = writeln!(
            y,
            "  - sku: h100-80gb-hbm3\n    uuid: \"{}\"\n    mig:\n      instances:",
            gpu_uuid(g)
        );
        for m in 0..MIG_PER_GPU {
            let _ = writeln!(
                y,
                "        - {{ profile: 1g.10gb, placement: {m}, uuid: \"{}\" }}",
                mig_uuid(g, m)
            );
        }
    }
    y.push_str("phases:\n  - at_ms: 0\n    name: dense\n    processes:\n");
    for (k, (pid, gpu, m)) in l.processes.iter().enumerate() {
        let _ = writeln!(
            y,
            "      - {{ pid: {pid}, gpu: {gpu}, mig_instance: {m}, comm: python3, memory_mib: {}, sm_util: {}, mem_util: {} }}",
            256 + 128 * (k % 4),
            5 + (k * 37) % 60,
            2 + (k * 13) % 30
        );
    }
    y
}

/// SIGTERM, then SIGKILL if it has not exited within 5 s.
fn stop(child: &mut Child) -> std::io::Result<()> {
    if child.try_wait()?.is_some() {
        return Ok(());
    }
    let pid = libc::pid_t::try_from(child.id()).unwrap_or(0);
    if pid > 0 {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill()?;
    child.wait().map(drop)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    if !args.tessera.is_file() {
        return Err(format!(
            "{} not found; run `cargo build --release --bin tessera --example dense_node`",
            args.tessera.display()
        )
        .into());
    }
    let library = match &args.library {
        Some(l) => l.clone(),
        None => {
            // `cargo build -p fake-nvml` puts it beside the binary; as a dependency of
            // tessera it is only in deps/.
            let dir = args.tessera.parent().ok_or("--tessera has no parent")?;
            [dir.join("deps/libfake_nvml.so"), dir.join("libfake_nvml.so")]
                .into_iter()
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    format!(
                        "libfake_nvml.so is not in {} nor its deps/; run `cargo build --release -p fake-nvml`",
                        dir.display()
                    )
                })?
        }
    };

    let dir = tempfile::Builder::new()
        .prefix("tessera-dense-")
        .tempdir()?;
    let l = layout(&args);
    let scenario_text = scenario(&l);
    let scenario_path = dir.path().join("scenario.yaml");
    std::fs::write(&scenario_path, &scenario_text)?;
    let procfs = dir.path().join("proc");
    tessera_demo::write_procfs(&scenario_text, &procfs)?;
    cluster::write_cgroups(&l.pods, &procfs)?;

    let instances = l.gpus * MIG_PER_GPU;
    let allocatable: Vec<(String, String)> = (0..instances)
        .flat_map(|d| {
            (0..l.replicas).map(move |k| {
                (
                    RESOURCE.to_owned(),
                    format!("{}::{k}", mig_uuid(d / MIG_PER_GPU, d % MIG_PER_GPU)),
                )
            })
        })
        .collect();
    let socket = dir.path().join("kubelet.sock");
    let kubelet = FakeKubelet::start(&socket, cluster::kubelet_state(&l.pods, allocatable)).await?;
    let node_labels = BTreeMap::from(
        [
            ("nvidia.com/gpu.present", "true".to_owned()),
            ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3".to_owned()),
            ("nvidia.com/mig.strategy", "mixed".to_owned()),
            ("nvidia.com/mig.capable", "true".to_owned()),
            (
                "nvidia.com/mig-1g.10gb.sharing-strategy",
                "time-slicing".to_owned(),
            ),
            ("nvidia.com/mig-1g.10gb.replicas", l.replicas.to_string()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let api = FakeApiServer::start(FakeCluster {
        pods: l.pods.iter().map(|p| p.to_pod(NODE)).collect(),
        nodes: vec![cluster::node(NODE, node_labels)],
        ..Default::default()
    })
    .await?;
    let kubeconfig = tessera_demo::cluster::write_kubeconfig(dir.path(), &api.url())?;

    let mut child = Command::new(&args.tessera)
        .arg(format!("--nvml.library={}", library.display()))
        .arg(format!("--path.procfs={}", procfs.display()))
        .arg(format!(
            "--kubelet.pod-resources-socket={}",
            socket.display()
        ))
        .arg(format!("--web.listen-address={}", args.listen))
        .arg(format!("--kube.node-name={NODE}"))
        .arg(format!("--sample.interval={}", args.interval))
        .arg("--kube.pod-labels=app,team")
        .env("TESSERA_FAKE_NVML_SCENARIO", &scenario_path)
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .spawn()?;
    println!(
        "tessera pid={} url=http://{}/metrics gpus={} mig_instances={instances} processes={} pods={}",
        child.id(),
        args.listen,
        l.gpus,
        l.processes.len(),
        l.pods.len()
    );
    std::io::stdout().flush()?;

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let exited = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break None,
            _ = term.recv() => break None,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {
                if let Some(status) = child.try_wait()? {
                    break Some(status);
                }
            }
        }
    };
    stop(&mut child)?;
    kubelet.stop().await;
    api.stop();
    drop(dir);
    match exited {
        Some(status) => Err(format!("tessera exited on its own: {status}").into()),
        None => Ok(()),
    }
}
