//! The pure join: NVML's view of the node, the kubelet's allocations, the pods' metadata and
//! each process's cgroup, in; the immutable snapshot the exporter shows, out.

use std::collections::HashMap;

use super::allocations::Allocations;
use super::attribution::{self, AttributionStats};
use super::cluster::ClusterView;
use super::compute::{ActivityInputs, ProcessShare};
use super::device_id::ResourceMatcher;
use super::holding::{DeviceIndex, Pods};
use super::identity::CgroupIdentity;
use super::limits;
use super::view::{CollectorStatus, ProcessView, Snapshot};
use super::NvmlSample;

mod device;
mod energy_step;
#[cfg(test)]
pub mod testkit;

use self::device::{accumulated, join_gpu, Ctx, GpuInputs};
use self::energy_step::EnergyStep;

/// Idle time is counted at sample resolution; a longer gap (a stalled sampler) is not
/// evidence of idleness and is capped.
const MAX_IDLE_STEP_SECONDS: f64 = 60.0;

pub struct JoinInputs<'a> {
    pub node: &'a str,
    pub timestamp_seconds: f64,
    pub nvml: &'a NvmlSample,
    pub collectors: Vec<CollectorStatus>,
    pub sample_duration_seconds: f64,
    /// `None` when the kubelet has not answered (or is not used).
    pub allocations: Option<&'a Allocations>,
    /// `None` without an API server.
    pub cluster: Option<&'a ClusterView>,
    pub cgroups: &'a HashMap<u32, CgroupIdentity>,
    pub resources: &'a ResourceMatcher,
    /// CPU time and CUDA-probe readings per process, over the trailing window.
    pub activity: &'a ActivityInputs,
    /// The previous snapshot, for counters (idle seconds) that accumulate across samples.
    pub previous: Option<&'a Snapshot>,
    /// Seconds of idle readings a GPU's idle floor is learned over (`--energy.floor-window`).
    pub energy_floor_window: f64,
}

pub fn join(inputs: JoinInputs<'_>) -> Snapshot {
    let gpus = &inputs.nvml.gpus;
    let index = DeviceIndex::new(gpus);
    let mut pods = Pods::default();
    let mut stats = AttributionStats::default();
    let holdings = inputs
        .allocations
        .map(|a| {
            attribution::holdings(
                a,
                inputs.cluster,
                inputs.resources,
                &index,
                &mut pods,
                &mut stats,
            )
        })
        .unwrap_or_default();
    let offered = inputs
        .allocations
        .map(|a| attribution::offered(a, inputs.resources, &index))
        .unwrap_or_default();
    let previous = accumulated(inputs.previous);
    let ctx = Ctx {
        allocations_known: inputs.allocations.is_some(),
        dt: inputs
            .previous
            .map(|p| {
                (inputs.timestamp_seconds - p.timestamp_seconds).clamp(0.0, MAX_IDLE_STEP_SECONDS)
            })
            .unwrap_or(0.0),
        previous: &previous,
        gpu_uuid: "",
    };

    let mut views = Vec::with_capacity(gpus.len());
    for (g, gpu) in gpus.iter().enumerate() {
        let processes: Vec<ProcessView> = gpu
            .processes
            .iter()
            .map(|p| {
                // A probe without CUPTI counted nothing: no kernel count, rather than 0.
                let probe = inputs.activity.probe.get(&p.pid).filter(|r| !r.no_cupti);
                ProcessView {
                    pod: attribution::process_owner(
                        inputs.cgroups.get(&p.pid),
                        inputs.cluster,
                        &mut pods,
                        &mut stats,
                    ),
                    sample: p.clone(),
                    compute: ProcessShare::default(),
                    probe_busy_seconds: probe.map(|r| r.busy_seconds),
                    probe_kernels: probe.map(|r| r.kernels),
                    probe_traced_share: probe.and_then(|r| r.traced_share),
                }
            })
            .collect();
        let on = GpuInputs {
            cluster: inputs.cluster,
            now: inputs.timestamp_seconds,
            activity: inputs.activity,
            ctx: Ctx {
                gpu_uuid: &gpu.uuid,
                ..ctx
            },
            gpu,
            processes,
            holdings: &holdings,
            offered: &offered,
            before: inputs
                .previous
                .and_then(|s| s.gpus.iter().find(|v| v.uuid == gpu.uuid)),
        };
        views.push(join_gpu(on, g));
    }
    limits::fill_all(&mut views, inputs.cluster);
    energy_step::fill_all(
        &mut views,
        &EnergyStep {
            previous: inputs.previous,
            now: inputs.timestamp_seconds,
            dt: ctx.dt,
            floor_window: inputs.energy_floor_window,
        },
    );
    Snapshot {
        node: inputs.node.to_owned(),
        timestamp_seconds: inputs.timestamp_seconds,
        driver_version: inputs.nvml.driver_version.clone(),
        gpus: views,
        collectors: inputs.collectors,
        nvml_errors: inputs.nvml.errors_by_call.clone(),
        nvml_worker_restarts: inputs.nvml.worker_restarts.clone(),
        nvml_call_costs: inputs.nvml.call_costs.clone(),
        sample_duration_seconds: inputs.sample_duration_seconds,
        samples_total: inputs.previous.map_or(1, |p| p.samples_total + 1),
        // The sampler's to fill: the probe's socket is not an input of the join.
        probe_reports_refused: Default::default(),
        attribution: stats,
    }
}

#[cfg(test)]
mod tests;
