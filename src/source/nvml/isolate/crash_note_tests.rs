use super::*;

#[test]
fn the_dying_line_names_signal_and_call() {
    set_call("gpm_metrics_get");
    let mut buf = [0u8; 256];
    let n = fill(
        &mut buf,
        &[
            MARK.as_bytes(),
            signal_name(libc::SIGSEGV).as_bytes(),
            b" in NVML call ",
            current_call(),
        ],
    );
    let line = std::str::from_utf8(&buf[..n]).expect("ascii");
    assert_eq!(
        parse(line),
        Some(("SIGSEGV".into(), "gpm_metrics_get".into()))
    );
    assert_eq!(parse("an ordinary log line"), None);
}

#[test]
fn a_long_note_is_cut_not_overrun() {
    let mut buf = [0u8; 4];
    assert_eq!(fill(&mut buf, &[b"abc", b"def"]), 4);
    assert_eq!(&buf, b"abcd");
}
