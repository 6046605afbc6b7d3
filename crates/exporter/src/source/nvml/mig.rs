//! MIG instances of a MIG-enabled GPU. The layout is read every cycle (it can change live);
//! what never changes for a given instance UUID is cached.

use std::collections::HashMap;

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::device::gpm_sampled;
use super::ledger::{CallLedger, Outcome};
use super::GpuState;
use crate::model::{MemoryBytes, MigSample};

#[derive(Clone)]
struct MigStatic {
    gpu_instance_id: u32,
    compute_instance_id: u32,
    profile: String,
    slices: u32,
}

#[derive(Default)]
pub struct MigCache {
    by_uuid: HashMap<String, MigStatic>,
    /// Keyed by instance UUID, not GPU instance id: a destroyed and recreated instance gets
    /// the same id, and a GPM delta across the two would mix different instances.
    gpm: HashMap<String, super::gate::GpmSlot>,
    /// MIG device handles of the last cycle, by instance UUID, for per-instance process lists.
    pub handles: Vec<(String, Device<'static>)>,
}

/// The profile is the part of the MIG device's name after " MIG " ("NVIDIA H100 80GB HBM3 MIG 1g.10gb").
fn profile_from_name(name: &str) -> String {
    name.rsplit_once(" MIG ")
        .map(|(_, p)| p.trim().to_owned())
        .unwrap_or_default()
}

type RawIdFn = unsafe extern "C" fn(
    nvml_wrapper_sys::bindings::nvmlDevice_t,
    *mut std::os::raw::c_uint,
) -> nvml_wrapper_sys::bindings::nvmlReturn_t;

/// GPU and compute instance ids are not wrapped by nvml-wrapper 0.13.
fn raw_id<E: std::fmt::Display>(
    sym: &Result<RawIdFn, E>,
    d: &Device<'static>,
) -> Result<u32, NvmlError> {
    let sym = sym
        .as_ref()
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    let mut id: std::os::raw::c_uint = 0;
    // SAFETY: the handle is valid while NVML is loaded; the out-pointer is a live local.
    let rc = unsafe { sym(d.handle(), &mut id) };
    nvml_wrapper::error::nvml_try(rc)?;
    Ok(id)
}

fn read_static(
    ledger: &mut CallLedger,
    key: &str,
    nvml: &Nvml,
    d: &Device<'static>,
) -> Option<MigStatic> {
    let lib = nvml.lib();
    let gpu_instance_id = ledger
        .call(key, "gpu_instance_id", || {
            raw_id(&lib.nvmlDeviceGetGpuInstanceId, d)
        })
        .ok()?;
    let compute_instance_id = ledger
        .call(key, "compute_instance_id", || {
            raw_id(&lib.nvmlDeviceGetComputeInstanceId, d)
        })
        .ok()
        .unwrap_or(0);
    let profile = ledger
        .call(key, "mig_name", || d.name())
        .ok()
        .map(|n| profile_from_name(&n))
        .unwrap_or_default();
    let slices = ledger
        .call(key, "mig_attributes", || d.attributes())
        .ok()
        .map(|a| a.gpu_instance_slice_count)
        .unwrap_or(0);
    Some(MigStatic {
        gpu_instance_id,
        compute_instance_id,
        profile,
        slices,
    })
}

pub fn sample_instances(
    ledger: &mut CallLedger,
    gpu: &mut GpuState,
    nvml: &'static Nvml,
) -> Vec<MigSample> {
    let key = gpu.key.clone();
    let parent = &gpu.handle;
    let cache = &mut gpu.mig;
    cache.handles.clear();
    let Some(max) = ledger
        .call(&key, "mig_device_count", || parent.mig_device_count())
        .ok()
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for slot in 0..max {
        let handle = match ledger.timed("mig_device_by_index", || parent.mig_device_by_index(slot))
        {
            Ok(h) => h,
            // An empty slot, not an error.
            Err(NvmlError::NotFound) | Err(NvmlError::InvalidArg) => continue,
            Err(e) => {
                let _: Outcome<()> = ledger.record(&key, "mig_device_by_index", &e);
                continue;
            }
        };
        let Some(uuid) = ledger.call(&key, "mig_uuid", || handle.uuid()).ok() else {
            continue;
        };
        let info = match cache.by_uuid.get(&uuid) {
            Some(i) => i.clone(),
            None => {
                let Some(i) = read_static(ledger, &key, nvml, &handle) else {
                    continue;
                };
                cache.by_uuid.insert(uuid.clone(), i.clone());
                i
            }
        };
        let memory = ledger
            .call(&key, "mig_memory_info", || handle.memory_info())
            .ok()
            .map(|m| MemoryBytes {
                total: m.total,
                used: m.used,
                reserved: m.reserved,
            });
        let gpm = if gpu.gpm.is_some() {
            let previous = cache.gpm.entry(uuid.clone()).or_default();
            gpm_sampled(ledger, &key, "gpm_mig_sample", nvml, previous, || {
                parent.gpm_mig_sample(info.gpu_instance_id)
            })
            .0
        } else {
            None
        };
        out.push(MigSample {
            uuid: uuid.clone(),
            gpu_instance_id: info.gpu_instance_id,
            compute_instance_id: info.compute_instance_id,
            profile: info.profile,
            slices: info.slices,
            memory,
            gpm,
        });
        cache.handles.push((uuid, handle));
    }
    // Instances destroyed by a live re-partition must not leave cached state behind.
    cache
        .by_uuid
        .retain(|u, _| out.iter().any(|m| &m.uuid == u));
    cache.gpm.retain(|u, _| out.iter().any(|m| &m.uuid == u));
    out
}

#[cfg(test)]
#[path = "mig_tests.rs"]
mod tests;
