use super::*;

fn sample() -> Frame {
    Frame {
        busy_ns: 1_234_000_000,
        kernels: 56,
        flags: FLAG_DISABLED | FLAG_FULL,
        dropped: 7,
        incomplete: 2,
        traced_ns: Some(3_000_000_000),
        now_ns: 99_000_000_000,
        complete_from: 98_000,
        first_bucket: 98_500,
        buckets: vec![
            Bucket {
                covered_us: 1000,
                solo_us: 480,
                floor_us: 480,
            },
            Bucket::default(),
        ],
    }
}

#[test]
fn frames_round_trip_and_junk_is_refused() {
    let f = sample();
    assert_eq!(Frame::decode(&f.encode()), Some(f.clone()));
    let mut bad = f.encode();
    bad[0] = b'X';
    assert_eq!(Frame::decode(&bad), None);
    let mut v5 = f.encode();
    v5[4] = 5;
    assert_eq!(Frame::decode(&v5), None);
    // A count past the limit is refused before anything is allocated for it.
    let mut huge = f.encode();
    huge[56..60].copy_from_slice(&(MAX_BUCKETS as u32 + 1).to_le_bytes());
    assert_eq!(Frame::decode_header(&huge[..HEADER_LEN]), None);
    // Truncated buckets.
    let short = &f.encode()[..HEADER_LEN + 2];
    assert_eq!(Frame::decode(short), None);
}

#[test]
fn control_messages_round_trip_and_anything_else_is_ignored() {
    for shared in [true, false] {
        let c = Control { shared };
        assert_eq!(Control::decode(&c.encode()), Some(c));
    }
    let good = Control { shared: true }.encode();
    let mut bad_magic = good;
    bad_magic[0] = b'X';
    let mut bad_version = good;
    bad_version[4] = 2;
    let mut unknown_flag = good;
    unknown_flag[8] = 3;
    let mut reserved = good;
    reserved[15] = 1;
    for bad in [bad_magic, bad_version, unknown_flag, reserved] {
        assert_eq!(Control::decode(&bad), None, "{bad:?}");
        assert_eq!(ControlReader::default().feed(&bad), None, "{bad:?}");
    }
    // Too short, too long: not a message.
    assert_eq!(Control::decode(&good[..15]), None);
    let mut long = good.to_vec();
    long.push(0);
    assert_eq!(Control::decode(&long), None);
}

#[test]
fn the_reader_finds_messages_among_junk_and_never_grows() {
    let on = Control { shared: true }.encode();
    let off = Control { shared: false }.encode();
    let mut r = ControlReader::default();
    // Junk before, a message split across reads, then the latest of several wins.
    assert_eq!(r.feed(&[0xff, 0, b'T', b'S']), None);
    assert_eq!(r.feed(&on[..7]), None);
    assert_eq!(r.feed(&on[7..]), Some(Control { shared: true }));
    let mut both = off.to_vec();
    both.extend_from_slice(&on);
    both.extend_from_slice(&off);
    assert_eq!(r.feed(&both), Some(Control { shared: false }));
    // A megabyte of garbage (a tessera frame echoed back, random bytes): nothing, and
    // the reader keeps less than one message.
    let mut junk = Vec::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..(1 << 20) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        junk.push(x as u8);
    }
    junk.extend_from_slice(&Frame::default().encode());
    assert_eq!(r.feed(&junk), None);
    assert!(r.pending.len() < CONTROL_LEN);
    // And it still reads the next real message.
    assert_eq!(r.feed(&on), Some(Control { shared: true }));
}

#[test]
fn version_one_frames_are_still_read() {
    let mut v1 = Vec::new();
    v1.extend_from_slice(b"TSP1");
    v1.extend_from_slice(&1u32.to_le_bytes());
    v1.extend_from_slice(&5_000u64.to_le_bytes());
    v1.extend_from_slice(&3u64.to_le_bytes());
    v1.extend_from_slice(&0u32.to_le_bytes());
    v1.extend_from_slice(&0u32.to_le_bytes());
    let f = Frame::decode(&v1).unwrap();
    assert_eq!((f.busy_ns, f.kernels, f.now_ns), (5_000, 3, 0));
    assert!(f.buckets.is_empty());
}

#[test]
fn a_frame_without_traced_time_goes_as_version_two() {
    let f = Frame {
        traced_ns: None,
        ..sample()
    };
    let b = f.encode();
    assert_eq!((u32_at(&b, 4), b.len()), (2, V2_LEN + 2 * V3_BUCKET_LEN));
    assert_eq!(Frame::decode(&b), Some(f));
    // A v3 header cut to v2's length is junk, not a v2 frame.
    let mut cut = sample().encode();
    cut.truncate(V2_LEN);
    assert_eq!(Frame::decode_header(&cut), None);
}

#[test]
fn the_encoder_never_sends_more_than_the_receiver_reads() {
    let f = Frame {
        buckets: vec![Bucket::default(); MAX_BUCKETS + 10],
        ..Frame::default()
    };
    let d = Frame::decode(&f.encode()).unwrap();
    assert_eq!(d.buckets.len(), MAX_BUCKETS);
}

#[test]
fn version_four_carries_each_millisecond_floor() {
    let mut f = sample();
    f.buckets[0].floor_us = 400;
    let b = f.encode();
    assert_eq!((u32_at(&b, 4), b.len()), (4, HEADER_LEN + 2 * BUCKET_LEN));
    assert_eq!(Frame::decode(&b), Some(f));
}

#[test]
fn a_version_three_frame_reads_its_solo_part_as_its_floor() {
    let f = sample();
    let mut v3 = f.encode()[..HEADER_LEN].to_vec();
    v3[4] = 3;
    for bucket in &f.buckets {
        v3.extend_from_slice(&bucket.covered_us.to_le_bytes());
        v3.extend_from_slice(&bucket.solo_us.to_le_bytes());
    }
    let read = Frame::decode(&v3).unwrap();
    assert_eq!(read.buckets[0].floor_us, read.buckets[0].solo_us);
    assert_eq!(read, f);
    // Four-byte buckets under version 4's number are junk: one byte pair short.
    v3[4] = 4;
    assert_eq!(Frame::decode(&v3), None);
}
