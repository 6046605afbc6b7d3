//! Runs tessera's compute split and its checks on recorded reads (`lab/device/corpus/replay_cases.py`
//! writes them from a corpus run's record logs) and judges each honest tenant's figure and bounds
//! against the truth over the read's window, as `lab/device/corpus/analyze.py` judges a run: so
//! a change to the split can be weighed on real records before a GPU run confirms it.
//!
//!   cargo run --release -p tessera-exporter --example replay_split -- CASES.jsonl [--reads]
//!
//! Prints, per group (run's class and mode, and each kind): reads, coverage, figures within 10 %
//! of the truth band (truth at least 0.1), bounds published and holding the band, mean width,
//! disputes, bounds-only reads, and the median and 5th/95th percentile of the relative error.
//! `--reads` prints every tenant-read too.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};

use serde::Deserialize;
use tessera_exporter::model::compute::{
    evidence, split, ActivityInputs, DeviceCompute, ProbeReading, ProbeTimeline, SplitMethod,
};
use tessera_exporter::model::holding::PodRef;
use tessera_exporter::model::ProcessSample;

#[derive(Deserialize)]
struct Case {
    run: String,
    draw: String,
    mode: String,
    device: f64,
    tenants: Vec<Line>,
}

#[derive(Deserialize)]
struct Line {
    pid: u32,
    kind: String,
    nvml: Option<f64>,
    traced_share: Option<f64>,
    kernels: u64,
    truth: f64,
    #[serde(default)]
    band: Option<(f64, f64)>,
    covered: Vec<f64>,
    solo: Vec<f64>,
    floor: Vec<f64>,
    traced: Vec<u8>,
}

const WINDOW: f64 = 5.0;
const LAG: f64 = 2.0;
const NOW: f64 = 1000.0;
/// As analyze.py: the gauge's rounding and the truth window's edges.
const SLACK: f64 = 0.01;
const JUDGED: f64 = 0.1;
const LONG_KINDS: [&str; 3] = ["gemm16k", "prefill", "conv-big"];

#[derive(Default)]
struct Tally {
    reads: usize,
    point: usize,
    judged: usize,
    within: usize,
    bounds: usize,
    contain: usize,
    width: f64,
    disputed: usize,
    bounds_only: usize,
    rel: Vec<f64>,
}

impl Tally {
    fn row(&mut self, name: &str) {
        let pct = |a: usize, b: usize| {
            if b == 0 {
                "—".to_string()
            } else {
                format!("{:.1} % ({a}/{b})", 100.0 * a as f64 / b as f64)
            }
        };
        self.rel.sort_by(f64::total_cmp);
        let q = |f: f64| {
            self.rel
                .get(((self.rel.len() as f64 - 1.0) * f).round() as usize)
                .map_or("—".to_string(), |v| format!("{:+.1}", v * 100.0))
        };
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} |",
            self.reads,
            pct(self.point, self.reads),
            pct(self.within, self.judged),
            pct(self.bounds, self.reads),
            pct(self.contain, self.bounds),
            if self.bounds > 0 {
                format!("{:.3}", self.width / self.bounds as f64)
            } else {
                "—".into()
            },
            pct(self.disputed, self.reads),
            pct(self.bounds_only, self.reads),
            q(0.5),
            q(0.05),
            q(0.95),
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let print_reads = args.iter().any(|a| a == "--reads");
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for path in args.iter().filter(|a| !a.starts_with("--")) {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("replay_split: {path}: {e}");
                std::process::exit(2);
            }
        };
        for line in BufReader::new(file).lines() {
            let Ok(line) = line else { break };
            let case: Case = match serde_json::from_str(&line) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("replay_split: {path}: {e}");
                    continue;
                }
            };
            replay(&case, print_reads, &mut tallies);
        }
    }
    println!("| group | reads | coverage | within 10 % (band) | bounds | contain (band) | width | disputed | bounds only | rel. error median / 5th / 95th (%) |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (name, t) in tallies.iter_mut() {
        t.row(name);
    }
}

fn replay(case: &Case, print_reads: bool, tallies: &mut BTreeMap<String, Tally>) {
    let procs: Vec<ProcessSample> = case
        .tenants
        .iter()
        .map(|l| ProcessSample {
            pid: l.pid,
            name: l.kind.clone(),
            sm_utilization: l.nvml,
            ..Default::default()
        })
        .collect();
    let refs: Vec<&ProcessSample> = procs.iter().collect();
    let mut act = ActivityInputs {
        window_seconds: WINDOW,
        timeline_lag_seconds: LAG,
        ..Default::default()
    };
    for l in &case.tenants {
        act.cpu_cores.insert(l.pid, 1.0);
        let traced: Vec<bool> = l.traced.iter().map(|t| *t != 0).collect();
        let n = traced.iter().filter(|t| **t).count().max(1);
        let busy: f64 = l
            .covered
            .iter()
            .zip(&traced)
            .filter(|(_, t)| **t)
            .map(|(c, _)| c)
            .sum::<f64>()
            / n as f64;
        act.probe.insert(
            l.pid,
            ProbeReading {
                busy_ratio: Some(busy),
                traced_share: l.traced_share.filter(|t| *t < 0.98),
                busy_seconds: 100.0,
                kernels: 100_000,
                clock_seconds: Some(NOW),
                window_kernels: Some(l.kernels),
                ..Default::default()
            },
        );
        act.probe_timelines.insert(
            l.pid,
            ProbeTimeline {
                covered: l.covered.clone(),
                solo: l.solo.clone(),
                traced,
                floor: l.floor.clone(),
            },
        );
    }
    let recent: Vec<(f64, f64)> = (1..=8).map(|i| (NOW - i as f64, case.device)).collect();
    let d = DeviceCompute {
        processes: &refs,
        device_activity: Some(case.device),
        mps: case.mode == "mps",
        mig_instance: false,
        activity: &act,
        now: NOW,
        idle_since: None,
        recent_activity: &recent,
    };
    let mut s = split(&d);
    let pods: Vec<PodRef> = case
        .tenants
        .iter()
        .map(|l| PodRef {
            namespace: "corpus".into(),
            pod: format!("p{}", l.pid),
            container: "c".into(),
            ..Default::default()
        })
        .collect();
    let owners: HashMap<u32, &PodRef> = case.tenants.iter().map(|l| l.pid).zip(&pods).collect();
    evidence::review(&mut s, &d, &owners);
    let class = if case.draw.starts_with("long") {
        "long"
    } else if case.draw.starts_with("heavy") {
        "heavy"
    } else {
        "light"
    };
    let long_draw = case
        .tenants
        .iter()
        .any(|l| LONG_KINDS.contains(&l.kind.as_str()));
    for l in &case.tenants {
        let sh = s.share_of(l.pid);
        let (lo, hi) = l.band.unwrap_or((l.truth, l.truth));
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let mut groups = vec![
            format!("{} {} {}", case.run, class, case.mode),
            format!("{class} {} {}", case.mode, l.kind),
        ];
        if long_draw {
            let who = if LONG_KINDS.contains(&l.kind.as_str()) {
                "long-kernel tenants"
            } else {
                "beside them"
            };
            groups.push(format!("{class} {} {who}", case.mode));
        }
        for g in groups {
            let t = tallies.entry(g).or_default();
            t.reads += 1;
            t.disputed += usize::from(s.method == SplitMethod::Disputed);
            t.bounds_only += usize::from(s.bounds_only.is_some());
            if let Some(f) = sh.share {
                t.point += 1;
                if l.truth >= JUDGED {
                    t.judged += 1;
                    // Within 10 % of some truth in the band.
                    let within = f >= lo * 0.9 && f <= hi * 1.1;
                    t.within += usize::from(within);
                    let nearest = f.clamp(lo, hi);
                    if nearest > 0.0 {
                        t.rel.push((f - nearest) / nearest);
                    }
                }
            }
            if let (Some(a), Some(b)) = (sh.lower, sh.upper) {
                t.bounds += 1;
                t.contain += usize::from(a - SLACK <= hi && lo <= b + SLACK);
                t.width += b - a;
            }
        }
        if print_reads {
            println!(
                "{} {} {} pid {} {}: truth {:.3} [{:.3}, {:.3}] figure {} bounds {} / {} method {:?}{}",
                case.run,
                case.draw,
                case.mode,
                l.pid,
                l.kind,
                l.truth,
                lo,
                hi,
                sh.share.map_or("—".into(), |v| format!("{v:.3}")),
                sh.lower.map_or("—".into(), |v| format!("{v:.3}")),
                sh.upper.map_or("—".into(), |v| format!("{v:.3}")),
                s.method,
                s.bounds_only
                    .map_or(String::new(), |b| format!(" bounds-only {b:.3}")),
            );
        }
    }
}
