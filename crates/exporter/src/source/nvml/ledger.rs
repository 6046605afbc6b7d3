//! Bookkeeping around every NVML call: learn once what a device does not support (and stop
//! asking), count failures per call, notice a GPU that fell off the bus, and add up what each
//! call costs (how often, CPU and wall time), so a GPU run can tell where tessera's CPU goes.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use nvml_wrapper::error::NvmlError;

use super::isolate::crash_note;
use crate::model::CallCost;

/// What a call yielded, as far as the sampler cares.
pub enum Outcome<T> {
    Value(T),
    /// Not supported by this device or driver; learned and skipped from now on.
    Unsupported,
    /// Failed this time; counted.
    Failed,
}

impl<T> Outcome<T> {
    pub fn ok(self) -> Option<T> {
        match self {
            Outcome::Value(v) => Some(v),
            _ => None,
        }
    }
}

#[derive(Default)]
pub struct CallLedger {
    unsupported: HashSet<(String, &'static str)>,
    errors: BTreeMap<&'static str, u64>,
    /// Devices (by UUID or index key) that reported GPU_IS_LOST in this cycle.
    lost: HashSet<String>,
    failed_this_cycle: bool,
    costs: BTreeMap<&'static str, CallCost>,
}

/// CPU time of the calling thread. A syscall (~0.2 µs), against NVML calls of 1 µs to 20 ms.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a live local.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

fn is_unsupported(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)
    )
}

impl CallLedger {
    pub fn begin_cycle(&mut self) {
        self.lost.clear();
        self.failed_this_cycle = false;
    }

    pub fn cycle_failed(&self) -> bool {
        self.failed_this_cycle
    }

    pub fn errors(&self) -> &BTreeMap<&'static str, u64> {
        &self.errors
    }

    /// What each call has cost since start.
    pub fn costs(&self) -> &BTreeMap<&'static str, CallCost> {
        &self.costs
    }

    /// Makes the NVML call `call` (`f`), named for a crash note and counted in its cost.
    pub fn timed<T>(&mut self, call: &'static str, f: impl FnOnce() -> T) -> T {
        crash_note::set_call(call);
        let (cpu, wall) = (thread_cpu_ns(), Instant::now());
        let out = f();
        *self.costs.entry(call).or_default() += CallCost {
            calls: 1,
            cpu_ns: thread_cpu_ns().saturating_sub(cpu),
            wall_ns: wall.elapsed().as_nanos() as u64,
        };
        out
    }

    pub fn is_lost(&self, device: &str) -> bool {
        self.lost.contains(device)
    }

    pub fn knows_unsupported(&self, device: &str, call: &'static str) -> bool {
        self.unsupported.contains(&(device.to_owned(), call))
    }

    /// Runs `f` unless `device` is known not to support `call`.
    pub fn call<T>(
        &mut self,
        device: &str,
        call: &'static str,
        f: impl FnOnce() -> Result<T, NvmlError>,
    ) -> Outcome<T> {
        if self.knows_unsupported(device, call) {
            return Outcome::Unsupported;
        }
        match self.timed(call, f) {
            Ok(v) => Outcome::Value(v),
            Err(e) => self.record(device, call, &e),
        }
    }

    /// Like [`Self::call`] for calls whose absence of data is not a failure (e.g. NOT_FOUND
    /// from process utilization, which means "no new samples").
    pub fn record<T>(&mut self, device: &str, call: &'static str, e: &NvmlError) -> Outcome<T> {
        if is_unsupported(e) {
            tracing::debug!(device, call, "not supported; not asking again");
            self.unsupported.insert((device.to_owned(), call));
            return Outcome::Unsupported;
        }
        if matches!(e, NvmlError::GpuLost) {
            self.lost.insert(device.to_owned());
        }
        *self.errors.entry(call).or_default() += 1;
        self.failed_this_cycle = true;
        Outcome::Failed
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
