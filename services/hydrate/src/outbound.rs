//! The outbound JSON HTTP client of services reached over HTTP or HTTPS: [`crate::HttpHydrator`]'s
//! provider, and the rerank crate's text-embeddings-inference endpoint.
//!
//! It owns: checking an endpoint's URL, a keep-alive client (rustls, with the system's roots or
//! given authorities), the JSON `POST` request, reading an answer up to a size, and describing an
//! error with its sources. It does not own what is sent, how an answer is understood, nor the
//! timeout of a call: each caller bounds its calls and maps these errors, plain messages, onto its
//! own error type.

use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// How long an idle pooled connection to a service is kept.
const POOL_IDLE: Duration = Duration::from_secs(30);

/// A keep-alive client of `http://` and `https://` services, sending JSON bodies.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Why an answer's body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body is longer than the limit (in bytes) it was read with.
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    /// The connection failed while the body was read: the error and its sources.
    #[error("reading the answer: {0}")]
    Failed(String),
}

/// `url` parsed, when it is an `http://` or `https://` URL with a host; else why not.
pub fn endpoint(url: &str) -> Result<Uri, String> {
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("invalid URL `{url}`: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(format!("must be an http:// or https:// URL, got `{url}`"));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("URL `{url}` has no host"));
    }
    Ok(uri)
}

/// A client of `http://` and `https://` URLs (TCP_NODELAY, HTTP/1.1, idle connections kept 30 s).
/// An `https` service's certificate is checked against the authorities of `ca_pem` (PEM), else
/// the system's roots.
pub fn client(ca_pem: Option<&[u8]>) -> Result<HttpClient, String> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.enforce_http(false);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(client_tls(ca_pem)?)
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE)
        .pool_timer(TokioTimer::new())
        .build(connector);
    Ok(client)
}

/// The TLS of `https` services: the authorities of `ca_pem`, else the system's roots.
fn client_tls(ca_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match ca_pem {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("not a PEM certificate file: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("unusable certificate: {e}"))?;
            }
            if roots.is_empty() {
                return Err("holds no PEM certificate".to_string());
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
    .map_err(|e| format!("TLS: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(config)
}

/// A `POST` of the JSON `body` to `url`, accepting JSON, sent as `user_agent`.
pub fn json_post(
    url: &Uri,
    user_agent: &'static str,
    body: Vec<u8>,
) -> Result<Request<Full<Bytes>>, http::Error> {
    Request::builder()
        .method(Method::POST)
        .uri(url.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json")
        .header(USER_AGENT, user_agent)
        .body(Full::new(Bytes::from(body)))
}

/// The whole of `body`, an answer's body, unless it is longer than `limit` bytes.
pub async fn read_body<B>(body: B, limit: usize) -> Result<Bytes, BodyError>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let collected = Limited::new(body, limit).collect().await.map_err(|e| {
        if e.downcast_ref::<LengthLimitError>().is_some() {
            BodyError::TooLarge(limit)
        } else {
            BodyError::Failed(describe(&*e))
        }
    })?;
    Ok(collected.to_bytes())
}

/// An error and its sources, `outer: inner: innermost`.
pub fn describe(err: &(dyn std::error::Error + 'static)) -> String {
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
    use http_body_util::StreamBody;

    use super::*;

    #[test]
    fn endpoints_are_http_or_https_urls_with_a_host() {
        let uri = endpoint("https://svc.example.com:8443/path").unwrap();
        assert_eq!(uri.scheme_str(), Some("https"));
        assert_eq!(uri.port_u16(), Some(8443));
        assert!(endpoint("http://127.0.0.1/x").is_ok());
        assert_eq!(
            endpoint("ftp://x/y").unwrap_err(),
            "must be an http:// or https:// URL, got `ftp://x/y`"
        );
        assert!(endpoint("http:///path").is_err());
        assert!(
            endpoint("not a url")
                .unwrap_err()
                .starts_with("invalid URL `not a url`: "),
        );
    }

    #[test]
    fn clients_trust_the_given_authorities_or_the_system() {
        assert!(client(None).is_ok());
        assert_eq!(
            client(Some(b"not a certificate")).err().unwrap(),
            "holds no PEM certificate"
        );
    }

    #[test]
    fn posts_carry_json_headers() {
        let url = endpoint("http://svc/path").unwrap();
        let request = json_post(&url, "agent/1", b"{}".to_vec()).unwrap();
        assert_eq!(request.method(), Method::POST);
        assert_eq!(request.uri(), &url);
        assert_eq!(request.headers()[CONTENT_TYPE], "application/json");
        assert_eq!(request.headers()[ACCEPT], "application/json");
        assert_eq!(request.headers()[USER_AGENT], "agent/1");
    }

    #[tokio::test]
    async fn bodies_are_read_up_to_their_limit() {
        let body = || Full::new(Bytes::from_static(b"0123456789"));
        assert_eq!(read_body(body(), 10).await.unwrap(), "0123456789");
        let err = read_body(body(), 9).await.unwrap_err();
        assert!(matches!(err, BodyError::TooLarge(9)), "{err}");
        assert_eq!(err.to_string(), "the answer is larger than 9 bytes");

        let broken = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        let frames = futures::stream::iter([Err::<http_body::Frame<Bytes>, _>(broken)]);
        let err = read_body(StreamBody::new(frames), 10).await.unwrap_err();
        assert_eq!(err.to_string(), "reading the answer: reset");
    }

    #[test]
    fn errors_are_described_with_their_sources() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let err = Outer(std::io::Error::other("inner"));
        assert_eq!(describe(&err), "outer: inner");
    }
}
