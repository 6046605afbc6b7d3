//! Process names from procfs. NVML reports host PIDs, so `--path.procfs` must be the host's /proc
//! (hostPID in Kubernetes).

use std::path::Path;

/// Longest name we accept from `comm`; the kernel caps it at 15 bytes, so anything longer is not
/// a real comm file and is cut rather than trusted.
const MAX_COMM_BYTES: usize = 64;

/// The process's `comm`, lossily decoded (names are bytes, not UTF-8), or `None` when the process
/// has gone or procfs is not readable.
pub fn process_name(procfs: &Path, pid: u32) -> Option<String> {
    let raw = std::fs::read(procfs.join(pid.to_string()).join("comm")).ok()?;
    let raw = &raw[..raw.len().min(MAX_COMM_BYTES)];
    let name = String::from_utf8_lossy(raw);
    let name = name.trim_end_matches(['\n', '\r', '\0']);
    Some(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_comm_and_tolerates_junk() {
        let dir = tempfile::tempdir().unwrap();
        let write = |pid: u32, bytes: &[u8]| {
            let p = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("comm"), bytes).unwrap();
        };
        write(1, b"python3\n");
        write(2, b"bad\xff\xfename\n");
        write(3, &[b'x'; 10_000]);
        assert_eq!(process_name(dir.path(), 1).as_deref(), Some("python3"));
        assert_eq!(
            process_name(dir.path(), 2).as_deref(),
            Some("bad\u{fffd}\u{fffd}name")
        );
        assert_eq!(
            process_name(dir.path(), 3).map(|s| s.len()),
            Some(MAX_COMM_BYTES)
        );
        assert_eq!(process_name(dir.path(), 4), None);
    }
}
