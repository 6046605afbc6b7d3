//! `tessera advise`: which sharing strategy fits each workload, from the cluster's own history
//! in Prometheus. gpus.rs holds the MIG profile table, recommend.rs the rules (pure),
//! rules.rs the profile queries (taken from alerts/tessera-advisor.yaml), prom.rs the HTTP
//! client, report.rs the renderers.

pub mod gpus;
pub mod recommend;
