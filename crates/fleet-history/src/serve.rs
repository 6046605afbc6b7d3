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
mod tests {
    use super::*;
    use crate::fleet::Template;
    use std::io::Read;
    use std::path::PathBuf;

    fn get(fleet: Fleet, path: &str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let clock = Clock {
            origin: 0,
            interval: 15,
        };
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            answer(stream, &fleet, 2, clock).unwrap();
        });
        let mut client = TcpStream::connect(addr).unwrap();
        write!(client, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut reply = String::new();
        client.read_to_string(&mut reply).unwrap();
        server.join().unwrap();
        reply
    }

    fn fleet() -> Fleet {
        let caps: Vec<(PathBuf, String)> = ["1", "2"]
            .iter()
            .map(|v| (PathBuf::from("t"), format!("g{{node=\"x\"}} {v}\n")))
            .collect();
        Fleet {
            templates: vec![Template::from_captures(&caps).unwrap()],
            phases: 1,
        }
    }

    #[test]
    fn answers_a_scrape_with_the_node_renamed() {
        let reply = get(fleet(), "/metrics?node=1");
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
        assert!(
            reply.ends_with("g{node=\"fleet-0-gpu-00001\"} 1\n"),
            "{reply}"
        );
        assert!(!reply.contains("scrape_samples_scraped"));
    }

    #[test]
    fn refuses_a_node_outside_the_fleet() {
        assert!(get(fleet(), "/metrics?node=2").starts_with("HTTP/1.1 404"));
    }

    #[test]
    fn reads_the_node_from_the_query() {
        assert_eq!(requested_node("GET /metrics?node=17 HTTP/1.1"), Some(17));
        assert_eq!(requested_node("GET /metrics?x=1&node=3 HTTP/1.1"), Some(3));
        assert_eq!(requested_node("GET /metrics HTTP/1.1"), None);
        assert_eq!(requested_node("GET /other?node=1 HTTP/1.1"), None);
    }
}
