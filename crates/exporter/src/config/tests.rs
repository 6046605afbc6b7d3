//! Unit tests of flag, environment and file resolution.

use super::*;
use clap::Parser;
use std::time::Duration;

fn cli(args: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("tessera").chain(args.iter().copied())).unwrap()
}

#[test]
fn defaults_are_sane() {
    let s = Settings::resolve(&cli(&["--kube.node-name=n1"])).unwrap();
    assert_eq!(s.web.listen_address.to_string(), DEFAULT_LISTEN);
    assert_eq!(s.sample.interval, Duration::from_secs(1));
    assert!(s.nvml.collect_processes && !s.web.enable_debug);
    assert_eq!(s.sources.kube.node_name, "n1");
    let s = Settings::resolve(&cli(&["--web.listen-address=:9950"])).unwrap();
    assert_eq!(s.web.listen_address.to_string(), "0.0.0.0:9950");
}

#[test]
fn every_invalid_value_is_reported() {
    let errors = Settings::resolve(&cli(&[
        "--web.listen-address=nope",
        "--sample.interval=0s",
        "--log.format=xml",
        "--collect.mig=maybe",
        "--metrics.max-label-value-length=3",
    ]))
    .unwrap_err();
    assert_eq!(errors.len(), 5, "{errors:?}");
    assert!(errors[0].to_string().starts_with("--web.listen-address:"));
}

#[test]
fn file_fills_in_and_flags_win() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.yaml");
    std::fs::write(
        &path,
        "sample.interval: 250ms\nlog.format: json\ncollect.mig: false\nbogus: 1\n",
    )
    .unwrap();
    let errors = Settings::resolve(&cli(&["--config.file", path.to_str().unwrap()])).unwrap_err();
    assert_eq!(
        errors,
        vec![ConfigError::UnknownKey {
            path: path.display().to_string(),
            key: "bogus".into()
        }]
    );
    std::fs::write(
        &path,
        "sample.interval: 250ms\nlog.format: json\ncollect.mig: false\n",
    )
    .unwrap();
    let s = Settings::resolve(&cli(&[
        "--config.file",
        path.to_str().unwrap(),
        "--log.format=text",
    ]))
    .unwrap();
    assert_eq!(s.sample.interval, Duration::from_millis(250));
    assert_eq!(s.log.format, LogFormat::Text);
    assert!(!s.nvml.collect_mig);
}

#[test]
fn booleans_take_no_value_a_no_twin_or_any_usual_spelling() {
    let s = Settings::resolve(&cli(&["--web.enable-debug", "--kube.dra"])).unwrap();
    assert!(s.web.enable_debug && s.sources.kube.dra);
    let s = Settings::resolve(&cli(&[
        "--no-collect.processes",
        "--collect.mig=off",
        "--kube.enabled=0",
        "--no-kubelet.enabled",
    ]))
    .unwrap();
    assert!(
        !s.nvml.collect_processes
            && !s.nvml.collect_mig
            && !s.sources.kube.enabled
            && !s.sources.kubelet.enabled
    );
    // The last of a flag and its --no- twin wins.
    let s = Settings::resolve(&cli(&["--no-web.enable-debug", "--web.enable-debug"])).unwrap();
    assert!(s.web.enable_debug);
    let s = Settings::resolve(&cli(&["--web.enable-debug=yes", "--no-web.enable-debug"])).unwrap();
    assert!(!s.web.enable_debug);
    for (text, want) in [
        ("1", true),
        ("YES", true),
        ("On", true),
        ("no", false),
        ("false", false),
    ] {
        assert_eq!(parse_bool(text), Ok(want), "{text}");
    }
    assert!(parse_bool("maybe").is_err());
    // A value needs `=`: a bare word after a boolean flag is not swallowed as its value.
    assert!(Cli::<NoFlags>::try_parse_from(["tessera", "--web.enable-debug", "false"]).is_err());
}

#[test]
fn an_invalid_value_names_where_it_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.yaml");
    std::fs::write(&path, "sample.interval: soon\ncollect.mig: perhaps\n").unwrap();
    let mut c = cli(&["--config.file", path.to_str().unwrap(), "--log.format=xml"]);
    c.from_env
        .insert("log.format".into(), "TESSERA_LOG_FORMAT".into());
    let shown: Vec<String> = Settings::resolve(&c)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    let file = path.display();
    assert_eq!(
        shown,
        vec![
            format!("config file {file}: sample.interval: expected a duration such as 1s, 500ms or 2m (got \"soon\")"),
            format!("config file {file}: collect.mig: expected true or false (or 1/0, yes/no, on/off) (got \"perhaps\")"),
            "environment variable TESSERA_LOG_FORMAT (--log.format): expected text or json (got \"xml\")".to_owned(),
        ]
    );
}

#[test]
fn durations() {
    assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert!(parse_duration("").is_err());
    assert!(parse_duration("5").is_err());
    assert!(parse_duration("-1s").is_err());
    assert!(parse_duration("1e999s").is_err());
}

#[test]
fn dcgm_compat_is_off_by_default_and_set_by_flag_env_or_file() {
    let s = Settings::resolve(&cli(&[])).unwrap();
    assert!(!s.metrics.dcgm_compat && s.web.dcgm_listen_address.is_none());
    let s = Settings::resolve(&cli(&[
        "--metrics.dcgm-compat",
        "--web.dcgm-listen-address=:9400",
    ]))
    .unwrap();
    assert!(s.metrics.dcgm_compat);
    assert_eq!(
        s.web.dcgm_listen_address.unwrap().to_string(),
        "0.0.0.0:9400"
    );
    let s =
        Settings::resolve(&cli(&["--metrics.dcgm-compat", "--no-metrics.dcgm-compat"])).unwrap();
    assert!(!s.metrics.dcgm_compat);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.yaml");
    std::fs::write(
        &path,
        "metrics.dcgm-compat: true\nweb.dcgm-listen-address: \"127.0.0.1:9400\"\n",
    )
    .unwrap();
    let s = Settings::resolve(&cli(&["--config.file", path.to_str().unwrap()])).unwrap();
    assert!(s.metrics.dcgm_compat);
    assert_eq!(
        s.web.dcgm_listen_address.unwrap().to_string(),
        "127.0.0.1:9400"
    );
}

#[test]
fn a_dcgm_listener_without_compat_or_on_the_main_port_is_refused() {
    let errors = Settings::resolve(&cli(&["--web.dcgm-listen-address=:9400"])).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .to_string()
            .contains("needs --metrics.dcgm-compat=true"),
        "{}",
        errors[0]
    );
    let errors = Settings::resolve(&cli(&[
        "--metrics.dcgm-compat",
        "--web.listen-address=:9400",
        "--web.dcgm-listen-address=0.0.0.0:9400",
    ]))
    .unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let errors = Settings::resolve(&cli(&[
        "--metrics.dcgm-compat=perhaps",
        "--web.dcgm-listen-address=nope",
    ]))
    .unwrap_err();
    assert_eq!(errors.len(), 2, "{errors:?}");
}

#[test]
fn a_typo_never_suggests_a_hidden_flag() {
    let err = |args: &[&str]| {
        Cli::<NoFlags>::parse_args(std::iter::once("tessera").chain(args.iter().copied()))
            .err()
            .map(|e| e.render().to_string())
            .unwrap_or_default()
    };
    // Hidden `--no-<flag>` spellings sit one edit away from their visible flags.
    for typo in ["--no-kube.dr", "--no-web.enable-debu", "--no-kube.enable"] {
        let text = err(&[typo]);
        assert!(text.contains(typo), "{typo}: {text}");
        // The typo itself may start with `--no-`; only a tip may not name such a flag.
        let tips: Vec<&str> = text.lines().filter(|l| l.contains("tip:")).collect();
        assert!(
            tips.iter().all(|l| !l.contains("'--no-")),
            "{typo} suggests a hidden flag: {text}"
        );
    }
    // A visible flag is still suggested.
    let text = err(&["--web.enable-debu"]);
    assert!(text.contains("--web.enable-debug"), "{text}");
}

/// Each visible flag of `--help`, with the default its help names, if any.
fn declared_flags() -> Vec<(String, Option<String>)> {
    use clap::CommandFactory;
    Cli::<NoFlags>::command()
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            let default = help
                .trim_end_matches('.')
                .rsplit_once(" [default: ")
                .and_then(|(_, d)| d.strip_suffix(']'))
                .map(str::to_owned);
            Some((a.get_long()?.to_owned(), default))
        })
        .collect()
}

#[test]
fn the_default_a_flag_declares_is_the_one_it_resolves_to() {
    let bare = format!(
        "{:?}",
        Settings::resolve(&cli(&["--kube.node-name=n1"])).unwrap()
    );
    let mut checked = 0;
    for (flag, default) in declared_flags() {
        // Prose ("$NODE_NAME, else the hostname", "none") is not a value to pass.
        let Some(default) = default.filter(|d| !d.contains(' ') && d != "none" && d != "off")
        else {
            continue;
        };
        let given = format!("--{flag}={default}");
        let resolved = Settings::resolve(&cli(&["--kube.node-name=n1", &given]))
            .unwrap_or_else(|e| panic!("{given}: {e:?}"));
        assert_eq!(format!("{resolved:?}"), bare, "{given} is not the default");
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} defaults checked");
}

#[test]
fn every_declared_flag_is_a_key_of_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.yaml");
    for (flag, _) in declared_flags() {
        if flag == "config.file" {
            continue;
        }
        std::fs::write(&path, format!("{flag}: \"x\"\n")).unwrap();
        let errors = Settings::resolve(&cli(&["--config.file", path.to_str().unwrap()]))
            .err()
            .unwrap_or_default();
        assert!(
            !errors
                .iter()
                .any(|e| matches!(e, ConfigError::UnknownKey { .. })),
            "{flag}: {errors:?}"
        );
    }
}

/// The `pub` fields of `struct name` in `text`, with their types; `flattened`: only those
/// under `#[command(flatten)]`.
fn fields_of(text: &str, name: &str, flattened: bool) -> Vec<(String, String)> {
    // `Cli` is generic over the binary's own flags.
    let start = format!("pub struct {name}");
    let body = text
        .split_once(&format!("{start} {{"))
        .or_else(|| text.split_once(&format!("{start}<")))
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .unwrap_or_else(|| panic!("no `{start}`"));
    let mut out = Vec::new();
    let mut flatten = false;
    for line in body.lines().map(str::trim) {
        if line == "#[command(flatten)]" {
            flatten = true;
        } else if let Some((field, ty)) = line.strip_prefix("pub ").and_then(|l| l.split_once(": "))
        {
            if flatten || !flattened {
                out.push((field.to_owned(), ty.trim_end_matches(',').to_owned()));
            }
            flatten = false;
        }
    }
    out
}

/// A setting of its own in `Settings` (or `SourceOptions`) would be declared outside its
/// component: each field is a component's options, resolved from the `Cli` (or `SourceArgs`)
/// field of the same name (docs/design.md, "Adding a setting or a source").
#[test]
fn settings_hold_one_options_field_per_component() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let read = |p: &str| std::fs::read_to_string(src.join(p)).unwrap();
    let (config, cli, sources) = (
        read("config/mod.rs"),
        read("config/cli.rs"),
        read("source/mod.rs"),
    );
    for (options, args) in [
        (
            fields_of(&config, "Settings", false),
            // The binary's own flags resolve beside the settings, not into them.
            fields_of(&cli, "Cli", true)
                .into_iter()
                .filter(|(field, _)| field != "binary")
                .collect(),
        ),
        (
            fields_of(&sources, "SourceOptions", false),
            fields_of(&sources, "SourceArgs", true),
        ),
    ] {
        assert!(options.len() >= 3, "{options:?}");
        let names = |f: &[(String, String)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&options),
            names(&args),
            "one options field per flattened *Args field"
        );
        for (field, ty) in &options {
            assert!(
                ty.ends_with("Options"),
                "`{field}: {ty}` is not a component's options"
            );
        }
        for (field, ty) in &args {
            assert!(
                ty.ends_with("Args"),
                "`{field}: {ty}` is not a component's flags"
            );
        }
    }
}
