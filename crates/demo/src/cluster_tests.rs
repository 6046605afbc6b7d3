use super::*;
use tessera_exporter::source::cgroup::parse_cgroup;

#[test]
fn planned_cgroups_parse_back_to_the_plan() {
    let pod = PodPlan {
        namespace: "team-a".into(),
        name: "jupyter-0".into(),
        containers: vec![ContainerPlan {
            name: "notebook".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let id = parse_cgroup(&format!("0::{}\n", pod.cgroup_path("notebook"))).unwrap();
    assert_eq!(id.pod_uid.as_deref(), Some(pod.uid().as_str()));
    assert_eq!(
        id.container_id.as_deref(),
        Some(pod.container_id("notebook").as_str())
    );
}
