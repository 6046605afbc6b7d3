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
