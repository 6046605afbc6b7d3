use super::*;

fn container(name: &str, ids: &[&str]) -> pb::ContainerResources {
    pb::ContainerResources {
        name: name.into(),
        devices: vec![pb::ContainerDevices {
            resource_name: "nvidia.com/gpu".into(),
            device_ids: ids.iter().map(|s| s.to_string()).collect(),
            topology: None,
        }],
        ..Default::default()
    }
}

fn list(containers: Vec<pb::ContainerResources>) -> pb::ListPodResourcesResponse {
    pb::ListPodResourcesResponse {
        pod_resources: vec![pb::PodResources {
            name: "p".into(),
            namespace: "ns".into(),
            containers,
        }],
    }
}

#[test]
fn overlong_id_is_skipped_and_counted() {
    let long = "G".repeat(MAX_FIELD_LEN + 1);
    let out = allocations_from_list(list(vec![container("c", &["GPU-a", &long])]));
    assert_eq!(out.skipped, 1);
    assert_eq!(out.containers[0].devices[0].device_ids, vec!["GPU-a"]);
}

#[test]
fn overlong_container_name_skips_the_container() {
    let long = "c".repeat(MAX_FIELD_LEN + 1);
    let out = allocations_from_list(list(vec![
        container(&long, &["GPU-a"]),
        container("ok", &[]),
    ]));
    assert_eq!(out.skipped, 1);
    assert_eq!(out.containers.len(), 1);
    assert_eq!(out.containers[0].container, "ok");
}

#[test]
fn container_cap_counts_the_rest() {
    let many = (0..MAX_CONTAINERS + 3)
        .map(|_| container("c", &[]))
        .collect();
    let out = allocations_from_list(list(many));
    assert_eq!(out.containers.len(), MAX_CONTAINERS);
    assert_eq!(out.skipped, 3);
}

#[test]
fn dynamic_resources_flatten_per_device() {
    let mut c = container("c", &[]);
    c.dynamic_resources = vec![
        pb::DynamicResource {
            claim_name: "claim".into(),
            claim_namespace: "ns".into(),
            claim_resources: vec![
                pb::ClaimResource {
                    driver_name: "gpu.nvidia.com".into(),
                    pool_name: "node-1".into(),
                    device_name: "gpu-0".into(),
                    share_id: Some("s1".into()),
                    ..Default::default()
                },
                pb::ClaimResource {
                    driver_name: "gpu.nvidia.com".into(),
                    pool_name: "node-1".into(),
                    device_name: "gpu-1".into(),
                    ..Default::default()
                },
            ],
        },
        // Holds no device: produces no entry and is not a loss.
        pb::DynamicResource {
            claim_name: "empty".into(),
            claim_namespace: "ns".into(),
            claim_resources: vec![],
        },
    ];
    let out = allocations_from_list(list(vec![c]));
    let dynamic = &out.containers[0].dynamic;
    assert_eq!(dynamic.len(), 2);
    assert_eq!(dynamic[0].share_id.as_deref(), Some("s1"));
    assert_eq!(dynamic[1].device, "gpu-1");
    assert_eq!(dynamic[1].share_id, None);
    assert_eq!(out.skipped, 0);
}

#[test]
fn allocatable_flattens_and_caps_ids() {
    let resp = pb::AllocatableResourcesResponse {
        devices: vec![pb::ContainerDevices {
            resource_name: "nvidia.com/gpu".into(),
            device_ids: vec!["GPU-a::0".into(), "GPU-a::1".into(), "x".repeat(2000)],
            topology: None,
        }],
        ..Default::default()
    };
    let out = allocatable_from(resp);
    assert_eq!(out.devices.len(), 2);
    assert_eq!(out.skipped, 1);
    assert_eq!(out.devices[1].device_id, "GPU-a::1");
}
