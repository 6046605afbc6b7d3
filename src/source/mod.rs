//! Sources do I/O and hand plain data to the pure model. Each one fails alone: a failing source
//! keeps its last good data (for a bounded time) and reports itself unhealthy.

pub mod cgroup;
pub mod cpu;
pub mod kube;
pub mod nvml;
pub mod podresources;
pub mod probe;
pub mod procfs;

use std::sync::Arc;
use std::time::SystemTime;

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
