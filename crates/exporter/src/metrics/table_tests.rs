#[test]
fn each_family_knows_its_position_and_names_are_unique() {
    let mut names = std::collections::HashSet::new();
    for (i, f) in super::ALL.iter().enumerate() {
        assert_eq!(f.index, i, "{}", f.name);
        assert!(names.insert(f.name), "{} twice", f.name);
    }
}

#[test]
fn default_detail_keeps_every_family_the_shipped_rules_and_dashboards_read() {
    let on = super::served(super::Detail::Default);
    for f in [
        super::GPU_UTILIZATION,
        super::GPU_UP,
        super::GPU_CLOCK_EVENT_REASONS,
        super::GPU_ROW_REMAP_FAILURE,
        super::GPU_CONTAINER_IDLE,
        super::GPU_CONTAINER_ENERGY,
        super::GPU_ENERGY_UNATTRIBUTED,
        super::GPU_POD_ATTRIBUTED,
        super::GPU_COMPUTE_BUSY,
    ] {
        assert!(on[f.index], "{}", f.name);
    }
    // The mission's per-process memory, and energy, are served by default.
    assert!(on[super::GPU_PROCESS_MEMORY_USED.index]);
    assert!(on[super::GPU_ENERGY.index]);
    assert!(!on[super::GPU_PROCESS_SM_UTILIZATION.index]);
    assert!(super::served(super::Detail::Full).iter().all(|&b| b));
}
