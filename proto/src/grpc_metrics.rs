//! A tower layer that counts and times every gRPC call a server answers, for router and shard
//! alike: `agentsearch_grpc_requests_total{service, method, code}` and
//! `agentsearch_grpc_request_duration_seconds{service, method}`, plus the in-flight gauge.
//! Calls to methods the server does not have (UNIMPLEMENTED) are labelled `unknown`, so a client
//! cannot create label values. A streaming call is timed to its response headers.
//!
//! Each call runs in a server span that continues the caller's W3C trace (`traceparent`), and the
//! access log line is written inside it, with the trace id.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use agentsearch_common::metrics::{GRPC_DURATION, GRPC_REQUESTS, IN_FLIGHT};
use agentsearch_common::telemetry;
use tracing::Instrument;

/// The layer; add it with `Server::builder().layer(GrpcMetricsLayer)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct GrpcMetricsLayer;

impl<S> tower::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetrics { inner }
    }
}

#[derive(Clone, Debug)]
pub struct GrpcMetrics<S> {
    inner: S,
}

/// One request in the in-flight gauge, until dropped: when the request ends, or when its future
/// is dropped because the client went away.
pub struct InFlight(&'static str);

impl InFlight {
    pub fn new(api: &'static str) -> Self {
        metrics::gauge!(IN_FLIGHT, "api" => api).increment(1.0);
        Self(api)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics::gauge!(IN_FLIGHT, "api" => self.0).decrement(1.0);
    }
}

/// The name of a gRPC status code, as the labels carry it.
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

/// `(service, method)` of a path `/package.Service/Method`.
fn split(path: &str) -> (String, String) {
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let service = parts.next().unwrap_or_default();
    let method = parts.next().unwrap_or_default();
    (service.to_string(), method.to_string())
}

impl<S, B, RB> tower::Service<http::Request<B>> for GrpcMetrics<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    RB: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let (service, method) = split(request.uri().path());
        // The caller's id, or one made here, for the span, the handler and the access log (the
        // admission layer has already settled it for the calls it admitted).
        let request_id = agentsearch_common::ids::ensure_request_id(request.headers_mut());
        let started = Instant::now();
        let in_flight = InFlight::new("grpc");
        // Health checks, reflection and the routers' shard probes make no trace: they would
        // flood the backend with one-span traces.
        let probe = service == "grpc.health.v1.Health"
            || service.starts_with("grpc.reflection.")
            || (service == "agentsearch.shard.v1.Shard" && method == "Info");
        let span = if probe {
            tracing::Span::none()
        } else {
            tracing::info_span!(
            "grpc",
            otel.name = %format_args!("{service}/{method}"),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %method,
            rpc.grpc.status_code = tracing::field::Empty,
            request_id = %request_id,
            trace_id = tracing::field::Empty,
            )
        };
        telemetry::continue_trace(&span, request.headers());
        let call = span.in_scope(|| self.inner.call(request));
        let call_span = span.clone();
        Box::pin(
            async move {
                let result = call.await;
                drop(in_flight);
                // A status in the headers is a trailers-only answer (an error); otherwise the call
                // succeeded so far, its status coming in the trailers.
                let code = match &result {
                    Ok(response) => response
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<i32>().ok())
                        .map_or("OK", code_name),
                    Err(_) => "UNAVAILABLE",
                };
                let span = tracing::Span::current();
                span.record("rpc.grpc.status_code", code);
                if code != "OK" {
                    span.record("otel.status_code", "ERROR");
                }
                let (service, method) = if code == "UNIMPLEMENTED" {
                    ("unknown".to_string(), "unknown".to_string())
                } else {
                    (service, method)
                };
                metrics::counter!(
                    GRPC_REQUESTS,
                    "service" => service.clone(),
                    "method" => method.clone(),
                    "code" => code,
                )
                .increment(1);
                let elapsed = started.elapsed();
                // The access log: one line per call, never a message or a credential.
                tracing::info!(
                    target: "agentsearch::access",
                    api = "grpc",
                    service = %service,
                    method = %method,
                    code,
                    duration_ms = elapsed.as_secs_f64() * 1e3,
                    request_id = %request_id,
                    "request"
                );
                metrics::histogram!(GRPC_DURATION, "service" => service, "method" => method)
                    .record(elapsed.as_secs_f64());
                result
            }
            .instrument(call_span),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_service_and_method() {
        assert_eq!(
            split("/agentsearch.v1.ToolSearch/SearchTools"),
            (
                "agentsearch.v1.ToolSearch".to_string(),
                "SearchTools".to_string()
            )
        );
        assert_eq!(split("/"), (String::new(), String::new()));
        assert_eq!(code_name(8), "RESOURCE_EXHAUSTED");
        assert_eq!(code_name(99), "UNKNOWN");
    }
}
