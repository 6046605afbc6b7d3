//! The chart's RBAC, proven least privilege on a real server with `--authorization-mode=RBAC`:
//! with exactly the rendered rules tessera is healthy; with any one verb of any rule removed
//! it reports that very refusal; and its identity can neither read secrets nor write anything.
//! scripts/test-kube-real.sh runs this once for the Helm rendering and once for kustomize's.

use std::time::{Duration, Instant};

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use serde_json::json;

use super::{pod, real, Real, NODE};
use crate::support::{self, Exporter};

const NS: &str = "rbac";

/// Puts the role's rules back however the test ends.
struct Restore<'a> {
    real: &'a Real,
    role: ClusterRole,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        set_rules(
            self.real,
            &self.role,
            self.role.rules.clone().unwrap_or_default(),
        );
    }
}

fn set_rules(real: &Real, role: &ClusterRole, rules: Vec<PolicyRule>) {
    let api: Api<ClusterRole> = Api::all(real.admin.clone());
    let name = role.metadata.name.clone().unwrap_or_default();
    real.rt
        .block_on(api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "rules": rules })),
        ))
        .expect("role update");
}

fn kube_success(e: &Exporter) -> Option<f64> {
    let m = e.get("/metrics").map(|(_, b)| b).unwrap_or_default();
    support::value(
        &m,
        r#"tessera_collector_success{node="test-node",collector="kube"}"#,
    )
}

/// tessera with DRA on and the kubelet off: only the API server's parts run.
fn start(real: &Real) -> Exporter {
    Exporter::builder(support::scenario("timesliced.yaml"))
        .with_cluster()
        .env("KUBECONFIG", real.tessera_kubeconfig())
        .arg("--kubelet.enabled=false")
        .arg("--kube.dra=true")
        .start()
}

/// Healthy throughout `hold` once healthy: the claim GET comes after the first publish.
/// Every removed verb costs this deadline, so it is no longer than a loaded machine needs
/// (the full rules turn healthy within about 2 s here).
fn healthy_for(e: &Exporter, hold: Duration) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(12);
    while kube_success(e) != Some(1.0) {
        if Instant::now() > deadline {
            return Err("never healthy".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let until = Instant::now() + hold;
    while Instant::now() < until {
        if kube_success(e) != Some(1.0) {
            return Err("became unhealthy".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

#[test]
#[ignore = "needs a real kube-apiserver: scripts/test-kube-real.sh"]
fn the_charts_rules_are_exactly_what_tessera_needs() {
    let real = real();
    real.namespace(NS);
    real.node(NODE, json!({}));
    // A pod on this node naming a claim, so that every rule is exercised.
    real.ensure(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": NS, "name": "rbac-claim"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}}),
    );
    let mut p = pod(NS, "rbac-0", NODE, json!({}), None);
    p["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": "rbac-claim"}]);
    real.ensure(p);

    let roles: Api<ClusterRole> = Api::all(real.admin.clone());
    let role = real
        .rt
        .block_on(roles.get(&real.role_name()))
        .expect("the rendered ClusterRole");
    let rules = role.rules.clone().unwrap_or_default();
    assert!(!rules.is_empty());
    let _restore = Restore {
        real: &real,
        role: role.clone(),
    };

    let e = start(&real);
    let ok = healthy_for(&e, Duration::from_secs(5));
    let log = e.stop();
    assert_eq!(ok, Ok(()), "tessera with the chart's rules:\n{log}");
    assert!(!log.contains("forbidden"), "{log}");

    let mut checked = 0;
    for (i, rule) in rules.iter().enumerate() {
        for verb in &rule.verbs {
            let mut fewer = rules.clone();
            fewer[i].verbs.retain(|v| v != verb);
            if fewer[i].verbs.is_empty() {
                fewer.remove(i);
            }
            set_rules(&real, &role, fewer);
            // The authorizer reads roles through an informer: give it a moment.
            std::thread::sleep(Duration::from_millis(500));
            let e = start(&real);
            let result = healthy_for(&e, Duration::from_secs(4));
            let log = e.stop();
            let resources = rule.resources.clone().unwrap_or_default();
            assert!(
                result.is_err(),
                "without {verb} on {resources:?} tessera stayed healthy: the rule is more than it needs\n{log}"
            );
            let refusal = format!(r#"cannot {verb} resource \"{}\""#, resources[0]);
            let refusal_plain = refusal.replace('\\', "");
            assert!(
                log.contains(&refusal) || log.contains(&refusal_plain),
                "without {verb} on {resources:?}, expected a refusal ({refusal_plain}) in:\n{log}"
            );
            checked += 1;
        }
    }
    eprintln!("{checked} verbs removed one at a time, each refused as expected");
    drop(_restore);

    // The same identity, directly: no secrets, no writes.
    let client = real.rt.block_on(async {
        let kc = Kubeconfig::read_from(real.tessera_kubeconfig()).expect("kubeconfig");
        let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("config");
        Client::try_from(cfg).expect("client")
    });
    real.ensure(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"namespace": NS, "name": "token"}, "stringData": {"k": "v"}}));
    let forbidden = |what: &str, r: Result<(), kube::Error>| match r {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => panic!("{what}: expected 403, got {other:?}"),
    };
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), NS);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), NS);
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let rt = &real.rt;
    forbidden(
        "list secrets",
        rt.block_on(secrets.list(&ListParams::default())).map(drop),
    );
    forbidden("get a secret", rt.block_on(secrets.get("token")).map(drop));
    let new_pod: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(pod(NS, "intruder", NODE, json!({}), None)).unwrap();
    forbidden(
        "create a pod",
        rt.block_on(pods.create(&PostParams::default(), &new_pod))
            .map(drop),
    );
    forbidden(
        "delete a pod",
        rt.block_on(pods.delete("rbac-0", &DeleteParams::default()))
            .map(drop),
    );
    forbidden(
        "label a node",
        rt.block_on(nodes.patch(
            NODE,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        ))
        .map(drop),
    );
    let claims: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaim"),
            "resourceclaims",
        ),
    );
    forbidden(
        "delete a claim",
        rt.block_on(claims.delete("rbac-claim", &DeleteParams::default()))
            .map(drop),
    );
    forbidden(
        "list claims",
        rt.block_on(claims.list(&ListParams::default())).map(drop),
    );
    let own_roles: Api<ClusterRole> = Api::all(client);
    forbidden(
        "widen its own role",
        rt.block_on(own_roles.patch(
            &real.role_name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": []})),
        ))
        .map(drop),
    );
}
