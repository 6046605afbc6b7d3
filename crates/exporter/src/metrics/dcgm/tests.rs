//! Unit tests of the compat exposition: the tenant rule on exclusive, shared, MIG and
//! unallocated devices, and hostile label values.

use std::sync::Arc;

use super::*;
use crate::model::holding::PodRef;
use crate::model::join::{join, JoinInputs};
use crate::model::testkit;
use crate::model::view::ProcessView;
use crate::model::{
    GpmActivity, GpuSample, MemoryBytes, MigSample, NvmlSample, ProcessKind, ProcessSample,
};

const MIB_U: u64 = 1024 * 1024;

fn base(sample: GpuSample) -> Snapshot {
    let nvml = NvmlSample {
        driver_version: "580.1".into(),
        gpus: vec![sample],
        ..Default::default()
    };
    join(JoinInputs {
        node: "node-1",
        ..testkit::inputs(&nvml)
    })
}

fn gpu(util: f64, used_mib: u64) -> GpuSample {
    GpuSample {
        index: 0,
        uuid: "GPU-0".into(),
        model: "NVIDIA H100 80GB HBM3".into(),
        pci_bus_id: "00000000:18:00.0".into(),
        up: true,
        mig_enabled: Some(false),
        memory: Some(MemoryBytes {
            total: 80_000 * MIB_U,
            used: used_mib * MIB_U,
            reserved: 500 * MIB_U,
        }),
        utilization: Some(util),
        memory_utilization: Some(0.2),
        gpm: Some(GpmActivity {
            sm_activity: 0.6,
            tensor_activity: 0.3,
            ..Default::default()
        }),
        temperature_celsius: Some(60.0),
        xid_watched: true,
        sm_clock_hertz: Some(1_980e6),
        energy_joules: Some(12.5),
        ..Default::default()
    }
}

fn holder(
    ns: &str,
    pod: &str,
    container: &str,
    mig: Option<&str>,
    sm: Option<f64>,
    mib: u64,
) -> ContainerUse {
    ContainerUse {
        mig_uuid: mig.map(str::to_owned),
        memory_used_bytes: mib * MIB_U,
        sm_utilization: sm,
        ..testkit::container_use(PodRef {
            namespace: ns.into(),
            pod: pod.into(),
            container: container.into(),
            workload_kind: "Pod".into(),
            workload: pod.into(),
            labels: vec![],
        })
    }
}

fn with(mode: SharingMode, containers: Vec<ContainerUse>, sample: GpuSample) -> Snapshot {
    let mut s = base(sample);
    s.gpus[0].sharing_mode = mode;
    s.gpus[0].containers = containers;
    s
}

/// A process on GPU 0 (in `mig`, if given); `probe`: whether the CUDA probe reports for it.
fn process(pid: u32, mig: Option<&str>, kind: Option<ProcessKind>, probe: bool) -> ProcessView {
    ProcessView {
        sample: ProcessSample {
            pid,
            name: "python3".into(),
            kind,
            mig_uuid: mig.map(str::to_owned),
            ..Default::default()
        },
        pod: None,
        compute: Default::default(),
        probe_busy_seconds: probe.then_some(1.0),
        probe_kernels: probe.then_some(10),
        probe_traced_share: None,
    }
}

fn probed(mut s: Snapshot, pids: &[u32]) -> Snapshot {
    s.gpus[0].processes = pids.iter().map(|&p| process(p, None, None, true)).collect();
    s
}

#[path = "published_tests.rs"]
mod published;

fn compat(s: &Snapshot) -> String {
    encode(s, &EncodeOptions::default()).text
}

/// `(pod, value)` of each series of `family`.
fn series(text: &str, family: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .map(|l| {
            let pod = l
                .split("pod=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("?")
                .to_owned();
            let v = l
                .rsplit_once(' ')
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(f64::NAN);
            (pod, v)
        })
        .collect()
}

fn total(s: &[(String, f64)]) -> f64 {
    s.iter().map(|(_, v)| v).sum()
}

#[test]
fn an_exclusive_gpu_gives_its_holder_the_device_values() {
    let s = with(
        SharingMode::Exclusive,
        vec![holder("ml", "train-0", "trainer", None, Some(0.5), 1000)],
        gpu(0.9, 1012),
    );
    let t = compat(&s);
    assert_eq!(
        series(&t, "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        vec![("train-0".into(), 0.9)]
    );
    assert_eq!(
        series(&t, "DCGM_FI_DEV_GPU_UTIL"),
        vec![("train-0".into(), 90.0)]
    );
    assert_eq!(
        series(&t, "DCGM_FI_DEV_FB_USED"),
        vec![("train-0".into(), 1012.0)]
    );
    assert_eq!(
        series(&t, "DCGM_FI_PROF_SM_ACTIVE"),
        vec![("train-0".into(), 0.6)]
    );
    // Per-GPU fields carry the one pod's labels too, in dcgm-exporter's units.
    assert_eq!(
        series(&t, "DCGM_FI_DEV_GPU_TEMP"),
        vec![("train-0".into(), 60.0)]
    );
    assert_eq!(
        series(&t, "DCGM_FI_DEV_SM_CLOCK"),
        vec![("train-0".into(), 1980.0)]
    );
    assert_eq!(
        series(&t, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
        vec![("train-0".into(), 12_500.0)]
    );
    assert_eq!(
        series(&t, "DCGM_FI_DEV_FB_FREE"),
        vec![("train-0".into(), 80_000.0 - 1012.0 - 500.0)]
    );
    assert_eq!(
        series(&t, "DCGM_FI_DEV_XID_ERRORS"),
        vec![("train-0".into(), 0.0)]
    );
    let line = t
        .lines()
        .find(|l| l.starts_with("DCGM_FI_DEV_GPU_TEMP{"))
        .unwrap();
    assert_eq!(
        line,
        "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-0\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",\
         modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"580.1\",\
         container=\"trainer\",namespace=\"ml\",pod=\"train-0\",sharing_mode=\"exclusive\"} 60.0"
    );
    // Fields tessera cannot source are absent, never 0.
    // (this GPU's sample has no such readings)
    for absent in [
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "DCGM_FI_DEV_ENC_UTIL",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    ] {
        assert!(!t.contains(absent), "{absent} served");
    }
    assert!(t.ends_with("# EOF\n"));
}

#[test]
fn a_shared_gpu_splits_additive_fields_and_never_copies_the_device_value() {
    // Every process carries the probe, so every holder's compute figure is measured.
    let s = probed(
        with(
            SharingMode::TimeSlicing,
            vec![
                holder("a", "busy", "c", None, Some(0.5), 3000),
                holder("b", "idle", "c", None, Some(0.0), 2000),
            ],
            gpu(0.8, 5012),
        ),
        &[1, 2],
    );
    let t = compat(&s);
    let gr = series(&t, "DCGM_FI_PROF_GR_ENGINE_ACTIVE");
    assert_eq!(
        gr,
        vec![("busy".into(), 0.5), ("idle".into(), 0.0), ("".into(), 0.3)]
    );
    assert!(
        (total(&gr) - 0.8).abs() < 1e-9,
        "sum by UUID is the device value"
    );
    let util = series(&t, "DCGM_FI_DEV_GPU_UTIL");
    assert!((total(&util) - 80.0).abs() < 1e-9);
    // Memory is known for every tenant; the remainder is what no pod holds.
    let fb = series(&t, "DCGM_FI_DEV_FB_USED");
    assert_eq!(
        fb,
        vec![
            ("busy".into(), 3000.0),
            ("idle".into(), 2000.0),
            ("".into(), 12.0)
        ]
    );
    // Free memory follows used memory: each series reads the device's occupancy.
    let free = series(&t, "DCGM_FI_DEV_FB_FREE");
    let device_free = 80_000.0 - 5012.0 - 500.0;
    assert!((total(&free) - device_free).abs() < 1e-6, "{free:?}");
    for ((p, u), (p2, f)) in fb.iter().zip(&free) {
        assert_eq!(p, p2);
        let ratio = u / (u + f);
        assert!(
            (ratio - 5012.0 / (5012.0 + device_free)).abs() < 1e-9,
            "{p}: {ratio}"
        );
    }
    // No per-tenant figure: all remainder, not a copy per pod.
    assert_eq!(series(&t, "DCGM_FI_PROF_SM_ACTIVE"), vec![("".into(), 0.6)]);
    assert_eq!(
        series(&t, "DCGM_FI_DEV_MEM_COPY_UTIL"),
        vec![("".into(), 20.0)]
    );
    // Per-GPU fields once, without pod labels: two pods hold the GPU.
    assert_eq!(series(&t, "DCGM_FI_DEV_GPU_TEMP"), vec![("".into(), 60.0)]);
}

#[test]
fn one_holder_of_a_shared_gpu_is_not_handed_the_device_value() {
    // Time-slicing with one holder now: a process outside any pod may be using the GPU.
    let s = with(
        SharingMode::TimeSlicing,
        vec![holder("a", "only", "c", None, None, 100)],
        gpu(0.7, 112),
    );
    let t = compat(&s);
    assert_eq!(
        series(&t, "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        vec![("".into(), 0.7)]
    );
    // Per-GPU fields: one pod holds it, so they carry its labels.
    assert_eq!(
        series(&t, "DCGM_FI_DEV_GPU_TEMP"),
        vec![("only".into(), 60.0)]
    );
}

#[test]
fn one_pod_with_two_containers_labels_per_gpu_fields_without_a_container() {
    let s = with(
        SharingMode::TimeSlicing,
        vec![
            holder("a", "p", "c1", None, Some(0.1), 10),
            holder("a", "p", "c2", None, Some(0.2), 10),
        ],
        gpu(0.3, 20),
    );
    let t = compat(&s);
    let temp = t
        .lines()
        .find(|l| l.starts_with("DCGM_FI_DEV_GPU_TEMP{"))
        .unwrap();
    assert!(
        temp.contains("container=\"\",namespace=\"a\",pod=\"p\""),
        "{temp}"
    );
}

#[test]
fn an_unallocated_gpu_has_one_series_without_pod_labels() {
    let t = compat(&with(SharingMode::Unallocated, vec![], gpu(0.25, 12)));
    assert_eq!(
        series(&t, "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        vec![("".into(), 0.25)]
    );
    assert_eq!(series(&t, "DCGM_FI_DEV_FB_USED"), vec![("".into(), 12.0)]);
}

#[test]
fn mig_instances_carry_their_own_series_split_by_the_same_rule() {
    // 1,400 MiB used in the instances, 100 MiB outside them.
    let mut sample = gpu(0.0, 1500);
    sample.mig_enabled = Some(true);
    sample.utilization = None;
    let mig = |id: u32, uuid: &str, used: u64, sm: f64| MigSample {
        uuid: uuid.into(),
        gpu_instance_id: id,
        compute_instance_id: 0,
        profile: "1g.10gb".into(),
        slices: 1,
        memory: Some(MemoryBytes {
            total: 10_000 * MIB_U,
            used: used * MIB_U,
            reserved: 0,
        }),
        gpm: Some(GpmActivity {
            sm_activity: sm,
            graphics_activity: Some(sm + 0.05),
            pcie_tx_bytes_per_second: Some(1e9),
            ..Default::default()
        }),
    };
    sample.mig_instances = vec![mig(7, "MIG-a", 500, 0.4), mig(8, "MIG-b", 900, 0.5)];
    let mut s = base(sample);
    let g = &mut s.gpus[0];
    assert_eq!(g.mig.len(), 2, "join keeps the instances");
    g.mig[0].sharing_mode = SharingMode::Mig;
    g.mig[1].sharing_mode = SharingMode::MigTimeSlicing;
    g.containers = vec![
        holder("a", "solo", "c", Some("MIG-a"), Some(0.4), 488),
        holder("b", "x", "c", Some("MIG-b"), Some(0.3), 400),
        holder("b", "y", "c", Some("MIG-b"), None, 488),
    ];
    let t = compat(&s);
    let sm = series(&t, "DCGM_FI_PROF_SM_ACTIVE");
    assert_eq!(
        sm,
        vec![("solo".into(), 0.4), ("".into(), 0.5)],
        "x's figure is not published: y's is withheld and nobody carries the probe"
    );
    // On an instance the engine's figure is the SM activity the container shares divide, not
    // GPM's graphics figure (0.45, 0.55): the sole holder's value is its own figure.
    let gr = series(&t, "DCGM_FI_PROF_GR_ENGINE_ACTIVE");
    assert_eq!(gr, sm);
    let instance = |family: &str| -> Vec<(String, f64)> {
        let lines: String = t
            .lines()
            .filter(|l| l.contains("GPU_I_ID="))
            .map(|l| format!("{l}\n"))
            .collect();
        series(&lines, family)
    };
    let fb = instance("DCGM_FI_DEV_FB_USED");
    assert_eq!(
        fb,
        vec![
            ("solo".into(), 500.0),
            ("x".into(), 400.0),
            ("y".into(), 488.0),
            ("".into(), 12.0)
        ]
    );
    // Free memory per instance, with the holders' labels, paired with used memory.
    let free = instance("DCGM_FI_DEV_FB_FREE");
    assert_eq!(free[0], ("solo".into(), 9500.0));
    assert_eq!(free.len(), 4, "{free:?}");
    assert!((total(&free[1..]) - 9100.0).abs() < 1e-6);
    for ((p, u), (_, f)) in fb[1..].iter().zip(&free[1..]) {
        assert!((u / (u + f) - 0.09).abs() < 1e-9, "{p}");
    }
    // GPU-wide traffic is not put on an instance; NVML refuses utilization on MIG GPUs.
    assert!(!t.contains("DCGM_FI_PROF_PCIE_TX_BYTES"));
    assert!(!t.contains("DCGM_FI_DEV_GPU_UTIL"));
    let line = t
        .lines()
        .find(|l| l.starts_with("DCGM_FI_PROF_SM_ACTIVE{") && l.contains("pod=\"solo\""))
        .unwrap();
    assert!(
        line.contains("GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"7\""),
        "{line}"
    );
    assert!(line.contains("sharing_mode=\"mig\""), "{line}");
}

/// On the demo's MIG GPUs, `sum by (UUID)` of FB_FREE would miss 10.5-11.2 GB, the slices no
/// instance held, unless the GPU's own row counts them.
#[test]
fn mig_memory_outside_every_instance_makes_the_sums_by_uuid_the_gpus() {
    let mut sample = gpu(0.0, 3_000);
    sample.mig_enabled = Some(true);
    sample.utilization = None;
    let mig = |id: u32, used: u64| MigSample {
        uuid: format!("MIG-{id}"),
        gpu_instance_id: id,
        profile: "2g.20gb".into(),
        slices: 2,
        memory: Some(MemoryBytes {
            total: 20_000 * MIB_U,
            used: used * MIB_U,
            reserved: 0,
        }),
        ..Default::default()
    };
    // Two instances of 20,000 MiB use 2,500; 500 more are used outside them, and 40,000 MiB
    // (less the 500 reserved) are in no instance at all.
    sample.mig_instances = vec![mig(1, 1_000), mig(2, 1_500)];
    let s = base(sample);
    let t = compat(&s);
    let rows = |family: &str| -> Vec<&str> {
        t.lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .collect()
    };
    let sum = |family: &str| -> f64 {
        rows(family)
            .iter()
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    let (total_mib, used_mib, reserved_mib) = (80_000.0, 3_000.0, 500.0);
    assert_eq!(sum("DCGM_FI_DEV_FB_USED"), used_mib);
    assert_eq!(
        sum("DCGM_FI_DEV_FB_FREE"),
        total_mib - used_mib - reserved_mib
    );
    assert_eq!(
        sum("DCGM_FI_DEV_FB_FREE") + sum("DCGM_FI_DEV_FB_USED") + sum("DCGM_FI_DEV_FB_RESERVED"),
        total_mib
    );
    for (family, want) in [
        ("DCGM_FI_DEV_FB_USED", 500.0),
        ("DCGM_FI_DEV_FB_FREE", 39_000.0),
    ] {
        let outside: Vec<&str> = rows(family)
            .into_iter()
            .filter(|l| !l.contains("GPU_I_ID="))
            .collect();
        assert_eq!(outside.len(), 1, "{family}: one row outside the instances");
        assert!(
            outside[0].contains("pod=\"\"") && outside[0].contains("sharing_mode=\"mig\""),
            "{}",
            outside[0]
        );
        assert!(
            outside[0].ends_with(&format!(" {want:.1}")),
            "{}",
            outside[0]
        );
    }
}

#[test]
fn a_lost_gpu_keeps_its_last_xid_and_nothing_else() {
    let mut sample = gpu(0.5, 10);
    sample.up = false;
    sample.xid_counts.insert(13, 2);
    sample.xid_counts.insert(79, 1);
    sample.last_xid = Some(79);
    sample.xid_watched = true;
    let t = compat(&with(SharingMode::Exclusive, vec![], sample));
    let names: Vec<&str> = t
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('{').next().unwrap())
        .collect();
    assert_eq!(names, vec!["DCGM_FI_DEV_XID_ERRORS"]);
    assert_eq!(series(&t, "DCGM_FI_DEV_XID_ERRORS")[0].1, 79.0);
}

#[test]
fn no_xid_is_0_only_where_xids_are_watched() {
    let mut sample = gpu(0.5, 10);
    sample.xid_watched = true;
    let t = compat(&with(SharingMode::Exclusive, vec![], sample.clone()));
    assert_eq!(series(&t, "DCGM_FI_DEV_XID_ERRORS")[0].1, 0.0);
    sample.xid_watched = false;
    let t = compat(&with(SharingMode::Exclusive, vec![], sample));
    assert!(!t.contains("DCGM_FI_DEV_XID_ERRORS"));
}

#[test]
fn hostile_label_values_are_escaped_and_capped() {
    let mut h = holder("ns", "p\"od\n{x}", "c\\", None, Some(0.1), 1);
    h.pod = Arc::new(PodRef {
        namespace: "n".repeat(400),
        ..(*h.pod).clone()
    });
    let s = with(SharingMode::Exclusive, vec![h], gpu(0.1, 1));
    let e = encode(
        &s,
        &EncodeOptions {
            max_label_value_len: 64,
            ..Default::default()
        },
    );
    assert!(e.truncated_label_values > 0);
    assert!(e.text.contains(r#"pod="p\"od\n{x}""#), "{}", e.text);
    assert!(e.text.contains(r#"container="c\\""#));
    assert!(!e.text.contains(&"n".repeat(65)));
    // Every series line is one line: nothing broke out of its quotes.
    for l in e.text.lines().filter(|l| !l.starts_with('#')) {
        assert!(l.starts_with("DCGM_FI_"), "{l}");
    }
}

#[test]
fn the_main_exposition_carries_the_compat_families_before_one_eof() {
    let s = with(SharingMode::Unallocated, vec![], gpu(0.25, 12));
    let opts = EncodeOptions {
        dcgm_compat: true,
        ..Default::default()
    };
    let e = crate::metrics::encode(&s, &opts);
    assert_eq!(e.text.matches("# EOF").count(), 1);
    assert!(e.text.ends_with("# EOF\n"));
    assert!(e.text.contains("\nDCGM_FI_PROF_GR_ENGINE_ACTIVE{") && e.text.contains("\ngpu_up{"));
    let d = e.dcgm.expect("compat text");
    assert!(!d.text.contains("gpu_up"));
    let off = crate::metrics::encode(&s, &EncodeOptions::default());
    assert!(off.dcgm.is_none() && !off.text.contains("DCGM_"));
}

#[test]
fn tenants_past_the_series_cap_are_folded_into_the_remainder() {
    let s = probed(
        with(
            SharingMode::Mps,
            vec![
                holder("a", "p1", "c", None, Some(0.2), 100),
                holder("a", "p2", "c", None, Some(0.3), 200),
            ],
            gpu(0.6, 312),
        ),
        &[1, 2],
    );
    let opts = EncodeOptions {
        max_series: 1,
        dcgm_compat: true,
        ..Default::default()
    };
    let e = encode(&s, &opts);
    // The first tenant figure met takes the one slot; every later one is folded.
    let gr = series(&e.text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE");
    assert_eq!(gr, vec![("p1".into(), 0.2), ("".into(), 0.4)]);
    let fb = series(&e.text, "DCGM_FI_DEV_FB_USED");
    assert_eq!(
        fb,
        vec![("".into(), 312.0)],
        "sum by GPU is still the device's"
    );
    let free = series(&e.text, "DCGM_FI_DEV_FB_FREE");
    assert_eq!(free, vec![("".into(), 80_000.0 - 312.0 - 500.0)]);
    assert!(e.dropped_series >= 3, "{}", e.dropped_series);
    let main = crate::metrics::encode(&s, &opts);
    assert!(main
        .text
        .lines()
        .any(|l| l.starts_with("tessera_series_dropped{") && !l.ends_with(" 0.0")));
}
