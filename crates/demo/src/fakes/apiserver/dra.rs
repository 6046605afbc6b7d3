//! The fake's `resource.k8s.io` endpoints: ResourceSlices (list with field selectors) and
//! ResourceClaims (get by namespace and name), each in `v1` and `v1beta1`.

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard};

use axum::extract::{Path, Query, State as AxState};
use axum::http::Uri;
use axum::response::Response;
use serde_json::{json, Value};

use super::wire::{claim_to_v1beta1, json_response, status, to_v1beta1, to_value, Selector};
use super::{preamble, Shared};

/// Field selectors the real API server accepts for slices (a subset).
const SLICE_FIELDS: &[&str] = &[
    "metadata.name",
    "spec.nodeName",
    "spec.driver",
    "spec.pool.name",
];

/// The common start of every `resource.k8s.io` request: the fake's logging, delays and
/// injected failures, then the 404 a real API server answers for a version it does not serve.
async fn served<'a>(
    shared: &'a Shared,
    uri: &Uri,
    version: &str,
) -> Result<MutexGuard<'a, super::Inner>, Response> {
    if let Some(r) = preamble(shared, uri).await {
        return Err(r);
    }
    let st = shared.lock();
    let served = match version {
        "v1" => st.serve_v1,
        "v1beta1" => st.serve_v1beta1,
        _ => false,
    };
    if !served {
        return Err(status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    Ok(st)
}

pub(super) async fn slices_handler(
    AxState(shared): AxState<Arc<Shared>>,
    uri: Uri,
    Path(version): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let st = match served(&shared, &uri, &version).await {
        Ok(st) => st,
        Err(r) => return r,
    };
    let selector = match Selector::parse(q.get("fieldSelector"), SLICE_FIELDS) {
        Ok(s) => s,
        Err(msg) => return status(400, "BadRequest", &msg),
    };
    let items: Vec<Value> = st
        .slices
        .iter()
        .map(to_value)
        .filter(|v| selector.matches(v))
        .map(|v| {
            if version == "v1beta1" {
                to_v1beta1(v)
            } else {
                v
            }
        })
        .collect();
    let api_version = format!("resource.k8s.io/{version}");
    json_response(
        200,
        &json!({"apiVersion": api_version, "kind": "ResourceSliceList",
        "metadata": {"resourceVersion": st.rv.to_string()}, "items": items}),
    )
}

pub(super) async fn claim_handler(
    AxState(shared): AxState<Arc<Shared>>,
    uri: Uri,
    Path((version, namespace, name)): Path<(String, String, String)>,
) -> Response {
    let st = match served(&shared, &uri, &version).await {
        Ok(st) => st,
        Err(r) => return r,
    };
    let found = st.claims.iter().find(|c| {
        c.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace.as_str())
            && c.pointer("/metadata/name").and_then(Value::as_str) == Some(name.as_str())
    });
    match found {
        Some(c) if version == "v1beta1" => json_response(200, &claim_to_v1beta1(c.clone())),
        Some(c) => json_response(200, c),
        None => status(
            404,
            "NotFound",
            &format!("resourceclaims.resource.k8s.io \"{name}\" not found"),
        ),
    }
}
