use super::*;
use crate::model::{GpmActivity, MigSample};

const IDLE: ClockKey = ClockKey {
    sm_mhz: 345,
    memory_mhz: 2619,
};
const LOCKED: ClockKey = ClockKey {
    sm_mhz: 1980,
    memory_mhz: 2619,
};

fn reading(clocks: ClockKey, watts: f64) -> Option<IdleReading> {
    Some(IdleReading { clocks, watts })
}

/// Feeds one reading a second from `t0`, returning the state.
fn feed(f: &mut FloorState, t0: f64, clocks: ClockKey, watts: &[f64], window: f64) {
    for (i, w) in watts.iter().enumerate() {
        f.observe(t0 + i as f64, reading(clocks, *w), window);
    }
}

#[test]
fn the_floor_is_the_median_of_a_window_of_idle_readings() {
    let mut f = FloorState::default();
    // The first reading covers the second before the run (power still settling): left out.
    // One glitch (0 W) inside the window does not set the floor.
    feed(
        &mut f,
        0.0,
        IDLE,
        &[300.0, 75.0, 74.0, 0.0, 74.5, 74.0, 73.5],
        5.0,
    );
    assert_eq!(f.own(), Some((IDLE, 74.0)));
    assert_eq!(f.learned.len(), 1);
}

#[test]
fn nothing_is_learned_before_the_window_is_spanned_or_when_the_run_breaks() {
    let mut f = FloorState::default();
    feed(&mut f, 0.0, IDLE, &[80.0, 75.0, 74.0, 74.0], 5.0);
    assert_eq!(f.own(), None, "4 s of a 5 s window");
    // A busy reading breaks the run: the next one starts from scratch.
    f.observe(4.0, None, 5.0);
    feed(&mut f, 5.0, IDLE, &[74.0, 74.0, 74.0], 5.0);
    assert_eq!(f.own(), None);
    // So does a change of clock state.
    feed(&mut f, 8.0, LOCKED, &[120.0, 120.0, 120.0], 5.0);
    assert_eq!(f.own(), None);
}

#[test]
fn the_lowest_window_is_kept_per_clock_state_and_the_last_state_settled_in_applies() {
    let mut f = FloorState::default();
    // Still warm: 80 W. Later, settled: 74 W. Then warm again: the floor stays 74 W.
    feed(&mut f, 0.0, IDLE, &[80.0; 7], 5.0);
    assert_eq!(f.own(), Some((IDLE, 80.0)));
    f.observe(99.0, None, 5.0);
    feed(&mut f, 100.0, IDLE, &[74.0; 7], 5.0);
    f.observe(199.0, None, 5.0);
    feed(&mut f, 200.0, IDLE, &[79.0; 7], 5.0);
    assert_eq!(f.own(), Some((IDLE, 74.0)));
    // Someone locks the clocks high: the GPU now idles at 120 W, and that is its floor.
    f.observe(300.0, None, 5.0);
    feed(&mut f, 301.0, LOCKED, &[120.0; 7], 5.0);
    assert_eq!(f.own(), Some((LOCKED, 120.0)));
    // Unlocked again: the floor learned there before comes back at once.
    f.observe(400.0, None, 5.0);
    feed(&mut f, 401.0, IDLE, &[77.0; 7], 5.0);
    assert_eq!(f.own(), Some((IDLE, 74.0)));
    assert_eq!(f.at(LOCKED), Some(120.0));
}

#[test]
fn a_clock_stepped_back_restarts_the_run() {
    let mut f = FloorState::default();
    feed(&mut f, 100.0, IDLE, &[74.0; 3], 5.0);
    feed(&mut f, 50.0, IDLE, &[74.0; 3], 5.0);
    assert_eq!(f.own(), None);
}

fn learned(watts: f64, clocks: ClockKey) -> FloorState {
    let mut f = FloorState::default();
    feed(&mut f, 0.0, clocks, &[watts; 7], 5.0);
    f
}

#[test]
fn a_gpu_never_idle_takes_the_median_of_its_same_model_siblings() {
    let h100 = "NVIDIA H100 80GB HBM3";
    let a100 = "NVIDIA A100-SXM4-80GB";
    let (a, b, c) = (
        learned(72.0, IDLE),
        learned(76.0, IDLE),
        learned(90.0, IDLE),
    );
    let locked = learned(120.0, LOCKED);
    let never = FloorState::default();
    let floors = applied(&[
        (h100, &a),
        (h100, &b),
        (h100, &c),
        (h100, &locked),
        (h100, &never),
        (a100, &never),
    ]);
    assert_eq!(floors[0], Some((72.0, FloorSource::Own)));
    assert_eq!(floors[3], Some((120.0, FloorSource::Own)));
    // Three of four settle at 345 MHz: their median, not the clock-locked board's.
    assert_eq!(floors[4], Some((76.0, FloorSource::SameModel)));
    assert_eq!(floors[5], None, "no A100 was seen idle");
}

fn gpu(util: Option<f64>, sm: Option<f64>) -> GpuSample {
    GpuSample {
        up: true,
        utilization: util,
        gpm: sm.map(|s| GpmActivity {
            sm_activity: s,
            ..Default::default()
        }),
        power_watts: Some(74.0),
        sm_clock_hertz: Some(345e6),
        memory_clock_hertz: Some(2619e6),
        ..Default::default()
    }
}

#[test]
fn a_gpu_reads_idle_only_when_every_activity_figure_it_has_says_so() {
    assert_eq!(
        idle_reading(&gpu(Some(0.0), Some(0.0))),
        reading(IDLE, 74.0)
    );
    assert_eq!(idle_reading(&gpu(Some(0.0), None)), reading(IDLE, 74.0));
    assert_eq!(idle_reading(&gpu(None, Some(0.005))), reading(IDLE, 74.0));
    assert_eq!(idle_reading(&gpu(Some(0.3), Some(0.0))), None);
    assert_eq!(idle_reading(&gpu(Some(0.0), Some(0.2))), None);
    assert_eq!(idle_reading(&gpu(None, None)), None, "no figure, no idle");
    let down = GpuSample {
        up: false,
        ..gpu(Some(0.0), None)
    };
    assert_eq!(idle_reading(&down), None);
    let no_power = GpuSample {
        power_watts: None,
        ..gpu(Some(0.0), None)
    };
    assert_eq!(idle_reading(&no_power), None);
    let no_clocks = GpuSample {
        sm_clock_hertz: None,
        memory_clock_hertz: None,
        ..gpu(Some(0.0), None)
    };
    assert_eq!(
        idle_reading(&no_clocks).map(|r| r.clocks),
        Some(ClockKey {
            sm_mhz: 0,
            memory_mhz: 0
        })
    );
}

#[test]
fn a_mig_gpu_reads_idle_when_every_instance_does() {
    let instance = |sm: Option<f64>| MigSample {
        gpm: sm.map(|s| GpmActivity {
            sm_activity: s,
            ..Default::default()
        }),
        ..Default::default()
    };
    let mig = |a: Option<f64>, b: Option<f64>| GpuSample {
        mig_enabled: Some(true),
        mig_instances: vec![instance(a), instance(b)],
        ..gpu(None, None)
    };
    assert!(idle_reading(&mig(Some(0.0), Some(0.0))).is_some());
    assert!(idle_reading(&mig(Some(0.0), Some(0.4))).is_none());
    assert!(
        idle_reading(&mig(Some(0.0), None)).is_none(),
        "an instance without GPM may be running"
    );
}
