//! Kernel busy time as the union of kernel [start, end] spans: concurrent kernels of one
//! process (several streams) must not count twice.

/// Accumulates the union of spans that arrive in batches (one CUPTI buffer at a time).
#[derive(Debug, Default)]
pub struct Spans {
    pub busy_ns: u64,
    pub kernels: u64,
    pub(crate) covered_until: u64,
    pub(crate) batch: Vec<(u64, u64)>,
}

impl Spans {
    pub fn push(&mut self, start: u64, end: u64) {
        self.kernels += 1;
        if end > start {
            self.batch.push((start, end));
        }
    }

    /// Folds the batch in, sorted by start. A span ending before what earlier batches covered
    /// is skipped: CUPTI can deliver a late buffer with earlier kernels, and skipping may miss
    /// a little time in a gap but never counts time twice.
    pub fn flush_batch(&mut self) {
        self.batch.sort_unstable();
        for &(start, end) in &self.batch {
            if end <= self.covered_until {
                continue;
            }
            let from = start.max(self.covered_until);
            self.busy_ns += end - from;
            self.covered_until = end;
        }
        self.batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_and_nested_spans_count_once() {
        let mut s = Spans::default();
        s.push(100, 200);
        s.push(150, 250); // overlaps
        s.push(160, 170); // nested
        s.push(300, 400);
        s.push(500, 500); // empty: counted as a kernel, no time
        s.flush_batch();
        assert_eq!(s.busy_ns, 250);
        assert_eq!(s.kernels, 5);
        // A later batch that starts inside what was covered.
        s.push(350, 450);
        s.flush_batch();
        assert_eq!(s.busy_ns, 300);
    }
}
