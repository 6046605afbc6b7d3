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
    let samples = match fetch(mark.unwrap_or(0)) {
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
mod tests {
    use super::*;

    const MS: u64 = 1_000;

    /// The H100's shape: a sample every 200 ms.
    fn every_200ms(from: u64, values: &[f64]) -> Vec<(u64, f64)> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| (from + (i as u64 + 1) * 200 * MS, v))
            .collect()
    }

    #[test]
    fn the_mean_covers_every_sample_of_the_interval_not_the_last() {
        // One 37 ms kernel in five 200 ms periods: the last sample alone says 0 or 18 %.
        let points = every_200ms(1_000 * MS, &[0.0, 18.0, 0.0, 0.0, 19.0]);
        let (mean, newest) = mean_since(Some(1_000 * MS), &points).unwrap();
        assert_eq!(newest, 2_000 * MS);
        assert!((mean - 7.4).abs() < 1e-9, "{mean}");
    }

    #[test]
    fn only_samples_after_the_mark_count() {
        let mut points = every_200ms(0, &[100.0, 100.0, 100.0]);
        points.extend(every_200ms(600 * MS, &[0.0, 0.0]));
        let (mean, _) = mean_since(Some(600 * MS), &points).unwrap();
        assert_eq!(mean, 0.0);
    }

    #[test]
    fn the_first_read_takes_the_newest_sample_only() {
        let points = every_200ms(0, &[90.0, 90.0, 90.0, 10.0]);
        assert_eq!(mean_since(None, &points), Some((10.0, 800 * MS)));
    }

    #[test]
    fn a_gap_before_the_first_sample_weighs_one_usual_period() {
        // The sampler stalled 10 s; the driver kept only the last three samples.
        let points = every_200ms(10_000 * MS, &[100.0, 0.0, 0.0]);
        let (mean, _) = mean_since(Some(0), &points).unwrap();
        assert!((mean - 100.0 / 3.0).abs() < 1e-9, "{mean}");
    }

    #[test]
    fn unequal_periods_weigh_by_their_length() {
        let points = vec![(300 * MS, 100.0), (400 * MS, 0.0)];
        let (mean, _) = mean_since(Some(0), &points).unwrap();
        // 300 ms at 100 %, weighed as the usual 100 ms period, then 100 ms at 0 %.
        assert_eq!(mean, 50.0);
    }

    #[test]
    fn nothing_new_is_no_figure() {
        assert_eq!(mean_since(Some(5), &[]), None);
        assert_eq!(mean_since(Some(500), &[(400, 3.0)]), None);
    }

    #[test]
    fn hostile_values_never_leave_a_ratio() {
        let s = Sample {
            timestamp: 1,
            value: SampleValue::F64(f64::NAN),
        };
        assert_eq!(percent(&s), None);
        let mut ledger = CallLedger::default();
        let mut mark = Some(0);
        let got = read_one(
            &mut ledger,
            "gpu0",
            "samples_gpu_utilization",
            &mut mark,
            |_| {
                Ok(vec![Sample {
                    timestamp: 200 * MS,
                    value: SampleValue::U32(250),
                }])
            },
        );
        assert_eq!(got, Some(1.0));
        assert_eq!(mark, Some(200 * MS));
    }

    #[test]
    fn no_new_samples_is_not_a_failure_and_unsupported_is_not_asked_again() {
        let mut ledger = CallLedger::default();
        let mut mark = Some(7);
        assert_eq!(
            read_one(
                &mut ledger,
                "gpu0",
                "samples_gpu_utilization",
                &mut mark,
                |_| { Err(NvmlError::NotFound) }
            ),
            None
        );
        assert_eq!(mark, Some(7));
        assert!(!ledger.cycle_failed());
        read_one(
            &mut ledger,
            "gpu0",
            "samples_gpu_utilization",
            &mut mark,
            |_| Err(NvmlError::NotSupported),
        );
        let mut asked = false;
        read_one(
            &mut ledger,
            "gpu0",
            "samples_gpu_utilization",
            &mut mark,
            |_| {
                asked = true;
                Ok(vec![])
            },
        );
        assert!(!asked);
    }
}
