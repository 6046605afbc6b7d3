//! The CUDA probe in real pods, installed as deploy/overlays/cuda-probe installs it: tessera's
//! pod from the overlay's DaemonSet (its socket in the hostPath /run/tessera, the library
//! copied into /opt/tessera/lib by its `install-probe` init container), and the overlay's
//! MutatingAdmissionPolicy run by the API server on each tenant pod. The tenants run
//! scripts/kube-real/cuda-tenant.c, which loads `CUDA_INJECTION64_PATH` as the CUDA driver does,
//! against the stand-in CUPTI in their image (images.sh). node.sh binds both host paths to its
//! state folder inside the node's mount namespace, so the overlay's paths are used unchanged.
//! What they check with is in probe_checks.rs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{install, Node, Scraped};

pub const LIBRARY: &str = "/opt/tessera/lib/libtessera_probe.so";
pub const INJECTION: &str = "CUDA_INJECTION64_PATH";
pub const LABEL: &str = "tessera.dev/cuda-probe";
/// The policy planted without its variable is bound to namespaces labelled so.
pub const PLANTED_NO_ENV: &str = "planted-no-env";
pub const TENANT: &str = "localhost/tessera-test/tenant:1";
pub const TENANT_WITHOUT_CUPTI: &str = "localhost/tessera-test/tenant-nocupti:1";

/// How the probe's variable and volumes reached the tenant pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injection {
    /// The overlay's policy, evaluated by the API server, at this API version.
    Policy(&'static str),
    /// The API server serves no MutatingAdmissionPolicy (before 1.34, or a gate off): the test
    /// applies the policy's patch to the pod spec itself.
    Patch,
}

pub fn kubectl(n: &Node, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", n.dir.join("admin.kubeconfig"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("kubectl: {e}"))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        use std::io::Write;
        pipe.write_all(text.as_bytes())
            .map_err(|e| format!("kubectl stdin: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("kubectl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `kubectl kustomize deploy/overlays/cuda-probe`, as test-kube-node.sh rendered it.
fn overlay(n: &Node) -> Vec<Value> {
    let text = std::fs::read_to_string(n.dir.join("cuda-probe.yaml")).expect("cuda-probe.yaml");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("overlay document"))
        .filter(|d| !d.is_null())
        .collect()
}

fn of_kind(docs: &[Value], kind: &str) -> Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .cloned()
        .unwrap_or_else(|| panic!("the overlay has no {kind}"))
}

/// The overlay's policy and binding, as served at `version`. `planted_no_env`: a copy of the
/// policy whose patch lacks the variable, under its own name, bound to namespaces labelled
/// `PLANTED_NO_ENV`.
fn policy_docs(n: &Node, version: &str, planted_no_env: bool) -> Vec<Value> {
    let docs = overlay(n);
    let mut policy = of_kind(&docs, "MutatingAdmissionPolicy");
    let mut binding = of_kind(&docs, "MutatingAdmissionPolicyBinding");
    if planted_no_env {
        let name = format!("tessera-cuda-probe-{PLANTED_NO_ENV}");
        let expr = policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
            .as_str()
            .expect("the policy's expression")
            .to_owned();
        let start = expr.find("env: [").expect("the policy sets a variable");
        let end = start + expr[start..].find("}],").expect("its end") + 3;
        policy["spec"]["mutations"][0]["applyConfiguration"]["expression"] =
            json!(format!("{}{}", &expr[..start], expr[end..].trim_start()));
        policy["metadata"]["name"] = json!(name);
        binding["metadata"]["name"] = json!(name);
        binding["spec"]["policyName"] = json!(name);
        binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"] =
            json!({ LABEL: PLANTED_NO_ENV });
    }
    for d in [&mut policy, &mut binding] {
        d["apiVersion"] = json!(format!("admissionregistration.k8s.io/{version}"));
    }
    vec![policy, binding]
}

/// Applies the overlay's policy to the API server where it serves the API.
pub fn install_policy(n: &Node, planted_no_env: bool) -> Injection {
    let served = |v: &str| {
        kubectl(
            n,
            &[
                "get",
                "--raw",
                &format!("/apis/admissionregistration.k8s.io/{v}"),
            ],
            None,
        )
        .is_ok_and(|r| r.contains("\"mutatingadmissionpolicies\""))
    };
    let Some(version) = ["v1", "v1beta1"].into_iter().find(|v| served(v)) else {
        return Injection::Patch;
    };
    let list = json!({"apiVersion": "v1", "kind": "List",
        "items": policy_docs(n, version, planted_no_env)});
    kubectl(
        n,
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&list.to_string()),
    )
    .expect("apply the overlay's admission policy");
    Injection::Policy(version)
}

/// The policy's patch, applied by hand where the server cannot run it: the same two read-only
/// hostPath mounts and the variable, on each container with an `nvidia.com/*` limit that does
/// not set the variable itself.
pub fn inject_by_hand(pod: &mut Value) {
    let mut any = false;
    for c in pod["spec"]["containers"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let gpu = c["resources"]["limits"]
            .as_object()
            .is_some_and(|l| l.keys().any(|k| k.starts_with("nvidia.com/")));
        let own = c["env"]
            .as_array()
            .is_some_and(|e| e.iter().any(|v| v["name"] == INJECTION));
        if !gpu || own {
            continue;
        }
        any = true;
        push(&mut c["env"], json!({"name": INJECTION, "value": LIBRARY}));
        push(
            &mut c["volumeMounts"],
            json!({"name": "tessera-probe", "mountPath": "/opt/tessera/lib", "readOnly": true}),
        );
        push(
            &mut c["volumeMounts"],
            json!({"name": "tessera-probe-socket", "mountPath": "/run/tessera", "readOnly": true}),
        );
    }
    if any {
        push(
            &mut pod["spec"]["volumes"],
            json!({"name": "tessera-probe", "hostPath": {"path": "/opt/tessera/lib", "type": "Directory"}}),
        );
        push(
            &mut pod["spec"]["volumes"],
            json!({"name": "tessera-probe-socket", "hostPath": {"path": "/run/tessera", "type": "Directory"}}),
        );
    }
}

fn push(list: &mut Value, item: Value) {
    if !list.is_array() {
        *list = json!([]);
    }
    list.as_array_mut().expect("array").push(item);
}

/// Creates the namespace with `tessera.dev/cuda-probe=<value>`, or labels it.
pub fn labelled_namespace(n: &Node, ns: &str, value: &str) {
    let api: Api<Namespace> = Api::all(n.client.clone());
    let labels = json!({"metadata": {"name": ns, "labels": {LABEL: value}}});
    if n.rt.block_on(api.get_opt(ns)).ok().flatten().is_some() {
        n.rt.block_on(api.patch(ns, &PatchParams::default(), &Patch::Merge(&labels)))
            .expect("label the namespace");
    } else {
        let obj = serde_json::from_value(labels).expect("namespace");
        n.rt.block_on(api.create(&PostParams::default(), &obj))
            .expect("namespace");
    }
}

/// A tenant pod: cuda-tenant as PID 1 of container `main`.
pub struct Tenant<'a> {
    pub name: &'a str,
    /// The GPU resource it asks for (one of it); `None`: no GPU.
    pub resource: Option<&'a str>,
    pub image: &'a str,
    pub env: Vec<(&'a str, String)>,
    pub uid: Option<u32>,
    /// Mounts the socket and the library and sets the variable itself, as a pod that holds no
    /// GPU (so the policy passes it by) but wants to write to the socket would.
    pub by_hand: bool,
}

impl Tenant<'_> {
    pub fn pod(&self, ns: &str) -> Value {
        let mut env: Vec<Value> = self
            .env
            .iter()
            .map(|(k, v)| json!({"name": k, "value": v}))
            .collect();
        let mut c = json!({
            "name": "main",
            "image": self.image,
            "imagePullPolicy": "Never",
            "env": [],
            "resources": self.resource.map_or(json!({}), |r| super::gpus(r, 1)),
        });
        let mut spec = json!({
            "hostNetwork": true,
            "terminationGracePeriodSeconds": 1,
        });
        if self.by_hand {
            env.push(json!({"name": INJECTION, "value": LIBRARY}));
            c["volumeMounts"] = json!([
                {"name": "lib", "mountPath": "/opt/tessera/lib", "readOnly": true},
                {"name": "sock", "mountPath": "/run/tessera", "readOnly": true},
            ]);
            spec["volumes"] = json!([
                {"name": "lib", "hostPath": {"path": "/opt/tessera/lib", "type": "Directory"}},
                {"name": "sock", "hostPath": {"path": "/run/tessera", "type": "Directory"}},
            ]);
        }
        c["env"] = json!(env);
        if let Some(uid) = self.uid {
            spec["securityContext"] = json!({"runAsUser": uid, "runAsGroup": uid});
        }
        spec["containers"] = json!([c]);
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": self.name, "labels": {"app": self.name}},
            "spec": spec,
        })
    }
}

/// Creates the pod the way `injection` says; returns the server's object as JSON.
pub fn create_tenant(n: &Node, ns: &str, t: &Tenant, injection: Injection) -> Value {
    let mut pod = t.pod(ns);
    if injection == Injection::Patch && !t.by_hand {
        inject_by_hand(&mut pod);
    }
    serde_json::to_value(n.create(pod)).expect("pod json")
}

/// What the policy put into the server's pod object for container `main`: the variable, and
/// the read-only mount paths of the probe's volumes with their hostPaths.
pub fn injected(pod: &Value) -> (Option<String>, Vec<(String, String, bool)>) {
    let c = &pod["spec"]["containers"][0];
    let env = c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == INJECTION)
        .and_then(|e| e["value"].as_str().map(str::to_owned));
    let volumes = pod["spec"]["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut mounts: Vec<(String, String, bool)> = c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let v = volumes.iter().find(|v| v["name"] == m["name"])?;
            Some((
                m["mountPath"].as_str()?.to_owned(),
                v["hostPath"]["path"].as_str()?.to_owned(),
                m["readOnly"].as_bool().unwrap_or(false),
            ))
        })
        .filter(|(path, _, _)| path.starts_with("/opt/tessera") || path.starts_with("/run/tessera"))
        .collect();
    mounts.sort();
    (env, mounts)
}

/// Until the API server's policy acts on a GPU pod in `ns` (a server-side dry run): a new
/// policy takes effect once the server's informers have it.
pub fn wait_policy(n: &Node, ns: &str, injection: Injection, variable: bool) {
    if injection == Injection::Patch {
        return;
    }
    let probe = Tenant {
        name: "policy-check",
        resource: Some("nvidia.com/gpu"),
        image: TENANT,
        env: Vec::new(),
        uid: None,
        by_hand: false,
    };
    let mut pod = probe.pod(ns);
    pod["spec"]["nodeName"] = json!(n.name());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = kubectl(
            n,
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            Some(&pod.to_string()),
        );
        if let Ok(obj) = out.as_deref().map(serde_json::from_str::<Value>) {
            let (env, mounts) = injected(&obj.unwrap_or_default());
            if mounts.len() == 2 && env.is_some() == variable {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the admission policy did not act on a pod in {ns} within 30 s: {out:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The socket as the node has it (the hostPath /run/tessera is this folder).
pub fn socket(n: &Node) -> PathBuf {
    n.dir.join("node/probe-socket/probe.sock")
}

/// tessera's pod as the overlay's DaemonSet would make it on this node, with what only this node
/// needs (install::exporter_pod): listening on the node's free port, its debug endpoint on,
/// every detail, and short cadences so that a probe's figure is due within seconds.
pub fn exporter(n: &Node, scenario_yaml: &str) -> Scraped {
    // The DaemonSet selects GPU nodes by GPU Feature Discovery's label.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(n.client.clone());
    n.rt.block_on(nodes.patch(
        n.name(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"nvidia.com/gpu.present": "true"}}})),
    ))
    .expect("label the node");
    let docs = overlay(n);
    let mut template = of_kind(&docs, "DaemonSet")["spec"]["template"].clone();
    let image = n.env["TESSERA_IMAGE"].clone();
    let port: u16 = n.env["TESSERA_POD_PORT"].parse().expect("port");
    let spec = &mut template["spec"];
    // runc plays the NVIDIA runtime's part here.
    if let Some(s) = spec.as_object_mut() {
        s.remove("runtimeClassName");
    }
    spec["initContainers"][0]["image"] = json!(image);
    spec["initContainers"][0]["imagePullPolicy"] = json!("Never");
    let c = &mut spec["containers"][0];
    c["image"] = json!(image);
    c["imagePullPolicy"] = json!("Never");
    let mut args: Vec<Value> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter(|a| {
            !a.as_str()
                .is_some_and(|a| a.starts_with("--web.listen-address"))
        })
        .cloned()
        .collect();
    for a in [
        format!("--web.listen-address=127.0.0.1:{port}"),
        "--web.enable-debug=true".into(),
        "--metrics.detail=full".into(),
        "--sample.interval=500ms".into(),
        "--kubelet.poll-interval=1s".into(),
        "--nvml.process-interval=1s".into(),
    ] {
        args.push(json!(a));
    }
    c["args"] = json!(args);
    // The kubelet's root is in the node's state folder.
    let pr = Path::new(&n.env["POD_RESOURCES_SOCKET"])
        .parent()
        .expect("pod-resources dir")
        .display()
        .to_string();
    for v in spec["volumes"].as_array_mut().expect("volumes") {
        if v["name"] == "pod-resources" {
            v["hostPath"]["path"] = json!(pr);
        }
    }
    let dir = n.dir.join("probe-exporter");
    std::fs::create_dir_all(&dir).expect("dir");
    let scenario_path = dir.join("scenario.yaml");
    std::fs::write(&scenario_path, scenario_yaml).expect("scenario");
    let pids = n.dir.join("pids");
    let pod = install::exporter_pod(
        &template,
        &install::fake_node_mounts(n, &scenario_path, &pids),
    );
    let _ = std::fs::remove_file(socket(n));
    let created = n.create(pod);
    let uid = created.metadata.uid.unwrap_or_default();
    n.wait_running("tessera", "tessera-exporter", "tessera");
    let log = n
        .dir
        .join("node/pod-logs")
        .join(format!("tessera_tessera-exporter_{uid}"))
        .join("tessera/0.log");
    let t = Scraped {
        port,
        log: Some(log),
    };
    t.wait_ready();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket(n).exists() {
        assert!(
            Instant::now() < deadline,
            "tessera's pod made no socket at /run/tessera/probe.sock\n{}",
            t.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t
}
