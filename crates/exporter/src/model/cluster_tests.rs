use super::*;

fn pod(ns: &str, name: &str, uid: &str, hash: Option<&str>, ids: &[(&str, &str)]) -> PodMeta {
    PodMeta {
        uid: uid.into(),
        namespace: ns.into(),
        name: name.into(),
        config_hash: hash.map(Into::into),
        containers: ids
            .iter()
            .map(|(n, id)| ContainerMeta {
                name: (*n).into(),
                container_id: Some((*id).into()),
            })
            .collect(),
        ..PodMeta::default()
    }
}

#[test]
fn lookups() {
    let v = ClusterView::new(
        vec![
            pod(
                "b",
                "web",
                "11111111-2222-3333-4444-555555555555",
                None,
                &[("main", "c1")],
            ),
            pod(
                "a",
                "etcd",
                "99999999-0000-0000-0000-000000000000",
                Some("0123456789abcdef0123456789abcdef"),
                &[("etcd", "c2")],
            ),
        ],
        BTreeMap::new(),
        vec![DraDevice {
            driver: "d".into(),
            pool: "p".into(),
            device: "gpu-0".into(),
            ..Default::default()
        }],
    );
    assert_eq!(v.pods[0].name, "etcd", "sorted by namespace");
    assert_eq!(
        v.pod_by_uid("11111111_2222_3333_4444_555555555555")
            .map(|p| p.name.as_str()),
        Some("web")
    );
    assert_eq!(v.pod_by_uid("111111112222333344445555555555 55"), None);
    assert_eq!(
        v.pod_by_uid("11111111222233334444555555555555")
            .map(|p| p.name.as_str()),
        Some("web")
    );
    assert_eq!(
        v.pod_by_uid("0123456789ABCDEF0123456789ABCDEF")
            .map(|p| p.name.as_str()),
        Some("etcd")
    );
    assert_eq!(
        v.pod_by_uid("01234567-89ab-cdef-0123-456789abcdef")
            .map(|p| p.name.as_str()),
        Some("etcd")
    );
    assert_eq!(
        v.pod_by_uid("99999999-0000-0000-0000-000000000000")
            .map(|p| p.name.as_str()),
        Some("etcd")
    );
    assert_eq!(
        v.pod_by_container_id("containerd://c1")
            .map(|(p, c)| (p.name.as_str(), c)),
        Some(("web", "main"))
    );
    assert_eq!(v.pod_by_container_id("c2").map(|(_, c)| c), Some("etcd"));
    assert!(v.pod_by_container_id("").is_none());
    assert_eq!(
        v.pod_by_name("b", "web").map(|p| p.uid.as_str()),
        Some("11111111-2222-3333-4444-555555555555")
    );
    assert!(v.pod_by_name("a", "web").is_none());
    assert!(v.dra_device("d", "p", "gpu-0").is_some());
    assert!(v.dra_device("d", "p", "gpu-1").is_none());
}
