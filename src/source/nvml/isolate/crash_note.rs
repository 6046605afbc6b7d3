//! What a worker process says as it dies inside the driver library: the signal and the NVML
//! call it was in, written to stderr by a signal handler so that the supervisor can log and
//! count the fault by call.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// The line's prefix, which the supervisor looks for in the worker's stderr.
pub const MARK: &str = "tessera-nvml-worker: fatal signal ";

static CALL_PTR: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static CALL_LEN: AtomicUsize = AtomicUsize::new(0);

/// Names the NVML call about to be made. Two stores per call: cheap enough to do for every
/// call, in thread mode too, where nothing reads them.
pub fn set_call(name: &'static str) {
    CALL_LEN.store(0, Ordering::Relaxed);
    CALL_PTR.store(name.as_ptr().cast_mut(), Ordering::Relaxed);
    CALL_LEN.store(name.len(), Ordering::Release);
}

fn current_call() -> &'static [u8] {
    let len = CALL_LEN.load(Ordering::Acquire);
    let ptr = CALL_PTR.load(Ordering::Relaxed);
    if ptr.is_null() || len == 0 {
        return b"(none)";
    }
    // SAFETY: ptr and len come from one `&'static str` stored by `set_call` on the thread that
    // faults (the worker samples on one thread), so they describe live, immutable bytes.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

pub fn signal_name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// Copies `parts` into `buf`, as far as it goes; no allocation (this runs in a signal handler).
fn fill(buf: &mut [u8], parts: &[&[u8]]) -> usize {
    let mut n = 0;
    for part in parts {
        for &b in *part {
            if n == buf.len() {
                return n;
            }
            buf[n] = b;
            n += 1;
        }
    }
    n
}

extern "C" fn on_fatal(sig: c_int) {
    let mut buf = [0u8; 256];
    let n = fill(
        &mut buf,
        &[
            MARK.as_bytes(),
            signal_name(sig).as_bytes(),
            b" in NVML call ",
            current_call(),
            b"\n",
        ],
    );
    // SAFETY: write(2) and raise(3) are async-signal-safe; buf is a live local. The handler was
    // installed with SA_RESETHAND, so raising again ends the process with the same signal.
    unsafe {
        libc::write(2, buf.as_ptr().cast(), n);
        libc::raise(sig);
    }
}

/// Installs the note for the signals a faulting library raises. Only worker processes call
/// this: it replaces Rust's own stack-overflow report for these signals.
pub fn install() {
    for sig in [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGABRT,
        libc::SIGILL,
        libc::SIGFPE,
    ] {
        // SAFETY: a zeroed sigaction is valid; the handler only calls async-signal-safe
        // functions; SA_ONSTACK uses the alternate stack Rust gives each thread.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fatal as extern "C" fn(c_int) as usize;
            action.sa_flags = libc::SA_RESETHAND | libc::SA_NODEFER | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// The call named by a worker's dying line, if `line` is one.
pub fn parse(line: &str) -> Option<(String, String)> {
    let rest = line.split_once(MARK)?.1;
    let (signal, call) = rest.split_once(" in NVML call ")?;
    Some((signal.trim().to_owned(), call.trim().to_owned()))
}

#[cfg(test)]
#[path = "crash_note_tests.rs"]
mod tests;
