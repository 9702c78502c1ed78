//! The REST/JSON API (axum). Bodies are parsed by hand from JSON values so that every problem
//! (unknown property, wrong type, out of range) is reported as `REQUEST_INVALID` naming the field,
//! in the error envelope.

use std::sync::Arc;

use agentsearch_common::ids::{accept_request_id, parse_project_id};
use agentsearch_common::tool::ToolDefinition;
use agentsearch_common::{Error, FieldViolation};
use axum::Router as AxumRouter;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Map, Value};

use crate::Router;
use crate::api::RawSearch;
use crate::auth::Auth;
use crate::batch::RawBatch;
use crate::connections::{RawConnection, check_user, validate_connections};
use crate::context_api::from_json;
use crate::search::RequestContext;

/// Largest accepted body (a catalog batch of 1000 tools with large schemas fits).
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

#[derive(Clone)]
pub struct RestState {
    pub router: Arc<Router>,
    pub auth: Auth,
}

pub fn app(state: RestState) -> AxumRouter {
    AxumRouter::new()
        .route("/healthz", get(healthz))
        .route(
            "/api/tools/projects/{project_id}/tools/search",
            post(search_tools),
        )
        .route(
            "/api/tools/projects/{project_id}/tools/search:batch",
            post(search_batch),
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
        .merge(crate::rest_context::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// An error as a REST response: the envelope, with the status of its code.
pub struct ApiError {
    error: Error,
    request_id: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Error::Internal(text) = &self.error {
            tracing::error!(request_id = %self.request_id, error = %text, "internal error");
        }
        let status = StatusCode::from_u16(self.error.code().http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.error.to_envelope(&self.request_id);
        with_request_id((status, axum::Json(body)).into_response(), &self.request_id)
    }
}

fn with_request_id(mut response: Response, request_id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        response.headers_mut().insert("x-request-id", v);
    }
    response
}

/// The caller's `x-request-id` when it is a sane token, otherwise a fresh one.
fn request_id(headers: &HeaderMap) -> String {
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
    axum::Json(serde_json::json!({"status": "ok"})).into_response()
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
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    let Query(params) =
        params.map_err(|e| call.fail(Error::invalid("query string", e.body_text())))?;
    let body = body_bytes(body).map_err(|e| call.fail(e))?;
    let diagnostics = diagnostics_flag(&params).map_err(|e| call.fail(e))?;
    let mut raw = parse_search(&body).map_err(|e| call.fail(e))?;
    raw.diagnostics = diagnostics;
    let request = raw.validate(project_id).map_err(|e| call.fail(e))?;
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
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    let Query(params) =
        params.map_err(|e| call.fail(Error::invalid("query string", e.body_text())))?;
    let body = body_bytes(body).map_err(|e| call.fail(e))?;
    let diagnostics = diagnostics_flag(&params).map_err(|e| call.fail(e))?;
    let mut raw: RawBatch = from_json(&body).map_err(|e| call.fail(e))?;
    raw.diagnostics = diagnostics;
    let request = raw.validate(project_id).map_err(|e| call.fail(e))?;
    let response = state
        .router
        .search_batch(request, &call.ctx)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(response))
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

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConnections {
    connections: Option<Vec<RawConnectionJson>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConnectionJson {
    integration: Option<String>,
    account_id: Option<String>,
    alias: Option<String>,
    status: Option<String>,
    account_type: Option<String>,
    is_default: Option<bool>,
    user_info: Option<Value>,
}

async fn upsert_connections(
    State(state): State<RestState>,
    Path((project_id, user_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.require_user(&user_id)?;
    let body = body_bytes(body).map_err(|e| call.fail(e))?;
    let raw: RawConnections = from_json(&body).map_err(|e| call.fail(e))?;
    let Some(items) = raw.connections else {
        return Err(call.fail(Error::invalid("connections", "is required")));
    };
    let inputs = validate_connections(
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
    .map_err(|e| call.fail(e))?;
    let toolkits = state
        .router
        .upsert_connections(&project_id, &user_id, inputs)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(serde_json::json!({ "toolkits": toolkits })))
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
    Ok(call.ok(serde_json::json!({ "toolkits": toolkits })))
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
            "the user has no {integration} account `{account_id}`"
        ))));
    }
    Ok(call.ok(serde_json::json!({ "deleted": true })))
}

async fn upsert_tools(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    let body = body_bytes(body).map_err(|e| call.fail(e))?;
    let mut object = parse_object(&body).map_err(|e| call.fail(e))?;
    reject_unknown(&object, &["tools"]).map_err(|e| call.fail(e))?;
    let tools = match object.remove("tools") {
        Some(Value::Array(items)) => items,
        Some(_) => return Err(call.fail(Error::invalid("tools", "must be an array of tools"))),
        None => return Err(call.fail(Error::invalid("tools", "is required"))),
    };
    let mut defs = Vec::with_capacity(tools.len());
    for (i, item) in tools.into_iter().enumerate() {
        let def: ToolDefinition = serde_path_to_error::deserialize(item).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                format!("tools[{i}]")
            } else {
                format!("tools[{i}].{path}")
            };
            call.fail(Error::invalid(field, e.into_inner().to_string()))
        })?;
        defs.push(def);
    }
    let outcome = state
        .router
        .upsert_tools(&project_id, defs, &call.request_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(serde_json::json!({"upserted": outcome.upserted, "unchanged": outcome.unchanged})))
}

async fn delete_tools(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    let body = body_bytes(body).map_err(|e| call.fail(e))?;
    let mut object = parse_object(&body).map_err(|e| call.fail(e))?;
    reject_unknown(&object, &["names"]).map_err(|e| call.fail(e))?;
    let names = string_list(&mut object, "names")
        .map_err(|e| call.fail(e))?
        .unwrap_or_default();
    let outcome = state
        .router
        .delete_tools(&project_id, names, &call.request_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(serde_json::json!({"deleted": outcome.deleted, "notFound": outcome.not_found})))
}

/// The body, or the error a client should see when it could not be read (too large: 413).
pub(crate) fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, Error> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Error::PayloadTooLarge(format!("the body is larger than {MAX_BODY_BYTES} bytes"))
        } else {
            Error::invalid("body", rejection.body_text())
        }
    })
}

fn parse_object(body: &[u8]) -> Result<Map<String, Value>, Error> {
    if body.is_empty() {
        return Err(Error::invalid("body", "a JSON object is required"));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Error::invalid("body", "must be a JSON object")),
        Err(e) => Err(Error::invalid("body", format!("is not valid JSON: {e}"))),
    }
}

const SEARCH_FIELDS: &[&str] = &[
    "query",
    "topK",
    "maxToolTokens",
    "integrations",
    "categories",
    "maxSideEffect",
    "connectedOnly",
    "rerank",
    "mode",
];

fn reject_unknown(object: &Map<String, Value>, known: &[&str]) -> Result<(), Error> {
    let unknown: Vec<FieldViolation> = object
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| {
            let suggestion = known
                .iter()
                .map(|c| (strsim(k, c), c))
                .filter(|(d, _)| *d <= 2)
                .min()
                .map(|(_, c)| format!("; did you mean `{c}`?"))
                .unwrap_or_default();
            FieldViolation::new(k.clone(), format!("unknown property{suggestion}"))
        })
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(Error::invalid_many(unknown))
    }
}

/// Case-insensitive Levenshtein distance (short strings only).
fn strsim(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

fn parse_search(body: &[u8]) -> Result<RawSearch, Error> {
    let mut object = parse_object(body)?;
    reject_unknown(&object, SEARCH_FIELDS)?;
    let mut violations = Vec::new();
    let mut take = |key: &str| object.remove(key).filter(|v| !v.is_null());
    let mut raw = RawSearch::default();
    let query = take("query");
    let top_k = take("topK");
    let max_tool_tokens = take("maxToolTokens");
    let integrations = take("integrations");
    let categories = take("categories");
    let max_side_effect = take("maxSideEffect");
    let connected_only = take("connectedOnly");
    let rerank = take("rerank");
    let mode = take("mode");
    raw.query = typed(&mut violations, "query", query, "a string", |v| {
        v.as_str().map(str::to_string)
    });
    raw.top_k = typed(&mut violations, "topK", top_k, "an integer", integer);
    raw.max_tool_tokens = typed(
        &mut violations,
        "maxToolTokens",
        max_tool_tokens,
        "an integer",
        integer,
    );
    raw.integrations = typed(
        &mut violations,
        "integrations",
        integrations,
        "an array of strings",
        strings,
    );
    raw.categories = typed(
        &mut violations,
        "categories",
        categories,
        "an array of strings",
        strings,
    );
    raw.max_side_effect = typed(
        &mut violations,
        "maxSideEffect",
        max_side_effect,
        "a string",
        |v| v.as_str().map(str::to_string),
    );
    raw.connected_only = typed(
        &mut violations,
        "connectedOnly",
        connected_only,
        "a boolean",
        Value::as_bool,
    );
    raw.rerank = typed(
        &mut violations,
        "rerank",
        rerank,
        "a boolean",
        Value::as_bool,
    );
    raw.mode = typed(&mut violations, "mode", mode, "a string", |v| {
        v.as_str().map(str::to_string)
    });
    if violations.is_empty() {
        Ok(raw)
    } else {
        Err(Error::invalid_many(violations))
    }
}

fn typed<T>(
    violations: &mut Vec<FieldViolation>,
    field: &str,
    value: Option<Value>,
    expected: &str,
    convert: impl Fn(&Value) -> Option<T>,
) -> Option<T> {
    let value = value?;
    match convert(&value) {
        Some(v) => Some(v),
        None => {
            violations.push(FieldViolation::new(
                field,
                format!("must be {expected}, got {}", kind(&value)),
            ));
            None
        }
    }
}

/// An integer; one beyond i64 saturates so the range check reports it.
fn integer(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| value.as_u64().map(|_| i64::MAX))
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn string_list(object: &mut Map<String, Value>, field: &str) -> Result<Option<Vec<String>>, Error> {
    match object.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => strings(&v).map(Some).ok_or_else(|| {
            Error::invalid(
                field,
                format!("must be an array of strings, got {}", kind(&v)),
            )
        }),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a fractional number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(err: Error) -> Vec<(String, String)> {
        match err {
            Error::InvalidArgument { violations, .. } => {
                violations.into_iter().map(|v| (v.field, v.issue)).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_properties_are_named_with_a_suggestion() {
        let err = parse_search(br#"{"query": "x", "topk": 3, "colour": 1}"#).unwrap_err();
        let f = fields(err);
        assert_eq!(f.len(), 2);
        assert!(
            f.iter()
                .any(|(k, issue)| k == "topk" && issue.contains("`topK`"))
        );
        assert!(
            f.iter()
                .any(|(k, issue)| k == "colour" && issue == "unknown property")
        );
    }

    #[test]
    fn wrong_types_are_named() {
        let f = fields(
            parse_search(br#"{"query": 3, "topK": 2.5, "integrations": ["a", 1], "rerank": "no"}"#)
                .unwrap_err(),
        );
        let names: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["query", "topK", "integrations", "rerank"]);
    }

    #[test]
    fn bodies_that_are_not_objects() {
        assert_eq!(fields(parse_search(b"").unwrap_err())[0].0, "body");
        assert_eq!(fields(parse_search(b"[1]").unwrap_err())[0].0, "body");
        assert_eq!(
            fields(parse_search(b"{\"query\":").unwrap_err())[0].0,
            "body"
        );
    }

    #[test]
    fn nulls_are_absent() {
        let raw = parse_search(br#"{"query": "x", "topK": null}"#).unwrap();
        assert_eq!(raw.top_k, None);
    }
}
