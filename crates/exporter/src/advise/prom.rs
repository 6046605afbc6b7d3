//! A minimal Prometheus HTTP API client: instant queries over hyper-util's pooled client,
//! http or https (rustls with the system's roots).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

/// A query the server takes longer than this to answer is given up.
const QUERY_TIMEOUT: Duration = Duration::from_secs(60);
/// Error bodies are quoted up to this length.
const BODY_QUOTE: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum PromError {
    #[error(
        "--prometheus {0:?}: expected an http:// or https:// URL such as http://prometheus:9090"
    )]
    BadUrl(String),
    #[error("cannot set up TLS: {0}")]
    Tls(String),
    #[error("cannot reach Prometheus at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Prometheus at {url} did not answer within {secs} s")]
    Timeout { url: String, secs: u64 },
    #[error("Prometheus at {url} answered HTTP {status}: {body}")]
    Http {
        url: String,
        status: u16,
        body: String,
    },
    #[error("Prometheus rejected the query ({kind}): {message}")]
    Api { kind: String, message: String },
    #[error("unexpected answer from Prometheus at {url}: {reason}")]
    Decode { url: String, reason: String },
}

/// One element of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

pub struct Prometheus {
    base: String,
    client: Client<Connector, Full<Bytes>>,
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct VectorItem {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

impl Prometheus {
    pub fn new(url: &str) -> Result<Self, PromError> {
        let base = url.trim_end_matches('/').to_owned();
        let parsed: http::Uri = base.parse().map_err(|_| PromError::BadUrl(url.into()))?;
        if !matches!(parsed.scheme_str(), Some("http" | "https")) || parsed.host().is_none() {
            return Err(PromError::BadUrl(url.into()));
        }
        let provider = tokio_rustls::rustls::crypto::ring::default_provider();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(|e| PromError::Tls(e.to_string()))?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self {
            base,
            client: Client::builder(TokioExecutor::new()).build(https),
        })
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    /// Evaluates `expr` now; an instant vector (a scalar answer comes back as one sample
    /// without labels).
    pub async fn query(&self, expr: &str) -> Result<Vec<Sample>, PromError> {
        let url = format!("{}/api/v1/query", self.base);
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", expr)
            .finish();
        let req = http::Request::post(&url)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(
                http::header::USER_AGENT,
                concat!("tessera-advise/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(Bytes::from(body)))
            .map_err(|_| PromError::BadUrl(self.base.clone()))?;
        let cannot_reach = |reason: String| PromError::Unreachable {
            url: self.base.clone(),
            reason,
        };
        let fetch = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| cannot_reach(root_cause(&e)))?;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| cannot_reach(root_cause(&e)))?
                .to_bytes();
            Ok::<_, PromError>((status, bytes))
        };
        let (status, bytes) =
            tokio::time::timeout(QUERY_TIMEOUT, fetch)
                .await
                .map_err(|_| PromError::Timeout {
                    url: self.base.clone(),
                    secs: QUERY_TIMEOUT.as_secs(),
                })??;
        // Prometheus answers 400/422/503 with a JSON error body: prefer its message.
        let envelope: Result<Envelope, _> = serde_json::from_slice(&bytes);
        match (envelope, status.is_success()) {
            (Ok(env), _) if env.status == "error" => Err(PromError::Api {
                kind: env.error_type.unwrap_or_default(),
                message: env.error.unwrap_or_default(),
            }),
            (Ok(env), true) => decode(&self.base, env),
            (_, false) => Err(PromError::Http {
                url: self.base.clone(),
                status: status.as_u16(),
                body: quote(&bytes),
            }),
            (Err(e), true) => Err(PromError::Decode {
                url: self.base.clone(),
                reason: e.to_string(),
            }),
        }
    }
}

fn decode(url: &str, env: Envelope) -> Result<Vec<Sample>, PromError> {
    let bad = |reason: String| PromError::Decode {
        url: url.into(),
        reason,
    };
    let data = env.data.ok_or_else(|| bad("no data".into()))?;
    let items: Vec<VectorItem> = match data.result_type.as_str() {
        "vector" => serde_json::from_value(data.result).map_err(|e| bad(e.to_string()))?,
        "scalar" => {
            let (ts, v): (f64, String) =
                serde_json::from_value(data.result).map_err(|e| bad(e.to_string()))?;
            vec![VectorItem {
                metric: BTreeMap::new(),
                value: (ts, v),
            }]
        }
        other => return Err(bad(format!("result type {other}, expected a vector"))),
    };
    items
        .into_iter()
        .map(|i| {
            let value = parse_value(&i.value.1)
                .ok_or_else(|| bad(format!("sample value {:?}", i.value.1)))?;
            Ok(Sample {
                labels: i.metric,
                value,
            })
        })
        .collect()
}

/// Prometheus writes values as strings, with NaN and ±Inf spelled its own way.
fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(BODY_QUOTE) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line,
    }
}

/// The innermost cause, which says what went wrong ("Connection refused") where the outer
/// errors only say where ("client error (Connect)").
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
#[path = "prom_tests.rs"]
mod tests;
