//! One device's pipeline, run for each MIG instance and for each GPU: the facts about the
//! device, its sharing mode, the compute split, the container rows and the account.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::model::billing;
use crate::model::cluster::{ClusterView, SharingStrategy};
use crate::model::compute::{
    self, Activity, ActivityInputs, DeviceCompute, DeviceSplit, ProcessShare, SplitMethod,
};
use crate::model::evidence;
use crate::model::holding::{Holding, PodRef, Target};
use crate::model::sharing::{decide, DeclaredStrategy, SharingEvidence, SharingMode};
use crate::model::view::{
    ContainerUse, DeviceAccount, GpuView, MigView, PodUse, ProcessView, Snapshot,
};
use crate::model::{GpuSample, MigSample, ProcessKind, ProcessSample};

fn declared(s: &SharingStrategy) -> Option<DeclaredStrategy> {
    match s {
        SharingStrategy::None => Some(DeclaredStrategy::None),
        SharingStrategy::TimeSlicing => Some(DeclaredStrategy::TimeSlicing),
        SharingStrategy::Mps => Some(DeclaredStrategy::Mps),
        SharingStrategy::Other(_) => None,
    }
}

/// What the node labels say about a device (per MIG profile for instances).
fn declared_for(
    cluster: Option<&ClusterView>,
    mig_profile: Option<&str>,
) -> (Option<DeclaredStrategy>, Option<u32>) {
    let Some(node) = cluster.map(|c| &c.node) else {
        return (None, None);
    };
    match mig_profile {
        Some(p) => node
            .per_profile
            .get(p)
            .map(|(s, r)| (s.as_ref().and_then(declared), *r))
            .unwrap_or((None, None)),
        None => (node.strategy.as_ref().and_then(declared), node.replicas),
    }
}

struct DeviceFacts<'a> {
    holdings: &'a [Holding],
    processes: Vec<&'a ProcessView>,
    offered: Option<u32>,
}

fn evidence(
    facts: &DeviceFacts<'_>,
    declared: Option<DeclaredStrategy>,
    vgpu: bool,
    mig_instance: bool,
) -> SharingEvidence {
    let holders: BTreeSet<&PodRef> = facts.holdings.iter().map(|h| h.pod.as_ref()).collect();
    let mut claims: HashMap<&str, BTreeSet<(&str, &str)>> = HashMap::new();
    for h in facts.holdings.iter().filter(|h| !h.claim.is_empty()) {
        claims
            .entry(&h.claim)
            .or_default()
            .insert((&h.pod.namespace, &h.pod.pod));
    }
    SharingEvidence {
        vgpu_guest: vgpu,
        mig_enabled_gpu: false,
        mig_instance,
        mps_server: facts
            .processes
            .iter()
            .any(|p| p.sample.kind == Some(ProcessKind::MpsServer)),
        mps_clients: facts
            .processes
            .iter()
            .filter(|p| p.sample.kind == Some(ProcessKind::MpsClient))
            .count(),
        holders: holders.len(),
        replica_ids: facts.holdings.iter().any(|h| h.replica)
            || facts.offered.is_some_and(|n| n > 1),
        // A claim's config speaks for the device itself; node labels for the whole node.
        declared: crate::model::holding::dra_declared(facts.holdings).or(declared),
        shared_claim: claims.values().any(|pods| pods.len() > 1),
        fractional: facts
            .holdings
            .iter()
            .find_map(|h| Some(h.grant.as_ref()?.scheduler.as_str())),
    }
}

fn replicas(
    facts: &DeviceFacts<'_>,
    declared: (Option<DeclaredStrategy>, Option<u32>),
    holders: usize,
) -> u32 {
    if let Some(n) = facts.offered {
        return n;
    }
    match declared {
        (Some(DeclaredStrategy::TimeSlicing | DeclaredStrategy::Mps), Some(n)) => n,
        _ => u32::from(holders > 0),
    }
}

pub(super) type IdleKey = (String, String, String, String, String);

fn idle_key(gpu_uuid: &str, c: &ContainerUse) -> IdleKey {
    (
        c.pod.namespace.clone(),
        c.pod.pod.clone(),
        c.pod.container.clone(),
        gpu_uuid.to_owned(),
        c.mig_uuid.clone().unwrap_or_default(),
    )
}

/// What a container accumulated up to the previous sample.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Accumulated {
    idle: f64,
    unknown: f64,
    busy: f64,
}

pub(super) struct Ctx<'a> {
    pub(super) allocations_known: bool,
    pub(super) dt: f64,
    pub(super) previous: &'a HashMap<IdleKey, Accumulated>,
    pub(super) gpu_uuid: &'a str,
}

/// Per-container rows of one device: every holder, plus every container with processes on it.
fn containers(
    ctx: &Ctx<'_>,
    cluster: Option<&ClusterView>,
    facts: &DeviceFacts<'_>,
    mode: SharingMode,
    mig: Option<&MigSample>,
    split: &DeviceSplit,
) -> Vec<ContainerUse> {
    let mut rows: BTreeMap<Arc<PodRef>, (ContainerUse, Vec<u32>)> = BTreeMap::new();
    let blank = |pod: &Arc<PodRef>| {
        let row = ContainerUse::blank(pod.clone(), mig.map(|m| m.uuid.clone()), mode);
        (row, Vec::new())
    };
    for h in facts.holdings {
        rows.entry(h.pod.clone())
            .or_insert_with(|| blank(&h.pod))
            .0
            .allocations
            .push(h.clone());
    }
    // A process not pinned to a known container (no cgroup, no pod metadata yet, or a pod
    // whose container is not known) may be any holder's: no holder without processes can then
    // be called idle on the strength of running nothing.
    let unowned = facts.processes.iter().any(|p| {
        p.sample.kind != Some(ProcessKind::MpsServer)
            && p.pod
                .as_ref()
                .is_none_or(|pod| pod.namespace.is_empty() || pod.container.is_empty())
    });
    for p in &facts.processes {
        let Some(pod) = &p.pod else { continue };
        let (row, pids) = rows.entry(pod.clone()).or_insert_with(|| blank(pod));
        // The MPS server runs in the device plugin's daemon pod, which never requests the GPU
        // it serves: that is not someone bypassing the device plugin, nor that pod's work.
        row.memory_used_bytes += p.sample.memory_used_bytes.unwrap_or(0);
        if p.sample.kind == Some(ProcessKind::MpsServer) {
            continue;
        }
        row.processes += 1;
        pids.push(p.sample.pid);
    }
    // Pods that hold this device: their init containers run on it by the kubelet's leave.
    let holding_pods: BTreeSet<(String, String)> = rows
        .values()
        .filter(|(row, _)| !row.allocations.is_empty())
        .map(|(row, _)| (row.pod.namespace.clone(), row.pod.pod.clone()))
        .collect();
    let lent = |pod: &PodRef| {
        holding_pods.contains(&(pod.namespace.clone(), pod.pod.clone()))
            && cluster
                .is_some_and(|c| c.is_init_container(&pod.namespace, &pod.pod, &pod.container))
    };
    let instance_activity = mig.and_then(|m| m.gpm).map(|g| g.sm_activity);
    for (row, pids) in rows.values_mut() {
        let allocated = !row.allocations.is_empty();
        let shares: Vec<ProcessShare> = pids.iter().map(|pid| split.share_of(*pid)).collect();
        let sum = |f: fn(&ProcessShare) -> Option<f64>| -> Option<f64> {
            shares
                .iter()
                .map(f)
                .sum::<Option<f64>>()
                .map(|v| v.clamp(0.0, 1.0))
        };
        row.sm_utilization = if pids.is_empty() {
            (!unowned).then_some(0.0)
        } else if split.method == SplitMethod::MigInstance {
            // NVML has no per-process utilization under MIG: the instance's activity is its
            // one active holder's.
            if pids.iter().any(|pid| split.candidates.contains(pid)) {
                instance_activity
            } else {
                Some(0.0)
            }
        } else {
            sum(|s| s.share)
        };
        // A figure decided for the whole container (sole-active-container, by-difference).
        if let Some(w) = split.wide.as_ref().filter(|w| w.is_container(&row.pod)) {
            row.sm_utilization = Some(w.share);
        }
        row.busy_ratio = if pids.is_empty() {
            None
        } else {
            sum(|s| s.busy_ratio)
        };
        // Bounds where the probes give them: a quiet process adds 0 to both.
        let bound = |f: fn(&ProcessShare) -> Option<f64>| -> Option<f64> {
            if !shares.iter().any(|s| f(s).is_some()) {
                return None;
            }
            shares
                .iter()
                .map(|s| f(s).or(s.quiet.then_some(0.0)))
                .sum::<Option<f64>>()
                .map(|v| v.clamp(0.0, 1.0))
        };
        row.busy_bounds = bound(|s| s.lower).zip(bound(|s| s.upper));
        row.unallocated_use =
            ctx.allocations_known && !allocated && !lent(&row.pod) && row.processes > 0;
        row.activity = if pids.is_empty() && unowned && split.method != SplitMethod::Idle {
            Activity::Unknown
        } else {
            compute::container_activity(split, pids, row.sm_utilization)
        };
    }
    // While a pod's init container runs on the device the kubelet lent it, the pod's
    // allocation is in use though its app container has not started: the holder is not idle
    // (as on a real kubelet). Not busy either: its own figure is its own.
    let pods_initialising: BTreeSet<(String, String)> = rows
        .values()
        .filter(|(row, _)| lent(&row.pod) && row.processes > 0 && row.activity != Activity::Idle)
        .map(|(row, _)| (row.pod.namespace.clone(), row.pod.pod.clone()))
        .collect();
    for (row, _) in rows.values_mut() {
        let pod = (row.pod.namespace.clone(), row.pod.pod.clone());
        if row.activity == Activity::Idle && pods_initialising.contains(&pod) {
            row.activity = Activity::Unknown;
        }
        let allocated = !row.allocations.is_empty();
        let before = ctx
            .previous
            .get(&idle_key(ctx.gpu_uuid, row))
            .copied()
            .unwrap_or_default();
        row.busy_seconds = before.busy + row.busy_ratio.unwrap_or(0.0) * ctx.dt;
        row.idle_seconds = before.idle;
        row.unknown_seconds = before.unknown;
        if allocated {
            match row.activity {
                Activity::Idle => row.idle_seconds += ctx.dt,
                Activity::Unknown => row.unknown_seconds += ctx.dt,
                Activity::Busy => {}
            }
        }
    }
    rows.into_values().map(|(row, _)| row).collect()
}

/// A device's reading this sample, and where its run of idle readings stood.
struct DeviceReading<'b> {
    activity: Option<f64>,
    now: f64,
    idle_since: Option<f64>,
    recent_activity: &'b [(f64, f64)],
}

/// Splits one device's compute among its processes; see [`compute`].
fn split_device(
    facts: &DeviceFacts<'_>,
    device: DeviceReading<'_>,
    mode: SharingMode,
    mig_instance: bool,
    activity: &ActivityInputs,
) -> DeviceSplit {
    let samples: Vec<&ProcessSample> = facts.processes.iter().map(|p| &p.sample).collect();
    let owners: HashMap<u32, &PodRef> = facts
        .processes
        .iter()
        .filter_map(|p| Some((p.sample.pid, p.pod.as_deref()?)))
        .collect();
    let mps = matches!(mode, SharingMode::Mps | SharingMode::MigMps)
        || samples.iter().any(|p| {
            matches!(
                p.kind,
                Some(ProcessKind::MpsServer | ProcessKind::MpsClient)
            )
        });
    let d = DeviceCompute {
        processes: &samples,
        device_activity: device.activity,
        mps,
        mig_instance,
        activity,
        now: device.now,
        idle_since: device.idle_since,
        recent_activity: device.recent_activity,
    };
    let mut split = compute::split(&d);
    evidence::review(&mut split, &d, &owners);
    split
}

fn unattributed_of(split: &DeviceSplit, rows: &[ContainerUse]) -> Option<f64> {
    let given: Vec<Option<f64>> = rows.iter().map(|r| r.sm_utilization).collect();
    compute::unattributed(split.device_activity, &given)
}

/// One GPU's part of the join's inputs: what each of its devices (the GPU and every MIG
/// instance) is joined from.
pub(super) struct GpuInputs<'a> {
    pub(super) cluster: Option<&'a ClusterView>,
    /// The sample's time.
    pub(super) now: f64,
    pub(super) activity: &'a ActivityInputs,
    pub(super) ctx: Ctx<'a>,
    pub(super) gpu: &'a GpuSample,
    pub(super) processes: Vec<ProcessView>,
    pub(super) holdings: &'a BTreeMap<Target, Vec<Holding>>,
    pub(super) offered: &'a HashMap<Target, u32>,
    /// The GPU in the previous snapshot.
    pub(super) before: Option<&'a GpuView>,
}

/// One device joined: its sharing mode, compute split, container rows and account.
struct DeviceJoin {
    mode: SharingMode,
    why: Vec<&'static str>,
    evidence: SharingEvidence,
    replicas: u32,
    split: DeviceSplit,
    rows: Vec<ContainerUse>,
    unattributed: Option<f64>,
    /// `None` for a MIG-enabled GPU itself: its instances are billed instead.
    billing: Option<(Vec<PodUse>, DeviceAccount)>,
}

impl GpuInputs<'_> {
    /// Runs one device's pipeline: facts, evidence and mode, compute split, rows, billing.
    fn join_device(&self, target: Target) -> DeviceJoin {
        let mig = target.mig.map(|m| &self.gpu.mig_instances[m]);
        let mig_uuid = mig.map(|m| m.uuid.as_str());
        let facts = DeviceFacts {
            holdings: self.holdings.get(&target).map(Vec::as_slice).unwrap_or(&[]),
            processes: self
                .processes
                .iter()
                .filter(|p| p.sample.mig_uuid.as_deref() == mig_uuid)
                .collect(),
            offered: self.offered.get(&target).copied(),
        };
        let mig_enabled_gpu = mig.is_none() && self.gpu.mig_enabled == Some(true);
        let decl = declared_for(self.cluster, mig.map(|m| m.profile.as_str()));
        let mut ev = evidence(&facts, decl.0, self.gpu.vgpu_guest, mig.is_some());
        ev.mig_enabled_gpu = mig_enabled_gpu;
        let (mode, why) = decide(&ev);
        let device = match mig {
            Some(m) => {
                let before = self
                    .before
                    .and_then(|v| v.mig.iter().find(|b| b.uuid == m.uuid));
                DeviceReading {
                    activity: m.gpm.map(|a| a.sm_activity),
                    now: self.now,
                    idle_since: before.and_then(|b| b.compute.idle_since),
                    recent_activity: before.map_or(&[], |b| &b.compute.recent_activity),
                }
            }
            // On a MIG GPU compute is split per instance; the GPU level runs nothing itself.
            None => DeviceReading {
                activity: if mig_enabled_gpu {
                    None
                } else {
                    self.gpu.utilization.or(self.gpu.gpm.map(|a| a.sm_activity))
                },
                now: self.now,
                idle_since: self.before.and_then(|v| v.compute.idle_since),
                recent_activity: self.before.map_or(&[], |v| &v.compute.recent_activity),
            },
        };
        let split = split_device(&facts, device, mode, mig.is_some(), self.activity);
        let rows = containers(&self.ctx, self.cluster, &facts, mode, mig, &split);
        let unattributed = unattributed_of(&split, &rows);
        let billing = (!mig_enabled_gpu).then(|| {
            let previous = match self.before {
                Some(v) => billing::Previous::of(&v.pods, &v.accounts, mig_uuid),
                None => billing::Previous::default(),
            };
            billing::account(
                &split,
                &rows,
                mig_uuid,
                unattributed,
                self.ctx.dt,
                &previous,
            )
        });
        DeviceJoin {
            mode,
            why,
            replicas: replicas(&facts, decl, ev.holders),
            evidence: ev,
            split,
            rows,
            unattributed,
            billing,
        }
    }
}

/// Containers with a candidate process on the device, those of unknown owner each counted.
fn active_containers(processes: &[ProcessView], split: &DeviceSplit) -> u32 {
    let candidates = || {
        processes
            .iter()
            .filter(|p| split.candidates.contains(&p.sample.pid))
    };
    let owners: BTreeSet<&PodRef> = candidates()
        .filter_map(|p| p.pod.as_deref().filter(|pod| !pod.namespace.is_empty()))
        .collect();
    let unknown = candidates()
        .filter(|p| p.pod.as_deref().is_none_or(|pod| pod.namespace.is_empty()))
        .count();
    (owners.len() + unknown) as u32
}

/// Joins one GPU: each MIG instance, then the GPU itself.
pub(super) fn join_gpu(on: GpuInputs<'_>, target: usize) -> GpuView {
    let gpu = on.gpu;
    let instances: Vec<DeviceJoin> = (0..gpu.mig_instances.len())
        .map(|m| {
            on.join_device(Target {
                gpu: target,
                mig: Some(m),
            })
        })
        .collect();
    let whole = on.join_device(Target {
        gpu: target,
        mig: None,
    });
    let mut shares: HashMap<u32, ProcessShare> = HashMap::new();
    let (mut rows, mut pods, mut accounts) = (Vec::new(), Vec::new(), Vec::new());
    let mut mig_views = Vec::with_capacity(instances.len());
    for (mig, d) in gpu.mig_instances.iter().zip(instances) {
        shares.extend(d.split.shares.iter().map(|(k, v)| (*k, *v)));
        rows.extend(d.rows);
        if let Some((p, a)) = d.billing {
            pods.extend(p);
            accounts.push(a);
        }
        mig_views.push(MigView {
            compute: d.split,
            unattributed: d.unattributed,
            sample: mig.clone(),
            uuid: mig.uuid.clone(),
            profile: mig.profile.clone(),
            sharing_mode: d.mode,
            sharers: d.evidence.holders as u32,
            replicas: d.replicas,
            evidence: d.evidence,
            why: d.why,
        });
    }
    if let Some((p, a)) = whole.billing {
        pods.extend(p);
        accounts.push(a);
    }
    rows.extend(whole.rows);
    shares.extend(whole.split.shares.iter().map(|(k, v)| (*k, *v)));
    let (sharers, replicas) = if gpu.mig_enabled == Some(true) {
        let holders: BTreeSet<&PodRef> = rows
            .iter()
            .filter(|r| !r.allocations.is_empty())
            .map(|r| r.pod.as_ref())
            .collect();
        (
            holders.len() as u32,
            mig_views.iter().map(|m| m.replicas).sum(),
        )
    } else {
        (whole.evidence.holders as u32, whole.replicas)
    };
    let active_containers = active_containers(&on.processes, &whole.split);
    let mut processes = on.processes;
    for p in &mut processes {
        p.compute = shares.get(&p.sample.pid).copied().unwrap_or_default();
    }
    GpuView {
        index: gpu.index,
        uuid: gpu.uuid.clone(),
        up: gpu.up,
        gpm: gpu.gpm_status.clone(),
        sharing_mode: whole.mode,
        evidence: whole.evidence,
        why: whole.why,
        sharers,
        replicas,
        mig: mig_views,
        active_containers,
        compute: whole.split,
        unattributed: whole.unattributed,
        containers: rows,
        processes,
        pods,
        accounts,
        energy: Default::default(),
        sample: gpu.clone(),
    }
}

/// What each container had accumulated in the previous snapshot.
pub(super) fn accumulated(previous: Option<&Snapshot>) -> HashMap<IdleKey, Accumulated> {
    let Some(s) = previous else {
        return HashMap::new();
    };
    s.gpus
        .iter()
        .flat_map(|g| {
            g.containers.iter().map(move |c| {
                let acc = Accumulated {
                    idle: c.idle_seconds,
                    unknown: c.unknown_seconds,
                    busy: c.busy_seconds,
                };
                (idle_key(&g.uuid, c), acc)
            })
        })
        .collect()
}
