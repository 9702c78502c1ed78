//! [`HttpHydrator`]: asks an HTTP service for the user's schema.
//!
//! Request: `POST url` with `{"projectId", "userId", "integration", "tool", "catalogVersion",
//! "parameters"}` (`parameters` is the static JSON Schema). Answer: 200 with `{"parameters": {..},
//! "description"?: ".."}` hydrates; 204 or 404 means nothing special for this user; any other
//! status, an invalid body or the timeout is an error. `http://` or `https://` (rustls; the
//! system's roots, or the authorities of `hydration.tls_ca_file`).

use std::time::Duration;

use async_trait::async_trait;
use http::{StatusCode, Uri};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::outbound::{self, BodyError, HttpClient};
use crate::{HydrateError, HydratedSchema, HydrationRequest, Hydrator};

/// Largest answer read from a provider.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// A provider reached over HTTP or HTTPS, with keep-alive connections.
pub struct HttpHydrator {
    url: Uri,
    timeout: Duration,
    client: HttpClient,
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
    /// A provider at `url` (`http://` or `https://host:port/path`); each call, connection and
    /// TLS handshake included, is bounded by `timeout`. An `https` provider's certificate is
    /// checked against the system's roots.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, HydrateError> {
        Self::with_roots(url, timeout, None)
    }

    /// [`HttpHydrator::new`], trusting only the authorities of `ca_pem` (PEM) for `https`.
    pub fn with_roots(
        url: &str,
        timeout: Duration,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, HydrateError> {
        let uri = outbound::endpoint(url).map_err(HydrateError::Config)?;
        let client = outbound::client(ca_pem).map_err(HydrateError::Config)?;
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
        let user_agent = concat!("agentsearch-hydrate/", env!("CARGO_PKG_VERSION"));
        let request = outbound::json_post(&self.url, user_agent, body)
            .map_err(|e| HydrateError::InvalidRequest(e.to_string()))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| HydrateError::Unavailable(outbound::describe(&e)))?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::NO_CONTENT | StatusCode::NOT_FOUND => return Ok(None),
            other => return Err(HydrateError::Status(other.as_u16())),
        }
        let body = outbound::read_body(response.into_body(), MAX_ANSWER_BYTES)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge(_) => HydrateError::InvalidJson(e.to_string()),
                BodyError::Failed(_) => HydrateError::Unavailable(e.to_string()),
            })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_and_https_urls_are_accepted() {
        let timeout = Duration::from_millis(100);
        let ok = HttpHydrator::new("https://crm.example.com/hydrate", timeout).unwrap();
        assert_eq!(ok.url().scheme_str(), Some("https"));
        let err = HttpHydrator::new("ftp://x/y", timeout).err().unwrap();
        assert!(
            err.to_string()
                .contains("must be an http:// or https:// URL"),
            "{err}"
        );
        assert!(HttpHydrator::new("not a url", timeout).is_err());
        let ok = HttpHydrator::new("http://127.0.0.1:9300/hydrate", timeout).unwrap();
        assert_eq!(ok.url().port_u16(), Some(9300));
        let err = HttpHydrator::with_roots("https://x/y", timeout, Some(b"not a certificate"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("PEM"), "{err}");
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
