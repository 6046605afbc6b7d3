use super::*;
use nvml_wrapper_sys::bindings::{
    nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE as TOO_SMALL,
    nvmlReturn_enum_NVML_ERROR_NOT_FOUND as NOT_FOUND, nvmlReturn_enum_NVML_SUCCESS as SUCCESS,
};

/// A driver holding `held` entries: fills what fits, or asks for more.
fn driver(
    held: usize,
    calls: &mut usize,
) -> impl FnMut(&mut [u32], &mut c_uint) -> nvmlReturn_t + '_ {
    move |buf, count| {
        *calls += 1;
        if (*count as usize) < held {
            *count = held as c_uint;
            return TOO_SMALL;
        }
        buf[..held].fill(7);
        *count = held as c_uint;
        SUCCESS
    }
}

#[test]
fn one_call_where_the_buffer_is_large_enough_and_the_buffer_is_kept() {
    let mut buffer = Vec::new();
    let mut calls = 0;
    assert_eq!(fill(&mut buffer, 8, 0, driver(5, &mut calls)).ok(), Some(5));
    assert_eq!(calls, 1);
    assert_eq!(buffer.len(), 8);
    assert_eq!(fill(&mut buffer, 8, 0, driver(3, &mut calls)).ok(), Some(3));
    assert_eq!(
        (calls, buffer.len()),
        (2, 8),
        "no call for the count, no new buffer"
    );
}

#[test]
fn a_driver_that_holds_more_grows_the_buffer_once() {
    let mut buffer = Vec::new();
    let mut calls = 0;
    assert_eq!(
        fill(&mut buffer, 8, 0, driver(20, &mut calls)).ok(),
        Some(20)
    );
    assert_eq!((calls, buffer.len()), (2, 25));
}

#[test]
fn errors_pass_through_and_a_driver_that_keeps_asking_for_more_is_refused() {
    let mut buffer = Vec::new();
    assert!(matches!(
        fill(&mut buffer, 8, 0u32, |_, _| NOT_FOUND),
        Err(NvmlError::NotFound)
    ));
    let mut asks = 0;
    let greedy = |_: &mut [u32], count: &mut c_uint| {
        asks += 1;
        *count += 100;
        TOO_SMALL
    };
    assert!(matches!(
        fill(&mut buffer, 8, 0, greedy),
        Err(NvmlError::InsufficientSize(_))
    ));
    assert_eq!(asks, 2);
}
