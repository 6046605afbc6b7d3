use super::*;

#[test]
fn the_claim_the_slice_and_the_kubelet_name_one_device() {
    let gpus: Vec<GpuSample> = (0..9)
        .map(|i| GpuSample {
            index: i,
            uuid: format!("GPU-{i}"),
            ..Default::default()
        })
        .collect();
    let d = demo(&gpus, "node-a");
    let uuid = d
        .slice
        .spec
        .devices
        .as_ref()
        .and_then(|v| v[0].attributes.as_ref());
    assert_eq!(
        uuid.and_then(|a| a["uuid"].string.as_deref()),
        Some("GPU-8")
    );
    let result = &d.claim["status"]["allocation"]["devices"]["results"][0];
    assert_eq!(
        (result["pool"].as_str(), result["device"].as_str()),
        (Some("node-a"), Some(DEVICE))
    );
    let reserved = d.claim["status"]["reservedFor"].as_array().map(Vec::len);
    assert_eq!(reserved, Some(TENANTS.len()));
    let dynamic: Vec<_> = d
        .pods
        .iter()
        .flat_map(|p| &p.containers)
        .flat_map(|c| &c.dynamic)
        .collect();
    assert_eq!(dynamic.len(), TENANTS.len());
    assert!(dynamic
        .iter()
        .all(|x| x.pool == "node-a" && x.device == DEVICE && x.claim_name == CLAIM));
}
