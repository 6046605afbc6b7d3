use super::*;

#[test]
fn nvml_model_names_map_to_tables() {
    assert_eq!(lookup("NVIDIA H100 80GB HBM3"), Some(&H100_80GB));
    assert_eq!(lookup("NVIDIA A100-SXM4-80GB"), Some(&A100_80GB));
    assert_eq!(lookup("NVIDIA A100 80GB PCIe"), Some(&A100_80GB));
    assert_eq!(lookup("NVIDIA A100-PCIE-40GB"), Some(&A100_40GB));
    assert_eq!(lookup("NVIDIA H100 NVL"), None);
    assert_eq!(lookup("NVIDIA L4"), None);
}

#[test]
fn profiles_grow_and_never_exceed_the_gpu() {
    for g in [&H100_80GB, &A100_80GB, &A100_40GB] {
        for w in g.profiles.windows(2) {
            assert!(
                w[0].memory_gib <= w[1].memory_gib,
                "{} {}",
                g.name,
                w[1].name
            );
            assert!(w[0].sms <= w[1].sms, "{} {}", g.name, w[1].name);
            assert!(w[0].gpu_fraction() <= w[1].gpu_fraction());
        }
        let full = g.profiles[g.profiles.len() - 1];
        assert!(full.memory_gib <= g.memory_gib && full.sms <= g.sms);
    }
}
