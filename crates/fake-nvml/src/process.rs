//! Running-process lists and per-process utilization samples.

use crate::activity::ProcState;
use crate::scenario::ProcessKind;
use crate::state::*;
use nvml_wrapper_sys::bindings::*;
use std::os::raw::{c_uint, c_ulonglong};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Processes outside MIG report this for both instance ids (seen on the H100).
const NO_INSTANCE: u32 = 0xFFFF_FFFF;
/// The `_v3` entry size nvml-wrapper (and nvml.h since R510) compiles against.
const CALLER_STRIDE: usize = 24;

#[derive(Clone, Copy, PartialEq, Eq)]
enum List {
    Compute,
    Graphics,
    Mps,
}

fn listed(kind: ProcessKind, list: List) -> bool {
    use ProcessKind::*;
    match list {
        List::Compute => matches!(kind, Compute | ComputeGraphics | MpsClient | MpsServer),
        List::Graphics => matches!(kind, Graphics | ComputeGraphics),
        // The H100 listed MPS clients here but not the MPS server.
        List::Mps => kind == MpsClient,
    }
}

/// Lays entries out at the scenario's stride: 16 bytes is the `_v1` layout
/// (pid, memory), 24 adds the instance ids, 32 adds the confidential-compute
/// memory of the 535.43–535.86 drivers. Whatever the stride, at most
/// `capacity × 24` bytes are written — what a caller of the 24-byte ABI
/// allocated — so a mismatch garbles entries like the real drivers did, but
/// never overruns the caller's buffer.
fn encode(entries: &[(u32, u64, u32, u32)], stride: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; entries.len() * stride];
    for (i, (pid, mem, gi, ci)) in entries.iter().enumerate() {
        let e = &mut bytes[i * stride..(i + 1) * stride];
        e[0..4].copy_from_slice(&pid.to_ne_bytes());
        e[8..16].copy_from_slice(&mem.to_ne_bytes());
        if stride >= 24 {
            e[16..20].copy_from_slice(&gi.to_ne_bytes());
            e[20..24].copy_from_slice(&ci.to_ne_bytes());
        }
    }
    bytes
}

/// The scenario's processes as the driver would list them now. One named by `pid_file` is a
/// real process: the driver lists a process only while it runs, so it is left out while the
/// file is missing, holds no PID, or names a PID with no `/proc` entry.
pub(crate) fn running(procs: &[ProcState]) -> Vec<ProcState> {
    procs
        .iter()
        .filter_map(|p| {
            let Some(file) = &p.pid_file else {
                return Some(p.clone());
            };
            let pid = read_pid(file)?;
            Path::new("/proc")
                .join(pid.to_string())
                .exists()
                .then(|| ProcState { pid, ..p.clone() })
        })
        .collect()
}

fn read_pid(file: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(file).ok()?;
    text.trim().parse().ok().filter(|&pid| pid > 0)
}

fn process_list(
    name: &'static str,
    list: List,
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    entry(name, Target::Device(device), |ctx| {
        let d = ctx.dev()?;
        let gpu = ctx.gpu()?;
        // SAFETY: the caller passes null or a writable count.
        let count = unsafe { out(count)? };
        let ids = |p: &ProcState| match (p.instance, &gpu.mig) {
            (Some(i), Some(m)) => (m[i].gpu_instance_id, m[i].compute_instance_id),
            _ => (NO_INSTANCE, NO_INSTANCE),
        };
        let entries: Vec<(u32, u64, u32, u32)> = running(&ctx.act()?.processes)
            .iter()
            .filter(|p| listed(p.kind, list))
            // A MIG handle sees only its own instance; the parent sees all.
            .filter(|p| d.mig.is_none() || p.instance == d.mig)
            .map(|p| {
                let (gi, ci) = ids(p);
                (p.pid, p.memory_bytes, gi, ci)
            })
            .collect();
        let needed = entries.len() as c_uint;
        if needed == 0 {
            *count = 0;
            return Ok(());
        }
        if *count < needed {
            *count = needed;
            return Err(INSUFFICIENT_SIZE);
        }
        if infos.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let bytes = encode(&entries, ctx.world.process_stride);
        let limit = (*count as usize)
            .saturating_mul(CALLER_STRIDE)
            .min(bytes.len());
        // SAFETY: the caller said `infos` holds `*count` entries of 24 bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), infos as *mut u8, limit) };
        *count = needed;
        Ok(())
    })
}

/// # Safety
/// `count` must be null or writable; `infos` null or valid for `*count` entries.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetComputeRunningProcesses_v3",
        List::Compute,
        device,
        count,
        infos,
    )
}

/// # Safety
/// `count` must be null or writable; `infos` null or valid for `*count` entries.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        List::Graphics,
        device,
        count,
        infos,
    )
}

/// # Safety
/// `count` must be null or writable; `infos` null or valid for `*count` entries.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetMPSComputeRunningProcesses_v3",
        List::Mps,
        device,
        count,
        infos,
    )
}

static LAST_SAMPLE_US: AtomicU64 = AtomicU64::new(0);

/// Wall-clock µs like the driver's sample stamps, strictly increasing so two
/// calls in the same microsecond still see each other's samples as new.
fn sample_timestamp_us() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let prev = LAST_SAMPLE_US
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
            Some(now.max(last + 1))
        })
        .unwrap_or(0);
    now.max(prev + 1)
}

/// Whom the driver books utilization samples to, as measured on an H100 (driver 580):
/// an MPS server gets its clients' kernels and the clients get no samples; when two or more
/// processes run kernels time-sliced, each sample carries the whole device's utilization and
/// goes to one of them (modelled as the highest PID), the others reading nothing. A process
/// alone gets its own figure. Returns (pid, sm %, memory %).
pub(crate) fn booked_samples(procs: &[ProcState], device_util: u32) -> Vec<(u32, u32, u32)> {
    let server = procs.iter().find(|p| p.kind == ProcessKind::MpsServer);
    let mut out = Vec::new();
    if let Some(server) = server {
        let (sm, mem) = procs
            .iter()
            .filter(|p| matches!(p.kind, ProcessKind::MpsClient | ProcessKind::MpsServer))
            .fold((0u32, 0u32), |(s, m), p| (s + p.sm_util, m + p.mem_util));
        if sm > 0 || mem > 0 {
            out.push((server.pid, sm.min(100), mem.min(100)));
        }
    }
    let active: Vec<&ProcState> = procs
        .iter()
        .filter(|p| !matches!(p.kind, ProcessKind::MpsClient | ProcessKind::MpsServer))
        .filter(|p| p.sm_util > 0 || p.mem_util > 0)
        .collect();
    match active.as_slice() {
        [] => {}
        [one] => out.push((one.pid, one.sm_util, one.mem_util)),
        many => {
            let mem: u32 = many.iter().map(|p| p.mem_util).sum();
            if let Some(last) = many.iter().max_by_key(|p| p.pid) {
                out.push((last.pid, device_util.min(100), mem.min(100)));
            }
        }
    }
    out
}

/// Every call yields one fresh sample per active process, stamped now.
/// Processes with no SM or memory activity produce no samples, and "no
/// sample newer than lastSeenTimeStamp" is NOT_FOUND — real NVML's way of
/// saying "nothing new", which callers must treat as zero, not as an error.
///
/// # Safety
/// `count` must be null or writable; `samples` null or valid for `*count` entries.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    samples: *mut nvmlProcessUtilizationSample_t,
    count: *mut c_uint,
    last_seen: c_ulonglong,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetProcessUtilization",
        Target::Device(device),
        |ctx| {
            if ctx.full_gpu()?.mig.is_some() {
                return Err(NOT_SUPPORTED);
            }
            let count = out(count)?;
            let ts = sample_timestamp_us();
            let fresh: Vec<nvmlProcessUtilizationSample_t> = if ts > last_seen {
                let act = ctx.act()?;
                booked_samples(&running(&act.processes), act.utilization)
                    .into_iter()
                    .map(|(pid, sm, mem)| nvmlProcessUtilizationSample_t {
                        pid,
                        timeStamp: ts,
                        smUtil: sm,
                        memUtil: mem,
                        encUtil: 0,
                        decUtil: 0,
                    })
                    .collect()
            } else {
                Vec::new()
            };
            if fresh.is_empty() {
                return Err(NOT_FOUND);
            }
            let needed = fresh.len() as c_uint;
            if samples.is_null() || *count < needed {
                *count = needed;
                return Err(INSUFFICIENT_SIZE);
            }
            std::ptr::copy_nonoverlapping(fresh.as_ptr(), samples, fresh.len());
            *count = needed;
            Ok(())
        },
    )
}

#[cfg(test)]
#[path = "process_tests.rs"]
mod booking_tests;
