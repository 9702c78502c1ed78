//! The REST/JSON routes of context search: syncs, records, groups, search and read-around.
//! Bodies are read once the caller is authenticated (and, for writes, known to be a service),
//! within the route's limit, and parsed with [`from_json`], which names the field of any problem.

use agentsearch_common::Error;
use axum::Router as AxumRouter;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post, put};
use serde::de::DeserializeOwned;

use crate::context::api::{
    RawContextSearch, RawCreateSync, RawDeleteRecords, RawPutGroups, RawReadContext,
    RawUpsertRecords, bind_identity, from_json, parse_sync_id,
};
use crate::context::rest_types::{DeletedRecords, Groups, Syncs, UpsertedRecords};
use crate::http::body::{INGEST_BODY_LIMIT, SEARCH_BODY_LIMIT, parse_off_runtime};
use crate::http::{ApiError, Call, RestState, SearchParams, diagnostics_flag};

pub fn routes() -> AxumRouter<RestState> {
    AxumRouter::new()
        .route("/api/context/projects/{project_id}/search", post(search))
        .route(
            "/api/context/projects/{project_id}/schema",
            get(context_query_schema),
        )
        .route(
            "/api/context/projects/{project_id}/segments:read",
            post(read_segment_context),
        )
        .route(
            "/api/context/projects/{project_id}/feedback",
            post(context_feedback),
        )
        .route(
            "/api/context/projects/{project_id}/syncs",
            post(create_sync).get(list_syncs),
        )
        .route(
            "/api/context/projects/{project_id}/syncs/{sync_id}",
            get(get_sync),
        )
        .route(
            "/api/context/projects/{project_id}/syncs/{sync_id}/records",
            put(upsert_records),
        )
        .route(
            "/api/context/projects/{project_id}/syncs/{sync_id}/records:delete",
            post(delete_records),
        )
        .route(
            "/api/context/projects/{project_id}/syncs/{sync_id}/groups",
            put(put_groups),
        )
}

/// Who may call a route: anyone the project authenticates, or only a service.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Callers {
    Any,
    Service,
}

/// The authenticated call, its validated project id and its JSON body, read (up to `limit`
/// bytes) and parsed only once the caller may call the route.
async fn begin<T: DeserializeOwned + Send + 'static>(
    state: &RestState,
    headers: &HeaderMap,
    project_id: &str,
    callers: Callers,
    body: Body,
    limit: usize,
) -> Result<(Call, String, T), ApiError> {
    let (call, project_id) = Call::begin(state, headers, project_id)?;
    if callers == Callers::Service {
        call.ctx.require_service().map_err(|e| call.fail(e))?;
    }
    let body = call.body(headers, body, limit).await?;
    let parsed = parse_off_runtime(body, |body| from_json(body))
        .await
        .map_err(|e| call.fail(e))?;
    Ok((call, project_id, parsed))
}

fn sync_id(call: &Call, value: &str) -> Result<String, ApiError> {
    parse_sync_id("syncId", value).map_err(|v| call.fail(Error::invalid_many(vec![v])))
}

async fn search(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    params: Result<Query<SearchParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id, mut raw): (_, _, RawContextSearch) = begin(
        &state,
        &headers,
        &project_id,
        Callers::Any,
        body,
        SEARCH_BODY_LIMIT,
    )
    .await?;
    let Query(params) =
        params.map_err(|e| call.fail(Error::invalid("query string", e.body_text())))?;
    raw.diagnostics = diagnostics_flag(&params).map_err(|e| call.fail(e))?;
    let mut request = raw.validate(project_id).map_err(|e| call.fail(e))?;
    bind_identity(&mut request.identity, call.ctx.user.as_deref()).map_err(|e| call.fail(e))?;
    let response = state
        .router
        .search_context(request, &call.request_id, call.ctx.user.as_deref())
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(response))
}

async fn read_segment_context(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id, raw): (_, _, RawReadContext) = begin(
        &state,
        &headers,
        &project_id,
        Callers::Any,
        body,
        SEARCH_BODY_LIMIT,
    )
    .await?;
    let mut request = raw.validate(project_id).map_err(|e| call.fail(e))?;
    bind_identity(&mut request.identity, call.ctx.user.as_deref()).map_err(|e| call.fail(e))?;
    let response = state
        .router
        .read_segment_context(request, &call.request_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(response))
}

/// `POST .../feedback`: `{"requestId": "...", "openedRecords": ["{syncId}.{recordId}", ...]}`.
async fn context_feedback(
    state: State<RestState>,
    project_id: Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let kind = crate::tools::feedback::CONTEXT;
    let list = crate::tools::feedback::used_field(kind);
    crate::http::feedback(kind, list, state, project_id, headers, body).await
}

async fn create_sync(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id, raw): (_, _, RawCreateSync) = begin(
        &state,
        &headers,
        &project_id,
        Callers::Service,
        body,
        SEARCH_BODY_LIMIT,
    )
    .await?;
    let request = raw.validate(project_id).map_err(|e| call.fail(e))?;
    let sync = state
        .router
        .create_sync(request)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(sync))
}

async fn list_syncs(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    let syncs = state
        .router
        .list_syncs(&project_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(Syncs { syncs }))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaParams {
    /// Comma-separated sync ids.
    #[serde(rename = "syncIds")]
    sync_ids: Option<String>,
}

/// The JSON Schema of the query JSON documents context search accepts: the fields every record
/// has and the metadata the project's syncs (or those of `?syncIds=`) declare.
async fn context_query_schema(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    params: Result<Query<SchemaParams>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    let Query(params) =
        params.map_err(|e| call.fail(Error::invalid("query string", e.body_text())))?;
    let sync_ids: Vec<String> = params
        .sync_ids
        .as_deref()
        .map(|ids| {
            ids.split(',')
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let schema = state
        .router
        .context_query_schema(&project_id, &sync_ids)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(schema))
}

async fn get_sync(
    State(state): State<RestState>,
    Path((project_id, sync_id_raw)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    let sync_id = sync_id(&call, &sync_id_raw)?;
    let sync = state
        .router
        .get_sync(&project_id, &sync_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(sync))
}

async fn upsert_records(
    State(state): State<RestState>,
    Path((project_id, sync_id_raw)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id, raw): (_, _, RawUpsertRecords) = begin(
        &state,
        &headers,
        &project_id,
        Callers::Service,
        body,
        INGEST_BODY_LIMIT,
    )
    .await?;
    let sync_id = sync_id(&call, &sync_id_raw)?;
    let outcome = state
        .router
        .upsert_records(&project_id, &sync_id, raw, &call.request_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(UpsertedRecords {
        upserted: outcome.upserted,
        unchanged: outcome.unchanged,
        segments: outcome.segments,
        generation: outcome.generation,
    }))
}

async fn delete_records(
    State(state): State<RestState>,
    Path((project_id, sync_id_raw)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id, raw): (_, _, RawDeleteRecords) = begin(
        &state,
        &headers,
        &project_id,
        Callers::Service,
        body,
        INGEST_BODY_LIMIT,
    )
    .await?;
    let sync_id = sync_id(&call, &sync_id_raw)?;
    let outcome = state
        .router
        .delete_records(&project_id, &sync_id, raw.ids, &call.request_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(DeletedRecords {
        deleted: outcome.deleted,
        not_found: outcome.not_found,
        generation: outcome.generation,
    }))
}

async fn put_groups(
    State(state): State<RestState>,
    Path((project_id, sync_id_raw)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id, raw): (_, _, RawPutGroups) = begin(
        &state,
        &headers,
        &project_id,
        Callers::Service,
        body,
        INGEST_BODY_LIMIT,
    )
    .await?;
    let sync_id = sync_id(&call, &sync_id_raw)?;
    let groups = state
        .router
        .put_groups(&project_id, &sync_id, raw)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(Groups { groups }))
}
