use super::*;
use serde_json::json;

#[test]
fn typed_and_qualified_attributes() {
    let slice: v1::ResourceSlice = serde_json::from_value(json!({
            "metadata": {"name": "s"},
            "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                "nodeName": "node-a",
                "devices": [
                    {"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-1"}, "type": {"string": "gpu"},
                        "driverVersion": {"version": "580.0.0"}}},
                    {"name": "gpu-0-mig-1g10gb-19-0", "attributes": {"gpu.nvidia.com/uuid": {"string": "MIG-2"},
                        "parentUUID": {"string": "GPU-1"}, "profile": {"string": "1g.10gb"}, "type": {"string": "mig"}}},
                    {"name": "odd", "attributes": {"uuid": {"int": 7}, "profile": {"bool": true}}},
                    {"name": "bare"}
                ]}
        }))
        .unwrap();
    let d = from_v1(&slice);
    assert_eq!(d[0].uuid.as_deref(), Some("GPU-1"));
    assert_eq!(d[0].kind.as_deref(), Some("gpu"));
    assert_eq!(d[1].uuid.as_deref(), Some("MIG-2"));
    assert_eq!(d[1].parent_uuid.as_deref(), Some("GPU-1"));
    assert_eq!(d[1].profile.as_deref(), Some("1g.10gb"));
    assert_eq!(
        (d[2].uuid.as_deref(), d[2].profile.as_deref()),
        (Some("7"), Some("true"))
    );
    assert_eq!(
        d[3],
        DraDevice {
            driver: "gpu.nvidia.com".into(),
            pool: "node-a".into(),
            device: "bare".into(),
            ..Default::default()
        }
    );
}
