#[test]
fn each_field_knows_its_position_and_names_are_unique() {
    let mut names = std::collections::HashSet::new();
    for (i, f) in super::ALL.iter().enumerate() {
        assert_eq!(f.index, i, "{}", f.name);
        assert!(names.insert(f.name), "{} twice", f.name);
    }
    for (name, _) in super::ABSENT {
        assert!(names.insert(name), "{name} both served and absent");
    }
}
