//! Reading tessera's exposition in the node tests: the scrape, its series, and the series a
//! test wants (exact labels, optionally a value), waited for and checked.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::support;

/// tessera's HTTP endpoint (and its log, when it runs as a child of the test).
pub struct Scraped {
    pub port: u16,
    pub log: Option<PathBuf>,
}

pub struct Tessera {
    child: Child,
    scraped: Scraped,
    _dir: tempfile::TempDir,
}

impl Tessera {
    pub fn new(child: Child, port: u16, log: PathBuf, dir: tempfile::TempDir) -> Tessera {
        Tessera {
            child,
            scraped: Scraped {
                port,
                log: Some(log),
            },
            _dir: dir,
        }
    }
}

impl std::ops::Deref for Tessera {
    type Target = Scraped;
    fn deref(&self) -> &Scraped {
        &self.scraped
    }
}

impl Scraped {
    pub fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        support::http_get(self.port, path).map(|(s, _, b)| (s, b))
    }

    pub fn metrics(&self) -> String {
        self.get("/metrics").map(|(_, b)| b).unwrap_or_default()
    }

    pub fn log(&self) -> String {
        self.log
            .as_ref()
            .and_then(|l| std::fs::read_to_string(l).ok())
            .unwrap_or_default()
    }

    pub fn wait_ready(&self) {
        self.wait("/readyz", Duration::from_secs(60), |_| {
            self.get("/readyz").map(|(s, _)| s == 200).unwrap_or(false)
        });
    }

    /// Polls the scrape until `cond` holds; returns that scrape, or panics with the last one.
    pub fn wait(&self, what: &str, limit: Duration, mut cond: impl FnMut(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        let mut last = String::new();
        while Instant::now() < deadline {
            last = self.metrics();
            if cond(&last) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "timed out after {limit:?} waiting for {what}\nlast scrape (GPU series):\n{}\ntessera log:\n{}",
            gpu_lines(&last),
            self.log()
        );
    }
}

impl Drop for Tessera {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The scrape's container and process series, for failure messages.
pub fn gpu_lines(m: &str) -> String {
    m.lines()
        .filter(|l| l.starts_with("gpu_container_") || l.starts_with("gpu_process_memory"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One series of an exposition: its family, labels and value.
#[derive(Debug, Clone)]
pub struct Series {
    pub family: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every series of `family` in the scrape (no escaped quotes appear in the tests' labels).
pub fn series(m: &str, family: &str) -> Vec<Series> {
    every_series(m)
        .into_iter()
        .filter(|s| s.family == family)
        .collect()
}

/// Every series of every family in the scrape.
pub fn every_series(m: &str) -> Vec<Series> {
    m.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (head, value) = l.rsplit_once(' ')?;
            let (name, labels) = match head.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (head, ""),
            };
            let value: f64 = value.parse().ok()?;
            Some(Series {
                family: name.to_owned(),
                labels: labels
                    .split("\",")
                    .filter(|kv| !kv.is_empty())
                    .filter_map(|kv| {
                        let (k, v) = kv.split_once("=\"")?;
                        Some((k.to_owned(), v.trim_end_matches('"').to_owned()))
                    })
                    .collect(),
                value,
            })
        })
        .collect()
}

/// The series of `family` whose labels include every pair of `want`.
pub fn matching(m: &str, family: &str, want: &[(&str, &str)]) -> Vec<Series> {
    series(m, family)
        .into_iter()
        .filter(|s| {
            want.iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

/// Whether exactly one series of `family` carries all of `want`.
pub fn has_one(m: &str, family: &str, want: &[(&str, &str)]) -> bool {
    matching(m, family, want).len() == 1
}

/// A series the scrape must hold: exactly one of `family` for the selector, with these labels
/// (and this value, where given).
#[derive(Debug, Clone)]
pub struct Want {
    pub family: &'static str,
    pub select: Vec<(String, String)>,
    pub labels: Vec<(String, String)>,
    pub value: Option<f64>,
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn borrowed(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

pub fn want(family: &'static str, select: &[(&str, &str)], labels: &[(&str, &str)]) -> Want {
    Want {
        family,
        select: owned(select),
        labels: owned(labels),
        value: None,
    }
}

impl Want {
    pub fn value(mut self, v: f64) -> Want {
        self.value = Some(v);
        self
    }

    pub fn holds(&self, m: &str) -> bool {
        let found = matching(m, self.family, &borrowed(&self.select));
        found.len() == 1
            && self
                .labels
                .iter()
                .all(|(k, v)| found[0].labels.get(k) == Some(v))
            && self.value.is_none_or(|v| found[0].value == v)
    }

    /// Panics naming what differs.
    pub fn check(&self, m: &str) {
        let s = assert_series(
            m,
            self.family,
            &borrowed(&self.select),
            &borrowed(&self.labels),
        );
        if let Some(v) = self.value {
            assert_eq!(s.value, v, "{} {:?}", self.family, self.select);
        }
    }
}

impl Scraped {
    /// Waits until the scrape holds every `wants`; then returns it. After `limit`, checks the
    /// last scrape want by want, so the failure names the first difference.
    pub fn expect(&self, what: &str, limit: Duration, wants: &[Want]) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let m = self.metrics();
            if wants.iter().all(|w| w.holds(&m)) {
                return m;
            }
            if Instant::now() > deadline {
                eprintln!("{what}: not after {limit:?}; tessera log:\n{}", self.log());
                for w in wants {
                    w.check(&m);
                }
                return m;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The one series of `family` for the selector `select`, whose labels must then be exactly
/// `expect` on each key `expect` names; panics naming every difference.
pub fn assert_series(
    m: &str,
    family: &str,
    select: &[(&str, &str)],
    expect: &[(&str, &str)],
) -> Series {
    let found = matching(m, family, select);
    assert_eq!(
        found.len(),
        1,
        "expected one {family} series for {select:?}, found {found:#?}\nGPU series:\n{}",
        gpu_lines(m)
    );
    let s = found.into_iter().next().expect("one");
    let wrong: Vec<String> = expect
        .iter()
        .filter(|(k, v)| s.labels.get(*k).map(String::as_str) != Some(*v))
        .map(|(k, v)| format!("{k}={:?} (expected {v:?})", s.labels.get(*k)))
        .collect();
    assert!(
        wrong.is_empty(),
        "{family} {select:?}: {}\n{s:#?}",
        wrong.join(", ")
    );
    s
}
