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
mod tests {
    use serde_json::{json, Value};

    use super::valid_name;
    use crate::fakes::apiserver::FakeCluster;
    use crate::source::kube::tests::{cfg, cluster, pod, slice, start, wait_for, NODE};
    use crate::source::kube::KubeConfig;

    fn claim(ns: &str, name: &str, percent: Value) -> Value {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}")},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {
                "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0"}],
                "config": [{"source": "FromClaim", "requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com",
                    "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                        "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": percent}}}}}]}}}})
    }

    fn claiming(name: &str, claim: &str, template: bool) -> k8s_openapi::api::core::v1::Pod {
        let extra = if template {
            json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
                "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}})
        } else {
            json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}})
        };
        pod("ml", name, &format!("uid-{name}"), NODE, extra)
    }

    async fn check(v1: bool) {
        let c = FakeCluster {
            slices: vec![slice(
                "s",
                NODE,
                json!([{"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-aaaa"}, "type": {"string": "gpu"}}}]),
            )],
            claims: vec![
                claim("ml", "a-gpu-x1", json!(25)),
                claim("ml", "shared", json!(50)),
                // Another namespace's claim of the same name is not the pod's.
                claim("other", "shared", json!(75)),
            ],
            serve_v1: v1,
            ..cluster(vec![claiming("a", "a-gpu-x1", true)])
        };
        let mut r = start(c, KubeConfig { dra: true, ..cfg() }).await;
        let ratio = |v: &crate::model::cluster::ClusterView, claim: &str| {
            v.dra_config("ml", claim, "gpu.nvidia.com", NODE, "gpu-0")
                .and_then(|d| d.thread_ratio)
        };
        let s = wait_for(&mut r.rx, "template claim", |s| {
            s.healthy
                && s.data
                    .as_deref()
                    .is_some_and(|v| ratio(v, "a-gpu-x1").is_some())
        })
        .await;
        assert_eq!(
            s.data.as_deref().and_then(|v| ratio(v, "a-gpu-x1")),
            Some(0.25)
        );
        // A pod naming a claim directly; its claim is read without waiting for the resync.
        r.server.set_pods(vec![
            claiming("a", "a-gpu-x1", true),
            claiming("b", "shared", false),
        ]);
        let s = wait_for(&mut r.rx, "direct claim", |s| {
            s.data
                .as_deref()
                .is_some_and(|v| ratio(v, "shared").is_some())
        })
        .await;
        let v = s.data.unwrap_or_default();
        assert_eq!(ratio(&v, "shared"), Some(0.5));
        assert_eq!(v.dra_claims.len(), 2);
        let log = r.server.request_log();
        let gets: Vec<&String> = log
            .iter()
            .filter(|l| l.contains("/resourceclaims/"))
            .collect();
        assert!(
            gets.iter().all(|l| l.contains("/namespaces/ml/")),
            "{gets:?}"
        );
        assert_eq!(
            gets.iter()
                .any(|l| l.starts_with("/apis/resource.k8s.io/v1beta1/")),
            !v1
        );
        // A deleted claim drops out; its pod's device then says nothing.
        r.server.set_claims(vec![claim("ml", "shared", json!(50))]);
        wait_for(&mut r.rx, "claim gone", |s| {
            s.healthy && s.data.as_deref().is_some_and(|v| v.dra_claims.len() == 1)
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claims_v1() {
        check(true).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claims_fall_back_to_v1beta1() {
        check(false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_claim_read_is_visible_and_not_fatal() {
        let c = FakeCluster {
            claims: vec![claim("ml", "a-gpu-x1", json!(25))],
            ..cluster(vec![claiming("a", "a-gpu-x1", true)])
        };
        let mut r = start(c, KubeConfig { dra: true, ..cfg() }).await;
        wait_for(&mut r.rx, "first read", |s| {
            s.healthy && s.data.as_deref().is_some_and(|v| v.dra_claims.len() == 1)
        })
        .await;
        r.server.fail_next(50, 500);
        let s = wait_for(&mut r.rx, "failing", |s| !s.healthy).await;
        assert!(
            s.data.as_deref().is_some_and(|v| v.dra_claims.len() == 1),
            "last data kept"
        );
        r.server.fail_next(0, 500);
        let s = wait_for(&mut r.rx, "recovered", |s| s.healthy).await;
        assert!(s.data.is_some());
    }

    #[test]
    fn names_that_would_bend_the_path_are_refused() {
        assert!(valid_name("gpu-claim-x7k2.a"));
        for bad in ["", "a/b", "..%2f", "a?b", "A", "a b", &"x".repeat(254)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
