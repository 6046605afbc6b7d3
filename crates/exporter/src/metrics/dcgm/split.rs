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
#[path = "split_tests.rs"]
mod tests;
