//! One worker process seen from the supervisor: start it, send a request, read an answer with
//! a deadline, and when it dies, learn how (exit status, and the signal and NVML call from its
//! dying line).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::crash_note::{self, Note};
use super::{Message, Request, WorkerConfig, WORKER_ARG};

/// How a worker was lost.
#[derive(Debug)]
pub enum Lost {
    /// It could not be started at all.
    Spawn(std::io::Error),
    /// No answer within the deadline; the worker has been killed.
    Hung,
    /// One of its GPUs' calls stopped returning; the worker has been killed to free it.
    GpuStuck { gpu: u32, seconds: f64 },
    /// It exited or was killed by a signal.
    Died {
        status: Option<ExitStatus>,
        /// Signal, NVML call and GPU from its dying line, when it wrote one.
        note: Option<Note>,
    },
    /// It wrote something that is not an answer; it has been killed.
    Garbled(String),
}

impl Lost {
    pub fn status(&self) -> Option<ExitStatus> {
        match self {
            Lost::Died { status, .. } => *status,
            _ => None,
        }
    }

    /// Whether it was killed for not answering (the `hung` restart reason).
    pub fn hung(&self) -> bool {
        matches!(self, Lost::Hung | Lost::GpuStuck { .. })
    }

    /// The GPU the loss is pinned on: the one whose thread faulted or hung.
    pub fn gpu(&self) -> Option<u32> {
        match self {
            Lost::GpuStuck { gpu, .. } => Some(*gpu),
            Lost::Died {
                note: Some(Note { gpu, .. }),
                ..
            } => *gpu,
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Lost::Spawn(e) => format!("could not start: {e}"),
            Lost::Hung => "stopped answering and was killed".into(),
            Lost::GpuStuck { gpu, seconds } => {
                format!("was killed: GPU {gpu}'s NVML call had not returned for {seconds:.1} s")
            }
            Lost::Died {
                note: Some(Note { signal, call, gpu }),
                ..
            } => match gpu {
                Some(g) => format!("died of {signal} in NVML call {call} on GPU {g}"),
                None => format!("died of {signal} in NVML call {call}"),
            },
            Lost::Died { status, note: None } => match status {
                Some(s) => format!("exited ({s})"),
                None => "exited".into(),
            },
            Lost::Garbled(line) => format!("wrote an unreadable answer ({} bytes)", line.len()),
        }
    }
}

pub struct Link {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    note: Arc<Mutex<Option<Note>>>,
    stderr_done: Receiver<()>,
}

/// `fake_nvml::EPOCH_ENV`, spelled out so the exporter does not link the fake library's crate
/// (release images do not build it); a test keeps the two equal.
pub const FAKE_NVML_EPOCH_ENV: &str = "TESSERA_FAKE_NVML_EPOCH_US";

/// Where the spawned workers come from; the same binary as the exporter unless tests say.
#[derive(Debug, Clone)]
pub struct Spawner {
    pub program: std::path::PathBuf,
    /// Unix time (µs) the supervisor started: the fake NVML's scenario clock (real NVML
    /// ignores it), so a restarted worker plays the node's timeline where it stands.
    pub epoch_us: u64,
}

impl Spawner {
    pub fn current() -> std::io::Result<Spawner> {
        let epoch_us = std::env::var(FAKE_NVML_EPOCH_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_micros() as u64)
                    .unwrap_or(0)
            });
        Ok(Spawner {
            program: std::env::current_exe()?,
            epoch_us,
        })
    }
}

impl Link {
    pub fn spawn(spawner: &Spawner, config: &WorkerConfig) -> Result<Link, Lost> {
        let config =
            serde_json::to_string(config).map_err(|e| Lost::Spawn(std::io::Error::other(e)))?;
        let mut command = Command::new(&spawner.program);
        command
            .arg(WORKER_ARG)
            .arg(config)
            .env(FAKE_NVML_EPOCH_ENV, spawner.epoch_us.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: prctl and signal are async-signal-safe. PDEATHSIG asks the kernel to kill the
        // worker when the thread that started it ends, so no worker outlives its supervisor.
        // A stop signal sent to the whole process group (Ctrl-C in a terminal, systemd's
        // control-group stop, `kill -- -PGID`) is the exporter's to act on: it stops, closing
        // its workers' input, and they exit. A worker dying of the signal first would be logged
        // as a crash on every rollout. An ignored signal stays ignored across exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(Lost::Spawn)?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Lost::Spawn(std::io::Error::other("worker pipes missing")));
        };
        let (line_tx, lines) = channel();
        let pid = child.id();
        std::thread::Builder::new()
            .name(format!("tessera-nvml-out-{pid}"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { return };
                    if line_tx.send(line).is_err() {
                        return;
                    }
                }
            })
            .map_err(Lost::Spawn)?;
        let note = Arc::new(Mutex::new(None));
        let (done_tx, stderr_done) = channel();
        let seen = note.clone();
        std::thread::Builder::new()
            .name(format!("tessera-nvml-err-{pid}"))
            .spawn(move || {
                // The worker's log goes on as this process's log, line by line.
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(n) = crash_note::parse(&line) {
                        *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(n);
                    }
                    let mut err = std::io::stderr().lock();
                    let _ = writeln!(err, "{line}");
                }
                let _ = done_tx.send(());
            })
            .map_err(Lost::Spawn)?;
        Ok(Link {
            child,
            stdin,
            lines,
            note,
            stderr_done,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, request: &Request) -> Result<(), Lost> {
        let mut line = serde_json::to_vec(request).map_err(|e| Lost::Garbled(e.to_string()))?;
        line.push(b'\n');
        if self
            .stdin
            .write_all(&line)
            .and_then(|()| self.stdin.flush())
            .is_err()
        {
            return Err(self.reap());
        }
        Ok(())
    }

    /// The next message, waiting at most `limit`. A worker that does not answer in time is
    /// killed: its late answer could only be taken for the next request's.
    pub fn recv(&mut self, limit: Duration) -> Result<Message, Lost> {
        match self.lines.recv_timeout(limit) {
            Ok(line) => serde_json::from_str(&line).map_err(|_| {
                self.kill();
                Lost::Garbled(line)
            }),
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(Lost::Hung)
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.reap()),
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.wait_bounded(Duration::from_secs(1));
    }

    fn wait_bounded(&mut self, limit: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
                // A worker stuck in the kernel cannot be reaped yet; it is left behind rather
                // than blocking its GPU's supervisor.
                _ => return None,
            }
        }
    }

    /// After the worker closed its output: how it ended, and its dying line if any.
    fn reap(&mut self) -> Lost {
        let mut status = self.wait_bounded(Duration::from_secs(1));
        if status.is_none() {
            let _ = self.child.kill();
            status = self.wait_bounded(Duration::from_secs(1));
        }
        // The dying line may still be in the stderr pipe.
        let _ = self.stderr_done.recv_timeout(Duration::from_millis(500));
        let note = self.note.lock().unwrap_or_else(|e| e.into_inner()).take();
        Lost::Died { status, note }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.try_wait();
    }
}
