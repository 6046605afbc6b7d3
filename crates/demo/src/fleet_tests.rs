use super::*;

#[test]
fn the_same_index_gives_the_same_node() {
    assert_eq!(FleetNode::new(42), FleetNode::new(42));
    let s = super::super::SCENARIO;
    assert_eq!(
        FleetNode::new(42).scenario(s).unwrap(),
        FleetNode::new(42).scenario(s).unwrap()
    );
    assert_eq!(FleetNode::new(42).node_name(), "fleet-0-gpu-00042");
    assert_eq!(FleetNode::new(123).cluster(), "fleet-2");
}

#[test]
fn indices_differ_in_name_mix_and_load() {
    let nodes: Vec<FleetNode> = (0..200).map(FleetNode::new).collect();
    let names: std::collections::BTreeSet<_> = nodes.iter().map(|n| n.node_name()).collect();
    assert_eq!(names.len(), 200);
    let mixes: std::collections::BTreeSet<_> = nodes.iter().map(|n| n.vacant.clone()).collect();
    assert!(
        mixes.len() > 50,
        "only {} sharing mixes in 200 nodes",
        mixes.len()
    );
    let loads: std::collections::BTreeSet<_> = nodes.iter().map(|n| n.load_percent).collect();
    assert!(loads.len() > 30, "only {} loads in 200 nodes", loads.len());
    assert!(nodes.iter().all(|n| (40..=100).contains(&n.load_percent)));
    // Some nodes keep every GPU busy, none is empty on average.
    assert!(nodes.iter().any(|n| n.vacant.is_empty()));
    let vacant: usize = nodes.iter().map(|n| n.vacant.len()).sum();
    assert!(
        (200..=480).contains(&vacant),
        "{vacant} vacant GPUs of 1800"
    );
}

#[test]
fn a_vacant_gpu_loses_its_processes_and_loads_scale() {
    let s = super::super::SCENARIO;
    let node = (0..100)
        .map(FleetNode::new)
        .find(|n| n.is_vacant(4) && !n.is_vacant(0))
        .expect("some node has GPU 4 vacant and GPU 0 not");
    let out = node.scenario(s).unwrap();
    let doc: Value = serde_yaml::from_str(&out).unwrap();
    let phase = &doc["phases"][0];
    let procs = phase["processes"].as_sequence().unwrap();
    assert!(procs.iter().all(|p| p["gpu"].as_u64() != Some(4)));
    let p0 = procs
        .iter()
        .find(|p| p["pid"].as_u64() == Some(41021))
        .unwrap();
    let want = (98.0 * f64::from(node.load_percent) / 100.0).round() as u64;
    assert_eq!(p0["sm_util"].as_u64(), Some(want));
    // Merge keys are resolved: the fake NVML library reads plain mappings.
    assert!(!out.contains("<<"));
    // XIDs of a vacant GPU go with it.
    assert!(doc["phases"][2]
        .get("xids")
        .and_then(Value::as_sequence)
        .is_none_or(|x| x.is_empty()));
}

#[test]
fn index_is_validated() {
    assert_eq!(parse_index("7"), Ok(7));
    assert_eq!(parse_index("99999"), Ok(99_999));
    for bad in ["", "-1", "100000", "1.5", "x"] {
        assert!(parse_index(bad).is_err(), "{bad:?}");
    }
}
