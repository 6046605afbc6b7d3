//! The profile queries, taken from the shipped rule file so the CLI and the dashboard compute
//! the same figures: each `tessera.advisor.profile` rule's expression, with its `[7d]` replaced
//! by the requested window. They read the 5-minute summaries that the `tessera.advisor.summary`
//! group records, so the window can be anything those cover.

use serde::Deserialize;

/// alerts/tessera-advisor.yaml, as shipped.
pub const RULE_FILE: &str = include_str!("../../../../alerts/tessera-advisor.yaml");
const PROFILE_GROUP: &str = "tessera.advisor.profile";
const SUMMARY_GROUP: &str = "tessera.advisor.summary";
/// The window written in the rule file.
const RULE_WINDOW: &str = "[7d]";

/// Which field of a profile a query fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    GpusHeld,
    IdleGpus,
    UndecidedGpus,
    MemPeak,
    MemP95,
    SmP50,
    SmP95,
    Coverage,
    Billed,
    Accountable,
    Replicas,
    Summaries,
}

/// Record name in the profile group → field. The order is the order of the progress steps.
pub const FIELDS: &[(&str, Field, &str)] = &[
    (
        "namespace_workload_sharing_mode:gpu_allocations:count7d",
        Field::Summaries,
        "history and GPU models",
    ),
    (
        "namespace_workload_sharing_mode:gpu_allocations:avg7d",
        Field::Replicas,
        "replicas",
    ),
    (
        "namespace_workload_sharing_mode:gpu_allocated_seconds:avg7d",
        Field::GpusHeld,
        "GPUs held",
    ),
    (
        "namespace_workload_sharing_mode:gpu_idle_seconds:avg7d",
        Field::IdleGpus,
        "idle GPU-time",
    ),
    (
        "namespace_workload_sharing_mode:gpu_activity_unknown_seconds:avg7d",
        Field::UndecidedGpus,
        "undecided GPU-time",
    ),
    (
        "namespace_workload_sharing_mode:gpu_memory_used_bytes:max7d",
        Field::MemPeak,
        "peak memory",
    ),
    (
        "namespace_workload_sharing_mode:gpu_memory_used_bytes:p95_7d",
        Field::MemP95,
        "p95 memory",
    ),
    (
        "namespace_workload_sharing_mode:gpu_sm_demand:p50_7d",
        Field::SmP50,
        "median SM demand",
    ),
    (
        "namespace_workload_sharing_mode:gpu_sm_demand:p95_7d",
        Field::SmP95,
        "p95 SM demand",
    ),
    (
        "namespace_workload_sharing_mode:gpu_sm_demand_coverage:avg7d",
        Field::Coverage,
        "compute coverage",
    ),
    (
        "namespace_workload_sharing_mode:gpu_attributed_seconds:avg7d",
        Field::Billed,
        "billed GPU-time",
    ),
    (
        "namespace_workload_sharing_mode:gpu_accountable_seconds:avg7d",
        Field::Accountable,
        "accountable GPU-time",
    ),
];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RulesError {
    #[error("the built-in copy of alerts/tessera-advisor.yaml is unreadable: {0}")]
    File(String),
    #[error("the built-in rule file has no rule {0} with a {RULE_WINDOW} window")]
    Missing(String),
    #[error(
        "--window {0:?}: expected a Prometheus duration of at least 1h, such as 7d, 36h or 2w"
    )]
    Window(String),
}

#[derive(Deserialize)]
struct File {
    groups: Vec<Group>,
}

#[derive(Deserialize)]
struct Group {
    name: String,
    #[serde(default)]
    interval: Option<String>,
    rules: Vec<Rule>,
}

#[derive(Deserialize)]
struct Rule {
    #[serde(default)]
    record: Option<String>,
    expr: String,
}

/// One query to run: the field it fills, a label for the progress line, and PromQL.
#[derive(Debug, Clone)]
pub struct Query {
    pub field: Field,
    pub label: &'static str,
    pub expr: String,
}

/// The profile queries over `window` (already validated), and the summary interval in seconds.
pub fn profile_queries(window: &str) -> Result<(Vec<Query>, f64), RulesError> {
    let file: File =
        serde_yaml::from_str(RULE_FILE).map_err(|e| RulesError::File(e.to_string()))?;
    let group = |name: &str| {
        file.groups
            .iter()
            .find(|g| g.name == name)
            .ok_or_else(|| RulesError::Missing(format!("group {name}")))
    };
    let profile = group(PROFILE_GROUP)?;
    let interval = group(SUMMARY_GROUP)?
        .interval
        .as_deref()
        .and_then(duration_seconds)
        .ok_or_else(|| RulesError::Missing(format!("interval of {SUMMARY_GROUP}")))?;
    let queries = FIELDS
        .iter()
        .map(|&(record, field, label)| {
            let rule = profile
                .rules
                .iter()
                .find(|r| r.record.as_deref() == Some(record) && r.expr.contains(RULE_WINDOW))
                .ok_or_else(|| RulesError::Missing(record.into()))?;
            Ok(Query {
                field,
                label,
                expr: rule.expr.replace(RULE_WINDOW, &format!("[{window}]")),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((queries, interval))
}

/// Seconds in a Prometheus duration ("7d", "1d12h", "90m"); None when it is not one.
pub fn duration_seconds(s: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut digits = String::new();
    let mut chars = s.chars().peekable();
    if s.is_empty() {
        return None;
    }
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match (c, chars.peek()) {
            ('m', Some('s')) => {
                chars.next();
                0.001
            }
            ('s', _) => 1.0,
            ('m', _) => 60.0,
            ('h', _) => 3600.0,
            ('d', _) => 86_400.0,
            ('w', _) => 604_800.0,
            ('y', _) => 31_536_000.0,
            _ => return None,
        };
        let n: f64 = digits.parse().ok()?;
        digits.clear();
        total += n * unit;
    }
    (digits.is_empty() && total > 0.0).then_some(total)
}

/// The window in seconds, or why it is refused.
pub fn window_seconds(window: &str) -> Result<f64, RulesError> {
    match duration_seconds(window) {
        Some(s) if s >= 3600.0 => Ok(s),
        _ => Err(RulesError::Window(window.into())),
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
