//! Phase timing: which phase is current, and time integrals over phases
//! (energy is the integral of power; a GPM metric is the average between two
//! samples), including the optional loop of `repeat_after_ms`.

#[derive(Debug)]
pub struct Timeline {
    starts: Vec<f64>,
    repeat: Option<f64>,
}

/// Bounds the work of enumerating phase starts after a long pause; events
/// older than this many cycles are dropped rather than replayed.
const MAX_CYCLES_PER_SCAN: f64 = 1000.0;

impl Timeline {
    pub fn new(starts: Vec<u64>, repeat: Option<u64>) -> Result<Timeline, String> {
        if let Some(first) = starts.first() {
            if *first != 0 {
                return Err(format!(
                    "the first phase must start at at_ms: 0 (it starts at {first})"
                ));
            }
        }
        for w in starts.windows(2) {
            if w[1] <= w[0] {
                return Err(format!(
                    "phases must be in increasing at_ms order ({} follows {})",
                    w[1], w[0]
                ));
            }
        }
        let last = starts.last().copied().unwrap_or(0);
        if let Some(r) = repeat {
            if r <= last {
                return Err(format!(
                    "repeat_after_ms ({r}) must be later than the last phase start ({last})"
                ));
            }
        }
        let starts = if starts.is_empty() {
            vec![0.0]
        } else {
            starts.into_iter().map(|s| s as f64).collect()
        };
        Ok(Timeline {
            starts,
            repeat: repeat.map(|r| r as f64),
        })
    }

    fn fold(&self, t: f64) -> (f64, f64) {
        let t = t.max(0.0);
        match self.repeat {
            Some(r) => {
                let cycle = (t / r).floor();
                (cycle, t - cycle * r)
            }
            None => (0.0, t),
        }
    }

    fn index_in_cycle(&self, t: f64) -> usize {
        self.starts.partition_point(|s| *s <= t).saturating_sub(1)
    }

    /// Index of the phase current at `t` ms after init.
    pub fn phase_at(&self, t: f64) -> usize {
        self.index_in_cycle(self.fold(t).1)
    }

    /// Absolute time (ms after init) at which the phase current at `t` began.
    pub fn phase_start(&self, t: f64) -> f64 {
        let (cycle, within) = self.fold(t);
        let start = self.starts[self.index_in_cycle(within)];
        cycle * self.repeat.unwrap_or(0.0) + start
    }

    /// ∫₀ᵗ f(phase) dt within one cycle (or the whole run without repeat).
    fn partial(&self, t: f64, f: &dyn Fn(usize) -> f64) -> f64 {
        let mut sum = 0.0;
        for (i, s) in self.starts.iter().enumerate() {
            if *s >= t {
                break;
            }
            let end = self
                .starts
                .get(i + 1)
                .copied()
                .unwrap_or(f64::INFINITY)
                .min(t);
            sum += f(i) * (end - s);
        }
        sum
    }

    fn cumulative(&self, t: f64, f: &dyn Fn(usize) -> f64) -> f64 {
        let (cycle, within) = self.fold(t);
        let per_cycle = match self.repeat {
            Some(r) if cycle > 0.0 => self.partial(r, f),
            _ => 0.0,
        };
        cycle * per_cycle + self.partial(within, f)
    }

    /// ∫ f(phase) dt from t0 to t1 (ms), in value·ms.
    pub fn integrate(&self, t0: f64, t1: f64, f: &dyn Fn(usize) -> f64) -> f64 {
        self.cumulative(t1, f) - self.cumulative(t0, f)
    }

    /// Time-weighted mean of f between t0 and t1.
    pub fn average(&self, t0: f64, t1: f64, f: &dyn Fn(usize) -> f64) -> f64 {
        let (a, b) = if t0 <= t1 { (t0, t1) } else { (t1, t0) };
        // Within one phase the value is exact, free of integration rounding.
        if b - a < 1e-9 || self.phase_start(a) == self.phase_start(b) {
            return f(self.phase_at(b));
        }
        self.integrate(a, b, f) / (b - a)
    }

    /// Phase starts in the interval (a, b] as (absolute ms, phase index).
    pub fn starts_in(&self, a: f64, b: f64) -> Vec<(f64, usize)> {
        let mut out = Vec::new();
        if b <= a {
            return out;
        }
        match self.repeat {
            None => {
                for (i, s) in self.starts.iter().enumerate() {
                    if *s > a && *s <= b {
                        out.push((*s, i));
                    }
                }
            }
            Some(r) => {
                let last_cycle = (b / r).floor();
                let first_cycle = (a.max(0.0) / r)
                    .floor()
                    .max(last_cycle - MAX_CYCLES_PER_SCAN);
                let mut c = first_cycle;
                while c <= last_cycle {
                    for (i, s) in self.starts.iter().enumerate() {
                        let at = c * r + s;
                        if at > a && at <= b {
                            out.push((at, i));
                        }
                    }
                    c += 1.0;
                }
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "timeline_tests.rs"]
mod tests;
