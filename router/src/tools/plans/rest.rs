//! The REST/JSON routes of recorded plans ([`crate::tools::plans`]), for the project's services (the
//! service credential, like catalog writes): `POST .../plans` records an outcome of a plan,
//! `GET .../plans` lists them, `DELETE .../plans/{planId}` deletes one.

use axum::Router as AxumRouter;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{delete, post};

use crate::http::body::{PLAN_BODY_LIMIT, parse_off_runtime};
use crate::http::types::Deleted;
use crate::http::{ApiError, Call, RestState};
use crate::json::from_json;
use crate::tools::plans::RawPlan;

pub(crate) fn routes() -> AxumRouter<RestState> {
    AxumRouter::new()
        .route(
            "/api/tools/projects/{project_id}/plans",
            post(record_plan).get(list_plans),
        )
        .route(
            "/api/tools/projects/{project_id}/plans/{plan_id}",
            delete(delete_plan),
        )
}

async fn record_plan(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    let body = call.body(&headers, body, PLAN_BODY_LIMIT).await?;
    let plan = parse_off_runtime(body, |body| from_json::<RawPlan>(body)?.validate())
        .await
        .map_err(|e| call.fail(e))?;
    let recorded = state
        .router
        .record_plan(&project_id, plan)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(recorded))
}

async fn list_plans(
    State(state): State<RestState>,
    Path(project_id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    let plans = state
        .router
        .list_plans(&project_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(Plans { plans }))
}

async fn delete_plan(
    State(state): State<RestState>,
    Path((project_id, plan_id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (call, project_id) = Call::begin(&state, &headers, &project_id)?;
    call.ctx.require_service().map_err(|e| call.fail(e))?;
    state
        .router
        .delete_plan(&project_id, &plan_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(Deleted { deleted: true }))
}

#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Plans {
    pub plans: Vec<crate::tools::plans::PlanDetail>,
}
