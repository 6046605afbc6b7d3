//! The CUDA probe's flag: the socket its reports arrive on.

use std::path::PathBuf;

use crate::options::Resolver;

#[derive(Debug, Default, clap::Args)]
pub struct ProbeArgs {
    /// Listen on this UNIX socket for the CUDA probe's per-process kernel busy time (e.g. /run/tessera/probe.sock; docs/cuda-probe.md) [default: off].
    #[arg(long = "probe.socket", env = "TESSERA_PROBE_SOCKET")]
    pub probe_socket: Option<String>,
}

/// The probe's resolved options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOptions {
    /// `None`: the probe is not listened for.
    pub socket: Option<PathBuf>,
}

impl ProbeArgs {
    pub fn resolve(&self, r: &mut Resolver) -> ProbeOptions {
        ProbeOptions {
            socket: self.socket(r),
        }
    }

    fn socket(&self, r: &mut Resolver) -> Option<PathBuf> {
        r.get("probe.socket", &self.probe_socket, None, |s| {
            Ok(Some(PathBuf::from(s)))
        })
    }
}
