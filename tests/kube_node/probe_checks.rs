//! The probe tests' reading of the node: tenant processes in `/proc`, and checks on tessera's
//! scrape and /debug/attribution that return what is wrong instead of panicking, so that the
//! planted runs can require them to fail.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{every_series, Scraped, Series};

/// A process's facts from the node's `/proc`.
pub struct Proc {
    pub pid: u32,
    pub status: String,
}

impl Proc {
    pub fn of(pid: u32) -> Proc {
        Proc {
            pid,
            status: std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default(),
        }
    }

    fn field(&self, name: &str) -> Vec<u32> {
        self.status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect()
    }

    /// Its PID in each PID namespace, the host's first: the last is what it sees itself as.
    pub fn nspid(&self) -> Vec<u32> {
        self.field("NSpid:")
    }

    pub fn uid(&self) -> Option<u32> {
        self.field("Uid:").first().copied()
    }

    /// Its children (cuda-tenant's workers).
    pub fn children(&self) -> Vec<u32> {
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.pid))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }
}

/// Until the process has a child; its host PID.
pub fn wait_child(pid: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(c) = Proc::of(pid).children().first() {
            return *c;
        }
        assert!(
            Instant::now() < deadline,
            "pid {pid} started no worker within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub type Check = Result<(), String>;

/// The one series of `family` whose labels include `select`, which must carry `expect`.
pub fn one(
    m: &str,
    family: &str,
    select: &[(&str, &str)],
    expect: &[(&str, &str)],
) -> Result<Series, String> {
    let found: Vec<Series> = every_series(m)
        .into_iter()
        .filter(|s| s.family == family)
        .filter(|s| {
            select
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    let [s] = found.as_slice() else {
        return Err(format!(
            "{} {family} series for {select:?}, not one",
            found.len()
        ));
    };
    let wrong: Vec<String> = expect
        .iter()
        .filter(|(k, v)| s.labels.get(*k).map(String::as_str) != Some(*v))
        .map(|(k, v)| format!("{k}={:?} (expected {v:?})", s.labels.get(*k)))
        .collect();
    if wrong.is_empty() {
        Ok(s.clone())
    } else {
        Err(format!("{family} {select:?}: {}", wrong.join(", ")))
    }
}

/// No series of any family carries every pair of `select`.
pub fn nowhere(m: &str, select: &[(&str, &str)]) -> Check {
    let found: Vec<String> = every_series(m)
        .into_iter()
        .filter(|s| {
            select
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| format!("{} {:?}", s.family, s.labels))
        .collect();
    if found.is_empty() {
        Ok(())
    } else {
        Err(format!("series carry {select:?}: {}", found.join("; ")))
    }
}

/// `v` within `tol` (relative) of `want`.
pub fn near(what: &str, v: f64, want: f64, tol: f64) -> Check {
    if (v - want).abs() <= want * tol {
        Ok(())
    } else {
        Err(format!(
            "{what} = {v}, not within {:.0} % of {want}",
            tol * 100.0
        ))
    }
}

/// The checks' failures, each named.
pub fn failures(checks: &[(String, Check)]) -> Vec<String> {
    checks
        .iter()
        .filter_map(|(name, c)| c.as_ref().err().map(|e| format!("{name}: {e}")))
        .collect()
}

/// Polls the scrape and /debug/attribution until every check passes; returns the scrape, or
/// panics with every failure of the last round.
pub fn wait_checks(
    t: &Scraped,
    what: &str,
    limit: Duration,
    mut checks: impl FnMut(&str, &Value) -> Vec<(String, Check)>,
) -> (String, Value) {
    let deadline = Instant::now() + limit;
    loop {
        let m = t.metrics();
        let debug = debug(t);
        let last = checks(&m, &debug);
        let bad = failures(&last);
        if bad.is_empty() {
            return (m, debug);
        }
        if Instant::now() > deadline {
            let splits: Vec<String> = debug["gpus"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|g| {
                    format!(
                        "{}: {} {}",
                        g["uuid"], g["compute"]["method"], g["compute"]["why"]
                    )
                })
                .collect();
            panic!(
                "{what}: not after {limit:?}:\n  {}\nprobe series:\n{}\nsplits:\n{}\ntessera log (tail):\n{}",
                bad.join("\n  "),
                probe_lines(&m),
                splits.join("\n"),
                tail(&t.log(), 30)
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// /debug/attribution, or null.
pub fn debug(t: &Scraped) -> Value {
    t.get("/debug/attribution")
        .ok()
        .and_then(|(_, b)| serde_json::from_str(&b).ok())
        .unwrap_or_default()
}

/// The device split of the GPU `uuid` on /debug/attribution.
pub fn split_of<'a>(debug: &'a Value, uuid: &str) -> &'a Value {
    debug["gpus"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g["uuid"] == uuid)
        .map_or(&Value::Null, |g| &g["compute"])
}

pub fn probe_lines(m: &str) -> String {
    m.lines()
        .filter(|l| {
            l.starts_with("gpu_process_kernels")
                || l.starts_with("gpu_process_busy_ratio{")
                || l.starts_with("gpu_container_busy_ratio{")
                || l.starts_with("gpu_compute_split_info")
                || l.starts_with("tessera_probe")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
