//! The REST/JSON routes of tool search: search and batch search, the query schema, tool lookup,
//! connections, catalog writes and feedback. A handler authenticates its caller (`Call`) before
//! it reads the body, within the route's limit.

use agentsearch_common::Error;
use agentsearch_common::ids::truncate;
use agentsearch_common::tool::ToolDefinition;
use axum::Router as AxumRouter;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post, put};
use serde_json::Value;

use crate::http::body::{
    BATCH_BODY_LIMIT, CONNECTIONS_BODY_LIMIT, INGEST_BODY_LIMIT, SEARCH_BODY_LIMIT, parse_object,
    parse_off_runtime, reject_unknown, string_list,
};
use crate::http::types::{Deleted, UpsertedCount};
use crate::http::{ApiError, Call, RestState, SearchParams, diagnostics_flag};
use crate::json::{MAX_ECHOED_NAME, MAX_ECHOED_VALUE, from_json};
use crate::tools::batch::RawBatch;
use crate::tools::connections::{RawConnection, check_user, validate_connections};
use crate::tools::rest_body::parse_search;
use crate::tools::rest_types::{DeletedTools, Toolkits, UpsertedTools};

pub fn routes() -> AxumRouter<RestState> {
    AxumRouter::new()
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
}

impl Call {
    /// Only the user itself (or a service or anonymous caller) may act on `user_id`'s data.
    pub(crate) fn require_user(&self, user_id: &str) -> Result<(), ApiError> {
        check_user(self.ctx.user.as_deref(), user_id).map_err(|e| self.fail(e))
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
        from_json::<crate::tools::toolkits::RawIntegrations>(body)?.validate()
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
    let kind = crate::tools::feedback::TOOLS;
    let list = crate::tools::feedback::used_field(kind);
    crate::http::feedback(kind, list, state, project_id, headers, body).await
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
