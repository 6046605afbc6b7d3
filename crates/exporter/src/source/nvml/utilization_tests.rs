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
        None,
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
            None,
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
        None,
        |_| Err(NvmlError::NotSupported),
    );
    let mut asked = false;
    read_one(
        &mut ledger,
        "gpu0",
        "samples_gpu_utilization",
        &mut mark,
        None,
        |_| {
            asked = true;
            Ok(vec![])
        },
    );
    assert!(!asked);
}

/// The H100's buffer at `now_ms`: a sample every 200 ms, busy (`busy_from_ms` on) at 100 %.
fn buffer_at(now_ms: u64, busy_from_ms: u64) -> impl Fn(u64) -> Result<Vec<Sample>, NvmlError> {
    move |since| {
        let fresh: Vec<Sample> = (1..=now_ms / 200)
            .map(|k| k * 200 * MS)
            .filter(|&ts| ts > since && ts + 14_200 * MS > now_ms * MS)
            .map(|ts| Sample {
                timestamp: ts,
                value: SampleValue::U32(if ts > busy_from_ms * MS { 100 } else { 0 }),
            })
            .collect();
        if fresh.is_empty() {
            Err(NvmlError::NotFound)
        } else {
            Ok(fresh)
        }
    }
}

/// Drives one series a cycle a second for `seconds`; returns the figure of each cycle and how
/// many reads the driver saw.
fn run_cycles(
    series: &mut Series,
    seconds: std::ops::Range<u64>,
    busy: impl Fn(u64) -> bool,
    busy_from_ms: u64,
) -> (Vec<Option<f64>>, usize) {
    let start = Instant::now();
    let mut ledger = CallLedger::default();
    let mut reads = 0;
    let mut figures = Vec::new();
    for t in seconds {
        let cadence = Cadence {
            now: start + Duration::from_secs(t),
            busy: busy(t),
        };
        let fetch = buffer_at(t * 1000, busy_from_ms);
        let got = advance(
            &mut ledger,
            "gpu0",
            "samples_gpu_utilization",
            series,
            &cadence,
            cadence.busy,
            Some(Duration::from_secs(1)),
            |since| {
                reads += 1;
                fetch(since)
            },
        );
        figures.push(got);
    }
    (figures, reads)
}

#[test]
fn a_quiet_gpu_is_read_every_five_seconds_and_keeps_its_window_between() {
    let mut series = Series::default();
    let (figures, reads) = run_cycles(&mut series, 1..21, |_| false, u64::MAX / MS);
    assert_eq!(
        reads, 4,
        "cycles 1, 6, 11, 16 read; the rest keep the figure"
    );
    assert!(figures.iter().all(|f| *f == Some(0.0)), "{figures:?}");
}

#[test]
fn a_busy_gpu_is_read_every_cycle() {
    let mut series = Series::default();
    let (figures, reads) = run_cycles(&mut series, 1..11, |_| true, 0);
    assert_eq!(reads, 10);
    assert!(figures[1..].iter().all(|f| *f == Some(1.0)), "{figures:?}");
}

#[test]
fn the_first_busy_cycle_after_quiet_ones_covers_its_own_second_only() {
    // Quiet reads at 1, 6 and 11 s; a process arrives and runs flat out from 13.0 s, seen at
    // 14 s. That cycle must read 1.0, not the 1/3 that the whole window since the read at 11 s
    // gives: the cycles 12 and 13 already published the quiet window's figure.
    let mut series = Series::default();
    let (figures, reads) = run_cycles(&mut series, 1..17, |t| t >= 14, 13_000);
    assert_eq!(reads, 3 + 3);
    assert_eq!(
        figures[12],
        Some(0.0),
        "13 s: still the quiet read's figure"
    );
    assert_eq!(figures[13], Some(1.0), "{figures:?}");
    assert!(figures[14..].iter().all(|f| *f == Some(1.0)), "{figures:?}");
}

#[test]
fn a_quiet_read_that_finds_kernels_makes_the_gpu_busy_again() {
    let mut reader = UtilizationReader::default();
    assert!(!reader.last_window_idle(), "no read yet is not idle");
    reader.gpu.last = Some(0.0);
    assert!(reader.last_window_idle());
    reader.gpu.last = Some(0.01);
    assert!(!reader.last_window_idle());
}
