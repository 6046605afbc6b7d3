//! tessera: a GPU node exporter that tells how shared GPUs are really used.
//! See docs/design.md ("Data flow"): sources do I/O, the model decides, the sampler publishes one
//! immutable snapshot, and scrapes copy its bytes.

pub mod advise;
pub mod app;
pub mod config;
pub mod install;
pub mod log;
pub mod metrics;
pub mod model;
pub mod options;
pub mod sampler;
pub mod server;
pub mod source;
pub mod web;
