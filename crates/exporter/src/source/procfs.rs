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

/// Longest `stat` line accepted; real ones are ~300 bytes, the comm in it at most 64.
const MAX_STAT_BYTES: usize = 4096;

/// CPU time a process has used (user + system, its threads included) and when it started, both
/// in clock ticks, from `/proc/<pid>/stat`. The start time tells a reused PID from the old one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTicks {
    pub used: u64,
    pub start: u64,
}

/// Reads [`CpuTicks`]; `None` when the process has gone or the file is not a stat line.
pub fn process_cpu_ticks(procfs: &Path, pid: u32) -> Option<CpuTicks> {
    let raw = std::fs::read(procfs.join(pid.to_string()).join("stat")).ok()?;
    parse_stat(&raw[..raw.len().min(MAX_STAT_BYTES)])
}

/// The comm field may hold spaces and parentheses, so fields are counted from its last `)`.
fn parse_stat(raw: &[u8]) -> Option<CpuTicks> {
    let text = std::str::from_utf8(raw.get(raw.iter().rposition(|&b| b == b')')? + 1..)?).ok()?;
    // After the comm: state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
    // cmajflt utime(14) stime(15) cutime cstime priority nice num_threads itrealvalue
    // starttime(22).
    let fields: Vec<&str> = text.split_ascii_whitespace().take(20).collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(CpuTicks {
        used: field(14)?.checked_add(field(15)?)?,
        start: field(22)?,
    })
}

/// Clock ticks per second (`USER_HZ`), for [`CpuTicks`].
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant and has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

#[cfg(test)]
#[path = "procfs_tests.rs"]
mod tests;
