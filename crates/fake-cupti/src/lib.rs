//! A stand-in for `libcupti.so`: the part of CUPTI's activity API the CUDA probe uses, with a
//! process that launches `FAKE_CUPTI_KERNELS_PER_FLUSH` 1 µs kernels a second, evenly spread.
//!
//! `FAKE_CUPTI_FAIL_ENABLE=1` makes turning records on fail; `FAKE_CUPTI_LOADED` names a
//! file the library creates when it is loaded, so a test can tell whether it ever was;
//! `FAKE_CUPTI_ENABLE_LOG` names a file that gets a line `enable` or `disable` per call (and
//! `register` per callback registration). Like CUPTI, it records kernels only while records
//! are on.
//!
//! It also plays a profiler in the process (`FAKE_CUPTI_PROFILER_MS=START,LENGTH`, in ms after
//! load), as the PyTorch profiler behaves: from START it holds CUPTI's one callback
//! subscription (`cuptiSubscribe` answers "multiple subscribers") and the activity callbacks,
//! so kernel records go to it, not to the probe; at its end it calls `cuptiFinalize`, which
//! drops every client's callbacks and turns records off, and the subscription is free again.
//! With `FAKE_CUPTI_PROFILER_STAYS=1` it keeps the subscription and the callbacks (a profiler
//! that never finalizes). The log gets `profiler-start` and `profiler-end` at those moments.
//!
//! What it models above all is how CUPTI ends. Like the real library it registers its
//! teardown when it is loaded, so the teardown runs after the exit handlers of everything
//! loaded later; the teardown takes `FAKE_CUPTI_TEARDOWN_MS`, and any call into the library
//! once it has begun aborts the process — on the H100 such a call is a segfault at exit.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);

const SUCCESS: c_int = 0;
/// `CUPTI_ERROR_MAX_LIMIT_REACHED`: no more records in the buffer.
const END_OF_BUFFER: c_int = 12;
const CONCURRENT_KERNEL: u32 = 10;
/// `CUpti_ActivityKernel5`'s size: every field the probe reads (the graph node ends at 152).
const RECORD_LEN: usize = 160;

static CALLBACKS: Mutex<Option<(RequestFn, CompleteFn)>> = Mutex::new(None);
static LAST_FLUSH_NS: AtomicU64 = AtomicU64::new(0);
static TORN_DOWN: AtomicBool = AtomicBool::new(false);
static ENABLED: AtomicBool = AtomicBool::new(false);
static LOADED_NS: AtomicU64 = AtomicU64::new(0);
/// A client holds the callback subscription (`cuptiSubscribe`, one at a time).
static SUBSCRIBED: AtomicBool = AtomicBool::new(false);
/// How far the played profiler has got: 0 not started, 1 running, 2 ended.
static PROFILER_PHASE: AtomicU8 = AtomicU8::new(0);
/// `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`.
const MULTIPLE_SUBSCRIBERS: c_int = 39;

/// The played profiler's (start, end) in ns after load, if any.
fn profiler_window() -> Option<(u64, u64)> {
    let v = std::env::var("FAKE_CUPTI_PROFILER_MS").ok()?;
    let (a, b) = v.split_once(',')?;
    let start: u64 = a.trim().parse().ok()?;
    let len: u64 = b.trim().parse().ok()?;
    Some((start * 1_000_000, (start + len) * 1_000_000))
}

fn profiler_stays() -> bool {
    std::env::var("FAKE_CUPTI_PROFILER_STAYS").is_ok_and(|v| v == "1")
}

/// Moves the played profiler on to where the clock says, doing what it does at each step.
/// Returns whether it holds CUPTI's records now.
fn profiler_holds() -> bool {
    let Some((start, end)) = profiler_window() else {
        return false;
    };
    let since = now_ns().saturating_sub(LOADED_NS.load(Ordering::SeqCst));
    let want = if since >= end {
        2
    } else if since >= start {
        1
    } else {
        0
    };
    let was = PROFILER_PHASE.fetch_max(want, Ordering::SeqCst);
    if was < 1 && want >= 1 {
        log_toggle("profiler-start");
    }
    if was < 2 && want >= 2 {
        log_toggle("profiler-end");
        if !profiler_stays() {
            // cuptiFinalize: CUPTI detaches; callbacks and enabled kinds are gone.
            if let Ok(mut c) = CALLBACKS.lock() {
                *c = None;
            }
            ENABLED.store(false, Ordering::SeqCst);
        }
    }
    let phase = want.max(was);
    phase == 1 || (phase == 2 && profiler_stays())
}

fn log_toggle(what: &str) {
    if let Some(path) = std::env::var_os("FAKE_CUPTI_ENABLE_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{what}");
        }
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every entry point starts here.
fn called(what: &str) {
    if TORN_DOWN.load(Ordering::SeqCst) {
        eprintln!("fake cupti: {what} called during teardown");
        std::process::abort();
    }
}

extern "C" fn teardown() {
    TORN_DOWN.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(env_u64(
        "FAKE_CUPTI_TEARDOWN_MS",
        200,
    )));
}

extern "C" fn at_load() {
    LAST_FLUSH_NS.store(now_ns(), Ordering::SeqCst);
    LOADED_NS.store(now_ns(), Ordering::SeqCst);
    if let Some(marker) = std::env::var_os("FAKE_CUPTI_LOADED") {
        let _ = std::fs::write(marker, b"loaded");
    }
    // SAFETY: `teardown` is an `extern "C" fn()`.
    unsafe { libc::atexit(teardown) };
}

#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

#[no_mangle]
pub extern "C" fn cuptiActivityEnable(_kind: u32) -> c_int {
    called("cuptiActivityEnable");
    profiler_holds();
    if std::env::var("FAKE_CUPTI_FAIL_ENABLE").is_ok_and(|v| v == "1") {
        // CUPTI_ERROR_NOT_INITIALIZED, as when the driver refuses a profiler.
        return 15;
    }
    log_toggle("enable");
    // Kernels are recorded from now on, not since the last flush.
    if !ENABLED.swap(true, Ordering::SeqCst) {
        LAST_FLUSH_NS.store(now_ns(), Ordering::SeqCst);
    }
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuptiActivityDisable(_kind: u32) -> c_int {
    called("cuptiActivityDisable");
    profiler_holds();
    log_toggle("disable");
    ENABLED.store(false, Ordering::SeqCst);
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuptiActivityRegisterCallbacks(
    request: RequestFn,
    complete: CompleteFn,
) -> c_int {
    called("cuptiActivityRegisterCallbacks");
    profiler_holds();
    log_toggle("register");
    if let Ok(mut c) = CALLBACKS.lock() {
        *c = Some((request, complete));
    }
    SUCCESS
}

/// # Safety
/// `t` must point to a writable u64.
#[no_mangle]
pub unsafe extern "C" fn cuptiGetTimestamp(t: *mut u64) -> c_int {
    called("cuptiGetTimestamp");
    // SAFETY: the caller passes a valid pointer.
    unsafe { *t = now_ns() };
    SUCCESS
}

/// # Safety
/// `buffer` must hold `valid` bytes written by this library; `record` must be writable.
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityGetNextRecord(
    buffer: *mut u8,
    valid: usize,
    record: *mut *mut u32,
) -> c_int {
    called("cuptiActivityGetNextRecord");
    // SAFETY: `record` is the caller's cursor into `buffer`, null before the first record.
    unsafe {
        let next = if (*record).is_null() {
            0
        } else {
            (*record).cast::<u8>().offset_from(buffer) as usize + RECORD_LEN
        };
        if next + RECORD_LEN > valid {
            return END_OF_BUFFER;
        }
        *record = buffer.add(next).cast::<u32>();
    }
    SUCCESS
}

/// Hands over the kernels "run" since the last flush, in one buffer. The probe's callbacks
/// run outside the lock, as CUPTI runs them outside its own.
#[no_mangle]
pub extern "C" fn cuptiActivityFlushAll(_flag: u32) -> c_int {
    called("cuptiActivityFlushAll");
    let held = profiler_holds();
    let Some((request, complete)) = CALLBACKS.lock().ok().and_then(|c| *c) else {
        return SUCCESS;
    };
    let (from, to) = (LAST_FLUSH_NS.swap(now_ns(), Ordering::SeqCst), now_ns());
    // The profiler's callbacks took these kernels' records.
    if !ENABLED.load(Ordering::SeqCst) || held {
        return SUCCESS;
    }
    let seconds = to.saturating_sub(from) as f64 / 1e9;
    let kernels = (env_u64("FAKE_CUPTI_KERNELS_PER_FLUSH", 20_000) as f64 * seconds) as u64;
    let (mut buf, mut size, mut max) = (std::ptr::null_mut(), 0usize, 0usize);
    // SAFETY: the probe's request callback fills the three out-parameters.
    unsafe { request(&mut buf, &mut size, &mut max) };
    if buf.is_null() {
        return SUCCESS;
    }
    let n = (kernels as usize).min(size / RECORD_LEN);
    let step = to.saturating_sub(from) / (n as u64).max(1);
    for i in 0..n {
        let start = from + i as u64 * step;
        let mut record = [0u8; RECORD_LEN];
        record[0..4].copy_from_slice(&CONCURRENT_KERNEL.to_le_bytes());
        record[16..24].copy_from_slice(&start.to_le_bytes());
        record[24..32].copy_from_slice(&(start + 1_000).to_le_bytes());
        record[52..56].copy_from_slice(&1u32.to_le_bytes());
        record[104..112].copy_from_slice(&0x1000u64.to_le_bytes());
        // SAFETY: `n` records fit in the `size` bytes the probe gave.
        unsafe {
            std::ptr::copy_nonoverlapping(record.as_ptr(), buf.add(i * RECORD_LEN), RECORD_LEN)
        };
    }
    // SAFETY: the buffer goes back to the probe, which frees it.
    unsafe { complete(std::ptr::null_mut(), 0, buf, size, n * RECORD_LEN) };
    SUCCESS
}

/// Grants the one subscription, unless another client (the played profiler) holds it.
///
/// # Safety
/// `subscriber` must be writable.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut *mut c_void,
    _callback: *const c_void,
    _userdata: *mut c_void,
) -> c_int {
    called("cuptiSubscribe");
    if profiler_holds() || SUBSCRIBED.swap(true, Ordering::SeqCst) {
        return MULTIPLE_SUBSCRIBERS;
    }
    // SAFETY: the caller passes a valid pointer.
    unsafe { *subscriber = 0x5eb5 as *mut c_void };
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuptiUnsubscribe(_subscriber: *mut c_void) -> c_int {
    called("cuptiUnsubscribe");
    SUBSCRIBED.store(false, Ordering::SeqCst);
    SUCCESS
}
