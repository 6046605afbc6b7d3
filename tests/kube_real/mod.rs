//! Harness for the tests against a real kube-apiserver (scripts/test-kube-real.sh starts it and
//! names its state directory in `TESSERA_KUBE_REAL_DIR`): an admin client for the test's own
//! objects, and tessera's kubeconfig, a service account bound only to the chart's ClusterRole.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use serde_json::{json, Value};

use crate::support;

pub const NODE: &str = "test-node";
pub const OTHER_NODE: &str = "other-node";

pub struct Real {
    pub rt: tokio::runtime::Runtime,
    pub dir: PathBuf,
    pub admin: Client,
}

/// The control plane's state directory; the tests are `#[ignore]`d, so reaching this without
/// it means someone ran them by hand without the script.
pub fn real() -> Real {
    let dir = std::env::var_os("TESSERA_KUBE_REAL_DIR")
        .map(PathBuf::from)
        .expect("TESSERA_KUBE_REAL_DIR unset: run scripts/test-kube-real.sh");
    let rt = support::fake_cluster_runtime();
    let admin = rt.block_on(async {
        let kc = Kubeconfig::read_from(dir.join("admin.kubeconfig")).expect("admin kubeconfig");
        let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("admin config");
        Client::try_from(cfg).expect("admin client")
    });
    Real { rt, dir, admin }
}

/// `(plural, namespaced)` of the kinds the tests create.
fn resource_of(kind: &str) -> (&'static str, bool) {
    match kind {
        "Pod" => ("pods", true),
        "Node" => ("nodes", false),
        "Namespace" => ("namespaces", false),
        "ResourceSlice" => ("resourceslices", false),
        "ResourceClaim" => ("resourceclaims", true),
        "DeviceClass" => ("deviceclasses", false),
        "ClusterRole" => ("clusterroles", false),
        "Secret" => ("secrets", true),
        other => panic!("no resource known for kind {other}"),
    }
}

fn api_for(client: &Client, obj: &Value) -> (Api<DynamicObject>, String) {
    let api_version = obj["apiVersion"].as_str().expect("apiVersion");
    let kind = obj["kind"].as_str().expect("kind");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (plural, namespaced) = resource_of(kind);
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let name = obj["metadata"]["name"].as_str().expect("name").to_owned();
    let api = if namespaced {
        let ns = obj["metadata"]["namespace"].as_str().expect("namespace");
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    (api, name)
}

impl Real {
    /// Creates `obj` as admin and returns what the server stored (its UID, defaults).
    pub fn create(&self, obj: Value) -> Value {
        let (api, _) = api_for(&self.admin, &obj);
        let dynamic: DynamicObject = serde_json::from_value(obj.clone()).expect("object");
        let made = self
            .rt
            .block_on(api.create(&PostParams::default(), &dynamic))
            .unwrap_or_else(|e| panic!("the server rejected {obj}: {e}"));
        serde_json::to_value(made).expect("json")
    }

    /// Creates `obj` unless it exists (objects shared by several tests: nodes, namespaces).
    pub fn ensure(&self, obj: Value) {
        let (api, name) = api_for(&self.admin, &obj);
        if self
            .rt
            .block_on(api.get_opt(&name))
            .ok()
            .flatten()
            .is_none()
        {
            self.create(obj);
        }
    }

    /// A merge patch of the object's status subresource: what a kubelet or the scheduler
    /// would write, done by the test since neither runs here.
    pub fn patch_status(&self, obj: &Value, status: Value) {
        let (api, name) = api_for(&self.admin, obj);
        self.rt
            .block_on(api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            ))
            .unwrap_or_else(|e| panic!("status of {name} rejected: {e}"));
    }

    pub fn patch(&self, obj: &Value, patch: Value) {
        let (api, name) = api_for(&self.admin, obj);
        self.rt
            .block_on(api.patch(&name, &PatchParams::default(), &Patch::Merge(patch)))
            .unwrap_or_else(|e| panic!("patch of {name} rejected: {e}"));
    }

    /// Deletes at once: with no kubelet to confirm, a graceful delete of a bound pod would wait.
    pub fn delete(&self, obj: &Value) {
        let (api, name) = api_for(&self.admin, obj);
        self.rt
            .block_on(api.delete(&name, &DeleteParams::default().grace_period(0)))
            .unwrap_or_else(|e| panic!("delete of {name} failed: {e}"));
    }

    pub fn namespace(&self, ns: &str) {
        self.ensure(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }

    pub fn node(&self, name: &str, labels: Value) {
        self.ensure(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels}}));
    }

    /// tessera's kubeconfig: the token of the service account the rendered manifests bind
    /// to their ClusterRole (scripts/test-kube-real.sh writes one per rendering).
    pub fn tessera_kubeconfig(&self) -> PathBuf {
        std::env::var_os("TESSERA_KUBE_REAL_KUBECONFIG")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.dir.join("tessera-helm.kubeconfig"))
    }

    /// The ClusterRole the chart or kustomize rendered, as the script applied it.
    pub fn role_name(&self) -> String {
        std::env::var("TESSERA_KUBE_REAL_ROLE").unwrap_or_else(|_| "tessera-helm".into())
    }

    /// Restarts kube-apiserver (etcd keeps running): every watch breaks.
    pub fn restart_apiserver(&self) {
        let script = support::workspace().join("scripts/kube-real/control-plane.sh");
        let status = Command::new(script)
            .arg("restart")
            .arg(&self.dir)
            .status()
            .expect("control-plane.sh");
        assert!(status.success(), "kube-apiserver restart failed");
    }
}

/// A running pod as a kubelet would report it: bound to `node`, one container `main` whose
/// container ID the test chose (the status is written by the test).
pub fn pod(ns: &str, name: &str, node: &str, labels: Value, owner: Option<(&str, &str)>) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.invalid/cuda:1"}]}
    });
    if let Some((kind, owner)) = owner {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind,
            "name": owner, "uid": "00000000-0000-0000-0000-0000000000aa", "controller": true}]);
    }
    p
}

/// A stable 64-hex container ID for a pod's container.
pub fn container_id(ns: &str, pod: &str) -> String {
    tessera_demo::cluster::PodPlan::single(ns, pod, "", &[], &[]).container_id("main")
}

/// Marks a created pod Running with its container's ID, as the kubelet would.
pub fn run_pod(real: &Real, created: &Value) {
    let ns = created["metadata"]["namespace"].as_str().expect("ns");
    let name = created["metadata"]["name"].as_str().expect("name");
    real.patch_status(
        created,
        json!({"phase": "Running", "containerStatuses": [{
            "name": "main", "image": "registry.invalid/cuda:1", "imageID": "", "ready": true,
            "restartCount": 0, "started": true, "state": {"running": {}},
            "containerID": format!("containerd://{}", container_id(ns, name))}]}),
    );
}

/// Puts `pid` into the cgroup of the pod's container, under the server-assigned UID.
pub fn write_cgroup(procfs: &Path, pid: u32, created: &Value) {
    let uid = created["metadata"]["uid"].as_str().expect("uid");
    let ns = created["metadata"]["namespace"].as_str().expect("ns");
    let name = created["metadata"]["name"].as_str().expect("name");
    let dir = procfs.join(pid.to_string());
    std::fs::create_dir_all(&dir).expect("procfs");
    let path = format!(
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{}.scope",
        uid.replace('-', "_"),
        container_id(ns, name)
    );
    std::fs::write(dir.join("cgroup"), format!("0::{path}\n")).expect("cgroup");
}

/// Polls `cond` on the scrape until it holds or `limit` passes; returns the last scrape.
pub fn wait_metrics(
    e: &support::Exporter,
    what: &str,
    limit: Duration,
    mut cond: impl FnMut(&str) -> bool,
) -> String {
    let deadline = Instant::now() + limit;
    let mut last = String::new();
    while Instant::now() < deadline {
        last = e.get("/metrics").map(|(_, b)| b).unwrap_or_default();
        if cond(&last) {
            return last;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {limit:?} waiting for {what}\nlast scrape:\n{last}");
}

/// The first series line of `family` containing every needle.
pub fn line<'a>(m: &'a str, family: &str, needles: &[&str]) -> Option<&'a str> {
    m.lines()
        .find(|l| l.starts_with(family) && needles.iter().all(|n| l.contains(n)))
}
pub mod dra;
pub mod rbac;
