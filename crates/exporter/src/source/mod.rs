//! Sources do I/O and hand plain data to the pure model. Each one fails alone: a failing source
//! keeps its last good data (for a bounded time) and reports itself unhealthy.
//!
//! The sources the sampler reads as feeds (the kubelet, the API server, the CUDA probe) are
//! listed here once more, in [`SourceArgs`] and [`SourceOptions`], so that a new one is added
//! here, in `app::sources` (started) and in the sampler (read), and nowhere in `config`. NVML,
//! which the sampler drives itself, has its own place in the settings.

pub mod cgroup;
pub mod cpu;
pub mod kube;
pub mod nvml;
pub mod podresources;
pub mod probe;
pub mod procfs;

use std::sync::Arc;
use std::time::SystemTime;

use crate::options::Resolver;

/// The feeds' flags, in `--help` order.
#[derive(Debug, Default, clap::Args)]
pub struct SourceArgs {
    #[command(flatten)]
    pub kubelet: podresources::KubeletArgs,
    #[command(flatten)]
    pub kube: kube::KubeArgs,
    #[command(flatten)]
    pub probe: probe::ProbeArgs,
}

/// The feeds' resolved options, one field per source.
#[derive(Debug, Clone)]
pub struct SourceOptions {
    pub kubelet: podresources::KubeletOptions,
    pub kube: kube::KubeOptions,
    pub probe: probe::ProbeOptions,
}

impl SourceArgs {
    /// `dra`: `--kube.dra`'s default; `node_name`: a name chosen elsewhere (by the binary's
    /// own flags). Both only change defaults.
    pub fn resolve(&self, r: &mut Resolver, dra: bool, node_name: Option<String>) -> SourceOptions {
        SourceOptions {
            kubelet: self.kubelet.resolve(r),
            kube: self.kube.resolve(r, dra, node_name),
            probe: self.probe.resolve(r),
        }
    }
}

/// The latest word of an asynchronous source, published through a `tokio::sync::watch` channel.
#[derive(Debug)]
pub struct SourceState<T> {
    /// Last good data; `None` before the first success or once it is too old to trust.
    pub data: Option<Arc<T>>,
    pub last_success: Option<SystemTime>,
    /// False while the latest attempt failed.
    pub healthy: bool,
    /// One line, without secrets.
    pub last_error: Option<String>,
}

impl<T> Clone for SourceState<T> {
    fn clone(&self) -> Self {
        Self {
            data: self.data.clone(),
            last_success: self.last_success,
            healthy: self.healthy,
            last_error: self.last_error.clone(),
        }
    }
}

impl<T> Default for SourceState<T> {
    fn default() -> Self {
        Self {
            data: None,
            last_success: None,
            healthy: false,
            last_error: None,
        }
    }
}
