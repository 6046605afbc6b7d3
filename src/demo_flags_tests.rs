//! The demo's flags on the exporter's command line: in a build that carries the demo, and as a
//! build without it (the release image) refuses them.

use tessera_exporter::config::{ConfigError, Settings};

use super::{DemoArgs, DemoOptions};

type Cli = tessera_exporter::config::Cli<DemoArgs>;

fn cli(args: &[&str]) -> Cli {
    Cli::parse_args(std::iter::once("tessera").chain(args.iter().copied())).unwrap()
}

fn resolve(cli: &Cli) -> Result<(Settings, DemoOptions), Vec<ConfigError>> {
    Settings::resolve_with(cli)
}

/// A binary without the demo (the release image) knows its flags only to refuse them, one line
/// each, so `--demo` is never silently ignored.
#[test]
fn without_the_demo_its_flags_are_refused() {
    let without = |args: &[&str]| {
        let mut c = cli(args);
        c.binary.carried = None;
        resolve(&c)
    };
    for args in [
        &["--demo"][..],
        &["--demo=true"],
        &["--demo.fleet-node=3"],
        &["--demo", "--demo.fleet-node=3"],
    ] {
        let errors = without(args).unwrap_err();
        assert_eq!(errors.len(), 1, "{args:?}: {errors:?}");
        assert!(
            errors[0].to_string().contains("this build has no demo"),
            "{args:?}: {errors:?}"
        );
    }
    assert!(!without(&["--demo=false"]).unwrap().1.enabled);
}

#[cfg(feature = "demo")]
#[test]
fn the_demo_turns_dra_on_unless_told_otherwise() {
    let on = |args: &[&str]| resolve(&cli(args)).unwrap().0.sources.kube.dra;
    assert!(!on(&[]));
    assert!(on(&["--demo"]));
    assert!(!on(&["--demo", "--kube.dra=false"]));
    assert!(!on(&["--demo", "--no-kube.dra"]));
}

#[cfg(feature = "demo")]
#[test]
fn the_demo_is_a_boolean_flag() {
    assert!(resolve(&cli(&["--demo"])).unwrap().1.enabled);
}

#[cfg(feature = "demo")]
#[test]
fn a_fleet_node_is_named_from_its_index_needs_the_demo_and_is_bounded() {
    let (s, demo) = resolve(&cli(&["--demo", "--demo.fleet-node=123"])).unwrap();
    assert_eq!(demo.fleet_node, Some(123));
    assert_eq!(s.sources.kube.node_name, "fleet-2-gpu-00123");
    let (s, _) = resolve(&cli(&[
        "--demo",
        "--demo.fleet-node=3",
        "--kube.node-name=x",
    ]))
    .unwrap();
    assert_eq!(s.sources.kube.node_name, "x");
    assert_eq!(resolve(&cli(&["--demo"])).unwrap().1.fleet_node, None);
    let errors = resolve(&cli(&["--demo.fleet-node=1"])).unwrap_err();
    assert!(errors[0].to_string().contains("needs --demo"), "{errors:?}");
    let mut c = cli(&["--demo", "--demo.fleet-node=100000"]);
    c.from_env
        .insert("demo.fleet-node".into(), "TESSERA_DEMO_FLEET_NODE".into());
    let shown = resolve(&c).unwrap_err()[0].to_string();
    assert!(
        shown.starts_with("environment variable TESSERA_DEMO_FLEET_NODE (--demo.fleet-node):"),
        "{shown}"
    );
}

#[test]
fn a_typo_never_suggests_a_hidden_flag() {
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
#[cfg(feature = "demo")]
#[test]
fn the_demo_flags_are_shown_with_their_defaults_and_the_fleet_node_is_a_file_key() {
    use clap::CommandFactory;
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
    let (_, demo) = resolve(&cli(&[])).unwrap();
    assert!(!demo.enabled && demo.fleet_node.is_none());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.yaml");
    std::fs::write(&path, "demo.fleet-node: \"x\"\n").unwrap();
    let errors = resolve(&cli(&["--config.file", path.to_str().unwrap()]))
        .err()
        .unwrap_or_default();
    assert!(
        !errors
            .iter()
            .any(|e| matches!(e, ConfigError::UnknownKey { .. })),
        "{errors:?}"
    );
    assert!(
        !errors.is_empty(),
        "an invalid fleet node from the file is reported"
    );
}

/// `--kube.dra`'s help names the default the demo changes, in every build.
#[test]
fn the_dra_help_names_the_demo_default() {
    let command = Cli::full_command();
    let arg = command
        .get_arguments()
        .find(|a| a.get_long() == Some("kube.dra"))
        .unwrap();
    let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    assert!(
        help.ends_with("[default: false; true with --demo]"),
        "{help}"
    );
}
