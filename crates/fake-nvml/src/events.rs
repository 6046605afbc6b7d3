//! Event sets delivering the scenario's XIDs.
//!
//! An XID "happens" when its phase starts (again on every loop of a
//! repeating timeline). A set registered for a GPU receives the XIDs of the
//! phase that was current at registration and of every later phase start,
//! each once, queued until someone waits — like the driver's event queue.

use crate::handles::{EventSetState, Registration};
use crate::state::*;
use nvml_wrapper_sys::bindings::*;
use std::os::raw::{c_uint, c_ulonglong};
use std::time::{Duration, Instant};

const SUPPORTED: u64 = (nvmlEventTypeSingleBitEccError
    | nvmlEventTypeDoubleBitEccError
    | nvmlEventTypePState
    | nvmlEventTypeXidCriticalError
    | nvmlEventTypeClock
    | nvmlEventMigConfigChange) as u64;
const XID: u64 = nvmlEventTypeXidCriticalError as u64;
/// How often a waiter re-reads the timeline, so XIDs of a new phase arrive promptly.
const POLL_STEP: Duration = Duration::from_millis(10);

const SET_TAG: u64 = 0xFA50_0000_0000;
const TAG_MASK: u64 = 0xFFFF_0000_0000;

fn set_handle(id: u64) -> nvmlEventSet_t {
    (SET_TAG | id) as usize as nvmlEventSet_t
}

fn set_id(h: nvmlEventSet_t) -> NvResult<u64> {
    let v = h as usize as u64;
    if v & TAG_MASK != SET_TAG {
        return Err(INVALID_ARGUMENT);
    }
    Ok(v & !TAG_MASK)
}

/// # Safety
/// `types` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    types: *mut c_ulonglong,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetSupportedEventTypes",
        Target::Device(device),
        |ctx| {
            ctx.full_gpu()?;
            *out(types)? = SUPPORTED;
            Ok(())
        },
    )
}

#[no_mangle]
pub extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    types: c_ulonglong,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    entry("nvmlDeviceRegisterEvents", Target::Device(device), |ctx| {
        let gpu = ctx.full_gpu()?.index;
        if types & !SUPPORTED != 0 {
            return Err(NOT_SUPPORTED);
        }
        let from = ctx.world.timeline.phase_start(ctx.t_ms) - 0.5;
        let state = ctx
            .rt
            .event_sets
            .get_mut(&set_id(set)?)
            .ok_or(INVALID_ARGUMENT)?;
        match state.registrations.iter_mut().find(|r| r.gpu == gpu) {
            Some(r) => r.types |= types,
            None => state.registrations.push(Registration {
                gpu,
                types,
                scanned_until: from,
            }),
        }
        Ok(())
    })
}

/// # Safety
/// `set` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    entry("nvmlEventSetCreate", Target::None, |ctx| {
        let dst = out(set)?;
        let id = next_id();
        ctx.rt.event_sets.insert(id, EventSetState::default());
        *dst = set_handle(id);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    entry("nvmlEventSetFree", Target::None, |ctx| {
        ctx.rt
            .event_sets
            .remove(&set_id(set)?)
            .map(|_| ())
            .ok_or(INVALID_ARGUMENT)
    })
}

/// Queues XIDs of phase starts since the last scan; pops one into `data`.
fn poll(rt: &mut Runtime, id: u64, data: *mut nvmlEventData_t) -> NvResult<bool> {
    let now = rt.now_ms();
    let world = rt.world.clone();
    let state = rt.event_sets.get_mut(&id).ok_or(INVALID_ARGUMENT)?;
    let mut found: Vec<(f64, usize, u64)> = Vec::new();
    for reg in &mut state.registrations {
        if reg.types & XID != 0 {
            for (at, phase) in world.timeline.starts_in(reg.scanned_until, now) {
                for xid in &world.phase(phase).gpus[reg.gpu].xids {
                    found.push((at, reg.gpu, *xid));
                }
            }
        }
        reg.scanned_until = reg.scanned_until.max(now);
    }
    found.sort_by(|a, b| a.0.total_cmp(&b.0));
    state
        .queue
        .extend(found.into_iter().map(|(_, g, x)| (g, x)));
    let Some((gpu, xid)) = state.queue.pop_front() else {
        return Ok(false);
    };
    // SAFETY: checked non-null by the caller; points to an nvmlEventData_t.
    let dst = unsafe { out(data)? };
    *dst = nvmlEventData_t {
        device: device_handle(DevRef { gpu, mig: None }),
        eventType: XID,
        eventData: xid,
        gpuInstanceId: 0xFFFF_FFFF,
        computeInstanceId: 0xFFFF_FFFF,
    };
    Ok(true)
}

/// Returns at once when an XID is queued; otherwise polls the timeline in
/// small steps (without holding the global lock) until `timeout_ms`.
///
/// # Safety
/// `data` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(timeout_ms as u64);
    let mut delivered = false;
    let first = entry("nvmlEventSetWait_v2", Target::None, |ctx| {
        if data.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        delivered = poll(ctx.rt, set_id(set)?, data)?;
        Ok(())
    });
    if first != SUCCESS || delivered {
        return first;
    }
    guard(|| {
        let id = set_id(set)?;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(TIMEOUT);
            }
            std::thread::sleep(POLL_STEP.min(deadline - now));
            let mut g = lock();
            let rt = g.as_mut().ok_or(UNINITIALIZED)?;
            if poll(rt, id, data)? {
                return Ok(());
            }
        }
    })
}
