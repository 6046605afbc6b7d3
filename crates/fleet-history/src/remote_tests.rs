use super::*;
use crate::fleet::{Fleet, Template};
use crate::write::{remote_write, Clock};
use prost::Message;
use std::path::PathBuf;

#[derive(Clone, PartialEq, prost::Message)]
struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    samples: Vec<Sample>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Label {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Sample {
    #[prost(double, tag = "1")]
    value: f64,
    #[prost(int64, tag = "2")]
    timestamp: i64,
}

/// A snappy block decoder for literals only, which is all `snappy` writes: a copy element
/// (a tag whose low bits are not 00) fails the test.
fn unsnappy(b: &[u8]) -> Vec<u8> {
    let (mut len, mut i, mut shift) = (0usize, 0, 0);
    loop {
        len |= ((b[i] & 0x7f) as usize) << shift;
        shift += 7;
        i += 1;
        if b[i - 1] < 0x80 {
            break;
        }
    }
    let mut out = Vec::new();
    while i < b.len() {
        let tag = b[i];
        assert_eq!(tag & 3, 0, "not a literal at {i}");
        i += 1;
        let n = match tag >> 2 {
            60 => {
                i += 1;
                b[i - 1] as usize
            }
            61 => {
                i += 2;
                u16::from_le_bytes([b[i - 2], b[i - 1]]) as usize
            }
            m => m as usize,
        } + 1;
        out.extend_from_slice(&b[i..i + n]);
        i += n;
    }
    assert_eq!(out.len(), len, "the header's length");
    out
}

#[test]
fn snappy_literals_of_every_length_class_decode_to_the_input() {
    for n in [1, 59, 60, 61, 255, 256, 257, 65535, 65536, 65537, 200_000] {
        let raw: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(unsnappy(&snappy(&raw)), raw, "length {n}");
    }
}

#[test]
fn a_series_decodes_with_sorted_labels_and_its_samples() {
    let mut buf = Vec::new();
    let mut labels = [("job", "j"), ("__name__", "up"), ("a", "x\"y")];
    let samples = [(1.5, 1_000), (f64::INFINITY, 16_000_000_000_000), (-2.0, 0)];
    series(&mut buf, &mut labels, &samples);
    series(&mut buf, &mut [("__name__", "b")], &[(0.0, 5)]);
    let req = WriteRequest::decode(buf.as_slice()).unwrap();
    assert_eq!(req.timeseries.len(), 2);
    let names: Vec<_> = req.timeseries[0]
        .labels
        .iter()
        .map(|l| (l.name.as_str(), l.value.as_str()))
        .collect();
    assert_eq!(names, [("__name__", "up"), ("a", "x\"y"), ("job", "j")]);
    let got: Vec<_> = req.timeseries[0]
        .samples
        .iter()
        .map(|s| (s.value, s.timestamp))
        .collect();
    assert_eq!(got, samples);
    assert_eq!(
        req.timeseries[1].samples,
        [Sample {
            value: 0.0,
            timestamp: 5
        }]
    );
}

fn fleet() -> Fleet {
    let caps: Vec<(PathBuf, String)> = ["5", "7", "9"]
        .iter()
        .map(|v| {
            (
                PathBuf::from("t"),
                format!(
                    "# TYPE c counter\nc_total{{node=\"x\",q=\"a\\\"b\"}} {v}\ng{{node=\"x\"}} 1\n"
                ),
            )
        })
        .collect();
    Fleet {
        templates: vec![Template::from_captures(&caps).unwrap()],
        phases: 2,
    }
}

#[test]
fn the_fleets_requests_hold_every_sample_once_in_time_order_with_target_labels() {
    let clock = Clock {
        origin: 1000,
        interval: 15,
    };
    let mut requests = Vec::new();
    // A limit of one byte: a request per series, so the split is exercised too.
    let f = fleet();
    let per_node = f.templates[0].series.len();
    let n = remote_write(
        &f,
        3..5,
        (1000, 1300),
        clock,
        "tessera",
        1,
        &mut |raw: &[u8]| {
            requests.push(WriteRequest::decode(raw).unwrap());
            Ok(())
        },
    )
    .unwrap();
    let series: Vec<&TimeSeries> = requests.iter().flat_map(|r| &r.timeseries).collect();
    assert_eq!(requests.len(), series.len());
    // Two nodes (their two series and the scrape's own), 20 slots each within 300 s.
    assert!(per_node >= 2);
    assert_eq!(series.len(), 2 * per_node);
    assert_eq!(n, 20 * series.len() as u64);
    for s in &series {
        let l: std::collections::HashMap<_, _> = s
            .labels
            .iter()
            .map(|l| (l.name.as_str(), l.value.as_str()))
            .collect();
        assert!(
            s.labels.windows(2).all(|w| w[0].name < w[1].name),
            "labels sorted"
        );
        assert_eq!(l["job"], "tessera");
        assert!(l["instance"].starts_with("fleet-0-gpu-0000"));
        if l["__name__"] == "c_total" {
            assert_eq!(l["q"], "a\"b", "the exposition's escape undone");
        }
        let ts: Vec<i64> = s.samples.iter().map(|x| x.timestamp).collect();
        assert!(
            ts.windows(2).all(|w| w[0] + 15_000 == w[1]),
            "every slot, in order: {ts:?}"
        );
        assert!(
            ts[0] >= 1_000_000 && *ts.last().unwrap() < 1_300_000,
            "within the window"
        );
    }
}
