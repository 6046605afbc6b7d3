//! What a worker process says as it dies inside the driver library: the signal, the NVML call
//! it was in and the GPU whose thread made it, written to stderr by a signal handler so that
//! the supervisor can log and count the fault by call, and move a GPU that faults to a worker
//! of its own.

use std::cell::Cell;
use std::os::raw::c_int;

/// The line's prefix, which the supervisor looks for in the worker's stderr.
pub const MARK: &str = "tessera-nvml-worker: fatal signal ";
const IN_CALL: &str = " in NVML call ";
const ON_GPU: &str = " on GPU ";

thread_local! {
    // Const-initialised and without a destructor: reading them is a plain thread-local load,
    // safe in a signal handler, which runs on the thread that faulted.
    static CALL: Cell<&'static str> = const { Cell::new("") };
    static GPU: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Names the NVML call about to be made on this thread. One thread-local store per call: cheap
/// enough to do for every call, in thread mode too, where nothing reads it.
pub fn set_call(name: &'static str) {
    let _ = CALL.try_with(|c| c.set(name));
}

/// Marks this thread as the one sampling GPU `index`.
pub fn set_gpu(index: u32) {
    let _ = GPU.try_with(|g| g.set(Some(index)));
}

fn current_call() -> &'static [u8] {
    match CALL.try_with(Cell::get) {
        Ok(name) if !name.is_empty() => name.as_bytes(),
        _ => b"(none)",
    }
}

fn current_gpu() -> Option<u32> {
    GPU.try_with(Cell::get).ok().flatten()
}

/// Writes `n` in decimal into `buf` without allocating; returns the digits written.
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
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

/// The dying line for `sig` on this thread, without allocating.
fn note(sig: c_int, buf: &mut [u8; 256]) -> usize {
    let mut digits = [0u8; 10];
    let gpu = current_gpu();
    let (on_gpu, index): (&[u8], &[u8]) = match gpu {
        Some(i) => (ON_GPU.as_bytes(), decimal(i, &mut digits)),
        None => (b"", b""),
    };
    fill(
        buf,
        &[
            MARK.as_bytes(),
            signal_name(sig).as_bytes(),
            IN_CALL.as_bytes(),
            current_call(),
            on_gpu,
            index,
            b"\n",
        ],
    )
}

extern "C" fn on_fatal(sig: c_int) {
    let mut buf = [0u8; 256];
    let n = note(sig, &mut buf);
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

/// What a worker's dying line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub signal: String,
    pub call: String,
    /// The GPU whose sampling thread faulted; `None` for a node-wide call.
    pub gpu: Option<u32>,
}

/// The note in `line`, if it is a worker's dying line.
pub fn parse(line: &str) -> Option<Note> {
    let rest = line.split_once(MARK)?.1;
    let (signal, rest) = rest.split_once(IN_CALL)?;
    let (call, gpu) = match rest.split_once(ON_GPU) {
        Some((call, gpu)) => (call, gpu.trim().parse().ok()),
        None => (rest, None),
    };
    Some(Note {
        signal: signal.trim().to_owned(),
        call: call.trim().to_owned(),
        gpu,
    })
}

#[cfg(test)]
#[path = "crash_note_tests.rs"]
mod tests;
