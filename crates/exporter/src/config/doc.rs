//! docs/configuration.md, generated from the flags each component declares: its name, its
//! environment mirror, the default its help names and the help itself. The prose around the
//! table is kept here; `tessera --print-config-doc` prints the page.

use super::{BinaryFlags, Cli};

const INTRO: &str = "\
# Configuration

<!-- Generated from the flags' declarations: `cargo run -- --print-config-doc > docs/configuration.md`.
     A test fails when this copy is stale; edit the flags' help or crates/exporter/src/config/doc.rs instead. -->

Every setting is a flag. Each flag also has a `TESSERA_*` environment variable (dots and dashes
become `_`: `--sample.interval` is `TESSERA_SAMPLE_INTERVAL`) and a key in the YAML file given with
`--config.file` (`sample.interval: 2s`). Flags win over the environment, which wins over the file.
";

/// After the binary's [`BinaryFlags::DOC_PRECEDENCE`].
const INTRO_REST: &str = "
Every invalid value is reported on its own line, naming where it was set (the flag, the variable,
or the file and key), and tessera exits with code 2. Boolean flags are on when given alone
(`--web.enable-debug`) and off with `=false`; `true/false`, `1/0`, `yes/no` and `on/off` are
accepted everywhere (`";

/// After the binary's [`BinaryFlags::DOC_BOOL_EXAMPLE`].
const INTRO_END: &str = "=1`).

`tessera --help` prints the same list. With Helm, pass flags through `extraArgs`; the chart sets
the ones its values cover (port, socket path, DRA, dcgm-compat, detail).

A config file, for example:

```yaml
sample.interval: 2s
metrics.detail: full
kube.pod-labels: [team, app.kubernetes.io/name]
collect.gpm: false
```

## Flags

| flag | environment | default | meaning |
|---|---|---|---|
";

const OUTRO: &str = "
Endpoints: `/metrics` (OpenMetrics), `/healthz` (alive), `/readyz` (first sample published),
`/` (links), `/debug/attribution` (when enabled); on `--web.dcgm-listen-address`, `/metrics` with
the `DCGM_FI_*` families alone.

## Subcommands

| command | what |
|---|---|
| `tessera advise --prometheus URL` | rank a sharing strategy per workload from Prometheus history ([advisor.md](advisor.md)) |
| `tessera install-probe DIR` | copy the CUDA probe library shipped beside the binary into DIR ([cuda-probe.md](cuda-probe.md)) |
";

/// The page, one table row per visible flag in the order `--help` lists them; `X`: the flags
/// of the binary that prints it.
pub fn markdown_reference<X: BinaryFlags>() -> String {
    let mut out = String::from(INTRO);
    out.push_str(X::DOC_PRECEDENCE);
    out.push_str(INTRO_REST);
    out.push_str(X::DOC_BOOL_EXAMPLE);
    out.push_str(INTRO_END);
    for arg in Cli::<X>::full_command().get_arguments() {
        let (Some(long), false) = (arg.get_long(), arg.is_hide_set()) else {
            continue;
        };
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_default();
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let (meaning, default) = split_default(&help);
        out.push_str(&format!(
            "| `--{long}` | {env} | {} | {} |\n",
            shown_default(default),
            markdown(meaning)
        ));
    }
    out.push_str(OUTRO);
    out
}

/// A help text's meaning and the default it names (`… [default: 1s].`).
fn split_default(help: &str) -> (&str, Option<&str>) {
    let trimmed = help.trim_end_matches('.');
    match trimmed.rfind(" [default: ") {
        Some(at) if trimmed.ends_with(']') => (
            &trimmed[..at],
            Some(&trimmed[at + " [default: ".len()..trimmed.len() - 1]),
        ),
        _ => (help.trim_end_matches('.'), None),
    }
}

/// A value in code type; words ("$NODE_NAME, else the hostname") as they are.
fn shown_default(default: Option<&str>) -> String {
    match default {
        None | Some("none" | "off") => "—".to_owned(),
        Some(d) if d.contains(' ') => d.to_owned(),
        Some(d) => format!("`{d}`"),
    }
}

/// Help text as a table cell: `docs/x.md` becomes a link beside this page, and `<`, `>` and
/// `|` outside code spans are escaped.
fn markdown(help: &str) -> String {
    let mut out = String::new();
    for (i, part) in help.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(part);
            continue;
        }
        let mut rest = part;
        while let Some(at) = rest.find("docs/") {
            out.push_str(&escape(&rest[..at]));
            let path = &rest[at + "docs/".len()..];
            let end = path.find(".md").map_or(0, |e| e + ".md".len());
            if end == 0 {
                out.push_str("docs/");
            } else {
                let page = &path[..end];
                out.push_str(&format!("[{page}]({page})"));
            }
            rest = &path[end..];
        }
        out.push_str(&escape(rest));
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
}

#[cfg(test)]
#[path = "doc_tests.rs"]
mod tests;
