//! Exposition: a snapshot is encoded once, when it is made; scrapes copy the bytes.

pub mod dcgm;
mod encode;
mod options;
pub mod table;

pub use encode::{encode, EncodeOptions, Exposition};
pub use options::{MetricsArgs, MetricsOptions};
pub use table::Detail;

/// The Content-Type of what [`encode`] writes (prometheus-client writes OpenMetrics only).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// docs/metrics.md, generated from the metric table so it cannot drift.
pub fn markdown_reference() -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "# Metrics\n\nGenerated from `crates/exporter/src/metrics/table.rs` by `cargo run -- --print-metrics-doc`; \
         a test fails when this file is stale.\n\nCounters are exposed with the `_total` suffix.\n\n\
         Families marked *full* are served only with `--metrics.detail=full`: nothing tessera \
         ships reads them, and at fleet scale their series cost more than they tell \
         (docs/scale.md). The default also serves only the clock-event reasons that slow a GPU \
         down (`sw_power_cap`, `hw_slowdown`, `sw_thermal_slowdown`, `hw_thermal_slowdown`, \
         `hw_power_brake_slowdown`), only uncorrected ECC errors and only the SM clock; full detail \
         adds the informational ones (the other clock-event reasons, corrected ECC errors, the \
         memory clock).\n\n\
         Each HELP line is one sentence of at most 150 characters (a test holds it); where a \
         family's value needs more words, they are under [What each value means](#what-each-value-means).\n\n\
         `promtool check metrics` (run by scripts/test-prometheus.sh on a live exposition) \
         reports one warning tessera keeps: \"no help text\" for every counter's `_total` \
         sample. promtool reads the Prometheus 0.0.4 text format, in which a counter's HELP and \
         TYPE lines name its `_total` sample; tessera serves OpenMetrics, in which they name the \
         family (`# HELP gpu_energy_joules …`, then `gpu_energy_joules_total`), as the format \
         requires. Any other warning fails the test.\n\n\
         | family | type | labels | help |\n|---|---|---|---|\n",
    );
    let mut details = String::from(
        "\n## What each value means\n\nThe full meaning of the families whose HELP line \
         above is a summary.\n",
    );
    let full_only = table::served(table::Detail::Default);
    for f in table::ALL {
        let name = match f.kind {
            table::Kind::Counter => format!("{}_total", f.name),
            table::Kind::Gauge => f.name.to_owned(),
        };
        let kind = match f.kind {
            table::Kind::Counter => "counter",
            table::Kind::Gauge => "gauge",
        };
        let mut labels = f.labels.join(", ");
        if f.labels.contains(&table::label::WORKLOAD) {
            labels.push_str(", label_<pod label> (allow-listed)");
        }
        let detail = if full_only.get(f.index).copied().unwrap_or(true) {
            ""
        } else {
            " *full*"
        };
        let _ = writeln!(out, "| `{name}`{detail} | {kind} | {labels} | {} |", f.help);
        if !f.doc.is_empty() {
            let _ = write!(details, "\n### `{name}`\n\n{}\n", f.doc);
        }
    }
    out.push_str(&details);
    out.push_str(&dcgm::markdown_reference());
    out
}
