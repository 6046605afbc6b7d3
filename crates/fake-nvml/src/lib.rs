//! A scenario-driven stand-in for `libnvidia-ml.so`.
//!
//! Built as a cdylib, it exports the NVML C symbols tessera uses, with the
//! signatures and struct layouts of `nvml-wrapper-sys` 0.10, and answers them
//! from a YAML scenario named by `TESSERA_FAKE_NVML_SCENARIO`. See README.md
//! for the scenario schema and how tests load it.
//!
//! The rlib exposes the scenario model so tools (e.g. a demo faking procfs)
//! can read the same file the library does.

// The exports must carry NVML's C names.
#![allow(non_snake_case)]
// Matching on bindgen constants keeps NVML's names visible in the code.
#![allow(non_upper_case_globals)]
// Every export documents its pointer contract in a `# Safety` section; the
// lint cannot see through `#[no_mangle] extern "C"` wrappers that check null.
#![allow(clippy::missing_safety_doc)]

mod activity;
mod calls;
mod device;
mod devices;
mod events;
mod gpm;
mod handles;
mod mig;
mod process;
mod samples;
pub mod scenario;
pub mod sku;
mod state;
mod system;
mod telemetry;
mod timeline;
pub mod world;

pub use calls::EXPORTED;
pub use state::{EPOCH_ENV, SCENARIO_ENV};

/// Parses and validates a scenario file exactly as `nvmlInit_v2` does.
pub fn validate_file(path: &std::path::Path) -> Result<world::World, String> {
    let s = scenario::Scenario::load(path)?;
    world::World::from_scenario(&s)
        .map_err(|e| format!("{}: invalid scenario: {e}", path.display()))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod world_tests;
