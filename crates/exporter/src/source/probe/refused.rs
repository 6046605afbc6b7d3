//! Reports that reached the probe's socket and were not used, counted by why. Any local process
//! may write to the socket; what keeps a stray or hostile one from being shown is that its
//! reports are set aside, and the count is how an operator sees that this happened, and how
//! often.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a sender may go unlisted by NVML after its first report before its reports are
/// refused. A CUDA process's probe reports at `cuInit`, before the context that makes NVML list
/// the process, and NVML's process lists are read only every `--nvml.process-interval`, so a
/// real tenant is unlisted for a moment; the sampler waits at least two of those intervals.
pub const UNLISTED_GRACE: Duration = Duration::from_secs(10);

/// Why a report was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// NVML lists its sender on no GPU: the sender is not (or no longer) a GPU process, and
    /// what it says belongs to no device.
    NoGpuProcess,
    /// Not a frame of the probe's wire; the connection is read no further.
    Malformed,
    /// A sender beyond the most processes remembered.
    OverCapacity,
}

impl Refusal {
    pub const ALL: [Refusal; 3] = [
        Refusal::NoGpuProcess,
        Refusal::Malformed,
        Refusal::OverCapacity,
    ];

    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NoGpuProcess => "no-gpu-process",
            Refusal::Malformed => "malformed",
            Refusal::OverCapacity => "over-capacity",
        }
    }

    fn slot(self) -> usize {
        match self {
            Refusal::NoGpuProcess => 0,
            Refusal::Malformed => 1,
            Refusal::OverCapacity => 2,
        }
    }
}

/// Counts since tessera started; shared by the receiver's tasks and the sampler.
#[derive(Debug, Default)]
pub struct RefusedCounts([AtomicU64; 3]);

impl RefusedCounts {
    pub fn add(&self, why: Refusal, n: u64) {
        self.0[why.slot()].fetch_add(n, Ordering::Relaxed);
    }

    /// Every reason, zeros included, so that a rate over the counter starts from the first
    /// scrape rather than from the first refusal.
    pub fn totals(&self) -> BTreeMap<&'static str, u64> {
        Refusal::ALL
            .iter()
            .map(|r| (r.as_str(), self.0[r.slot()].load(Ordering::Relaxed)))
            .collect()
    }
}

#[cfg(test)]
#[path = "refused_tests.rs"]
mod tests;
