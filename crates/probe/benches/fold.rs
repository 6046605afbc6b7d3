//! What folding kernel records into the union costs the probe, per kernel, in CUPTI's buffer
//! callback: buffers in time order (one launching thread), and two threads' buffers that
//! interleave in time and arrive one after the other (a training step's forward and backward
//! passes), which the union must place exactly. Prints a table; asserts nothing.
//!
//!     cargo bench -p tessera-probe --bench fold
use std::hint::black_box;
use std::time::Instant;

use tessera_probe::spans::Spans;

const KERNELS: u64 = 1_000_000;
/// Records per CUPTI buffer handed over (4 MiB of 160-byte records, roughly).
const PER_BUFFER: u64 = 25_000;
const MS: u64 = 1_000_000;

fn run(threads: u64) -> f64 {
    let mut s = Spans::new();
    s.start_at(0, true);
    let t = Instant::now();
    let mut k = 0;
    while k < KERNELS {
        // One buffer per thread, each covering the same stretch of time, kernels 20 µs apart
        // with 8 µs spans, the threads' kernels offset by 3 µs.
        for thread in 0..threads {
            for i in 0..PER_BUFFER / threads {
                let start = (k / threads + i) * 20_000 + thread * 3_000;
                s.push(start, start + 8_000, 8_000, 8_000);
            }
            s.flush_batch();
        }
        k += PER_BUFFER;
    }
    black_box(s.busy_ns);
    let _ = black_box(s.take_buckets(false, (KERNELS / threads) * 20_000 + MS));
    t.elapsed().as_nanos() as f64 / KERNELS as f64
}

fn main() {
    println!("| buffers | kernels | ns per kernel |");
    println!("|---|---|---|");
    for (name, threads) in [
        ("in time order (one thread)", 1),
        ("two threads, interleaved", 2),
    ] {
        let best = (0..5).map(|_| run(threads)).fold(f64::INFINITY, f64::min);
        println!("| {name} | {KERNELS} | {best:.0} |");
    }
}
