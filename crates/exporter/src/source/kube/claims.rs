//! The ResourceClaims this node's pods use, read for their allocation and the NVIDIA driver's
//! sharing config (parsed by `model::dra`).
//!
//! Each claim is fetched with a GET by namespace and name. There is no field selector for
//! "claims of pods on node X", so a list would fetch every claim of each namespace (or of the
//! cluster), most of them other nodes', every round; a node runs a handful of GPU pods, so a
//! GET per claim is the smaller transfer and needs only the `get` verb. A claim's allocation
//! cannot change once made, so new claims are read as soon as a pod names them and known ones
//! only on the resync cadence, which also catches a claim deleted and created again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ::kube::api::{Api, ApiResource, DynamicObject};
use ::kube::Client;
use k8s_openapi::api::resource::{v1, v1beta1};

use super::KubeSourceError;
use crate::model::dra::claim_from_json;
use crate::model::dra_claim::DraClaim;

/// `(namespace, name)` of a claim.
pub(super) type ClaimKey = (String, String);

/// More claims than this on one node is not a GPU node's workload; the rest wait.
pub(super) const MAX_CLAIMS: usize = 512;

/// The claims read so far, and the error of the round if one failed.
pub(super) struct ClaimsRead {
    pub claims: Vec<DraClaim>,
    pub error: Option<KubeSourceError>,
}

pub(super) struct ClaimReader {
    client: Client,
    /// The version that answered last; clusters before 1.34 serve only the betas.
    preferred: ApiResource,
    other: ApiResource,
    known: BTreeMap<ClaimKey, DraClaim>,
}

impl ClaimReader {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            preferred: ApiResource::erase::<v1::ResourceClaim>(&()),
            other: ApiResource::erase::<v1beta1::ResourceClaim>(&()),
            known: BTreeMap::new(),
        }
    }

    /// Reads the wanted claims: all of them when `all`, else only those not read yet. A claim
    /// whose read fails keeps its last data; the first timeout ends the round, since a server
    /// that hangs on one GET hangs on the next.
    pub async fn fetch(
        &mut self,
        wanted: &BTreeSet<ClaimKey>,
        all: bool,
        timeout: Duration,
    ) -> ClaimsRead {
        self.known.retain(|k, _| wanted.contains(k));
        let mut error = None;
        let mut failed = 0usize;
        let todo: Vec<&ClaimKey> = wanted
            .iter()
            .filter(|(ns, name)| valid_name(ns) && valid_name(name))
            .take(MAX_CLAIMS)
            .filter(|k| all || !self.known.contains_key(*k))
            .collect();
        for key in todo {
            match self.get(key, timeout).await {
                Ok(Some(claim)) => {
                    self.known.insert(key.clone(), claim);
                }
                // Gone: its pod is going too.
                Ok(None) => {
                    self.known.remove(key);
                }
                Err(e) => {
                    failed += 1;
                    let stop = matches!(e, KubeSourceError::Timeout { .. });
                    error.get_or_insert(e);
                    if stop {
                        break;
                    }
                }
            }
        }
        if failed > 1 {
            tracing::debug!(failed, "resourceclaim reads failed this round");
        }
        if wanted.len() > MAX_CLAIMS && error.is_none() {
            error = Some(KubeSourceError::TooManyClaims(wanted.len()));
        }
        ClaimsRead {
            claims: self.known.values().cloned().collect(),
            error,
        }
    }

    /// One claim, from the preferred version or else the other; `None` when neither has it.
    /// A 404 cannot tell "no such claim" from "version not served", so both are asked before
    /// a claim counts as gone, and the version that answered is asked first from then on.
    async fn get(
        &mut self,
        (ns, name): &ClaimKey,
        timeout: Duration,
    ) -> Result<Option<DraClaim>, KubeSourceError> {
        if let Some(v) = self.get_in(&self.preferred, ns, name, timeout).await? {
            return Ok(Some(v));
        }
        let found = self.get_in(&self.other, ns, name, timeout).await?;
        if found.is_some() {
            tracing::info!(version = %self.other.version, "resource.k8s.io ResourceClaims served in this version");
            std::mem::swap(&mut self.preferred, &mut self.other);
        }
        Ok(found)
    }

    async fn get_in(
        &self,
        ar: &ApiResource,
        ns: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<Option<DraClaim>, KubeSourceError> {
        let what = "get resourceclaim";
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, ar);
        let obj = tokio::time::timeout(timeout, api.get_opt(name))
            .await
            .map_err(|_| KubeSourceError::Timeout {
                what,
                after: timeout,
            })?
            .map_err(|source| KubeSourceError::Api { what, source })?;
        Ok(obj.map(|o| claim_from_json(ns, name, &o.data)))
    }
}

/// Namespace and claim names are DNS labels and subdomains; anything else would change the
/// request path, and no API server wrote it.
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
