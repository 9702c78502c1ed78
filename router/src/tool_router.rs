//! Routes that follow a hosted tool router's API (names and shapes of
//! `POST /api/v3.1/tool_router/session/{session_id}/search`), so a client of that service works by
//! changing its base URL: sessions (`POST /api/v3.1/tool_router/session`) tie a `trs_...` id to a
//! project and a user until they expire, and a search within a session is the multi-query search
//! ([`crate::tools::batch`]) answered in snake_case with `session`, `connection_details` and upper-case
//! `account_type` as the reference has them.
//!
//! A session's project is the token's `project` claim, else the `x-agentsearch-project` header,
//! else `tool_router.default_project` (the demo project under `serve`). Its user is the token's
//! user, or `user_id` of the body for a service caller. A search within it must come from a caller
//! of that project: a user token of that very user, or the service credential.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentsearch_common::auth::CallerKind;
use agentsearch_common::ids::{parse_project_id, truncate};
use agentsearch_common::{Error, principal};
use agentsearch_store::ToolRouterSession;
use axum::Router as AxumRouter;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use serde::Serialize;
use serde_json::Value;

use crate::agent::mcp::PROJECT_HEADER;
use crate::http::body::{BATCH_BODY_LIMIT, SEARCH_BODY_LIMIT, parse_object, parse_off_runtime};
use crate::http::{ApiError, Call, RestState};
use crate::json::from_json;
use crate::request::RequestContext;
use crate::tools::api::{ConnectedAccount, ToolResult, ToolkitConnectionStatus};
use crate::tools::batch::{BatchResponse, BatchResult, RawBatch, TimeInfo};
use crate::tools::connections::{rfc3339, validate_user_id};

/// Session ids: this prefix and 32 lowercase hex digits.
pub const SESSION_PREFIX: &str = "trs_";

const INSTRUCTIONS: &str = "Pass this session id as session_id to every later search and meta \
                            tool call of this task, so they share the session's user and \
                            connections.";

pub(crate) fn routes() -> AxumRouter<RestState> {
    AxumRouter::new()
        .route("/api/v3.1/tool_router/session", post(create_session))
        .route(
            "/api/v3.1/tool_router/session/{session_id}/search",
            post(search),
        )
}

/// The body of a session creation: `{}` (or nothing) or
/// `{"user_id": ...}`; the reference's other session fields are refused by name.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "SessionCreateRequest")]
pub struct RawSessionCreate {
    /// The session's user; only the service credential (or an anonymous caller where nothing is
    /// authenticated) may name one.
    pub user_id: Option<String>,
}

/// What a session creation answers.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SessionCreated {
    pub session_id: String,
    pub project_id: String,
    pub user_id: Option<String>,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub expires_at: String,
}

/// The tool router's search answer.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SessionSearch {
    pub success: bool,
    pub error: Option<String>,
    pub results: Vec<SessionResult>,
    pub toolkit_connection_statuses: Vec<SessionToolkit>,
    /// Each primary tool once, by name.
    pub tool_schemas: BTreeMap<String, SessionTool>,
    pub time_info: SessionTime,
    pub session: SessionInfo,
    pub next_steps_guidance: Vec<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SessionResult {
    pub index: u32,
    pub use_case: String,
    /// What a recommended plan says (its record and steps, its notes), then the catalog's
    /// guidance for the query's toolkits, when there is any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_guidance: Option<String>,
    /// The recommended plan's difficulty, e.g. `"easy - single-tool plan, succeeded 5 of 5 times"`:
    /// `easy`, `medium` or `hard` from its steps and recorded outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difficulty: Option<String>,
    /// The recommended plan's tools, in the order to run them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recommended_plan_steps: Option<Vec<String>>,
    /// The catalog's known pitfalls of the primary tools (`TOOL: text`), then the recommended
    /// plan's, when there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known_pitfalls: Option<Vec<String>>,
    pub primary_tool_slugs: Vec<String>,
    pub related_tool_slugs: Vec<String>,
    pub toolkits: Vec<String>,
    /// The recommended plan's id (`pln_...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SessionToolkit {
    pub toolkit: String,
    pub description: String,
    pub has_active_connection: bool,
    /// Only with an active connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_details: Option<ConnectionDetails>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_user_info: Option<Value>,
    /// `PRIVATE` or `SHARED`, of the default account, with an active connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_type: Option<String>,
    pub accounts: Vec<SessionAccount>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_selection: Option<&'static str>,
    pub status_message: String,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ConnectionDetails {
    /// The user's active accounts of the toolkit, default first.
    pub connected_account_ids: Vec<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SessionAccount {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_info: Option<Value>,
    pub status: String,
    pub created_at: String,
    pub is_default: bool,
    pub account_type: String,
}

/// A tool ready for an LLM, in snake_case.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SessionTool {
    pub slug: String,
    pub toolkit: String,
    pub description: String,
    /// JSON Schema of the arguments (hydrated for the session's user where the integration does).
    #[schemars(with = "serde_json::Value")]
    pub input_parameters: Box<serde_json::value::RawValue>,
    pub side_effect: &'static str,
    pub approval_required: bool,
    pub schema_source: &'static str,
    pub tokens: u32,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SessionTime {
    pub current_time_utc: String,
    pub current_time_utc_epoch_seconds: i64,
    pub message: String,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SessionInfo {
    pub id: String,
    pub generate_id: bool,
    pub instructions: &'static str,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A fresh session id.
fn new_session_id() -> String {
    format!("{SESSION_PREFIX}{}", uuid::Uuid::new_v4().simple())
}

/// Whether `id` has the shape of a session id (checked before any store read).
fn session_id_shape(id: &str) -> bool {
    id.strip_prefix(SESSION_PREFIX).is_some_and(|hex| {
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn upper(account_type: &str) -> String {
    account_type.to_ascii_uppercase()
}

impl crate::Router {
    /// Creates a session for `project_id` and `user_id` that expires after
    /// `tool_router.session_ttl_secs`.
    pub async fn create_session(
        &self,
        project_id: &str,
        user_id: Option<String>,
    ) -> agentsearch_common::Result<SessionCreated> {
        let created_at = now_ms();
        let ttl = Duration::from_secs(self.settings.tool_router.session_ttl_secs);
        let session = ToolRouterSession {
            id: new_session_id(),
            project_id: project_id.to_string(),
            user_id,
            created_at,
            expires_at: created_at + ttl.as_millis() as i64,
        };
        self.store.create_session(&session).await?;
        // Expired sessions go as new ones come: at most one sweep per creation.
        if let Err(err) = self.store.delete_expired_sessions(created_at).await {
            tracing::warn!(error = %err, "deleting expired tool router sessions failed");
        }
        Ok(SessionCreated {
            session_id: session.id,
            project_id: session.project_id,
            user_id: session.user_id,
            created_at: rfc3339(session.created_at),
            expires_at: rfc3339(session.expires_at),
        })
    }

    /// The live session `id`; `NOT_FOUND` for an unknown or expired one.
    pub async fn live_session(&self, id: &str) -> agentsearch_common::Result<ToolRouterSession> {
        let missing = || {
            Error::NotFound(format!(
                "no live tool router session `{}`: create one with POST /api/v3.1/tool_router/session",
                truncate(id, 64)
            ))
        };
        if !session_id_shape(id) {
            return Err(missing());
        }
        // Sessions never change once created: a cached one only needs its expiry checked.
        let session = match self.sessions.get(id) {
            Some(session) => Some(session),
            None => {
                let read = self.store.session(id).await?.map(std::sync::Arc::new);
                if let Some(session) = &read {
                    self.sessions.insert(id.to_string(), session.clone());
                }
                read
            }
        };
        match session {
            Some(session) if session.expires_at > now_ms() => Ok((*session).clone()),
            _ => Err(missing()),
        }
    }

    /// What the catalog says for each result (by index): the guidance of its toolkits, joined,
    /// and the known pitfalls of its primary tools, in their order.
    pub(crate) async fn result_notes(
        &self,
        project_id: &str,
        results: &[BatchResult],
    ) -> BTreeMap<u32, Notes> {
        let toolkits: Vec<String> = results
            .iter()
            .flat_map(|r| r.toolkits.iter().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if toolkits.is_empty() {
            return BTreeMap::new();
        }
        let infos = self.integration_infos(project_id, &toolkits).await;
        results
            .iter()
            .map(|r| {
                let guidance: Vec<String> = r
                    .toolkits
                    .iter()
                    .filter_map(|t| infos.get(t))
                    .filter(|i| !i.guidance.is_empty())
                    .map(|i| format!("{}: {}", i.integration, i.guidance))
                    .collect();
                let pitfalls: Vec<String> = r
                    .primary_tool_slugs
                    .iter()
                    .flat_map(|tool| {
                        infos
                            .values()
                            .filter_map(move |i| i.pitfalls.get(tool))
                            .flatten()
                            .map(move |p| format!("{tool}: {p}"))
                    })
                    .collect();
                let notes = Notes {
                    guidance: (!guidance.is_empty()).then(|| guidance.join("\n")),
                    pitfalls: (!pitfalls.is_empty()).then_some(pitfalls),
                };
                (r.index, notes)
            })
            .collect()
    }
}

/// What the catalog says for one result.
#[derive(Clone, Debug, Default)]
pub struct Notes {
    pub guidance: Option<String>,
    pub pitfalls: Option<Vec<String>>,
}

/// The batch answer in the tool router's shape.
pub fn session_search(
    batch: BatchResponse,
    session_id: &str,
    notes: &BTreeMap<u32, Notes>,
) -> SessionSearch {
    SessionSearch {
        success: batch.success,
        error: batch.error,
        results: batch
            .results
            .into_iter()
            .map(|r| session_result(r, notes))
            .collect(),
        toolkit_connection_statuses: batch
            .toolkit_connection_statuses
            .into_iter()
            .map(session_toolkit)
            .collect(),
        tool_schemas: batch
            .tool_schemas
            .into_iter()
            .map(|(name, tool)| (name, session_tool(tool)))
            .collect(),
        time_info: session_time(batch.time_info),
        session: SessionInfo {
            id: session_id.to_string(),
            generate_id: false,
            instructions: INSTRUCTIONS,
        },
        // The same steps, naming the fields as this shape spells them.
        next_steps_guidance: batch
            .next_steps_guidance
            .into_iter()
            .map(|step| step.replace("approvalRequired", "approval_required"))
            .collect(),
    }
}

/// One result in the tool router's shape: the catalog's notes for it and its recommended plan.
fn session_result(r: BatchResult, notes: &BTreeMap<u32, Notes>) -> SessionResult {
    let notes = notes.get(&r.index).cloned().unwrap_or_default();
    let mut guidance: Vec<String> = Vec::new();
    let mut pitfalls: Vec<String> = notes.pitfalls.unwrap_or_default();
    if let Some(plan) = &r.plan {
        guidance.push(plan.guidance());
        pitfalls.extend(plan.plan_pitfalls.iter().cloned());
    }
    guidance.extend(notes.guidance);
    let plan = r.plan;
    SessionResult {
        execution_guidance: (!guidance.is_empty()).then(|| guidance.join("\n")),
        difficulty: plan.as_ref().map(|p| p.difficulty.clone()),
        known_pitfalls: (!pitfalls.is_empty()).then_some(pitfalls),
        index: r.index,
        use_case: r.use_case,
        primary_tool_slugs: r.primary_tool_slugs,
        related_tool_slugs: r.related_tool_slugs,
        toolkits: r.toolkits,
        plan_id: plan.as_ref().map(|p| p.plan_id.clone()),
        recommended_plan_steps: plan.map(|p| p.recommended_plan_steps),
        error: r.error,
    }
}

fn session_toolkit(s: ToolkitConnectionStatus) -> SessionToolkit {
    let active: Vec<&ConnectedAccount> =
        s.accounts.iter().filter(|a| a.status == "active").collect();
    // Default first; an account is either default or not, so none comes twice.
    let connected: Vec<String> = active
        .iter()
        .filter(|a| a.is_default)
        .chain(active.iter().filter(|a| !a.is_default))
        .map(|a| a.id.clone())
        .collect();
    SessionToolkit {
        connection_details: s
            .has_active_connection
            .then_some(ConnectionDetails {
                connected_account_ids: connected,
            })
            .filter(|d| !d.connected_account_ids.is_empty()),
        account_type: s
            .account_type
            .as_deref()
            .filter(|_| s.has_active_connection)
            .map(upper),
        accounts: s
            .accounts
            .into_iter()
            .map(|a| SessionAccount {
                id: a.id,
                alias: a.alias,
                user_info: a.user_info,
                status: a.status,
                created_at: a.created_at,
                is_default: a.is_default,
                account_type: upper(&a.account_type),
            })
            .collect(),
        toolkit: s.toolkit,
        description: s.description,
        has_active_connection: s.has_active_connection,
        current_user_info: s.current_user_info,
        account_selection: s.account_selection,
        status_message: s.status_message,
    }
}

fn session_tool(t: ToolResult) -> SessionTool {
    SessionTool {
        slug: t.intent_name,
        toolkit: t.integration,
        description: t.tool.function.description,
        input_parameters: t.tool.function.parameters,
        side_effect: t.side_effect.as_str(),
        approval_required: t.approval_required,
        schema_source: t.schema_source,
        tokens: t.tokens,
    }
}

fn session_time(t: TimeInfo) -> SessionTime {
    SessionTime {
        current_time_utc: t.current_time_utc,
        current_time_utc_epoch_seconds: t.current_time_utc_epoch_seconds,
        message: t.message,
    }
}

/// The project a session creation is for: see the module docs.
fn session_project(state: &RestState, headers: &HeaderMap) -> Result<String, Error> {
    let authorization = agentsearch_common::auth::authorization_text(
        headers.get("authorization").map(|v| v.as_bytes()),
    )?;
    if let Some(project) = agentsearch_common::auth::claimed_project(authorization) {
        return parse_project_id("project", &project);
    }
    if let Some(value) = headers.get(PROJECT_HEADER) {
        let text = value.to_str().map_err(|_| {
            Error::invalid(PROJECT_HEADER, "must be a project id (a UUID)".to_string())
        })?;
        return parse_project_id(PROJECT_HEADER, text);
    }
    match &state.router.settings.tool_router.default_project {
        Some(project) => parse_project_id("tool_router.default_project", project),
        None => Err(Error::invalid(
            PROJECT_HEADER,
            format!(
                "no project: use a token with a `project` claim or send the {PROJECT_HEADER} header"
            ),
        )),
    }
}

async fn create_session(
    State(state): State<RestState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let project = session_project(&state, &headers)
        .map_err(|e| ApiError::new(e, crate::http::request_id(&headers)))?;
    let (call, project_id) = Call::begin(&state, &headers, &project)?;
    let body = call.body(&headers, body, SEARCH_BODY_LIMIT).await?;
    let names_users = names_users(&state, &call.ctx, &project_id);
    let user_id =
        session_user(&body, call.ctx.user.as_deref(), names_users).map_err(|e| call.fail(e))?;
    let created = state
        .router
        .create_session(&project_id, user_id)
        .await
        .map_err(|e| call.fail(e))?;
    Ok(call.ok(created))
}

/// Whether the caller may act for any user of the project: the service credential, or an
/// anonymous caller where nothing is authenticated at all (the loopback demo). An anonymous caller
/// of a project that merely allows anonymous requests may not.
fn names_users(state: &RestState, ctx: &RequestContext, project_id: &str) -> bool {
    match ctx.kind {
        CallerKind::ServiceToken => true,
        CallerKind::Anonymous => !state.auth.enabled() && !state.auth.has_project_keys(project_id),
        CallerKind::Jwt => false,
    }
}

/// The session's user: the token's, or `user_id` of the body from a caller that `names_users`
/// (an empty body is `{}`). Other session fields of the reference are refused by name: nothing
/// here would apply them.
fn session_user(
    body: &[u8],
    caller: Option<&str>,
    names_users: bool,
) -> Result<Option<String>, Error> {
    let object = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Map::new()
    } else {
        parse_object(body)?
    };
    for key in object.keys() {
        if key != "user_id" {
            return Err(Error::invalid(
                truncate(key, 64),
                "not supported: a session here holds its project and user only (restrict tools \
                 per search with the multi-query search's fields instead)"
                    .to_string(),
            ));
        }
    }
    let given = match object.get("user_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(user)) => {
            validate_user_id("user_id", user)?;
            Some(principal::key(user))
        }
        Some(_) => return Err(Error::invalid("user_id", "must be a string".to_string())),
    };
    match (caller, given) {
        (Some(caller), Some(given)) if !principal::same(caller, &given) => {
            Err(Error::PermissionDenied(format!(
                "a user token creates sessions for its own user only, not `{}`",
                truncate(&given, 64)
            )))
        }
        (Some(caller), _) => Ok(Some(principal::key(caller))),
        (None, Some(_)) if !names_users => Err(Error::PermissionDenied(
            "only the service credential creates sessions for a named user".into(),
        )),
        (None, given) => Ok(given),
    }
}

/// Authenticates the caller of a session search before its session is read, so a request that
/// no project would accept never reaches the metadata store (nor learns whether a session id is
/// live): against the project the caller names as session creation finds it (the token's
/// `project` claim, the `x-agentsearch-project` header, `tool_router.default_project`) or, when
/// nothing names one, against the static token when one is configured. The session's own project
/// authenticates the caller again once it is known.
fn authenticate_before_lookup(state: &RestState, headers: &HeaderMap) -> Result<(), Error> {
    let authorization = agentsearch_common::auth::authorization_text(
        headers.get("authorization").map(|v| v.as_bytes()),
    )?;
    match session_project(state, headers) {
        Ok(project) => state.auth.authenticate(authorization, &project).map(|_| ()),
        Err(_) => state.auth.check(authorization),
    }
}

async fn search(
    State(state): State<RestState>,
    Path(session_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let early = |e: Error| ApiError::new(e, crate::http::request_id(&headers));
    authenticate_before_lookup(&state, &headers).map_err(early)?;
    let session = state
        .router
        .live_session(&session_id)
        .await
        .map_err(early)?;
    let (call, project_id) = Call::begin(&state, &headers, &session.project_id)?;
    // A user's session: that user's token, or a caller acting for any user. A session without a
    // user: any caller of its project.
    let allowed = match (&session.user_id, call.ctx.user.as_deref()) {
        (None, _) => true,
        (Some(owner), Some(caller)) => principal::same(owner, caller),
        (Some(_), None) => names_users(&state, &call.ctx, &project_id),
    };
    if !allowed {
        return Err(call.fail(Error::PermissionDenied(
            "this session belongs to another user".into(),
        )));
    }
    let body = call.body(&headers, body, BATCH_BODY_LIMIT).await?;
    let request = parse_off_runtime(body, move |body| {
        let raw: RawBatch = from_json(body)?;
        raw.validate(project_id)
    })
    .await
    .map_err(|e| call.fail(e))?;
    // The session's user's connections, whoever of the project calls.
    let ctx = RequestContext {
        user: session.user_id.clone(),
        ..call.ctx.clone()
    };
    let project = request.project_id.clone();
    let batch = state
        .router
        .search_batch(request, &ctx)
        .await
        .map_err(|e| call.fail(e))?;
    let notes = state.router.result_notes(&project, &batch.results).await;
    Ok(call.ok(session_search(batch, &session.id, &notes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_have_one_shape() {
        let id = new_session_id();
        assert!(session_id_shape(&id), "{id}");
        assert!(!session_id_shape("trs_"));
        assert!(!session_id_shape(&id.to_uppercase()));
        assert!(!session_id_shape(&format!("{id}0")));
        assert!(!session_id_shape(&id.replace("trs_", "trx_")));
    }

    #[test]
    fn a_session_belongs_to_the_token_user_or_to_the_user_a_service_names() {
        assert_eq!(
            session_user(b"", Some("ann"), false).unwrap(),
            Some("ann".into())
        );
        assert_eq!(session_user(b"{}", None, false).unwrap(), None);
        assert_eq!(
            session_user(br#"{"user_id": "Bob@Example.com"}"#, None, true).unwrap(),
            Some("bob@example.com".into())
        );
        // An anonymous caller of a project that allows them names nobody.
        assert!(matches!(
            session_user(br#"{"user_id": "bob"}"#, None, false),
            Err(Error::PermissionDenied(_))
        ));
        assert_eq!(
            session_user(br#"{"user_id": "ANN"}"#, Some("ann"), false).unwrap(),
            Some("ann".into())
        );
        assert!(matches!(
            session_user(br#"{"user_id": "bob"}"#, Some("ann"), true),
            Err(Error::PermissionDenied(_))
        ));
        let Err(Error::InvalidArgument { violations, .. }) =
            session_user(br#"{"toolkits": ["gmail"]}"#, None, true)
        else {
            panic!("an unsupported field was accepted");
        };
        assert_eq!(violations[0].field, "toolkits");
        assert!(session_user(br#"{"user_id": 7}"#, None, true).is_err());
    }

    #[test]
    fn account_types_and_connection_details_follow_the_reference() {
        let status = ToolkitConnectionStatus {
            toolkit: "gmail".into(),
            description: "Email".into(),
            has_active_connection: true,
            accounts: vec![
                ConnectedAccount {
                    id: "ca_2".into(),
                    alias: None,
                    user_info: None,
                    status: "active".into(),
                    created_at: "2026-01-01T00:00:00.000Z".into(),
                    is_default: false,
                    account_type: "shared".into(),
                },
                ConnectedAccount {
                    id: "ca_1".into(),
                    alias: Some("work".into()),
                    user_info: None,
                    status: "active".into(),
                    created_at: "2026-01-01T00:00:00.000Z".into(),
                    is_default: true,
                    account_type: "private".into(),
                },
            ],
            account_selection: Some("required"),
            status_message: "2 active gmail accounts".into(),
            account_type: Some("private".into()),
            current_user_info: None,
        };
        let kit = serde_json::to_value(session_toolkit(status)).unwrap();
        assert_eq!(kit["account_type"], "PRIVATE");
        assert_eq!(kit["accounts"][0]["account_type"], "SHARED");
        assert_eq!(
            kit["connection_details"]["connected_account_ids"],
            serde_json::json!(["ca_1", "ca_2"])
        );
        assert_eq!(kit["account_selection"], "required");
    }
}
