#[test]
fn scaling_shortens_every_phase_and_the_loop() {
    let text = super::scale_time(super::SCENARIO, 0.1).unwrap();
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(doc["repeat_after_ms"].as_u64(), Some(12_000));
    let at: Vec<u64> = doc["phases"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| p["at_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(at, [0, 3_000, 6_000, 9_000]);
    // Everything else is the shipped scenario's.
    assert_eq!(doc["phases"][2]["xids"][0]["xid"].as_u64(), Some(31));
}
