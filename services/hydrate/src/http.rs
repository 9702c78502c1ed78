//! [`HttpHydrator`]: asks an HTTP service for the user's schema.
//!
//! Request: `POST url` with `{"projectId", "userId", "integration", "tool", "catalogVersion",
//! "parameters"}` (`parameters` is the static JSON Schema). Answer: 200 with `{"parameters": {..},
//! "description"?: ".."}` hydrates; 204 or 404 means nothing special for this user; any other
//! status, an invalid body or the timeout is an error. Plain HTTP only (no TLS client is linked).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::{HydrateError, HydratedSchema, HydrationRequest, Hydrator};

/// Largest answer read from a provider.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// How long an idle pooled connection to the provider is kept.
const POOL_IDLE: Duration = Duration::from_secs(30);

/// A provider reached over plain HTTP, with keep-alive connections.
pub struct HttpHydrator {
    url: Uri,
    timeout: Duration,
    client: Client<HttpConnector, Full<Bytes>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProviderRequest<'a> {
    project_id: &'a str,
    user_id: &'a str,
    integration: &'a str,
    tool: &'a str,
    catalog_version: u64,
    parameters: &'a RawValue,
}

#[derive(Deserialize)]
struct ProviderAnswer {
    parameters: Value,
    #[serde(default)]
    description: Option<String>,
}

impl HttpHydrator {
    /// A provider at `url` (`http://host:port/path`); each call, connection included, is bounded
    /// by `timeout`. An `https` URL is an error: no TLS client is linked.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, HydrateError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| HydrateError::Config(format!("invalid URL `{url}`: {e}")))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(HydrateError::Config(
                    "https is not supported (this build has no TLS client); use http://, e.g. through a local TLS-terminating proxy".to_string(),
                ));
            }
            _ => {
                return Err(HydrateError::Config(format!(
                    "must be an http:// URL, got `{url}`"
                )));
            }
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(HydrateError::Config(format!("URL `{url}` has no host")));
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(Self {
            url: uri,
            timeout,
            client,
        })
    }

    pub fn url(&self) -> &Uri {
        &self.url
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn call(&self, body: Vec<u8>) -> Result<Option<HydratedSchema>, HydrateError> {
        let request = http::Request::builder()
            .method(Method::POST)
            .uri(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .header(
                USER_AGENT,
                concat!("agentsearch-hydrate/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| HydrateError::InvalidRequest(e.to_string()))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| HydrateError::Unavailable(describe(&e)))?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::NO_CONTENT | StatusCode::NOT_FOUND => return Ok(None),
            other => return Err(HydrateError::Status(other.as_u16())),
        }
        let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| {
                if e.downcast_ref::<LengthLimitError>().is_some() {
                    HydrateError::InvalidJson(format!(
                        "the answer is larger than {MAX_ANSWER_BYTES} bytes"
                    ))
                } else {
                    HydrateError::Unavailable(format!("reading the answer: {}", describe(&*e)))
                }
            })?
            .to_bytes();
        parse_answer(&body).map(Some)
    }
}

#[async_trait]
impl Hydrator for HttpHydrator {
    async fn hydrate(
        &self,
        req: &HydrationRequest,
    ) -> Result<Option<HydratedSchema>, HydrateError> {
        let parameters: &RawValue = serde_json::from_str(&req.parameters_json).map_err(|e| {
            HydrateError::InvalidRequest(format!("the static schema is not JSON: {e}"))
        })?;
        if !parameters.get().starts_with('{') {
            return Err(HydrateError::InvalidRequest(
                "the static schema is not a JSON object".to_string(),
            ));
        }
        let body = serde_json::to_vec(&ProviderRequest {
            project_id: &req.project_id,
            user_id: &req.user_id,
            integration: &req.integration,
            tool: &req.tool,
            catalog_version: req.catalog_version,
            parameters,
        })
        .map_err(|e| HydrateError::InvalidRequest(e.to_string()))?;
        tokio::time::timeout(self.timeout, self.call(body))
            .await
            .map_err(|_| HydrateError::Timeout(self.timeout))?
    }
}

fn parse_answer(body: &[u8]) -> Result<HydratedSchema, HydrateError> {
    let answer: ProviderAnswer =
        serde_json::from_slice(body).map_err(|e| HydrateError::InvalidJson(e.to_string()))?;
    HydratedSchema::from_value(&answer.parameters, answer.description)
        .map_err(HydrateError::InvalidSchema)
}

/// An error and its sources, `outer: inner: innermost`.
fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_urls_are_accepted() {
        let timeout = Duration::from_millis(100);
        let err = HttpHydrator::new("https://crm.example.com/hydrate", timeout)
            .err()
            .unwrap();
        assert!(err.to_string().contains("https is not supported"), "{err}");
        let err = HttpHydrator::new("ftp://x/y", timeout).err().unwrap();
        assert!(err.to_string().contains("must be an http:// URL"), "{err}");
        assert!(HttpHydrator::new("not a url", timeout).is_err());
        let ok = HttpHydrator::new("http://127.0.0.1:9300/hydrate", timeout).unwrap();
        assert_eq!(ok.url().port_u16(), Some(9300));
    }

    #[test]
    fn answers_are_parsed_and_checked() {
        let schema =
            parse_answer(br#"{"parameters": {"type": "object"}, "description": "d"}"#).unwrap();
        assert_eq!(schema.parameters_json, r#"{"type":"object"}"#);
        assert_eq!(schema.description.as_deref(), Some("d"));
        assert!(matches!(
            parse_answer(b"<html>"),
            Err(HydrateError::InvalidJson(_))
        ));
        assert!(matches!(
            parse_answer(br#"{"description": "no parameters"}"#),
            Err(HydrateError::InvalidJson(_))
        ));
        assert!(matches!(
            parse_answer(br#"{"parameters": {"type": "array"}}"#),
            Err(HydrateError::InvalidSchema(_))
        ));
    }
}
