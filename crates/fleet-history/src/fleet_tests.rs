use super::*;

fn capture(text: &str) -> (PathBuf, String) {
    (PathBuf::from("t"), text.to_string())
}

#[test]
fn parses_labels_with_escapes() {
    let (name, labels, v) = parse_sample(r#"a_total{x="1",y="q\"z",node="n"} 2.5"#).unwrap();
    assert_eq!(name, "a_total");
    assert_eq!(labels[1], ("y".into(), r#"q\"z"#.into()));
    assert_eq!(labels[2].0, "node");
    assert_eq!(v, 2.5);
    assert_eq!(parse_sample("up 1").unwrap().2, 1.0);
    assert!(parse_sample(r#"a{x="1" 2"#).is_none());
}

#[test]
fn counters_continue_across_loops_and_gauges_repeat() {
    let caps = [
        capture("# TYPE c counter\nc_total{node=\"a\"} 10\ng{node=\"a\"} 1\n"),
        capture("# TYPE c counter\nc_total{node=\"a\"} 13\ng{node=\"a\"} 2\n"),
        capture("# TYPE c counter\nc_total{node=\"a\"} 16\ng{node=\"a\"} 3\n"),
    ];
    let fleet = Fleet {
        templates: vec![Template::from_captures(&caps).unwrap()],
        phases: 2,
    };
    // Node 0 is not shifted: slot 0 is phase 0, slot 2 a loop later.
    let c: Vec<f64> = (0..5).map(|p| fleet.value(0, 0, p).unwrap()).collect();
    assert_eq!(c, [10.0, 13.0, 16.0, 19.0, 22.0]);
    let g: Vec<f64> = (0..4).map(|p| fleet.value(0, 1, p).unwrap()).collect();
    assert_eq!(g, [1.0, 2.0, 1.0, 2.0]);
    // Node 1 is a phase ahead.
    assert_eq!(fleet.value(1, 1, 0), Some(2.0));
    // up and scrape_samples_scraped come last, for the history only.
    let t = &fleet.templates[0];
    assert_eq!(t.series.len(), 4);
    assert!(t.series[2].scrape_meta && t.series[3].scrape_meta);
    assert_eq!(fleet.value(0, 3, 0), Some(2.0));
    assert_eq!(t.series[0].labels[0], ("node".into(), String::new()));
}

#[test]
fn a_counter_that_went_down_over_the_loop_does_not_grow() {
    let caps = [
        capture("# TYPE c counter\nc_total 10\n"),
        capture("# TYPE c counter\nc_total 4\n"),
    ];
    let t = Template::from_captures(&caps).unwrap();
    assert_eq!(t.increase[0], 0.0);
}

#[test]
fn names_follow_the_demo_fleet() {
    assert_eq!(node_name(112), "fleet-2-gpu-00112");
    assert_eq!(cluster(49), "fleet-0");
}

#[test]
fn a_capture_from_before_a_rename_serves_the_current_name() {
    let caps = [
        capture("# TYPE gpu_mig_slices_total gauge\ngpu_mig_slices_total{gpu=\"0\"} 7\n"),
        capture("# TYPE gpu_mig_slices_total gauge\ngpu_mig_slices_total{gpu=\"0\"} 7\n"),
    ];
    let t = Template::from_captures(&caps).unwrap();
    assert_eq!(t.series[0].name, "gpu_mig_slices");
}
