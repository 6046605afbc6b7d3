//! The series of one GPU, MIG instance, process and container: which families, which labels.

use std::borrow::Cow;

use super::{table, Families, Family, Labels, Value};
use crate::metrics::table::label;
use crate::model::sharing::SharingMode;
use crate::model::view::{ContainerUse, GpuView, MigView, ProcessView};
use crate::model::CLOCK_EVENT_REASONS;

/// The labels every series of a GPU starts with; `mode` is the GPU's sharing mode, or a MIG
/// instance's for the series of that instance.
fn gpu_labels(node: &str, g: &GpuView, mode: SharingMode) -> Labels {
    vec![
        (label::NODE.into(), node.into()),
        (label::GPU.into(), g.index.to_string().into()),
        (label::UUID.into(), g.uuid.as_str().into()),
        (label::SHARING_MODE.into(), mode.as_label().into()),
    ]
}

fn with<const N: usize>(mut base: Labels, extra: [(&'static str, String); N]) -> Labels {
    base.extend(
        extra
            .into_iter()
            .map(|(k, v)| (Cow::Borrowed(k), Value::from(v))),
    );
    base
}

pub(super) fn gpu_families(out: &mut Families, node: &str, driver: &str, g: &GpuView) {
    let base = gpu_labels(node, g, g.sharing_mode);
    let l = out.share(base.clone());
    let s = &g.sample;
    let mig_mode = match s.mig_enabled {
        Some(true) => "enabled",
        Some(false) => "disabled",
        None => "unknown",
    };
    out.push(
        &table::GPU_INFO,
        with(
            base,
            [
                (label::MODEL, s.model.clone()),
                (label::DRIVER_VERSION, driver.to_owned()),
                (label::PCI_BUS_ID, s.pci_bus_id.clone()),
                (label::MIG_MODE, mig_mode.to_owned()),
                (
                    label::COMPUTE_MODE,
                    s.compute_mode
                        .map(|m| m.as_label())
                        .unwrap_or("unknown")
                        .to_owned(),
                ),
            ],
        ),
        1.0,
    );
    out.push_shared(&table::GPU_UP, &l, None, if s.up { 1.0 } else { 0.0 });
    if let (false, Some(reason)) = (s.up, &s.down_reason) {
        out.push_shared(
            &table::GPU_DOWN_REASON,
            &l,
            Some((label::REASON, reason.clone())),
            1.0,
        );
    }
    out.push_shared(&table::GPU_SHARERS, &l, None, f64::from(g.sharers));
    // Energy given to nobody stays visible on a lost GPU, as what it was given stays.
    for (reason, joules) in &g.energy.remainder {
        out.push_shared(
            &table::GPU_ENERGY_UNATTRIBUTED,
            &l,
            Some((label::REASON, reason.as_label().to_owned())),
            *joules,
        );
    }
    out.push_shared(&table::GPU_REPLICAS, &l, None, f64::from(g.replicas));
    // XIDs stay visible on a lost GPU: XID 79 is how it got lost.
    for (xid, count) in &s.xid_counts {
        out.push_shared(
            &table::GPU_XID_ERRORS,
            &l,
            Some((label::XID, xid.to_string())),
            *count as f64,
        );
    }
    if !s.up {
        return;
    }
    let mut opt = |f: &Family, v: Option<f64>| {
        if let Some(v) = v {
            out.push_shared(f, &l, None, v);
        }
    };
    opt(&table::GPU_MEMORY_TOTAL, s.memory.map(|m| m.total as f64));
    opt(&table::GPU_MEMORY_USED, s.memory.map(|m| m.used as f64));
    opt(
        &table::GPU_MEMORY_RESERVED,
        s.memory.map(|m| m.reserved as f64),
    );
    opt(&table::GPU_UTILIZATION, s.utilization);
    opt(&table::GPU_MEMORY_UTILIZATION, s.memory_utilization);
    opt(&table::GPU_SM_ACTIVITY, s.gpm.map(|g| g.sm_activity));
    opt(&table::GPU_SM_OCCUPANCY, s.gpm.map(|g| g.sm_occupancy));
    opt(
        &table::GPU_TENSOR_ACTIVITY,
        s.gpm.map(|g| g.tensor_activity),
    );
    opt(&table::GPU_DRAM_BANDWIDTH, s.gpm.map(|g| g.dram_bandwidth));
    if let Some(st) = &s.gpm_status {
        out.push_shared(
            &table::GPU_GPM_AVAILABLE,
            &l,
            Some((label::REASON, st.reason.clone())),
            if st.available { 1.0 } else { 0.0 },
        );
    }
    let mut opt = |f: &Family, v: Option<f64>| {
        if let Some(v) = v {
            out.push_shared(f, &l, None, v);
        }
    };
    opt(&table::GPU_POWER, s.power_watts);
    opt(&table::GPU_POWER_LIMIT, s.power_limit_watts);
    opt(&table::GPU_POWER_FLOOR, g.energy.floor_watts);
    opt(&table::GPU_ENERGY, s.energy_joules);
    opt(&table::GPU_PCIE_REPLAYS, s.pcie_replays.map(|v| v as f64));
    opt(&table::GPU_ENCODER_UTILIZATION, s.encoder_utilization);
    opt(&table::GPU_DECODER_UTILIZATION, s.decoder_utilization);
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    opt(
        &table::GPU_ROW_REMAP_PENDING,
        s.remapped_rows.map(|r| flag(r.pending)),
    );
    opt(
        &table::GPU_ROW_REMAP_FAILURE,
        s.remapped_rows.map(|r| flag(r.failed)),
    );
    opt(&table::GPU_MIG_SLICES, s.mig_slices_total.map(f64::from));
    if s.mig_slices_total.is_some() {
        opt(
            &table::GPU_MIG_SLICES_USED,
            Some(f64::from(
                s.mig_instances.iter().map(|m| m.slices).sum::<u32>(),
            )),
        );
    }
    opt(&table::GPU_PROCESSES, Some(g.processes.len() as f64));
    if s.mig_enabled != Some(true) {
        opt(&table::GPU_UNATTRIBUTED, g.unattributed);
        opt(
            &table::GPU_ACTIVE_CONTAINERS,
            Some(f64::from(g.active_containers)),
        );
        out.push_shared(
            &table::GPU_COMPUTE_SPLIT,
            &l,
            Some((label::METHOD, g.compute.method.as_label().to_owned())),
            1.0,
        );
    }

    let labelled = [
        (
            &table::GPU_TEMPERATURE,
            label::SENSOR,
            "gpu",
            s.temperature_celsius,
        ),
        (
            &table::GPU_TEMPERATURE,
            label::SENSOR,
            "memory",
            s.memory_temperature_celsius,
        ),
        (&table::GPU_CLOCK, label::CLOCK, "sm", s.sm_clock_hertz),
        (
            &table::GPU_CLOCK,
            label::CLOCK,
            "memory",
            s.memory_clock_hertz,
        ),
        (
            &table::GPU_ECC_ERRORS,
            label::TYPE,
            "corrected",
            s.ecc_corrected.map(|v| v as f64),
        ),
        (
            &table::GPU_ECC_ERRORS,
            label::TYPE,
            "uncorrected",
            s.ecc_uncorrected.map(|v| v as f64),
        ),
        (
            &table::GPU_REMAPPED_ROWS,
            label::TYPE,
            "correctable",
            s.remapped_rows.map(|r| r.correctable as f64),
        ),
        (
            &table::GPU_REMAPPED_ROWS,
            label::TYPE,
            "uncorrectable",
            s.remapped_rows.map(|r| r.uncorrectable as f64),
        ),
    ];
    // Corrected ECC errors (the hardware fixed them) and the memory clock (fixed on data-centre
    // GPUs) inform; nothing shipped alerts on them, so they are served at full detail only.
    let informational = |f: &Family, value: &str| {
        (f.index == table::GPU_ECC_ERRORS.index && value == "corrected")
            || (f.index == table::GPU_CLOCK.index && value == "memory")
    };
    for (f, key, value, v) in labelled {
        if !out.informational && informational(f, value) {
            continue;
        }
        if let Some(v) = v {
            out.push_shared(f, &l, Some((key, value.to_owned())), v);
        }
    }
    if let Some(bits) = s.clock_event_reasons {
        for (bit, reason) in CLOCK_EVENT_REASONS {
            if out.clock_reasons & bit == 0 {
                continue;
            }
            let active = if bits & bit != 0 { 1.0 } else { 0.0 };
            out.push_shared(
                &table::GPU_CLOCK_EVENT_REASONS,
                &l,
                Some((label::REASON, reason.to_owned())),
                active,
            );
        }
    }
}

pub(super) fn mig_families(out: &mut Families, node: &str, g: &GpuView, m: &MigView) {
    let l = gpu_labels(node, g, m.sharing_mode);
    let l = with(
        l,
        [
            (label::MIG_UUID, m.uuid.clone()),
            (label::GPU_INSTANCE_ID, m.sample.gpu_instance_id.to_string()),
            (label::PROFILE, m.sample.profile.clone()),
        ],
    );
    let shared = out.share(l.clone());
    out.push(
        &table::GPU_MIG_INSTANCE_INFO,
        with(
            l,
            [
                (
                    label::COMPUTE_INSTANCE_ID,
                    m.sample.compute_instance_id.to_string(),
                ),
                (label::SLICES, m.sample.slices.to_string()),
            ],
        ),
        1.0,
    );
    let s = &m.sample;
    let values = [
        (
            &table::GPU_MIG_MEMORY_TOTAL,
            s.memory.map(|m| m.total as f64),
        ),
        (&table::GPU_MIG_MEMORY_USED, s.memory.map(|m| m.used as f64)),
        (&table::GPU_MIG_SM_ACTIVITY, s.gpm.map(|g| g.sm_activity)),
        (&table::GPU_MIG_SM_OCCUPANCY, s.gpm.map(|g| g.sm_occupancy)),
        (
            &table::GPU_MIG_TENSOR_ACTIVITY,
            s.gpm.map(|g| g.tensor_activity),
        ),
        (
            &table::GPU_MIG_DRAM_BANDWIDTH,
            s.gpm.map(|g| g.dram_bandwidth),
        ),
        (&table::GPU_MIG_SHARERS, Some(f64::from(m.sharers))),
        (&table::GPU_MIG_REPLICAS, Some(f64::from(m.replicas))),
        (&table::GPU_MIG_UNATTRIBUTED, m.unattributed),
    ];
    for (f, v) in values {
        if let Some(v) = v {
            out.push_shared(f, &shared, None, v);
        }
    }
    out.push_shared(
        &table::GPU_MIG_COMPUTE_SPLIT,
        &shared,
        Some((label::METHOD, m.compute.method.as_label().to_owned())),
        1.0,
    );
}

pub(super) fn process_families(out: &mut Families, node: &str, g: &GpuView, p: &ProcessView) {
    let mig = p.sample.mig_uuid.clone().unwrap_or_default();
    let mode = g
        .mig
        .iter()
        .find(|m| m.uuid == mig)
        .map_or(g.sharing_mode, |m| m.sharing_mode);
    let l = gpu_labels(node, g, mode);
    let pod = p.pod.as_deref();
    let shared = with(
        l,
        [
            (label::MIG_UUID, mig),
            (label::PID, p.sample.pid.to_string()),
            (label::PROCESS, p.sample.name.clone()),
            (
                label::TYPE,
                p.sample
                    .kind
                    .map(|k| k.as_label())
                    .unwrap_or("unknown")
                    .to_owned(),
            ),
            (
                label::NAMESPACE,
                pod.map(|p| p.namespace.clone()).unwrap_or_default(),
            ),
            (label::POD, pod.map(|p| p.pod.clone()).unwrap_or_default()),
            (
                label::CONTAINER,
                pod.map(|p| p.container.clone()).unwrap_or_default(),
            ),
        ],
    );
    let shared = out.share(shared);
    let s = &p.sample;
    let values = [
        (
            &table::GPU_PROCESS_MEMORY_USED,
            s.memory_used_bytes.map(|v| v as f64),
        ),
        (&table::GPU_PROCESS_SM_UTILIZATION, p.compute.share),
        (&table::GPU_PROCESS_BUSY_RATIO, p.compute.busy_ratio),
        (&table::GPU_PROCESS_BUSY_LOWER, p.compute.lower),
        (&table::GPU_PROCESS_BUSY_UPPER, p.compute.upper),
        (
            &table::GPU_PROCESS_KERNELS,
            p.probe_kernels.map(|k| k as f64),
        ),
        (&table::GPU_PROCESS_MEMORY_UTILIZATION, s.memory_utilization),
    ];
    for (f, v) in values {
        if let Some(v) = v {
            out.push_shared(f, &shared, None, v);
        }
    }
}

pub(super) fn container_families(out: &mut Families, node: &str, g: &GpuView, c: &ContainerUse) {
    let l = gpu_labels(node, g, c.sharing_mode);
    let p = &c.pod;
    let l = with(
        l,
        [
            (label::MIG_UUID, c.mig_uuid.clone().unwrap_or_default()),
            (label::NAMESPACE, p.namespace.clone()),
            (label::POD, p.pod.clone()),
            (label::CONTAINER, p.container.clone()),
            (label::WORKLOAD_KIND, p.workload_kind.clone()),
            (label::WORKLOAD, p.workload.clone()),
        ],
    );
    let pod_labels = |mut base: Labels| {
        base.extend(
            p.labels
                .iter()
                .map(|(k, v)| (Cow::Owned(k.clone()), Value::from(v.as_str()))),
        );
        base
    };
    for a in &c.allocations {
        let mut al = l.clone();
        al.push((label::RESOURCE.into(), a.resource.as_str().into()));
        al.push((label::DEVICE_ID.into(), a.device_id.as_str().into()));
        al.push((label::CLAIM.into(), a.claim.as_str().into()));
        out.push(&table::GPU_CONTAINER_ALLOCATION, pod_labels(al), 1.0);
    }
    for (state, joules) in c.energy.joules.iter() {
        let mut el = l.clone();
        el.push((label::ACTIVITY.into(), state.as_label().into()));
        out.push(&table::GPU_CONTAINER_ENERGY, pod_labels(el), joules);
    }
    let l = out.share(pod_labels(l));
    if !c.energy.joules.is_empty() {
        let e = &c.energy;
        out.push_shared(
            &table::GPU_CONTAINER_DYNAMIC_ENERGY,
            &l,
            None,
            e.dynamic_joules,
        );
        if let (Some(lower), Some(upper)) = (e.lower_joules, e.upper_joules) {
            out.push_shared(&table::GPU_CONTAINER_ENERGY_LOWER, &l, None, lower);
            out.push_shared(&table::GPU_CONTAINER_ENERGY_UPPER, &l, None, upper);
        }
    }
    out.push_shared(
        &table::GPU_CONTAINER_MEMORY_USED,
        &l,
        None,
        c.memory_used_bytes as f64,
    );
    if let Some(sm) = c.sm_utilization {
        out.push_shared(&table::GPU_CONTAINER_SM_UTILIZATION, &l, None, sm);
    }
    if let Some(b) = c.busy_ratio {
        out.push_shared(&table::GPU_CONTAINER_BUSY_RATIO, &l, None, b);
        out.push_shared(&table::GPU_CONTAINER_BUSY, &l, None, c.busy_seconds);
    }
    if let Some((lower, upper)) = c.busy_bounds {
        out.push_shared(&table::GPU_CONTAINER_BUSY_LOWER, &l, None, lower);
        out.push_shared(&table::GPU_CONTAINER_BUSY_UPPER, &l, None, upper);
    }
    if !c.allocations.is_empty() {
        let idle_now = c.activity == crate::model::compute::Activity::Idle;
        out.push_shared(
            &table::GPU_CONTAINER_IDLE_NOW,
            &l,
            None,
            if idle_now { 1.0 } else { 0.0 },
        );
        out.push_shared(&table::GPU_CONTAINER_IDLE, &l, None, c.idle_seconds);
        out.push_shared(
            &table::GPU_CONTAINER_ACTIVITY_UNKNOWN,
            &l,
            None,
            c.unknown_seconds,
        );
    }
    if c.unallocated_use {
        out.push_shared(&table::GPU_CONTAINER_UNALLOCATED_USE, &l, None, 1.0);
    }
    if let Some(b) = c.limits.memory_bytes {
        out.push_shared(&table::GPU_CONTAINER_MEMORY_LIMIT, &l, None, b as f64);
    }
    if let Some(r) = c.limits.compute_ratio {
        out.push_shared(&table::GPU_CONTAINER_COMPUTE_LIMIT, &l, None, r);
    }
}
