//! One driver call into a buffer kept across reads. nvml-wrapper asks for the count with a call
//! of its own first and allocates afresh each time; on an H200 a sample-buffer call costs
//! 1.7–1.9 ms of CPU, so that extra call is the cost (docs/benchmarks.md, "Footprint on several
//! GPUs").

use std::os::raw::c_uint;

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper_sys::bindings::nvmlReturn_t;

/// Calls `call(buffer, &mut count)` with `count` set to the buffer's length, sizing an empty
/// buffer to `initial` first. Where the driver answers INSUFFICIENT_SIZE with a larger count,
/// the buffer grows to it and a quarter more and the call is made once more. Returns how many
/// entries the driver filled.
pub fn fill<T: Copy>(
    buffer: &mut Vec<T>,
    initial: usize,
    empty: T,
    mut call: impl FnMut(&mut [T], &mut c_uint) -> nvmlReturn_t,
) -> Result<usize, NvmlError> {
    if buffer.is_empty() {
        buffer.resize(initial, empty);
    }
    for _ in 0..2 {
        let mut count = c_uint::try_from(buffer.len()).unwrap_or(c_uint::MAX);
        match nvml_try(call(buffer, &mut count)) {
            Ok(()) => return Ok((count as usize).min(buffer.len())),
            Err(NvmlError::InsufficientSize(_)) if count as usize > buffer.len() => {
                buffer.resize(count as usize + count as usize / 4, empty);
            }
            Err(e) => return Err(e),
        }
    }
    Err(NvmlError::InsufficientSize(Some(buffer.len())))
}

#[cfg(test)]
#[path = "kept_buffer_tests.rs"]
mod tests;
