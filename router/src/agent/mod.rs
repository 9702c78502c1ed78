//! The agent-facing surface: the service's own tools as definitions for a model API
//! ([`meta_tools`], also served at `/api/projects/{project_id}/meta-tools`) and the MCP server that
//! serves them ([`mcp`]).

pub mod mcp;
pub mod meta_tools;

use agentsearch_common::Error;
use axum::Router as AxumRouter;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;

use crate::http::{ApiError, Call, RestState};

pub fn routes() -> AxumRouter<RestState> {
    AxumRouter::new().route("/api/projects/{project_id}/meta-tools", get(meta_tools))
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
    let format = crate::agent::meta_tools::Format::parse(params.format.as_deref())
        .map_err(|e| call.fail(e))?;
    let content = state
        .router
        .content_catalog_of(&project_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(crate::agent::meta_tools::definitions(format, &content)))
}
