//! What the runtime keeps behind the handles it hands out (event sets, GPM samples): plain
//! data below both the runtime and the exports that fill it.

use std::collections::VecDeque;

#[derive(Debug, Default)]
pub struct EventSetState {
    pub registrations: Vec<Registration>,
    pub queue: VecDeque<(usize, u64)>,
}

#[derive(Debug)]
pub struct Registration {
    pub gpu: usize,
    pub types: u64,
    /// Phase starts up to this time (ms after init) have been queued.
    pub scanned_until: f64,
}

#[derive(Debug, Clone)]
pub struct GpmSampleRec {
    pub gpu: usize,
    /// Scenario index of the MIG instance for `nvmlGpmMigSampleGet` samples.
    pub instance: Option<usize>,
    pub t_ms: f64,
}
