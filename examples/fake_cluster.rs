//! A fake kubelet and API server for runs on a real GPU node without Kubernetes (the H100
//! validation, lab/device/archive/billing_h100.sh): one pod `ml/two-proc-0` whose container
//! `main` holds GPU `<uuid>`. Prints the container's cgroup path (to create under
//! /sys/fs/cgroup and put the workload's processes in) and the kubeconfig, then serves until
//! killed.
//!
//!     fake_cluster <dir> <node> <gpu-uuid>
//!
//! With pod names after the UUID, pods `energy/<name>` (container `main`) instead, whose
//! holdings follow the file `<dir>/holding`, read every 200 ms: `shared` gives each pod a
//! replica of the GPU (`<uuid>::<i>`, as time-slicing and MPS hand them out), `exclusive <pod>`
//! gives that pod the whole GPU and the others nothing (lab/device/energy). Prints
//! `CGROUP <pod> <path>` for each.
//!
//!     fake_cluster <dir> <node> <gpu-uuid> <pod>...

use std::time::Duration;

use tessera_demo::cluster::{self, PodPlan};
use tessera_demo::fakes::apiserver::{FakeApiServer, FakeCluster};
use tessera_demo::fakes::kubelet::FakeKubelet;

/// The pods as the holding file says: `None` for a line it does not understand.
fn plans(pods: &[String], uuid: &str, holding: &str) -> Option<Vec<PodPlan>> {
    let words: Vec<&str> = holding.split_whitespace().collect();
    let ids = |i: usize, name: &str| -> Option<Vec<String>> {
        match words.as_slice() {
            ["shared"] => Some(vec![format!("{uuid}::{i}")]),
            ["exclusive", who] if *who == name => Some(vec![uuid.to_owned()]),
            ["exclusive", who] if pods.iter().any(|p| p == who) => Some(vec![]),
            _ => None,
        }
    };
    pods.iter()
        .enumerate()
        .map(|(i, name)| {
            let plan = PodPlan::single("energy", name, "nvidia.com/gpu", &ids(i, name)?, &[]);
            Some(PodPlan {
                owner: Some(("Job".into(), name.clone())),
                ..plan
            })
        })
        .collect()
}

async fn serve_pods(
    dir: &std::path::Path,
    node: &str,
    uuid: &str,
    pods: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    let holding = dir.join("holding");
    if !holding.exists() {
        std::fs::write(&holding, "shared\n")?;
    }
    let read = || std::fs::read_to_string(&holding).unwrap_or_default();
    let mut current = read();
    let first = plans(pods, uuid, &current).ok_or("bad holding file")?;
    let allocatable = || vec![("nvidia.com/gpu".to_owned(), uuid.to_owned())];
    let socket = dir.join("kubelet.sock");
    let kubelet =
        FakeKubelet::start(&socket, cluster::kubelet_state(&first, allocatable())).await?;
    let api = FakeApiServer::start(FakeCluster {
        pods: first.iter().map(|p| p.to_pod(node)).collect(),
        nodes: vec![cluster::node(node, Default::default())],
        ..Default::default()
    })
    .await?;
    let kubeconfig = cluster::write_kubeconfig(dir, &api.url())?;
    for p in &first {
        println!("CGROUP {} {}", p.name, p.cgroup_path("main"));
    }
    println!("KUBECONFIG {}", kubeconfig.display());
    println!("SOCKET {}", socket.display());
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = read();
        if now == current {
            continue;
        }
        match plans(pods, uuid, &now) {
            Some(p) => {
                kubelet.set_state(cluster::kubelet_state(&p, allocatable()));
                eprintln!("holding: {}", now.trim());
            }
            None => eprintln!("holding: ignored {:?}", now.trim()),
        }
        current = now;
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (dir, node, uuid, pods) = match args.as_slice() {
        [_, dir, node, uuid, pods @ ..] => (dir, node, uuid, pods),
        _ => return Err("usage: fake_cluster <dir> <node> <gpu-uuid> [<pod>...]".into()),
    };
    let dir = std::path::Path::new(dir);
    if !pods.is_empty() {
        return serve_pods(dir, node, uuid, pods).await;
    }
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
