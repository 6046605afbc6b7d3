//! What one sample cycle costs the sampler thread: the pure `join` of NVML's view, the kubelet's
//! allocations, the pods' metadata and the processes' cgroups, then `encode` of the snapshot into
//! the exposition every scrape serves. Inputs are synthetic and built in memory, so this times
//! tessera's code only (no NVML, no I/O).
//!
//! ```sh
//! cargo bench --bench join_encode                      # dense node + scale curve, markdown
//! cargo bench --bench join_encode -- --iters 1000      # more iterations on the dense node
//! cargo bench --bench join_encode -- --callgrind 8 500 300 [--no-mig] [--cycles 5]
//! cargo bench --bench join_encode -- --dcgm-compat       # the same with --metrics.dcgm-compat
//! ```
//!
//! `--callgrind G P Q` builds one node (G GPUs, P processes, Q pods), runs one warm-up cycle and
//! then `--cycles` cycles inside `measured_cycles`, the only function scripts/bench-callgrind.sh
//! lets callgrind count. It prints `series=… bytes=… cycles=…` for the script.
//!
//! Cargo.toml declares this bench with `harness = false`; without that, cargo would compile it
//! under the test harness (cfg(test)), which never calls `main`.
#![cfg_attr(test, allow(dead_code, unused_imports))]

use std::collections::{BTreeMap, HashMap};
use std::error::Error;
use std::hint::black_box;
use std::time::{Duration, Instant};

use tessera_exporter::metrics::{encode, EncodeOptions, Exposition};
use tessera_exporter::model::compute::ActivityInputs;
use tessera_exporter::model::device_id::ResourceMatcher;
use tessera_exporter::model::join::{join, JoinInputs};
use tessera_exporter::model::{
    CollectorStatus, ComputeMode, GpmActivity, GpuSample, MemoryBytes, MigSample, NvmlSample,
    ProcessKind, ProcessSample, Snapshot,
};
use tessera_exporter::source::cgroup::{CgroupIdentity, ContainerRuntime, QosClass};
use tessera_exporter::source::kube::{ClusterView, ContainerMeta, PodMeta};
use tessera_exporter::source::podresources::{
    AllocatableDevice, Allocations, ContainerAllocation, ResourceDevices,
};

const MIB: u64 = 1024 * 1024;
/// 1g.10gb instances per H100 (7 compute slices).
const MIG_PER_GPU: usize = 7;
/// The issue's target for the dense node, per cycle.
const TARGET: Duration = Duration::from_millis(5);

/// A node to simulate.
#[derive(Debug, Clone, Copy)]
struct Shape {
    gpus: usize,
    mig: bool,
    procs: usize,
    pods: usize,
}

impl Shape {
    const DENSE: Shape = Shape {
        gpus: 8,
        mig: true,
        procs: 500,
        pods: 300,
    };

    /// The dense node's density (62.5 processes and 37.5 pods per GPU) on `gpus` GPUs.
    fn per_gpu(gpus: usize, mig: bool) -> Shape {
        Shape {
            gpus,
            mig,
            procs: (500 * gpus / 8).max(1),
            pods: (300 * gpus / 8).max(1),
        }
    }

    /// Devices a pod can be given: MIG instances, or whole GPUs.
    fn devices(&self) -> usize {
        if self.mig {
            self.gpus * MIG_PER_GPU
        } else {
            self.gpus
        }
    }
}

/// Everything `join` reads, owned.
struct Inputs {
    shape: Shape,
    nvml: NvmlSample,
    allocations: Allocations,
    cluster: ClusterView,
    cgroups: HashMap<u32, CgroupIdentity>,
    resources: ResourceMatcher,
    activity: ActivityInputs,
}

fn gpu_uuid(g: usize) -> String {
    format!("GPU-5e55e4a0-{g:04x}-4000-8000-00000000d00d")
}

fn mig_uuid(g: usize, m: usize) -> String {
    format!("MIG-5e55e4a0-{g:04x}-4000-8000-{m:012x}")
}

fn pod_uid(i: usize) -> String {
    format!("{i:08x}-aaaa-4bbb-8ccc-{:012x}", i * 7919)
}

fn container_id(i: usize) -> String {
    format!("{:016x}{:016x}{:016x}{:016x}", i, i * 31, i * 131, i * 1031)
}

fn gpm(a: f64) -> GpmActivity {
    GpmActivity {
        sm_activity: a,
        sm_occupancy: 0.14 * a,
        tensor_activity: 0.5 * a,
        dram_bandwidth: 0.3 * a,
        graphics_activity: Some(a),
        fp64_activity: Some(0.0),
        fp32_activity: Some(0.1 * a),
        fp16_activity: Some(0.05 * a),
        pcie_tx_bytes_per_second: Some(2.0e9 * a),
        pcie_rx_bytes_per_second: Some(1.0e9 * a),
        nvlink_tx_bytes_per_second: Some(0.0),
        nvlink_rx_bytes_per_second: Some(0.0),
    }
}

/// Deterministic activity in 0..1 for the `k`-th thing.
fn activity(k: usize) -> f64 {
    ((k * 37) % 100) as f64 / 100.0
}

impl Inputs {
    fn build(shape: Shape) -> Inputs {
        let devices = shape.devices();
        // Pod i holds device i % devices, as replica i / devices: with more pods than devices
        // every device is time-sliced, as the NVIDIA device plugin's `.shared` resources are.
        let replicas = shape.pods.div_ceil(devices).max(1);
        let shared = replicas > 1;
        let device_of_pod = |i: usize| i % devices;
        let device_uuid = |d: usize| {
            if shape.mig {
                mig_uuid(d / MIG_PER_GPU, d % MIG_PER_GPU)
            } else {
                gpu_uuid(d)
            }
        };
        let resource = match (shape.mig, shared) {
            (true, true) => "nvidia.com/mig-1g.10gb.shared",
            (true, false) => "nvidia.com/mig-1g.10gb",
            (false, true) => "nvidia.com/gpu.shared",
            (false, false) => "nvidia.com/gpu",
        };
        let device_id = |d: usize, k: usize| {
            if shared {
                format!("{}::{k}", device_uuid(d))
            } else {
                device_uuid(d)
            }
        };

        // Processes: process j belongs to pod j % pods and runs on that pod's device.
        let mut per_device: Vec<Vec<ProcessSample>> = vec![Vec::new(); devices];
        let mut cgroups = HashMap::with_capacity(shape.procs);
        for j in 0..shape.procs {
            let pod = j % shape.pods;
            let d = device_of_pod(pod);
            let pid = 100_000 + j as u32;
            per_device[d].push(ProcessSample {
                pid,
                name: "python3".into(),
                kind: Some(ProcessKind::Compute),
                memory_used_bytes: Some(512 * MIB * (1 + (j % 8) as u64)),
                // NVML has no per-process utilization on MIG GPUs.
                sm_utilization: (!shape.mig).then(|| activity(j) / 4.0),
                memory_utilization: (!shape.mig).then(|| activity(j + 1) / 4.0),
                mig_uuid: shape
                    .mig
                    .then(|| mig_uuid(d / MIG_PER_GPU, d % MIG_PER_GPU)),
            });
            cgroups.insert(
                pid,
                CgroupIdentity {
                    pod_uid: Some(pod_uid(pod)),
                    container_id: Some(container_id(pod)),
                    runtime: ContainerRuntime::Containerd,
                    qos: Some(QosClass::Burstable),
                },
            );
        }

        let mut gpus = Vec::with_capacity(shape.gpus);
        for g in 0..shape.gpus {
            let (mig_instances, processes): (Vec<MigSample>, Vec<ProcessSample>) = if shape.mig {
                let mut procs = Vec::new();
                let instances = (0..MIG_PER_GPU)
                    .map(|m| {
                        let d = g * MIG_PER_GPU + m;
                        let used: u64 = per_device[d]
                            .iter()
                            .filter_map(|p| p.memory_used_bytes)
                            .sum();
                        procs.append(&mut per_device[d]);
                        MigSample {
                            uuid: mig_uuid(g, m),
                            gpu_instance_id: 7 + m as u32,
                            compute_instance_id: 0,
                            profile: "1g.10gb".into(),
                            slices: 1,
                            memory: Some(MemoryBytes {
                                total: 9856 * MIB,
                                used: used.min(9856 * MIB),
                                reserved: 0,
                            }),
                            gpm: Some(gpm(activity(d))),
                        }
                    })
                    .collect();
                (instances, procs)
            } else {
                (Vec::new(), std::mem::take(&mut per_device[g]))
            };
            let used: u64 = processes.iter().filter_map(|p| p.memory_used_bytes).sum();
            let util = activity(g + 3);
            gpus.push(GpuSample {
                index: g as u32,
                uuid: gpu_uuid(g),
                model: "NVIDIA H100 80GB HBM3".into(),
                pci_bus_id: format!("00000000:{:02X}:00.0", 0x18 + 0x10 * g),
                minor_number: Some(g as u32),
                up: true,
                down_reason: None,
                mig_enabled: Some(shape.mig),
                compute_mode: Some(ComputeMode::Default),
                vgpu_guest: false,
                memory: Some(MemoryBytes {
                    total: 81559 * MIB,
                    used: used.min(81079 * MIB),
                    reserved: 480 * MIB,
                }),
                utilization: (!shape.mig).then_some(util),
                memory_utilization: (!shape.mig).then_some(util / 2.0),
                gpm: Some(gpm(util)),
                gpm_status: Some(tessera_exporter::model::GpmStatus::available()),
                power_watts: Some(74.0 + 600.0 * util),
                power_limit_watts: Some(700.0),
                energy_joules: Some(1.0e6 + g as f64),
                temperature_celsius: Some(40.0 + 30.0 * util),
                memory_temperature_celsius: Some(45.0 + 30.0 * util),
                sm_clock_hertz: Some(1.98e9),
                memory_clock_hertz: Some(2.619e9),
                clock_event_reasons: Some(0),
                ecc_corrected: Some(0),
                ecc_uncorrected: Some(0),
                pcie_replays: Some(0),
                encoder_utilization: Some(0.0),
                decoder_utilization: Some(0.0),
                remapped_rows: Some(Default::default()),
                xid_counts: BTreeMap::new(),
                last_xid: None,
                xid_watched: true,
                mig_slices_total: shape.mig.then_some(7),
                mig_instances,
                processes,
            });
        }

        let mut containers = Vec::with_capacity(shape.pods);
        let mut pods = Vec::with_capacity(shape.pods);
        for i in 0..shape.pods {
            let namespace = format!("team-{}", i % 12);
            let workload = format!("serve-{}", i / 8);
            let name = format!("{workload}-{}", i % 8);
            containers.push(ContainerAllocation {
                namespace: namespace.clone(),
                pod: name.clone(),
                container: "main".into(),
                devices: vec![ResourceDevices {
                    resource_name: resource.into(),
                    device_ids: vec![device_id(device_of_pod(i), i / devices)],
                }],
                dynamic: Vec::new(),
            });
            pods.push(PodMeta {
                uid: pod_uid(i),
                namespace: namespace.clone(),
                name,
                owner_kind: Some("StatefulSet".into()),
                owner_name: Some(workload.clone()),
                // Allow-listed with --kube.pod-labels=app,team.
                labels: BTreeMap::from([
                    ("app".to_owned(), workload),
                    ("team".to_owned(), namespace),
                ]),
                config_hash: None,
                containers: vec![ContainerMeta {
                    name: "main".into(),
                    container_id: Some(container_id(i)),
                }],
                phase: Some("Running".into()),
                sharing: Default::default(),
                dra_claims: Vec::new(),
                init_containers: Vec::new(),
            });
        }
        let allocatable = (0..devices)
            .flat_map(|d| (0..if shared { replicas } else { 1 }).map(move |k| (d, k)))
            .map(|(d, k)| AllocatableDevice {
                resource_name: resource.into(),
                device_id: device_id(d, k),
            })
            .collect();
        let mut node_labels = BTreeMap::from([
            ("nvidia.com/gpu.present".to_owned(), "true".to_owned()),
            (
                "nvidia.com/gpu.product".to_owned(),
                "NVIDIA-H100-80GB-HBM3".to_owned(),
            ),
            ("nvidia.com/mig.strategy".to_owned(), "mixed".to_owned()),
        ]);
        if shared {
            let prefix = if shape.mig {
                "nvidia.com/mig-1g.10gb"
            } else {
                "nvidia.com/gpu"
            };
            node_labels.insert(format!("{prefix}.sharing-strategy"), "time-slicing".into());
            node_labels.insert(format!("{prefix}.replicas"), replicas.to_string());
        }
        // Every process busy on the CPU: the split runs its full path on every device.
        let activity = ActivityInputs {
            cpu_cores: cgroups.keys().map(|pid| (*pid, 0.3)).collect(),
            ..ActivityInputs::default()
        };
        Inputs {
            shape,
            activity,
            nvml: NvmlSample {
                driver_version: "580.159.04".into(),
                gpus,
                errors_by_call: BTreeMap::new(),
                worker_restarts: Vec::new(),
                call_costs: BTreeMap::new(),
                success: true,
                duration_seconds: 0.004,
            },
            allocations: Allocations {
                containers,
                allocatable,
                skipped: 0,
            },
            cluster: ClusterView::new(pods, node_labels, Vec::new()),
            cgroups,
            resources: ResourceMatcher::default(),
        }
    }

    fn join(&self, timestamp_seconds: f64, previous: Option<&Snapshot>) -> Snapshot {
        let collectors = ["nvml", "cgroup", "podresources", "kube"]
            .map(|name| CollectorStatus {
                name,
                success: true,
                duration_seconds: 0.001,
            })
            .to_vec();
        join(JoinInputs {
            node: "dense-node-01",
            timestamp_seconds,
            nvml: &self.nvml,
            collectors,
            sample_duration_seconds: 0.005,
            allocations: Some(&self.allocations),
            cluster: Some(&self.cluster),
            cgroups: &self.cgroups,
            resources: &self.resources,
            activity: &self.activity,
            previous,
            energy_floor_window: 30.0,
        })
    }
}

/// Per-stage durations of repeated cycles: wall clock, and the thread's CPU time (which a busy
/// machine inflates far less: time spent waiting for a CPU is not counted).
#[derive(Default)]
struct Timings {
    join: Vec<Duration>,
    encode: Vec<Duration>,
    cycle: Vec<Duration>,
    join_cpu: Vec<Duration>,
    encode_cpu: Vec<Duration>,
    cycle_cpu: Vec<Duration>,
    series: usize,
    bytes: usize,
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// min, median and p99 of `v` (sorted in place).
fn stats(v: &mut [Duration]) -> (Duration, Duration, Duration) {
    v.sort_unstable();
    if v.is_empty() {
        return Default::default();
    }
    let p99 = ((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1;
    (v[0], v[v.len() / 2], v[p99])
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    stats(&mut v).1
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// Runs `warmup` then `iters` cycles as the sampler does: the previous snapshot feeds the next
/// join (idle counters), and is dropped when replaced. The cycle time includes that drop.
/// With `flush`, every cycle starts after overwriting that buffer (make it larger than the last
/// level cache): caches as cold as a once-a-second sampler finds them after other work.
fn run(inputs: &Inputs, warmup: usize, iters: usize, mut flush: Option<&mut [u8]>) -> Timings {
    let opts = options();
    let mut previous: Option<Snapshot> = None;
    let mut ts = 1.7e9;
    let mut t = Timings::default();
    for i in 0..warmup + iters {
        ts += 1.0;
        if let Some(buf) = flush.as_deref_mut() {
            buf.fill(i as u8);
            black_box(&*buf);
        }
        let (start, start_cpu) = (Instant::now(), thread_cpu());
        let snap = inputs.join(ts, previous.as_ref());
        let (joined, joined_cpu) = (Instant::now(), thread_cpu());
        let exposition: Exposition = encode(&snap, &opts);
        let (encoded, encoded_cpu) = (Instant::now(), thread_cpu());
        let (series, bytes) = (exposition.series, exposition.text.len());
        black_box(exposition);
        previous = Some(black_box(snap));
        let (done, done_cpu) = (Instant::now(), thread_cpu());
        if i >= warmup {
            t.join.push(joined - start);
            t.encode.push(encoded - joined);
            t.cycle.push(done - start);
            t.join_cpu.push(joined_cpu.saturating_sub(start_cpu));
            t.encode_cpu.push(encoded_cpu.saturating_sub(joined_cpu));
            t.cycle_cpu.push(done_cpu.saturating_sub(start_cpu));
            t.series = series;
            t.bytes = bytes;
        }
    }
    t
}

/// Enough iterations for about `budget` of measuring, within [20, 500].
fn iterations_for(inputs: &Inputs, budget: Duration) -> usize {
    let probe = run(inputs, 2, 3, None);
    let per = median(&probe.cycle).max(Duration::from_micros(1));
    ((budget.as_secs_f64() / per.as_secs_f64()) as usize).clamp(20, 500)
}

fn describe(s: Shape) -> String {
    let layout = if s.mig {
        format!("{} × {} × 1g.10gb MIG", s.gpus, MIG_PER_GPU)
    } else {
        format!("{} GPUs, no MIG", s.gpus)
    };
    format!("{layout}, {} processes, {} pods", s.procs, s.pods)
}

/// Prints one row per stage; returns the cycle's median CPU time.
fn stage_rows(caches: &str, t: &mut Timings) -> Duration {
    let mut cycle_cpu = Duration::ZERO;
    for (name, wall, cpu) in [
        ("join", &mut t.join, &mut t.join_cpu),
        ("encode", &mut t.encode, &mut t.encode_cpu),
        (
            "cycle (join + encode + drop)",
            &mut t.cycle,
            &mut t.cycle_cpu,
        ),
    ] {
        let (cmin, cmed, cp99) = stats(cpu);
        let (wmin, wmed, wp99) = stats(wall);
        cycle_cpu = cmed;
        println!(
            "| {caches} | {name} | {} | {} | {} | {} | {} | {} |",
            us(cmin),
            us(cmed),
            us(cp99),
            us(wmin),
            us(wmed),
            us(wp99)
        );
    }
    cycle_cpu
}

fn verdict(cycle: Duration) -> String {
    if cycle < TARGET {
        format!(
            "met ({:.0} % of the budget)",
            100.0 * cycle.as_secs_f64() / TARGET.as_secs_f64()
        )
    } else {
        format!("MISSED by {} µs", us(cycle.saturating_sub(TARGET)))
    }
}

/// Cycles measured with cold caches (each one costs a 64 MiB overwrite first).
const COLD_ITERS: usize = 60;

fn dense(iters: usize) {
    let inputs = Inputs::build(Shape::DENSE);
    let mut warm = run(&inputs, 20, iters, None);
    let mut flush = vec![0u8; 64 << 20];
    let mut cold = run(&inputs, 3, COLD_ITERS, Some(&mut flush));
    println!(
        "## Dense node: {} (warm: {iters} back-to-back cycles after 20 warm-up; cold: {COLD_ITERS} cycles, each after evicting the caches)\n",
        describe(inputs.shape)
    );
    println!("| caches | stage | CPU min µs | CPU median µs | CPU p99 µs | wall min µs | wall median µs | wall p99 µs |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let warm_cycle = stage_rows("warm", &mut warm);
    let cold_cycle = stage_rows("cold", &mut cold);
    let series = warm.series.max(1) as f64;
    println!(
        "\nseries: {}, payload: {} bytes ({:.0} bytes/series), {:.0} ns/series (warm CPU median), {:.0} ns/series (cold)",
        warm.series,
        warm.bytes,
        warm.bytes as f64 / series,
        warm_cycle.as_nanos() as f64 / series,
        cold_cycle.as_nanos() as f64 / series,
    );
    println!(
        "target < 5 ms per cycle (CPU median): warm {}; cold {}\n",
        verdict(warm_cycle),
        verdict(cold_cycle)
    );
}

fn scale_points() -> Vec<(&'static str, Shape)> {
    let mut points = Vec::new();
    for gpus in [1, 2, 4, 8, 16] {
        points.push(("GPUs (MIG, dense per GPU)", Shape::per_gpu(gpus, true)));
    }
    for gpus in [1, 2, 4, 8, 16] {
        points.push(("GPUs (no MIG, dense per GPU)", Shape::per_gpu(gpus, false)));
    }
    for procs in [10, 100, 500, 1000, 2000] {
        points.push((
            "processes",
            Shape {
                procs,
                ..Shape::DENSE
            },
        ));
    }
    for pods in [1, 10, 100, 300, 500] {
        points.push((
            "pods",
            Shape {
                pods,
                ..Shape::DENSE
            },
        ));
    }
    points
}

fn scale(budget: Duration) {
    println!(
        "## Scale curve (CPU-time medians, wall-clock cycle median beside; each point measured for about {budget:?})\n"
    );
    println!(
        "| varies | GPUs | MIG | processes | pods | series | bytes | join µs | encode µs | cycle µs | ns/series | cycle wall µs |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (varies, shape) in scale_points() {
        let inputs = Inputs::build(shape);
        let iters = iterations_for(&inputs, budget);
        let t = run(&inputs, 5, iters, None);
        let cycle = median(&t.cycle_cpu);
        println!(
            "| {varies} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} |",
            shape.gpus,
            if shape.mig { "on" } else { "off" },
            shape.procs,
            shape.pods,
            t.series,
            t.bytes,
            us(median(&t.join_cpu)),
            us(median(&t.encode_cpu)),
            us(cycle),
            cycle.as_nanos() as f64 / t.series.max(1) as f64,
            us(median(&t.cycle)),
        );
    }
    println!();
}

/// The only code callgrind counts (scripts/bench-callgrind.sh toggles collection on this
/// function): `cycles` sampler cycles, each a join, an encode and the drop of the previous
/// snapshot. Returns the last exposition's series and bytes.
#[inline(never)]
fn measured_cycles(
    inputs: &Inputs,
    mut previous: Snapshot,
    opts: &EncodeOptions,
    cycles: usize,
) -> (usize, usize) {
    let mut last = (0, 0);
    for c in 0..cycles {
        let snap = inputs.join(previous.timestamp_seconds + 1.0 + c as f64, Some(&previous));
        let e = encode(&snap, opts);
        last = (e.series, e.text.len());
        black_box(e);
        previous = snap;
    }
    black_box(previous);
    last
}

fn callgrind(shape: Shape, cycles: usize) {
    let inputs = Inputs::build(shape);
    let opts = options();
    // One cycle outside the measured function: one-time initialisation (lazy tables) and the
    // first snapshot, so every measured cycle is a steady-state one.
    let first = inputs.join(1.7e9, None);
    black_box(encode(&first, &opts));
    let (series, bytes) = measured_cycles(&inputs, first, &opts, cycles);
    println!("series={series} bytes={bytes} cycles={cycles}");
}

fn num(it: &mut impl Iterator<Item = String>, what: &str) -> Result<usize, Box<dyn Error>> {
    let v = it.next().ok_or_else(|| format!("{what} needs a number"))?;
    v.parse::<usize>()
        .map_err(|e| format!("{what}: {v:?}: {e}").into())
}

/// `--dcgm-compat`: encode dcgm-exporter's families too, as `--metrics.dcgm-compat` does.
static DCGM_COMPAT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn options() -> EncodeOptions {
    EncodeOptions {
        dcgm_compat: DCGM_COMPAT.load(std::sync::atomic::Ordering::Relaxed),
        ..EncodeOptions::default()
    }
}

struct Args {
    iters: usize,
    budget: Duration,
    callgrind: Option<Shape>,
    cycles: usize,
}

fn parse_args() -> Result<Args, Box<dyn Error>> {
    let mut args = Args {
        iters: 300,
        budget: Duration::from_millis(400),
        callgrind: None,
        cycles: 5,
    };
    let mut no_mig = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--iters" => args.iters = num(&mut it, "--iters")?.max(1),
            "--budget-ms" => {
                args.budget = Duration::from_millis(num(&mut it, "--budget-ms")? as u64)
            }
            "--cycles" => args.cycles = num(&mut it, "--cycles")?.max(1),
            "--no-mig" => no_mig = true,
            "--dcgm-compat" => DCGM_COMPAT.store(true, std::sync::atomic::Ordering::Relaxed),
            "--callgrind" => {
                let gpus = num(&mut it, "--callgrind GPUS")?.max(1);
                let procs = num(&mut it, "--callgrind PROCESSES")?;
                let pods = num(&mut it, "--callgrind PODS")?.max(1);
                args.callgrind = Some(Shape {
                    gpus,
                    mig: true,
                    procs,
                    pods,
                });
            }
            // `cargo bench` passes --bench; filters and other harness flags mean nothing here.
            _ => {}
        }
    }
    if let Some(s) = args.callgrind.as_mut() {
        s.mig = !no_mig;
    }
    Ok(args)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    if let Some(shape) = args.callgrind {
        callgrind(shape, args.cycles);
        return Ok(());
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "# join + encode per sample cycle (load average at start: {})\n",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    dense(args.iters);
    scale(args.budget);
    Ok(())
}
