use super::*;
use crate::model::cluster::dashed_uid;
use serde_json::json;

fn pod(v: serde_json::Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn owned(kind: &str, name: &str, controller: bool, labels: serde_json::Value) -> Pod {
    pod(
        json!({"metadata": {"name": "p-abc12", "namespace": "ns", "uid": "U", "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "o", "controller": controller}]}}),
    )
}

fn owner_of(p: &Pod) -> (Option<String>, Option<String>) {
    let m = PodMeta::from_pod(p, &[]);
    (m.owner_kind, m.owner_name)
}

fn some(a: &str, b: &str) -> (Option<String>, Option<String>) {
    (Some(a.into()), Some(b.into()))
}

#[test]
fn owners() {
    let h = json!({"pod-template-hash": "7d9f8c6b5"});
    assert_eq!(
        owner_of(&owned("ReplicaSet", "web-7d9f8c6b5", true, h.clone())),
        some("Deployment", "web")
    );
    // A hash that is not the name's suffix: a bare ReplicaSet, reported as such.
    assert_eq!(
        owner_of(&owned("ReplicaSet", "web-other", true, h.clone())),
        some("ReplicaSet", "web-other")
    );
    assert_eq!(
        owner_of(&owned("ReplicaSet", "web-7d9f8c6b5", true, json!({}))),
        some("ReplicaSet", "web-7d9f8c6b5")
    );
    assert_eq!(
        owner_of(&owned("ReplicaSet", "-7d9f8c6b5", true, h)),
        some("ReplicaSet", "-7d9f8c6b5")
    );
    assert_eq!(
        owner_of(&owned("StatefulSet", "db", true, json!({}))),
        some("StatefulSet", "db")
    );
    assert_eq!(
        owner_of(&owned("DaemonSet", "agent", true, json!({}))),
        some("DaemonSet", "agent")
    );
    assert_eq!(
        owner_of(&owned("Job", "nightly-29000000", true, json!({}))),
        some("Job", "nightly-29000000")
    );
    assert_eq!(
        owner_of(&owned("ConfigMap", "x", false, json!({}))),
        (None, None)
    );
    assert_eq!(
        owner_of(&pod(json!({"metadata": {"name": "bare"}}))),
        (None, None)
    );
}

#[test]
fn containers_in_spec_order_with_ids_stripped() {
    let p = pod(json!({
        "metadata": {"name": "p", "uid": "AbC_1"},
        "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "a"}, {"name": "b"}],
                 "ephemeralContainers": [{"name": "debug"}]},
        "status": {"phase": "Running",
            "containerStatuses": [
                {"name": "b", "containerID": "cri-o://bbb", "image": "", "imageID": "", "ready": true, "restartCount": 0},
                {"name": "a", "containerID": "containerd://aaa", "image": "", "imageID": "", "ready": true, "restartCount": 0}],
            "initContainerStatuses": [{"name": "init", "containerID": "docker://iii", "image": "", "imageID": "", "ready": false, "restartCount": 0}],
            "ephemeralContainerStatuses": [{"name": "debug", "containerID": "", "image": "", "imageID": "", "ready": false, "restartCount": 0},
                                           {"name": "orphan", "containerID": "containerd://ooo", "image": "", "imageID": "", "ready": false, "restartCount": 0}]}
    }));
    let m = PodMeta::from_pod(&p, &[]);
    let got: Vec<(&str, Option<&str>)> = m
        .containers
        .iter()
        .map(|c| (c.name.as_str(), c.container_id.as_deref()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("init", Some("iii")),
            ("a", Some("aaa")),
            ("b", Some("bbb")),
            ("debug", None),
            ("orphan", Some("ooo"))
        ]
    );
    assert_eq!(m.uid, "abc-1");
    assert_eq!(m.phase.as_deref(), Some("Running"));
}

#[test]
fn uid_forms() {
    assert_eq!(
        dashed_uid("0123456789ABCDEF0123456789abcdef").as_deref(),
        Some("01234567-89ab-cdef-0123-456789abcdef")
    );
    assert_eq!(dashed_uid("0123"), None);
    assert_eq!(dashed_uid("0123456789abcdef0123456789abcdeg"), None);
    assert_eq!(normalize_uid("AB_cd-EF"), "ab-cd-ef");
    assert_eq!(strip_scheme("containerd://ABC").as_deref(), Some("abc"));
    assert_eq!(strip_scheme("plain").as_deref(), Some("plain"));
    assert_eq!(strip_scheme(""), None);
}

#[test]
fn slim_keeps_only_config_hash_annotations() {
    let mut p = pod(json!({"metadata": {"name": "p", "annotations": {
            CONFIG_HASH_ANNOTATION: "h", CONFIG_MIRROR_ANNOTATION: "h",
            "kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "managedFields": [{"manager": "kubectl"}]}}));
    slim(&mut p);
    assert!(p.metadata.managed_fields.as_ref().is_none_or(Vec::is_empty));
    assert_eq!(p.annotations().len(), 2);
}

#[test]
fn scheduler_annotations_and_env_survive_slim() {
    let g = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";
    let mut p = pod(
        json!({"metadata": {"name": "p", "namespace": "ml", "annotations": {
            fractional::HAMI_ALLOCATED: format!("{g},NVIDIA,3000,30:;"),
            "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"containers": [{"name": "main", "env": [
                {"name": fractional::MPS_THREADS_ENV, "value": "40"},
                {"name": "FROM_REF", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}}),
    );
    slim(&mut p);
    assert_eq!(p.annotations().len(), 1);
    let m = PodMeta::from_pod(&p, &[]);
    assert_eq!(m.sharing.grants.len(), 1);
    assert_eq!(m.sharing.grants[0].uuid.as_deref(), Some(g));
    assert_eq!(
        m.sharing.mps_for("main").and_then(|e| e.thread_ratio),
        Some(0.4)
    );
}

#[test]
fn init_containers_that_run_to_completion_are_named_and_sidecars_are_not() {
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "U"},
        "spec": {
            "initContainers": [
                {"name": "fetch"},
                {"name": "proxy", "restartPolicy": "Always"},
                {"name": "warmup"}
            ],
            "containers": [{"name": "main"}]
        }
    }));
    assert_eq!(
        PodMeta::from_pod(&p, &[]).init_containers,
        ["fetch", "warmup"]
    );
}
