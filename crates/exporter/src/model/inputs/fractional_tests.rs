use super::*;

const G0: &str = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";
const G1: &str = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn parts<'a>(
    ns: &'a str,
    ann: &'a BTreeMap<String, String>,
    labels: &'a BTreeMap<String, String>,
    init: &[&'a str],
    containers: &[&'a str],
) -> PodParts<'a> {
    PodParts {
        namespace: ns,
        annotations: Some(ann),
        labels: Some(labels),
        init_containers: init.to_vec(),
        containers: containers.to_vec(),
        env: Vec::new(),
    }
}

#[test]
fn hami_two_containers_one_without_devices() {
    // The protocol's own example shape: one entry per container, each ending in `;`.
    let ann = map(&[(
        HAMI_ALLOCATED,
        &format!("{G0},NVIDIA,3000,30:;;{G1},NVIDIA,5000,0:{G0},NVIDIA,1000,100:;"),
    )]);
    let none = BTreeMap::new();
    let s = PodSharing::from_parts(&parts("ml", &ann, &none, &[], &["a", "sidecar", "b"]));
    let got: Vec<_> = s
        .grants
        .iter()
        .map(|g| {
            (
                g.container.as_str(),
                g.uuid.as_deref(),
                g.memory_bytes,
                g.compute_ratio,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("a", Some(G0), Some(3000 * MIB), Some(0.30)),
            ("b", Some(G1), Some(5000 * MIB), None),
            ("b", Some(G0), Some(1000 * MIB), Some(1.0)),
        ]
    );
    assert!(s.grants.iter().all(|g| g.scheduler == Scheduler::Hami));
    assert_eq!(s.grants_for("b").count(), 2);
}

#[test]
fn hami_counts_init_containers_when_it_lists_them() {
    let ann = map(&[(HAMI_ALLOCATED, &format!(";{G0},NVIDIA,2000,50:;"))]);
    let none = BTreeMap::new();
    let s = PodSharing::from_parts(&parts("ml", &ann, &none, &["init"], &["main"]));
    assert_eq!(s.grants.len(), 1);
    assert_eq!(s.grants[0].container, "main");
    // One entry for a pod with an init container: an older HAMi that lists regular ones only.
    let ann = map(&[(HAMI_ALLOCATED, &format!("{G0},NVIDIA,2000,50:;"))]);
    let s = PodSharing::from_parts(&parts("ml", &ann, &none, &["init"], &["main"]));
    assert_eq!(s.grants[0].container, "main");
}

#[test]
fn volcano_and_malformed_entries() {
    let ann = map(&[(
        VOLCANO_ALLOCATED,
        &format!("{G1},NVIDIA,4096,25:;junk:{G0},NVIDIA,x,1:{G0},NVIDIA,10"),
    )]);
    let none = BTreeMap::new();
    let s = PodSharing::from_parts(&parts("ml", &ann, &none, &[], &["a", "b"]));
    assert_eq!(s.grants.len(), 1);
    assert_eq!(s.grants[0].scheduler, Scheduler::Volcano);
    assert_eq!(s.grants[0].memory_bytes, Some(4096 * MIB));
    assert_eq!(s.grants[0].compute_ratio, Some(0.25));
}

#[test]
fn kai_fraction_memory_and_reservation() {
    let labels = map(&[(KAI_GROUP_LABEL, "grp-1")]);
    let ann = map(&[(KAI_FRACTION, "0.5")]);
    let s = PodSharing::from_parts(&parts("team", &ann, &labels, &[], &["main", "side"]));
    assert_eq!(s.kai_groups, vec!["grp-1".to_string()]);
    assert_eq!(s.grants.len(), 1);
    let g = &s.grants[0];
    assert_eq!((g.container.as_str(), g.uuid.as_deref()), ("main", None));
    assert_eq!(g.memory_fraction, Some(0.5));

    let ann = map(&[
        (KAI_MEMORY, "2000"),
        (KAI_CONTAINER, "side"),
        (KAI_NUM_DEVICES, "2"),
    ]);
    let labels = map(&[("runai-gpu-group/a", "a"), ("runai-gpu-group/b", "b")]);
    let s = PodSharing::from_parts(&parts("team", &ann, &labels, &[], &["main", "side"]));
    assert_eq!(s.kai_groups, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(s.grants.len(), 2);
    assert!(s
        .grants
        .iter()
        .all(|g| g.container == "side" && g.memory_bytes == Some(2000 * MIB)));

    let ann = map(&[(KAI_FRACTION, "1.5")]);
    let s = PodSharing::from_parts(&parts("team", &ann, &labels, &[], &["main"]));
    assert!(s.grants.is_empty(), "a fraction above 1 is not a fraction");

    let ann = map(&[(KAI_RESERVED_GPU, G0)]);
    let labels = map(&[
        (KAI_GROUP_LABEL, "grp-1"),
        ("app", "kai-resource-reservation"),
    ]);
    let s = PodSharing::from_parts(&parts(
        "kai-resource-reservation",
        &ann,
        &labels,
        &[],
        &["r"],
    ));
    assert_eq!(
        s.reservation,
        Some(Reservation {
            group: "grp-1".into(),
            uuid: Some(G0.into())
        })
    );
    assert!(s.kai_groups.is_empty() && s.grants.is_empty());
}

#[test]
fn mps_env_and_sizes() {
    let p = PodParts {
        containers: vec!["a", "b"],
        env: vec![
            (
                "a",
                vec![
                    (MPS_THREADS_ENV, "25"),
                    (MPS_MEMORY_ENV, "0=500M,1=2G,bad=1G"),
                ],
            ),
            ("b", vec![("OTHER", "1"), (MPS_THREADS_ENV, "0")]),
        ],
        ..Default::default()
    };
    let s = PodSharing::from_parts(&p);
    assert_eq!(s.mps.len(), 1);
    let a = s.mps_for("a").unwrap();
    assert_eq!(a.thread_ratio, Some(0.25));
    assert_eq!(
        a.pinned_memory,
        vec![(Some(0), 500 * MIB), (Some(1), 2 << 30)]
    );
    assert_eq!(parse_pinned_memory("1G"), vec![(None, 1 << 30)]);
    assert_eq!(parse_size("1024"), Some(1024));
    assert_eq!(parse_size("4Gi"), Some(4 << 30));
    assert_eq!(parse_size("12MB"), Some(12 * MIB));
    assert_eq!(parse_size("3X"), None);
    assert_eq!(parse_size("0M"), None);
    assert_eq!(parse_size(""), None);
}

#[test]
fn placeholder_ids() {
    assert_eq!(split_placeholder_id(&format!("{G0}-3")), Some((G0, 3)));
    assert_eq!(split_placeholder_id(G0), None);
    assert_eq!(split_placeholder_id(&format!("{G0}-")), None);
    assert_eq!(split_placeholder_id(&format!("{G0}::3")), None);
    assert_eq!(split_placeholder_id("MIG-x-1"), None);
}
