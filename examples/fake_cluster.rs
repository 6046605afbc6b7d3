//! A fake kubelet and API server for runs on a real GPU node without Kubernetes (the H100
//! validation, scripts/device/archive/billing_h100.sh): one pod `ml/two-proc-0` whose container
//! `main` holds GPU `<uuid>`. Prints the container's cgroup path (to create under
//! /sys/fs/cgroup and put the workload's processes in) and the kubeconfig, then serves until
//! killed.
//!
//!     fake_cluster <dir> <node> <gpu-uuid>

use tessera::demo::cluster::{self, PodPlan};
use tessera::fakes::apiserver::{FakeApiServer, FakeCluster};
use tessera::fakes::kubelet::FakeKubelet;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, node, uuid] = args.as_slice() else {
        return Err("usage: fake_cluster <dir> <node> <gpu-uuid>".into());
    };
    let dir = std::path::Path::new(dir);
    let plan = PodPlan {
        owner: Some(("Deployment".into(), "two-proc".into())),
        ..PodPlan::single(
            "ml",
            "two-proc-0",
            "nvidia.com/gpu",
            std::slice::from_ref(uuid),
            &[],
        )
    };
    let socket = dir.join("kubelet.sock");
    let plans = [plan];
    let _kubelet = FakeKubelet::start(
        &socket,
        cluster::kubelet_state(&plans, vec![("nvidia.com/gpu".into(), uuid.clone())]),
    )
    .await?;
    let api = FakeApiServer::start(FakeCluster {
        pods: plans.iter().map(|p| p.to_pod(node)).collect(),
        nodes: vec![cluster::node(node, Default::default())],
        ..Default::default()
    })
    .await?;
    let kubeconfig = cluster::write_kubeconfig(dir, &api.url())?;
    println!("CGROUP {}", plans[0].cgroup_path("main"));
    println!("KUBECONFIG {}", kubeconfig.display());
    println!("SOCKET {}", socket.display());
    std::future::pending::<()>().await;
    Ok(())
}
