use super::*;
use crate::model::device_id::parse_device_id;
use crate::model::MigSample;

fn gpus() -> Vec<GpuSample> {
    vec![
        GpuSample {
            index: 0,
            uuid: "GPU-ae19043d-ef40-d753-6928-d875dd5f2b07".into(),
            minor_number: Some(3),
            ..Default::default()
        },
        GpuSample {
            index: 1,
            uuid: "GPU-00000000-0000-0000-0000-000000000001".into(),
            minor_number: Some(0),
            mig_instances: vec![MigSample {
                uuid: "MIG-11111111-2222-3333-4444-555555555555".into(),
                gpu_instance_id: 7,
                compute_instance_id: 0,
                ..Default::default()
            }],
            ..Default::default()
        },
    ]
}

#[test]
fn every_id_form_resolves() {
    let idx = DeviceIndex::new(&gpus());
    let r = |s: &str| idx.resolve(&parse_device_id(s).device);
    let gpu0 = Some(Target { gpu: 0, mig: None });
    let mig = Some(Target {
        gpu: 1,
        mig: Some(0),
    });
    assert_eq!(r("GPU-ae19043d-ef40-d753-6928-d875dd5f2b07"), gpu0);
    assert_eq!(r("GPU-AE19043D-EF40-D753-6928-D875DD5F2B07::3"), gpu0);
    assert_eq!(r("MIG-11111111-2222-3333-4444-555555555555"), mig);
    assert_eq!(r("MIG-GPU-00000000-0000-0000-0000-000000000001/7/0"), mig);
    assert_eq!(
        r("nvidia3"),
        gpu0,
        "GKE names GPUs by minor number, not NVML index"
    );
    assert_eq!(r("nvidia3/vgpu2"), gpu0);
    assert_eq!(r("nvidia0/gi7"), mig);
    assert_eq!(r("MIG-GPU-00000000-0000-0000-0000-000000000001/8/0"), None);
    assert_eq!(r("GPU-99999999-0000-0000-0000-000000000001"), None);
    assert_eq!(r("weird-id"), None);
}

#[test]
fn label_names_are_sanitized() {
    assert_eq!(
        label_name("app.kubernetes.io/name"),
        "label_app_kubernetes_io_name"
    );
    assert_eq!(label_name("team"), "label_team");
}
