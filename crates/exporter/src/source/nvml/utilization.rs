//! Device utilization as the mean of every sample NVML kept since the previous read.
//!
//! `nvmlDeviceGetUtilizationRates` is one sample: on the H100 the driver takes one every
//! 200 ms, each the busy share of the 200 ms before it, and keeps the last 71 (14 s). Read once
//! a second, the snapshot sees a fifth of the time: a tenant launching 37 ms kernels eight
//! times a second read 0.137 where the whole second read 0.074 (docs/validation.md, "Device
//! utilization from every NVML sample"). `nvmlDeviceGetSamples` hands over every sample since a
//! timestamp, so the figure covers the whole interval between reads.

use nvml_wrapper::enum_wrappers::device::Sampling;
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::Sample;
use nvml_wrapper::Device;

use super::ledger::{CallLedger, Outcome};

/// The newest sample already used, per kind of sample: the next read starts after it.
#[derive(Debug, Default)]
pub struct SampleMarks {
    gpu: Option<u64>,
    memory: Option<u64>,
}

/// GPU and memory utilization over the interval since the previous read, as ratios. Either
/// is `None` where the driver had no samples for it (the caller then takes the snapshot).
pub fn read_means(
    ledger: &mut CallLedger,
    key: &str,
    d: &Device<'static>,
    marks: &mut SampleMarks,
) -> (Option<f64>, Option<f64>) {
    let mut read = |call, kind: Sampling, mark: &mut Option<u64>| {
        read_one(ledger, key, call, mark, |since| d.samples(kind, since))
    };
    let gpu = read(
        "samples_gpu_utilization",
        Sampling::GpuUtilization,
        &mut marks.gpu,
    );
    let memory = read(
        "samples_memory_utilization",
        Sampling::MemoryUtilization,
        &mut marks.memory,
    );
    (gpu, memory)
}

fn read_one(
    ledger: &mut CallLedger,
    key: &str,
    call: &'static str,
    mark: &mut Option<u64>,
    fetch: impl FnOnce(u64) -> Result<Vec<Sample>, NvmlError>,
) -> Option<f64> {
    if ledger.knows_unsupported(key, call) {
        return None;
    }
    let samples = match ledger.timed(call, || fetch(mark.unwrap_or(0))) {
        Ok(s) => s,
        // No sample newer than the mark: nothing new to average, which is not a failure. A
        // sample taken between the count and the fetch leaves the next read to pick it up.
        Err(NvmlError::NotFound | NvmlError::InsufficientSize(_)) => return None,
        Err(e) => {
            let _: Outcome<()> = ledger.record(key, call, &e);
            return None;
        }
    };
    let points: Vec<(u64, f64)> = samples.iter().filter_map(percent).collect();
    let (mean, newest) = mean_since(*mark, &points)?;
    *mark = Some(newest);
    Some((mean / 100.0).clamp(0.0, 1.0))
}

fn percent(s: &Sample) -> Option<(u64, f64)> {
    let v = match s.value {
        SampleValue::U32(v) => f64::from(v),
        SampleValue::U64(v) => v as f64,
        SampleValue::I64(v) => v as f64,
        SampleValue::F64(v) => v,
    };
    v.is_finite().then_some((s.timestamp, v))
}

/// The time-weighted mean of the samples after `mark`, and the newest timestamp seen. Each
/// sample is the busy share of the period before it, so it weighs as much as that period. The
/// first read after start has no mark: the driver's whole buffer (14 s) is older than the
/// interval asked about, so only the newest sample counts, as the snapshot did. A first
/// sample long after the mark (the driver dropped older ones) weighs one usual period.
fn mean_since(mark: Option<u64>, points: &[(u64, f64)]) -> Option<(f64, u64)> {
    let newest = points.iter().map(|p| p.0).max()?;
    let Some(mark) = mark else {
        let last = points.iter().find(|p| p.0 == newest)?.1;
        return Some((last, newest));
    };
    let mut fresh: Vec<(u64, f64)> = points.iter().copied().filter(|p| p.0 > mark).collect();
    fresh.sort_by_key(|p| p.0);
    let (first, rest) = fresh.split_first()?;
    let usual = if rest.is_empty() {
        first.0 - mark
    } else {
        (newest - first.0) / rest.len() as u64
    };
    let mut weighted = first.1 * (first.0 - mark).min(usual) as f64;
    let mut total = (first.0 - mark).min(usual) as f64;
    let mut prev = first.0;
    for &(t, v) in rest {
        weighted += v * (t - prev) as f64;
        total += (t - prev) as f64;
        prev = t;
    }
    let mean = if total > 0.0 {
        weighted / total
    } else {
        fresh.iter().map(|p| p.1).sum::<f64>() / fresh.len() as f64
    };
    Some((mean, newest))
}

#[cfg(test)]
#[path = "utilization_tests.rs"]
mod tests;
