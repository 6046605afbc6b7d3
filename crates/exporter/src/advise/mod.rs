//! `tessera advise`: which sharing strategy fits each workload, from the cluster's own history
//! in Prometheus. gpus.rs holds the MIG profile table, recommend.rs the rules (pure),
//! rules.rs the profile queries (taken from alerts/tessera-advisor.yaml), prom.rs the HTTP
//! client, report.rs the renderers. Rules and sources: docs/advisor.md.

pub mod gpus;
pub mod prom;
pub mod recommend;
pub mod report;
pub mod rules;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use prom::{PromError, Prometheus, Sample};
use recommend::{Policy, Profile, WorkloadKey};
use rules::{Field, RulesError};

const PRICE_RULE: &str = "cluster:gpu_hour_price:value";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Markdown,
    Html,
    Json,
}

/// Recommend a GPU sharing strategy per workload (release, MIG profile, MPS with limits,
/// time-slicing, keep), ranked by GPUs and money saved, from Prometheus history recorded by
/// alerts/tessera-advisor.yaml.
#[derive(Debug, Clone, clap::Args)]
pub struct AdviseArgs {
    /// Prometheus base URL, e.g. http://prometheus:9090.
    #[arg(long)]
    pub prometheus: String,
    /// History to judge by (a Prometheus duration, at least 1h).
    #[arg(long, default_value = "7d")]
    pub window: String,
    /// Report format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Price of one GPU-hour [default: the cluster:gpu_hour_price:value rule, if loaded].
    #[arg(long = "price-per-gpu-hour")]
    pub price_per_gpu_hour: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum AdviseError {
    #[error(transparent)]
    Rules(#[from] RulesError),
    #[error("--price-per-gpu-hour {0}: expected a positive number")]
    Price(f64),
    #[error(transparent)]
    Prometheus(#[from] PromError),
    #[error(
        "Prometheus at {0} has no advisor profiles over the window: load alerts/tessera-advisor.yaml \
         beside alerts/tessera-recording.yaml and give it at least one 5-minute evaluation"
    )]
    NoProfiles(String),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot write the report: {0}")]
    Output(std::io::Error),
}

impl AdviseError {
    /// 2 for a bad flag, 1 for everything else (as the exporter itself).
    pub fn exit_code(&self) -> u8 {
        match self {
            AdviseError::Price(_) | AdviseError::Rules(RulesError::Window(_)) => 2,
            _ => 1,
        }
    }
}

/// Runs `tessera advise` and writes the report to stdout.
pub fn main(args: &AdviseArgs) -> Result<(), AdviseError> {
    let window_s = rules::window_seconds(&args.window)?;
    if let Some(p) = args.price_per_gpu_hour {
        if !(p.is_finite() && p > 0.0) {
            return Err(AdviseError::Price(p));
        }
    }
    let (queries, summary_interval_s) = rules::profile_queries(&args.window)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AdviseError::Runtime)?;
    let prom = Prometheus::new(&args.prometheus)?;
    let progress = Progress::new(queries.len() + 1);
    let (profiles, price) = runtime.block_on(async {
        let mut by_key: BTreeMap<WorkloadKey, Profile> = BTreeMap::new();
        let mut models: BTreeMap<WorkloadKey, (f64, String)> = BTreeMap::new();
        for (i, q) in queries.iter().enumerate() {
            progress.step(i + 1, q.label);
            for s in prom.query(&q.expr).await? {
                let key = key_of(&s);
                if q.field == Field::Summaries {
                    let model = s.labels.get("model").cloned().unwrap_or_default();
                    let best = models.entry(key.clone()).or_insert((0.0, String::new()));
                    if s.value > best.0 {
                        *best = (s.value, model);
                    }
                }
                fill(
                    by_key.entry(key).or_default(),
                    q.field,
                    &s,
                    summary_interval_s,
                );
            }
        }
        progress.step(queries.len() + 1, "GPU-hour price");
        let price = match args.price_per_gpu_hour {
            Some(p) => Some((p, "--price-per-gpu-hour".to_owned())),
            None => prom
                .query(PRICE_RULE)
                .await?
                .first()
                .filter(|s| s.value.is_finite() && s.value > 0.0)
                .map(|s| (s.value, PRICE_RULE.to_owned())),
        };
        progress.done();
        for (key, (_, model)) in models {
            if let Some(p) = by_key.get_mut(&key) {
                p.model = Some(model);
            }
        }
        // A workload without replicas over the window is a leftover of another series.
        let profiles: Vec<Profile> = by_key
            .into_iter()
            .map(|(key, mut p)| {
                p.key = key;
                p
            })
            .filter(|p| p.history_s > 0.0)
            .collect();
        Ok::<_, AdviseError>((profiles, price))
    })?;
    if profiles.is_empty() {
        return Err(AdviseError::NoProfiles(prom.url().to_owned()));
    }
    let policy = Policy {
        window_s,
        price_per_gpu_hour: price.as_ref().map(|p| p.0),
    };
    let advice = recommend::advise_all(profiles, &policy);
    let meta = report::Meta {
        prometheus: prom.url().to_owned(),
        window: args.window.clone(),
        generated_at: rfc3339_now(),
        price_per_gpu_hour: price.as_ref().map(|p| p.0),
        price_source: price.map(|p| p.1),
    };
    let text = match args.format {
        Format::Table => report::table(&advice, &meta),
        Format::Markdown => report::markdown(&advice, &meta),
        Format::Html => report::html(&advice, &meta),
        Format::Json => report::json(&advice, &meta),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(AdviseError::Output)
}

fn key_of(s: &Sample) -> WorkloadKey {
    let get = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
    WorkloadKey {
        cluster: get("cluster"),
        namespace: get("namespace"),
        kind: get("workload_kind"),
        name: get("workload"),
        sharing_mode: get("sharing_mode"),
    }
}

fn fill(p: &mut Profile, field: Field, s: &Sample, summary_interval_s: f64) {
    let v = s.value;
    if !v.is_finite() {
        return;
    }
    match field {
        // One row per GPU model: a workload on two models has two.
        Field::Summaries => p.history_s = p.history_s.max(v * summary_interval_s),
        Field::Replicas => p.replicas += v,
        Field::GpusHeld => p.gpus_held = v,
        Field::IdleGpus => p.idle_gpus = v,
        Field::UndecidedGpus => p.undecided_gpus = v,
        Field::MemPeak => p.mem_peak_bytes = Some(v),
        Field::MemP95 => p.mem_p95_bytes = Some(v),
        Field::SmP50 => p.sm_p50 = Some(v),
        Field::SmP95 => p.sm_p95 = Some(v),
        Field::Coverage => p.compute_coverage = v,
        Field::Billed => p.billed_gpus = v,
        Field::Accountable => p.accountable_gpus = v,
    }
}

/// Progress on stderr: one rewritten line on a terminal, a plain line per step otherwise.
struct Progress {
    tty: bool,
    steps: usize,
}

impl Progress {
    fn new(steps: usize) -> Self {
        Self {
            tty: std::io::stderr().is_terminal(),
            steps,
        }
    }

    fn step(&self, i: usize, what: &str) {
        let mut err = std::io::stderr().lock();
        let _ = if self.tty {
            write!(
                err,
                "\r\x1b[2Kquerying Prometheus [{i}/{}] {what}…",
                self.steps
            )
        } else {
            writeln!(err, "tessera advise: [{i}/{}] {what}", self.steps)
        };
        let _ = err.flush();
    }

    fn done(&self) {
        if self.tty {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

fn rfc3339_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

/// UTC date and time of a Unix timestamp (days to civil date: H. Hinnant's algorithm).
fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests;
