//! The resolved, validated scenario: every value the exports need, already
//! defaulted, so the FFI layer never has to reason about missing fields.

use crate::activity::{resolve_phase_gpu, GpuActivity};
use crate::calls::is_known_call;
pub use crate::devices::{find_instance, GpuDef, MigInstance, MigLayout, PciAddr};
use crate::scenario::{
    ComputeMode, FaultSpec, GpuPhaseSpec, GpuSpec, MigSpec, PhaseSpec, ProcessSpec, Scenario,
    Virtualization,
};
use crate::sku::{self, Sku};
use crate::timeline::Timeline;
use std::collections::HashSet;

#[derive(Debug)]
pub struct World {
    pub driver_version: String,
    pub nvml_version: String,
    pub cuda_driver_version: i32,
    pub process_stride: usize,
    pub realistic_latency: bool,
    pub gpus: Vec<GpuDef>,
    pub timeline: Timeline,
    /// `phases[p].gpus[g]`: activity of GPU g during phase p.
    pub phases: Vec<Phase>,
    pub global_faults: Vec<Fault>,
    /// How long each GPM call stays in flight when concurrent GPM calls crash; `None`: they don't.
    pub gpm_race_hold_ms: Option<u64>,
}

#[derive(Debug)]
pub struct Phase {
    pub gpus: Vec<GpuActivity>,
    pub faults: Vec<Fault>,
    /// `mig[g]`: the MIG instances of GPU g that exist during the phase.
    pub mig: Vec<MigLayout>,
}

#[derive(Debug, Clone)]
pub struct Fault {
    pub call: String,
    pub gpu: Option<usize>,
    pub error: Option<u32>,
    pub slow_ms: u64,
    pub crash: Option<crate::scenario::CrashKind>,
    pub after_calls: u64,
    /// Matching calls so far in this process (for `after_calls`).
    pub calls: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// Bus numbers of the eight SXM GPUs on a typical HGX H100 board, so default
/// bus ids look like a real node.
const HGX_BUSES: [u32; 8] = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB];

impl World {
    pub fn from_scenario(s: &Scenario) -> Result<World, String> {
        if ![16, 24, 32].contains(&s.process_struct_stride) {
            return Err(format!(
                "process_struct_stride must be 16, 24 or 32, not {}",
                s.process_struct_stride
            ));
        }
        let mut gpus = Vec::with_capacity(s.gpus.len());
        for (i, spec) in s.gpus.iter().enumerate() {
            gpus.push(resolve_gpu(i, spec).map_err(|e| format!("gpus[{i}]: {e}"))?);
        }
        let mut layouts: Vec<MigLayout> = gpus
            .iter()
            .map(|g| match &g.mig {
                Some(m) => MigLayout::new(m, (0..m.len()).collect()),
                None => MigLayout::default(),
            })
            .collect();

        let timeline = Timeline::new(
            s.phases.iter().map(|p| p.at_ms).collect(),
            s.repeat_after_ms,
        )?;
        let mut phases = Vec::with_capacity(s.phases.len().max(1));
        for (pi, phase) in s.phases.iter().enumerate() {
            let label = match &phase.name {
                Some(n) => format!("phases[{pi}] ({n})"),
                None => format!("phases[{pi}]"),
            };
            for (i, g) in phase.gpus.iter().enumerate() {
                let (Some(spec), Some(gpu)) = (&g.mig, gpus.get_mut(g.gpu)) else {
                    continue;
                };
                layouts[g.gpu] =
                    relayout(gpu, spec).map_err(|e| format!("{label}: gpus[{i}]: mig: {e}"))?;
            }
            phases
                .push(resolve_phase(phase, &gpus, &layouts).map_err(|e| format!("{label}: {e}"))?);
        }
        if phases.is_empty() {
            // No timeline at all: every GPU idles for ever.
            phases.push(resolve_phase(
                &PhaseSpec {
                    at_ms: 0,
                    name: None,
                    gpus: Vec::new(),
                    processes: Vec::new(),
                    xids: Vec::new(),
                    faults: Vec::new(),
                },
                &gpus,
                &layouts,
            )?);
        }
        check_unique_uuids(&gpus)?;
        // A GPM sample window can span phases, including ones before an instance existed.
        for phase in &mut phases {
            for (act, gpu) in phase.gpus.iter_mut().zip(&gpus) {
                let slots = gpu.mig.as_ref().map_or(0, Vec::len);
                act.mig.resize_with(slots, Default::default);
            }
        }
        let global_faults =
            resolve_faults(&s.faults, gpus.len()).map_err(|e| format!("faults: {e}"))?;
        Ok(World {
            driver_version: s.driver_version.clone(),
            nvml_version: s.nvml_version.clone(),
            cuda_driver_version: s.cuda_driver_version,
            process_stride: s.process_struct_stride as usize,
            realistic_latency: s.realistic_latency,
            gpus,
            timeline,
            phases,
            global_faults,
            gpm_race_hold_ms: s.gpm_race_crash.map(|r| r.hold_ms),
        })
    }

    pub fn phase(&self, index: usize) -> &Phase {
        &self.phases[index.min(self.phases.len() - 1)]
    }
}

fn resolve_gpu(index: usize, spec: &GpuSpec) -> Result<GpuDef, String> {
    let sku = sku::by_key(&spec.sku).ok_or_else(|| {
        format!(
            "unknown sku {:?} (known: {})",
            spec.sku,
            sku::keys().join(", ")
        )
    })?;
    let uuid = match &spec.uuid {
        Some(u) if u.starts_with("GPU-") && u.len() < 80 => u.clone(),
        Some(u) => return Err(format!("uuid {u:?} must start with \"GPU-\"")),
        None => format!("GPU-{}", uuid_from_seed(0x6770_0000 + index as u64)),
    };
    let pci = match &spec.pci_bus_id {
        Some(id) => PciAddr::parse(id)
            .ok_or_else(|| format!("pci_bus_id {id:?} is not like \"00000000:18:00.0\""))?,
        None => PciAddr {
            domain: 0,
            bus: HGX_BUSES
                .get(index)
                .copied()
                .unwrap_or(0xE0 + (index as u32 % 0x1F)),
            device: 0,
            function: 0,
        },
    };
    let mig = match &spec.mig {
        Some(m) => Some(resolve_mig(index, sku, m)?),
        None => None,
    };
    Ok(GpuDef {
        index,
        sku,
        uuid,
        pci,
        minor_number: spec.minor_number.unwrap_or(index as u32),
        compute_mode: match spec.compute_mode {
            ComputeMode::Default => 0,
            ComputeMode::ExclusiveThread => 1,
            ComputeMode::Prohibited => 2,
            ComputeMode::ExclusiveProcess => 3,
        },
        virtualization: match spec.virtualization {
            Virtualization::None => 0,
            Virtualization::Passthrough => 1,
            Virtualization::Vgpu => 2,
            Virtualization::HostVgpu => 3,
            Virtualization::HostVsga => 4,
        },
        ecc_enabled: spec.ecc_enabled,
        power_limit_mw: spec.power_limit_watts.unwrap_or(sku.power_limit_w) * 1000,
        energy_start_mj: spec.energy_start_joules.saturating_mul(1000),
        mig,
    })
}

/// Largest slot a device handle can carry (see `state::device_handle`).
const MAX_MIG_SLOTS: usize = 254;

/// Maps a phase's MIG layout onto slots of `gpu.mig`, adding the instances it creates.
fn relayout(gpu: &mut GpuDef, spec: &MigSpec) -> Result<MigLayout, String> {
    let fresh = resolve_mig(gpu.index, gpu.sku, spec)?;
    let gpu_index = gpu.index as u64;
    let Some(known) = gpu.mig.as_mut() else {
        return Err("MIG mode is off on this GPU (it has no `gpus[].mig`); \
                    a phase can change the layout, not the mode"
            .into());
    };
    let mut listed = Vec::with_capacity(fresh.len());
    for (i, (mut inst, written)) in fresh.into_iter().zip(&spec.instances).enumerate() {
        let same_shape = |k: &MigInstance| {
            std::ptr::eq(k.profile, inst.profile)
                && k.placement == inst.placement
                && k.gpu_instance_id == inst.gpu_instance_id
                && k.compute_instance_id == inst.compute_instance_id
        };
        let existing = match &written.uuid {
            Some(u) => match known.iter().position(|k| &k.uuid == u) {
                Some(slot) if !same_shape(&known[slot]) => {
                    return Err(format!(
                        "instances[{i}]: {u} already names an instance of another shape"
                    ))
                }
                found => found,
            },
            None => known.iter().position(same_shape),
        };
        let slot = match existing {
            Some(slot) => slot,
            None => {
                if known.len() >= MAX_MIG_SLOTS {
                    return Err(format!(
                        "more than {MAX_MIG_SLOTS} distinct MIG instances over the timeline"
                    ));
                }
                if written.uuid.is_none() {
                    inst.uuid = format!(
                        "MIG-{}",
                        uuid_from_seed(0x6d69_6700_0000 + (gpu_index << 8) + known.len() as u64)
                    );
                }
                known.push(inst);
                known.len() - 1
            }
        };
        if listed.contains(&slot) {
            return Err(format!("instances[{i}] is listed twice"));
        }
        listed.push(slot);
    }
    Ok(MigLayout::new(known, listed))
}

fn resolve_mig(gpu: usize, sku: &'static Sku, spec: &MigSpec) -> Result<Vec<MigInstance>, String> {
    if spec.instances.len() > 7 {
        return Err(format!(
            "mig: {} instances, a GPU holds at most 7",
            spec.instances.len()
        ));
    }
    // Memory slices taken so far; 8 per GPU.
    let mut used = [false; 8];
    let mut out: Vec<MigInstance> = Vec::new();
    for (i, inst) in spec.instances.iter().enumerate() {
        let ctx = format!("mig.instances[{i}]");
        let profile = sku.profile_by_name(&inst.profile).ok_or_else(|| {
            let names: Vec<&str> = sku.mig_profiles.iter().map(|p| p.name).collect();
            format!(
                "{ctx}: profile {:?} does not exist on {} (known: {})",
                inst.profile,
                sku.key,
                names.join(", ")
            )
        })?;
        let same = out
            .iter()
            .filter(|o| std::ptr::eq(o.profile, profile))
            .count() as u32;
        if same >= profile.instance_count {
            return Err(format!(
                "{ctx}: at most {} instance(s) of {} fit on a GPU",
                profile.instance_count, profile.name
            ));
        }
        let fits = |start: u32, used: &[bool; 8]| {
            (start..start + profile.memory_slices).all(|s| s < 8 && !used[s as usize])
        };
        let placement = match inst.placement {
            Some(p) => {
                if !profile.placements.contains(&p) {
                    return Err(format!(
                        "{ctx}: {} cannot start at {p} (allowed: {:?})",
                        profile.name, profile.placements
                    ));
                }
                if !fits(p, &used) {
                    return Err(format!(
                        "{ctx}: {} at placement {p} overlaps another instance",
                        profile.name
                    ));
                }
                p
            }
            None => *profile
                .placements
                .iter()
                .find(|&&p| fits(p, &used))
                .ok_or_else(|| format!("{ctx}: no free placement left for {}", profile.name))?,
        };
        for s in placement..placement + profile.memory_slices {
            used[s as usize] = true;
        }
        let uuid = match &inst.uuid {
            Some(u) if u.starts_with("MIG-") && u.len() < 80 => u.clone(),
            Some(u) => return Err(format!("{ctx}: uuid {u:?} must start with \"MIG-\"")),
            None => format!(
                "MIG-{}",
                uuid_from_seed(0x6d69_6700_0000 + ((gpu as u64) << 8) + i as u64)
            ),
        };
        let gi = inst
            .gpu_instance_id
            .unwrap_or_else(|| sku::default_gpu_instance_id(profile, placement));
        if out.iter().any(|o| o.gpu_instance_id == gi) {
            return Err(format!("{ctx}: gpu_instance_id {gi} is used twice"));
        }
        out.push(MigInstance {
            profile,
            placement,
            uuid,
            gpu_instance_id: gi,
            compute_instance_id: inst.compute_instance_id.unwrap_or(0),
        });
    }
    Ok(out)
}

fn check_unique_uuids(gpus: &[GpuDef]) -> Result<(), String> {
    let mut seen = HashSet::new();
    for g in gpus {
        let migs = g.mig.iter().flatten().map(|m| &m.uuid);
        for u in std::iter::once(&g.uuid).chain(migs) {
            if !seen.insert(u.clone()) {
                return Err(format!("uuid {u} is used twice"));
            }
        }
    }
    let mut buses = HashSet::new();
    for g in gpus {
        if !buses.insert(g.pci.bus_id()) {
            return Err(format!("pci_bus_id {} is used twice", g.pci.bus_id()));
        }
    }
    Ok(())
}

fn resolve_phase(spec: &PhaseSpec, gpus: &[GpuDef], mig: &[MigLayout]) -> Result<Phase, String> {
    let missing = |what: String, g: usize| {
        format!(
            "{what}: GPU {g} does not exist (the scenario has {})",
            gpus.len()
        )
    };
    let mut listed = vec![None; gpus.len()];
    for (i, g) in spec.gpus.iter().enumerate() {
        if g.gpu >= gpus.len() {
            return Err(missing(format!("gpus[{i}]"), g.gpu));
        }
        if listed[g.gpu].is_some() {
            return Err(format!("GPU {} is listed twice", g.gpu));
        }
        listed[g.gpu] = Some(g);
    }
    let mut procs: Vec<Vec<&ProcessSpec>> = vec![Vec::new(); gpus.len()];
    let mut pids = HashSet::new();
    for p in &spec.processes {
        if p.pid.is_some() == p.pid_file.is_some() {
            return Err(format!(
                "{}: give exactly one of `pid` and `pid_file`",
                p.label()
            ));
        }
        if p.gpu >= gpus.len() {
            return Err(missing(format!("process {}", p.label()), p.gpu));
        }
        // One pid may hold contexts on several GPUs, but not twice on one.
        if !pids.insert((p.gpu, p.pid, p.pid_file.as_ref())) {
            return Err(format!("{} is listed twice on GPU {}", p.label(), p.gpu));
        }
        procs[p.gpu].push(p);
    }
    let mut xids: Vec<Vec<u64>> = vec![Vec::new(); gpus.len()];
    for x in &spec.xids {
        if x.gpu >= gpus.len() {
            return Err(missing(format!("xid {}", x.xid), x.gpu));
        }
        xids[x.gpu].push(x.xid);
    }
    let mut activity = Vec::with_capacity(gpus.len());
    for (gi, gpu) in gpus.iter().enumerate() {
        let idle;
        let g = match listed[gi] {
            Some(g) => g,
            None => {
                idle = GpuPhaseSpec {
                    gpu: gi,
                    ..Default::default()
                };
                &idle
            }
        };
        let mut act = resolve_phase_gpu(gpu, &mig[gi], g, &procs[gi])
            .map_err(|e| format!("GPU {gi}: {e}"))?;
        act.xids = std::mem::take(&mut xids[gi]);
        activity.push(act);
    }
    Ok(Phase {
        gpus: activity,
        faults: resolve_faults(&spec.faults, gpus.len()).map_err(|e| format!("faults: {e}"))?,
        mig: mig.to_vec(),
    })
}

fn resolve_faults(specs: &[FaultSpec], gpu_count: usize) -> Result<Vec<Fault>, String> {
    specs
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if f.call != "*" && !is_known_call(&f.call) {
                return Err(format!(
                    "[{i}]: {:?} is not an NVML call this fake exports",
                    f.call
                ));
            }
            if let Some(g) = f.gpu {
                if g >= gpu_count {
                    return Err(format!("[{i}]: GPU {g} does not exist"));
                }
            }
            if f.error.is_none() && f.slow_ms.is_none() && f.crash.is_none() {
                return Err(format!("[{i}]: needs `error`, `slow_ms` or `crash`"));
            }
            if f.after_calls.is_some() && f.crash.is_none() {
                return Err(format!("[{i}]: `after_calls` needs `crash`"));
            }
            Ok(Fault {
                call: f.call.clone(),
                gpu: f.gpu,
                error: f.error.map(|e| e.code()),
                slow_ms: f.slow_ms.unwrap_or(0),
                crash: f.crash,
                after_calls: f.after_calls.unwrap_or(1).max(1),
                calls: Default::default(),
            })
        })
        .collect()
}

/// Deterministic UUID text (8-4-4-4-12 hex) from a seed, so scenarios that
/// omit UUIDs still get the same ones on every run.
pub fn uuid_from_seed(seed: u64) -> String {
    let mut x = seed;
    let mut next = || {
        // splitmix64
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let a = next();
    let b = next();
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xFFFF,
        a & 0xFFFF,
        b >> 48,
        b & 0xFFFF_FFFF_FFFF
    )
}
