//! The tenant rule for additive fields (docs/design.md, invariant 7): no copies, no double counting.
//!
//! - One holder of an exclusive device (a whole GPU or a MIG instance): the device value, with
//!   its pod labels, as dcgm-exporter does.
//! - Otherwise: each tenant whose figure tessera knows gets that figure, and one remainder
//!   series with empty pod labels gets the device value minus what was attributed (never
//!   below 0). `sum by (UUID)` is then the device value. A tenant whose figure is withheld
//!   gets no series; its part stays in the remainder.

/// Who a series is for: a holder by its position in the device's holder list, or nobody.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Holder(usize),
    Remainder,
}

/// The series of one additive field on one device. `exclusive` is the one holder of an
/// exclusive device; `tenants` is each holder's figure (`None`: not known).
pub fn split(device: f64, exclusive: Option<usize>, tenants: &[Option<f64>]) -> Vec<(Owner, f64)> {
    if let Some(h) = exclusive {
        return vec![(Owner::Holder(h), device)];
    }
    let mut out: Vec<(Owner, f64)> = tenants
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            v.filter(|v| v.is_finite())
                .map(|v| (Owner::Holder(i), v.max(0.0)))
        })
        .collect();
    let attributed: f64 = out.iter().map(|(_, v)| v).sum();
    // Rounded to 1e-9: a subtraction's float noise (0.30000000000000004) is not a figure.
    let remainder = ((device - attributed).max(0.0) * 1e9).round() / 1e9;
    out.push((Owner::Remainder, remainder));
    out
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
    fn tenants_above_the_device_are_not_scaled_and_the_remainder_is_zero() {
        let s = split(0.5, None, &[Some(0.3), Some(0.3)]);
        assert_eq!(s.last(), Some(&(Owner::Remainder, 0.0)));
        assert!((sum(&s) - 0.6).abs() < 1e-12);
    }

    #[test]
    fn nonsense_figures_are_not_published() {
        let s = split(0.5, None, &[Some(f64::NAN), Some(-0.2)]);
        assert_eq!(s, vec![(Owner::Holder(1), 0.0), (Owner::Remainder, 0.5)]);
    }
}
