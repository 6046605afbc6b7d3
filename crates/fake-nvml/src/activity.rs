//! Turns one GPU's phase entry into complete readings. Anything the scenario
//! omits is derived from the processes and the SKU, so a small test scenario
//! can say only "pid 458 uses 33% SM" and still get plausible power, clocks,
//! memory and GPM values. The constants are fitted to the H100 fixtures.

use crate::devices::{find_instance, GpuDef, MigLayout};
use crate::scenario::{GpmSpec, GpuPhaseSpec, ProcessKind, ProcessSpec};

/// Memory the driver's context takes besides what processes report: the
/// fixtures show 1635 MiB used for two 810 MiB processes, 0 MiB when idle.
pub const CONTEXT_BASELINE_MIB: u64 = 12;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpmValues {
    pub graphics: f64,
    pub sm: f64,
    pub occupancy: f64,
    pub integer: f64,
    pub tensor: f64,
    pub dfma: f64,
    pub hmma: f64,
    pub imma: f64,
    pub dram: f64,
    pub fp64: f64,
    pub fp32: f64,
    pub fp16: f64,
}

impl GpmValues {
    fn fields_mut(&mut self) -> [&mut f64; 12] {
        [
            &mut self.graphics,
            &mut self.sm,
            &mut self.occupancy,
            &mut self.integer,
            &mut self.tensor,
            &mut self.dfma,
            &mut self.hmma,
            &mut self.imma,
            &mut self.dram,
            &mut self.fp64,
            &mut self.fp32,
            &mut self.fp16,
        ]
    }

    /// Fills omitted fields from NVML-style utilization; the ratios are what
    /// the H100 showed (sm ≈ 0.95 × util, occupancy ≈ 0.14 × sm, DRAM ≈ 0.8 × memory util).
    pub fn derive(spec: &GpmSpec, util: f64, mem_util: f64) -> GpmValues {
        let sm = spec.sm_activity.unwrap_or(0.95 * util);
        let tensor = spec.tensor_activity.unwrap_or(0.0);
        let dfma = spec.dfma_tensor_activity.unwrap_or(0.0);
        let imma = spec.imma_tensor_activity.unwrap_or(0.0);
        GpmValues {
            graphics: spec.graphics_activity.unwrap_or(util.max(sm)),
            sm,
            occupancy: spec.sm_occupancy.unwrap_or(0.14 * sm),
            integer: spec.integer_activity.unwrap_or(0.0),
            tensor,
            dfma,
            hmma: spec
                .hmma_tensor_activity
                .unwrap_or((tensor - dfma - imma).max(0.0)),
            imma,
            dram: spec.dram_bandwidth.unwrap_or(0.8 * mem_util),
            fp64: spec.fp64.unwrap_or(0.0),
            fp32: spec.fp32.unwrap_or(0.0),
            fp16: spec.fp16.unwrap_or(0.0),
        }
    }

    /// Explicit fields from `spec`, the rest from `fallback`.
    fn overlay(spec: &GpmSpec, fallback: &GpmValues) -> GpmValues {
        GpmValues {
            graphics: spec.graphics_activity.unwrap_or(fallback.graphics),
            sm: spec.sm_activity.unwrap_or(fallback.sm),
            occupancy: spec.sm_occupancy.unwrap_or(fallback.occupancy),
            integer: spec.integer_activity.unwrap_or(fallback.integer),
            tensor: spec.tensor_activity.unwrap_or(fallback.tensor),
            dfma: spec.dfma_tensor_activity.unwrap_or(fallback.dfma),
            hmma: spec.hmma_tensor_activity.unwrap_or(fallback.hmma),
            imma: spec.imma_tensor_activity.unwrap_or(fallback.imma),
            dram: spec.dram_bandwidth.unwrap_or(fallback.dram),
            fp64: spec.fp64.unwrap_or(fallback.fp64),
            fp32: spec.fp32.unwrap_or(fallback.fp32),
            fp16: spec.fp16.unwrap_or(fallback.fp16),
        }
    }

    fn add_scaled(&mut self, other: &GpmValues, w: f64) {
        let mut o = other.clone();
        for (a, b) in self.fields_mut().into_iter().zip(o.fields_mut()) {
            *a += *b * w;
        }
    }

    fn validate(&self) -> Result<(), String> {
        let mut copy = self.clone();
        if copy
            .fields_mut()
            .iter()
            .any(|v| !(0.0..=100.0).contains(&**v))
        {
            return Err(format!("GPM values must lie in 0..=100: {self:?}"));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct ProcState {
    /// With `pid_file`, a placeholder until [`crate::process::running`] reads the file.
    pub pid: u32,
    pub pid_file: Option<std::path::PathBuf>,
    pub kind: ProcessKind,
    /// Bytes, or u64::MAX (NVML_VALUE_NOT_AVAILABLE).
    pub memory_bytes: u64,
    pub sm_util: u32,
    pub mem_util: u32,
    /// Scenario index of the MIG instance the process runs in.
    pub instance: Option<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct MigActivity {
    pub gpm: GpmValues,
    pub memory_used_mib: u64,
}

#[derive(Debug, Clone)]
pub struct GpuActivity {
    pub lost: bool,
    pub utilization: u32,
    pub memory_utilization: u32,
    pub power_w: f64,
    pub temperature_c: u32,
    pub sm_clock_mhz: u32,
    pub mem_clock_mhz: u32,
    pub video_clock_mhz: u32,
    pub clock_reasons: u64,
    pub ecc_volatile: [u64; 2],
    pub ecc_aggregate: [u64; 2],
    pub pcie_replays: u32,
    pub pcie_tx_kbps: u32,
    pub pcie_rx_kbps: u32,
    pub memory_temperature_c: u32,
    pub encoder_utilization: u32,
    pub decoder_utilization: u32,
    pub remapped_rows: crate::scenario::RemappedRowsSpec,
    pub gpm: GpmValues,
    pub memory_used_mib: u64,
    pub processes: Vec<ProcState>,
    pub xids: Vec<u64>,
    /// Indexed like `GpuDef::mig`; empty when MIG is off.
    pub mig: Vec<MigActivity>,
}

fn pct(name: &str, v: u32) -> Result<u32, String> {
    if v > 100 {
        return Err(format!("{name} is a percentage, {v} > 100"));
    }
    Ok(v)
}

fn used_mib(procs: &[&ProcState]) -> u64 {
    let sum: u64 = procs
        .iter()
        .map(|p| {
            if p.memory_bytes == u64::MAX {
                0
            } else {
                p.memory_bytes >> 20
            }
        })
        .sum();
    if procs.is_empty() {
        0
    } else {
        sum + CONTEXT_BASELINE_MIB
    }
}

/// `xids` is left empty; the caller fills it from the phase.
pub fn resolve_phase_gpu(
    gpu: &GpuDef,
    layout: &MigLayout,
    spec: &GpuPhaseSpec,
    procs: &[&ProcessSpec],
) -> Result<GpuActivity, String> {
    let sku = gpu.sku;
    let mut processes = Vec::with_capacity(procs.len());
    for p in procs {
        let instance = match (&gpu.mig, &p.mig_instance) {
            (Some(_), Some(r)) => {
                Some(find_instance(gpu, layout, r).map_err(|e| format!("{}: {e}", p.label()))?)
            }
            (Some(_), None) => {
                return Err(format!(
                    "{}: MIG is enabled, so the process needs `mig_instance`",
                    p.label()
                ))
            }
            (None, Some(_)) => {
                return Err(format!(
                    "{}: `mig_instance` given but the GPU has no mig section",
                    p.label()
                ))
            }
            (None, None) => None,
        };
        processes.push(ProcState {
            pid: p.pid.unwrap_or(0),
            pid_file: p.pid_file.clone(),
            kind: p.kind,
            memory_bytes: if p.memory_unavailable {
                u64::MAX
            } else {
                p.memory_mib << 20
            },
            sm_util: pct(&format!("{} sm_util", p.label()), p.sm_util)?,
            mem_util: pct(&format!("{} mem_util", p.label()), p.mem_util)?,
            instance,
        });
    }
    let sum_util = |filter: &dyn Fn(&ProcState) -> bool, f: fn(&ProcState) -> u32| -> f64 {
        processes
            .iter()
            .filter(|p| filter(p))
            .map(f)
            .sum::<u32>()
            .min(100) as f64
    };

    let mut mig = Vec::new();
    let (derived_util, derived_mem_util, fallback_gpm) = match &gpu.mig {
        None => {
            if !spec.mig_gpm.is_empty() {
                return Err("mig_gpm given but the GPU has no mig section".into());
            }
            let util = sum_util(&|_| true, |p| p.sm_util);
            let mem = sum_util(&|_| true, |p| p.mem_util);
            let u = spec.utilization.map(f64::from).unwrap_or(util);
            let m = spec.memory_utilization.map(f64::from).unwrap_or(mem);
            (util, mem, GpmValues::derive(&GpmSpec::default(), u, m))
        }
        Some(instances) => {
            let mut explicit = vec![None; instances.len()];
            for (r, g) in &spec.mig_gpm {
                let i = find_instance(gpu, layout, r).map_err(|e| format!("mig_gpm: {e}"))?;
                explicit[i] = Some(g);
            }
            let (mut util, mut mem) = (0.0, 0.0);
            let mut weighted = GpmValues::default();
            // Slots of instances that do not exist in this phase stay idle.
            mig.resize_with(instances.len(), MigActivity::default);
            for (i, inst) in instances.iter().enumerate() {
                if !layout.contains(i) {
                    continue;
                }
                let in_i = |p: &ProcState| p.instance == Some(i);
                let iu = sum_util(&in_i, |p| p.sm_util);
                let im = sum_util(&in_i, |p| p.mem_util);
                let gpm = GpmValues::derive(explicit[i].unwrap_or(&GpmSpec::default()), iu, im);
                gpm.validate().map_err(|e| format!("mig_gpm[{i}]: {e}"))?;
                let w = inst.profile.slices as f64 / 7.0;
                util += iu * w;
                mem += im * w;
                weighted.add_scaled(&gpm, w);
                let procs: Vec<&ProcState> = processes.iter().filter(|p| in_i(p)).collect();
                let used = used_mib(&procs);
                if used > inst.profile.memory_mib {
                    return Err(format!(
                        "MIG instance {i} ({}) holds {} MiB of processes, more than its {} MiB",
                        inst.profile.name, used, inst.profile.memory_mib
                    ));
                }
                mig[i] = MigActivity {
                    gpm,
                    memory_used_mib: used,
                };
            }
            (util.min(100.0), mem.min(100.0), weighted)
        }
    };

    let util = match spec.utilization {
        Some(u) => pct("utilization", u)? as f64,
        None => derived_util,
    };
    let mem_util = match spec.memory_utilization {
        Some(u) => pct("memory_utilization", u)? as f64,
        None => derived_mem_util,
    };
    let gpm = GpmValues::overlay(&spec.gpm, &fallback_gpm);
    gpm.validate()?;

    let limit_w = gpu.power_limit_mw as f64 / 1000.0;
    let power_w = match spec.power_watts {
        Some(p) if p >= 0.0 && p.is_finite() => p,
        Some(p) => return Err(format!("power_watts {p} is not a power")),
        // Board power rises roughly linearly with utilization on the fixtures
        // (74 W idle, 325 W at 37 %, 357 W at 42 %).
        None => sku.idle_power_w + (limit_w - sku.idle_power_w) * 0.9 * util / 100.0,
    };

    let memory_used_mib = match spec.memory_used_mib {
        Some(m) => m,
        None if gpu.mig.is_some() => mig.iter().map(|m| m.memory_used_mib).sum(),
        None => used_mib(&processes.iter().collect::<Vec<_>>()),
    };
    let usable = sku.memory_total_mib - sku.memory_reserved_mib;
    if memory_used_mib > usable {
        return Err(format!(
            "{memory_used_mib} MiB used, but only {usable} MiB are usable on {}",
            sku.key
        ));
    }

    let busy = util > 0.0;
    let clock_reasons = match &spec.clock_event_reasons {
        Some(list) => list.iter().fold(0, |acc, r| acc | r.bit()),
        None if busy => 0,
        None => 0x1,
    };
    Ok(GpuActivity {
        lost: spec.lost,
        utilization: util.round() as u32,
        memory_utilization: mem_util.round() as u32,
        power_w,
        temperature_c: spec
            .temperature_celsius
            .unwrap_or((sku.idle_temp_c + 0.35 * util).round() as u32),
        sm_clock_mhz: spec.sm_clock_mhz.unwrap_or(if busy {
            sku.sm_clock_max_mhz
        } else {
            sku.sm_clock_idle_mhz
        }),
        mem_clock_mhz: spec.memory_clock_mhz.unwrap_or(sku.mem_clock_mhz),
        video_clock_mhz: if busy {
            sku.video_clock_max_mhz
        } else {
            sku.video_clock_idle_mhz
        },
        clock_reasons,
        ecc_volatile: [spec.ecc.corrected, spec.ecc.uncorrected],
        ecc_aggregate: [
            spec.ecc.aggregate_corrected.unwrap_or(spec.ecc.corrected),
            spec.ecc
                .aggregate_uncorrected
                .unwrap_or(spec.ecc.uncorrected),
        ],
        pcie_replays: spec.pcie_replays,
        pcie_tx_kbps: spec.pcie_tx_kbps.unwrap_or((950.0 + 1500.0 * util) as u32),
        pcie_rx_kbps: spec.pcie_rx_kbps.unwrap_or((550.0 + 4000.0 * util) as u32),
        // HBM runs a few degrees above the die under load on the H100s seen.
        memory_temperature_c: spec
            .memory_temperature_celsius
            .unwrap_or((sku.idle_temp_c + 2.0 + 0.4 * util).round() as u32),
        encoder_utilization: pct("encoder_utilization", spec.encoder_utilization)?,
        decoder_utilization: pct("decoder_utilization", spec.decoder_utilization)?,
        remapped_rows: spec.remapped_rows,
        gpm,
        memory_used_mib,
        processes,
        xids: Vec::new(),
        mig,
    })
}
