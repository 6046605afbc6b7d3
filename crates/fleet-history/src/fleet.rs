//! A simulated fleet built from captures of real demo nodes.
//!
//! `scripts/fleet/capture.py` scrapes K demo fleet nodes once every scrape interval over one
//! loop of the demo's scenario, plus one scrape a loop after the first: `node-<k>/<j>.prom`.
//! Node n of the simulated fleet is capture `n % K` renamed to node n and shifted by
//! `n % phases` scrapes, so neighbouring nodes are not in step. A sample at scrape slot `p`
//! (counted from the fleet's origin) is the capture of phase `p mod phases`; a counter adds
//! `p div phases` times its increase over one loop, so it keeps rising across loops as the
//! live node's would. The same function of time writes the history and serves the live
//! scrapes, so the two join without a step.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Nodes per simulated cluster, as `crates/demo/src/fleet.rs` groups them.
pub const NODES_PER_CLUSTER: u64 = 50;

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: cannot parse the sample line")]
    Parse { path: PathBuf, line: usize },
    #[error("{0}: no captures (expected node-<k>/<j>.prom, at least two per node)")]
    Empty(PathBuf),
    #[error("{dir}: {found} captures, the other nodes have {expected}")]
    Uneven {
        dir: PathBuf,
        found: usize,
        expected: usize,
    },
}

/// One series of a capture: its name and its labels as the exposition wrote them (values
/// still escaped, which both outputs accept as they are). The node label's value is left
/// empty and filled in per simulated node.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesDef {
    pub name: String,
    pub labels: Labels,
    /// Index in `labels` of the `node` label, if the series has one.
    pub node_label: Option<usize>,
    /// `up` and `scrape_samples_scraped`: Prometheus writes these itself when it scrapes, so
    /// only the history carries them.
    pub scrape_meta: bool,
}

/// One captured node over a loop.
#[derive(Debug, Clone)]
pub struct Template {
    pub series: Vec<SeriesDef>,
    /// `values[phase][series]`; None where the series was absent at that phase.
    pub values: Vec<Vec<Option<f64>>>,
    /// Per series: what a counter gains over one loop (0 for gauges).
    pub increase: Vec<f64>,
}

#[derive(Debug, Clone)]
pub struct Fleet {
    pub templates: Vec<Template>,
    pub phases: usize,
}

/// The labels Prometheus attaches to node n's series when it scrapes it (scripts/fleet.sh
/// gives `cluster` as a target label; the replay target's instance is the node's name).
pub fn node_name(n: u64) -> String {
    format!("{}-gpu-{:05}", cluster(n), n)
}

pub fn cluster(n: u64) -> String {
    format!("fleet-{}", n / NODES_PER_CLUSTER)
}

impl Fleet {
    pub fn load(dir: &Path) -> Result<Fleet, FleetError> {
        let mut nodes: Vec<(u64, PathBuf)> = Vec::new();
        let entries = fs::read_dir(dir).map_err(|source| FleetError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(k) = name.strip_prefix("node-").and_then(|k| k.parse().ok()) {
                nodes.push((k, entry.path()));
            }
        }
        nodes.sort();
        let mut templates = Vec::new();
        let mut phases = 0;
        for (_, path) in nodes {
            let mut files = Vec::new();
            for j in 0.. {
                let f = path.join(format!("{j}.prom"));
                if !f.exists() {
                    break;
                }
                files.push(f);
            }
            if files.len() < 2 {
                return Err(FleetError::Empty(path));
            }
            if phases == 0 {
                phases = files.len() - 1;
            } else if files.len() - 1 != phases {
                return Err(FleetError::Uneven {
                    dir: path,
                    found: files.len(),
                    expected: phases + 1,
                });
            }
            let mut texts = Vec::new();
            for f in &files {
                let text = fs::read_to_string(f).map_err(|source| FleetError::Read {
                    path: f.clone(),
                    source,
                })?;
                texts.push((f.clone(), text));
            }
            templates.push(Template::from_captures(&texts)?);
        }
        if templates.is_empty() {
            return Err(FleetError::Empty(dir.to_path_buf()));
        }
        Ok(Fleet { templates, phases })
    }

    pub fn template(&self, n: u64) -> &Template {
        &self.templates[(n % self.templates.len() as u64) as usize]
    }

    /// (phase, loops) of node n at scrape slot `slot` after the origin.
    pub fn phase(&self, n: u64, slot: u64) -> (usize, u64) {
        let p = slot + n % self.phases as u64;
        ((p % self.phases as u64) as usize, p / self.phases as u64)
    }

    /// Node n's value of series s (of its template) at scrape slot `slot`.
    pub fn value(&self, n: u64, s: usize, slot: u64) -> Option<f64> {
        let t = self.template(n);
        let (j, loops) = self.phase(n, slot);
        t.values[j][s].map(|v| v + loops as f64 * t.increase[s])
    }
}

/// A family's name in tessera's exposition today, for one in a capture taken before a rename.
fn current_name(name: String) -> String {
    match name.as_str() {
        // A gauge, which promtool refuses to name with a counter's suffix.
        "gpu_mig_slices_total" => "gpu_mig_slices".to_string(),
        _ => name,
    }
}

impl Template {
    /// `captures[j]` is the node's exposition at scrape j; the last is a loop after the first.
    /// Series that tessera has renamed since a capture was taken take their current names.
    pub fn from_captures(captures: &[(PathBuf, String)]) -> Result<Template, FleetError> {
        let mut index: HashMap<(String, Labels), usize> = HashMap::new();
        let mut series: Vec<SeriesDef> = Vec::new();
        let mut samples: Vec<Vec<(usize, f64)>> = Vec::new();
        let mut counters: HashSet<String> = HashSet::new();
        for (path, text) in captures {
            let mut at = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if let Some(rest) = line.strip_prefix("# TYPE ") {
                    let mut words = rest.split_whitespace();
                    if let (Some(family), Some(kind)) = (words.next(), words.next()) {
                        if matches!(kind, "counter" | "histogram" | "summary") {
                            counters.insert(family.to_string());
                        }
                    }
                    continue;
                }
                if line.starts_with('#') || line.trim().is_empty() {
                    continue;
                }
                let (name, labels, value) =
                    parse_sample(line).ok_or_else(|| FleetError::Parse {
                        path: path.clone(),
                        line: i + 1,
                    })?;
                let name = current_name(name);
                let node_label = labels.iter().position(|(k, _)| k == "node");
                let mut labels = labels;
                if let Some(i) = node_label {
                    labels[i].1.clear();
                }
                let key = (name.clone(), labels.clone());
                let s = *index.entry(key).or_insert_with(|| {
                    series.push(SeriesDef {
                        name,
                        labels,
                        node_label,
                        scrape_meta: false,
                    });
                    series.len() - 1
                });
                at.push((s, value));
            }
            samples.push(at);
        }
        let is_counter = |name: &str| {
            counters.contains(name)
                || ["_total", "_bucket", "_count", "_sum"]
                    .iter()
                    .any(|suffix| {
                        name.strip_suffix(suffix)
                            .is_some_and(|family| counters.contains(family))
                    })
        };
        let phases = captures.len() - 1;
        let mut values = vec![vec![None; series.len()]; captures.len()];
        for (j, at) in samples.iter().enumerate() {
            for &(s, v) in at {
                values[j][s] = Some(v);
            }
        }
        let increase = series
            .iter()
            .enumerate()
            .map(|(s, def)| match (values[0][s], values[phases][s]) {
                (Some(first), Some(last)) if is_counter(&def.name) && last >= first => last - first,
                _ => 0.0,
            })
            .collect();
        values.truncate(phases);
        let mut t = Template {
            series,
            values,
            increase,
        };
        t.add_scrape_meta();
        Ok(t)
    }

    fn add_scrape_meta(&mut self) {
        let counts: Vec<Option<f64>> = self
            .values
            .iter()
            .map(|phase| Some(phase.iter().filter(|v| v.is_some()).count() as f64))
            .collect();
        for (name, per_phase) in [
            ("up", vec![Some(1.0); self.values.len()]),
            ("scrape_samples_scraped", counts),
        ] {
            self.series.push(SeriesDef {
                name: name.to_string(),
                labels: Vec::new(),
                node_label: None,
                scrape_meta: true,
            });
            for (phase, v) in self.values.iter_mut().zip(per_phase) {
                phase.push(v);
            }
            self.increase.push(0.0);
        }
    }
}

/// Label pairs, values as the exposition escaped them.
pub type Labels = Vec<(String, String)>;

/// `name{a="x",b="y"} value [timestamp]` → (name, labels, value).
pub fn parse_sample(line: &str) -> Option<(String, Labels, f64)> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        let close;
        loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => {
                    close = i;
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        let (_, c) = chars.next()?;
                        match c {
                            '\\' => {
                                value.push('\\');
                                value.push(chars.next()?.1);
                            }
                            '"' => break,
                            c => value.push(c),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                c => key.push(c),
            }
        }
        rest = &inner[close + 1..];
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((name, labels, value))
}

#[cfg(test)]
#[path = "fleet_tests.rs"]
mod tests;
