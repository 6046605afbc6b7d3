//! The one message the probe sends tessera, over a UNIX stream socket. Fixed size, no
//! parsing beyond a magic and a version: the receiver must be cheap and hard to confuse.

/// Layout, little-endian: magic `TSP1`, version u32, busy ns u64, kernels u64, flags u32,
/// dropped records u32.
pub const FRAME_LEN: usize = 32;
pub const MAGIC: [u8; 4] = *b"TSP1";
pub const VERSION: u32 = 1;
/// Set when CUPTI failed and the probe stopped measuring: its counters mean nothing.
pub const FLAG_DISABLED: u32 = 1;
/// Where tessera listens unless `TESSERA_PROBE_SOCKET` says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/tessera/probe.sock";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Frame {
    /// Union of this process's kernel spans since the probe started, in ns.
    pub busy_ns: u64,
    pub kernels: u64,
    pub flags: u32,
    /// Activity records CUPTI could not deliver (a buffer was missing).
    pub dropped: u32,
}

impl Frame {
    pub fn encode(&self) -> [u8; FRAME_LEN] {
        let mut b = [0u8; FRAME_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&VERSION.to_le_bytes());
        b[8..16].copy_from_slice(&self.busy_ns.to_le_bytes());
        b[16..24].copy_from_slice(&self.kernels.to_le_bytes());
        b[24..28].copy_from_slice(&self.flags.to_le_bytes());
        b[28..32].copy_from_slice(&self.dropped.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; FRAME_LEN]) -> Option<Frame> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        (b[0..4] == MAGIC && u32_at(4) == VERSION).then(|| Frame {
            busy_ns: u64_at(8),
            kernels: u64_at(16),
            flags: u32_at(24),
            dropped: u32_at(28),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_junk_is_refused() {
        let f = Frame {
            busy_ns: 1_234_000_000,
            kernels: 56,
            flags: FLAG_DISABLED,
            dropped: 7,
        };
        assert_eq!(Frame::decode(&f.encode()), Some(f));
        let mut bad = f.encode();
        bad[0] = b'X';
        assert_eq!(Frame::decode(&bad), None);
        let mut v2 = f.encode();
        v2[4] = 2;
        assert_eq!(Frame::decode(&v2), None);
    }
}
