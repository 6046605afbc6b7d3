use super::*;
use crate::fleet::Template;
use std::path::PathBuf;

fn fleet() -> Fleet {
    let caps: Vec<(PathBuf, String)> = ["5", "7", "9"]
        .iter()
        .map(|v| {
            (
                PathBuf::from("t"),
                format!("# TYPE c counter\nc_total{{node=\"x\",q=\"a\\\"b\"}} {v}\n"),
            )
        })
        .collect();
    Fleet {
        templates: vec![Template::from_captures(&caps).unwrap()],
        phases: 2,
    }
}

#[test]
fn openmetrics_lines_carry_the_target_labels_and_seconds() {
    let mut out = Vec::new();
    let clock = Clock {
        origin: 1000,
        interval: 15,
    };
    let n = openmetrics(&mut out, &fleet(), 51..52, (1000, 1030), clock, "tessera").unwrap();
    let text = String::from_utf8(out).unwrap();
    // Node 51 starts a phase ahead (51 % 2 = 1).
    assert_eq!(
        text.lines().next().unwrap(),
        r#"c_total{node="fleet-1-gpu-00051",q="a\"b",cluster="fleet-1",instance="fleet-1-gpu-00051",job="tessera"} 7 1008.811"#
    );
    assert!(text.contains("} 9 1023.811\n"));
    assert!(text.contains("scrape_samples_scraped{cluster=\"fleet-1\""));
    assert_eq!(n, 6);
}

#[test]
fn victoriametrics_lines_are_json_with_milliseconds() {
    let mut out = Vec::new();
    let clock = Clock {
        origin: 1000,
        interval: 15,
    };
    victoriametrics(&mut out, &fleet(), 0..1, (1000, 1045), clock, "tessera").unwrap();
    let first = String::from_utf8(out)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        first,
        r#"{"metric":{"__name__":"c_total","node":"fleet-0-gpu-00000","q":"a\"b","cluster":"fleet-0","instance":"fleet-0-gpu-00000","job":"tessera"},"values":[5,7,9],"timestamps":[1000001,1015001,1030001]}"#
    );
}

#[test]
fn no_sample_sits_on_a_whole_second() {
    let clock = Clock {
        origin: 1000,
        interval: 15,
    };
    assert!((0..100_000).all(|n| clock.millis(n, 3) % 1000 != 0));
}

#[test]
fn exposition_leaves_scrape_metadata_to_the_scraper() {
    let mut out = Vec::new();
    exposition(&mut out, &fleet(), 0, 2).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "c_total{node=\"fleet-0-gpu-00000\",q=\"a\\\"b\"} 9\n"
    );
}
