#[test]
fn profile_is_taken_from_the_mig_device_name() {
    assert_eq!(
        super::profile_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb"),
        "1g.10gb"
    );
    assert_eq!(
        super::profile_from_name("NVIDIA A100-SXM4-80GB MIG 1g.10gb+me"),
        "1g.10gb+me"
    );
    assert_eq!(super::profile_from_name("NVIDIA H100"), "");
}
