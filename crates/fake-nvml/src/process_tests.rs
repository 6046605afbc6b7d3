use super::*;

fn p(pid: u32, kind: ProcessKind, sm: u32) -> ProcState {
    ProcState {
        pid,
        kind,
        memory_bytes: 1 << 30,
        sm_util: sm,
        mem_util: 0,
        instance: None,
    }
}

#[test]
fn booked_as_the_h100_books_them() {
    use ProcessKind::*;
    assert_eq!(booked_samples(&[p(5, Compute, 49)], 50), [(5, 49, 0)]);
    // 60 % + 20 % time-sliced: the whole device to one process, nothing to the other.
    assert_eq!(
        booked_samples(&[p(5, Compute, 60), p(6, Compute, 20)], 84),
        [(6, 84, 0)]
    );
    // An idle holder beside a busy process changes nothing.
    assert_eq!(
        booked_samples(&[p(5, Compute, 50), p(6, Compute, 0)], 50),
        [(5, 50, 0)]
    );
    // MPS: the server gets its clients' kernels.
    assert_eq!(
        booked_samples(
            &[p(1, MpsServer, 0), p(5, MpsClient, 40), p(6, MpsClient, 20)],
            44
        ),
        [(1, 60, 0)]
    );
}
