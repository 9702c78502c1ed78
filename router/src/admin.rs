//! Operator routes under `/admin` (what `agentsearch admin` calls): where every integration and
//! sync is and how healthy its replicas are, drains, rebalances, lost-key reports. They need the
//! deployment's static token (as the shards' API does); without one configured they are open,
//! which the bind check allows on loopback only.

use agentsearch_common::Error;
use axum::Router as AxumRouter;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{delete, get, post};
use serde_json::Value;

use crate::http::body::{parse_object, read_body, reject_unknown};
use crate::http::{ApiError, Call, RestState};

/// Body limit of an admin request (a few flags).
const ADMIN_BODY_LIMIT: usize = 16 * 1024;

pub fn routes() -> AxumRouter<RestState> {
    AxumRouter::new()
        .route("/admin/placements", get(placements))
        .route("/admin/drains", post(drain))
        .route("/admin/drains/{shard_id}", delete(undrain))
        .route("/admin/rebalance", post(rebalance))
        .route("/admin/lost", delete(clear_lost))
}

/// Authenticates an operator: the static token.
fn begin(state: &RestState, headers: &HeaderMap) -> Result<Call, ApiError> {
    let call = Call::operator(headers);
    let authorization = agentsearch_common::auth::authorization_text(
        headers.get("authorization").map(|v| v.as_bytes()),
    )
    .map_err(|e| call.fail(e))?;
    state.auth.check(authorization).map_err(|e| call.fail(e))?;
    Ok(call)
}

/// Reads an optional JSON object body, refusing keys other than `known`.
async fn object(
    call: &Call,
    headers: &HeaderMap,
    body: Body,
    known: &[&str],
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let bytes = read_body(headers, body, ADMIN_BODY_LIMIT)
        .await
        .map_err(|e| call.fail(e))?;
    if bytes.is_empty() {
        return Ok(serde_json::Map::new());
    }
    let object = parse_object(&bytes).map_err(|e| call.fail(e))?;
    reject_unknown(&object, known).map_err(|e| call.fail(e))?;
    Ok(object)
}

fn flag(
    call: &Call,
    object: &serde_json::Map<String, Value>,
    name: &str,
) -> Result<bool, ApiError> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(call.fail(Error::invalid(name, "must be a boolean"))),
    }
}

/// `GET /admin/placements`.
async fn placements(
    State(state): State<RestState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let call = begin(&state, &headers)?;
    let view = state
        .router
        .placements_view()
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(view))
}

/// `POST /admin/drains` `{"shardId": "...", "lost": false}`.
async fn drain(
    State(state): State<RestState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = begin(&state, &headers)?;
    let object = object(&call, &headers, body, &["shardId", "lost"]).await?;
    let shard_id = match object.get("shardId") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(Value::String(_)) => {
            return Err(call.fail(Error::invalid("shardId", "must not be empty")));
        }
        Some(_) => return Err(call.fail(Error::invalid("shardId", "must be a string"))),
        None => return Err(call.fail(Error::invalid("shardId", "is required"))),
    };
    let lost = flag(&call, &object, "lost")?;
    let view = state
        .router
        .drain_shard(&shard_id, lost)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(view))
}

/// `DELETE /admin/drains/{shardId}`: the shard takes placements again.
async fn undrain(
    State(state): State<RestState>,
    Path(shard_id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let call = begin(&state, &headers)?;
    let had = state
        .router
        .undrain_shard(&shard_id)
        .await
        .map_err(|e| call.fail(e))?;
    if !had {
        return Err(call.fail(Error::NotFound(format!(
            "shard `{shard_id}` is not being drained"
        ))));
    }
    Ok(call.ok(serde_json::json!({"shardId": shard_id, "draining": false})))
}

/// `POST /admin/rebalance` `{"dryRun": false}`: the planned moves.
async fn rebalance(
    State(state): State<RestState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = begin(&state, &headers)?;
    let object = object(&call, &headers, body, &["dryRun"]).await?;
    let dry_run = flag(&call, &object, "dryRun")?;
    let moves = state
        .router
        .rebalance(dry_run)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(serde_json::json!({"dryRun": dry_run, "moves": moves})))
}

/// `DELETE /admin/lost`: forgets the lost-key reports.
async fn clear_lost(
    State(state): State<RestState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let call = begin(&state, &headers)?;
    let cleared = state.router.clear_lost().await.map_err(|e| call.fail(e))?;
    Ok(call.ok(serde_json::json!({"cleared": cleared})))
}
