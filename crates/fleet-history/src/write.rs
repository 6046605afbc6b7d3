//! The fleet's samples in the three forms they are read in: OpenMetrics with timestamps
//! (`promtool tsdb create-blocks-from openmetrics`), VictoriaMetrics's JSON lines
//! (`/api/v1/import`), and a node's exposition at one instant (the live replay).

use std::borrow::Cow;
use std::io::{self, Write};
use std::ops::Range;

use crate::fleet::{cluster, node_name, Fleet, SeriesDef};
use crate::remote;

/// Where and when: slot `p` is at `origin + p * interval` seconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub origin: u64,
    pub interval: u64,
}

impl Clock {
    /// Node n's sample at slot p, in milliseconds. Each node keeps its own offset within the
    /// interval, as Prometheus spreads its targets' scrapes: samples of every node on the same
    /// whole second would all sit on a window's edge together whenever a query's instant is
    /// a multiple of the interval, where engines differ in whether the edge is inside.
    /// No offset is a whole second: the fleet test compares the engines at whole-second
    /// instants, and node 0 with no offset put a sample on a `[5m]` window's left edge
    /// whenever that instant was a multiple of the interval (one run in fifteen failed).
    pub fn millis(&self, n: u64, p: u64) -> u64 {
        let offset = n.wrapping_mul(2_654_435_761) % (self.interval * 1000);
        let offset = if offset % 1000 == 0 {
            offset + 1
        } else {
            offset
        };
        (self.origin + p * self.interval) * 1000 + offset
    }
}

/// The label pairs of node n's series: its own (node filled in), then, for the history, the
/// target labels Prometheus would add when scraping (`cluster`, `instance`, `job`).
fn labels<'a>(
    def: &'a SeriesDef,
    node: &'a str,
    target: Option<&'a [(&'a str, String)]>,
) -> Vec<(&'a str, &'a str)> {
    let mut out: Vec<(&str, &str)> = def
        .labels
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            (
                k.as_str(),
                if Some(i) == def.node_label {
                    node
                } else {
                    v.as_str()
                },
            )
        })
        .collect();
    if let Some(t) = target {
        out.extend(t.iter().map(|(k, v)| (*k, v.as_str())));
    }
    out
}

fn target_labels(n: u64, job: &str) -> Vec<(&'static str, String)> {
    vec![
        ("cluster", cluster(n)),
        ("instance", node_name(n)),
        ("job", job.to_string()),
    ]
}

fn series_text(def: &SeriesDef, pairs: &[(&str, &str)]) -> String {
    let mut s = def.name.clone();
    if !pairs.is_empty() {
        s.push('{');
        for (i, (k, v)) in pairs.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(k);
            s.push_str("=\"");
            s.push_str(v);
            s.push('"');
        }
        s.push('}');
    }
    s
}

fn write_value(w: &mut impl Write, v: f64) -> io::Result<()> {
    if v.is_nan() {
        w.write_all(b"NaN")
    } else if v.is_infinite() {
        w.write_all(if v > 0.0 { b"+Inf" } else { b"-Inf" })
    } else {
        write!(w, "{v}")
    }
}

/// The slots of node n whose samples fall in `[from, to)` seconds: a node's offset moves its
/// samples past a slot's instant, and a sample past a 2-h boundary would make promtool write
/// a sliver of a block overlapping the next chunk's.
fn slots_within(clock: Clock, n: u64, from: u64, to: u64) -> Range<u64> {
    let first = |t: u64| {
        let ms = t * 1000;
        let base = clock.millis(n, 0);
        if ms <= base {
            0
        } else {
            (ms - base).div_ceil(clock.interval * 1000)
        }
    };
    first(from)..first(to)
}

/// Calls `each` for every series of nodes `nodes`, in node then series order, with the node,
/// the series's index, its labels as the history holds them (target labels added) and the
/// node's slots within `[from, to)` seconds.
fn each_series(
    fleet: &Fleet,
    nodes: Range<u64>,
    (from, to): (u64, u64),
    clock: Clock,
    job: &str,
    mut each: impl FnMut(u64, usize, &SeriesDef, &[(&str, &str)], Range<u64>) -> io::Result<()>,
) -> io::Result<()> {
    for n in nodes {
        let t = fleet.template(n);
        let node = node_name(n);
        let target = target_labels(n, job);
        let slots = slots_within(clock, n, from, to);
        for (s, def) in t.series.iter().enumerate() {
            each(n, s, def, &labels(def, &node, Some(&target)), slots.clone())?;
        }
    }
    Ok(())
}

/// Nodes `nodes` with samples in `[from, to)` seconds, series by series, each series's
/// samples in time order (what the backfill needs). Returns the samples written. The caller
/// ends the file with `# EOF`.
pub fn openmetrics(
    w: &mut impl Write,
    fleet: &Fleet,
    nodes: Range<u64>,
    window: (u64, u64),
    clock: Clock,
    job: &str,
) -> io::Result<u64> {
    let mut written = 0;
    each_series(
        fleet,
        nodes,
        window,
        clock,
        job,
        |n, s, def, pairs, slots| {
            let head = series_text(def, pairs);
            for p in slots {
                if let Some(v) = fleet.value(n, s, p) {
                    w.write_all(head.as_bytes())?;
                    w.write_all(b" ")?;
                    write_value(w, v)?;
                    let ms = clock.millis(n, p);
                    writeln!(w, " {}.{:03}", ms / 1000, ms % 1000)?;
                    written += 1;
                }
            }
            Ok(())
        },
    )?;
    Ok(written)
}

/// The same samples as VictoriaMetrics's `/api/v1/import` JSON lines: one line per series
/// holding all its samples. Values that are not finite are left out (JSON has no NaN).
pub fn victoriametrics(
    w: &mut impl Write,
    fleet: &Fleet,
    nodes: Range<u64>,
    window: (u64, u64),
    clock: Clock,
    job: &str,
) -> io::Result<u64> {
    let mut written = 0;
    let mut values = Vec::new();
    let mut stamps = Vec::new();
    each_series(
        fleet,
        nodes,
        window,
        clock,
        job,
        |n, s, def, pairs, slots| {
            values.clear();
            stamps.clear();
            for p in slots {
                if let Some(v) = fleet.value(n, s, p).filter(|v| v.is_finite()) {
                    values.push(v);
                    stamps.push(clock.millis(n, p));
                }
            }
            if values.is_empty() {
                return Ok(());
            }
            // Exposition escapes (\\ \" \n) are JSON escapes too, so values go in as they are.
            write!(w, "{{\"metric\":{{\"__name__\":\"{}\"", def.name)?;
            for (k, v) in pairs {
                write!(w, ",\"{k}\":\"{v}\"")?;
            }
            w.write_all(b"},\"values\":[")?;
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                write!(w, "{v}")?;
            }
            w.write_all(b"],\"timestamps\":[")?;
            for (i, ts) in stamps.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                write!(w, "{ts}")?;
            }
            w.write_all(b"]}\n")?;
            written += values.len() as u64;
            Ok(())
        },
    )?;
    Ok(written)
}

/// An exposition's label value as the value itself: `\\`, `\"` and `\n` undone.
fn unescape(v: &str) -> Cow<'_, str> {
    if !v.contains('\\') {
        return Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(e) => out.push(e),
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
}

/// The same samples as remote-write `WriteRequest`s (crate::remote), each series with its
/// samples in `window` in time order; `send` gets a request whenever one reaches `limit`
/// bytes, and the rest at the end. Returns the samples written.
pub fn remote_write(
    fleet: &Fleet,
    nodes: Range<u64>,
    window: (u64, u64),
    clock: Clock,
    job: &str,
    limit: usize,
    send: &mut impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<u64> {
    let mut buf = Vec::with_capacity(limit + (1 << 16));
    let mut samples = Vec::new();
    let mut written = 0;
    each_series(
        fleet,
        nodes,
        window,
        clock,
        job,
        |n, s, def, pairs, slots| {
            samples.clear();
            for p in slots {
                if let Some(v) = fleet.value(n, s, p) {
                    samples.push((v, clock.millis(n, p) as i64));
                }
            }
            if samples.is_empty() {
                return Ok(());
            }
            let values: Vec<Cow<str>> = pairs.iter().map(|(_, v)| unescape(v)).collect();
            let mut labels: Vec<(&str, &str)> = Vec::with_capacity(pairs.len() + 1);
            labels.push(("__name__", def.name.as_str()));
            labels.extend(
                pairs
                    .iter()
                    .zip(&values)
                    .map(|((k, _), v)| (*k, v.as_ref())),
            );
            remote::series(&mut buf, &mut labels, &samples);
            written += samples.len() as u64;
            if buf.len() >= limit {
                send(&buf)?;
                buf.clear();
            }
            Ok(())
        },
    )?;
    if !buf.is_empty() {
        send(&buf)?;
    }
    Ok(written)
}

/// What node n serves at slot p: its series (scrape metadata left to the scraper).
pub fn exposition(w: &mut impl Write, fleet: &Fleet, n: u64, p: u64) -> io::Result<()> {
    let t = fleet.template(n);
    let node = node_name(n);
    for (s, def) in t.series.iter().enumerate() {
        if def.scrape_meta {
            continue;
        }
        if let Some(v) = fleet.value(n, s, p) {
            w.write_all(series_text(def, &labels(def, &node, None)).as_bytes())?;
            w.write_all(b" ")?;
            write_value(w, v)?;
            w.write_all(b"\n")?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
