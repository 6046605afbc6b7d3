//! The scenario's GPUs and MIG instances once resolved: what both a phase's activity and the
//! world are built from, so neither has to import the other.

use crate::scenario::InstanceRef;
use crate::sku::{MigProfile, Sku};

/// Instances as slots of `GpuDef::mig`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigLayout {
    /// In the order the scenario lists them, which `mig_instance: <index>` refers to.
    pub listed: Vec<usize>,
    /// In the order NVML enumerates them (by GPU instance id), for
    /// `nvmlDeviceGetMigDeviceHandleByIndex`.
    pub enumerated: Vec<usize>,
}

impl MigLayout {
    pub(crate) fn new(instances: &[MigInstance], listed: Vec<usize>) -> MigLayout {
        let mut enumerated = listed.clone();
        enumerated.sort_by_key(|&i| {
            (
                instances[i].gpu_instance_id,
                instances[i].compute_instance_id,
            )
        });
        MigLayout { listed, enumerated }
    }

    pub fn contains(&self, slot: usize) -> bool {
        self.listed.contains(&slot)
    }
}

#[derive(Debug)]
pub struct GpuDef {
    pub index: usize,
    pub sku: &'static Sku,
    pub uuid: String,
    pub pci: PciAddr,
    pub minor_number: u32,
    pub compute_mode: u32,
    pub virtualization: u32,
    pub ecc_enabled: bool,
    pub power_limit_mw: u32,
    pub energy_start_mj: u64,
    /// `None` when MIG mode is disabled. Every instance that exists in any phase, `gpus[].mig`
    /// first (so their slots are their indexes there); `Phase::mig` says which exist when.
    pub mig: Option<Vec<MigInstance>>,
}

#[derive(Debug)]
pub struct MigInstance {
    pub profile: &'static MigProfile,
    pub placement: u32,
    pub uuid: String,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

#[derive(Debug, Clone)]
pub struct PciAddr {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

impl PciAddr {
    pub fn bus_id(&self) -> String {
        format!(
            "{:08X}:{:02X}:{:02X}.{:X}",
            self.domain, self.bus, self.device, self.function
        )
    }

    pub fn bus_id_legacy(&self) -> String {
        format!(
            "{:04X}:{:02X}:{:02X}.{:X}",
            self.domain, self.bus, self.device, self.function
        )
    }

    pub(crate) fn parse(s: &str) -> Option<PciAddr> {
        let (domain, rest) = s.split_once(':')?;
        let (bus, rest) = rest.split_once(':')?;
        let (device, function) = rest.split_once('.')?;
        Some(PciAddr {
            domain: u32::from_str_radix(domain, 16).ok()?,
            bus: u32::from_str_radix(bus, 16).ok().filter(|b| *b <= 0xFF)?,
            device: u32::from_str_radix(device, 16)
                .ok()
                .filter(|d| *d <= 0x1F)?,
            function: u32::from_str_radix(function, 16).ok().filter(|f| *f <= 7)?,
        })
    }
}

/// Maps an instance reference from the scenario onto the instance's slot in `gpu.mig`:
/// an index counts in the layout of the phase, a UUID must exist during it.
pub fn find_instance(gpu: &GpuDef, layout: &MigLayout, r: &InstanceRef) -> Result<usize, String> {
    let Some(instances) = &gpu.mig else {
        return Err(format!(
            "GPU {} has no mig section, so MIG instance {r} does not exist",
            gpu.index
        ));
    };
    match r {
        InstanceRef::Index(i) => layout.listed.get(*i).copied().ok_or_else(|| {
            format!(
                "GPU {} has {} MIG instance(s), no instance {i}",
                gpu.index,
                layout.listed.len()
            )
        }),
        InstanceRef::Uuid(u) => instances
            .iter()
            .position(|m| &m.uuid == u)
            .filter(|&slot| layout.contains(slot))
            .ok_or_else(|| format!("GPU {} has no MIG instance {u}", gpu.index)),
    }
}
