//! The end-to-end tests: the real `tessera` binary against the fake NVML, kubelet, API server
//! and CUDA probes, its exposition against golden files, the repository's own shape, and the
//! README's claims. One test binary, one module per topic, so the suite links once; the real
//! kube-apiserver and node tiers stay binaries of their own (tests/kube_real_e2e.rs,
//! tests/kube_node_e2e.rs), since their scripts start the servers they run against.
//!
//!   cargo test --test e2e                  # all of them
//!   cargo test --test e2e probe::          # one topic

#[path = "../support/mod.rs"]
mod support;

mod attribution;
mod billing;
mod cli;
mod dcgm_compat;
mod dcgm_compat_loop;
mod dra_mps;
mod energy;
mod fractional;
mod house;
mod idle_window;
mod layers;
mod nvml;
mod nvml_faults;
mod probe;
mod probe_profiler;
mod probe_records;
mod readme;
mod utilization_samples;
mod web_security;
