//! Limits of the REST API: admission (the router's permits, shared with gRPC: beyond them a
//! request is answered `RATE_LIMITED` at once) and a timeout per request (`TIMEOUT`; a write the
//! request started still completes, see `detached`). Health, readiness and metrics pass freely.

use std::time::Duration;

use agentsearch_common::Error;
use agentsearch_common::ids::accept_request_id;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::{ApiError, RestState};

fn exempt(path: &str) -> bool {
    matches!(
        path,
        "/livez" | "/readyz" | "/healthz" | "/metrics" | "/openapi.json"
    )
}

pub(crate) async fn admit(
    State(state): State<RestState>,
    request: Request,
    next: Next,
) -> Response {
    if exempt(request.uri().path()) {
        return next.run(request).await;
    }
    let id = accept_request_id(
        request
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok()),
    );
    let permit = match state.router.admission().try_admit("rest") {
        Ok(permit) => permit,
        Err(error) => return ApiError::new(error, id).into_response(),
    };
    let limit = Duration::from_millis(state.router.limits().request_timeout_ms);
    let response = match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            Error::Timeout(format!(
                "the request ran past {} ms (limits.request_timeout_ms)",
                limit.as_millis()
            )),
            id,
        )
        .into_response(),
    };
    drop(permit);
    response
}
