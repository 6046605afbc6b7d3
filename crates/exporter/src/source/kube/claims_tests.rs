use super::valid_name;

#[test]
fn names_that_would_bend_the_path_are_refused() {
    assert!(valid_name("gpu-claim-x7k2.a"));
    for bad in ["", "a/b", "..%2f", "a?b", "A", "a b", &"x".repeat(254)] {
        assert!(!valid_name(bad), "{bad:?}");
    }
}
