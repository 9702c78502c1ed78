//! Admission control: at most `max_in_flight` requests are served at once; one more is refused
//! at once with `RATE_LIMITED` and a `retryAfterMs`, so an overloaded server answers fast and
//! explicitly instead of queueing without bound. Health checks and reflection are always
//! admitted. A gRPC call holds its permit until its response starts: the whole of a unary call
//! (every search), the opening of a streaming one. [`AdmissionLayer`] applies it to a tonic server; REST adapters call
//! [`Admission::try_admit`] themselves, sharing the same permits.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agentsearch_common::Error;
use agentsearch_common::metrics::SHED;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The permits of one process (cheap to clone).
#[derive(Clone, Debug)]
pub struct Admission {
    permits: Arc<Semaphore>,
    retry_after: Duration,
    /// A gRPC call whose answer takes longer is answered `TIMEOUT` (DEADLINE_EXCEEDED).
    timeout: Option<Duration>,
}

impl Admission {
    pub fn new(max_in_flight: usize, retry_after: Duration) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max_in_flight.max(1))),
            retry_after,
            timeout: None,
        }
    }

    /// Admitted gRPC calls are answered `TIMEOUT` once `timeout` has passed without an answer
    /// (`limits.request_timeout_ms`; the work of a write goes on where it is detached).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// A permit held for the request's life, or the error to answer (counted as shed on `api`).
    pub fn try_admit(&self, api: &'static str) -> Result<OwnedSemaphorePermit, Error> {
        self.permits.clone().try_acquire_owned().map_err(|_| {
            metrics::counter!(SHED, "api" => api).increment(1);
            Error::RateLimited {
                retry_after: self.retry_after,
            }
        })
    }
}

/// Paths never refused: the servers' own health and reflection.
/// The shard's `Info` too: it is how routers probe a shard, and a busy shard is not a lost one.
fn exempt(path: &str) -> bool {
    path.starts_with("/grpc.health.v1.Health/")
        || path.starts_with("/grpc.reflection.")
        || path == "/agentsearch.shard.v1.Shard/Info"
}

/// The tonic layer: `Server::builder().layer(AdmissionLayer::new(admission))`.
#[derive(Clone, Debug)]
pub struct AdmissionLayer {
    admission: Admission,
}

impl AdmissionLayer {
    pub fn new(admission: Admission) -> Self {
        Self { admission }
    }
}

impl<S> tower::Layer<S> for AdmissionLayer {
    type Service = Admitted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admitted {
            inner,
            admission: self.admission.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Admitted<S> {
    inner: S,
    admission: Admission,
}

/// Most of a refused request's body read before answering. HTTP/2 servers close a connection
/// on which they reset too many streams, and answering before the body ends resets the stream:
/// reading it keeps a client that retries at once on its connection.
const DRAIN_LIMIT: usize = 1 << 20;
/// Longest wait for a refused request's body.
const DRAIN_WAIT: Duration = Duration::from_millis(200);

async fn drain<B: http_body::Body>(body: B) {
    use bytes::Buf;
    use http_body_util::BodyExt;
    let mut body = std::pin::pin!(body);
    let mut read = 0;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            read += data.remaining();
            if read > DRAIN_LIMIT {
                break;
            }
        }
    }
}

impl<S, B> tower::Service<http::Request<B>> for Admitted<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if exempt(request.uri().path()) {
            return Box::pin(self.inner.call(request));
        }
        match self.admission.try_admit("grpc") {
            Ok(permit) => {
                // One id for the call from here on: the access log, the handler, the envelope.
                let mut request = request;
                let request_id = agentsearch_common::ids::ensure_request_id(request.headers_mut());
                let timeout = self.admission.timeout;
                let call = self.inner.call(request);
                Box::pin(async move {
                    let response = match timeout {
                        Some(limit) => match tokio::time::timeout(limit, call).await {
                            Ok(response) => response,
                            Err(_) => {
                                let error = Error::Timeout(format!(
                                    "the call ran past {} ms (limits.request_timeout_ms)",
                                    limit.as_millis()
                                ));
                                Ok(crate::status_from_error(&error, &request_id).into_http())
                            }
                        },
                        None => call.await,
                    };
                    drop(permit);
                    response
                })
            }
            Err(error) => {
                let request_id = agentsearch_common::ids::accept_request_id(
                    request
                        .headers()
                        .get("x-request-id")
                        .and_then(|v| v.to_str().ok()),
                );
                let status = crate::status_from_error(&error, &request_id);
                let body = request.into_body();
                Box::pin(async move {
                    // A stream whose client waits for an answer before sending more never ends:
                    // bounded, so a refusal is never held.
                    let _ = tokio::time::timeout(DRAIN_WAIT, drain(body)).await;
                    Ok(status.into_http())
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn probes_and_health_are_never_refused() {
        for path in [
            "/grpc.health.v1.Health/Check",
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            "/agentsearch.shard.v1.Shard/Info",
        ] {
            assert!(super::exempt(path), "{path}");
        }
        for path in [
            "/agentsearch.shard.v1.Shard/SearchTools",
            "/agentsearch.v1.ToolSearch/SearchTools",
            "/agentsearch.shard.v1.Shard/Info/x",
        ] {
            assert!(!super::exempt(path), "{path}");
        }
    }
}
