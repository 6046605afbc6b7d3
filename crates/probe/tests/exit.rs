//! The probe in a real process, against a stand-in CUPTI (`crates/fake-cupti`) whose exit
//! teardown is slow and aborts the process if called into meanwhile — what a CUPTI call at
//! exit did on the H100. The child process is this test binary again, running `probe_child`.

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tessera_probe::wire::Frame;

/// cargo builds the dev-dependency's cdylib into `deps/`, beside this binary.
fn fake_cupti() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let lib = exe
        .parent()
        .expect("deps directory")
        .join("libfake_cupti.so");
    assert!(lib.exists(), "{} was not built", lib.display());
    lib
}

/// Reads whole frames from every connection until the listener is dropped.
fn collect_frames(listener: UnixListener) -> std::thread::JoinHandle<Vec<Frame>> {
    std::thread::spawn(move || {
        let mut frames = Vec::new();
        if let Ok((mut conn, _)) = listener.accept() {
            let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
            let mut bytes = Vec::new();
            let _ = conn.read_to_end(&mut bytes);
            let mut at = 0;
            while let Some(head) = bytes
                .get(at..at + 8)
                .and_then(|s| Frame::rest_of_header(s.try_into().ok()?))
            {
                let Some(h) = bytes.get(at..at + 8 + head).and_then(Frame::decode_header) else {
                    break;
                };
                let end = at + 8 + head + h.bucket_bytes;
                let Some(body) = bytes.get(at + 8 + head..end) else {
                    break;
                };
                frames.push(h.frame.with_buckets(body));
                at = end;
            }
        }
        frames
    })
}

#[test]
fn a_process_exiting_while_traced_in_duty_cycles_exits_cleanly() {
    let dir = std::env::temp_dir().join(format!("tessera-probe-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let socket = dir.join("probe.sock");
    let _ = std::fs::remove_file(&socket);
    let frames = collect_frames(UnixListener::bind(&socket).expect("bind"));
    let out = Command::new(std::env::current_exe().expect("test binary path"))
        .args(["--ignored", "--exact", "probe_child", "--nocapture"])
        .env("TESSERA_PROBE_SOCKET", &socket)
        .env("TESSERA_PROBE_CUPTI", fake_cupti())
        // 5 ms slots: a probe that still called CUPTI at exit would do so within the
        // teardown's 200 ms.
        .env("TESSERA_PROBE_SLOT_MS", "5")
        .env("FAKE_CUPTI_KERNELS_PER_FLUSH", "40000")
        .env("FAKE_CUPTI_TEARDOWN_MS", "200")
        .output()
        .expect("child process");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    let frames = frames.join().expect("reader");
    let last = frames.last().expect("the probe reported");
    // 40k launches a second cost 6.4 % traced in full: the probe was throttled when it exited.
    let traced = last.traced_ns.expect("a v3 frame");
    assert!(last.kernels > 0, "{last:?}");
    assert!(
        traced > 0 && last.buckets.iter().any(|b| b.covered_us == u16::MAX),
        "{last:?}"
    );
}

#[test]
#[ignore = "the child process of the test above"]
fn probe_child() {
    if std::env::var_os("TESSERA_PROBE_SOCKET").is_none() {
        return;
    }
    assert_eq!(tessera_probe::InitializeInjection(), 1);
    std::thread::sleep(Duration::from_millis(2_600));
    // Runs the exit handlers, as a process returning from main does.
    std::process::exit(0);
}
