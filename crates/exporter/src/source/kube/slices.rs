//! DRA ResourceSlices of this node, mapped to the device facts tessera needs to resolve a
//! kubelet `(driver, pool, device)` allocation to a GPU or MIG UUID.

use std::collections::BTreeMap;
use std::time::Duration;

use ::kube::api::{Api, ListParams};
use ::kube::Client;
use k8s_openapi::api::resource::{v1, v1beta1};

use super::KubeSourceError;
pub use crate::model::dra_claim::DraDevice;

/// Which `resource.k8s.io` version answers; clusters before 1.34 serve only the betas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V1beta1,
}

pub(super) struct SliceReader {
    client: Client,
    params: ListParams,
    preferred: Version,
}

impl SliceReader {
    pub fn new(client: Client, node_name: &str) -> Self {
        Self {
            client,
            params: ListParams::default().fields(&format!("spec.nodeName={node_name}")),
            preferred: Version::V1,
        }
    }

    /// Lists this node's slices with the version that worked last, falling back to the
    /// other one on 404 and remembering which answered.
    pub async fn fetch(&mut self, timeout: Duration) -> Result<Vec<DraDevice>, KubeSourceError> {
        let other = match self.preferred {
            Version::V1 => Version::V1beta1,
            Version::V1beta1 => Version::V1,
        };
        let first = self.list(self.preferred, timeout).await;
        match first {
            Err(KubeSourceError::Api {
                source: ::kube::Error::Api(ref s),
                ..
            }) if s.code == 404 => {}
            other_result => return other_result,
        }
        let devices = self.list(other, timeout).await.map_err(|e| match e {
            KubeSourceError::Api {
                source: ::kube::Error::Api(s),
                ..
            } if s.code == 404 => KubeSourceError::DraNotServed,
            e => e,
        })?;
        tracing::info!(version = ?other, "resource.k8s.io ResourceSlices served in this version");
        self.preferred = other;
        Ok(devices)
    }

    async fn list(
        &self,
        version: Version,
        timeout: Duration,
    ) -> Result<Vec<DraDevice>, KubeSourceError> {
        let what = "list resourceslices";
        let elapsed = |_| KubeSourceError::Timeout {
            what,
            after: timeout,
        };
        let api_err = |source| KubeSourceError::Api { what, source };
        let mut devices = match version {
            Version::V1 => {
                let api: Api<v1::ResourceSlice> = Api::all(self.client.clone());
                let list = tokio::time::timeout(timeout, api.list(&self.params))
                    .await
                    .map_err(elapsed)?
                    .map_err(api_err)?;
                list.items.iter().flat_map(from_v1).collect::<Vec<_>>()
            }
            Version::V1beta1 => {
                let api: Api<v1beta1::ResourceSlice> = Api::all(self.client.clone());
                let list = tokio::time::timeout(timeout, api.list(&self.params))
                    .await
                    .map_err(elapsed)?
                    .map_err(api_err)?;
                list.items.iter().flat_map(from_v1beta1).collect::<Vec<_>>()
            }
        };
        devices.sort();
        Ok(devices)
    }
}

/// The attribute values tessera reads, as strings whatever their declared type.
struct Attrs {
    uuid: Option<String>,
    parent_uuid: Option<String>,
    profile: Option<String>,
    kind: Option<String>,
}

// Attribute names may be written qualified (`gpu.nvidia.com/uuid`); the unqualified form is
// the driver's own domain, so both name the same attribute.
fn attrs<A>(
    driver: &str,
    map: Option<&BTreeMap<String, A>>,
    value: impl Fn(&A) -> Option<String>,
) -> Attrs {
    let get = |name: &str| {
        let map = map?;
        let qualified = format!("{driver}/{name}");
        map.get(name)
            .or_else(|| map.get(&qualified))
            .and_then(&value)
    };
    Attrs {
        uuid: get("uuid"),
        parent_uuid: get("parentUUID"),
        profile: get("profile"),
        kind: get("type"),
    }
}

fn value_v1(a: &v1::DeviceAttribute) -> Option<String> {
    a.string
        .clone()
        .or_else(|| a.version.clone())
        .or_else(|| a.int.map(|i| i.to_string()))
        .or_else(|| a.bool.map(|b| b.to_string()))
}

fn value_v1beta1(a: &v1beta1::DeviceAttribute) -> Option<String> {
    a.string
        .clone()
        .or_else(|| a.version.clone())
        .or_else(|| a.int.map(|i| i.to_string()))
        .or_else(|| a.bool.map(|b| b.to_string()))
}

fn device(driver: &str, pool: &str, name: &str, a: Attrs) -> DraDevice {
    DraDevice {
        driver: driver.to_string(),
        pool: pool.to_string(),
        device: name.to_string(),
        uuid: a.uuid,
        parent_uuid: a.parent_uuid,
        profile: a.profile,
        kind: a.kind,
    }
}

fn from_v1(slice: &v1::ResourceSlice) -> Vec<DraDevice> {
    let spec = &slice.spec;
    let devices = spec.devices.iter().flatten();
    devices
        .map(|d| {
            device(
                &spec.driver,
                &spec.pool.name,
                &d.name,
                attrs(&spec.driver, d.attributes.as_ref(), value_v1),
            )
        })
        .collect()
}

fn from_v1beta1(slice: &v1beta1::ResourceSlice) -> Vec<DraDevice> {
    let spec = &slice.spec;
    let devices = spec.devices.iter().flatten();
    devices
        .map(|d| {
            let map = d.basic.as_ref().and_then(|b| b.attributes.as_ref());
            device(
                &spec.driver,
                &spec.pool.name,
                &d.name,
                attrs(&spec.driver, map, value_v1beta1),
            )
        })
        .collect()
}

#[cfg(test)]
#[path = "slices_tests.rs"]
mod tests;
