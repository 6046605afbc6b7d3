use super::*;
use axum::http::HeaderValue;
use std::io::Read;

fn accepts(values: &[&str]) -> bool {
    let mut h = HeaderMap::new();
    for v in values {
        h.append(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
    }
    accepts_gzip(&h)
}

#[test]
fn accept_encoding_is_read_with_weights() {
    // What Prometheus sends.
    assert!(accepts(&["gzip"]));
    assert!(accepts(&["deflate, GZIP;q=0.5"]));
    assert!(accepts(&["br", "x-gzip"]));
    assert!(accepts(&["*"]));
    assert!(!accepts(&[]));
    assert!(!accepts(&["identity"]));
    assert!(!accepts(&["gzip;q=0"]));
    assert!(!accepts(&["gzip; q=0.0, *"]), "an explicit refusal beats *");
    assert!(!accepts(&["*;q=0"]));
    assert!(!accepts(&["gzip;q=nonsense"]));
    assert!(!accepts(&["gzipped"]));
}

#[test]
fn gzip_round_trips() {
    let raw = "gpu_up{gpu=\"0\"} 1\n".repeat(1000);
    let packed = gzip(raw.as_bytes()).unwrap();
    assert!(packed.len() < raw.len() / 10);
    let mut back = String::new();
    flate2::read::GzDecoder::new(&packed[..])
        .read_to_string(&mut back)
        .unwrap();
    assert_eq!(back, raw);
}
