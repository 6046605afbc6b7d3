use super::*;

fn p(pid: u32, kind: ProcessKind, sm: u32) -> ProcState {
    ProcState {
        pid,
        pid_file: None,
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

fn from_file(file: &std::path::Path) -> ProcState {
    ProcState {
        pid_file: Some(file.to_path_buf()),
        ..p(0, ProcessKind::Compute, 10)
    }
}

#[test]
fn a_pid_file_is_listed_only_while_it_names_a_running_process() {
    let dir = std::env::temp_dir().join(format!("fake-nvml-pidfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("client.pid");
    let procs = [p(7, ProcessKind::Compute, 5), from_file(&file)];
    let pids = |procs: &[ProcState]| running(procs).iter().map(|p| p.pid).collect::<Vec<_>>();

    assert_eq!(pids(&procs), [7], "no file yet: not started");
    let me = std::process::id();
    std::fs::write(&file, format!("{me}\n")).unwrap();
    assert_eq!(pids(&procs), [7, me]);
    for junk in ["", "0", "-3", "12ab", "4294967296"] {
        std::fs::write(&file, junk).unwrap();
        assert_eq!(pids(&procs), [7], "{junk:?} names no process");
    }
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    std::fs::write(&file, gone_pid.to_string()).unwrap();
    assert_eq!(pids(&procs), [7], "pid {gone_pid} exited");
    std::fs::remove_dir_all(&dir).unwrap();
}
