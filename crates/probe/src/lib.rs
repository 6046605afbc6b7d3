//! tessera's CUDA probe: a library the CUDA driver loads into a workload process when
//! `CUDA_INJECTION64_PATH` names it. It attaches CUPTI without kernel records, which costs a
//! launch nothing; when tessera says the process's device is shared (another process there
//! may run kernels: `wire::Control`) it turns kernel activity records on, sums the union of
//! kernel spans, and once a second sends the totals to tessera over a UNIX socket. Records
//! once on cost every launch 1–2 µs even after they go off again (docs/validation.md), so a
//! process alone on its device never pays it, and NVML's own figure stands for it.
//! A process that launches so fast that the records would cost it more than its budget is
//! traced in duty cycles instead (`duty`), and says which milliseconds it traced.
//!
//! It must never hurt its host: nothing here panics across the C boundary, it blocks no CUDA
//! call (records are folded in CUPTI's own buffer-completion callback, the socket is written
//! from a thread of its own), and on any CUPTI error it turns itself off. Without tessera's
//! socket it does not turn CUPTI on at all, so an unused probe costs nothing. When the
//! process starts to exit it stops tracing and leaves CUPTI alone (`stop_at_exit`).
//!
//! CUPTI is loaded at run time, so nothing CUDA is needed to build this crate.

pub mod duty;
pub mod record_log;
pub mod solo;
pub mod spans;
pub mod wire;

use std::io::Write;
use std::os::raw::{c_int, c_void};
use std::os::unix::net::UnixStream;
use std::panic::catch_unwind;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use duty::{slot_traced, Governor, DEFAULT_SLOT_NS};
use record_log::RecordLog;
use solo::{KernelShape, SoloDurations};
use spans::Spans;
use wire::{
    Control, ControlReader, Frame, DEFAULT_SOCKET, FLAG_ALONE, FLAG_DISABLED, FLAG_FULL,
    FLAG_NO_CUPTI, FLAG_PROFILER,
};

type CuptiResult = c_int;
const CUPTI_SUCCESS: CuptiResult = 0;
/// Another client holds CUPTI's one callback subscription: a profiler (the PyTorch profiler,
/// Nsight Systems, cuda-gdb) runs in the process.
const CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CuptiResult = 39;
const ACTIVITY_KIND_KERNEL: u32 = 3;
const ACTIVITY_KIND_CONCURRENT_KERNEL: u32 = 10;
const CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: u32 = 1;
/// Every kernel record version starts with kind, cache config, registers and two cache enums;
/// start and end timestamps (ns) follow at these offsets.
const KERNEL_START_OFFSET: usize = 16;
const KERNEL_END_OFFSET: usize = 24;
/// Launch shape (grid x/y/z, block x/y/z), dynamic shared memory and the name pointer sit at
/// the same offsets in every kernel record version since `CUpti_ActivityKernel4`.
const KERNEL_GRID_OFFSET: usize = 52;
const KERNEL_DYNAMIC_SHARED_OFFSET: usize = 80;
const KERNEL_NAME_OFFSET: usize = 104;
/// Kernels of one CUDA graph launch share the launch's correlation id (record log only).
const KERNEL_CORRELATION_OFFSET: usize = 92;
/// The graph node that launched the kernel, 0 outside graphs: in every kernel record version
/// since `CUpti_ActivityKernel5` (CUDA 11.0), the only versions CUPTI 11+ emits.
const KERNEL_GRAPH_NODE_OFFSET: usize = 144;
/// Large buffers mean few completions: the per-kernel cost stays one record write.
const DEFAULT_BUFFER_BYTES: usize = 4 << 20;
const BUFFER_ALIGN: usize = 8;
const REPORT_EVERY: Duration = Duration::from_secs(1);

type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
type SubscribeFn =
    unsafe extern "C" fn(*mut *mut c_void, *const c_void, *mut c_void) -> CuptiResult;

struct Cupti {
    _lib: libloading::Library,
    enable: unsafe extern "C" fn(u32) -> CuptiResult,
    disable: unsafe extern "C" fn(u32) -> CuptiResult,
    next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u32) -> CuptiResult,
    flush_all: unsafe extern "C" fn(u32) -> CuptiResult,
    register: unsafe extern "C" fn(RequestFn, CompleteFn) -> CuptiResult,
    /// The clock kernel records are stamped with; without it there is no timeline.
    timestamp: Option<unsafe extern "C" fn(*mut u64) -> CuptiResult>,
    /// Records CUPTI had no buffer room for, per context and stream.
    dropped_records: Option<unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult>,
    /// The callback API's subscription, which CUPTI grants one client at a time: only asked
    /// whether another client holds it (`cupti_owner`), never kept.
    subscribe: Option<SubscribeFn>,
    unsubscribe: Option<unsafe extern "C" fn(*mut c_void) -> CuptiResult>,
}

static CUPTI: OnceLock<Cupti> = OnceLock::new();
static SPANS: Mutex<Spans> = Mutex::new(Spans::new());
static SOLO: Mutex<SoloDurations> = Mutex::new(SoloDurations::new());
static DISABLED: AtomicBool = AtomicBool::new(false);
/// No CUPTI could be loaded: the probe only says so, once a second (`FLAG_NO_CUPTI`).
static NO_CUPTI: AtomicBool = AtomicBool::new(false);
/// Another CUPTI client in the process holds CUPTI (`cupti_owner`): activity records go to
/// it, not to the probe. Unlike `DISABLED` this ends when CUPTI is free again. Meanwhile the
/// probe makes no activity call at all, so that the tenant's profiler loses nothing to it.
static LOST: AtomicBool = AtomicBool::new(false);
static DROPPED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// Kernel records CUPTI handed over without both timestamps (a forced flush of a kernel still
/// queued or running): their time is lost, so tessera treats them like dropped records.
static INCOMPLETE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// Length of a duty-cycle slot; every probe on a node must use the same.
static SLOT_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(DEFAULT_SLOT_NS);
static BUFFER_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_BUFFER_BYTES);
/// `cuptiActivityFlushAll` flag for the once-a-second flush.
static FLUSH_FLAG: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// The process is exiting: the probe's thread makes no more CUPTI calls.
static EXITING: AtomicBool = AtomicBool::new(false);
/// The process that started the probe (a forked child inherits the statics, not the thread).
static PROBE_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// Measurement only (`read_tuning`): attach CUPTI this long after `cuInit`, so one process
/// times its launches both before and after.
static START_DELAY_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// Measurement only: CUPTI attached but kernel records never turned on, which tells CUPTI's
/// cost of being there from that of having had records on (docs/validation.md).
static RECORDS_NEVER: AtomicBool = AtomicBool::new(false);
/// Measurement only: kernel records on from the start, whatever tessera says (the behaviour
/// before records were turned on only where a device is shared).
static RECORDS_ALWAYS: AtomicBool = AtomicBool::new(false);
/// tessera said this process's device is shared: kernel records are wanted.
static SHARED: AtomicBool = AtomicBool::new(false);
/// Measurement only: where to note when kernel records went on and off, and what each
/// toggle cost the probe's thread.
static TRACE_LOG: OnceLock<PathBuf> = OnceLock::new();
/// Measurement only: every kernel record and its solo estimate (`record_log`), and the file
/// they go to.
static RECORD_LOG: OnceLock<(PathBuf, Mutex<RecordLog>)> = OnceLock::new();
/// Held by the probe's thread across each of its CUPTI calls, so that the exit handler can
/// wait for one under way before CUDA's own teardown begins.
static CUPTI_GATE: Mutex<()> = Mutex::new(());

fn cupti_candidates() -> Vec<PathBuf> {
    let mut c: Vec<PathBuf> = std::env::var_os("TESSERA_PROBE_CUPTI")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    for name in [
        "libcupti.so",
        "libcupti.so.13",
        "libcupti.so.12",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
        "/usr/local/cuda/lib64/libcupti.so",
        "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so",
        // arm64 servers (Grace Hopper, Grace Blackwell): CUDA's target directory is sbsa-linux.
        "/usr/local/cuda/targets/sbsa-linux/lib/libcupti.so",
    ] {
        c.push(PathBuf::from(name));
    }
    c
}

fn load_cupti() -> Option<Cupti> {
    for path in cupti_candidates() {
        // SAFETY: loading CUPTI runs its initialisers, which expect only a CUDA process.
        let Ok(lib) = (unsafe { libloading::Library::new(&path) }) else {
            continue;
        };
        // SAFETY: the symbol types are CUPTI's documented C signatures.
        let cupti = unsafe {
            let enable = *lib.get(b"cuptiActivityEnable\0").ok()?;
            let disable = *lib.get(b"cuptiActivityDisable\0").ok()?;
            let next_record = *lib.get(b"cuptiActivityGetNextRecord\0").ok()?;
            let flush_all = *lib.get(b"cuptiActivityFlushAll\0").ok()?;
            let register = *lib.get(b"cuptiActivityRegisterCallbacks\0").ok()?;
            let timestamp = lib.get(b"cuptiGetTimestamp\0").ok().map(|f| *f);
            let dropped_records = lib
                .get(b"cuptiActivityGetNumDroppedRecords\0")
                .ok()
                .map(|f| *f);
            let subscribe = lib.get(b"cuptiSubscribe\0").ok().map(|f| *f);
            let unsubscribe = lib.get(b"cuptiUnsubscribe\0").ok().map(|f| *f);
            Cupti {
                _lib: lib,
                enable,
                disable,
                next_record,
                flush_all,
                register,
                timestamp,
                dropped_records,
                subscribe,
                unsubscribe,
            }
        };
        return Some(cupti);
    }
    None
}

fn layout() -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(BUFFER_BYTES.load(Ordering::Relaxed), BUFFER_ALIGN).ok()
}

unsafe extern "C" fn buffer_requested(buf: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let _ = catch_unwind(|| {
        if buf.is_null() || size.is_null() || max.is_null() {
            return;
        }
        // SAFETY: CUPTI passes valid out-pointers; a null buffer tells it to drop records.
        unsafe {
            *max = 0;
            match layout() {
                Some(l) if !DISABLED.load(Ordering::Relaxed) => {
                    let p = std::alloc::alloc(l);
                    *buf = p;
                    *size = if p.is_null() { 0 } else { l.size() };
                }
                _ => {
                    *buf = std::ptr::null_mut();
                    *size = 0;
                }
            }
        }
    });
}

unsafe extern "C" fn buffer_completed(
    ctx: *mut c_void,
    stream: u32,
    buf: *mut u8,
    _size: usize,
    valid: usize,
) {
    let _ = catch_unwind(|| {
        if buf.is_null() {
            return;
        }
        if let (Some(cupti), Ok(mut spans), Ok(mut solo)) = (CUPTI.get(), SPANS.lock(), SOLO.lock())
        {
            let mut record: *mut u32 = std::ptr::null_mut();
            // SAFETY: `buf` holds `valid` bytes of records; CUPTI hands back pointers into it,
            // and every kernel record is at least KERNEL_NAME_OFFSET + 8 bytes long (the graph
            // node, further on, is read only inside the valid bytes).
            unsafe {
                while (cupti.next_record)(buf, valid, &mut record) == CUPTI_SUCCESS {
                    if record.is_null() {
                        break;
                    }
                    let kind = *record;
                    if kind == ACTIVITY_KIND_CONCURRENT_KERNEL || kind == ACTIVITY_KIND_KERNEL {
                        let base = record.cast::<u8>();
                        let start = base.add(KERNEL_START_OFFSET).cast::<u64>().read_unaligned();
                        let end = base.add(KERNEL_END_OFFSET).cast::<u64>().read_unaligned();
                        let u32_at = |off: usize| base.add(off).cast::<u32>().read_unaligned();
                        let shape = KernelShape {
                            name: base.add(KERNEL_NAME_OFFSET).cast::<u64>().read_unaligned(),
                            grid: [0, 4, 8].map(|o| u32_at(KERNEL_GRID_OFFSET + o)),
                            block: [12, 16, 20].map(|o| u32_at(KERNEL_GRID_OFFSET + o)),
                            dynamic_shared: u32_at(KERNEL_DYNAMIC_SHARED_OFFSET),
                            // Never past the valid bytes, whatever record version a
                            // CUPTI older than 11 would hand over.
                            graph_node: if (base as usize - buf as usize)
                                + KERNEL_GRAPH_NODE_OFFSET
                                + 8
                                <= valid
                            {
                                base.add(KERNEL_GRAPH_NODE_OFFSET)
                                    .cast::<u64>()
                                    .read_unaligned()
                            } else {
                                0
                            },
                            context: 0,
                        };
                        if start == 0 || end <= start {
                            INCOMPLETE.fetch_add(1, Ordering::Relaxed);
                            spans.push(0, 0, 0, 0);
                            continue;
                        }
                        let placed = solo.launches.place(shape);
                        let counts = solo.observe(placed, end - start, end);
                        spans.push(start, end, counts.solo, counts.floor);
                        if let Some(log) = RECORD_LOG.get().and_then(|(_, l)| l.lock().ok()) {
                            log_record(log, shape, (start, end), counts.solo, base);
                        }
                    }
                }
            }
            spans.flush_batch();
            // Lost records mean the spans miss time: tessera then withholds this process's
            // figures instead of publishing an undercount. Whether CUPTI's count restarts after
            // each call or not, any growth here means a loss, which is all tessera reads.
            // At exit CUPTI may hand over buffers of contexts already destroyed: asking about
            // those is not safe, and nothing will be reported any more.
            if let Some(count) = cupti
                .dropped_records
                .filter(|_| !EXITING.load(Ordering::Relaxed))
            {
                let mut n = 0usize;
                // SAFETY: CUPTI writes one size_t for the context and stream it just served.
                if unsafe { count(ctx, stream, &mut n) } == CUPTI_SUCCESS && n > 0 {
                    let n = u32::try_from(n).unwrap_or(u32::MAX);
                    let _ = DROPPED.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                        Some(d.saturating_add(n))
                    });
                }
            }
        }
        if let Some(l) = layout() {
            // SAFETY: every buffer CUPTI returns was allocated by `buffer_requested` with `l`.
            unsafe { std::alloc::dealloc(buf, l) };
        }
    });
}

/// Logs one kernel record (`record_log`).
///
/// # Safety
/// `base` points at a kernel record at least `KERNEL_NAME_OFFSET + 8` bytes long.
unsafe fn log_record(
    mut log: MutexGuard<'_, RecordLog>,
    shape: KernelShape,
    span: (u64, u64),
    solo_ns: u64,
    base: *const u8,
) {
    // SAFETY: the caller's record is long enough; CUPTI keeps kernel names alive for the
    // process and shares one string among a function's records.
    let correlation = unsafe {
        base.add(KERNEL_CORRELATION_OFFSET)
            .cast::<u32>()
            .read_unaligned()
    };
    let name = || {
        let p = shape.name as *const std::os::raw::c_char;
        if p.is_null() {
            return String::new();
        }
        // SAFETY: as above: a NUL-terminated C string or null.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned()
    };
    log.kernel(shape, name, span, solo_ns, correlation);
}

/// Writes what the record log gathered since the last call to its file, with the clocks.
fn drain_record_log() {
    let Some((path, log)) = RECORD_LOG.get() else {
        return;
    };
    let Ok(mut log) = log.lock() else { return };
    if let Some(now) = cupti_now() {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        log.note(&format!("T {now} {unix}"));
    }
    let text = log.take();
    drop(log);
    if text.is_empty() {
        return;
    }
    let mut file = path.clone().into_os_string();
    file.push(format!(".{}", std::process::id()));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
    {
        let _ = f.write_all(text.as_bytes());
    }
}

fn disable(cupti: &Cupti) {
    DISABLED.store(true, Ordering::Relaxed);
    // SAFETY: plain CUPTI calls; failures leave nothing to undo.
    unsafe {
        let _ = (cupti.disable)(ACTIVITY_KIND_CONCURRENT_KERNEL);
    }
}

fn cupti_now() -> Option<u64> {
    let f = CUPTI.get()?.timestamp?;
    let mut t = 0u64;
    // SAFETY: CUPTI writes one u64 through the pointer.
    (unsafe { f(&mut t) } == CUPTI_SUCCESS && t > 0).then_some(t)
}

/// The frame to send; `full` on a new connection, so tessera starts from all the probe keeps.
fn snapshot(full: bool, records_on: bool) -> Frame {
    let failed = DISABLED.load(Ordering::Relaxed);
    let lost = !failed && LOST.load(Ordering::Relaxed);
    // Records off (the device is not shared) measure nothing: reported as off, like a failure,
    // so that tessera reads NVML's figure rather than this silence as idle. Records lost to a
    // profiler measure nothing either, and say why: tessera then withholds more than this
    // process's figure (its co-tenants' are split against its timeline).
    let disabled = failed || lost || !records_on;
    let alone = !failed && !lost && !records_on;
    let mut frame = Frame {
        flags: if disabled { FLAG_DISABLED } else { 0 }
            | if NO_CUPTI.load(Ordering::Relaxed) {
                FLAG_NO_CUPTI
            } else {
                0
            }
            | if alone { FLAG_ALONE } else { 0 }
            | if lost { FLAG_PROFILER } else { 0 }
            | if full { FLAG_FULL } else { 0 },
        dropped: DROPPED.load(Ordering::Relaxed),
        incomplete: INCOMPLETE.load(Ordering::Relaxed),
        ..Frame::default()
    };
    if let Ok(mut s) = SPANS.lock() {
        frame.busy_ns = s.busy_ns;
        frame.kernels = s.kernels;
        if let Some(now) = cupti_now().filter(|_| !disabled) {
            frame.now_ns = now;
            frame.complete_from = s.complete_from;
            frame.traced_ns = Some(s.traced_total(now));
            (frame.first_bucket, frame.buckets) = s.take_buckets(full, now);
        }
    }
    frame
}

/// Turns kernel records on or off, and notes when on the timeline. CUPTI may hand over
/// buffers from inside these calls, so the spans are never locked across them.
fn set_tracing(cupti: &Cupti, on: bool) {
    let call = Instant::now();
    if on {
        // SAFETY: a plain CUPTI call from a thread of our own.
        if unsafe { (cupti.enable)(ACTIVITY_KIND_CONCURRENT_KERNEL) } != CUPTI_SUCCESS {
            disable(cupti);
            return;
        }
        if let Some(now) = cupti_now() {
            if let Ok(mut s) = SPANS.lock() {
                s.trace_on(now);
            }
            note_toggle("on", now, call.elapsed());
        }
    } else {
        let now = cupti_now();
        if let (Some(now), Ok(mut s)) = (now, SPANS.lock()) {
            s.trace_off(now);
        }
        // SAFETY: as above.
        if unsafe { (cupti.disable)(ACTIVITY_KIND_CONCURRENT_KERNEL) } != CUPTI_SUCCESS {
            disable(cupti);
        }
        if let Some(now) = now {
            note_toggle("off", now, call.elapsed());
        }
    }
}

/// One line per toggle in `TESSERA_PROBE_TRACE_LOG`, for `overhead_within.py`.
fn note_toggle(what: &str, cupti_ns: u64, took: Duration) {
    if let Some(mut log) = RECORD_LOG.get().and_then(|(_, l)| l.lock().ok()) {
        log.note(&format!("R {what} {cupti_ns}"));
    }
    if let Some(path) = TRACE_LOG.get() {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{what} {cupti_ns} {}", took.as_nanos());
        }
    }
}

/// Kernels, traced ns and busy ns so far: what the governor judges the last second by.
fn progress() -> Option<(u64, u64, u64)> {
    let now = cupti_now()?;
    let s = SPANS.lock().ok()?;
    Some((s.kernels, s.traced_total(now), s.busy_ns))
}

/// The gate for a CUPTI call of the probe's thread; none once the process is exiting.
fn cupti_gate() -> Option<MutexGuard<'static, ()>> {
    let gate = CUPTI_GATE.lock().unwrap_or_else(PoisonError::into_inner);
    (!EXITING.load(Ordering::SeqCst)).then_some(gate)
}

/// The probe's one thread: follows the duty-cycle schedule when throttled, and once a second
/// flushes completed records, re-judges the traced fraction and reports to tessera,
/// reconnecting when tessera restarts. It ends when the process starts to exit.
fn reporter(socket: PathBuf, budget: f64) {
    let mut conn: Option<(u32, UnixStream)> = None;
    let mut governor = Governor::new(budget);
    let mut tracing = RECORDS_ALWAYS.load(Ordering::Relaxed);
    let mut control = ControlReader::default();
    // Whether the last frame sent went with records on: the first with them on again must be
    // full, since tessera dropped this process's timeline while they were off.
    let mut reported_on = false;
    // CUPTI's clock when the probe last found CUPTI its own (`keep_owner`).
    let mut last_owned: Option<u64> = None;
    let delay = START_DELAY_MS.load(Ordering::Relaxed);
    if delay > 0 {
        std::thread::sleep(Duration::from_millis(delay));
        let Some(_gate) = cupti_gate() else { return };
        if let Some(cupti) = CUPTI.get() {
            attach(cupti);
        }
    }
    let mut last = cupti_gate()
        .and_then(|_gate| progress())
        .unwrap_or_default();
    // The first report goes at once: the connection it opens is where tessera says the
    // device is shared, so a process that starts beside another turns records on a second
    // sooner (measured on the H100: two seconds after attaching, when it first reported
    // after a second).
    let mut next_report = Instant::now();
    loop {
        let now = Instant::now();
        let mut wake = next_report;
        let slot_ns = SLOT_NS.load(Ordering::Relaxed);
        if governor.fraction < 1.0 {
            let Some(_gate) = cupti_gate() else { return };
            if let Some(ns) = cupti_now() {
                let to_slot = Duration::from_nanos(slot_ns - ns % slot_ns);
                wake = wake.min(now + to_slot);
            }
        }
        std::thread::sleep(wake.saturating_duration_since(now));
        // What tessera said since the last wake applies from this one: records go on within
        // a second of the message, before this second's report.
        if let Some((_, s)) = conn.as_ref().filter(|(p, _)| *p == std::process::id()) {
            if !read_control(s, &mut control) {
                lost_tessera(&mut conn, &mut control);
            }
        }
        let Some(gate) = cupti_gate() else { return };
        let cupti = CUPTI.get().filter(|_| !DISABLED.load(Ordering::Relaxed));
        let ours = || cupti.filter(|_| !LOST.load(Ordering::Relaxed));
        // Checked before the records' schedule, so that records regained go on at once.
        let report_due = Instant::now() >= next_report;
        if let Some(cupti) =
            cupti.filter(|_| report_due && (records_wanted() || LOST.load(Ordering::Relaxed)))
        {
            keep_owner(cupti, &mut tracing, &mut last_owned);
        } else if report_due {
            // Records off: when they go on again, nothing is known of CUPTI's owner until the
            // next check.
            last_owned = None;
        }
        if let (Some(cupti), Some(ns)) = (ours(), cupti_now()) {
            let want = records_wanted() && slot_traced(ns / slot_ns, governor.fraction);
            if want != tracing {
                set_tracing(cupti, want);
                tracing = want;
            }
        }
        if !report_due {
            continue;
        }
        next_report = (next_report + REPORT_EVERY).max(Instant::now());
        if let Some(cupti) = ours() {
            // SAFETY: a plain CUPTI call from a thread of our own.
            if unsafe { (cupti.flush_all)(FLUSH_FLAG.load(Ordering::Relaxed)) } != CUPTI_SUCCESS {
                disable(cupti);
            }
        }
        if let Some(p) = progress() {
            governor.update(
                p.0.saturating_sub(last.0),
                p.1.saturating_sub(last.1),
                p.2.saturating_sub(last.2),
            );
            last = p;
        }
        let pid = std::process::id();
        // A forked child must not speak on its parent's connection, nor keep what tessera
        // told its parent: its own connection starts with records off.
        if conn.as_ref().is_some_and(|(p, _)| *p != pid) {
            lost_tessera(&mut conn, &mut control);
        }
        drain_record_log();
        let records_on = records_wanted();
        let full = conn.is_none() || (records_on && !reported_on);
        let frame = snapshot(full, records_on);
        // While a profiler holds CUPTI tessera drops this process's timeline, as while records
        // are off: the first frame with them back must be full.
        reported_on = records_on && !LOST.load(Ordering::Relaxed);
        drop(gate);
        if conn.is_none() {
            conn = UnixStream::connect(&socket).ok().map(|s| {
                let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                (pid, s)
            });
        }
        if let Some((_, s)) = conn.as_mut() {
            if s.write_all(&frame.encode()).is_err() {
                lost_tessera(&mut conn, &mut control);
            }
        }
    }
}

/// Whether another client holds CUPTI, asked the one way CUPTI answers: its callback API takes
/// one subscriber at a time. A profiler in the process (the PyTorch profiler subscribes when
/// it first starts; Nsight Systems and cuda-gdb hold it throughout) has replaced the probe's
/// activity callbacks with its own, so the kernel records go to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// No other subscriber: the probe's callbacks are CUPTI's.
    Free,
    Other,
    /// CUPTI has no callback API, or answered something else: nothing learnt.
    Unknown,
}

/// The subscriber's callback, which no enabled domain ever calls.
extern "C" fn ignore_callback(_: *mut c_void, _: u32, _: u32, _: *const c_void) {}

fn cupti_owner(cupti: &Cupti) -> Owner {
    let (Some(subscribe), Some(unsubscribe)) = (cupti.subscribe, cupti.unsubscribe) else {
        return Owner::Unknown;
    };
    let mut handle: *mut c_void = std::ptr::null_mut();
    let callback = ignore_callback as *const c_void;
    // SAFETY: CUPTI's documented call; a subscriber with no domain enabled is called for
    // nothing, and is let go at once. A client that subscribes in the microseconds it is held
    // gets CUPTI's "another subscriber" answer, as beside any tool.
    match unsafe { subscribe(&mut handle, callback, std::ptr::null_mut()) } {
        CUPTI_SUCCESS => {
            // SAFETY: the handle CUPTI just gave.
            unsafe { unsubscribe(handle) };
            Owner::Free
        }
        CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => Owner::Other,
        _ => Owner::Unknown,
    }
}

/// Once a second, where records matter (the device is shared, or they were lost): whether the
/// probe still owns CUPTI's activity records. Lost, it stops claiming time from the last
/// moment it knew CUPTI was its own, and makes no more activity call (turning kernel records
/// off would take them from the profiler too). Free again (a profiler that let CUPTI go,
/// as `cuptiFinalize` does, takes every client's callbacks and records with it), it registers
/// again and records go back on at the next wake.
fn keep_owner(cupti: &Cupti, tracing: &mut bool, last_owned: &mut Option<u64>) {
    let lost = LOST.load(Ordering::Relaxed);
    match cupti_owner(cupti) {
        Owner::Other if !lost => {
            LOST.store(true, Ordering::Relaxed);
            let now = cupti_now();
            // Never found its own since records went on: none of their stretch is claimed.
            if let Ok(mut s) = SPANS.lock() {
                s.trace_off(last_owned.unwrap_or(0));
            }
            *tracing = false;
            if let Some(now) = now {
                note_toggle("lost", now, Duration::ZERO);
            }
        }
        Owner::Free if lost => {
            // SAFETY: registering our callbacks, as at attach.
            if unsafe { (cupti.register)(buffer_requested, buffer_completed) } != CUPTI_SUCCESS {
                disable(cupti);
                return;
            }
            LOST.store(false, Ordering::Relaxed);
            *tracing = false;
            *last_owned = cupti_now();
            if let Some(now) = *last_owned {
                note_toggle("regained", now, Duration::ZERO);
            }
        }
        Owner::Free | Owner::Unknown if !lost => *last_owned = cupti_now(),
        _ => {}
    }
}

/// The connection to tessera is gone: nobody says the device is shared any more, so records
/// go off at the next wake, and a new connection starts from an empty control stream.
fn lost_tessera(conn: &mut Option<(u32, UnixStream)>, control: &mut ControlReader) {
    *conn = None;
    *control = ControlReader::default();
    SHARED.store(false, Ordering::Relaxed);
}

/// Whether kernel records should be on now (before the duty-cycle schedule).
fn records_wanted() -> bool {
    !RECORDS_NEVER.load(Ordering::Relaxed)
        && (RECORDS_ALWAYS.load(Ordering::Relaxed) || SHARED.load(Ordering::Relaxed))
}

/// The most control bytes read per wake: a message is 16 bytes and comes on a change, so a
/// peer that sends more gets the rest read at later wakes (or never), not more of our time.
const CONTROL_READ_MAX: usize = 256;

/// Reads what tessera sent without waiting, and applies the latest valid message. False when
/// tessera closed the connection.
fn read_control(s: &UnixStream, reader: &mut ControlReader) -> bool {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; CONTROL_READ_MAX];
    // SAFETY: `recv` writes at most `buf.len()` bytes into `buf`; MSG_DONTWAIT never blocks.
    let n = unsafe {
        libc::recv(
            s.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    match n {
        0 => false,
        n if n < 0 => {
            let e = std::io::Error::last_os_error().kind();
            e == std::io::ErrorKind::WouldBlock || e == std::io::ErrorKind::Interrupted
        }
        n => {
            if let Some(Control { shared }) = reader.feed(&buf[..n as usize]) {
                SHARED.store(shared, Ordering::Relaxed);
            }
            true
        }
    }
}

/// Registered with `atexit` when tracing starts, so it runs before the exit handlers of the
/// libraries loaded earlier — the framework's and CUDA's teardown. Measured on the H100: a
/// process whose probe kept tracing into that teardown could crash at exit (3 of 4 test
/// processes, docs/validation.md). So the probe stops tracing first and calls CUPTI no
/// more; it waits for a call of its own thread under way, but not for long, and never in a
/// forked child, which has no probe thread and may have inherited the gate locked.
extern "C" fn stop_at_exit() {
    let _ = catch_unwind(|| {
        EXITING.store(true, Ordering::SeqCst);
        if std::process::id() != PROBE_PID.load(Ordering::Relaxed) {
            return;
        }
        let give_up = Instant::now() + Duration::from_millis(500);
        let _gate = loop {
            match CUPTI_GATE.try_lock() {
                Ok(gate) => break gate,
                Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(TryLockError::WouldBlock) if Instant::now() < give_up => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(TryLockError::WouldBlock) => return,
            }
        };
        // Kernel records belong to the profiler that holds CUPTI: not ours to turn off.
        if let Some(cupti) = CUPTI.get().filter(|_| !LOST.load(Ordering::Relaxed)) {
            disable(cupti);
        }
    });
}

/// Knobs for measuring the probe itself (docs/validation.md); the defaults are what ships.
/// `TESSERA_PROBE_BUFFER_BYTES`: CUPTI buffer size (64 KiB to 64 MiB);
/// `TESSERA_PROBE_SLOT_MS`: duty-cycle slot length (5 to 1000 ms; all probes on a node alike);
/// `TESSERA_PROBE_FLUSH=forced`: the once-a-second flush also hands over buffers whose last
/// kernel has not finished (its record comes without timestamps and counts as incomplete);
/// `TESSERA_PROBE_START_MS`: attach CUPTI that long after `cuInit` (before and after in one
/// process); `TESSERA_PROBE_TRACE_LOG`: a file noting each toggle of kernel records;
/// `TESSERA_PROBE_RECORDS=never`: attach CUPTI but never turn kernel records on (the probe
/// then reports itself off); `TESSERA_PROBE_RECORDS=always`: records on from the start, as
/// if the device were always shared; `TESSERA_PROBE_RECORD_LOG`: every kernel record and its
/// solo estimate to that file, `.<pid>` appended (`record_log`), at most
/// `TESSERA_PROBE_RECORD_LOG_MB` megabytes of it (1 to 4096; default 24).
/// `TESSERA_PROBE_OVERHEAD`, which ships, is read by `initialize`.
fn read_tuning() {
    if let Some(n) = std::env::var("TESSERA_PROBE_BUFFER_BYTES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        BUFFER_BYTES.store(n.clamp(64 << 10, 64 << 20), Ordering::Relaxed);
    }
    if let Some(ms) = std::env::var("TESSERA_PROBE_SLOT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        SLOT_NS.store(ms.clamp(5, 1_000) * 1_000_000, Ordering::Relaxed);
    }
    if let Some(ms) = std::env::var("TESSERA_PROBE_START_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        START_DELAY_MS.store(ms.min(600_000), Ordering::Relaxed);
    }
    match std::env::var("TESSERA_PROBE_RECORDS").as_deref() {
        Ok("never") => RECORDS_NEVER.store(true, Ordering::Relaxed),
        Ok("always") => RECORDS_ALWAYS.store(true, Ordering::Relaxed),
        _ => {}
    }
    if let Some(path) = std::env::var_os("TESSERA_PROBE_TRACE_LOG") {
        let _ = TRACE_LOG.set(PathBuf::from(path));
    }
    if let Some(path) = std::env::var_os("TESSERA_PROBE_RECORD_LOG") {
        let cap = std::env::var("TESSERA_PROBE_RECORD_LOG_MB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .map_or(record_log::DEFAULT_CAP_BYTES, |mb| mb.clamp(1, 4096) << 20);
        let _ = RECORD_LOG.set((PathBuf::from(path), Mutex::new(RecordLog::new(cap))));
    }
    if std::env::var("TESSERA_PROBE_FLUSH").is_ok_and(|v| v == "forced") {
        FLUSH_FLAG.store(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, Ordering::Relaxed);
    }
}

fn initialize() -> bool {
    let socket = std::env::var_os("TESSERA_PROBE_SOCKET")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
    // No tessera on this node: stay out of the way entirely.
    if !socket.exists() {
        return true;
    }
    let Some(cupti) = load_cupti() else {
        // Said, not hidden: without it tessera cannot tell this process from one without the
        // probe. The reporter makes no CUPTI call when there is none.
        NO_CUPTI.store(true, Ordering::Relaxed);
        DISABLED.store(true, Ordering::Relaxed);
        PROBE_PID.store(std::process::id(), Ordering::Relaxed);
        return std::thread::Builder::new()
            .name("tessera-probe".into())
            .spawn(move || reporter(socket, duty::budget_from(None)))
            .is_ok();
    };
    read_tuning();
    let budget = duty::budget_from(std::env::var("TESSERA_PROBE_OVERHEAD").ok().as_deref());
    let cupti = CUPTI.get_or_init(|| cupti);
    PROBE_PID.store(std::process::id(), Ordering::Relaxed);
    // SAFETY: `stop_at_exit` is an `extern "C" fn()` that never unwinds.
    if unsafe { libc::atexit(stop_at_exit) } != 0 {
        // Without a way to stop before the teardown, do not start.
        return true;
    }
    if START_DELAY_MS.load(Ordering::Relaxed) == 0 {
        attach(cupti);
    }
    std::thread::Builder::new()
        .name("tessera-probe".into())
        .spawn(move || reporter(socket, budget))
        .is_ok()
}

/// Starts the timeline and registers with CUPTI; kernel records go on only when wanted
/// (`records_wanted`: with the shipped setting, not before tessera says the device is shared).
fn attach(cupti: &Cupti) {
    let call = Instant::now();
    let records = records_wanted();
    if let (Some(now), Ok(mut spans)) = (cupti_now(), SPANS.lock()) {
        spans.start_at(now, records);
    }
    // SAFETY: registering our callbacks and enabling one activity kind, as CUPTI documents.
    let ok = unsafe {
        (cupti.register)(buffer_requested, buffer_completed) == CUPTI_SUCCESS
            && (!records || (cupti.enable)(ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS)
    };
    if !ok {
        disable(cupti);
    } else if RECORDS_NEVER.load(Ordering::Relaxed) {
        // Without records there is no timeline to claim: reported as off, so that tessera
        // withholds the process's figures rather than read its silence as idle.
        DISABLED.store(true, Ordering::Relaxed);
    }
    if let Some(now) = cupti_now() {
        note_toggle("attach", now, call.elapsed());
    }
}

/// Called by the CUDA driver at `cuInit` when `CUDA_INJECTION64_PATH` names this library.
/// Returns 1 (success) in every case the process should go on, which is every case.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    let _ = catch_unwind(initialize);
    1
}
