//! The demo's flags: whether to serve the simulated node, and as which fleet member. Every build
//! has them: a binary that does not carry the demo (feature `demo` off: the release image) hides
//! them from `--help` and refuses them with one line and exit code 2, so `--demo` is never
//! silently ignored. They join the exporter's command line as its [`BinaryFlags`].

use tessera_exporter::app::Simulation;
use tessera_exporter::config::{parse_bool, BinaryFlags, Defaults};
use tessera_exporter::options::Resolver;

/// Why a build without the `demo` feature refuses `--demo` and `--demo.fleet-node`.
pub const NO_DEMO: &str = "this build has no demo (release images leave it out); run it from a source checkout: `cargo run --release -- --demo`";

/// What the demo's flags need from the demo itself (crates/demo), which only a build with the
/// `demo` feature links.
#[derive(Debug, Clone, Copy)]
pub struct DemoFleet {
    /// Reads `--demo.fleet-node`: the index of a simulated fleet's member.
    pub parse_index: fn(&str) -> Result<u32, String>,
    /// The node name of the fleet member with this index.
    pub node_name: fn(u32) -> String,
}

/// The demo this build carries.
#[cfg(feature = "demo")]
pub const CARRIED: Option<DemoFleet> = Some(DemoFleet {
    parse_index: tessera_demo::fleet::parse_index,
    node_name: fleet_node_name,
});
/// The demo this build carries: none.
#[cfg(not(feature = "demo"))]
pub const CARRIED: Option<DemoFleet> = None;

#[cfg(feature = "demo")]
fn fleet_node_name(index: u32) -> String {
    tessera_demo::fleet::FleetNode::new(index).node_name()
}

/// Where a machine without a GPU may turn: the demo, when this build carries it.
pub const NO_GPU_HINT: Option<&str> = if CARRIED.is_some() {
    Some("on a machine without a GPU try `tessera --demo`")
} else {
    None
};

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Serve a built-in 9-GPU H100 node (fake NVML, kubelet and pods) instead of real GPUs [default: false].
    #[arg(long = "demo", env = "TESSERA_DEMO", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_demo",
          hide = CARRIED.is_none())]
    pub demo: Option<String>,
    #[arg(long = "no-demo", hide = true, overrides_with = "demo")]
    pub no_demo: bool,
    /// Run the demo as node N of a simulated fleet: its node name, cluster, sharing mix and
    /// load are derived from N (0 to 99999; docs/scale.md); needs --demo [default: none].
    #[arg(
        long = "demo.fleet-node",
        env = "TESSERA_DEMO_FLEET_NODE",
        value_name = "N",
        hide = CARRIED.is_none()
    )]
    pub demo_fleet_node: Option<String>,
    /// The demo this build carries ([`CARRIED`]); tests clear it to resolve as a build without.
    #[arg(skip = CARRIED)]
    pub carried: Option<DemoFleet>,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            demo: None,
            no_demo: false,
            demo_fleet_node: None,
            carried: CARRIED,
        }
    }
}

/// The demo's resolved options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoOptions {
    pub enabled: bool,
    /// `--demo.fleet-node`: the demo runs as this node of a simulated fleet.
    pub fleet_node: Option<u32>,
}

impl BinaryFlags for DemoArgs {
    type Options = DemoOptions;

    fn resolve(&self, r: &mut Resolver) -> (DemoOptions, Defaults) {
        let enabled = self.demo(r);
        let fleet_node = self.fleet_node(r, enabled);
        let defaults = Defaults {
            // The demo's GPU 8 is shared through a DRA claim, so DRA is on by default there,
            // still switchable.
            kube_dra: enabled,
            // A fleet member is named after its index unless told otherwise.
            node_name: self.carried.zip(fleet_node).map(|(f, n)| (f.node_name)(n)),
        };
        (
            DemoOptions {
                enabled,
                fleet_node,
            },
            defaults,
        )
    }

    /// `--kube.dra`'s help names the default `--demo` changes.
    fn finish(command: clap::Command) -> clap::Command {
        // `mut_args`, not `mut_arg`: that one moves the flag to the end of the generated docs.
        command.mut_args(|arg| {
            if arg.get_long() != Some("kube.dra") {
                return arg;
            }
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            arg.help(help.replace("[default: false]", "[default: false; true with --demo]"))
        })
    }

    const DOC_PRECEDENCE: &'static str = "\
`--demo` is the exception: a flag or an environment variable, never a key of the file. The demo
is a cargo feature (`demo`, on by default); release images are built without it, and there
`--demo` stops with exit code 2.
";

    const DOC_BOOL_EXAMPLE: &'static str = "TESSERA_DEMO";
}

impl DemoArgs {
    /// Flag or environment only: a config file must not turn a real node into a simulated one.
    fn demo(&self, r: &mut Resolver) -> bool {
        let given = if self.no_demo { &None } else { &self.demo };
        let demo = r.get_unfiled("demo", given, false, parse_bool);
        if demo && self.carried.is_none() {
            r.conflict(format!("--demo: {NO_DEMO}"));
        }
        demo
    }

    /// The fleet member the demo runs as; `demo`: whether the demo runs at all. Without the
    /// demo there is no fleet member; given alone (with `--demo` it is already refused), the
    /// flag is refused like `--demo`.
    fn fleet_node(&self, r: &mut Resolver, demo: bool) -> Option<u32> {
        let Some(fleet) = self.carried else {
            let given = r.get("demo.fleet-node", &self.demo_fleet_node, false, |_| {
                Ok(true)
            });
            if given && !demo {
                r.conflict(format!("--demo.fleet-node: {NO_DEMO}"));
            }
            return None;
        };
        let node = r.get("demo.fleet-node", &self.demo_fleet_node, None, |s| {
            (fleet.parse_index)(s).map(Some)
        });
        if let (Some(n), false) = (node, demo) {
            r.conflict(format!(
                "--demo.fleet-node ({n}) runs the demo as a fleet member; it needs --demo"
            ));
        }
        node
    }
}

/// The demo node to serve: when `--demo` is given (only a build that carries it resolves so).
#[cfg(feature = "demo")]
pub fn simulation(demo: &DemoOptions) -> Option<Simulation> {
    demo.enabled
        .then(|| tessera_demo::simulation(demo.fleet_node))
}

/// The demo node to serve: none in a build without it.
#[cfg(not(feature = "demo"))]
pub fn simulation(_: &DemoOptions) -> Option<Simulation> {
    None
}

#[cfg(test)]
#[path = "demo_flags_tests.rs"]
mod tests;
