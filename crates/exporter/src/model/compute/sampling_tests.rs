//! The sample's margin against windows whose whole is known.

use super::*;

#[test]
fn a_fully_counted_window_has_no_sampling_error() {
    let m = ratio_margin(1000, |_| true, |_| 1.0, |k| (k % 7) as f64 / 7.0);
    assert_eq!(m, Some(0.0));
}

#[test]
fn an_even_load_sampled_in_slots_is_known_tightly() {
    // Half the 20-ms slots traced, the tenant covering 0.3 of every millisecond.
    let traced = |k: usize| (k / 20) % 2 == 0;
    let m = ratio_margin(5000, traced, |_| 1.0, |_| 0.3).expect("a margin");
    assert!(m < 1e-9, "{m}");
}

#[test]
fn a_bursty_load_sampled_in_slots_gets_a_margin_that_holds_the_whole_windows_figure() {
    // Requests of 60 ms at irregular times, 0.2 of the window in all; a quarter of the
    // slots traced by a hash (as the probe does). Over many windows the whole window's
    // figure must fall inside figure ± margin nearly always, and the margin must be real.
    let mut held = 0;
    let mut widths = Vec::new();
    let trials = 400;
    for seed in 0..trials {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15 ^ seed;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let len = 5000;
        let mut busy = vec![0.0; len];
        let mut t = 0usize;
        while t < len {
            t += (next() % 300) as usize;
            for b in busy.iter_mut().skip(t).take(60) {
                *b = 1.0;
            }
            t += 60;
        }
        let slot_seed = next();
        let traced = |k: usize| {
            let z = ((k / 20) as u64 ^ slot_seed).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            (z >> 61) < 2
        };
        let Some(m) = ratio_margin(len, traced, |_| 1.0, |k| busy[k]) else {
            continue;
        };
        let (n, s) = (0..len)
            .filter(|k| traced(*k))
            .fold((0.0, 0.0), |(n, s), k| (n + 1.0, s + busy[k]));
        let whole = busy.iter().sum::<f64>() / len as f64;
        held += usize::from((s / n - whole).abs() <= m);
        widths.push(m);
    }
    assert!(
        held as f64 >= 0.97 * trials as f64,
        "held {held} of {trials}"
    );
    let mean_width = widths.iter().sum::<f64>() / widths.len() as f64;
    assert!(mean_width > 0.01 && mean_width < 0.2, "margin {mean_width}");
}

#[test]
fn too_few_runs_give_no_margin() {
    let traced = |k: usize| k < 30 || (100..130).contains(&k);
    assert_eq!(ratio_margin(1000, traced, |_| 1.0, |_| 0.5), None);
}
