//! This node's labels, as set by the NVIDIA device plugin / GPU feature discovery, parsed
//! into the facts the sharing-mode rules need.

use std::collections::BTreeMap;
use std::time::Duration;

use ::kube::api::Api;
use k8s_openapi::api::core::v1::Node;

use super::KubeSourceError;
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
