//! docs/metrics.md's compat section: the tenant rule, then the field table.

use super::fields::{self, Rule};

/// docs/metrics.md's compat section, generated from [`fields`].
pub fn markdown_reference() -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "\n## dcgm-exporter compatibility (`--metrics.dcgm-compat`)\n\n\
         Served on /metrics beside tessera's families, and alone on `--web.dcgm-listen-address`. \
         Labels: `gpu`, `UUID`, `pci_bus_id`, `device` (`nvidia<gpu>`), `modelName`, \
         `GPU_I_PROFILE` and `GPU_I_ID` (MIG instances only), `Hostname` (the node name), \
         `DCGM_FI_DRIVER_VERSION`, `container`, `namespace`, `pod`, and tessera's `sharing_mode`. \
         Every family is exposed as a gauge, dcgm-exporter's counters (energy, PCIe replays, \
         remapped rows) included: tessera serves OpenMetrics only, where a counter must end in \
         `_total`, and these keep dcgm-exporter's exact names; `rate()` and `increase()` work on \
         them as before.\n\n\
         ### The tenant rule\n\n\
         | field kind | exclusive GPU (or vGPU) or MIG instance, one holder | shared device (time-slicing, MPS, fractional, several holders) | no holder |\n\
         |---|---|---|---|\n\
         | additive | one series with the holder's `container`/`namespace`/`pod` (as dcgm-exporter) | one series per tenant whose figure is published, plus one remainder series with empty pod labels = device − attributed; `sum by (UUID)` = device value in every sample; a tenant whose figure is withheld gets no series and its part stays in the remainder | one series with empty pod labels |\n\
         | per GPU | once per GPU, with the holder's pod labels | once per GPU: the pod labels of the one pod holding it, if only one does now, else empty | once per GPU, empty pod labels |\n\n\
         **Which tenant figures are published.** Memory (`DCGM_FI_DEV_FB_USED`): every holder's, \
         always. Compute (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`, `DCGM_FI_DEV_GPU_UTIL`, and \
         `DCGM_FI_PROF_SM_ACTIVE` on a MIG instance): every holder's \
         `gpu_container_sm_utilization_ratio`, but only while every process that may run kernels \
         on the device carries the CUDA probe and every holder has a figure; otherwise no holder \
         gets a compute series and the device's value is all remainder. A figure tessera found by \
         elimination (a holder running nothing reads 0, the one active process gets the device) \
         exists only in the samples where the others are idle, so publishing it would make a \
         pod's series exist depending on its value, and `avg_over_time` over it read 0 for a pod \
         busy most of the time. tessera's own families keep those figures.\n\n\
         **Never above the device.** Where the published tenant figures add up to more than the \
         device's value (MPS clients' busy times overlap; figures sampled apart), they are scaled \
         by device / sum, keeping their proportions, and the remainder is 0. \
         `gpu_container_sm_utilization_ratio` keeps the unscaled figure.\n\n\
         **Free memory pairs with used memory.** `DCGM_FI_DEV_FB_FREE` follows \
         `DCGM_FI_DEV_FB_USED`'s series: the holder's on an exclusive device, and on a shared one \
         each series (tenants and remainder) gets the device's free memory in proportion to its \
         used memory. `FB_USED / (FB_USED + FB_FREE)` on any series, OpenCost's memory-used \
         ratio per container, is then the device's occupancy, and `sum by (UUID)` of either is \
         the device's figure.\n\n\
         On a MIG GPU the additive fields are per MIG instance (`GPU_I_ID`, `GPU_I_PROFILE`), split \
         among the instance's holders by the same rule: there `sum by (UUID, GPU_I_ID)` is the \
         instance's value (ratios of different instances do not add up to the GPU's). Memory \
         outside every instance (slices no instance holds, and what the driver keeps outside \
         them) is one more `FB_USED` and `FB_FREE` row with the GPU's labels, no `GPU_I_ID` and \
         empty pod labels, so `sum by (UUID)` of either is the GPU's figure and FREE + USED + \
         `FB_RESERVED` its total. With `--collect.mig=false` a MIG GPU has its per-GPU fields and \
         that memory row (all of its memory) only. Per-GPU fields carry `container` only when \
         one container holds the GPU; one pod with several containers gets `namespace`/`pod` alone. \
         Per-tenant series count against \
         `--metrics.max-series`; a tenant past it is folded into the remainder (and counted in \
         `tessera_series_dropped`), so the sum by GPU holds.\n\n\
         | field | dcgm type | unit | rule | tessera's source |\n|---|---|---|---|---|\n",
    );
    for f in fields::ALL {
        let rule = match f.rule {
            Rule::Additive => "additive",
            Rule::PerGpu => "per GPU",
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {rule} | {} |",
            f.name, f.dcgm_type, f.unit, f.source
        );
    }
    out.push_str(
        "\nFields of dcgm-exporter's default set that tessera does not serve (absent, never 0):\n\n\
         | field | why |\n|---|---|\n",
    );
    for (name, why) in fields::ABSENT {
        let _ = writeln!(out, "| `{name}` | {why} |");
    }
    out
}
