//! The one message the probe sends tessera, over a UNIX stream socket. A fixed header, then a
//! bounded run of fixed-size buckets: the receiver must be cheap and hard to confuse.
//!
//! Version 2 adds the process's kernel *timeline*: per millisecond of the shared CUPTI clock,
//! how much of it this process's kernels covered, and how much of that their solo durations
//! explain. Under time-slicing a kernel's span includes the other tenants' slices, and only
//! the timelines of all tenants side by side tell whose time an instant was. Version 4 adds
//! each millisecond's floor: what its kernels count at most their estimates (`solo::Solo`),
//! which the bounds take. Versions 1 (totals only), 2 and 3 are still read.

/// Layout, little-endian: magic `TSP1`, version u32, busy ns u64, kernels u64, flags u32,
/// dropped records u32. Version 1 ends here.
pub const V1_LEN: usize = 32;
/// Version 2 continues: now ns u64 (CUPTI clock when the frame was built), complete-from
/// bucket u64, first bucket u64, bucket count u32, incomplete records u32 (0 from probes that
/// predate it); then `count` buckets.
pub const V2_LEN: usize = 64;
/// Version 3 continues: traced ns u64 (since the probe started). Version 4's header is the same.
pub const HEADER_LEN: usize = 72;
/// Per bucket up to version 3: covered µs u16, solo-equivalent µs u16.
pub const V3_BUCKET_LEN: usize = 4;
/// Per bucket from version 4: covered µs u16, solo-equivalent µs u16, floor µs u16.
pub const BUCKET_LEN: usize = 6;
pub const MAGIC: [u8; 4] = *b"TSP1";
/// `covered_us` of a millisecond the probe did not trace (a real one is at most 1000).
pub const UNTRACED: u16 = u16::MAX;
/// Timeline resolution. Fine enough that a bucket is rarely split between a tenant's burst
/// and its gap (time slices and training kernels are milliseconds), coarse enough that a
/// second costs 4 KB.
pub const BUCKET_NS: u64 = 1_000_000;
/// The most buckets one frame may carry (16 s): the probe keeps no more, tessera reads no more.
pub const MAX_BUCKETS: usize = 16_384;
/// Set when CUPTI failed and the probe stopped measuring: its counters mean nothing.
pub const FLAG_DISABLED: u32 = 1;
/// The frame's buckets are everything the probe retains: the receiver drops what it held for
/// this sender and starts over from them (the first frame of every connection).
pub const FLAG_FULL: u32 = 2;
/// Where tessera listens unless `TESSERA_PROBE_SOCKET` says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/tessera/probe.sock";

/// One millisecond of a process's kernel timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bucket {
    /// µs of the bucket covered by the union of this process's kernel spans.
    pub covered_us: u16,
    /// µs those kernels would have taken alone: each kernel counts its run where that was
    /// within the band of its estimate, else the estimate (`solo::Solo`).
    pub solo_us: u16,
    /// Of those, what each kernel counts at most its estimate: a floor. Senders before
    /// version 4 send none; it reads as `solo_us`.
    pub floor_us: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frame {
    /// Union of this process's kernel spans since the probe started, in ns.
    pub busy_ns: u64,
    pub kernels: u64,
    pub flags: u32,
    /// Activity records CUPTI could not deliver (a buffer was missing).
    pub dropped: u32,
    /// Kernel records handed over without timestamps: like `dropped`, time the spans miss.
    pub incomplete: u32,
    /// Nanoseconds the probe traced since it started; `None` from probes before version 3,
    /// which traced all the time.
    pub traced_ns: Option<u64>,
    /// The CUPTI clock when the frame was built; 0 when the probe has no clock (no timeline).
    pub now_ns: u64,
    /// The probe measured every bucket from this one on (its start, or the oldest it kept).
    pub complete_from: u64,
    /// Bucket index (CUPTI ns / `BUCKET_NS`) of `buckets[0]`. Buckets hold absolute values,
    /// so a bucket sent twice (a late kernel record) simply replaces the earlier copy.
    pub first_bucket: u64,
    pub buckets: Vec<Bucket>,
}

/// Set while the probe's kernel records are off because tessera has not said its device is
/// shared (with `FLAG_DISABLED`: the probe measures nothing, NVML's own figure stands).
pub const FLAG_ALONE: u32 = 4;

/// Set, with `FLAG_DISABLED`, while another CUPTI client in the process (a profiler: the
/// PyTorch profiler, Nsight Systems) holds CUPTI and the probe's kernel records are lost:
/// its counters stop, and the milliseconds since its last check that CUPTI was its own are
/// sent as untraced. A receiver that does not know the bit reads a probe turned off.
pub const FLAG_PROFILER: u32 = 8;

/// Set, with `FLAG_DISABLED`, by a probe that found no CUPTI to load in its process (none by
/// its sonames, the CUDA images' paths or `TESSERA_PROBE_CUPTI`): it measures nothing, and
/// reports once a second only so that tessera can say why the process has no figure.
pub const FLAG_NO_CUPTI: u32 = 16;

/// The one message tessera sends a probe, on the connection the probe opened: whether the
/// probe's device (a GPU or a MIG instance) has another process that may run kernels. Layout,
/// little-endian: magic `TSC1`, version u32 (1), flags u32, reserved u32 (0). Sent when the
/// answer changes; a probe starts every connection with records off, so a process alone is
/// sent nothing.
pub const CONTROL_MAGIC: [u8; 4] = *b"TSC1";
pub const CONTROL_VERSION: u32 = 1;
pub const CONTROL_LEN: usize = 16;
/// The device is shared: turn kernel records on.
pub const CONTROL_SHARED: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    pub shared: bool,
}

impl Control {
    pub fn encode(self) -> [u8; CONTROL_LEN] {
        let mut b = [0u8; CONTROL_LEN];
        b[0..4].copy_from_slice(&CONTROL_MAGIC);
        b[4..8].copy_from_slice(&CONTROL_VERSION.to_le_bytes());
        let flags = if self.shared { CONTROL_SHARED } else { 0 };
        b[8..12].copy_from_slice(&flags.to_le_bytes());
        b
    }

    /// Exactly one well-formed message, or `None`: another magic or version, unknown flags or
    /// a nonzero reserved word are refused, never guessed at.
    pub fn decode(b: &[u8]) -> Option<Control> {
        if b.len() != CONTROL_LEN || b[0..4] != CONTROL_MAGIC {
            return None;
        }
        let flags = u32_at(b, 8);
        (u32_at(b, 4) == CONTROL_VERSION && flags & !CONTROL_SHARED == 0 && u32_at(b, 12) == 0)
            .then_some(Control {
                shared: flags & CONTROL_SHARED != 0,
            })
    }
}

/// The probe's side of the control stream: bytes in, the latest valid message out. It holds
/// less than one message between calls, so nothing a peer sends makes it grow; bytes that do
/// not start a valid message are skipped one at a time until one does.
#[derive(Debug, Default)]
pub struct ControlReader {
    pending: Vec<u8>,
}

impl ControlReader {
    pub fn feed(&mut self, bytes: &[u8]) -> Option<Control> {
        let mut latest = None;
        for &byte in bytes {
            self.pending.push(byte);
            if self.pending.len() < CONTROL_LEN {
                continue;
            }
            match Control::decode(&self.pending) {
                Some(c) => {
                    latest = Some(c);
                    self.pending.clear();
                }
                None => {
                    self.pending.remove(0);
                }
            }
        }
        latest
    }
}

/// What the fixed part of a frame says, before its buckets are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub frame: Frame,
    /// Bytes of buckets that follow.
    pub bucket_bytes: usize,
    /// Bytes per bucket ([`V3_BUCKET_LEN`] before version 4).
    pub bucket_len: usize,
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[i..i + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(x)
}

impl Frame {
    /// Version 4 when the frame says what it traced, else version 2 (a sender that traces
    /// always, like tessera's demo feed, whose floors are its solo parts), so a frame decodes
    /// to itself.
    pub fn encode(&self) -> Vec<u8> {
        let n = self.buckets.len().min(MAX_BUCKETS);
        let version: u32 = if self.traced_ns.is_some() { 4 } else { 2 };
        let mut b = Vec::with_capacity(HEADER_LEN + n * BUCKET_LEN);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&version.to_le_bytes());
        b.extend_from_slice(&self.busy_ns.to_le_bytes());
        b.extend_from_slice(&self.kernels.to_le_bytes());
        b.extend_from_slice(&self.flags.to_le_bytes());
        b.extend_from_slice(&self.dropped.to_le_bytes());
        b.extend_from_slice(&self.now_ns.to_le_bytes());
        b.extend_from_slice(&self.complete_from.to_le_bytes());
        b.extend_from_slice(&self.first_bucket.to_le_bytes());
        b.extend_from_slice(&(n as u32).to_le_bytes());
        b.extend_from_slice(&self.incomplete.to_le_bytes());
        if let Some(t) = self.traced_ns {
            b.extend_from_slice(&t.to_le_bytes());
        }
        for bucket in &self.buckets[..n] {
            b.extend_from_slice(&bucket.covered_us.to_le_bytes());
            b.extend_from_slice(&bucket.solo_us.to_le_bytes());
            if version >= 4 {
                b.extend_from_slice(&bucket.floor_us.to_le_bytes());
            }
        }
        b
    }

    /// Bytes still to read after the first 8 (magic and version), or `None` for junk.
    pub fn rest_of_header(start: &[u8; 8]) -> Option<usize> {
        if start[0..4] != MAGIC {
            return None;
        }
        match u32_at(start, 4) {
            1 => Some(V1_LEN - 8),
            2 => Some(V2_LEN - 8),
            3 | 4 => Some(HEADER_LEN - 8),
            _ => None,
        }
    }

    /// Decodes a whole header (`V1_LEN`, `V2_LEN` or `HEADER_LEN` bytes).
    pub fn decode_header(b: &[u8]) -> Option<Header> {
        if b.len() < V1_LEN || b[0..4] != MAGIC {
            return None;
        }
        let mut frame = Frame {
            busy_ns: u64_at(b, 8),
            kernels: u64_at(b, 16),
            flags: u32_at(b, 24),
            dropped: u32_at(b, 28),
            ..Frame::default()
        };
        match (u32_at(b, 4), b.len()) {
            (1, V1_LEN) => Some(Header {
                frame,
                bucket_bytes: 0,
                bucket_len: V3_BUCKET_LEN,
            }),
            (v @ (2..=4), len) if len == if v == 2 { V2_LEN } else { HEADER_LEN } => {
                let count = u32_at(b, 56) as usize;
                if count > MAX_BUCKETS {
                    return None;
                }
                frame.now_ns = u64_at(b, 32);
                frame.complete_from = u64_at(b, 40);
                frame.first_bucket = u64_at(b, 48);
                frame.incomplete = u32_at(b, 60);
                frame.traced_ns = (v >= 3).then(|| u64_at(b, 64));
                Some(Header {
                    frame,
                    bucket_bytes: count * if v >= 4 { BUCKET_LEN } else { V3_BUCKET_LEN },
                    bucket_len: if v >= 4 { BUCKET_LEN } else { V3_BUCKET_LEN },
                })
            }
            _ => None,
        }
    }

    /// Fills the buckets of a decoded header from the bytes that followed it, `len` bytes a
    /// bucket ([`Header::bucket_len`]). A bucket without a floor (before version 4) takes its
    /// solo part as one.
    pub fn with_buckets(mut self, bytes: &[u8], len: usize) -> Frame {
        self.buckets = bytes
            .chunks_exact(len.max(V3_BUCKET_LEN))
            .map(|c| {
                let solo_us = u16::from_le_bytes([c[2], c[3]]);
                Bucket {
                    covered_us: u16::from_le_bytes([c[0], c[1]]),
                    solo_us,
                    floor_us: if c.len() >= BUCKET_LEN {
                        u16::from_le_bytes([c[4], c[5]])
                    } else {
                        solo_us
                    },
                }
            })
            .collect();
        self
    }

    pub fn decode(b: &[u8]) -> Option<Frame> {
        let head_len = Frame::rest_of_header(b.get(..8)?.try_into().ok()?)? + 8;
        let h = Frame::decode_header(b.get(..head_len)?)?;
        let body = b.get(head_len..head_len + h.bucket_bytes)?;
        (b.len() == head_len + h.bucket_bytes).then(|| h.frame.with_buckets(body, h.bucket_len))
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
