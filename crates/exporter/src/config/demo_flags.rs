//! The demo's flags: whether to serve the simulated node, and as which fleet member. They live
//! here, not in crates/demo, because every build has them: a binary that does not carry the demo
//! (the release image) hides them from `--help` and refuses them with one line and exit code 2,
//! so `--demo` is never silently ignored.

use std::sync::OnceLock;

use crate::options::{parse_bool, Resolver};

/// Why a build without the `demo` feature refuses `--demo` and `--demo.fleet-node`.
pub const NO_DEMO: &str = "this build has no demo (release images leave it out); run it from a source checkout: `cargo run --release -- --demo`";

/// What the demo's flags need from the demo itself, which the exporter does not hold
/// (crates/demo): a binary that carries it hands it over with [`carry_demo`] before parsing.
#[derive(Debug, Clone, Copy)]
pub struct DemoFleet {
    /// Reads `--demo.fleet-node`: the index of a simulated fleet's member.
    pub parse_index: fn(&str) -> Result<u32, String>,
    /// The node name of the fleet member with this index.
    pub node_name: fn(u32) -> String,
}

/// Set once, by the binary, before any flag is parsed; clap reads it while it builds the command.
static CARRIED: OnceLock<DemoFleet> = OnceLock::new();

/// Shows and accepts the demo's flags from now on: the binary carries the demo.
pub fn carry_demo(fleet: DemoFleet) {
    let _ = CARRIED.set(fleet);
}

fn carried() -> Option<&'static DemoFleet> {
    CARRIED.get()
}

fn not_carried() -> bool {
    carried().is_none()
}

#[derive(Debug, Default, clap::Args)]
pub struct DemoArgs {
    /// Serve a built-in 9-GPU H100 node (fake NVML, kubelet and pods) instead of real GPUs [default: false].
    #[arg(long = "demo", env = "TESSERA_DEMO", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_demo",
          hide = not_carried())]
    pub demo: Option<String>,
    #[arg(long = "no-demo", hide = true, overrides_with = "demo")]
    pub no_demo: bool,
    /// Run the demo as node N of a simulated fleet: its node name, cluster, sharing mix and
    /// load are derived from N (0 to 99999; docs/scale.md); needs --demo [default: none].
    #[arg(
        long = "demo.fleet-node",
        env = "TESSERA_DEMO_FLEET_NODE",
        value_name = "N",
        hide = not_carried()
    )]
    pub demo_fleet_node: Option<String>,
}

/// The demo's resolved options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoOptions {
    pub enabled: bool,
    /// `--demo.fleet-node`: the demo runs as this node of a simulated fleet.
    pub fleet_node: Option<u32>,
}

impl DemoArgs {
    pub fn resolve(&self, r: &mut Resolver) -> DemoOptions {
        let enabled = self.demo(r);
        DemoOptions {
            enabled,
            fleet_node: self.fleet_node(r, enabled),
        }
    }

    /// Flag or environment only: a config file must not turn a real node into a simulated one.
    fn demo(&self, r: &mut Resolver) -> bool {
        let given = if self.no_demo { &None } else { &self.demo };
        let demo = r.get_unfiled("demo", given, false, parse_bool);
        if demo && not_carried() {
            r.conflict(format!("--demo: {NO_DEMO}"));
        }
        demo
    }

    /// The fleet member the demo runs as; `demo`: whether the demo runs at all. Without the
    /// demo there is no fleet member; given alone (with `--demo` it is already refused), the
    /// flag is refused like `--demo`.
    fn fleet_node(&self, r: &mut Resolver, demo: bool) -> Option<u32> {
        let Some(fleet) = carried() else {
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

impl DemoOptions {
    /// A fleet member is named after its index unless told otherwise.
    pub fn node_name(&self) -> Option<String> {
        let fleet = carried()?;
        self.fleet_node.map(fleet.node_name)
    }
}
