//! The simulated fleet as live scrape targets: one process answers for every node, so a
//! fleet of thousands of GPUs costs the scraper's host next to nothing (448 demo processes
//! would each sample their own fake NVML).

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::fleet::Fleet;
use crate::write::{exposition, Clock};

pub fn serve(listen: &str, fleet: Fleet, nodes: u64, clock: Clock) -> io::Result<()> {
    let listener = TcpListener::bind(listen)?;
    eprintln!("fleet-history: serving {nodes} nodes on {listen}");
    let fleet = Arc::new(fleet);
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let fleet = Arc::clone(&fleet);
        std::thread::spawn(move || {
            // A scraper that hangs up early costs nothing worth reporting.
            let _ = answer(stream, &fleet, nodes, clock);
        });
    }
    Ok(())
}

/// The node a request asks for: `/metrics?node=N`.
fn requested_node(request_line: &str) -> Option<u64> {
    let target = request_line.split_whitespace().nth(1)?;
    let (path, query) = target.split_once('?')?;
    if path != "/metrics" {
        return None;
    }
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("node="))
        .and_then(|n| n.parse().ok())
}

fn answer(stream: TcpStream, fleet: &Fleet, nodes: u64, clock: Clock) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    let mut header = String::new();
    while reader.read_line(&mut header)? > 2 {
        header.clear();
    }
    let mut out = io::BufWriter::new(stream);
    match requested_node(&request).filter(|n| *n < nodes) {
        Some(n) => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let slot = now.saturating_sub(clock.origin) / clock.interval;
            let mut body = Vec::with_capacity(128 * 1024);
            exposition(&mut body, fleet, n, slot)?;
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            out.write_all(&body)?;
        }
        None => out.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?,
    }
    out.flush()
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
