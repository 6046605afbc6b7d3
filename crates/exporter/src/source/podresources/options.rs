//! The kubelet's flags: whether and how often pod-resources is read, and which resources are
//! GPUs.

use std::path::PathBuf;
use std::time::Duration;

use super::PodResourcesConfig;
use crate::options::{parse_duration, split_list, Resolver};

#[derive(Debug, Default, clap::Args)]
pub struct KubeletArgs {
    /// Read allocations from the kubelet's pod-resources API [default: true].
    #[arg(long = "kubelet.enabled", env = "TESSERA_KUBELET_ENABLED", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_kubelet_enabled")]
    pub kubelet_enabled: Option<String>,
    #[arg(
        long = "no-kubelet.enabled",
        hide = true,
        overrides_with = "kubelet_enabled"
    )]
    pub no_kubelet_enabled: bool,
    /// The kubelet's pod-resources socket (mount it read-only) [default: /var/lib/kubelet/pod-resources/kubelet.sock].
    #[arg(
        long = "kubelet.pod-resources-socket",
        env = "TESSERA_KUBELET_POD_RESOURCES_SOCKET"
    )]
    pub pod_resources_socket: Option<String>,
    /// How often to poll pod-resources (the kubelet rate-limits it; at least 1s) [default: 5s].
    #[arg(long = "kubelet.poll-interval", env = "TESSERA_KUBELET_POLL_INTERVAL")]
    pub kubelet_poll_interval: Option<String>,
    /// Extra resource names that are GPUs, comma-separated, besides nvidia.com/gpu, nvidia.com/gpu.shared and nvidia.com/mig-<profile>[.shared] [default: none].
    #[arg(long = "kubelet.resource-name", env = "TESSERA_KUBELET_RESOURCE_NAME")]
    pub resource_names: Option<String>,
}

/// The kubelet's resolved options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletOptions {
    pub enabled: bool,
    pub socket: PathBuf,
    pub poll_interval: Duration,
    /// Resource names that are GPUs besides those matched by pattern.
    pub resource_names: Vec<String>,
}

impl KubeletOptions {
    /// What the poller runs with: these options and its own bounds (timeouts, sizes), which
    /// only tests change.
    pub fn poller(&self) -> PodResourcesConfig {
        PodResourcesConfig {
            socket: self.socket.clone(),
            interval: self.poll_interval,
            ..PodResourcesConfig::default()
        }
    }
}

impl KubeletArgs {
    pub fn resolve(&self, r: &mut Resolver) -> KubeletOptions {
        KubeletOptions {
            enabled: self.enabled(r),
            socket: self.socket(r),
            poll_interval: self.poll_interval(r),
            resource_names: self.resource_names(r),
        }
    }

    fn enabled(&self, r: &mut Resolver) -> bool {
        r.get_bool(
            "kubelet.enabled",
            &self.kubelet_enabled,
            self.no_kubelet_enabled,
            true,
        )
    }

    fn socket(&self, r: &mut Resolver) -> PathBuf {
        r.get(
            "kubelet.pod-resources-socket",
            &self.pod_resources_socket,
            PathBuf::from(super::DEFAULT_SOCKET),
            |s| {
                if s.is_empty() {
                    Err("must not be empty".into())
                } else {
                    Ok(PathBuf::from(s))
                }
            },
        )
    }

    fn poll_interval(&self, r: &mut Resolver) -> Duration {
        r.get(
            "kubelet.poll-interval",
            &self.kubelet_poll_interval,
            Duration::from_secs(5),
            |s| {
                let d = parse_duration(s)?;
                if d < Duration::from_secs(1) {
                    Err("must be at least 1s: the kubelet rate-limits this socket".into())
                } else {
                    Ok(d)
                }
            },
        )
    }

    fn resource_names(&self, r: &mut Resolver) -> Vec<String> {
        r.get(
            "kubelet.resource-name",
            &self.resource_names,
            Vec::new(),
            |s| Ok(split_list(s)),
        )
    }
}
