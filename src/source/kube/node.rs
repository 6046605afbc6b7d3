//! This node's labels, as set by the NVIDIA device plugin / GPU feature discovery, parsed
//! into the facts the sharing-mode rules need.

use std::collections::BTreeMap;
use std::time::Duration;

use ::kube::api::Api;
use k8s_openapi::api::core::v1::Node;

use super::KubeSourceError;

pub const SHARING_STRATEGY_LABEL: &str = "nvidia.com/gpu.sharing-strategy";
pub const REPLICAS_LABEL: &str = "nvidia.com/gpu.replicas";
pub const MIG_STRATEGY_LABEL: &str = "nvidia.com/mig.strategy";
pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// Per-profile labels are `nvidia.com/mig-<profile>.sharing-strategy` and `.replicas`.
const MIG_PROFILE_PREFIX: &str = "nvidia.com/mig-";

/// How the device plugin offers a device (`nvidia.com/…sharing-strategy`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SharingStrategy {
    /// `none`: each device goes to one container.
    None,
    TimeSlicing,
    Mps,
    /// A value this version does not know, kept so it can be reported rather than guessed.
    Other(String),
}

impl SharingStrategy {
    pub fn parse(value: &str) -> Self {
        match value.trim().to_ascii_lowercase().as_str() {
            "none" => Self::None,
            "time-slicing" => Self::TimeSlicing,
            "mps" => Self::Mps,
            _ => Self::Other(value.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::None => "none",
            Self::TimeSlicing => "time-slicing",
            Self::Mps => "mps",
            Self::Other(s) => s,
        }
    }
}

/// Sharing facts of this node. Absent labels stay `None`: "not labelled" is not "not shared".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSharing {
    pub strategy: Option<SharingStrategy>,
    pub replicas: Option<u32>,
    /// `none`, `single` or `mixed`, verbatim.
    pub mig_strategy: Option<String>,
    /// MIG profile (`1g.10gb`, `1g.10gb.me`) → its own sharing strategy and replicas.
    pub per_profile: BTreeMap<String, (Option<SharingStrategy>, Option<u32>)>,
    pub product: Option<String>,
}

impl NodeSharing {
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        let mut per_profile: BTreeMap<String, (Option<SharingStrategy>, Option<u32>)> =
            BTreeMap::new();
        for (key, value) in labels {
            let Some(rest) = key.strip_prefix(MIG_PROFILE_PREFIX) else {
                continue;
            };
            if let Some(profile) = rest
                .strip_suffix(".sharing-strategy")
                .filter(|p| !p.is_empty())
            {
                per_profile.entry(profile.to_string()).or_default().0 =
                    Some(SharingStrategy::parse(value));
            } else if let Some(profile) = rest.strip_suffix(".replicas").filter(|p| !p.is_empty()) {
                per_profile.entry(profile.to_string()).or_default().1 = parse_replicas(value);
            }
        }
        Self {
            strategy: labels
                .get(SHARING_STRATEGY_LABEL)
                .map(|v| SharingStrategy::parse(v)),
            replicas: labels.get(REPLICAS_LABEL).and_then(|v| parse_replicas(v)),
            mig_strategy: labels.get(MIG_STRATEGY_LABEL).cloned(),
            per_profile,
            product: labels.get(PRODUCT_LABEL).cloned(),
        }
    }
}

/// A malformed count is treated as unknown rather than as 0 or 1.
fn parse_replicas(v: &str) -> Option<u32> {
    v.trim().parse().ok()
}

/// GETs the node and returns its labels.
pub(super) async fn fetch_labels(
    api: &Api<Node>,
    name: &str,
    timeout: Duration,
) -> Result<BTreeMap<String, String>, KubeSourceError> {
    let node = tokio::time::timeout(timeout, api.get(name))
        .await
        .map_err(|_| KubeSourceError::Timeout {
            what: "get node",
            after: timeout,
        })?
        .map_err(|source| KubeSourceError::Api {
            what: "get node",
            source,
        })?;
    Ok(node.metadata.labels.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn time_slicing_with_replicas() {
        let s = NodeSharing::from_labels(&labels(&[
            (SHARING_STRATEGY_LABEL, "time-slicing"),
            (REPLICAS_LABEL, "4"),
            (PRODUCT_LABEL, "NVIDIA-A100-SXM4-80GB-SHARED"),
            ("nvidia.com/mig.capable", "true"),
        ]));
        assert_eq!(s.strategy, Some(SharingStrategy::TimeSlicing));
        assert_eq!(s.replicas, Some(4));
        assert_eq!(s.product.as_deref(), Some("NVIDIA-A100-SXM4-80GB-SHARED"));
        assert_eq!(s.mig_strategy, None);
        assert!(s.per_profile.is_empty());
    }

    #[test]
    fn mps_and_unknown_values() {
        let s = NodeSharing::from_labels(&labels(&[
            (SHARING_STRATEGY_LABEL, "MPS"),
            (REPLICAS_LABEL, "four"),
        ]));
        assert_eq!(s.strategy, Some(SharingStrategy::Mps));
        assert_eq!(s.replicas, None);
        let s = NodeSharing::from_labels(&labels(&[(SHARING_STRATEGY_LABEL, "fractional")]));
        assert_eq!(
            s.strategy,
            Some(SharingStrategy::Other("fractional".into()))
        );
        assert_eq!(
            s.strategy.as_ref().map(SharingStrategy::as_str),
            Some("fractional")
        );
        assert_eq!(
            NodeSharing::from_labels(&BTreeMap::new()),
            NodeSharing::default()
        );
    }

    #[test]
    fn mixed_mig_per_profile() {
        let s = NodeSharing::from_labels(&labels(&[
            (MIG_STRATEGY_LABEL, "mixed"),
            ("nvidia.com/mig-1g.10gb.count", "4"),
            ("nvidia.com/mig-1g.10gb.sharing-strategy", "time-slicing"),
            ("nvidia.com/mig-1g.10gb.replicas", "2"),
            ("nvidia.com/mig-3g.40gb.sharing-strategy", "none"),
            ("nvidia.com/mig-1g.10gb.me.sharing-strategy", "mps"),
            ("nvidia.com/mig-1g.10gb.me.replicas", "3"),
            ("nvidia.com/mig.config", "all-balanced"),
        ]));
        assert_eq!(s.mig_strategy.as_deref(), Some("mixed"));
        assert_eq!(s.per_profile.len(), 3);
        assert_eq!(
            s.per_profile["1g.10gb"],
            (Some(SharingStrategy::TimeSlicing), Some(2))
        );
        assert_eq!(
            s.per_profile["3g.40gb"],
            (Some(SharingStrategy::None), None)
        );
        assert_eq!(
            s.per_profile["1g.10gb.me"],
            (Some(SharingStrategy::Mps), Some(3))
        );
        assert_eq!(s.strategy, None);
    }
}
