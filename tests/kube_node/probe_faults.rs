//! The CUDA probe's tenants where something is missing (probe.rs sets them up): an image
//! without CUPTI, whose probe says so and whose device's split is withheld with that reason;
//! and planted faults, each of which must fail the check that guards against it: the socket
//! at 0600 shuts out the other user's pod, the policy without its variable every probe.

use std::os::unix::fs::PermissionsExt;

use super::probe::{
    self, create_tenant, exporter, install_policy, labelled_namespace, wait_policy, Injection,
    Tenant, PLANTED_NO_ENV, TENANT, TENANT_WITHOUT_CUPTI,
};
use super::probe_cases::{absent, assert_injected, rate, track, Probed, LIMIT};
use super::probe_checks::{failures, one, split_of, wait_checks};
use super::{gpu_uuid, node, scenario, Gpu};

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn a_tenant_image_without_cupti_has_its_figure_withheld_for_that_reason() {
    let n = node();
    let ns = "probe-no-cupti";
    let _exporter = n.cleanup("tessera");
    let _tenants = n.cleanup(ns);
    let g = gpu_uuid(0x0be2);
    n.devices(&[("nvidia.com/gpu", vec![format!("{g}::0"), format!("{g}::1")])]);
    let injection = install_policy(&n, false);
    labelled_namespace(&n, ns, "enabled");
    wait_policy(&n, ns, injection, true);
    let scen = scenario(
        &n,
        &[Gpu::whole(&g)],
        &[
            ("with-cupti", &g, "memory_mib: 1024, sm_util: 2"),
            ("no-cupti", &g, "memory_mib: 1024, sm_util: 2"),
        ],
    );
    let t = exporter(&n, &scen);
    for (name, image) in [("with-cupti", TENANT), ("no-cupti", TENANT_WITHOUT_CUPTI)] {
        let pod = create_tenant(
            &n,
            ns,
            &Tenant {
                name,
                resource: Some("nvidia.com/gpu"),
                image,
                env: vec![("FAKE_CUPTI_KERNELS_PER_FLUSH", "20000".into())],
                uid: None,
                by_hand: false,
            },
            injection,
        );
        assert_injected(&pod, injection, true);
    }
    let with = track(&n, ns, "with-cupti");
    let without = track(&n, ns, "no-cupti");
    let pid = without.pid.to_string();
    let g_ = g.clone();
    wait_checks(
        &t,
        "the split withheld for the probe without CUPTI",
        LIMIT,
        |m, debug| {
            let split = split_of(debug, &g_);
            let why = split["why"].as_str().unwrap_or_default();
            vec![
                (
                    "the probe with CUPTI reports".into(),
                    one(
                        m,
                        "gpu_process_kernels_total",
                        &[("pid", &with.pid.to_string())],
                        &[("pod", "with-cupti"), ("uuid", &g_)],
                    )
                    .map(|_| ()),
                ),
                (
                    "withheld".into(),
                    one(
                        m,
                        "gpu_compute_split_info",
                        &[("uuid", &g_)],
                        &[("method", "withheld")],
                    )
                    .map(|_| ()),
                ),
                (
                    "the reason names the probe without CUPTI".into(),
                    if why.starts_with("no-cupti") && why.contains(&pid) {
                        Ok(())
                    } else {
                        Err(format!("why: {why:?}"))
                    },
                ),
                (
                    "the process says its probe found no CUPTI".into(),
                    if split["no_cupti"].as_array().is_some_and(|a| {
                        a.iter().any(|p| p.as_u64() == Some(u64::from(without.pid)))
                    }) {
                        Ok(())
                    } else {
                        Err(format!("no_cupti: {}", split["no_cupti"]))
                    },
                ),
                (
                    "no container figure on the GPU".into(),
                    absent(m, "gpu_container_busy_ratio", "uuid", &g_),
                ),
                (
                    "no kernel count for the blind probe".into(),
                    absent(m, "gpu_process_kernels_total", "pid", &pid),
                ),
            ]
        },
    );
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn planted_faults_fail_their_checks() {
    let n = node();
    let (ns, planted_ns) = ("probe-planted", "probe-planted-no-env");
    let _exporter = n.cleanup("tessera");
    let _tenants = n.cleanup(ns);
    let _planted = n.cleanup(planted_ns);
    let g = gpu_uuid(0x0be3);
    n.devices(&[(
        "nvidia.com/gpu",
        vec![format!("{g}::0"), format!("{g}::1"), format!("{g}::2")],
    )]);
    let injection = install_policy(&n, false);
    let planted = install_policy(&n, true);
    labelled_namespace(&n, ns, "enabled");
    labelled_namespace(&n, planted_ns, PLANTED_NO_ENV);
    wait_policy(&n, ns, injection, true);
    wait_policy(&n, planted_ns, planted, false);
    let scen = scenario(
        &n,
        &[Gpu::whole(&g)],
        &[
            ("root", &g, "memory_mib: 1024, sm_util: 2"),
            ("other-user", &g, "memory_mib: 1024, sm_util: 2"),
            ("no-env", &g, "memory_mib: 1024, sm_util: 2"),
        ],
    );
    let t = exporter(&n, &scen);
    // Planted: the socket as a chart that locked it to its owner would leave it.
    std::fs::set_permissions(probe::socket(&n), std::fs::Permissions::from_mode(0o600))
        .expect("chmod the socket");
    let tenant = |name, uid| Tenant {
        name,
        resource: Some("nvidia.com/gpu"),
        image: TENANT,
        env: vec![("FAKE_CUPTI_KERNELS_PER_FLUSH", "20000".into())],
        uid,
        by_hand: false,
    };
    create_tenant(&n, ns, &tenant("root", None), injection);
    create_tenant(&n, ns, &tenant("other-user", Some(65534)), injection);
    let pod = create_tenant(&n, planted_ns, &tenant("no-env", None), planted);
    if planted != Injection::Patch {
        // Planted: the policy mounted both paths but set no variable.
        assert_injected(&pod, planted, false);
    }
    let root = track(&n, ns, "root");
    let other = track(&n, ns, "other-user");
    let no_env = n.track("no-env", &n.wait_running(planted_ns, "no-env", "main"));
    // With unprobed tenants beside it no share is split by the probes: what is checked is
    // that each probe reports, under its pod's labels.
    let probed = |pod, pid, ns_: &str, m: &str| {
        vec![Probed {
            pod,
            pid,
            uuid: g.clone(),
            busy: rate(20_000),
        }
        .reports(ns_, m)]
    };
    // The honest tenant's figures come (so the probes had their time), then the planted ones
    // must still miss theirs.
    let (m, _) = wait_checks(&t, "the root tenant's figures", LIMIT, |m, _| {
        probed("root", root.pid, ns, m)
    });
    let other_user = failures(&probed("other-user", other.pid, ns, &m));
    assert!(
        !other_user.is_empty(),
        "with the socket at 0600 the other user's probe still reported: the check cannot fail"
    );
    let missing = failures(&probed("no-env", no_env.pid, planted_ns, &m));
    assert!(
        !missing.is_empty(),
        "without CUDA_INJECTION64_PATH the tenant still reported: the check cannot fail"
    );
    eprintln!(
        "planted faults caught:\n  socket 0600: {}\n  no variable: {}",
        other_user.join("; "),
        missing.join("; ")
    );
}
