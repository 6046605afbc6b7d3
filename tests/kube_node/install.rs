//! tessera installed as users install it: its image (scripts/image.sh, loaded into the node's
//! containerd) run from the chart's rendered DaemonSet pod spec by the real kubelet, with the
//! chart's host mounts and security context, and scraped. scripts/test-kube-node.sh renders the
//! chart (`runtimeClassName` empty, `kubelet.podResourcesDir` at this node's kubelet, a free
//! `port`) and writes its pod template to `tessera-pod-template.json`.
//!
//! What this node cannot give the pod, and the test therefore adds (each is named where it is
//! added): the driver's NVML (the fake library, mounted where the NVIDIA container runtime
//! mounts libnvidia-ml.so.1), a route to the API server (hostNetwork and a kubeconfig), and
//! probes that reach the pod (they go to the node IP, a TEST-NET address nothing answers on).

use std::time::Duration;

use k8s_openapi::api::core::v1::Node as NodeObject;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};

use super::{gpu_uuid, gpus, node, pod, scenario, want, Gpu, SLEEP};
use crate::support;

/// Where NVIDIA's container toolkit puts the driver's library in a merged-/usr image.
pub(super) const NVML_IN_IMAGE: &str = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1";

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn the_charts_pod_spec_runs_the_image_on_a_real_kubelet_and_joins_a_gpu_pod() {
    let n = node();
    let ns = "gpu-work";
    let _work = n.cleanup(ns);
    let _exporter = n.cleanup("tessera");
    let gpu = gpu_uuid(0x1a57);
    n.devices(&[("nvidia.com/gpu", vec![gpu.clone()])]);
    n.create(pod(
        ns,
        "app",
        &[("main", SLEEP, gpus("nvidia.com/gpu", 1))],
    ));
    let app = n.track("app", &n.wait_running(ns, "app", "main"));
    assert_eq!(app.device, gpu);

    // The chart selects GPU nodes by GPU Feature Discovery's label.
    let nodes: Api<NodeObject> = Api::all(n.client.clone());
    n.rt.block_on(nodes.patch(
        n.name(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"nvidia.com/gpu.present": "true"}}})),
    ))
    .expect("label the node");

    let install = n.dir.join("install");
    std::fs::create_dir_all(&install).expect("install dir");
    let scenario_path = install.join("scenario.yaml");
    std::fs::write(
        &scenario_path,
        scenario(
            &n,
            &[Gpu::whole(&gpu)],
            &[("app", &gpu, "memory_mib: 3072, sm_util: 35")],
        ),
    )
    .expect("scenario");
    let template: Value = serde_json::from_str(
        &std::fs::read_to_string(n.dir.join("tessera-pod-template.json")).expect("template"),
    )
    .expect("template json");
    let port = n.env["TESSERA_POD_PORT"].parse::<u16>().expect("port");
    let pids = n.dir.join("pids");
    let exporter = exporter_pod(&template, &fake_node_mounts(&n, &scenario_path, &pids));
    n.create(exporter);
    let running = n.wait_running("tessera", "tessera-exporter", "tessera");
    let pid = n.task_pid(&running.id);

    // The chart's security context, as the runtime applied it: root (the socket needs it),
    // every capability dropped, no privilege escalation, the runtime's seccomp filter.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    };
    assert!(field("Uid:").starts_with("0\t"), "{status}");
    assert_eq!(field("CapEff:"), "0000000000000000", "{status}");
    assert_eq!(field("CapBnd:"), "0000000000000000", "{status}");
    assert_eq!(field("NoNewPrivs:"), "1", "{status}");
    assert_eq!(field("Seccomp:"), "2", "{status}");

    let t = super::Scraped { port, log: None };
    t.wait_ready();
    let h = [
        ("namespace", ns),
        ("pod", "app"),
        ("container", "main"),
        ("uuid", gpu.as_str()),
        ("sharing_mode", "exclusive"),
    ];
    t.expect(
        "the app pod's series from tessera in its pod",
        Duration::from_secs(60),
        &[
            want(
                "gpu_container_allocation",
                &[("pod", "app")],
                &[h.as_slice(), &[("device_id", gpu.as_str())]].concat(),
            ),
            want("gpu_container_memory_used_bytes", &[("pod", "app")], &h)
                .value(3072.0 * 1048576.0),
            want(
                "tessera_collector_success",
                &[("collector", "kube")],
                &[("node", n.name())],
            )
            .value(1.0),
        ],
    );
}

/// The DaemonSet's pod, as its controller would make it for this node, with what only this
/// node needs added: each `(name, host path, path in the container)` mounted read-only.
/// What tessera's pod mounts on the tier in place of a GPU node's: the fake NVML where the
/// container toolkit puts the driver's library, its scenario, the folder in which the scenario
/// names the tenants' PIDs, and the tier's kubeconfig.
pub(super) fn fake_node_mounts(
    n: &super::Node,
    scenario_path: &std::path::Path,
    pids: &std::path::Path,
) -> Vec<(&'static str, String, String)> {
    vec![
        (
            "fake-nvml",
            support::fake_library().display().to_string(),
            NVML_IN_IMAGE.to_owned(),
        ),
        (
            "fake-nvml-scenario",
            scenario_path.display().to_string(),
            "/etc/tessera/fake-nvml.yaml".to_owned(),
        ),
        (
            "pids",
            pids.display().to_string(),
            pids.display().to_string(),
        ),
        (
            "kubeconfig",
            n.dir.join("tessera-pod.kubeconfig").display().to_string(),
            "/etc/tessera/kubeconfig".to_owned(),
        ),
    ]
}

pub(super) fn exporter_pod(template: &Value, mounts: &[(&str, String, String)]) -> Value {
    let mut spec = template["spec"].clone();
    // No pod network here (see kube_node::pod): the API server and the scrape are on loopback.
    spec["hostNetwork"] = json!(true);
    let mut container = spec["containers"][0].take();
    assert_eq!(container["name"], "tessera", "the chart's container");
    // The probes go to the pod IP, here the node's TEST-NET address, which nothing answers;
    // the test asks /readyz itself.
    if let Some(c) = container.as_object_mut() {
        c.remove("livenessProbe");
        c.remove("readinessProbe");
    }
    for (name, host, path) in mounts {
        spec["volumes"]
            .as_array_mut()
            .expect("volumes")
            .push(json!({"name": name, "hostPath": {"path": host}}));
        container["volumeMounts"]
            .as_array_mut()
            .expect("volumeMounts")
            .push(json!({"name": name, "mountPath": path, "readOnly": true}));
    }
    let env = container["env"].as_array_mut().expect("env");
    env.push(json!({"name": "TESSERA_FAKE_NVML_SCENARIO", "value": "/etc/tessera/fake-nvml.yaml"}));
    // In-cluster config would name the `kubernetes` Service, which nothing routes here.
    env.push(json!({"name": "KUBECONFIG", "value": "/etc/tessera/kubeconfig"}));
    spec["containers"][0] = container;
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "namespace": "tessera", "name": "tessera-exporter",
            "labels": template["metadata"]["labels"].clone(),
        },
        "spec": spec,
    })
}
