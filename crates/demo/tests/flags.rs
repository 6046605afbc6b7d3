//! The demo's flags in a binary that carries the demo (the exporter alone refuses them: its
//! config tests).

use tessera::config::{Cli, Settings};

fn cli(args: &[&str]) -> Cli {
    tessera_demo::carry();
    Cli::parse_args(std::iter::once("tessera").chain(args.iter().copied())).unwrap()
}

#[test]
fn the_demo_turns_dra_on_unless_told_otherwise() {
    let on = |args: &[&str]| Settings::resolve(&cli(args)).unwrap().sources.kube.dra;
    assert!(!on(&[]));
    assert!(on(&["--demo"]));
    assert!(!on(&["--demo", "--kube.dra=false"]));
    assert!(!on(&["--demo", "--no-kube.dra"]));
}

#[test]
fn the_demo_is_a_boolean_flag() {
    assert!(Settings::resolve(&cli(&["--demo"])).unwrap().demo.enabled);
}

#[test]
fn a_fleet_node_is_named_from_its_index_needs_the_demo_and_is_bounded() {
    let s = Settings::resolve(&cli(&["--demo", "--demo.fleet-node=123"])).unwrap();
    assert_eq!(s.demo.fleet_node, Some(123));
    assert_eq!(s.sources.kube.node_name, "fleet-2-gpu-00123");
    let s = Settings::resolve(&cli(&[
        "--demo",
        "--demo.fleet-node=3",
        "--kube.node-name=x",
    ]))
    .unwrap();
    assert_eq!(s.sources.kube.node_name, "x");
    assert_eq!(
        Settings::resolve(&cli(&["--demo"]))
            .unwrap()
            .demo
            .fleet_node,
        None
    );
    let errors = Settings::resolve(&cli(&["--demo.fleet-node=1"])).unwrap_err();
    assert!(errors[0].to_string().contains("needs --demo"), "{errors:?}");
    let mut c = cli(&["--demo", "--demo.fleet-node=100000"]);
    c.from_env
        .insert("demo.fleet-node".into(), "TESSERA_DEMO_FLEET_NODE".into());
    let shown = Settings::resolve(&c).unwrap_err()[0].to_string();
    assert!(
        shown.starts_with("environment variable TESSERA_DEMO_FLEET_NODE (--demo.fleet-node):"),
        "{shown}"
    );
}

#[test]
fn a_typo_never_suggests_a_hidden_flag() {
    tessera_demo::carry();
    let err = |args: &[&str]| {
        Cli::parse_args(std::iter::once("tessera").chain(args.iter().copied()))
            .err()
            .map(|e| e.render().to_string())
            .unwrap_or_default()
    };
    // Hidden `--no-<flag>` spellings sit one edit away from their visible flags.
    for typo in ["--demoo", "--no-dem", "--no-demos", "--no-kube.dr"] {
        let text = err(&[typo]);
        assert!(text.contains(typo), "{typo}: {text}");
        // The typo itself may start with `--no-`; only a tip may not name such a flag.
        let tips: Vec<&str> = text.lines().filter(|l| l.contains("tip:")).collect();
        assert!(
            tips.iter().all(|l| !l.contains("'--no-")),
            "{typo} suggests a hidden flag: {text}"
        );
    }
}

/// The exporter's config tests walk the flags `--help` shows; a binary that carries the demo
/// shows two more, checked here the same way: shown with their defaults, and `--demo.fleet-node`
/// (not `--demo`: a file must not turn a real node into a simulated one) a key of the file.
#[test]
fn the_demo_flags_are_shown_with_their_defaults_and_the_fleet_node_is_a_file_key() {
    use clap::CommandFactory;
    tessera_demo::carry();
    let command = Cli::command();
    for (long, default) in [("demo", "false"), ("demo.fleet-node", "none")] {
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
            .unwrap();
        assert!(!arg.is_hide_set(), "--{long} is hidden");
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        assert!(help.contains(&format!("[default: {default}]")), "{help}");
    }
    let s = Settings::resolve(&cli(&[])).unwrap();
    assert!(!s.demo.enabled && s.demo.fleet_node.is_none());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.yaml");
    std::fs::write(&path, "demo.fleet-node: \"x\"\n").unwrap();
    let errors = Settings::resolve(&cli(&["--config.file", path.to_str().unwrap()]))
        .err()
        .unwrap_or_default();
    assert!(
        !errors
            .iter()
            .any(|e| matches!(e, tessera::config::ConfigError::UnknownKey { .. })),
        "{errors:?}"
    );
    assert!(
        !errors.is_empty(),
        "an invalid fleet node from the file is reported"
    );
}
