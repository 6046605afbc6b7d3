//! The CUDA probe's wire frames, as any local process may send them to tessera's socket:
//! decoding never panics, what decodes encodes back to the same bytes' meaning, and filing any
//! run of frames into the probe book keeps it bounded and its readings in range.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use tessera_exporter::source::probe::{Frame, ProbeBook};

fuzz_target!(|data: &[u8]| {
    let book = ProbeBook::new(Duration::from_secs(2));
    let t0 = Instant::now();
    let mut rest = data;
    let mut at = t0;
    while rest.len() >= 8 {
        let Some(head) = rest[..8]
            .try_into()
            .ok()
            .and_then(Frame::rest_of_header)
        else {
            return;
        };
        let Some(h) = rest.get(..8 + head).and_then(Frame::decode_header) else {
            return;
        };
        let Some(body) = rest.get(8 + head..8 + head + h.bucket_bytes) else {
            return;
        };
        let frame = h.frame.with_buckets(body, h.bucket_len);
        let again = Frame::decode(&frame.encode()).expect("an encoded frame decodes");
        assert_eq!(again, frame);
        book.record(7, &frame, at);
        at += Duration::from_millis(300);
        rest = &rest[8 + head + h.bucket_bytes..];
    }
    for r in book.readings(&[7], at).values() {
        assert!(r.busy_ratio.is_none_or(|b| (0.0..=1.0).contains(&b)));
        assert!(r.traced_share.is_none_or(|t| (0.0..=1.0).contains(&t)));
    }
    for t in book.timelines(&[7], at).values() {
        assert!(t.covered.len() <= 2_000 && t.covered.len() == t.traced.len());
        assert!(t.covered.iter().chain(&t.solo).all(|v| (0.0..=1.0).contains(v)));
    }
});
