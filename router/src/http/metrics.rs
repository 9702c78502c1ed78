//! Metrics of the REST API: every request is counted and timed by route template (never the
//! path a client sent), method, status and error code, and the in-flight gauge follows it; the
//! exposition is served at `/metrics`. Each request runs in a server span that continues the
//! caller's W3C trace (`traceparent`); the access log line is written inside it.

use std::time::Instant;

use agentsearch_common::ErrorCode;
use agentsearch_common::metrics::{CONTENT_TYPE, HTTP_DURATION, HTTP_REQUESTS};
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

/// The route template that served a response, set by [`tag_route`] inside the router.
#[derive(Clone, Debug)]
struct RouteTag(String);

/// Inner layer (`route_layer`): remembers which route template matched.
pub(crate) async fn tag_route(matched: MatchedPath, request: Request, next: Next) -> Response {
    let route = matched.as_str().to_string();
    let mut response = next.run(request).await;
    response.extensions_mut().insert(RouteTag(route));
    response
}

/// Outer layer: counts and times every request, refused ones included.
pub(crate) async fn record(mut request: Request, next: Next) -> Response {
    // One id for the request from here on: its span, the handler, the envelope, the answer.
    let request_id = agentsearch_common::ids::ensure_request_id(request.headers_mut());
    let method: &'static str = match request.method().as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        "PATCH" => "PATCH",
        _ => "OTHER",
    };
    let started = Instant::now();
    let in_flight = agentsearch_proto::grpc_metrics::InFlight::new("rest");
    // The route template is known only once a route matched: the span is named after it then.
    // Probes and scrapes make no trace: they would flood the backend with one-span traces.
    let span = if matches!(
        request.uri().path(),
        "/livez" | "/readyz" | "/healthz" | "/metrics" | "/openapi.json"
    ) {
        tracing::Span::none()
    } else {
        tracing::info_span!(
            "http",
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            http.request.method = method,
            http.route = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
            request_id = %request_id,
            trace_id = tracing::field::Empty,
        )
    };
    agentsearch_common::telemetry::continue_trace(&span, request.headers());
    let response = next.run(request).instrument(span.clone()).await;
    drop(in_flight);
    let _entered = span.enter();
    let route = response
        .extensions()
        .get::<RouteTag>()
        .map_or_else(|| "unmatched".to_string(), |r| r.0.clone());
    let status = response.status();
    let code = match response.extensions().get::<ErrorCode>() {
        Some(code) => code.as_str(),
        None if status.is_success() || status.is_redirection() => "OK",
        None => "OTHER",
    };
    metrics::counter!(
        HTTP_REQUESTS,
        "route" => route.clone(),
        "method" => method,
        "status" => status.as_u16().to_string(),
        "code" => code,
    )
    .increment(1);
    let elapsed = started.elapsed();
    agentsearch_common::telemetry::rename(&span, format!("{method} {route}"));
    span.record("http.route", route.as_str());
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    // The access log: one line per request, never a body, a query or a credential.
    tracing::info!(
        target: "agentsearch::access",
        api = "rest",
        route = %route,
        method,
        status = status.as_u16(),
        code,
        duration_ms = elapsed.as_secs_f64() * 1e3,
        request_id = %request_id,
        "request"
    );
    metrics::histogram!(HTTP_DURATION, "route" => route, "method" => method)
        .record(elapsed.as_secs_f64());
    response
}

/// `GET /metrics`: the Prometheus exposition of this process.
pub(crate) async fn metrics_text() -> Response {
    let mut response = agentsearch_common::metrics::render().into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}
