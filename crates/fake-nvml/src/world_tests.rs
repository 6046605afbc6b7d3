//! Unit tests of scenario resolution: derived defaults and validation.

use crate::scenario::Scenario;
use crate::world::World;

fn world(yaml: &str) -> Result<World, String> {
    World::from_scenario(&Scenario::parse(yaml)?)
}

#[test]
fn readings_are_derived_from_processes() {
    let w = world(
        "gpus: [{ sku: h100-80gb-hbm3 }, { sku: h100-80gb-hbm3 }]
phases:
  - at_ms: 0
    processes: [{ pid: 1, gpu: 0, memory_mib: 810, sm_util: 40, mem_util: 10 }]",
    )
    .unwrap();
    let busy = &w.phase(0).gpus[0];
    assert_eq!((busy.utilization, busy.memory_utilization), (40, 10));
    assert_eq!(
        busy.memory_used_mib,
        810 + crate::activity::CONTEXT_BASELINE_MIB
    );
    assert!((busy.power_w - (74.0 + 626.0 * 0.9 * 0.4)).abs() < 1e-9);
    assert_eq!(
        (busy.temperature_c, busy.sm_clock_mhz, busy.clock_reasons),
        (54, 1980, 0)
    );
    assert!((busy.gpm.sm - 38.0).abs() < 1e-9);
    assert!((busy.gpm.dram - 8.0).abs() < 1e-9);

    let idle = &w.phase(0).gpus[1];
    assert_eq!((idle.utilization, idle.memory_used_mib), (0, 0));
    assert_eq!(
        (idle.power_w, idle.sm_clock_mhz, idle.clock_reasons),
        (74.0, 345, 0x1)
    );
}

#[test]
fn mig_placements_and_instance_ids_default_deterministically() {
    let w = world(
        "gpus:
  - sku: h100-80gb-hbm3
    mig: { instances: [ { profile: 2g.20gb }, { profile: 1g.10gb }, { profile: 2g.20gb } ] }",
    )
    .unwrap();
    let gpu = &w.gpus[0];
    let m = gpu.mig.as_ref().unwrap();
    // Each takes the first free allowed start: 2g.20gb at 0, 1g.10gb at 2
    // (0 and 1 are taken), the second 2g.20gb at 4 (2 is taken).
    let layout: Vec<(u32, u32)> = m.iter().map(|i| (i.placement, i.gpu_instance_id)).collect();
    assert_eq!(layout, [(0, 3), (2, 9), (4, 5)]);
    // NVML enumerates MIG devices by GPU instance id.
    assert_eq!(w.phase(0).mig[0].enumerated, [0, 2, 1]);
    assert!(m
        .iter()
        .all(|i| i.uuid.starts_with("MIG-") && i.compute_instance_id == 0));

    let full = world(
        "gpus: [{ sku: h100-80gb-hbm3, mig: { instances: [ { profile: 2g.20gb }, { profile: 1g.10gb }, { profile: 2g.20gb }, { profile: 2g.20gb } ] } }]",
    );
    assert!(full
        .unwrap_err()
        .contains("no free placement left for 2g.20gb"));
}

#[test]
fn validation_messages_name_the_problem() {
    let err = |yaml| world(yaml).unwrap_err();
    assert!(err("gpus: [{ sku: h100-80gb-hbm3, mig: { instances: [ { profile: 2g.20gb }, { profile: 2g.20gb }, { profile: 2g.20gb }, { profile: 2g.20gb } ] } }]")
        .contains("at most 3 instance(s) of 2g.20gb"));
    assert!(err(
        "gpus: [{ sku: h100-80gb-hbm3, uuid: GPU-x }, { sku: h100-80gb-hbm3, uuid: GPU-x }]"
    )
    .contains("uuid GPU-x is used twice"));
    assert!(
        err("gpus: [{ sku: h100-80gb-hbm3 }]\nphases: [{ at_ms: 5 }]")
            .contains("first phase must start at at_ms: 0")
    );
    assert!(err("gpus: [{ sku: h100-80gb-hbm3 }]\nphases: [{ at_ms: 0, gpus: [{ gpu: 0, utilization: 120 }] }]")
        .contains("utilization is a percentage"));
    assert!(err("gpus: [{ sku: h100-80gb-hbm3 }]\nphases: [{ at_ms: 0, gpus: [{ gpu: 0, mig_gpm: { 0: { sm_activity: 5 } } }] }]")
        .contains("no mig section"));
    assert!(
        err("gpus: [{ sku: h100-80gb-hbm3 }]\nfaults: [{ call: nvmlDeviceGetPowerUsage }]")
            .contains("needs `error`, `slow_ms` or `crash`")
    );
    assert!(err(
        "gpus: [{ sku: h100-80gb-hbm3 }]\nphases: [{ at_ms: 0, xids: [{ gpu: 3, xid: 79 }] }]"
    )
    .contains("GPU 3 does not exist"));
}

#[test]
fn default_uuids_and_bus_ids_look_real_and_are_stable() {
    let yaml = "gpus: [{ sku: h100-80gb-hbm3 }, { sku: a100-sxm4-40gb }]";
    let (a, b) = (world(yaml).unwrap(), world(yaml).unwrap());
    assert_eq!(a.gpus[1].uuid, b.gpus[1].uuid);
    let u = &a.gpus[0].uuid;
    assert!(u.starts_with("GPU-") && u.len() == 40, "{u}");
    assert_eq!(a.gpus[0].pci.bus_id(), "00000000:18:00.0");
    assert_eq!(a.gpus[1].pci.bus_id_legacy(), "0000:2A:00.0");
}

#[test]
fn demo_lists_every_process_once() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/demo.yaml");
    let procs = Scenario::load(&path).unwrap().processes();
    assert_eq!(procs.len(), 27);
    assert!(procs.iter().all(|p| p.comm.is_some()));
    assert!(procs
        .iter()
        .any(|p| p.pid == 45060 && p.comm.as_deref() == Some("nvidia-cuda-mps-server")));
}

#[test]
fn a_phase_can_repartition_mig_keeping_the_instances_it_does_not_touch() {
    let w = world(
        "gpus:
  - sku: h100-80gb-hbm3
    mig: { instances: [ { profile: 3g.40gb, placement: 0 }, { profile: 2g.20gb, placement: 4 } ] }
phases:
  - { at_ms: 0 }
  - at_ms: 100
    gpus:
      - gpu: 0
        mig: { instances: [ { profile: 3g.40gb, placement: 0 }, { profile: 1g.10gb, placement: 4 }, { profile: 1g.10gb, placement: 5 } ] }
    processes:
      - { pid: 7, gpu: 0, mig_instance: 2, memory_mib: 100 }
  - { at_ms: 200 }",
    )
    .unwrap();
    let m = w.gpus[0].mig.as_ref().unwrap();
    assert_eq!(m.len(), 4, "3g kept, 2g destroyed, two 1g created");
    assert_eq!(w.phase(0).mig[0].listed, [0, 1]);
    assert_eq!(w.phase(1).mig[0].listed, [0, 2, 3]);
    assert_eq!(
        w.phase(2).mig[0],
        w.phase(1).mig[0],
        "a layout holds until changed"
    );
    assert_ne!(m[2].uuid, m[3].uuid);
    assert_eq!(w.phase(1).gpus[0].processes[0].instance, Some(3));
    assert!(w.phases.iter().all(|p| p.gpus[0].mig.len() == 4));
}

#[test]
fn a_repartition_is_checked_like_a_layout() {
    let base = "gpus: [{ sku: h100-80gb-hbm3, mig: { instances: [ { profile: 1g.10gb } ] } }, { sku: h100-80gb-hbm3 }]";
    let overlap = format!(
        "{base}\nphases: [{{ at_ms: 0, gpus: [{{ gpu: 0, mig: {{ instances: [ {{ profile: 4g.40gb, placement: 0 }}, {{ profile: 2g.20gb, placement: 2 }} ] }} }}] }}]"
    );
    let e = world(&overlap).unwrap_err();
    assert!(
        e.contains("phases[0]: gpus[0]: mig:") && e.contains("overlaps"),
        "{e}"
    );
    let mode =
        format!("{base}\nphases: [{{ at_ms: 0, gpus: [{{ gpu: 1, mig: {{ instances: [] }} }}] }}]");
    assert!(world(&mode).unwrap_err().contains("not the mode"));
    let gone = format!(
        "{base}\nphases: [{{ at_ms: 0, gpus: [{{ gpu: 0, mig: {{ instances: [] }} }}], processes: [{{ pid: 1, gpu: 0, mig_instance: 0 }}] }}]"
    );
    assert!(world(&gone).unwrap_err().contains("no instance 0"));
}

#[test]
fn a_process_names_its_pid_or_a_pid_file_but_not_both() {
    let gpus = "gpus: [{ sku: h100-80gb-hbm3 }]\nphases:\n  - at_ms: 0\n    processes: ";
    let ok = world(&format!(
        "{gpus}[{{ pid_file: /run/a.pid, gpu: 0 }}, {{ pid: 4, gpu: 0 }}]"
    ));
    let files = ok.unwrap().phase(0).gpus[0].processes.clone();
    assert_eq!(files[0].pid_file.as_deref(), Some("/run/a.pid".as_ref()));
    let both = world(&format!(
        "{gpus}[{{ pid: 3, pid_file: /run/a.pid, gpu: 0 }}]"
    ));
    assert_eq!(
        both.unwrap_err(),
        "phases[0]: pid 3: give exactly one of `pid` and `pid_file`"
    );
    let neither = world(&format!("{gpus}[{{ gpu: 0 }}]"));
    assert!(neither.unwrap_err().contains("exactly one"));
    let twice = world(&format!(
        "{gpus}[{{ pid_file: /run/a.pid, gpu: 0 }}, {{ pid_file: /run/a.pid, gpu: 0 }}]"
    ));
    assert_eq!(
        twice.unwrap_err(),
        "phases[0]: pid_file /run/a.pid is listed twice on GPU 0"
    );
}

#[test]
fn a_stretched_timeline_changes_phase_later_and_only_then() {
    let yaml = "repeat_after_ms: 1000
gpus: [{ sku: h100-80gb-hbm3 }]
phases:
  - { at_ms: 0, processes: [] }
  - { at_ms: 300, processes: [{ pid: 1, gpu: 0, memory_mib: 810, sm_util: 40, mem_util: 10 }] }";
    let mut s = Scenario::parse(yaml).unwrap();
    s.stretch_timeline(10.0).unwrap();
    assert_eq!((s.phases[1].at_ms, s.repeat_after_ms), (3000, Some(10000)));
    let w = World::from_scenario(&s).unwrap();
    assert_eq!(w.timeline.phase_at(2999.0), 0);
    assert_eq!(w.timeline.phase_at(3000.0), 1);
    assert_eq!(
        w.timeline.phase_at(10001.0),
        0,
        "the loop's period is stretched too"
    );
    for bad in [0.5, 0.0, -2.0, f64::NAN, f64::INFINITY] {
        let mut s = Scenario::parse(yaml).unwrap();
        assert!(s.stretch_timeline(bad).is_err(), "{bad}");
    }
}
