//! The exposition's flags: how much it carries, its bounds and the dcgm-exporter names.

use super::{Detail, EncodeOptions};
use crate::options::Resolver;

#[derive(Debug, Default, clap::Args)]
pub struct MetricsArgs {
    /// Longest label value kept; longer ones are cut and counted [default: 256].
    #[arg(
        long = "metrics.max-label-value-length",
        env = "TESSERA_METRICS_MAX_LABEL_VALUE_LENGTH"
    )]
    pub max_label_value_len: Option<String>,
    /// Most per-container and per-process series per scrape; the rest are dropped and counted [default: 20000].
    #[arg(long = "metrics.max-series", env = "TESSERA_METRICS_MAX_SERIES")]
    pub max_series: Option<String>,
    /// `default`: what tessera's alerts, rules, dashboards and advisor read, and GPU health; `full`: also per-process families, occupancy, DRAM bandwidth, energy, encoder/decoder, row-remap counts, withheld-share gauges and informational clock reasons (marked full in docs/metrics.md; Helm `metricsDetail`) [default: default].
    #[arg(long = "metrics.detail", env = "TESSERA_METRICS_DETAIL")]
    pub metrics_detail: Option<String>,
    /// Also serve dcgm-exporter's families (DCGM_FI_*, its labels and units), split per tenant on shared GPUs (docs/metrics.md) [default: false].
    #[arg(long = "metrics.dcgm-compat", env = "TESSERA_METRICS_DCGM_COMPAT", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_dcgm_compat")]
    pub dcgm_compat: Option<String>,
    #[arg(
        long = "no-metrics.dcgm-compat",
        hide = true,
        overrides_with = "dcgm_compat"
    )]
    pub no_dcgm_compat: bool,
}

/// The exposition's resolved options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsOptions {
    pub max_label_value_len: usize,
    pub max_series: usize,
    pub detail: Detail,
    pub dcgm_compat: bool,
}

impl MetricsOptions {
    /// What the encoder runs with: these options and the build's own (its version).
    pub fn encode(&self) -> EncodeOptions {
        EncodeOptions {
            max_label_value_len: self.max_label_value_len,
            max_series: self.max_series,
            dcgm_compat: self.dcgm_compat,
            detail: self.detail,
            ..EncodeOptions::default()
        }
    }
}

impl MetricsArgs {
    pub fn resolve(&self, r: &mut Resolver) -> MetricsOptions {
        MetricsOptions {
            max_label_value_len: self.max_label_value_len(r),
            max_series: self.max_series(r),
            detail: self.detail(r),
            dcgm_compat: self.dcgm_compat(r),
        }
    }

    fn max_label_value_len(&self, r: &mut Resolver) -> usize {
        r.get(
            "metrics.max-label-value-length",
            &self.max_label_value_len,
            256,
            |s| match s.trim().parse::<usize>() {
                Ok(n) if (16..=65536).contains(&n) => Ok(n),
                _ => Err("expected a whole number from 16 to 65536".into()),
            },
        )
    }

    fn max_series(&self, r: &mut Resolver) -> usize {
        r.get(
            "metrics.max-series",
            &self.max_series,
            20_000,
            |s| match s.trim().parse::<usize>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err("expected a whole number of at least 1".into()),
            },
        )
    }

    fn detail(&self, r: &mut Resolver) -> Detail {
        r.get(
            "metrics.detail",
            &self.metrics_detail,
            Detail::Default,
            |s| match s.trim() {
                "default" => Ok(Detail::Default),
                "full" => Ok(Detail::Full),
                _ => Err("expected default or full".into()),
            },
        )
    }

    fn dcgm_compat(&self, r: &mut Resolver) -> bool {
        r.get_bool(
            "metrics.dcgm-compat",
            &self.dcgm_compat,
            self.no_dcgm_compat,
            false,
        )
    }
}
