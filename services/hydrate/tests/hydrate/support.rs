//! A local HTTP provider, the test Redis, and request builders.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentsearch_hydrate::{HydrationRequest, RedisCache};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// The static schema every test request carries.
pub fn static_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "last_name": {"type": "string", "description": "Last name."},
            "company": {"type": "string", "description": "Company name."}
        },
        "required": ["last_name", "company"],
        "additionalProperties": false
    })
}

pub fn unique_project() -> String {
    format!("test-{}", uuid::Uuid::new_v4().simple())
}

pub fn request(project: &str, user: &str, tool: &str) -> HydrationRequest {
    HydrationRequest {
        project_id: project.to_string(),
        user_id: user.to_string(),
        integration: "salesforce".to_string(),
        tool: tool.to_string(),
        catalog_version: 3,
        description: "Adds a lead.".to_string(),
        parameters_json: static_parameters().to_string(),
    }
}

pub fn redis_url() -> String {
    std::env::var("AGENTSEARCH_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_string())
}

/// A cache on the test Redis, checked with a PING; panics with how to start Redis if it is not up.
pub async fn redis_cache(timeout: Duration) -> RedisCache {
    let url = redis_url();
    let cache = RedisCache::new(&url, timeout)
        .unwrap_or_else(|e| panic!("AGENTSEARCH_TEST_REDIS={url} is not a Redis URL: {e}"));
    // The first call also connects: give it a generous bound.
    let probe = RedisCache::new(&url, Duration::from_secs(3)).unwrap();
    if let Err(e) = probe.ping().await {
        panic!(
            "Redis at {url} is unreachable ({e}); these tests need a real Redis: start one \
             (`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\"`) or point \
             AGENTSEARCH_TEST_REDIS at one"
        );
    }
    cache
        .ping()
        .await
        .expect("redis ping with the test timeout");
    cache
}

/// A raw connection to the test Redis, to look at what the cache stored.
pub async fn redis_connection() -> redis::aio::MultiplexedConnection {
    let url = redis_url();
    redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("Redis at {url} is unreachable: {e}"))
}

/// A 127.0.0.1 URL on which nothing listens.
pub async fn closed_port_url(scheme: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("{scheme}://127.0.0.1:{port}")
}

/// What the local provider has seen.
#[derive(Clone, Default)]
pub struct Provider {
    requests: Arc<AtomicUsize>,
    last_body: Arc<Mutex<Option<Value>>>,
    delay: Duration,
}

impl Provider {
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    pub fn last_body(&self) -> Option<Value> {
        self.last_body.lock().clone()
    }

    fn seen(&self, body: Value) {
        self.requests.fetch_add(1, Ordering::SeqCst);
        *self.last_body.lock() = Some(body);
    }
}

/// Starts a provider on 127.0.0.1:0 whose hydrating answers take `delay`; returns its base URL.
///
/// Routes (all POST): `/hydrate` adds `Region__c` to the posted schema; `/status/{code}` answers
/// that status; `/bad-json` answers 200 with a body that is not JSON; `/not-object` answers a
/// `"type": "string"` schema; `/hang` answers after 30 s.
pub async fn start_provider(delay: Duration) -> (String, Provider) {
    let provider = Provider {
        delay,
        ..Provider::default()
    };
    let app = provider_app(&provider);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), provider)
}

fn provider_app(provider: &Provider) -> Router {
    Router::new()
        .route("/hydrate", post(hydrate))
        .route("/status/{code}", post(status))
        .route("/bad-json", post(bad_json))
        .route("/not-object", post(not_object))
        .route("/hang", post(hang))
        .with_state(provider.clone())
}

/// [`start_provider`] over HTTPS with the certificate and key (PEM) given; returns its base URL.
pub async fn start_tls_provider(cert_pem: &str, key_pem: &str) -> (String, Provider) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let provider = Provider::default();
    let app = provider_app(&provider);
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to serve.
                let Ok(stream) = acceptor.accept(stream).await else {
                    return;
                };
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app))
                    .await;
            });
        }
    });
    (format!("https://localhost:{}", addr.port()), provider)
}

async fn hydrate(State(provider): State<Provider>, Json(body): Json<Value>) -> Json<Value> {
    provider.seen(body.clone());
    tokio::time::sleep(provider.delay).await;
    let mut parameters = body["parameters"].clone();
    parameters["properties"]["Region__c"] = json!({
        "type": "string",
        "enum": ["AMER", "EMEA", "APAC"],
        "description": format!("Region of {}.", body["userId"].as_str().unwrap_or_default())
    });
    Json(json!({"parameters": parameters, "description": "Adds a lead with your org's fields."}))
}

async fn status(
    State(provider): State<Provider>,
    Path(code): Path<u16>,
    Json(body): Json<Value>,
) -> StatusCode {
    provider.seen(body);
    StatusCode::from_u16(code).unwrap()
}

async fn bad_json(State(provider): State<Provider>, Json(body): Json<Value>) -> impl IntoResponse {
    provider.seen(body);
    "<html>not json</html>"
}

async fn not_object(State(provider): State<Provider>, Json(body): Json<Value>) -> Json<Value> {
    provider.seen(body);
    Json(json!({"parameters": {"type": "string"}}))
}

async fn hang(State(provider): State<Provider>, Json(body): Json<Value>) -> Json<Value> {
    provider.seen(body);
    tokio::time::sleep(Duration::from_secs(30)).await;
    Json(json!({}))
}
