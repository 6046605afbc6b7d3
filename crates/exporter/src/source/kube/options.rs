//! The API server's flags: this node's name, the pod watch, copied labels and DRA.

use super::KubeConfig;
use crate::options::{split_list, Resolver};

#[derive(Debug, Default, clap::Args)]
pub struct KubeArgs {
    /// This node's name, for the `node` label and the pod watch [default: $NODE_NAME, else the hostname].
    #[arg(long = "kube.node-name", env = "TESSERA_KUBE_NODE_NAME")]
    pub node_name: Option<String>,
    /// Watch this node's pods and labels through the API server (in-cluster config or kubeconfig) [default: true].
    #[arg(long = "kube.enabled", env = "TESSERA_KUBE_ENABLED", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_kube_enabled")]
    pub kube_enabled: Option<String>,
    #[arg(long = "no-kube.enabled", hide = true, overrides_with = "kube_enabled")]
    pub no_kube_enabled: bool,
    /// Pod labels copied onto container series as label_<name>, comma-separated [default: none].
    #[arg(long = "kube.pod-labels", env = "TESSERA_KUBE_POD_LABELS")]
    pub pod_labels: Option<String>,
    /// Resolve DRA allocations through ResourceSlices and read the pods' ResourceClaims for their NVIDIA sharing config [default: false].
    #[arg(long = "kube.dra", env = "TESSERA_KUBE_DRA", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_kube_dra")]
    pub kube_dra: Option<String>,
    #[arg(long = "no-kube.dra", hide = true, overrides_with = "kube_dra")]
    pub no_kube_dra: bool,
}

/// The API server's resolved options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeOptions {
    /// This node's name: the `node` label, and the pod watch's field selector.
    pub node_name: String,
    pub enabled: bool,
    pub pod_labels: Vec<String>,
    pub dra: bool,
}

impl KubeOptions {
    /// What the watch runs with: these options and its own cadences, which only tests change.
    pub fn watch(&self) -> KubeConfig {
        KubeConfig {
            pod_labels: self.pod_labels.clone(),
            dra: self.dra,
            ..KubeConfig::new(self.node_name.clone())
        }
    }
}

impl KubeArgs {
    /// `dra`: `--kube.dra`'s default; `node_name`: a name chosen elsewhere (by the binary's own
    /// flags).
    pub fn resolve(&self, r: &mut Resolver, dra: bool, node_name: Option<String>) -> KubeOptions {
        KubeOptions {
            node_name: self.node_name(r, node_name),
            enabled: self.enabled(r),
            pod_labels: self.pod_labels(r),
            dra: self.dra(r, dra),
        }
    }

    /// `default`: a name chosen elsewhere; else $NODE_NAME or the hostname.
    fn node_name(&self, r: &mut Resolver, default: Option<String>) -> String {
        let default = default.unwrap_or_else(default_node_name);
        r.get("kube.node-name", &self.node_name, default, |s| {
            if s.is_empty() || s.len() > 253 {
                Err("must be 1 to 253 characters".into())
            } else {
                Ok(s.to_owned())
            }
        })
    }

    fn enabled(&self, r: &mut Resolver) -> bool {
        r.get_bool(
            "kube.enabled",
            &self.kube_enabled,
            self.no_kube_enabled,
            true,
        )
    }

    fn pod_labels(&self, r: &mut Resolver) -> Vec<String> {
        r.get("kube.pod-labels", &self.pod_labels, Vec::new(), |s| {
            let labels = split_list(s);
            match labels
                .iter()
                .find(|l| l.len() > 317 || l.contains(char::is_whitespace))
            {
                Some(bad) => Err(format!("{bad:?} is not a Kubernetes label name")),
                None => Ok(labels),
            }
        })
    }

    /// `default`: on where the binary's flags turn it on (a simulated node sharing a GPU through
    /// a DRA claim), still switchable.
    fn dra(&self, r: &mut Resolver, default: bool) -> bool {
        r.get_bool("kube.dra", &self.kube_dra, self.no_kube_dra, default)
    }
}

fn default_node_name() -> String {
    if let Ok(n) = std::env::var("NODE_NAME") {
        if !n.is_empty() {
            return n;
        }
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
