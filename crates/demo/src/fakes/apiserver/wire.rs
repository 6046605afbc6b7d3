//! Wire details of the fake API server: field selectors, watch lines, Status bodies and the
//! v1beta1 ResourceSlice shape.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::Change;

/// The watch line `change` produces for a watcher with `sel`: a filtered watch sees an object
/// that starts or stops matching as ADDED or DELETED, the way a real API server reports it.
pub(super) fn event_for(sel: &Selector, change: &Change) -> Option<String> {
    let old_m = change
        .old
        .as_ref()
        .is_some_and(|p| sel.matches(&to_value(p)));
    let new_m = change
        .new
        .as_ref()
        .is_some_and(|p| sel.matches(&to_value(p)));
    let (kind, obj) = match (&change.old, &change.new, old_m, new_m) {
        (_, Some(n), false, true) => ("ADDED", n),
        (Some(_), Some(n), true, true) => ("MODIFIED", n),
        (Some(_), Some(n), true, false) => ("DELETED", n),
        (Some(o), None, true, _) => ("DELETED", o),
        _ => return None,
    };
    Some(line(&json!({"type": kind, "object": obj})))
}

/// v1beta1 nests each device's fields under `basic`; v1 flattened them.
pub(super) fn to_v1beta1(mut slice: Value) -> Value {
    slice["apiVersion"] = json!("resource.k8s.io/v1beta1");
    if let Some(devices) = slice
        .pointer_mut("/spec/devices")
        .and_then(Value::as_array_mut)
    {
        for d in devices.iter_mut() {
            if let Value::Object(mut fields) = d.take() {
                let name = fields.remove("name").unwrap_or(Value::Null);
                *d = json!({"name": name, "basic": Value::Object(fields)});
            }
        }
    }
    slice
}

/// v1beta1 claims name a request's device class and selectors on the request itself; v1 moved
/// them under `exactly`. The allocation in `status` has one shape in both.
pub(super) fn claim_to_v1beta1(mut claim: Value) -> Value {
    claim["apiVersion"] = json!("resource.k8s.io/v1beta1");
    if let Some(requests) = claim
        .pointer_mut("/spec/devices/requests")
        .and_then(Value::as_array_mut)
    {
        for r in requests.iter_mut() {
            if let Some(Value::Object(exactly)) =
                r.as_object_mut().and_then(|o| o.remove("exactly"))
            {
                if let Some(o) = r.as_object_mut() {
                    o.extend(exactly);
                }
            }
        }
    }
    claim
}

/// A field selector: comma-separated `path=value`, `path==value` or `path!=value` terms over
/// dotted JSON paths; an absent field compares as "", as on a real server.
#[derive(Debug, Clone, Default)]
pub(super) struct Selector {
    terms: Vec<(String, bool, String)>,
}

impl Selector {
    pub(super) fn parse(raw: Option<&String>, supported: &[&str]) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in raw
            .map(String::as_str)
            .unwrap_or("")
            .split(',')
            .filter(|t| !t.is_empty())
        {
            let (field, eq, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!("invalid field selector term {term:?}"));
            };
            if !supported.contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push((field.to_string(), eq, value.to_string()));
        }
        Ok(Self { terms })
    }

    pub(super) fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|(field, eq, want)| {
            let path = format!("/{}", field.replace('.', "/"));
            let have = obj.pointer(&path).and_then(Value::as_str).unwrap_or("");
            (have == want) == *eq
        })
    }
}

pub(super) fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

pub(super) fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

pub(super) fn line(v: &Value) -> String {
    let mut s = v.to_string();
    s.push('\n');
    s
}

pub(super) fn status_json(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code})
}

pub(super) fn status(code: u16, reason: &str, message: &str) -> Response {
    json_response(code, &status_json(code, reason, message))
}

pub(super) fn json_response(code: u16, body: &Value) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}
