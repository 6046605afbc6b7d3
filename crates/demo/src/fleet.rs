//! `--demo.fleet-node=N`: the demo node as node N of a simulated fleet. Many demo instances
//! scraped together must not be nine identical GPUs copied many times (every rule would see
//! the same values and every node the same sharing modes), so everything that differs is
//! derived from N alone: the same N always gives the same node, two Ns differ.
//!
//! - identity: the node is `<cluster>-gpu-<N>` in cluster `fleet-<N / 50>`;
//! - sharing mix: each of the nine demo GPUs is, with odds of 3 in 16, left vacant (its
//!   pods and processes removed, so it reads `unallocated`, or its MIG instances do);
//! - load: every utilization figure of the scenario is scaled to 40–100 % of the demo's.

use serde_yaml::Value;

use super::cluster::PodPlan;
use tessera_exporter::model::GpuSample;

/// Nodes per simulated cluster: a fleet of 112 nodes is three clusters, as sizing a
/// Prometheus per cluster needs more than one.
pub const NODES_PER_CLUSTER: u32 = 50;
/// The largest index accepted: node names stay five digits.
pub const MAX_INDEX: u32 = 99_999;
/// GPUs of the demo node (crates/fake-nvml/scenarios/demo.yaml).
const GPUS: usize = 9;
/// Scenario keys holding a utilization in percent, at GPU or process level.
const SCALED: [&str; 4] = ["utilization", "memory_utilization", "sm_util", "mem_util"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetNode {
    pub index: u32,
    /// Demo GPUs (by index) that hold nothing on this node.
    pub vacant: Vec<usize>,
    /// Load relative to the demo scenario, in percent.
    pub load_percent: u32,
}

/// splitmix64: a fixed, well-mixed function of N, so the fleet does not change with the
/// standard library's hasher.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl FleetNode {
    pub fn new(index: u32) -> FleetNode {
        let h = mix(u64::from(index));
        let vacant = (0..GPUS).filter(|g| (h >> (g * 4)) & 0xF < 3).collect();
        let load_percent = 40 + ((h >> 40) % 61) as u32;
        FleetNode {
            index,
            vacant,
            load_percent,
        }
    }

    pub fn cluster(&self) -> String {
        format!("fleet-{}", self.index / NODES_PER_CLUSTER)
    }

    pub fn node_name(&self) -> String {
        format!("{}-gpu-{:05}", self.cluster(), self.index)
    }

    pub fn is_vacant(&self, gpu: usize) -> bool {
        self.vacant.contains(&gpu)
    }

    /// The demo scenario for this node: vacant GPUs' processes, readings and XIDs removed,
    /// utilizations scaled. The result is plain YAML (anchors and merges resolved).
    pub fn scenario(&self, base: &str) -> Result<String, serde_yaml::Error> {
        let mut doc: Value = serde_yaml::from_str(base)?;
        doc.apply_merge()?;
        if let Some(phases) = doc.get_mut("phases").and_then(Value::as_sequence_mut) {
            for phase in phases {
                for list in ["gpus", "processes", "xids"] {
                    if let Some(items) = phase.get_mut(list).and_then(Value::as_sequence_mut) {
                        items.retain(|item| !self.holds_vacant_gpu(item));
                        for item in items.iter_mut() {
                            self.scale(item);
                        }
                    }
                }
            }
        }
        serde_yaml::to_string(&doc)
    }

    fn holds_vacant_gpu(&self, item: &Value) -> bool {
        item.get("gpu")
            .and_then(Value::as_u64)
            .is_some_and(|g| self.is_vacant(g as usize))
    }

    fn scale(&self, item: &mut Value) {
        let f = f64::from(self.load_percent) / 100.0;
        let Some(map) = item.as_mapping_mut() else {
            return;
        };
        for (key, value) in map.iter_mut() {
            let key = key.as_str().unwrap_or_default();
            if SCALED.contains(&key) {
                if let Some(n) = value.as_u64() {
                    *value = Value::from((n as f64 * f).round() as u64);
                }
            } else if key == "gpm" {
                scale_floats(value, f);
            } else if key == "mig_gpm" {
                if let Some(instances) = value.as_mapping_mut() {
                    for (_, gpm) in instances.iter_mut() {
                        scale_floats(gpm, f);
                    }
                }
            }
        }
    }

    /// Drops the pods holding a vacant GPU or one of its MIG instances.
    pub fn keep_pods(&self, pods: &mut Vec<PodPlan>, gpus: &[GpuSample]) {
        let vacant: Vec<&str> = gpus
            .iter()
            .enumerate()
            .filter(|(i, _)| self.is_vacant(*i))
            .flat_map(|(_, g)| {
                std::iter::once(g.uuid.as_str())
                    .chain(g.mig_instances.iter().map(|m| m.uuid.as_str()))
            })
            .filter(|u| !u.is_empty())
            .collect();
        pods.retain(|p| {
            !p.containers.iter().any(|c| {
                c.devices
                    .iter()
                    .flat_map(|(_, ids)| ids)
                    .any(|id| vacant.iter().any(|u| id.contains(u)))
            })
        });
    }
}

/// Every number under a GPM mapping is a percentage of activity.
fn scale_floats(v: &mut Value, f: f64) {
    if let Some(map) = v.as_mapping_mut() {
        for (_, x) in map.iter_mut() {
            if let Some(n) = x.as_f64() {
                *x = Value::from((n * f * 10.0).round() / 10.0);
            }
        }
    }
}

/// Parses the flag's value: a whole number from 0 to [`MAX_INDEX`].
pub fn parse_index(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n <= MAX_INDEX => Ok(n),
        _ => Err(format!("expected a whole number from 0 to {MAX_INDEX}")),
    }
}

#[cfg(test)]
#[path = "fleet_tests.rs"]
mod tests;
