//! Process-global NVML state and the wrapper every export goes through.
//!
//! NVML is a process-wide singleton with a reference-counted init, so the
//! fake is too: one `Runtime` behind a mutex, created by the first
//! `nvmlInit*` and dropped by the matching last `nvmlShutdown`.

use crate::activity::GpuActivity;
use crate::calls::base_name;
use crate::devices::{GpuDef, MigInstance};
use crate::handles::{EventSetState, GpmSampleRec};
use crate::scenario::{CrashKind, Scenario};
use crate::world::World;
use nvml_wrapper_sys::bindings::*;
use std::collections::HashMap;
use std::os::raw::{c_char, c_uint};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub type Ret = nvmlReturn_t;
pub type NvResult<T = ()> = Result<T, Ret>;

pub const SUCCESS: Ret = nvmlReturn_enum_NVML_SUCCESS;
pub const UNINITIALIZED: Ret = nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
pub const INVALID_ARGUMENT: Ret = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
pub const NOT_SUPPORTED: Ret = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
pub const NOT_FOUND: Ret = nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
pub const INSUFFICIENT_SIZE: Ret = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
pub const TIMEOUT: Ret = nvmlReturn_enum_NVML_ERROR_TIMEOUT;
pub const GPU_IS_LOST: Ret = nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST;
pub const VERSION_MISMATCH: Ret = nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
pub const UNKNOWN: Ret = nvmlReturn_enum_NVML_ERROR_UNKNOWN;

pub const SCENARIO_ENV: &str = "TESSERA_FAKE_NVML_SCENARIO";
/// Unix time in µs at which the scenario clock starts (default: the process's first init).
pub const EPOCH_ENV: &str = "TESSERA_FAKE_NVML_EPOCH_US";
/// How many times slower the scenario's phases come (≥ 1, default 1): for slow hosts.
pub const TIMELINE_SCALE_ENV: &str = "TESSERA_FAKE_NVML_TIMELINE_SCALE";

pub struct Runtime {
    pub world: Arc<World>,
    pub started: Instant,
    /// `started` on the CPU clock NVML stamps samples with (µs since the epoch).
    pub started_epoch_us: u64,
    refcount: u32,
    pub event_sets: HashMap<u64, EventSetState>,
    pub gpm_samples: HashMap<u64, Option<GpmSampleRec>>,
}

impl Runtime {
    /// Milliseconds since the first `nvmlInit`; the scenario clock.
    pub fn now_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }
}

static STATE: Mutex<Option<Runtime>> = Mutex::new(None);
/// Ids for event sets and GPM samples; never reused, so a handle kept across
/// shutdown and re-init is rejected instead of aliasing a new object.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// A panic in one call must not wedge every later call, so a poisoned lock is taken over.
pub fn lock() -> MutexGuard<'static, Option<Runtime>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` with the panic boundary every export needs.
pub fn guard(f: impl FnOnce() -> NvResult) -> Ret {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => UNKNOWN,
    }
}

/// A device handle names a GPU and optionally one of its MIG instances.
/// Handles are tagged integers, never dereferenced, so a stale or foreign
/// pointer is recognised and rejected with INVALID_ARGUMENT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevRef {
    pub gpu: usize,
    /// Scenario index of the MIG instance.
    pub mig: Option<usize>,
}

const DEVICE_TAG: u64 = 0xFA4E_0000_0000;
const TAG_MASK: u64 = 0xFFFF_0000_0000;

pub fn device_handle(d: DevRef) -> nvmlDevice_t {
    let slot = d.mig.map(|m| m as u64 + 1).unwrap_or(0);
    (DEVICE_TAG | ((d.gpu as u64 + 1) << 8) | slot) as usize as nvmlDevice_t
}

pub fn decode_device(world: &World, h: nvmlDevice_t) -> Option<DevRef> {
    let v = h as usize as u64;
    if v & TAG_MASK != DEVICE_TAG {
        return None;
    }
    let gpu = ((v & 0xFFFF_FF00) >> 8).checked_sub(1)? as usize;
    let slot = (v & 0xFF) as usize;
    let def = world.gpus.get(gpu)?;
    let mig = match slot {
        0 => None,
        s if s <= def.mig.as_ref()?.len() => Some(s - 1),
        _ => return None,
    };
    Some(DevRef { gpu, mig })
}

/// What a call is about, for handle checks, fault matching and lost GPUs.
#[derive(Clone, Copy)]
pub enum Target {
    None,
    Device(nvmlDevice_t),
    /// A GPU addressed by index (nvmlDeviceGetHandleByIndex); an out-of-range
    /// index is left for the call itself to reject.
    Index(u32),
}

pub struct Ctx<'a> {
    pub rt: &'a mut Runtime,
    pub world: Arc<World>,
    pub t_ms: f64,
    pub phase: usize,
    pub dev: Option<DevRef>,
}

impl Ctx<'_> {
    pub fn dev(&self) -> NvResult<DevRef> {
        self.dev.ok_or(INVALID_ARGUMENT)
    }

    pub fn gpu(&self) -> NvResult<&GpuDef> {
        Ok(&self.world.gpus[self.dev()?.gpu])
    }

    pub fn act(&self) -> NvResult<&GpuActivity> {
        Ok(&self.world.phase(self.phase).gpus[self.dev()?.gpu])
    }

    /// For calls real NVML does not answer on MIG device handles.
    pub fn full_gpu(&self) -> NvResult<&GpuDef> {
        if self.dev()?.mig.is_some() {
            return Err(NOT_SUPPORTED);
        }
        self.gpu()
    }

    pub fn mig_instance(&self) -> NvResult<Option<&MigInstance>> {
        let d = self.dev()?;
        Ok(match (d.mig, &self.world.gpus[d.gpu].mig) {
            (Some(i), Some(list)) => list.get(i),
            _ => None,
        })
    }
}

/// Latency of the calls that are slow on a real H100 (REFERENCE.md, median of 200).
fn realistic_latency(name: &str) -> Duration {
    match name {
        "nvmlDeviceGetTotalEnergyConsumption" => Duration::from_micros(3952),
        "nvmlDeviceGetPcieThroughput" => Duration::from_micros(20779),
        "nvmlDeviceGetMigMode" => Duration::from_micros(149),
        _ => Duration::ZERO,
    }
}

/// What matching faults do to one call.
#[derive(Default)]
struct Effect {
    /// The first matching fault's error.
    error: Option<Ret>,
    /// The summed delay of every matching fault.
    delay: Duration,
    /// A crash fault whose turn has come.
    crash: Option<CrashKind>,
}

fn faults_for(world: &World, phase: usize, name: &str, gpu: Option<usize>) -> Effect {
    let mut effect = Effect {
        delay: if world.realistic_latency {
            realistic_latency(name)
        } else {
            Duration::ZERO
        },
        ..Effect::default()
    };
    let phase_faults = &world.phase(phase).faults;
    for f in world.global_faults.iter().chain(phase_faults) {
        let call_matches = if f.call == "*" {
            // "*" is for simulating a sick GPU, so it spares calls that are
            // about no GPU at all (init, shutdown, event-set bookkeeping).
            gpu.is_some()
        } else {
            f.call == name || f.call == base_name(name)
        };
        let gpu_matches = match f.gpu {
            None => true,
            Some(g) => gpu == Some(g),
        };
        if call_matches && gpu_matches {
            effect.delay += Duration::from_millis(f.slow_ms);
            if effect.error.is_none() {
                effect.error = f.error;
            }
            if let Some(kind) = f.crash {
                if f.calls.fetch_add(1, Ordering::Relaxed) + 1 >= f.after_calls {
                    effect.crash = Some(kind);
                }
            }
        }
    }
    effect
}

/// Ends the process the way a faulting driver library does: by a signal, not an error code.
fn crash(kind: CrashKind, why: &str) -> ! {
    eprintln!("fake-nvml: crashing on purpose ({why})");
    if kind == CrashKind::Segv {
        // A handler the host installed (Rust's stack-overflow check, tessera's crash note)
        // runs first, as it would for a real fault; those reset the default action and return,
        // so the second raise ends the process.
        // SAFETY: raising a signal at this process.
        unsafe {
            libc::raise(libc::SIGSEGV);
            libc::raise(libc::SIGSEGV);
        }
    }
    std::process::abort()
}

/// GPM calls in flight in this process, for `gpm_race_crash`.
static GPM_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// Marks a GPM call in flight for the scenario's hold time, crashing if another thread's GPM
/// call already is, as two GPUs' workers sampling GPM at once did on the real library.
struct GpmFlight;

impl GpmFlight {
    fn enter(name: &str, hold_ms: Option<u64>) -> Option<GpmFlight> {
        let hold = hold_ms?;
        if !name.starts_with("nvmlGpm") || name == "nvmlGpmQueryDeviceSupport" {
            return None;
        }
        if GPM_IN_FLIGHT.fetch_add(1, Ordering::SeqCst) > 0 {
            crash(
                CrashKind::Segv,
                &format!("{name} while another GPM call was in flight"),
            );
        }
        std::thread::sleep(Duration::from_millis(hold));
        Some(GpmFlight)
    }
}

impl Drop for GpmFlight {
    fn drop(&mut self) {
        GPM_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The common path of every export except init/shutdown/errorString:
/// initialized? valid handle? injected fault or delay? lost GPU? then `body`.
pub fn entry(name: &'static str, target: Target, body: impl FnOnce(&mut Ctx) -> NvResult) -> Ret {
    guard(|| {
        let (
            Effect {
                error,
                delay,
                crash: crash_now,
            },
            race_hold,
        ) = {
            let g = lock();
            let rt = g.as_ref().ok_or(UNINITIALIZED)?;
            let gpu = resolve_target(&rt.world, target)?.map(|d| d.gpu);
            let effect = faults_for(
                &rt.world,
                rt.world.timeline.phase_at(rt.now_ms()),
                name,
                gpu,
            );
            (effect, rt.world.gpm_race_hold_ms)
        };
        if !delay.is_zero() {
            // Sleep unlocked: a slow call must not stall calls on other threads.
            std::thread::sleep(delay);
        }
        if let Some(kind) = crash_now {
            crash(kind, name);
        }
        let _in_flight = GpmFlight::enter(name, race_hold);
        let mut g = lock();
        let rt = g.as_mut().ok_or(UNINITIALIZED)?;
        if let Some(code) = error {
            return Err(code);
        }
        let world = rt.world.clone();
        let dev = resolve_target(&world, target)?;
        let t_ms = rt.now_ms();
        let phase = world.timeline.phase_at(t_ms);
        if let Some(d) = dev {
            if world.phase(phase).gpus[d.gpu].lost {
                return Err(GPU_IS_LOST);
            }
            // The handle of a MIG instance destroyed by a re-partition is stale.
            if d.mig
                .is_some_and(|slot| !world.phase(phase).mig[d.gpu].contains(slot))
            {
                return Err(INVALID_ARGUMENT);
            }
        }
        let mut ctx = Ctx {
            rt,
            world,
            t_ms,
            phase,
            dev,
        };
        body(&mut ctx)
    })
}

fn resolve_target(world: &World, target: Target) -> NvResult<Option<DevRef>> {
    match target {
        Target::None => Ok(None),
        Target::Device(h) => decode_device(world, h).map(Some).ok_or(INVALID_ARGUMENT),
        Target::Index(i) => Ok(((i as usize) < world.gpus.len()).then_some(DevRef {
            gpu: i as usize,
            mig: None,
        })),
    }
}

/// `nvmlInit_v2` / `nvmlInitWithFlags`: the first call loads the scenario.
pub fn init(name: &'static str) -> Ret {
    guard(|| {
        let mut g = lock();
        if let Some(rt) = g.as_mut() {
            rt.refcount += 1;
            return Ok(());
        }
        let world = load_world().map_err(|msg| {
            eprintln!("fake-nvml: {msg}");
            UNKNOWN
        })?;
        let Effect {
            error,
            delay,
            crash: crash_now,
        } = faults_for(&world, 0, name, None);
        drop(g);
        std::thread::sleep(delay);
        if let Some(kind) = crash_now {
            crash(kind, name);
        }
        if let Some(code) = error {
            return Err(code);
        }
        let mut g = lock();
        match g.as_mut() {
            // Another thread finished its init while we slept.
            Some(rt) => rt.refcount += 1,
            None => {
                let (started, started_epoch_us) = clock_origin();
                *g = Some(Runtime {
                    world: Arc::new(world),
                    started,
                    started_epoch_us,
                    refcount: 1,
                    event_sets: HashMap::new(),
                    gpm_samples: HashMap::new(),
                })
            }
        }
        Ok(())
    })
}

/// Where the scenario clock starts: at this init, or at the Unix time in
/// [`EPOCH_ENV`] (µs) when set, so that worker processes started (or restarted) at different
/// moments play one node's timeline.
fn clock_origin() -> (Instant, u64) {
    let now = Instant::now();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let epoch_us = std::env::var(EPOCH_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&e| e <= now_us);
    match epoch_us {
        Some(e) => {
            let since = Duration::from_micros(now_us - e);
            (now.checked_sub(since).unwrap_or(now), e)
        }
        None => (now, now_us),
    }
}

fn load_world() -> Result<World, String> {
    let path = std::env::var_os(SCENARIO_ENV)
        .ok_or_else(|| format!("{SCENARIO_ENV} is not set; point it at a scenario YAML file"))?;
    let mut scenario = Scenario::load(std::path::Path::new(&path))?;
    if let Some(v) = std::env::var_os(TIMELINE_SCALE_ENV) {
        let v = v.to_string_lossy();
        let scale = v
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("{TIMELINE_SCALE_ENV}={v} is not a number"))?;
        scenario
            .stretch_timeline(scale)
            .map_err(|e| format!("{TIMELINE_SCALE_ENV}: {e}"))?;
    }
    World::from_scenario(&scenario).map_err(|e| {
        format!(
            "{}: invalid scenario: {e}",
            std::path::Path::new(&path).display()
        )
    })
}

pub fn shutdown() -> Ret {
    guard(|| {
        let mut g = lock();
        let rt = g.as_mut().ok_or(UNINITIALIZED)?;
        rt.refcount -= 1;
        if rt.refcount == 0 {
            *g = None;
        }
        Ok(())
    })
}

/// Null out-pointers are INVALID_ARGUMENT in NVML.
///
/// # Safety
/// `p` must be null or valid for writes of `T`.
pub unsafe fn out<'a, T>(p: *mut T) -> NvResult<&'a mut T> {
    p.as_mut().ok_or(INVALID_ARGUMENT)
}

/// Copies `s` and a NUL into a caller buffer of `len` bytes.
///
/// # Safety
/// `buf` must be null or valid for `len` bytes.
pub unsafe fn write_cstr(buf: *mut c_char, len: c_uint, s: &str) -> NvResult {
    if buf.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    if s.len() + 1 > len as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, buf, s.len());
    *buf.add(s.len()) = 0;
    Ok(())
}

/// Copies `s` into a fixed C char array, truncating and NUL-terminating.
pub fn fill_array(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}
