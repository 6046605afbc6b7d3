//! `--metrics.dcgm-compat`: dcgm-exporter's names, types, units and labels, built from the same
//! snapshot as tessera's own families and encoded once per sample. Additive fields follow the
//! tenant rule of [`split`]; per-GPU fields appear once per GPU.

mod doc;
pub mod fields;
mod split;

pub use doc::markdown_reference;

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use self::fields::Field;
use self::split::{pair_free, split, Owner};
use super::EncodeOptions;
use crate::model::view::{ContainerUse, GpuView, MigView, ProcessView};
use crate::model::{ProcessKind, SharingMode, Snapshot};

type Label = (Cow<'static, str>, Arc<str>);
type LabelSet = Arc<[Label]>;

const MIB: f64 = 1024.0 * 1024.0;

/// dcgm-exporter's labels, in its order; `sharing_mode` is tessera's own.
pub mod label {
    pub const GPU: &str = "gpu";
    pub const UUID: &str = "UUID";
    pub const PCI_BUS_ID: &str = "pci_bus_id";
    pub const DEVICE: &str = "device";
    pub const MODEL_NAME: &str = "modelName";
    pub const GPU_I_PROFILE: &str = "GPU_I_PROFILE";
    pub const GPU_I_ID: &str = "GPU_I_ID";
    pub const HOSTNAME: &str = "Hostname";
    pub const DRIVER_VERSION: &str = "DCGM_FI_DRIVER_VERSION";
    pub const CONTAINER: &str = "container";
    pub const NAMESPACE: &str = "namespace";
    pub const POD: &str = "pod";
    pub const SHARING_MODE: &str = "sharing_mode";
}

/// The compat families of one sample, as OpenMetrics text ending in `# EOF`.
#[derive(Debug, Clone, Default)]
pub struct CompatExposition {
    pub text: String,
    pub series: usize,
    pub truncated_label_values: usize,
    /// Tenant series folded into the remainder by --metrics.max-series.
    pub dropped_series: usize,
}

#[derive(Debug)]
struct Out {
    series: Vec<Vec<(LabelSet, f64)>>,
    max_len: usize,
    truncated: usize,
    /// Per-tenant series on shared devices, the ones that grow with workloads, are capped by
    /// --metrics.max-series; a tenant past the cap is folded into the remainder, so the sum
    /// by GPU stays the device's value.
    max_tenant_series: usize,
    tenant_series: usize,
    dropped: usize,
}

impl Out {
    fn value(&mut self, v: &str) -> Arc<str> {
        if v.len() <= self.max_len {
            return Arc::from(v);
        }
        let mut end = self.max_len;
        while !v.is_char_boundary(end) {
            end -= 1;
        }
        self.truncated += 1;
        Arc::from(&v[..end])
    }

    fn push(&mut self, f: &Field, labels: &LabelSet, value: f64) {
        if !value.is_finite() {
            return;
        }
        if let Some(s) = self.series.get_mut(f.index) {
            s.push((labels.clone(), value));
        }
    }
}

/// Whose pod labels a series carries.
#[derive(Clone, Copy)]
enum Pod<'a> {
    Nobody,
    Container(&'a ContainerUse),
    /// One pod holds the device through several containers.
    NoContainer(&'a ContainerUse),
}

/// The labels every series of a device shares, up to (not including) the pod labels.
fn device_labels(
    out: &mut Out,
    node: &str,
    driver: &str,
    g: &GpuView,
    mig: Option<&MigView>,
) -> Vec<Label> {
    let s = &g.sample;
    let mut l: Vec<Label> = vec![
        (label::GPU.into(), Arc::from(g.index.to_string())),
        (label::UUID.into(), out.value(&g.uuid)),
        (label::PCI_BUS_ID.into(), out.value(&s.pci_bus_id)),
        // dcgm-exporter names the device by the GPU's index, not its minor number.
        (
            label::DEVICE.into(),
            Arc::from(format!("nvidia{}", g.index)),
        ),
        (label::MODEL_NAME.into(), out.value(&s.model)),
    ];
    if let Some(m) = mig {
        l.push((label::GPU_I_PROFILE.into(), out.value(&m.profile)));
        l.push((
            label::GPU_I_ID.into(),
            Arc::from(m.sample.gpu_instance_id.to_string()),
        ));
    }
    l.push((label::HOSTNAME.into(), out.value(node)));
    l.push((label::DRIVER_VERSION.into(), out.value(driver)));
    l
}

fn with_pod(out: &mut Out, base: &[Label], pod: Pod<'_>, mode: SharingMode) -> LabelSet {
    let (container, namespace, name) = match pod {
        Pod::Nobody => ("", "", ""),
        Pod::Container(c) => (
            c.pod.container.as_str(),
            c.pod.namespace.as_str(),
            c.pod.pod.as_str(),
        ),
        Pod::NoContainer(c) => ("", c.pod.namespace.as_str(), c.pod.pod.as_str()),
    };
    let mut l = base.to_vec();
    l.push((label::CONTAINER.into(), out.value(container)));
    l.push((label::NAMESPACE.into(), out.value(namespace)));
    l.push((label::POD.into(), out.value(name)));
    l.push((label::SHARING_MODE.into(), Arc::from(mode.as_label())));
    l.into()
}

/// Devices one holder has to itself: a dcgm-exporter user expects its pod labels there.
fn is_exclusive(mode: SharingMode) -> bool {
    matches!(
        mode,
        SharingMode::Exclusive | SharingMode::Mig | SharingMode::Vgpu
    )
}

/// The pod labels of per-GPU series: those of the one pod holding the GPU, else none.
fn sole_pod(containers: &[ContainerUse]) -> Pod<'_> {
    let pods: BTreeSet<(&str, &str)> = containers
        .iter()
        .map(|c| (c.pod.namespace.as_str(), c.pod.pod.as_str()))
        .collect();
    match (pods.len(), containers) {
        (1, [only]) => Pod::Container(only),
        (1, [first, ..]) => Pod::NoContainer(first),
        _ => Pod::Nobody,
    }
}

/// One device (a whole GPU or a MIG instance) and its holders, for the additive fields; the
/// label sets are built once per device and shared by every field's series.
struct Device<'a> {
    holders: Vec<&'a ContainerUse>,
    holder_labels: Vec<LabelSet>,
    remainder: LabelSet,
    exclusive: Option<usize>,
    mig: bool,
    /// Whether the tenants' compute figures are published here ([`compute_measured`]).
    compute: bool,
}

/// Whether a shared device's tenants get compute series: only while every process that may
/// run kernels on it carries the CUDA probe (at least one runs) and every holder has a
/// figure. A probe measures busy and idle alike, so whether a pod's series exists does not
/// depend on what it reads. Figures found by elimination do: a holder that runs nothing reads
/// 0 only while it is idle, the one active process gets the device only while its co-tenants
/// are idle, and both are withheld as soon as the others run too. Published, such figures
/// make every `avg_over_time` of a pod's series read low (a pod busy 75 % of the time reading
/// 0) or high, so on the compat surface they stay in the remainder; tessera's own
/// `gpu_container_sm_utilization_ratio` still carries them. A device with nothing running
/// gives no evidence either way: withheld too.
fn compute_measured<'p>(
    processes: impl Iterator<Item = &'p ProcessView>,
    holders: &[&ContainerUse],
) -> bool {
    let mut running = false;
    for p in processes {
        if p.sample.kind == Some(ProcessKind::MpsServer) {
            continue;
        }
        if p.probe_busy_seconds.is_none() {
            return false;
        }
        running = true;
    }
    running && holders.iter().all(|c| c.sm_utilization.is_some())
}

impl<'a> Device<'a> {
    fn new(
        out: &mut Out,
        base: &[Label],
        mode: SharingMode,
        holders: Vec<&'a ContainerUse>,
        mig: bool,
        measured: bool,
    ) -> Self {
        let holder_labels = holders
            .iter()
            .map(|c| with_pod(out, base, Pod::Container(c), mode))
            .collect();
        let exclusive = (is_exclusive(mode) && holders.len() == 1).then_some(0);
        Device {
            compute: exclusive.is_some() || measured,
            exclusive,
            remainder: with_pod(out, base, Pod::Nobody, mode),
            holders,
            holder_labels,
            mig,
        }
    }

    fn emit(
        &self,
        out: &mut Out,
        f: &Field,
        device: Option<f64>,
        tenant: impl Fn(&ContainerUse) -> Option<f64>,
    ) -> Option<Vec<(Owner, f64)>> {
        let device = device?;
        let figures: Vec<Option<f64>> = self
            .holders
            .iter()
            .map(|c| {
                let v = tenant(c)?;
                if self.exclusive.is_none() {
                    if out.tenant_series >= out.max_tenant_series {
                        out.dropped += 1;
                        return None;
                    }
                    out.tenant_series += 1;
                }
                Some(v)
            })
            .collect();
        let series = split(device, self.exclusive, &figures);
        self.push_all(out, f, &series);
        Some(series)
    }

    fn push_all(&self, out: &mut Out, f: &Field, series: &[(Owner, f64)]) {
        for &(owner, v) in series {
            let labels = match owner {
                Owner::Holder(i) => match self.holder_labels.get(i) {
                    Some(l) => l,
                    None => continue,
                },
                Owner::Remainder => &self.remainder,
            };
            out.push(f, labels, v);
        }
    }

    /// FB_FREE beside the FB_USED series `used`, paired by [`pair_free`]; a tenant past
    /// --metrics.max-series has its part folded into the remainder, as for any field.
    fn emit_free(&self, out: &mut Out, used: &[(Owner, f64)], free: f64) {
        let mut series = pair_free(used, free);
        if self.exclusive.is_none() {
            let mut folded = 0.0;
            series.retain(|&(owner, v)| {
                if owner == Owner::Remainder {
                    return true;
                }
                if out.tenant_series >= out.max_tenant_series {
                    out.dropped += 1;
                    folded += v;
                    return false;
                }
                out.tenant_series += 1;
                true
            });
            for (owner, v) in &mut series {
                if *owner == Owner::Remainder {
                    *v += folded;
                }
            }
        }
        self.push_all(out, &fields::FB_FREE, &series);
    }
}

fn additive(out: &mut Out, d: &Device<'_>, s: Additive) {
    use fields::*;
    let none = |_: &ContainerUse| None;
    let share = |c: &ContainerUse| c.sm_utilization.filter(|_| d.compute);
    d.emit(out, &GR_ENGINE_ACTIVE, s.gr_engine, share);
    d.emit(out, &GPU_UTIL, s.util.map(|u| u * 100.0), |c| {
        share(c).map(|u| u * 100.0)
    });
    d.emit(out, &MEM_COPY_UTIL, s.mem_util.map(|u| u * 100.0), none);
    d.emit(out, &ENC_UTIL, s.enc_util.map(|u| u * 100.0), none);
    d.emit(out, &DEC_UTIL, s.dec_util.map(|u| u * 100.0), none);
    let used = d.emit(out, &FB_USED, s.memory.map(|m| m.used as f64 / MIB), |c| {
        Some(c.memory_used_bytes as f64 / MIB)
    });
    if let (Some(used), Some(m)) = (used, s.memory) {
        let free = m.total.saturating_sub(m.used).saturating_sub(m.reserved) as f64 / MIB;
        d.emit_free(out, &used, free);
    }
    let g = s.gpm;
    // On a MIG instance tessera's container figure is the instance's GPM SM activity.
    let sm_share = |c: &ContainerUse| if d.mig { share(c) } else { None };
    d.emit(out, &SM_ACTIVE, g.map(|g| g.sm_activity), sm_share);
    d.emit(out, &SM_OCCUPANCY, g.map(|g| g.sm_occupancy), none);
    d.emit(out, &PIPE_TENSOR_ACTIVE, g.map(|g| g.tensor_activity), none);
    d.emit(out, &DRAM_ACTIVE, g.map(|g| g.dram_bandwidth), none);
    d.emit(
        out,
        &PIPE_FP64_ACTIVE,
        g.and_then(|g| g.fp64_activity),
        none,
    );
    d.emit(
        out,
        &PIPE_FP32_ACTIVE,
        g.and_then(|g| g.fp32_activity),
        none,
    );
    d.emit(
        out,
        &PIPE_FP16_ACTIVE,
        g.and_then(|g| g.fp16_activity),
        none,
    );
    d.emit(
        out,
        &PCIE_TX_BYTES,
        g.and_then(|g| g.pcie_tx_bytes_per_second),
        none,
    );
    d.emit(
        out,
        &PCIE_RX_BYTES,
        g.and_then(|g| g.pcie_rx_bytes_per_second),
        none,
    );
    d.emit(
        out,
        &NVLINK_TX_BYTES,
        g.and_then(|g| g.nvlink_tx_bytes_per_second),
        none,
    );
    d.emit(
        out,
        &NVLINK_RX_BYTES,
        g.and_then(|g| g.nvlink_rx_bytes_per_second),
        none,
    );
}

/// The device values of the additive fields.
#[derive(Clone, Copy)]
struct Additive {
    gr_engine: Option<f64>,
    util: Option<f64>,
    mem_util: Option<f64>,
    enc_util: Option<f64>,
    dec_util: Option<f64>,
    /// The device's memory: FB_USED is split, FB_FREE paired with it.
    memory: Option<crate::model::MemoryBytes>,
    gpm: Option<crate::model::GpmActivity>,
}

fn per_gpu(out: &mut Out, node: &str, driver: &str, g: &GpuView) {
    use fields::*;
    let s = &g.sample;
    let base = device_labels(out, node, driver, g, None);
    let labels = with_pod(out, &base, sole_pod(&g.containers), g.sharing_mode);
    // The last XID stays visible on a lost GPU: XID 79 is how it got lost. 0 (dcgm-exporter's
    // "none") only while the events are watched; unwatched, nothing could have been seen.
    let last_xid = match (s.last_xid, s.xid_watched) {
        (Some(x), _) => Some(f64::from(x)),
        (None, true) => Some(0.0),
        (None, false) => None,
    };
    if let Some(x) = last_xid {
        out.push(&XID_ERRORS, &labels, x);
    }
    if !s.up {
        return;
    }
    let mhz = |hz: Option<f64>| hz.map(|h| (h / 1e6).round());
    let mem = s.memory;
    let values = [
        (&SM_CLOCK, mhz(s.sm_clock_hertz)),
        (&MEM_CLOCK, mhz(s.memory_clock_hertz)),
        (&MEMORY_TEMP, s.memory_temperature_celsius),
        (&GPU_TEMP, s.temperature_celsius),
        (&POWER_USAGE, s.power_watts),
        (&TOTAL_ENERGY, s.energy_joules.map(|j| (j * 1000.0).round())),
        (&PCIE_REPLAY, s.pcie_replays.map(|n| n as f64)),
        (&FB_RESERVED, mem.map(|m| m.reserved as f64 / MIB)),
        (
            &UNCORRECTABLE_REMAPPED_ROWS,
            s.remapped_rows.map(|r| r.uncorrectable as f64),
        ),
        (
            &CORRECTABLE_REMAPPED_ROWS,
            s.remapped_rows.map(|r| r.correctable as f64),
        ),
        (
            &ROW_REMAP_FAILURE,
            s.remapped_rows.map(|r| if r.failed { 1.0 } else { 0.0 }),
        ),
    ];
    for (f, v) in values {
        if let Some(v) = v {
            out.push(f, &labels, v);
        }
    }
}

fn gpu_devices(out: &mut Out, node: &str, driver: &str, g: &GpuView) {
    let s = &g.sample;
    if !s.up {
        return;
    }
    if s.mig_enabled == Some(true) {
        for m in &g.mig {
            mig_device(out, node, driver, g, m);
        }
        outside_instances(out, node, driver, g);
        return;
    }
    let base = device_labels(out, node, driver, g, None);
    let holders: Vec<&ContainerUse> = g
        .containers
        .iter()
        .filter(|c| c.mig_uuid.is_none())
        .collect();
    let measured = compute_measured(
        g.processes.iter().filter(|p| p.sample.mig_uuid.is_none()),
        &holders,
    );
    let d = Device::new(out, &base, g.sharing_mode, holders, false, measured);
    additive(
        out,
        &d,
        Additive {
            gr_engine: s.utilization,
            util: s.utilization,
            mem_util: s.memory_utilization,
            enc_util: s.encoder_utilization,
            dec_util: s.decoder_utilization,
            memory: s.memory,
            gpm: s.gpm,
        },
    );
}

/// A MIG GPU's memory outside every instance (slices no instance holds, and what the driver
/// keeps outside them): one row for `FB_USED` and one for `FB_FREE` with the GPU's labels and
/// no pod, so `sum by (UUID)` of either is the GPU's figure and FREE + USED + RESERVED its total.
/// Absent when the GPU's own memory is unknown.
fn outside_instances(out: &mut Out, node: &str, driver: &str, g: &GpuView) {
    let Some(gpu) = g.sample.memory else {
        return;
    };
    let free =
        |m: crate::model::MemoryBytes| m.total.saturating_sub(m.used).saturating_sub(m.reserved);
    let (mut used, mut free_inside) = (0u64, 0u64);
    for m in g.mig.iter().filter_map(|m| m.sample.memory) {
        used += m.used;
        free_inside += free(m);
    }
    let base = device_labels(out, node, driver, g, None);
    let labels = with_pod(out, &base, Pod::Nobody, g.sharing_mode);
    out.push(
        &fields::FB_USED,
        &labels,
        gpu.used.saturating_sub(used) as f64 / MIB,
    );
    out.push(
        &fields::FB_FREE,
        &labels,
        free(gpu).saturating_sub(free_inside) as f64 / MIB,
    );
}

fn mig_device(out: &mut Out, node: &str, driver: &str, g: &GpuView, m: &MigView) {
    let base = device_labels(out, node, driver, g, Some(m));
    let holders: Vec<&ContainerUse> = g
        .containers
        .iter()
        .filter(|c| c.mig_uuid.as_deref() == Some(m.uuid.as_str()))
        .collect();
    let measured = compute_measured(
        g.processes
            .iter()
            .filter(|p| p.sample.mig_uuid.as_deref() == Some(m.uuid.as_str())),
        &holders,
    );
    let d = Device::new(out, &base, m.sharing_mode, holders, true, measured);
    let gpm = m.sample.gpm.map(|a| crate::model::GpmActivity {
        // Bus traffic is the GPU's, not the instance's.
        pcie_tx_bytes_per_second: None,
        pcie_rx_bytes_per_second: None,
        nvlink_tx_bytes_per_second: None,
        nvlink_rx_bytes_per_second: None,
        ..a
    });
    additive(
        out,
        &d,
        Additive {
            // The quantity tessera's per-container figures on an instance divide (its GPM SM
            // activity), as on a whole GPU: so an exclusive holder's value is its own
            // `gpu_container_sm_utilization_ratio` and the split's remainder is time no tenant
            // was given, not the gap between two different counters.
            gr_engine: gpm.map(|a| a.sm_activity),
            util: None,
            mem_util: None,
            enc_util: None,
            dec_util: None,
            memory: m.sample.memory,
            gpm,
        },
    );
}

impl Collector for Out {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (f, series) in fields::ALL.iter().zip(&self.series) {
            if series.is_empty() {
                continue;
            }
            // Gauges all: an OpenMetrics counter must end in `_total`, and dcgm-exporter's two
            // counters (energy, PCIe replays) are queried by their bare names.
            let mut family = encoder.encode_descriptor(f.name, f.help, None, MetricType::Gauge)?;
            for (labels, value) in series {
                let labels: &[Label] = labels;
                let metric = family.encode_family(&labels)?;
                ConstGauge::new(*value).encode(metric)?;
            }
        }
        Ok(())
    }
}

pub fn encode(snap: &Snapshot, opts: &EncodeOptions) -> CompatExposition {
    let mut out = Out {
        series: std::iter::repeat_with(Vec::new)
            .take(fields::ALL.len())
            .collect(),
        max_len: opts.max_label_value_len,
        truncated: 0,
        max_tenant_series: opts.max_series,
        tenant_series: 0,
        dropped: 0,
    };
    for g in &snap.gpus {
        per_gpu(&mut out, &snap.node, &snap.driver_version, g);
        gpu_devices(&mut out, &snap.node, &snap.driver_version, g);
    }
    let series = out.series.iter().map(Vec::len).sum();
    let truncated_label_values = out.truncated;
    let dropped_series = out.dropped;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(out));
    let mut text = String::with_capacity(series * 360);
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &registry) {
        tracing::error!(error = %e, "encoding the dcgm-compat metrics failed");
    }
    CompatExposition {
        text,
        series,
        truncated_label_values,
        dropped_series,
    }
}

#[cfg(test)]
mod tests;
