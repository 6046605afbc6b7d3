//! `tessera install-probe DIR`: copies the CUDA probe library shipped beside the binary into a
//! host directory, so that workload pods can mount it (deploy/overlays/cuda-probe). The image
//! has no shell, so the DaemonSet's init container runs this.

use std::path::{Path, PathBuf};

pub const PROBE_LIBRARY: &str = "libtessera_probe.so";

/// A file shipped beside the binary: in the image `/opt/tessera/<file>`; in a cargo build
/// `target/<profile>/deps/`, where cargo puts a dependency's cdylib (the copy in
/// `target/<profile>/` is only refreshed when that crate itself is built, so it can be stale).
/// A test binary lives in `deps/` itself. Returns the places looked at when none has it.
pub fn beside_binary(file: &str) -> Result<PathBuf, Vec<PathBuf>> {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = vec![
        dir.join("deps").join(file),
        dir.join(file),
        dir.join("..").join("deps").join(file),
    ];
    match candidates.iter().find(|c| c.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(candidates),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{PROBE_LIBRARY} is not beside the tessera binary (looked in {0})")]
    Missing(String),
    #[error("cannot install {PROBE_LIBRARY} into {}: {source}", dir.display())]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Copies the probe into `dir` under a temporary name and renames it into place, so a process
/// loading it at that moment sees either the old library or the new one, never half of one.
pub fn install_probe(dir: &Path) -> Result<PathBuf, InstallError> {
    let from = beside_binary(PROBE_LIBRARY).map_err(|looked| {
        InstallError::Missing(
            looked
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        )
    })?;
    let io = |source| InstallError::Io {
        dir: dir.to_path_buf(),
        source,
    };
    let target = dir.join(PROBE_LIBRARY);
    let staging = dir.join(format!(".{PROBE_LIBRARY}.{}", std::process::id()));
    std::fs::copy(&from, &staging).map_err(io)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    std::fs::rename(&staging, &target).map_err(|e| {
        let _ = std::fs::remove_file(&staging);
        io(e)
    })?;
    Ok(target)
}
