use super::*;

fn line(sig: c_int) -> String {
    let mut buf = [0u8; 256];
    let n = note(sig, &mut buf);
    String::from_utf8(buf[..n].to_vec()).expect("ascii")
}

#[test]
fn the_dying_line_names_signal_call_and_gpu() {
    std::thread::spawn(|| {
        set_gpu(12);
        set_call("gpm_metrics_get");
        let l = line(libc::SIGSEGV);
        assert!(l.ends_with('\n'), "{l:?}");
        assert_eq!(
            parse(&l),
            Some(Note {
                signal: "SIGSEGV".into(),
                call: "gpm_metrics_get".into(),
                gpu: Some(12),
            })
        );
    })
    .join()
    .expect("thread");
}

#[test]
fn a_node_wide_call_names_no_gpu_and_each_thread_keeps_its_own() {
    set_call("device_count");
    std::thread::spawn(|| {
        set_gpu(0);
        set_call("power_usage");
    })
    .join()
    .expect("thread");
    assert_eq!(
        parse(&line(libc::SIGABRT)),
        Some(Note {
            signal: "SIGABRT".into(),
            call: "device_count".into(),
            gpu: None,
        })
    );
    assert_eq!(parse("an ordinary log line"), None);
}

#[test]
fn numbers_are_written_without_allocating() {
    let mut digits = [0u8; 10];
    assert_eq!(decimal(0, &mut digits), b"0");
    assert_eq!(decimal(u32::MAX, &mut digits), b"4294967295");
}

#[test]
fn a_long_note_is_cut_not_overrun() {
    let mut buf = [0u8; 4];
    assert_eq!(fill(&mut buf, &[b"abc", b"def"]), 4);
    assert_eq!(&buf, b"abcd");
}
