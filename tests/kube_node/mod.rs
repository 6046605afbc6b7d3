//! Harness for the tests on a real node (scripts/test-kube-node.sh starts etcd, kube-apiserver,
//! containerd and the kubelet and names its state directory in `TESSERA_KUBE_NODE_DIR`): pods
//! made through the API server and run by the kubelet, devices advertised by the device-plugin
//! fixture, the real PIDs of the pods' processes handed to the fake NVML through `pid_file`s,
//! and tessera run as on a node, on the real `/proc` and pod-resources socket.
#![allow(dead_code)]

pub mod install;
pub mod lifecycle;
pub mod probe;
mod probe_cases;
pub mod probe_checks;
mod probe_faults;
mod scrape;
pub mod sharing;

pub use scrape::*;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use serde_json::{json, Value};

use crate::support;
use tessera_exporter::source::podresources::{PodResourcesClient, PodResourcesConfig};

/// How often tessera polls pod-resources, and samples: "within one poll" is measured in these.
pub const POLL: Duration = Duration::from_secs(1);
pub const SAMPLE: Duration = Duration::from_millis(500);

pub struct Node {
    pub rt: tokio::runtime::Runtime,
    pub dir: PathBuf,
    pub client: Client,
    pub env: HashMap<String, String>,
}

/// The node's state directory; the tests are `#[ignore]`d, so reaching this without it means
/// someone ran them by hand without the script.
pub fn node() -> Node {
    let dir = std::env::var_os("TESSERA_KUBE_NODE_DIR")
        .map(PathBuf::from)
        .expect("TESSERA_KUBE_NODE_DIR unset: run scripts/test-kube-node.sh");
    let env = std::fs::read_to_string(dir.join("node/env"))
        .expect("node env")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let rt = support::fake_cluster_runtime();
    let client = rt.block_on(async {
        let kc = Kubeconfig::read_from(dir.join("admin.kubeconfig")).expect("admin kubeconfig");
        let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("admin config");
        Client::try_from(cfg).expect("admin client")
    });
    std::fs::create_dir_all(dir.join("pids")).expect("pids dir");
    Node {
        rt,
        dir,
        client,
        env,
    }
}

/// A container's state as the kubelet reported it.
#[derive(Debug, Clone)]
pub struct Running {
    pub id: String,
    pub restarts: i32,
}

impl Node {
    pub fn name(&self) -> &str {
        &self.env["NODE_NAME"]
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub fn namespace(&self, ns: &str) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        if self.rt.block_on(api.get_opt(ns)).ok().flatten().is_none() {
            let obj = serde_json::from_value(json!({"metadata": {"name": ns}})).expect("ns");
            self.rt
                .block_on(api.create(&PostParams::default(), &obj))
                .expect("namespace");
        }
    }

    /// Creates the pod (bound to this node: no scheduler runs) and returns the server's object.
    pub fn create(&self, mut pod: Value) -> Pod {
        pod["spec"]["nodeName"] = json!(self.name());
        let ns = pod["metadata"]["namespace"]
            .as_str()
            .expect("ns")
            .to_owned();
        self.namespace(&ns);
        let obj: Pod = serde_json::from_value(pod).expect("pod");
        self.rt
            .block_on(self.pods(&ns).create(&PostParams::default(), &obj))
            .unwrap_or_else(|e| panic!("the server rejected {ns}/{:?}: {e}", obj.metadata.name))
    }

    pub fn get(&self, ns: &str, name: &str) -> Option<Pod> {
        self.rt.block_on(self.pods(ns).get_opt(name)).ok().flatten()
    }

    /// Polls the pod until `cond` holds; panics with its last status after `limit`.
    pub fn wait_pod(
        &self,
        ns: &str,
        name: &str,
        what: &str,
        limit: Duration,
        mut cond: impl FnMut(&Pod) -> bool,
    ) -> Pod {
        let deadline = Instant::now() + limit;
        loop {
            let pod = self.get(ns, name);
            if let Some(p) = &pod {
                if cond(p) {
                    return p.clone();
                }
            }
            if Instant::now() > deadline {
                let status = pod
                    .and_then(|p| p.status)
                    .map(|s| serde_json::to_string_pretty(&s).unwrap_or_default());
                panic!(
                    "{ns}/{name}: {what} not within {limit:?}; status: {}\n{}",
                    status.unwrap_or_else(|| "no pod".into()),
                    self.kubelet_log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The container `container` (an app or init container) once it runs.
    pub fn wait_running(&self, ns: &str, name: &str, container: &str) -> Running {
        let mut found = None;
        self.wait_pod(
            ns,
            name,
            &format!("container {container} running"),
            Duration::from_secs(60),
            |p| {
                found = running(p, container);
                found.is_some()
            },
        );
        found.expect("running")
    }

    /// Deletes the pod as a user would (graceful; the kubelet confirms) and waits until the API
    /// server no longer has it.
    pub fn delete(&self, ns: &str, name: &str) {
        let _ = self
            .rt
            .block_on(self.pods(ns).delete(name, &DeleteParams::default()));
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.get(ns, name).is_some() {
            assert!(
                Instant::now() < deadline,
                "{ns}/{name} still there a minute after its deletion\n{}",
                self.kubelet_log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Deletes every pod of the namespaces, so the next test finds the node's devices free.
    pub fn clean(&self, namespaces: &[&str]) {
        for ns in namespaces {
            let pods = self
                .rt
                .block_on(self.pods(ns).list(&Default::default()))
                .map(|l| l.items)
                .unwrap_or_default();
            for p in pods {
                let _ = self.rt.block_on(self.pods(ns).delete(
                    &p.metadata.name.clone().unwrap_or_default(),
                    &Default::default(),
                ));
            }
            for _ in 0..600 {
                let left = self
                    .rt
                    .block_on(self.pods(ns).list(&Default::default()))
                    .map(|l| l.items.len())
                    .unwrap_or(0);
                if left == 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// What the device-plugin fixture advertises, as NVIDIA's plugin names resources; returns
    /// once the kubelet offers exactly these device IDs (its pod-resources
    /// `GetAllocatableResources`): a count alone would not tell a new list from the last one.
    pub fn devices(&self, resources: &[(&str, Vec<String>)]) {
        let config = json!({"resources": resources.iter()
            .map(|(name, ids)| json!({"name": name, "devices": ids}))
            .collect::<Vec<_>>()});
        std::fs::write(self.dir.join("node/devices.json"), config.to_string()).expect("devices");
        let cfg = PodResourcesConfig {
            socket: PathBuf::from(&self.env["POD_RESOURCES_SOCKET"]),
            ..Default::default()
        };
        let want: BTreeMap<&str, BTreeSet<&str>> = resources
            .iter()
            .map(|(name, ids)| (*name, ids.iter().map(String::as_str).collect()))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let offered = self.rt.block_on(async {
                let mut c = PodResourcesClient::connect(&cfg).await.ok()?;
                c.allocatable().await.ok().flatten()
            });
            let offered: BTreeMap<&str, BTreeSet<&str>> = offered
                .iter()
                .flat_map(|a| &a.devices)
                .filter(|d| want.contains_key(d.resource_name.as_str()))
                .fold(BTreeMap::new(), |mut m, d| {
                    m.entry(d.resource_name.as_str())
                        .or_insert_with(BTreeSet::new)
                        .insert(d.device_id.as_str());
                    m
                });
            if offered == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the kubelet offers {offered:?}, not {want:?}\n{}",
                std::fs::read_to_string(self.dir.join("node/device-plugin.log"))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn ctr(&self, args: &[&str]) -> String {
        let out = Command::new("ctr")
            .arg("--address")
            .arg(&self.env["CONTAINERD_SOCKET"])
            .args(["-n", "k8s.io"])
            .args(args)
            .output()
            .expect("ctr");
        assert!(
            out.status.success(),
            "ctr {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The host PID of the container's process, as containerd records its task.
    pub fn task_pid(&self, container_id: &str) -> u32 {
        let tasks = self.ctr(&["tasks", "ls"]);
        tasks
            .lines()
            .find_map(|l| {
                let mut f = l.split_whitespace();
                (f.next() == Some(container_id))
                    .then(|| f.next().and_then(|p| p.parse().ok()))
                    .flatten()
            })
            .unwrap_or_else(|| panic!("containerd has no task {container_id}:\n{tasks}"))
    }

    /// The devices the kubelet gave the container: what the plugin's Allocate answered, in the
    /// container's environment (where NVIDIA's container runtime reads it).
    pub fn visible_devices(&self, container_id: &str) -> String {
        let info: Value =
            serde_json::from_str(&self.ctr(&["containers", "info", container_id])).expect("info");
        info["Spec"]["process"]["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find_map(|e| e.strip_prefix("NVIDIA_VISIBLE_DEVICES="))
            .unwrap_or_default()
            .to_owned()
    }

    /// The file the fake NVML reads a process's PID from.
    pub fn pid_file(&self, name: &str) -> PathBuf {
        self.dir.join("pids").join(format!("{name}.pid"))
    }

    /// Names the container's process in `pid_file(name)` for the fake NVML; returns its PID and
    /// the devices the kubelet gave the container.
    pub fn track(&self, name: &str, container: &Running) -> Tracked {
        let pid = self.task_pid(&container.id);
        std::fs::write(self.pid_file(name), format!("{pid}\n")).expect("pid file");
        Tracked {
            pid,
            device: self.visible_devices(&container.id),
        }
    }

    /// Deletes the namespaces' pods when dropped, however the test ends, so the next test finds
    /// the node's devices free.
    pub fn cleanup(&self, namespace: &'static str) -> Cleanup<'_> {
        self.clean(&[namespace]);
        Cleanup {
            node: self,
            namespace,
        }
    }

    pub fn restart(&self, what: &str) {
        let script = support::workspace().join("scripts/kube-real/node.sh");
        let status = Command::new(script)
            .arg(format!("restart-{what}"))
            .arg(&self.dir)
            .status()
            .expect("node.sh");
        assert!(status.success(), "{what} restart failed");
    }

    pub fn kubelet_log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("node/kubelet.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "kubelet log (tail):\n{}",
            lines[lines.len().saturating_sub(30)..].join("\n")
        )
    }

    /// tessera as on a node: the fake NVML library with `scenario`, the real `/proc`, the
    /// kubelet's pod-resources socket, and the pod watch with the chart's service account.
    pub fn tessera(&self, scenario: &str) -> Tessera {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("scenario.yaml");
        std::fs::write(&path, scenario).expect("scenario");
        let port = support::free_port();
        let log = dir.path().join("tessera.log");
        let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg(format!(
                "--nvml.library={}",
                support::fake_library().display()
            ))
            .arg("--path.procfs=/proc")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg(format!("--kube.node-name={}", self.name()))
            .arg(format!(
                "--kubelet.pod-resources-socket={}",
                self.env["POD_RESOURCES_SOCKET"]
            ))
            .arg(format!("--kubelet.poll-interval={}s", POLL.as_secs()))
            .arg(format!("--sample.interval={}ms", SAMPLE.as_millis()))
            .arg("--nvml.process-interval=1s")
            .arg("--metrics.detail=full")
            .env("TESSERA_FAKE_NVML_SCENARIO", &path)
            .env("KUBECONFIG", self.dir.join("tessera.kubeconfig"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn tessera");
        let t = Tessera::new(child, port, log, dir);
        t.wait_ready();
        t
    }
}

pub struct Cleanup<'a> {
    node: &'a Node,
    namespace: &'static str,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        self.node.clean(&[self.namespace]);
    }
}

/// A pod's process as the fake NVML will report it.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub pid: u32,
    /// NVIDIA_VISIBLE_DEVICES: the device IDs the kubelet allocated, comma-separated.
    pub device: String,
}

/// A GPU of a scenario: its UUID, more keys (`compute_mode: exclusive_process`) and MIG
/// instances (1g.10gb, by UUID).
pub struct Gpu {
    pub uuid: String,
    pub keys: &'static str,
    pub migs: Vec<String>,
}

impl Gpu {
    pub fn whole(uuid: &str) -> Gpu {
        Gpu {
            uuid: uuid.to_owned(),
            keys: "",
            migs: Vec::new(),
        }
    }
}

/// The fake NVML's scenario: `gpus`, and each process named by its pid file, placed on the GPU
/// or MIG instance its device ID names (`GPU-…`, `GPU-…::<n>`, `MIG-…`) with `keys`
/// (`memory_mib: 1024, sm_util: 20`).
pub fn scenario(n: &Node, gpus: &[Gpu], procs: &[(&str, &str, &str)]) -> String {
    let mut y = String::from("gpus:\n");
    for g in gpus {
        y += &format!("  - sku: h100-80gb-hbm3\n    uuid: {}\n", g.uuid);
        if !g.keys.is_empty() {
            y += &format!("    {}\n", g.keys);
        }
        if !g.migs.is_empty() {
            y += "    mig:\n      instances:\n";
            for m in &g.migs {
                y += &format!("        - {{ profile: 1g.10gb, uuid: {m} }}\n");
            }
        }
    }
    y += "phases:\n  - at_ms: 0\n    processes:\n";
    for (file, device, keys) in procs {
        let id = device.split("::").next().unwrap_or_default();
        let (gpu, mig) = gpus
            .iter()
            .enumerate()
            .find_map(|(i, g)| {
                if g.uuid == id {
                    Some((i, None))
                } else {
                    g.migs.iter().any(|m| m == id).then_some((i, Some(id)))
                }
            })
            .unwrap_or_else(|| panic!("{file}: device {device:?} is none of the scenario's"));
        let mig = mig
            .map(|m| format!(", mig_instance: {m}"))
            .unwrap_or_default();
        y += &format!(
            "      - {{ pid_file: {}, gpu: {gpu}{mig}, {keys} }}\n",
            n.pid_file(file).display()
        );
    }
    y
}

/// The named container's ID while it runs (app containers, then init containers).
pub fn running(pod: &Pod, container: &str) -> Option<Running> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|c| c.name == container)
        .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        .and_then(|c| {
            Some(Running {
                id: c
                    .container_id
                    .as_ref()?
                    .strip_prefix("containerd://")?
                    .to_owned(),
                restarts: c.restart_count,
            })
        })
}

/// A pod of the busybox test image; `containers` are `(name, command, resources)`.
pub fn pod(ns: &str, name: &str, containers: &[(&str, &str, Value)]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "labels": {"app": name}},
        "spec": {
            // The node has no pod network (containerd 1.6 wants an eth0 from CNI, which only a
            // plugin that changes the host's network would make); the join does not use one.
            "hostNetwork": true,
            // A stand-in CUDA client ignores SIGTERM (busybox as PID 1): it is killed after 1 s.
            "terminationGracePeriodSeconds": 1,
            "containers": containers.iter().map(|(n, c, r)| container(n, c, r.clone())).collect::<Vec<_>>(),
        }
    })
}

pub fn container(name: &str, command: &str, resources: Value) -> Value {
    json!({
        "name": name,
        "image": "localhost/tessera-test/busybox:1",
        "imagePullPolicy": "Never",
        "command": ["/bin/sh", "-c", command],
        "resources": resources,
    })
}

/// `n` of `resource`, as requests and limits (extended resources need both equal).
pub fn gpus(resource: &str, n: u32) -> Value {
    json!({"limits": {resource: n.to_string()}, "requests": {resource: n.to_string()}})
}

pub const SLEEP: &str = "exec sleep 3600";

/// The cgroup paths of a process, one per hierarchy, as `/proc/<pid>/cgroup` lists them.
pub fn cgroup_paths(pid: u32) -> Vec<String> {
    std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("cgroup"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2).map(str::to_owned))
        .collect()
}

/// GPU UUIDs of the scenarios (hex only, as NVML's).
pub fn gpu_uuid(n: u32) -> String {
    format!("GPU-{n:08x}-1111-2222-3333-444444444444")
}

pub fn mig_uuid(n: u32) -> String {
    format!("MIG-{n:08x}-5555-6666-7777-888888888888")
}
