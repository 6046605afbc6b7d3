//! tessera's CUDA probe: a library the CUDA driver loads into a workload process when
//! `CUDA_INJECTION64_PATH` names it. It turns on CUPTI's kernel activity records, sums the
//! union of kernel spans, and once a second sends the totals to tessera over a UNIX socket.
//! A process that launches so fast that the records would cost it more than its budget is
//! traced in duty cycles instead (`duty`), and says which milliseconds it traced.
//!
//! It must never hurt its host: nothing here panics across the C boundary, it blocks no CUDA
//! call (records are folded in CUPTI's own buffer-completion callback, the socket is written
//! from a thread of its own), and on any CUPTI error it turns itself off. Without tessera's
//! socket it does not turn CUPTI on at all, so an unused probe costs nothing.
//!
//! CUPTI is loaded at run time, so nothing CUDA is needed to build this crate.

pub mod detach;
pub mod duty;
pub mod solo;
pub mod spans;
pub mod wire;

use std::io::Write;
use std::os::raw::{c_int, c_void};
use std::os::unix::net::UnixStream;
use std::panic::catch_unwind;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use detach::{Attachment, DETACHED, FINALIZING, REQUESTED};
use duty::{slot_traced, Governor, DEFAULT_SLOT_NS};
use solo::{KernelShape, SoloDurations};
use spans::Spans;
use wire::{Frame, DEFAULT_SOCKET, FLAG_DISABLED, FLAG_FULL};

type CuptiResult = c_int;
const CUPTI_SUCCESS: CuptiResult = 0;
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
/// Large buffers mean few completions: the per-kernel cost stays one record write.
const DEFAULT_BUFFER_BYTES: usize = 4 << 20;
const BUFFER_ALIGN: usize = 8;
const REPORT_EVERY: Duration = Duration::from_secs(1);

type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
/// `CUpti_CallbackFunc`: userdata, domain, callback id, callback data.
type ApiCallbackFn = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
const CB_DOMAIN_DRIVER_API: u32 = 1;
const CB_DOMAIN_RUNTIME_API: u32 = 2;
/// `CUpti_CallbackData` starts with the call site, enter (0) or exit (1).
const API_EXIT: u32 = 1;
/// Kernel launches (`cupti_runtime_cbid.h`: cudaLaunchKernel and its per-thread-stream form;
/// `cupti_driver_cbid.h`: cuLaunchKernel, its per-thread-stream form, cuLaunchKernelEx). A
/// detach happens only when one of these returns: a process launching is in its steady
/// state, not tearing CUDA down at exit, when CUPTI must be left alone.
const RUNTIME_LAUNCH_CBIDS: [u32; 2] = [211, 214];
const DRIVER_LAUNCH_CBIDS: [u32; 3] = [307, 442, 652];

/// What detaching needs (`detach`); a CUPTI without them keeps the probe attached.
struct DetachFns {
    subscribe: unsafe extern "C" fn(*mut *mut c_void, ApiCallbackFn, *mut c_void) -> CuptiResult,
    enable_domain: unsafe extern "C" fn(u32, *mut c_void, u32) -> CuptiResult,
    unsubscribe: unsafe extern "C" fn(*mut c_void) -> CuptiResult,
    finalize: unsafe extern "C" fn() -> CuptiResult,
}

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
    detach: Option<DetachFns>,
}

static CUPTI: OnceLock<Cupti> = OnceLock::new();
static SPANS: Mutex<Spans> = Mutex::new(Spans::new());
static SOLO: Mutex<SoloDurations> = Mutex::new(SoloDurations::new());
static DISABLED: AtomicBool = AtomicBool::new(false);
static DROPPED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// Kernel records CUPTI handed over without both timestamps (a forced flush of a kernel still
/// queued or running): their time is lost, so tessera treats them like dropped records.
static INCOMPLETE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// Length of a duty-cycle slot; every probe on a node must use the same.
static SLOT_NS: AtomicU64 = AtomicU64::new(DEFAULT_SLOT_NS);
static BUFFER_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_BUFFER_BYTES);
/// `cuptiActivityFlushAll` flag for the once-a-second flush.
static FLUSH_FLAG: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// Whether CUPTI is on the process (`detach`). While a detach is requested or under way the
/// probe's thread makes no CUPTI call at all: one racing `cuptiFinalize` can crash.
static ATTACHMENT: Attachment = Attachment::new();
/// The callback subscription that performs a requested detach.
static SUBSCRIBER: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
/// Untraced slots detach CUPTI: it has the calls, its clock is `CLOCK_REALTIME`, no other
/// CUPTI client holds the subscription, and `TESSERA_PROBE_DETACH` is not `0`.
static DETACH_ALLOWED: AtomicBool = AtomicBool::new(false);
/// CUPTI's clock was found to be `CLOCK_REALTIME`, so the probe reads that clock itself.
static REALTIME: AtomicBool = AtomicBool::new(false);
/// How far apart CUPTI's clock and `CLOCK_REALTIME` may read and still count as one clock.
const CLOCK_TOLERANCE_NS: u64 = 200_000;
/// The process is exiting: CUDA and CUPTI are being torn down, so the probe neither detaches
/// nor attaches CUPTI any more.
static EXITING: AtomicBool = AtomicBool::new(false);
/// Counters printed with `TESSERA_PROBE_DEBUG=1`, for measuring the probe itself.
static STATS: Stats = Stats::new();

struct Stats {
    detaches: AtomicU64,
    attaches: AtomicU64,
    finalize_ns: AtomicU64,
    attach_ns: AtomicU64,
    buffers_out: AtomicI64,
}

impl Stats {
    const fn new() -> Self {
        Stats {
            detaches: AtomicU64::new(0),
            attaches: AtomicU64::new(0),
            finalize_ns: AtomicU64::new(0),
            attach_ns: AtomicU64::new(0),
            buffers_out: AtomicI64::new(0),
        }
    }
}

fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

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
            let detach = (|| {
                Some(DetachFns {
                    subscribe: *lib.get(b"cuptiSubscribe\0").ok()?,
                    enable_domain: *lib.get(b"cuptiEnableDomain\0").ok()?,
                    unsubscribe: *lib.get(b"cuptiUnsubscribe\0").ok()?,
                    finalize: *lib.get(b"cuptiFinalize\0").ok()?,
                })
            })();
            Cupti {
                _lib: lib,
                enable,
                disable,
                next_record,
                flush_all,
                register,
                timestamp,
                dropped_records,
                detach,
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
                    if !p.is_null() {
                        STATS.buffers_out.fetch_add(1, Ordering::Relaxed);
                    }
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
            // and every kernel record is at least KERNEL_NAME_OFFSET + 8 bytes long.
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
                        };
                        if start == 0 || end <= start {
                            INCOMPLETE.fetch_add(1, Ordering::Relaxed);
                            spans.push(0, 0, 0);
                            continue;
                        }
                        let solo_ns = solo.observe(shape, end - start, end);
                        spans.push(start, end, solo_ns);
                    }
                }
            }
            spans.flush_batch();
            // Lost records mean the spans miss time: tessera then withholds this process's
            // figures instead of publishing an undercount. Whether CUPTI's count restarts after
            // each call or not, any growth here means a loss, which is all tessera reads.
            if let Some(count) = cupti.dropped_records {
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
            STATS.buffers_out.fetch_sub(1, Ordering::Relaxed);
        }
    });
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

fn realtime_ns() -> Option<u64> {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    u64::try_from(since_epoch.as_nanos()).ok()
}

/// Now on the clock kernel records are stamped with, without calling CUPTI when that clock
/// is the real-time clock (a call would attach a detached CUPTI).
fn probe_now() -> Option<u64> {
    if REALTIME.load(Ordering::Relaxed) {
        realtime_ns()
    } else {
        cupti_now()
    }
}

fn cupti_clock_is_realtime() -> bool {
    (0..5).any(|_| match (realtime_ns(), cupti_now(), realtime_ns()) {
        (Some(before), Some(cupti), Some(after)) => {
            detach::same_clock(before, cupti, after, CLOCK_TOLERANCE_NS)
        }
        _ => false,
    })
}

/// Called by CUPTI at every CUDA API entry and exit while a detach is requested; the first
/// exit performs it. Buffers still held are flushed first, so their records and memory come
/// back before CUPTI lets go of them.
unsafe extern "C" fn on_api_call(_: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    let _ = catch_unwind(|| {
        let launch = match domain {
            CB_DOMAIN_RUNTIME_API => RUNTIME_LAUNCH_CBIDS.contains(&cbid),
            CB_DOMAIN_DRIVER_API => DRIVER_LAUNCH_CBIDS.contains(&cbid),
            _ => false,
        };
        if data.is_null() || !launch || EXITING.load(Ordering::Relaxed) {
            return;
        }
        // SAFETY: for the API domains `data` is a `CUpti_CallbackData`, call site first.
        if unsafe { data.cast::<u32>().read_unaligned() } != API_EXIT || !ATTACHMENT.claim() {
            return;
        }
        let started = Instant::now();
        let fns = CUPTI.get().and_then(|c| Some((c, c.detach.as_ref()?)));
        // SAFETY: plain CUPTI calls at an API exit, where CUPTI documents finalize as safe.
        let ok = fns.is_some_and(|(cupti, d)| unsafe {
            let _ = (cupti.flush_all)(0);
            (d.finalize)() == CUPTI_SUCCESS
        });
        if ok {
            // Finalize took the subscription with it.
            SUBSCRIBER.store(std::ptr::null_mut(), Ordering::Relaxed);
            STATS.detaches.fetch_add(1, Ordering::Relaxed);
            STATS
                .finalize_ns
                .fetch_add(elapsed_ns(started), Ordering::Relaxed);
        } else {
            DETACH_ALLOWED.store(false, Ordering::Relaxed);
        }
        ATTACHMENT.finished(ok);
    });
}

extern "C" fn mark_exiting() {
    EXITING.store(true, Ordering::Relaxed);
}

fn unsubscribe(d: &DetachFns) {
    let sub = SUBSCRIBER.swap(std::ptr::null_mut(), Ordering::Relaxed);
    if !sub.is_null() {
        // SAFETY: `sub` came from `cuptiSubscribe` and no finalize has taken it.
        let _ = unsafe { (d.unsubscribe)(sub) };
    }
}

/// Records are off; asks the process's next CUDA API exit to detach CUPTI.
fn request_detach(cupti: &Cupti) {
    let Some(d) = cupti.detach.as_ref() else {
        return;
    };
    if !DETACH_ALLOWED.load(Ordering::Relaxed) {
        // A finalize that failed left its subscription behind.
        unsubscribe(d);
        return;
    }
    let mut sub = std::ptr::null_mut();
    // SAFETY: CUPTI writes the handle; `on_api_call` has CUPTI's callback signature.
    let subscribed = unsafe { (d.subscribe)(&mut sub, on_api_call, std::ptr::null_mut()) };
    if subscribed != CUPTI_SUCCESS || sub.is_null() {
        // Another CUPTI client (a profiler) holds the one subscription: finalizing would end
        // its session too. Stay attached, records toggled, for the life of the process.
        DETACH_ALLOWED.store(false, Ordering::Relaxed);
        return;
    }
    SUBSCRIBER.store(sub, Ordering::Relaxed);
    if !ATTACHMENT.request() {
        unsubscribe(d);
        return;
    }
    // SAFETY: plain CUPTI calls on the handle just made; no callback can run before them.
    let enabled = unsafe {
        (d.enable_domain)(1, sub, CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS
            && (d.enable_domain)(1, sub, CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS
    };
    if !enabled {
        DETACH_ALLOWED.store(false, Ordering::Relaxed);
        if ATTACHMENT.cancel() {
            unsubscribe(d);
        }
    }
}

/// Turns records on for a traced slot, attaching CUPTI again if it was detached. False while
/// a detach is still under way: the caller tries again a millisecond later.
fn resume_tracing(cupti: &Cupti) -> bool {
    if EXITING.load(Ordering::Relaxed) {
        return true;
    }
    match ATTACHMENT.state() {
        FINALIZING => return false,
        REQUESTED => {
            if !ATTACHMENT.cancel() {
                return false;
            }
            if let Some(d) = cupti.detach.as_ref() {
                unsubscribe(d);
            }
        }
        DETACHED => {
            let started = Instant::now();
            // SAFETY: the first CUPTI call attaches it again; the buffer callbacks went with
            // the last finalize and are registered anew, as at start.
            if unsafe { (cupti.register)(buffer_requested, buffer_completed) } != CUPTI_SUCCESS {
                disable(cupti);
                return true;
            }
            ATTACHMENT.reattached();
            set_tracing(cupti, true);
            STATS.attaches.fetch_add(1, Ordering::Relaxed);
            STATS
                .attach_ns
                .fetch_add(elapsed_ns(started), Ordering::Relaxed);
            return true;
        }
        _ => {}
    }
    set_tracing(cupti, true);
    true
}

/// The frame to send; `full` on a new connection, so tessera starts from all the probe keeps.
fn snapshot(full: bool) -> Frame {
    let disabled = DISABLED.load(Ordering::Relaxed);
    let mut frame = Frame {
        flags: if disabled { FLAG_DISABLED } else { 0 } | if full { FLAG_FULL } else { 0 },
        dropped: DROPPED.load(Ordering::Relaxed),
        incomplete: INCOMPLETE.load(Ordering::Relaxed),
        ..Frame::default()
    };
    let now = probe_now().filter(|_| !disabled);
    if let Ok(mut s) = SPANS.lock() {
        frame.busy_ns = s.busy_ns;
        frame.kernels = s.kernels;
        if let Some(now) = now {
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
    if on {
        // SAFETY: a plain CUPTI call from a thread of our own.
        if unsafe { (cupti.enable)(ACTIVITY_KIND_CONCURRENT_KERNEL) } != CUPTI_SUCCESS {
            disable(cupti);
            return;
        }
        if let (Some(now), Ok(mut s)) = (probe_now(), SPANS.lock()) {
            s.trace_on(now);
        }
    } else {
        if let (Some(now), Ok(mut s)) = (probe_now(), SPANS.lock()) {
            s.trace_off(now);
        }
        // SAFETY: as above.
        if unsafe { (cupti.disable)(ACTIVITY_KIND_CONCURRENT_KERNEL) } != CUPTI_SUCCESS {
            disable(cupti);
        }
    }
}

/// Kernels, traced ns and busy ns so far: what the governor judges the last second by.
fn progress() -> Option<(u64, u64, u64)> {
    let now = probe_now()?;
    let s = SPANS.lock().ok()?;
    Some((s.kernels, s.traced_total(now), s.busy_ns))
}

/// The probe's one thread: follows the duty-cycle schedule when throttled, and once a second
/// flushes completed records, re-judges the traced fraction and reports to tessera,
/// reconnecting when tessera restarts.
fn reporter(socket: PathBuf, budget: f64) {
    let mut conn: Option<(u32, UnixStream)> = None;
    let mut governor = Governor::new(budget);
    let mut tracing = true;
    let mut last = progress().unwrap_or_default();
    let mut next_report = Instant::now() + REPORT_EVERY;
    let mut behind = false;
    let debug = std::env::var("TESSERA_PROBE_DEBUG").is_ok_and(|v| v == "1");
    loop {
        let now = Instant::now();
        let mut wake = next_report;
        let slot_ns = SLOT_NS.load(Ordering::Relaxed);
        if behind {
            wake = wake.min(now + Duration::from_millis(1));
        } else if governor.fraction < 1.0 {
            if let Some(ns) = probe_now() {
                let to_slot = Duration::from_nanos(slot_ns - ns % slot_ns);
                wake = wake.min(now + to_slot);
            }
        }
        std::thread::sleep(wake.saturating_duration_since(now));
        let cupti = CUPTI.get().filter(|_| !DISABLED.load(Ordering::Relaxed));
        if let (Some(cupti), Some(ns)) = (cupti, probe_now()) {
            let want = slot_traced(ns / slot_ns, governor.fraction);
            if want && !tracing {
                tracing = resume_tracing(cupti);
            } else if !want && tracing {
                set_tracing(cupti, false);
                request_detach(cupti);
                tracing = false;
            }
            behind = want != tracing;
        }
        if Instant::now() < next_report {
            continue;
        }
        next_report = (next_report + REPORT_EVERY).max(Instant::now());
        // Only while attached with no detach asked for: a CUPTI call racing a finalize can
        // crash, and one while detached would attach CUPTI again.
        if let Some(cupti) = cupti.filter(|_| ATTACHMENT.state() == detach::ATTACHED) {
            // SAFETY: a plain CUPTI call from a thread of our own.
            if unsafe { (cupti.flush_all)(FLUSH_FLAG.load(Ordering::Relaxed)) } != CUPTI_SUCCESS {
                disable(cupti);
            }
        }
        if debug {
            eprintln!(
                "tessera-probe {}: realtime {} detach {} fraction {} detaches {} ({} us) attaches {} ({} us) buffers out {} incomplete {} dropped {}",
                std::process::id(),
                REALTIME.load(Ordering::Relaxed),
                DETACH_ALLOWED.load(Ordering::Relaxed),
                governor.fraction,
                STATS.detaches.load(Ordering::Relaxed),
                STATS.finalize_ns.load(Ordering::Relaxed) / 1000,
                STATS.attaches.load(Ordering::Relaxed),
                STATS.attach_ns.load(Ordering::Relaxed) / 1000,
                STATS.buffers_out.load(Ordering::Relaxed),
                INCOMPLETE.load(Ordering::Relaxed),
                DROPPED.load(Ordering::Relaxed),
            );
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
        // A forked child must not speak on its parent's connection.
        if conn.as_ref().is_some_and(|(p, _)| *p != pid) {
            conn = None;
        }
        let full = conn.is_none();
        if full {
            conn = UnixStream::connect(&socket).ok().map(|s| {
                let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                (pid, s)
            });
        }
        if let Some((_, s)) = conn.as_mut() {
            let frame = snapshot(full);
            if s.write_all(&frame.encode()).is_err() {
                conn = None;
            }
        }
    }
}

/// Knobs for measuring the probe itself (docs/validation.md); the defaults are what ships.
/// `TESSERA_PROBE_BUFFER_BYTES`: CUPTI buffer size (64 KiB to 64 MiB);
/// `TESSERA_PROBE_SLOT_MS`: duty-cycle slot length (5 to 1000 ms; all probes on a node alike);
/// `TESSERA_PROBE_FLUSH=forced`: the once-a-second flush also hands over buffers whose last
/// kernel has not finished (its record comes without timestamps and counts as incomplete).
/// `TESSERA_PROBE_OVERHEAD`, which ships, and `TESSERA_PROBE_DETACH=0` (keep CUPTI attached
/// between traced slots, records off) are read by `initialize`; `TESSERA_PROBE_DEBUG=1`
/// prints the probe's counters to stderr once a second.
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
        return true;
    };
    read_tuning();
    let budget = duty::budget_from(std::env::var("TESSERA_PROBE_OVERHEAD").ok().as_deref());
    let cupti = CUPTI.get_or_init(|| cupti);
    REALTIME.store(cupti_clock_is_realtime(), Ordering::Relaxed);
    DETACH_ALLOWED.store(
        REALTIME.load(Ordering::Relaxed)
            && cupti.detach.is_some()
            && std::env::var("TESSERA_PROBE_DETACH").map_or(true, |v| v != "0"),
        Ordering::Relaxed,
    );
    if DETACH_ALLOWED.load(Ordering::Relaxed) {
        // Registered at cuInit, so it runs before the exit handlers of libraries loaded
        // earlier (a framework's CUDA teardown) and after those of later ones.
        // SAFETY: `mark_exiting` is an `extern "C" fn()` that only stores a flag.
        if unsafe { libc::atexit(mark_exiting) } != 0 {
            DETACH_ALLOWED.store(false, Ordering::Relaxed);
        }
    }
    if let (Some(now), Ok(mut spans)) = (probe_now(), SPANS.lock()) {
        spans.start_at(now);
    }
    // SAFETY: registering our callbacks and enabling one activity kind, as CUPTI documents.
    let ok = unsafe {
        (cupti.register)(buffer_requested, buffer_completed) == CUPTI_SUCCESS
            && (cupti.enable)(ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS
    };
    if !ok {
        disable(cupti);
    }
    std::thread::Builder::new()
        .name("tessera-probe".into())
        .spawn(move || reporter(socket, budget))
        .is_ok()
}

/// Called by the CUDA driver at `cuInit` when `CUDA_INJECTION64_PATH` names this library.
/// Returns 1 (success) in every case the process should go on, which is every case.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    let _ = catch_unwind(initialize);
    1
}
