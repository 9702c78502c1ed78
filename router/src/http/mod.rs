//! What every REST route shares: the state handlers get ([`RestState`]), the error envelope
//! ([`ApiError`]), the request id, and the per-request `Call` that authenticates the caller for
//! the project in the path and reads the body. The routes themselves live with their domain.

pub mod body;
pub mod guard;
pub(crate) mod limits;
pub(crate) mod metrics;
pub mod types;

use std::sync::Arc;

use agentsearch_common::Error;
use agentsearch_common::ids::{accept_request_id, parse_project_id};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::Router;
use crate::auth::Auth;
use crate::http::body::{FEEDBACK_BODY_LIMIT, parse_off_runtime, read_body};
use crate::http::guard::RestAccess;
use crate::request::RequestContext;

#[derive(Clone)]
pub struct RestState {
    pub router: Arc<Router>,
    pub auth: Auth,
    /// Allowed web origins and host names of [`crate::http::guard`].
    pub access: RestAccess,
}

/// An error as a REST response: the envelope, with the status of its code.
pub struct ApiError {
    error: Error,
    request_id: String,
}

impl ApiError {
    pub(crate) fn new(error: Error, request_id: String) -> Self {
        Self { error, request_id }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Error::Internal(text) = &self.error {
            tracing::error!(request_id = %self.request_id, error = %text, "internal error");
        }
        let status = StatusCode::from_u16(self.error.code().http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.error.to_envelope(&self.request_id);
        let mut response =
            with_request_id((status, axum::Json(body)).into_response(), &self.request_id);
        response.extensions_mut().insert(self.error.code());
        response
    }
}

fn with_request_id(mut response: Response, request_id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        response.headers_mut().insert("x-request-id", v);
    }
    response
}

/// The caller's `x-request-id` when it is a sane token, otherwise a fresh one.
pub(crate) fn request_id(headers: &HeaderMap) -> String {
    accept_request_id(headers.get("x-request-id").and_then(|v| v.to_str().ok()))
}

pub(crate) struct Call {
    pub(crate) request_id: String,
    /// The authenticated caller of the project in the path.
    pub(crate) ctx: RequestContext,
}

impl Call {
    /// Authenticates the caller for the project in the path (`projectId`, validated here): every
    /// route under a project starts with this. Returns the call and the canonical project id.
    pub(crate) fn begin(
        state: &RestState,
        headers: &HeaderMap,
        project_id: &str,
    ) -> Result<(Self, String), ApiError> {
        let started = std::time::Instant::now();
        let request_id = request_id(headers);
        let fail = |error: Error| ApiError {
            error,
            request_id: request_id.clone(),
        };
        let authorization = agentsearch_common::auth::authorization_text(
            headers.get("authorization").map(|v| v.as_bytes()),
        )
        .map_err(fail)?;
        let project_id = match parse_project_id("projectId", project_id) {
            Ok(id) => id,
            Err(invalid) => {
                // Say who is unauthenticated before saying the path is wrong.
                if authorization.is_none() && state.auth.enabled() {
                    return Err(fail(Error::Unauthenticated("missing bearer token".into())));
                }
                return Err(fail(invalid));
            }
        };
        let caller = state
            .auth
            .authenticate(authorization, &project_id)
            .map_err(fail)?;
        let ctx = RequestContext {
            request_id: request_id.clone(),
            user: caller.user,
            kind: caller.kind,
            auth: started.elapsed(),
        };
        Ok((Self { request_id, ctx }, project_id))
    }

    /// The body, read now that the caller is authenticated, up to `limit` bytes.
    pub(crate) async fn body(
        &self,
        headers: &HeaderMap,
        body: Body,
        limit: usize,
    ) -> Result<Bytes, ApiError> {
        read_body(headers, body, limit)
            .await
            .map_err(|e| self.fail(e))
    }

    /// A call of an operator route (not under a project): authenticated by its handler.
    pub(crate) fn operator(headers: &HeaderMap) -> Self {
        let request_id = request_id(headers);
        Self {
            request_id: request_id.clone(),
            ctx: RequestContext {
                request_id,
                user: None,
                kind: agentsearch_common::auth::CallerKind::ServiceToken,
                auth: std::time::Duration::ZERO,
            },
        }
    }

    pub(crate) fn fail(&self, error: Error) -> ApiError {
        ApiError {
            error,
            request_id: self.request_id.clone(),
        }
    }

    pub(crate) fn ok(&self, body: impl serde::Serialize) -> Response {
        with_request_id(axum::Json(body).into_response(), &self.request_id)
    }
}

#[derive(serde::Deserialize)]
pub(crate) struct SearchParams {
    pub(crate) diagnostics: Option<String>,
}

/// `?diagnostics=1|0|true|false`.
pub(crate) fn diagnostics_flag(params: &SearchParams) -> Result<bool, Error> {
    match params.diagnostics.as_deref() {
        None | Some("0") | Some("false") => Ok(false),
        Some("1") | Some("true") => Ok(true),
        Some(_) => Err(Error::invalid("diagnostics", "must be 1 or 0")),
    }
}

/// A feedback call of either kind of search: the body is `{"requestId", LIST}` with LIST
/// `calledTools` (tools) or `openedRecords` (context), named by `list`; the router validates both
/// fields.
pub(crate) async fn feedback(
    kind: &'static str,
    list: &'static str,
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    let body = call.body(&headers, body, FEEDBACK_BODY_LIMIT).await?;
    let (request_id, used) = parse_off_runtime(body, move |body| {
        crate::http::body::feedback_body(body, list)
    })
    .await
    .map_err(|e| call.fail(e))?;
    let outcome = state
        .router
        .feedback(
            kind,
            &project_id,
            call.ctx.user.as_deref(),
            &request_id,
            used,
        )
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(outcome))
}
