//! The demo's flags: whether to serve the simulated node, and as which fleet member.

use super::fleet::{parse_index, FleetNode};
use crate::options::{parse_bool, Resolver};

#[derive(Debug, Default, clap::Args)]
pub struct DemoArgs {
    /// Serve a built-in 9-GPU H100 node (fake NVML, kubelet and pods) instead of real GPUs [default: false].
    #[arg(long = "demo", env = "TESSERA_DEMO", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_demo")]
    pub demo: Option<String>,
    #[arg(long = "no-demo", hide = true, overrides_with = "demo")]
    pub no_demo: bool,
    /// Run the demo as node N of a simulated fleet: its node name, cluster, sharing mix and
    /// load are derived from N (0 to 99999; docs/scale.md); needs --demo [default: none].
    #[arg(
        long = "demo.fleet-node",
        env = "TESSERA_DEMO_FLEET_NODE",
        value_name = "N"
    )]
    pub demo_fleet_node: Option<String>,
}

impl DemoArgs {
    /// Flag or environment only: a config file must not turn a real node into a simulated one.
    pub fn demo(&self, r: &mut Resolver) -> bool {
        let given = if self.no_demo { &None } else { &self.demo };
        r.get_unfiled("demo", given, false, parse_bool)
    }

    /// The fleet member the demo runs as; `demo`: whether the demo runs at all.
    pub fn fleet_node(&self, r: &mut Resolver, demo: bool) -> Option<u32> {
        let node = r.get("demo.fleet-node", &self.demo_fleet_node, None, |s| {
            parse_index(s).map(Some)
        });
        if let (Some(n), false) = (node, demo) {
            r.conflict(format!(
                "--demo.fleet-node ({n}) runs the demo as a fleet member; it needs --demo"
            ));
        }
        node
    }

    /// A fleet member is named after its index unless told otherwise.
    pub fn node_name(fleet_node: Option<u32>) -> Option<String> {
        fleet_node.map(|n| FleetNode::new(n).node_name())
    }
}
