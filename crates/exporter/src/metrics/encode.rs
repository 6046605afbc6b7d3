//! Snapshot → OpenMetrics text, through prometheus-client's `Collector` so escaping and format
//! are the Prometheus org's. Series of a vanished GPU or process vanish with the snapshot.

use std::borrow::Cow;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

mod billing;
mod families;

use super::table::{self, label, Family, Kind};
use crate::model::Snapshot;
use billing::billing_families;
use families::{container_families, gpu_families, mig_families, process_families};

#[derive(Debug, Clone)]
pub struct EncodeOptions {
    /// Longer label values are cut (at a char boundary) and counted.
    pub max_label_value_len: usize,
    /// Per-container and per-process series beyond this many are dropped and counted; GPU,
    /// MIG and self series are always kept.
    pub max_series: usize,
    pub version: &'static str,
    pub revision: &'static str,
    /// Also encode dcgm-exporter's families (`--metrics.dcgm-compat`).
    pub dcgm_compat: bool,
    /// `--metrics.detail`: the default leaves out [`table::FULL_DETAIL_ONLY`].
    pub detail: table::Detail,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            max_label_value_len: 256,
            max_series: 20_000,
            version: env!("CARGO_PKG_VERSION"),
            revision: option_env!("TESSERA_REVISION").unwrap_or("unknown"),
            dcgm_compat: false,
            detail: table::Detail::Default,
        }
    }
}

/// Encoded metrics, ready to serve.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    pub text: String,
    pub series: usize,
    pub truncated_label_values: usize,
    pub dropped_series: usize,
    /// The dcgm-exporter-compatible families alone (they are in `text` too), with compat on.
    pub dcgm: Option<super::dcgm::CompatExposition>,
}

type Value = Arc<str>;
type Label = (Cow<'static, str>, Value);
type Labels = Vec<Label>;

/// A label set its series share (a GPU's, a process's), built and capped once: a series holds
/// a pointer to it and at most one label of its own, not a copy of every label.
#[derive(Debug)]
struct Shared {
    labels: Arc<[Label]>,
    /// Values it had cut, counted again for each series that carries it.
    truncated: usize,
}

#[derive(Debug)]
struct Series {
    shared: Arc<[Label]>,
    own: Option<Label>,
    value: f64,
}

#[derive(Debug)]
struct Families {
    series: Vec<Vec<Series>>,
    count: usize,
    truncated: usize,
    dropped: usize,
    max_len: usize,
    max_series: usize,
    /// By [`Family::index`]: whether this exposition's detail serves the family.
    served: Vec<bool>,
    /// Which clock-event reasons to encode (every one at full detail).
    clock_reasons: u64,
    /// Informational label values (corrected ECC errors, the memory clock) are served.
    informational: bool,
}

/// Per-container and per-process families: the ones whose cardinality grows with workloads.
fn is_detail(f: &Family) -> bool {
    f.name.starts_with("gpu_container_")
        || f.name.starts_with("gpu_process_")
        || f.name.starts_with("gpu_pod_")
}

impl Families {
    fn new(opts: &EncodeOptions) -> Self {
        Self {
            series: std::iter::repeat_with(Vec::new)
                .take(table::ALL.len())
                .collect(),
            count: 0,
            truncated: 0,
            dropped: 0,
            max_len: opts.max_label_value_len,
            max_series: opts.max_series,
            served: table::served(opts.detail),
            informational: opts.detail == table::Detail::Full,
            clock_reasons: match opts.detail {
                table::Detail::Default => crate::model::CLOCK_SLOWDOWN_REASONS,
                table::Detail::Full => u64::MAX,
            },
        }
    }

    /// Cuts `v` to the length cap (at a char boundary); whether it had to.
    fn cut(&self, v: &mut Value) -> bool {
        if v.len() <= self.max_len {
            return false;
        }
        let mut end = self.max_len;
        while !v.is_char_boundary(end) {
            end -= 1;
        }
        *v = Value::from(&v[..end]);
        true
    }

    fn share(&self, mut labels: Labels) -> Shared {
        let mut truncated = 0;
        for (_, v) in &mut labels {
            truncated += usize::from(self.cut(v));
        }
        Shared {
            labels: labels.into(),
            truncated,
        }
    }

    /// A series whose label set no other series shares.
    fn push(&mut self, f: &Family, labels: Labels, value: f64) {
        let shared = self.share(labels);
        self.push_shared(f, &shared, None, value);
    }

    fn push_shared(
        &mut self,
        f: &Family,
        shared: &Shared,
        own: Option<(&'static str, String)>,
        value: f64,
    ) {
        debug_assert!(
            shared
                .labels
                .iter()
                .map(|(k, _)| k.as_ref())
                .chain(own.as_ref().map(|(k, _)| *k))
                .zip(f.labels)
                .all(|(k, want)| k == *want),
            "labels of {} out of table order",
            f.name
        );
        if !self.served.get(f.index).copied().unwrap_or(false) {
            return;
        }
        if is_detail(f) && self.count >= self.max_series {
            self.dropped += 1;
            return;
        }
        let own = own.map(|(k, v)| {
            let mut v = Value::from(v);
            self.truncated += usize::from(self.cut(&mut v));
            (Cow::Borrowed(k), v)
        });
        self.truncated += shared.truncated;
        if let Some(s) = self.series.get_mut(f.index) {
            s.push(Series {
                shared: shared.labels.clone(),
                own,
                value,
            });
            self.count += 1;
        }
    }
}

fn self_families(out: &mut Families, snap: &Snapshot, opts: &EncodeOptions) {
    let node_value = Value::from(snap.node.as_str());
    let node = || (Cow::Borrowed(label::NODE), node_value.clone());
    out.push(
        &table::TESSERA_BUILD_INFO,
        vec![
            (label::VERSION.into(), opts.version.into()),
            (label::REVISION.into(), opts.revision.into()),
        ],
        1.0,
    );
    for c in &snap.collectors {
        let l = vec![node(), (label::COLLECTOR.into(), c.name.into())];
        out.push(
            &table::TESSERA_COLLECTOR_SUCCESS,
            l.clone(),
            if c.success { 1.0 } else { 0.0 },
        );
        out.push(&table::TESSERA_COLLECTOR_DURATION, l, c.duration_seconds);
    }
    let a = &snap.attribution;
    for (what, n) in [
        ("unresolved_device_id", a.unresolved_device_ids),
        (
            "process_without_pod_metadata",
            a.processes_without_pod_metadata,
        ),
    ] {
        out.push(
            &table::TESSERA_ATTRIBUTION_GAPS,
            vec![node(), (label::KIND.into(), what.into())],
            n as f64,
        );
    }
    for (call, n) in &snap.nvml_errors {
        out.push(
            &table::TESSERA_NVML_ERRORS,
            vec![node(), (label::CALL.into(), (*call).into())],
            *n as f64,
        );
    }
    for (call, cost) in &snap.nvml_call_costs {
        let labels = || vec![node(), (label::CALL.into(), (*call).into())];
        out.push(&table::TESSERA_NVML_CALLS, labels(), cost.calls as f64);
        out.push(
            &table::TESSERA_NVML_CALL_CPU,
            labels(),
            cost.cpu_ns as f64 / 1e9,
        );
        out.push(
            &table::TESSERA_NVML_CALL_TIME,
            labels(),
            cost.wall_ns as f64 / 1e9,
        );
    }
    for (worker, reason, n) in &snap.nvml_worker_restarts {
        out.push(
            &table::TESSERA_NVML_WORKER_RESTARTS,
            vec![
                node(),
                (label::WORKER.into(), worker.as_str().into()),
                (label::REASON.into(), (*reason).into()),
            ],
            *n as f64,
        );
    }
    out.push(
        &table::TESSERA_SAMPLE_DURATION,
        vec![node()],
        snap.sample_duration_seconds,
    );
    for (reason, n) in &snap.probe_reports_refused {
        out.push(
            &table::TESSERA_PROBE_REPORTS_REFUSED,
            vec![node(), (label::REASON.into(), (*reason).into())],
            *n as f64,
        );
    }
    out.push(
        &table::TESSERA_SAMPLES,
        vec![node()],
        snap.samples_total as f64,
    );
    out.push(
        &table::TESSERA_LAST_SAMPLE,
        vec![node()],
        snap.timestamp_seconds,
    );
}

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (f, series) in table::ALL.iter().zip(&self.series) {
            if series.is_empty() {
                continue;
            }
            let kind = match f.kind {
                Kind::Gauge => MetricType::Gauge,
                Kind::Counter => MetricType::Counter,
            };
            let mut family = encoder.encode_descriptor(f.name, f.help, None, kind)?;
            for s in series {
                let labels = (&*s.shared, s.own.as_slice());
                let metric = family.encode_family(&labels)?;
                match f.kind {
                    Kind::Gauge => ConstGauge::new(s.value).encode(metric)?,
                    Kind::Counter => ConstCounter::new(s.value).encode(metric)?,
                }
            }
        }
        Ok(())
    }
}

const EOF: &str = "# EOF\n";

pub fn encode(snap: &Snapshot, opts: &EncodeOptions) -> Exposition {
    let mut out = Families::new(opts);
    // GPU and MIG series first, so a cap on detail series never costs a GPU its figures.
    for g in &snap.gpus {
        gpu_families(&mut out, &snap.node, &snap.driver_version, g);
        for m in &g.mig {
            mig_families(&mut out, &snap.node, g, m);
        }
    }
    for g in &snap.gpus {
        for c in &g.containers {
            container_families(&mut out, &snap.node, g, c);
        }
        for p in &g.processes {
            process_families(&mut out, &snap.node, g, p);
        }
        billing_families(&mut out, &snap.node, g);
    }
    self_families(&mut out, snap, opts);
    // Before the drop and truncation counts, so they count the compat families' too.
    let dcgm = opts.dcgm_compat.then(|| super::dcgm::encode(snap, opts));
    if let Some(d) = &dcgm {
        out.dropped += d.dropped_series;
        out.truncated += d.truncated_label_values;
    }
    let node = || (Cow::Borrowed(label::NODE), Value::from(snap.node.as_str()));
    let (dropped, truncated) = (out.dropped as f64, out.truncated as f64);
    out.push(&table::TESSERA_SERIES_DROPPED, vec![node()], dropped);
    out.push(
        &table::TESSERA_LABEL_VALUES_TRUNCATED,
        vec![node()],
        truncated,
    );
    let series = out.series.iter().map(Vec::len).sum();
    let truncated_label_values = out.truncated;
    let dropped_series = out.dropped;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(out));
    // About 300 bytes a series were measured on a dense node; one allocation, no regrowth.
    let mut text = String::with_capacity(series * 320);
    // Writing into a String cannot fail; an encoder error would be a bug in a label set.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &registry) {
        tracing::error!(error = %e, "encoding metrics failed");
    }
    if let Some(d) = &dcgm {
        // One OpenMetrics document: the compat families go before the single `# EOF`.
        if text.ends_with(EOF) {
            text.truncate(text.len() - EOF.len());
        }
        text.push_str(&d.text);
    }
    Exposition {
        text,
        series,
        truncated_label_values,
        dropped_series,
        dcgm,
    }
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
