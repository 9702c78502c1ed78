//! The REST/JSON API (axum), assembled from each domain's routes: tool search
//! ([`crate::tools::rest`], recorded plans in [`crate::tools::plans`]), context search
//! ([`crate::context::rest`]), the tool-router-compatible surface ([`crate::tool_router`]), the
//! meta-tools and MCP ([`crate::agent`]) and the operator routes (`crate::admin`), with the
//! probes, `/metrics` and `/openapi.json`. Every request passes the [`crate::http::guard`] first; a
//! handler authenticates its caller before it reads the body ([`crate::http::body`]: a limit per
//! route, large bodies parsed off the runtime), and every problem reaches the client as the error
//! envelope ([`crate::http::ApiError`]), bad input as `REQUEST_INVALID` naming the field.

use agentsearch_common::Error;
use axum::Router as AxumRouter;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::http::types::Status;
use crate::http::{ApiError, request_id};

pub use crate::http::RestState;

/// The REST API and, at `/mcp`, the meta-tools over MCP's streamable HTTP transport (tool
/// calls go through the REST API in process; the REST guard checks hosts and origins of both).
pub fn app(state: RestState) -> AxumRouter {
    let rest = rest_app(state.clone());
    let mcp = crate::agent::mcp::http_service(rest.clone());
    let mcp = AxumRouter::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::http::guard::guard,
        ))
        .with_state(state);
    rest.merge(mcp)
}

fn rest_app(state: RestState) -> AxumRouter {
    AxumRouter::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(crate::http::metrics::metrics_text))
        .route("/openapi.json", get(openapi))
        .merge(crate::tools::rest::routes())
        .merge(crate::agent::routes())
        .merge(crate::tools::plans::rest::routes())
        .merge(crate::context::rest::routes())
        .merge(crate::tool_router::routes())
        .merge(crate::admin::routes())
        .route_layer(axum::middleware::from_fn(crate::http::metrics::tag_route))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::http::limits::admit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::http::guard::guard,
        ))
        .layer(axum::middleware::from_fn(crate::http::metrics::record))
        .with_state(state)
}

async fn healthz() -> Response {
    axum::Json(Status { status: "ok" }).into_response()
}

/// Liveness: the process runs and its runtime answers.
async fn livez() -> Response {
    axum::Json(Status { status: "live" }).into_response()
}

/// The OpenAPI document of this API ([`crate::openapi`]), built once.
async fn openapi() -> Response {
    static DOCUMENT: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(crate::openapi::document_text);
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
        .into_response()
}

/// `?allowPartial=true`: ready as long as the router can answer at all.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadyParams {
    #[serde(default)]
    allow_partial: bool,
}

/// Readiness: 200 when everything the router serves is reachable (see [`crate::cluster::health`]), 503
/// otherwise; with `?allowPartial=true`, 200 whenever it can answer at all (a shard down means
/// partial answers, not none). The body says why either way. No credentials needed (probes carry
/// none); it names shard addresses and ids, never data.
async fn readyz(
    State(state): State<RestState>,
    params: Result<Query<ReadyParams>, QueryRejection>,
) -> Response {
    let allow_partial = params.is_ok_and(|Query(p)| p.allow_partial);
    let readiness = state.router.readiness().await;
    let ok = if allow_partial {
        readiness.serving
    } else {
        readiness.ready
    };
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(readiness)).into_response()
}

async fn not_found(headers: HeaderMap) -> ApiError {
    ApiError::new(
        Error::NotFound("no such route".into()),
        request_id(&headers),
    )
}

async fn method_not_allowed(headers: HeaderMap) -> ApiError {
    ApiError::new(
        Error::MethodNotAllowed("method not allowed on this route".into()),
        request_id(&headers),
    )
}
