use super::*;

#[test]
fn every_profile_field_comes_from_the_shipped_rules() {
    let (qs, interval) = profile_queries("3d").unwrap();
    assert_eq!(qs.len(), FIELDS.len());
    assert_eq!(interval, 300.0);
    for q in &qs {
        assert!(
            q.expr.contains("[3d]") && !q.expr.contains("[7d]"),
            "{}",
            q.expr
        );
    }
    assert!(qs
        .iter()
        .any(|q| q.expr.starts_with("quantile_over_time(0.95")));
}

#[test]
fn durations() {
    assert_eq!(duration_seconds("7d"), Some(604_800.0));
    assert_eq!(duration_seconds("1d12h"), Some(129_600.0));
    assert_eq!(duration_seconds("90m"), Some(5400.0));
    assert_eq!(duration_seconds("500ms"), Some(0.5));
    for bad in ["", "7", "d", "7x", "-1d", "7 d", "0d"] {
        assert_eq!(duration_seconds(bad), None, "{bad}");
    }
    assert!(window_seconds("30m").is_err());
    assert_eq!(window_seconds("2w"), Ok(1_209_600.0));
}
