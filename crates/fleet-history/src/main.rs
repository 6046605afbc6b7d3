//! fleet-history: a simulated tessera fleet of any size from a few captured demo nodes
//! (scripts/fleet/capture.py), as history to backfill and as live targets to scrape.
//!
//!   fleet-history openmetrics --captures DIR --nodes N --origin S --from S --to S [--node-range A:B]
//!   fleet-history vm          --captures DIR --nodes N --origin S --from S --to S [--node-range A:B]
//!   fleet-history serve       --captures DIR --nodes N --origin S --listen ADDR
//!   fleet-history remote-write --captures DIR --nodes N --origin S --from S --to S --url URL
//!                              [--window S] [--senders K]
//!
//! `openmetrics` writes OpenMetrics with timestamps for `promtool tsdb create-blocks-from
//! openmetrics`, `vm` VictoriaMetrics's `/api/v1/import` JSON lines, both to stdout; `serve`
//! answers `GET /metrics?node=N` with node N's exposition now; `remote-write` POSTs the
//! samples to a Prometheus's remote-write receiver (`--url http://HOST:PORT/api/v1/write`),
//! into its head: `--window` seconds (default 300) of every node at a time, windows in time
//! order, because the head refuses a sample more than an hour older than its newest;
//! `--senders` (default 4) requests at once within a window. All three compute the same
//! samples from the same `--origin` (seconds since the epoch, slot 0), so a history written
//! up to now and the live scrapes after it continue each other. Times are Unix seconds;
//! `--interval` (default 15) is the scrape interval the captures were taken at.

mod fleet;
mod remote;
mod serve;
mod write;

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use fleet::{Fleet, FleetError};
use write::Clock;

#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error("write: {0}")]
    Io(#[from] io::Error),
}

struct Args {
    command: String,
    captures: PathBuf,
    nodes: u64,
    node_range: Option<(u64, u64)>,
    origin: u64,
    from: u64,
    to: u64,
    interval: u64,
    job: String,
    listen: String,
    url: String,
    window: u64,
    senders: u64,
}

fn number(flag: &str, v: &str) -> Result<u64, CliError> {
    v.parse()
        .map_err(|_| CliError::Usage(format!("{flag}: not a whole number: {v}")))
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, CliError> {
    let command = argv.next().ok_or_else(|| {
        CliError::Usage("usage: fleet-history openmetrics|vm|serve --captures DIR ...".into())
    })?;
    let mut a = Args {
        command,
        captures: PathBuf::new(),
        nodes: 0,
        node_range: None,
        origin: 0,
        from: 0,
        to: 0,
        interval: 15,
        job: "tessera".into(),
        listen: "127.0.0.1:9950".into(),
        url: String::new(),
        window: 300,
        senders: 4,
    };
    while let Some(flag) = argv.next() {
        let v = argv
            .next()
            .ok_or_else(|| CliError::Usage(format!("{flag} needs a value")))?;
        match flag.as_str() {
            "--captures" => a.captures = PathBuf::from(v),
            "--nodes" => a.nodes = number(&flag, &v)?,
            "--origin" => a.origin = number(&flag, &v)?,
            "--from" => a.from = number(&flag, &v)?,
            "--to" => a.to = number(&flag, &v)?,
            "--interval" => a.interval = number(&flag, &v)?.max(1),
            "--job" => a.job = v,
            "--listen" => a.listen = v,
            "--url" => a.url = v,
            "--window" => a.window = number(&flag, &v)?.max(1),
            "--senders" => a.senders = number(&flag, &v)?.max(1),
            "--node-range" => {
                let (lo, hi) = v
                    .split_once(':')
                    .ok_or_else(|| CliError::Usage(format!("--node-range A:B, not {v}")))?;
                a.node_range = Some((number(&flag, lo)?, number(&flag, hi)?));
            }
            _ => return Err(CliError::Usage(format!("unknown argument {flag}"))),
        }
    }
    if a.nodes == 0 || a.captures.as_os_str().is_empty() {
        return Err(CliError::Usage("--captures and --nodes are needed".into()));
    }
    if a.command != "serve" && (a.from < a.origin || a.to < a.from) {
        return Err(CliError::Usage("needs --origin <= --from <= --to".into()));
    }
    Ok(a)
}

fn run(a: Args) -> Result<(), CliError> {
    let fleet = Fleet::load(&a.captures)?;
    let clock = Clock {
        origin: a.origin,
        interval: a.interval,
    };
    if a.command == "serve" {
        return Ok(serve::serve(&a.listen, fleet, a.nodes, clock)?);
    }
    let (lo, hi) = a.node_range.unwrap_or((0, a.nodes));
    let nodes = lo..hi.min(a.nodes);
    let range = (a.from, a.to);
    if a.command == "remote-write" {
        let written = remote_write(&a, &fleet, nodes, clock)?;
        eprintln!("fleet-history: {written} samples");
        return Ok(());
    }
    let stdout = io::stdout();
    let mut w = BufWriter::with_capacity(1 << 20, stdout.lock());
    let written = match a.command.as_str() {
        "openmetrics" => {
            let n = write::openmetrics(&mut w, &fleet, nodes, range, clock, &a.job)?;
            w.write_all(b"# EOF\n")?;
            n
        }
        "vm" => write::victoriametrics(&mut w, &fleet, nodes, range, clock, &a.job)?,
        other => return Err(CliError::Usage(format!("unknown command {other}"))),
    };
    w.flush()?;
    eprintln!("fleet-history: {written} samples");
    Ok(())
}

/// Window after window, each one's nodes split between `--senders` threads; a window is
/// written whole before the next starts, so no series gets a sample older than the head's
/// newest by more than a window.
fn remote_write(
    a: &Args,
    fleet: &Fleet,
    nodes: std::ops::Range<u64>,
    clock: Clock,
) -> Result<u64, CliError> {
    let (addr, path) = remote::split_url(&a.url)
        .ok_or_else(|| CliError::Usage(format!("--url http://HOST:PORT/PATH, not {:?}", a.url)))?;
    let mut written = 0;
    let mut from = a.from;
    while from < a.to {
        let to = (from + a.window).min(a.to);
        let k = a.senders.min(nodes.end.saturating_sub(nodes.start)).max(1);
        let span = nodes.end - nodes.start;
        let parts: Vec<io::Result<u64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..k)
                .map(|i| {
                    let part = nodes.start + span * i / k..nodes.start + span * (i + 1) / k;
                    scope.spawn(move || {
                        let mut send = |raw: &[u8]| remote::post(addr, path, raw);
                        write::remote_write(
                            fleet,
                            part,
                            (from, to),
                            clock,
                            &a.job,
                            4 << 20,
                            &mut send,
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(io::Error::other("a sender panicked")))
                })
                .collect()
        });
        for p in parts {
            written += p?;
        }
        from = to;
    }
    Ok(written)
}

fn main() -> ExitCode {
    match parse(std::env::args().skip(1)).and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleet-history: {e}");
            ExitCode::FAILURE
        }
    }
}
