//! Prometheus's remote-write protocol (1.0), enough to write history into a Prometheus's head
//! through its receiver (`--web.enable-remote-write-receiver`): a `WriteRequest` protobuf,
//! snappy-framed, POSTed over HTTP/1.1. Encoded by hand: the messages are four fixed shapes,
//! and building them as structs would allocate every label of every sample's series.

use std::io::{self, Read, Write};
use std::net::TcpStream;

fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// A length-delimited field (wire type 2).
fn bytes_field(buf: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(buf, field << 3 | 2);
    varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn bytes_field_len(field: u64, n: usize) -> usize {
    varint_len(field << 3 | 2) + varint_len(n as u64) + n
}

/// Appends one `WriteRequest.timeseries` entry (field 1) to `buf`: `labels` (sorted here by
/// name, as the protocol requires; `__name__` among them) and `samples` as (value,
/// milliseconds), which must be in time order.
pub fn series(buf: &mut Vec<u8>, labels: &mut [(&str, &str)], samples: &[(f64, i64)]) {
    labels.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let label_len =
        |(k, v): &(&str, &str)| bytes_field_len(1, k.len()) + bytes_field_len(2, v.len());
    let sample_len = |(_, t): &(f64, i64)| 1 + 8 + 1 + varint_len(*t as u64);
    let body: usize = labels
        .iter()
        .map(|l| bytes_field_len(1, label_len(l)))
        .sum::<usize>()
        + samples
            .iter()
            .map(|s| bytes_field_len(2, sample_len(s)))
            .sum::<usize>();
    varint(buf, 1 << 3 | 2);
    varint(buf, body as u64);
    for l in labels.iter() {
        varint(buf, 1 << 3 | 2);
        varint(buf, label_len(l) as u64);
        bytes_field(buf, 1, l.0.as_bytes());
        bytes_field(buf, 2, l.1.as_bytes());
    }
    for s in samples {
        varint(buf, 2 << 3 | 2);
        varint(buf, sample_len(s) as u64);
        buf.push(1 << 3 | 1);
        buf.extend_from_slice(&s.0.to_le_bytes());
        buf.push(2 << 3);
        // int64 on the wire: a negative time would be its two's complement, ten bytes.
        varint(buf, s.1 as u64);
    }
}

/// `raw` as a snappy block of literals only: valid snappy that any decoder reads, at no
/// compression, which on a loopback connection costs less than compressing.
pub fn snappy(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + raw.len() / 65536 * 3 + 16);
    varint(&mut out, raw.len() as u64);
    for chunk in raw.chunks(1 << 16) {
        let n = chunk.len() - 1;
        if n < 60 {
            out.push((n as u8) << 2);
        } else if n < 256 {
            out.push(60 << 2);
            out.push(n as u8);
        } else {
            out.push(61 << 2);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        out.extend_from_slice(chunk);
    }
    out
}

/// `http://HOST:PORT/PATH` as (HOST:PORT, /PATH).
pub fn split_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("http://")?;
    let slash = rest.find('/')?;
    Some((&rest[..slash], &rest[slash..]))
}

/// POSTs one encoded `WriteRequest` (`raw`, not yet snappy-framed); an answer other than 2xx
/// is an error carrying Prometheus's reason (an out-of-bounds sample says which series).
pub fn post(addr: &str, path: &str, raw: &[u8]) -> io::Result<()> {
    let body = snappy(raw);
    let mut s = TcpStream::connect(addr)?;
    // One connection a request, read to its end: no keep-alive bookkeeping, and a request
    // carries megabytes, beside which a loopback connect costs nothing.
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-protobuf\r\n\
         Content-Encoding: snappy\r\nX-Prometheus-Remote-Write-Version: 0.1.0\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(&body)?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer);
    let status = text.lines().next().unwrap_or("");
    if status
        .split_whitespace()
        .nth(1)
        .is_some_and(|c| c.starts_with('2'))
    {
        return Ok(());
    }
    let reason = text.split_once("\r\n\r\n").map_or("", |(_, b)| b.trim());
    Err(io::Error::other(format!(
        "{addr}{path}: {status}: {}",
        reason.chars().take(500).collect::<String>()
    )))
}

#[cfg(test)]
#[path = "remote_tests.rs"]
mod tests;
