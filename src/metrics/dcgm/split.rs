//! The tenant rule for additive fields (docs/design.md invariant 7): no copies, no double
//! counting, and no pod handed more than the device had.
//!
//! - One holder of an exclusive device (a whole GPU or a MIG instance): the device value, with
//!   its pod labels, as dcgm-exporter does.
//! - Otherwise: each tenant whose figure is published gets that figure, and one remainder
//!   series with empty pod labels gets the device value minus what was attributed. A tenant
//!   whose figure is withheld gets no series; its part stays in the remainder.
//! - Where the tenants' figures add up to more than the device's (MPS clients' busy times
//!   overlap; figures sampled apart), they are scaled by device / sum, so each keeps its
//!   proportion and the remainder is 0. `sum by (UUID)` is then the device value in every
//!   sample. tessera's own per-container families keep the unscaled figures.
//! - Free memory pairs with used memory ([`pair_free`]).

/// Who a series is for: a holder by its position in the device's holder list, or nobody.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Holder(usize),
    Remainder,
}

/// Rounded to 1e-9: a subtraction's or a scale's float noise (0.30000000000000004) is not a
/// figure, and a remainder of -1e-17 must not read as a negative share.
fn round9(v: f64) -> f64 {
    (v * 1e9).round() / 1e9
}

/// The series of one additive field on one device. `exclusive` is the one holder of an
/// exclusive device; `tenants` is each holder's figure (`None`: not published).
pub fn split(device: f64, exclusive: Option<usize>, tenants: &[Option<f64>]) -> Vec<(Owner, f64)> {
    if let Some(h) = exclusive {
        return vec![(Owner::Holder(h), device)];
    }
    let device = device.max(0.0);
    let mut out: Vec<(Owner, f64)> = tenants
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            v.filter(|v| v.is_finite())
                .map(|v| (Owner::Holder(i), v.max(0.0)))
        })
        .collect();
    let attributed: f64 = out.iter().map(|(_, v)| v).sum();
    if attributed > device {
        // Scaled, not capped one by one: no tenant is charged another's overlap.
        let scale = device / attributed;
        for (_, v) in &mut out {
            *v *= scale;
        }
        out.push((Owner::Remainder, 0.0));
    } else {
        out.push((Owner::Remainder, round9(device - attributed)));
    }
    out
}

/// Free memory for the series of a used-memory split: each series (tenant or remainder) gets
/// the device's free memory in proportion to its used memory, so `used / (used + free)` on any
/// one series is the device's occupancy, the ratio OpenCost computes per container, and
/// `sum by (UUID)` of free memory is the device's. With nothing used, it is all remainder.
pub fn pair_free(used: &[(Owner, f64)], free: f64) -> Vec<(Owner, f64)> {
    if !used.iter().any(|(o, _)| *o == Owner::Remainder) {
        // An exclusive device: its one holder's, as dcgm-exporter labels it.
        return used.iter().map(|(o, _)| (*o, free)).collect();
    }
    let total: f64 = used.iter().map(|(_, v)| v).sum();
    if total <= 0.0 {
        let mut out: Vec<(Owner, f64)> = used
            .iter()
            .filter(|(o, _)| *o != Owner::Remainder)
            .map(|(o, _)| (*o, 0.0))
            .collect();
        out.push((Owner::Remainder, free));
        return out;
    }
    used.iter()
        .map(|(o, u)| (*o, round9(free * u / total)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(s: &[(Owner, f64)]) -> f64 {
        s.iter().map(|(_, v)| v).sum()
    }

    #[test]
    fn an_exclusive_holder_gets_the_device_value() {
        assert_eq!(split(0.7, Some(0), &[None]), vec![(Owner::Holder(0), 0.7)]);
    }

    #[test]
    fn known_tenants_and_a_remainder_sum_to_the_device() {
        let s = split(0.9, None, &[Some(0.5), Some(0.25)]);
        assert_eq!(
            s,
            vec![
                (Owner::Holder(0), 0.5),
                (Owner::Holder(1), 0.25),
                (Owner::Remainder, 0.15)
            ]
        );
        assert!((sum(&s) - 0.9).abs() < 1e-12);
    }

    #[test]
    fn a_withheld_tenant_gets_nothing_and_its_time_stays_in_the_remainder() {
        let s = split(0.8, None, &[Some(0.3), None]);
        assert_eq!(s, vec![(Owner::Holder(0), 0.3), (Owner::Remainder, 0.5)]);
        // Every tenant withheld: the device value is all remainder, never copied to a pod.
        assert_eq!(
            split(0.8, None, &[None, None]),
            vec![(Owner::Remainder, 0.8)]
        );
    }

    #[test]
    fn no_holder_is_all_remainder() {
        assert_eq!(split(0.4, None, &[]), vec![(Owner::Remainder, 0.4)]);
    }

    #[test]
    fn tenants_above_the_device_are_scaled_to_it_in_proportion() {
        // The sample: three MPS clients' busy times overlap past the device's 0.826.
        let s = split(0.826, None, &[Some(0.30), Some(0.30), Some(0.28)]);
        assert_eq!(s.last(), Some(&(Owner::Remainder, 0.0)));
        assert!((sum(&s) - 0.826).abs() < 1e-12, "{s:?}");
        let (a, c) = (s[0].1, s[2].1);
        assert!((a / c - 0.30 / 0.28).abs() < 1e-12, "proportions kept");
        assert!(s.iter().all(|(_, v)| *v <= 0.826));
    }

    #[test]
    fn a_sum_a_hair_over_the_device_leaves_no_negative_remainder() {
        let s = split(0.63, None, &[Some(0.25), Some(0.22), Some(0.16000000001)]);
        assert_eq!(s.last(), Some(&(Owner::Remainder, 0.0)));
        assert!(sum(&s) <= 0.63 + 1e-15);
        let s = split(0.63, None, &[Some(0.25), Some(0.22), Some(0.16)]);
        assert_eq!(s.last(), Some(&(Owner::Remainder, 0.0)), "{s:?}");
    }

    #[test]
    fn nonsense_figures_are_not_published() {
        let s = split(0.5, None, &[Some(f64::NAN), Some(-0.2)]);
        assert_eq!(s, vec![(Owner::Holder(1), 0.0), (Owner::Remainder, 0.5)]);
    }

    #[test]
    fn free_memory_pairs_with_used_so_every_series_reads_the_device_occupancy() {
        let used = split(30_000.0, None, &[Some(12_000.0), Some(0.0), Some(17_000.0)]);
        let free = pair_free(&used, 50_000.0);
        assert_eq!(free.len(), used.len());
        assert!((sum(&free) - 50_000.0).abs() < 1e-6);
        for ((o, u), (o2, f)) in used.iter().zip(&free) {
            assert_eq!(o, o2);
            if *u > 0.0 {
                assert!((u / (u + f) - 0.375).abs() < 1e-9, "{o:?}: {u} {f}");
            } else {
                assert_eq!(*f, 0.0);
            }
        }
        // An exclusive holder: the device's free memory, with its labels.
        let used = split(1012.0, Some(0), &[None]);
        assert_eq!(
            pair_free(&used, 78_488.0),
            vec![(Owner::Holder(0), 78_488.0)]
        );
        // Nothing used: all remainder, the tenants 0 (present, as their used memory is).
        let used = split(0.0, None, &[Some(0.0)]);
        assert_eq!(
            pair_free(&used, 80_000.0),
            vec![(Owner::Holder(0), 0.0), (Owner::Remainder, 80_000.0)]
        );
    }
}
