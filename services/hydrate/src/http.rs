//! [`HttpHydrator`]: asks an HTTP service for the user's schema.
//!
//! Request: `POST url` with `{"projectId", "userId", "integration", "tool", "catalogVersion",
//! "parameters"}` (`parameters` is the static JSON Schema). Answer: 200 with `{"parameters": {..},
//! "description"?: ".."}` hydrates; 204 or 404 means nothing special for this user; any other
//! status, an invalid body or the timeout is an error. `http://` or `https://` (rustls; the
//! system's roots, or the authorities of `hydration.tls_ca_file`).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper_rustls::HttpsConnector;
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

/// A provider reached over HTTP or HTTPS, with keep-alive connections.
pub struct HttpHydrator {
    url: Uri,
    timeout: Duration,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
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

/// The TLS of `https` providers: the authorities of `ca_pem`, else the system's roots.
fn client_tls(ca_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, HydrateError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match ca_pem {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| {
                    HydrateError::Config(format!("not a PEM certificate file: {e}"))
                })?;
                roots
                    .add(cert)
                    .map_err(|e| HydrateError::Config(format!("unusable certificate: {e}")))?;
            }
            if roots.is_empty() {
                return Err(HydrateError::Config("holds no PEM certificate".to_string()));
            }
        }
        None => {
            // Certificates the system store holds but rustls cannot use are skipped.
            let found = rustls_native_certs::load_native_certs();
            let _ = roots.add_parsable_certificates(found.certs);
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| HydrateError::Config(format!("TLS: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(config)
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
        let uri: Uri = url
            .parse()
            .map_err(|e| HydrateError::Config(format!("invalid URL `{url}`: {e}")))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(HydrateError::Config(format!(
                "must be an http:// or https:// URL, got `{url}`"
            )));
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(HydrateError::Config(format!("URL `{url}` has no host")));
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.enforce_http(false);
        let tls = client_tls(ca_pem)?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
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
