//! Device utilization as the mean of every sample NVML kept since the previous read.
//!
//! `nvmlDeviceGetUtilizationRates` is one sample: on the H100 the driver takes one every
//! 200 ms, each the busy share of the 200 ms before it, and keeps the last 71 (14 s). Read once
//! a second, the snapshot sees a fifth of the time: a tenant launching 37 ms kernels eight
//! times a second read 0.137 where the whole second read 0.074 (docs/validation.md, "Device
//! utilization from every NVML sample"). `nvmlDeviceGetSamples` hands over every sample since a
//! timestamp, so the figure covers the whole interval between reads.
//!
//! Those reads were most of tessera's idle CPU: 4.3–5.0 ms of CPU per read on an H200, two
//! reads per GPU per second, 37 of 53 CPU ms/s on 4 GPUs (docs/benchmarks.md, "Footprint on
//! several GPUs"). nvml-wrapper makes two driver calls per read (the count, then the samples);
//! here one call fills a kept buffer. And since the driver keeps ~14 s, a read every
//! [`QUIET_READ_INTERVAL`] loses no sample: memory utilization (which no per-pod figure uses)
//! is read at that cadence, and GPU utilization too while nothing could be attributed from it:
//! no process on the GPU and the last window idle. In between, the last window's mean stands.

use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::{SampleValueType, Sampling};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::Sample;
use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::{nvmlSample_t, nvmlValueType_t};

use super::kept_buffer;
use super::ledger::{CallLedger, Outcome};

/// The longest a sample buffer goes unread: well inside the driver's ~14 s, so no sample is
/// lost, and short beside any scrape interval, so a gauge is never a scrape behind.
pub const QUIET_READ_INTERVAL: Duration = Duration::from_secs(5);

/// More than the 71 samples an H100's driver keeps; grown if a driver asks for more.
const SAMPLE_SLOTS: usize = 128;

/// One kind of sample: where the next read starts, and the figure that stands until then.
#[derive(Debug, Default)]
struct Series {
    mark: Option<u64>,
    read_at: Option<Instant>,
    last: Option<f64>,
    /// Whether the cycle before read it: a read after quiet cycles must cover this cycle
    /// only, since those cycles already published the window before.
    read_last_cycle: bool,
}

impl Series {
    fn due(&self, now: Instant, every_cycle: bool) -> bool {
        every_cycle
            || self
                .read_at
                .is_none_or(|t| now.duration_since(t) >= QUIET_READ_INTERVAL)
    }
}

/// What is kept per GPU between reads of its sample buffers.
#[derive(Default)]
pub struct UtilizationReader {
    gpu: Series,
    memory: Series,
    cycle_at: Option<Instant>,
    buffer: Vec<nvmlSample_t>,
}

impl UtilizationReader {
    /// Whether the last read found the GPU idle throughout: drivers report whole percents,
    /// so a window with any kernel in it reads above 0. No read yet is not idle.
    pub fn last_window_idle(&self) -> bool {
        self.gpu.last == Some(0.0)
    }
}

/// How one cycle reads the buffers: `busy` when a figure per cycle is needed (a process holds
/// the GPU, its last window was not idle, or processes are not listed at all).
pub struct Cadence {
    pub now: Instant,
    pub busy: bool,
}

/// GPU and memory utilization as ratios: the mean since the previous read where one was due,
/// else the previous read's. Either is `None` where the driver had no samples for it (the
/// caller then takes the snapshot).
pub fn read_means(
    ledger: &mut CallLedger,
    key: &str,
    d: &Device<'static>,
    reader: &mut UtilizationReader,
    cadence: &Cadence,
) -> (Option<f64>, Option<f64>) {
    let UtilizationReader {
        gpu,
        memory,
        cycle_at,
        buffer,
    } = reader;
    let this_cycle = cycle_at.map(|t| cadence.now.duration_since(t));
    *cycle_at = Some(cadence.now);
    let gpu_mean = advance(
        ledger,
        key,
        "samples_gpu_utilization",
        gpu,
        cadence,
        cadence.busy,
        this_cycle,
        |since| fetch_samples(d, Sampling::GpuUtilization, since, buffer),
    );
    let memory_mean = advance(
        ledger,
        key,
        "samples_memory_utilization",
        memory,
        cadence,
        false,
        None,
        |since| fetch_samples(d, Sampling::MemoryUtilization, since, buffer),
    );
    (gpu_mean, memory_mean)
}

/// Reads `series` when due, else keeps its figure. `this_cycle` bounds a read that follows
/// quiet cycles to this cycle's own samples.
#[allow(clippy::too_many_arguments)]
fn advance(
    ledger: &mut CallLedger,
    key: &str,
    call: &'static str,
    series: &mut Series,
    cadence: &Cadence,
    every_cycle: bool,
    this_cycle: Option<Duration>,
    fetch: impl FnOnce(u64) -> Result<Vec<Sample>, NvmlError>,
) -> Option<f64> {
    if !series.due(cadence.now, every_cycle) {
        series.read_last_cycle = false;
        return series.last;
    }
    let recent = if series.read_last_cycle {
        None
    } else {
        this_cycle.map(|d| d.as_micros() as u64)
    };
    series.read_at = Some(cadence.now);
    series.read_last_cycle = true;
    series.last = read_one(ledger, key, call, &mut series.mark, recent, fetch);
    series.last
}

/// One driver call into `buffer` (kept across reads), the samples after `since`.
fn fetch_samples(
    d: &Device<'static>,
    kind: Sampling,
    since: u64,
    buffer: &mut Vec<nvmlSample_t>,
) -> Result<Vec<Sample>, NvmlError> {
    let sym = d
        .nvml()
        .lib()
        .nvmlDeviceGetSamples
        .as_ref()
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    // SAFETY: a plain C struct of integers and a union of numbers; all zero bits is valid.
    let empty: nvmlSample_t = unsafe { std::mem::zeroed() };
    let mut value_type: nvmlValueType_t = 0;
    let n = kept_buffer::fill(buffer, SAMPLE_SLOTS, empty, |buf, count| {
        // SAFETY: the handle is valid while NVML is loaded; the buffer holds `count` entries.
        unsafe {
            sym(
                d.handle(),
                kind.as_c(),
                since,
                &mut value_type,
                count,
                buf.as_mut_ptr(),
            )
        }
    })?;
    let tag = SampleValueType::try_from(value_type)?;
    Ok(buffer[..n]
        .iter()
        .map(|s| Sample::from_tag_and_struct(&tag, *s))
        .collect())
}

fn read_one(
    ledger: &mut CallLedger,
    key: &str,
    call: &'static str,
    mark: &mut Option<u64>,
    recent_us: Option<u64>,
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
    let from = match (*mark, recent_us, points.iter().map(|p| p.0).max()) {
        (Some(m), Some(window), Some(newest)) => Some(m.max(newest.saturating_sub(window))),
        (m, _, _) => m,
    };
    let (mean, newest) = mean_since(from, &points)?;
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
