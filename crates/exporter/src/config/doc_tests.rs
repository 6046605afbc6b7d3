#[test]
fn the_example_config_file_is_valid() {
    let example = super::INTRO_END
        .split_once("```yaml\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(yaml, _)| yaml)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tessera.yaml");
    std::fs::write(&path, example).unwrap();
    let cli: super::Cli =
        super::Cli::parse_args(["tessera", "--config.file", path.to_str().unwrap()]).unwrap();
    let s = super::super::Settings::resolve(&cli).unwrap();
    assert_eq!(
        s.sources.kube.pod_labels,
        ["team", "app.kubernetes.io/name"]
    );
    assert!(!s.nvml.collect_gpm);
}

#[test]
fn defaults_and_links_render() {
    assert_eq!(
        super::split_default("Cadence [default: 10s]."),
        ("Cadence", Some("10s"))
    );
    assert_eq!(
        super::split_default("Per-MIG series"),
        ("Per-MIG series", None)
    );
    assert_eq!(
        super::markdown("see docs/scale.md; `a<b>` or label_<name>"),
        "see [scale.md](scale.md); `a<b>` or label_&lt;name&gt;"
    );
}
