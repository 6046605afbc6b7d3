//! Measurement only: a dump of every kernel record the probe folded in, with the solo estimate
//! it gave each, so that solo estimators can be compared offline on real records
//! (`lab/device/archive/accuracy/solo_replay.py`). Off unless `TESSERA_PROBE_RECORD_LOG`
//! names a file; the probe then appends `.<pid>` to the name. When off, the probe pays one load
//! of an unset `OnceLock` per kernel record. When on, it reads each new shape's kernel name
//! through the record's name pointer, which CUPTI documents as a string it keeps; a stand-in
//! CUPTI whose records carry no such string (`crates/fake-cupti`) must not be run with it.
//!
//! Format, one line each (text, so `xz` shrinks it and a script reads it without a decoder):
//! * `S <id> <gx> <gy> <gz> <bx> <by> <bz> <dyn_shared> <name> <graph node>`: a launch shape
//!   first seen, with an id that counts from 0 in this process (name truncated, spaces
//!   replaced; graph node 0 outside CUDA graphs);
//! * `K <id> <start − previous start> <end − start> <solo> <correlation − previous>`: one
//!   kernel, ns; deltas are signed (buffers of several streams interleave); `solo` is what the
//!   probe's estimator gave it; kernels of one CUDA graph launch share a correlation id;
//! * `T <cupti ns> <unix ns>`: the probe's clock beside the wall clock, once a drain;
//! * `R <on|off|attach> <cupti ns>`: kernel records toggled;
//! * `X full`: the log reached its cap; nothing follows.
//!
//! The first `K` line's deltas are from 0.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::solo::KernelShape;

/// Bytes one process logs at most (about 600,000 kernels): enough for a suite case's 16 s of
/// the busiest tenant measured (~21,000 kernels a second), small beside the host's memory.
pub const DEFAULT_CAP_BYTES: usize = 24 << 20;
/// Kernel names longer than this are cut (mangled template names run to kilobytes).
const NAME_MAX: usize = 160;

#[derive(Debug)]
pub struct RecordLog {
    shapes: HashMap<KernelShape, u32>,
    buf: String,
    /// Bytes produced so far, drained or not.
    produced: usize,
    cap: usize,
    prev_start: u64,
    prev_corr: u32,
    full: bool,
}

impl RecordLog {
    pub fn new(cap: usize) -> Self {
        RecordLog {
            shapes: HashMap::new(),
            buf: String::new(),
            produced: 0,
            cap,
            prev_start: 0,
            prev_corr: 0,
            full: false,
        }
    }

    /// One kernel record. `name` is asked for only the first time a shape is seen.
    pub fn kernel(
        &mut self,
        shape: KernelShape,
        name: impl FnOnce() -> String,
        (start, end): (u64, u64),
        solo: u64,
        correlation: u32,
    ) {
        if self.full {
            return;
        }
        let next = self.shapes.len() as u32;
        let id = *self.shapes.entry(shape).or_insert_with(|| {
            let n: String = name()
                .chars()
                .take(NAME_MAX)
                .map(|c| if c.is_whitespace() { '_' } else { c })
                .collect();
            let [gx, gy, gz] = shape.grid;
            let [bx, by, bz] = shape.block;
            let _ = writeln!(
                self.buf,
                "S {next} {gx} {gy} {gz} {bx} {by} {bz} {} {} {}",
                shape.dynamic_shared,
                if n.is_empty() { "?" } else { &n },
                shape.graph_node
            );
            next
        });
        let ds = start as i128 - self.prev_start as i128;
        let dc = i64::from(correlation) - i64::from(self.prev_corr);
        let _ = writeln!(
            self.buf,
            "K {id} {ds} {} {solo} {dc}",
            end.saturating_sub(start)
        );
        self.prev_start = start;
        self.prev_corr = correlation;
        self.check_cap();
    }

    /// A free line (`T`, `R`): kept unless the log is full.
    pub fn note(&mut self, line: &str) {
        if self.full {
            return;
        }
        self.buf.push_str(line);
        self.buf.push('\n');
        self.check_cap();
    }

    fn check_cap(&mut self) {
        if self.produced + self.buf.len() >= self.cap {
            self.buf.push_str("X full\n");
            self.full = true;
        }
    }

    /// What was logged since the last call.
    pub fn take(&mut self) -> String {
        let out = std::mem::take(&mut self.buf);
        self.produced += out.len();
        out
    }
}

#[cfg(test)]
#[path = "record_log_tests.rs"]
mod tests;
