//! The REST/JSON API (axum). Every request passes the [`crate::rest_guard`] first; a handler
//! authenticates its caller before it reads the body ([`crate::rest_body`]: a limit per route,
//! large bodies parsed off the runtime), and every problem reaches the client as the error
//! envelope, bad input as `REQUEST_INVALID` naming the field.

use std::sync::Arc;

use agentsearch_common::Error;
use agentsearch_common::ids::{accept_request_id, parse_project_id, truncate};
use agentsearch_common::tool::ToolDefinition;
use axum::Router as AxumRouter;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::Value;

use crate::Router;
use crate::auth::Auth;
use crate::batch::RawBatch;
use crate::connections::{RawConnection, check_user, validate_connections};
use crate::json::{MAX_ECHOED_NAME, MAX_ECHOED_VALUE, from_json};
use crate::rest_body::{
    BATCH_BODY_LIMIT, CONNECTIONS_BODY_LIMIT, FEEDBACK_BODY_LIMIT, INGEST_BODY_LIMIT,
    SEARCH_BODY_LIMIT, parse_object, parse_off_runtime, parse_search, read_body, reject_unknown,
    string_list,
};
use crate::rest_guard::RestAccess;
use crate::rest_types::{Deleted, DeletedTools, Status, Toolkits, UpsertedCount, UpsertedTools};
use crate::search::RequestContext;

#[derive(Clone)]
pub struct RestState {
    pub router: Arc<Router>,
    pub auth: Auth,
    /// Allowed web origins and host names of [`crate::rest_guard`].
    pub access: RestAccess,
}

/// The REST API and, at `/mcp`, the meta-tools over MCP's streamable HTTP transport (tool
/// calls go through the REST API in process; the REST guard checks hosts and origins of both).
pub fn app(state: RestState) -> AxumRouter {
    let rest = rest_app(state.clone());
    let mcp = crate::mcp::http_service(rest.clone());
    let mcp = AxumRouter::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::rest_guard::guard,
        ))
        .with_state(state);
    rest.merge(mcp)
}

fn rest_app(state: RestState) -> AxumRouter {
    AxumRouter::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(crate::rest_metrics::metrics_text))
        .route("/openapi.json", get(openapi))
        .route(
            "/api/tools/projects/{project_id}/tools/search",
            post(search_tools),
        )
        .route(
            "/api/tools/projects/{project_id}/tools/search:batch",
            post(search_batch),
        )
        .route(
            "/api/tools/projects/{project_id}/tools/feedback",
            post(tool_feedback),
        )
        .route(
            "/api/tools/projects/{project_id}/tools/schema",
            get(tool_query_schema),
        )
        .route("/api/projects/{project_id}/meta-tools", get(meta_tools))
        .route(
            "/api/tools/projects/{project_id}/tools/{name}",
            get(get_tool),
        )
        .route(
            "/api/tools/projects/{project_id}/users/{user_id}/connections",
            put(upsert_connections).get(list_connections),
        )
        .route(
            "/api/tools/projects/{project_id}/users/{user_id}/connections/{integration}/{account_id}",
            axum::routing::delete(delete_connection),
        )
        .route("/api/tools/projects/{project_id}/tools", put(upsert_tools))
        .route(
            "/api/tools/projects/{project_id}/tools:delete",
            post(delete_tools),
        )
        .route(
            "/api/tools/projects/{project_id}/integrations",
            put(put_integrations),
        )
        .route(
            "/api/tools/projects/{project_id}/integrations/{integration}",
            axum::routing::delete(delete_integration),
        )
        .merge(crate::rest_plans::routes())
        .merge(crate::rest_context::routes())
        .merge(crate::tool_router::routes())
        .merge(crate::rest_admin::routes())
        .route_layer(axum::middleware::from_fn(crate::rest_metrics::tag_route))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::rest_limits::admit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::rest_guard::guard,
        ))
        .layer(axum::middleware::from_fn(crate::rest_metrics::record))
        .with_state(state)
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

    /// Only the user itself (or a service or anonymous caller) may act on `user_id`'s data.
    pub(crate) fn require_user(&self, user_id: &str) -> Result<(), ApiError> {
        check_user(self.ctx.user.as_deref(), user_id).map_err(|e| self.fail(e))
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

/// Readiness: 200 when everything the router serves is reachable (see [`crate::health`]), 503
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
    ApiError {
        error: Error::NotFound("no such route".into()),
        request_id: request_id(&headers),
    }
}

async fn method_not_allowed(headers: HeaderMap) -> ApiError {
    ApiError {
        error: Error::MethodNotAllowed("method not allowed on this route".into()),
        request_id: request_id(&headers),
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

async fn search_tools(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    params: Result<Query<SearchParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    let Query(params) =
        params.map_err(|e| call.fail(Error::invalid("query string", e.body_text())))?;
    let body = call.body(&headers, body, SEARCH_BODY_LIMIT).await?;
    let diagnostics = diagnostics_flag(&params).map_err(|e| call.fail(e))?;
    let request = parse_off_runtime(body, move |body| {
        let mut raw = parse_search(body)?;
        raw.diagnostics = diagnostics;
        raw.validate(project_id)
    })
    .await
    .map_err(|e| call.fail(e))?;
    let response = state
        .router
        .search_tools(request, &call.ctx)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(response))
}

async fn search_batch(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    params: Result<Query<SearchParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    let Query(params) =
        params.map_err(|e| call.fail(Error::invalid("query string", e.body_text())))?;
    let body = call.body(&headers, body, BATCH_BODY_LIMIT).await?;
    let diagnostics = diagnostics_flag(&params).map_err(|e| call.fail(e))?;
    // Validation tokenizes every inline tool: off the runtime too when the body is large.
    let request = parse_off_runtime(body, move |body| {
        let mut raw: RawBatch = from_json(body)?;
        raw.diagnostics = diagnostics;
        raw.validate(project_id)
    })
    .await
    .map_err(|e| call.fail(e))?;
    let response = state
        .router
        .search_batch(request, &call.ctx)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(response))
}

/// The JSON Schema of the query JSON documents tool search accepts.
async fn tool_query_schema(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, _project_id) = Call::begin(&state, &headers, &project_id)?;
    Ok(call.ok(agentsearch_query::schema(
        agentsearch_query::Catalog::tools(),
    )))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MetaToolsParams {
    format: Option<String>,
}

/// The service's own tools as definitions for a model API (`?format=anthropic|openai`).
async fn meta_tools(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    params: Result<Query<MetaToolsParams>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    let Query(params) =
        params.map_err(|e| call.fail(Error::invalid("query string", e.body_text())))?;
    let format =
        crate::meta_tools::Format::parse(params.format.as_deref()).map_err(|e| call.fail(e))?;
    let content = state
        .router
        .content_catalog_of(&project_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(crate::meta_tools::definitions(format, &content)))
}

async fn get_tool(
    State(state): State<RestState>,
    Path((project_id, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    let response = state
        .router
        .get_tool(&project_id, &name, &call.ctx)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(response))
}

/// `PUT .../users/{user_id}/connections`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "ConnectionsRequest")]
pub(crate) struct RawConnections {
    connections: Option<Vec<RawConnectionJson>>,
}

/// One connected account of a user.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "ConnectionRequest")]
struct RawConnectionJson {
    integration: Option<String>,
    account_id: Option<String>,
    alias: Option<String>,
    /// `active` (default) or another status.
    status: Option<String>,
    /// `private` (default) or `shared`.
    account_type: Option<String>,
    is_default: Option<bool>,
    user_info: Option<Value>,
}

async fn upsert_connections(
    State(state): State<RestState>,
    Path((project_id, user_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.require_user(&user_id)?;
    let body = call.body(&headers, body, CONNECTIONS_BODY_LIMIT).await?;
    let inputs = parse_off_runtime(body, |body| {
        let raw: RawConnections = from_json(body)?;
        let Some(items) = raw.connections else {
            return Err(Error::invalid("connections", "is required"));
        };
        validate_connections(
            items
                .into_iter()
                .map(|c| RawConnection {
                    integration: c.integration,
                    account_id: c.account_id,
                    alias: c.alias,
                    status: c.status,
                    account_type: c.account_type,
                    is_default: c.is_default,
                    user_info: c.user_info,
                })
                .collect(),
        )
    })
    .await
    .map_err(|e| call.fail(e))?;
    let toolkits = state
        .router
        .upsert_connections(&project_id, &user_id, inputs)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(Toolkits { toolkits }))
}

#[derive(serde::Deserialize)]
struct ConnectionParams {
    integrations: Option<String>,
}

async fn list_connections(
    State(state): State<RestState>,
    Path((project_id, user_id)): Path<(String, String)>,
    params: Result<Query<ConnectionParams>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.require_user(&user_id)?;
    let Query(params) =
        params.map_err(|e| call.fail(Error::invalid("query string", e.body_text())))?;
    let integrations: Vec<String> = params
        .integrations
        .as_deref()
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let toolkits = state
        .router
        .list_connections(&project_id, &user_id, &integrations)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(Toolkits { toolkits }))
}

async fn delete_connection(
    State(state): State<RestState>,
    Path((project_id, user_id, integration, account_id)): Path<(String, String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.require_user(&user_id)?;
    let deleted = state
        .router
        .delete_connection(&project_id, &user_id, &integration, &account_id)
        .await
        .map_err(|e| call.fail(e))?;
    if !deleted {
        return Err(call.fail(Error::NotFound(format!(
            "the user has no {} account `{}`",
            truncate(&integration, MAX_ECHOED_NAME),
            truncate(&account_id, MAX_ECHOED_VALUE)
        ))));
    }
    Ok(call.ok(Deleted { deleted: true }))
}

async fn upsert_tools(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    let body = call.body(&headers, body, INGEST_BODY_LIMIT).await?;
    let defs = parse_off_runtime(body, parse_tools)
        .await
        .map_err(|e| call.fail(e))?;
    let outcome = state
        .router
        .upsert_tools(&project_id, defs, &call.request_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(UpsertedTools {
        upserted: outcome.upserted,
        unchanged: outcome.unchanged,
    }))
}

async fn put_integrations(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    let body = call.body(&headers, body, INGEST_BODY_LIMIT).await?;
    let infos = parse_off_runtime(body, |body| {
        from_json::<crate::toolkits::RawIntegrations>(body)?.validate()
    })
    .await
    .map_err(|e| call.fail(e))?;
    let written = state
        .router
        .put_integration_info(&project_id, infos)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(UpsertedCount { upserted: written }))
}

async fn delete_integration(
    State(state): State<RestState>,
    Path((project_id, integration)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    let deleted = state
        .router
        .delete_integration_info(&project_id, &integration)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(Deleted { deleted }))
}

async fn delete_tools(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    let body = call.body(&headers, body, INGEST_BODY_LIMIT).await?;
    let names = parse_off_runtime(body, |body| {
        let mut object = parse_object(body)?;
        reject_unknown(&object, &["names"])?;
        Ok(string_list(&mut object, "names")?.unwrap_or_default())
    })
    .await
    .map_err(|e| call.fail(e))?;
    let outcome = state
        .router
        .delete_tools(&project_id, names, &call.request_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(DeletedTools {
        deleted: outcome.deleted,
        not_found: outcome.not_found,
        plans_deleted: outcome.plans_deleted,
    }))
}

/// `POST .../tools/feedback`: `{"requestId": "...", "calledTools": ["NAME", ...]}`.
async fn tool_feedback(
    state: State<RestState>,
    project_id: Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    feedback(crate::feedback::TOOLS, state, project_id, headers, body).await
}

/// A feedback call of either kind of search: the body is `{"requestId", LIST}` with LIST
/// `calledTools` (tools) or `openedRecords` (context); the router validates both fields.
pub(crate) async fn feedback(
    kind: &'static str,
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    let body = call.body(&headers, body, FEEDBACK_BODY_LIMIT).await?;
    let list = crate::feedback::used_field(kind);
    let (request_id, used) = parse_off_runtime(body, move |body| {
        crate::rest_body::feedback_body(body, list)
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

/// The body of `PUT /tools`: `{"tools": [...]}`, each tool named `tools[i]` in errors.
fn parse_tools(body: &[u8]) -> Result<Vec<ToolDefinition>, Error> {
    let mut object = parse_object(body)?;
    reject_unknown(&object, &["tools"])?;
    let tools = match object.remove("tools") {
        Some(Value::Array(items)) => items,
        Some(_) => return Err(Error::invalid("tools", "must be an array of tools")),
        None => return Err(Error::invalid("tools", "is required")),
    };
    let mut defs = Vec::with_capacity(tools.len());
    for (i, item) in tools.into_iter().enumerate() {
        let def: ToolDefinition = serde_path_to_error::deserialize(item).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." {
                format!("tools[{i}]")
            } else {
                format!("tools[{i}].{path}")
            };
            let violation = crate::json::violation(&path, &e.into_inner().to_string());
            Error::invalid_many(vec![violation])
        })?;
        defs.push(def);
    }
    Ok(defs)
}
