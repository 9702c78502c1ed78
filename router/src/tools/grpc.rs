//! The public gRPC adapters: `agentsearch.v1.ToolSearch` and `agentsearch.v1.ToolCatalog`.
//! Each method: authenticate, convert, validate, call the [`Router`], map the error.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;

use agentsearch_common::tool::ToolDefinition;
use agentsearch_common::{Error, FieldViolation};
use agentsearch_proto::status_from_error;
use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::tool_catalog_server::ToolCatalog;
use agentsearch_proto::v1::tool_search_server::ToolSearch;
use futures::Stream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use crate::Router;
use crate::grpc::{Begun, PublicGrpc};
use crate::tools::api::Int;
use crate::tools::api::{
    ConnectedAccount, NearMiss, RawSearch, ToolResult, ToolSearchResponse, ToolkitConnectionStatus,
    Usage,
};
use crate::tools::batch::{RawBatch, RawBatchQuery, RawCustomTool, RawCustomToolkit};
use crate::tools::catalog::PreparedBatch;
use crate::tools::connections::{RawConnection, validate_connections};
use crate::tools::proto::{explain_to_proto, raw_query_embedding};
use agentsearch_proto::v1::connections_server::Connections;

impl Begun {
    /// Authenticates the caller for a call on `user_id`'s data: `userId` must be valid, and a user
    /// token may only act on its own user (service and anonymous callers on any).
    #[allow(clippy::result_large_err)]
    pub(crate) fn authorize_user(&self, project_id: &str, user_id: &str) -> Result<String, Status> {
        let (project_id, ctx) = self.authorize(project_id)?;
        crate::tools::connections::check_user(ctx.user.as_deref(), user_id)
            .map_err(|e| status_from_error(&e, &self.request_id))?;
        Ok(project_id)
    }
}

#[tonic::async_trait]
impl ToolSearch for PublicGrpc {
    async fn search_tools(
        &self,
        request: Request<pb::SearchToolsRequest>,
    ) -> Result<Response<pb::SearchToolsResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let (project_id, ctx) = begun.authorize(&r.project_id)?;
        if r.query_json.is_some() && !r.query.is_empty() {
            return Err(fail(Error::invalid(
                "query",
                "give `query` or `queryJson`, not both",
            )));
        }
        let query_document = match r.query_json.as_deref() {
            None => None,
            Some(text) => Some(
                serde_json::from_str::<serde_json::Value>(text).map_err(|e| {
                    fail(Error::invalid(
                        "queryJson",
                        format!("is not valid JSON: {e}"),
                    ))
                })?,
            ),
        };
        let raw = RawSearch {
            query: (query_document.is_none()).then_some(r.query),
            query_document,
            top_k: r.top_k.map(Int::from),
            max_tool_tokens: r.max_tool_tokens.map(Int::from),
            integrations: (!r.integrations.is_empty()).then_some(r.integrations),
            categories: (!r.categories.is_empty()).then_some(r.categories),
            max_side_effect: r.max_side_effect,
            connected_only: Some(r.connected_only),
            rerank: r.rerank,
            mode: r.mode,
            diagnostics: r.diagnostics,
            query_embedding: r.query_embedding.map(raw_query_embedding),
        };
        let validated = raw.validate(project_id).map_err(fail)?;
        let response = self
            .router()
            .search_tools(validated, &ctx)
            .await
            .map_err(fail)?;
        let mut reply = Response::new(to_proto(response));
        if let Ok(v) = request_id.parse() {
            reply.metadata_mut().insert("x-request-id", v);
        }
        Ok(reply)
    }

    async fn search_tools_batch(
        &self,
        request: Request<pb::SearchToolsBatchRequest>,
    ) -> Result<Response<pb::SearchToolsBatchResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let (project_id, ctx) = begun.authorize(&r.project_id)?;
        let mut violations = Vec::new();
        let custom_tools = r
            .custom_tools
            .into_iter()
            .enumerate()
            .map(|(i, t)| custom_from_proto(&format!("customTools[{i}]"), t, &mut violations))
            .collect();
        let custom_toolkits = r
            .custom_toolkits
            .into_iter()
            .enumerate()
            .map(|(i, k)| RawCustomToolkit {
                slug: Some(k.slug),
                name: Some(k.name),
                description: Some(k.description),
                preload: k.preload,
                tools: k
                    .tools
                    .into_iter()
                    .enumerate()
                    .map(|(j, t)| {
                        custom_from_proto(
                            &format!("customToolkits[{i}].tools[{j}]"),
                            t,
                            &mut violations,
                        )
                    })
                    .collect(),
            })
            .collect();
        if !violations.is_empty() {
            return Err(fail(Error::invalid_many(violations)));
        }
        let raw = RawBatch {
            queries: Some(
                r.queries
                    .into_iter()
                    .map(|q| RawBatchQuery {
                        use_case: Some(q.use_case),
                        known_fields: q.known_fields,
                    })
                    .collect(),
            ),
            top_k: r.top_k.map(Int::from),
            max_tool_tokens: r.max_tool_tokens.map(Int::from),
            budget_scope: r.budget_scope,
            integrations: (!r.integrations.is_empty()).then_some(r.integrations),
            categories: (!r.categories.is_empty()).then_some(r.categories),
            max_side_effect: r.max_side_effect,
            connected_only: Some(r.connected_only),
            rerank: r.rerank,
            related_k: r.related_k.map(Int::from),
            model: r.model,
            mode: None,
            custom_tools,
            custom_toolkits,
            experimental: None,
            diagnostics: r.diagnostics,
        };
        let validated = raw.validate(project_id).map_err(fail)?;
        let response = self
            .router()
            .search_batch(validated, &ctx)
            .await
            .map_err(fail)?;
        Ok(Response::new(pb::SearchToolsBatchResponse {
            success: response.success,
            error: response.error,
            results: response
                .results
                .into_iter()
                .map(|b| {
                    let plan = b.plan;
                    pb::BatchResult {
                        index: b.index,
                        use_case: b.use_case,
                        primary_tool_slugs: b.primary_tool_slugs,
                        related_tool_slugs: b.related_tool_slugs,
                        toolkits: b.toolkits,
                        error: b.error,
                        usage: b.usage.map(usage_to_proto),
                        plan_id: plan.as_ref().map(|p| p.plan_id.clone()),
                        difficulty: plan.as_ref().map(|p| p.difficulty.clone()),
                        plan_notes: plan
                            .as_ref()
                            .map(|p| p.plan_notes.clone())
                            .filter(|n| !n.is_empty()),
                        plan_pitfalls: plan
                            .as_ref()
                            .map(|p| p.plan_pitfalls.clone())
                            .unwrap_or_default(),
                        recommended_plan_steps: plan
                            .map(|p| p.recommended_plan_steps)
                            .unwrap_or_default(),
                    }
                })
                .collect(),
            toolkit_connection_statuses: response
                .toolkit_connection_statuses
                .into_iter()
                .map(status_to_proto)
                .collect(),
            tool_schemas: response
                .tool_schemas
                .into_iter()
                .map(|(name, t)| (name, tool_to_proto(t)))
                .collect(),
            usage: Some(pb::BatchUsage {
                budget_scope: response.usage.budget_scope.to_string(),
                tools: response.usage.tools,
                tool_tokens: response.usage.tool_tokens,
                custom_tools: response.usage.custom_tools,
            }),
            time_info: Some(pb::TimeInfo {
                current_time_utc: response.time_info.current_time_utc,
                current_time_utc_epoch_seconds: response.time_info.current_time_utc_epoch_seconds,
                message: response.time_info.message,
            }),
            trace: response.trace.map(trace_to_proto),
            next_steps_guidance: response.next_steps_guidance,
        }))
    }

    async fn get_tool(
        &self,
        request: Request<pb::GetToolRequest>,
    ) -> Result<Response<pb::GetToolResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let r = request.into_inner();
        let (project_id, ctx) = begun.authorize(&r.project_id)?;
        let response = self
            .router()
            .get_tool(&project_id, &r.name, &ctx)
            .await
            .map_err(|e| status_from_error(&e, &request_id))?;
        Ok(Response::new(pb::GetToolResponse {
            tool: Some(tool_to_proto(response.tool)),
            degraded: response.degraded.map(str::to_string),
            connection: Some(status_to_proto(response.connection)),
        }))
    }

    async fn record_tool_feedback(
        &self,
        request: Request<pb::ToolFeedbackRequest>,
    ) -> Result<Response<pb::ToolFeedbackResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let r = request.into_inner();
        let (project_id, ctx) = begun.authorize(&r.project_id)?;
        let outcome = self
            .router()
            .feedback(
                crate::tools::feedback::TOOLS,
                &project_id,
                ctx.user.as_deref(),
                &r.request_id,
                r.called_tools,
            )
            .await
            .map_err(|e| status_from_error(&e, &request_id))?;
        Ok(Response::new(pb::ToolFeedbackResponse {
            examples: outcome.examples,
            ranking_model: outcome.ranking_model,
        }))
    }

    async fn get_tool_query_schema(
        &self,
        request: Request<pb::GetQuerySchemaRequest>,
    ) -> Result<Response<pb::QuerySchemaResponse>, Status> {
        let begun = self.begin(&request);
        let r = request.into_inner();
        begun.authorize(&r.project_id)?;
        let schema = agentsearch_query::schema(agentsearch_query::Catalog::tools());
        Ok(Response::new(pb::QuerySchemaResponse {
            schema_json: schema.to_string(),
        }))
    }
}

/// A custom tool from the wire; its JSON texts are parsed here, errors named by `path`.
fn custom_from_proto(
    path: &str,
    t: pb::CustomTool,
    violations: &mut Vec<FieldViolation>,
) -> RawCustomTool {
    let mut json = |field: &str, text: Option<String>| {
        let text = text.filter(|t| !t.trim().is_empty())?;
        if text.len() > 4 * crate::tools::batch::MAX_CUSTOM_SCHEMA_BYTES {
            // Far over the cap even with whitespace: refused without parsing.
            violations.push(FieldViolation::new(
                format!("{path}.{field}"),
                format!(
                    "must be at most {} KiB as compact JSON, got {} bytes of text",
                    crate::tools::batch::MAX_CUSTOM_SCHEMA_BYTES / 1024,
                    text.len()
                ),
            ));
            return None;
        }
        match serde_json::from_str(&text) {
            Ok(value) => Some(value),
            Err(e) => {
                violations.push(FieldViolation::new(
                    format!("{path}.{field}"),
                    format!("is not valid JSON: {e}"),
                ));
                None
            }
        }
    };
    RawCustomTool {
        input_schema: json("inputSchema", Some(t.input_schema_json)),
        output_schema: json("outputSchema", t.output_schema_json),
        slug: Some(t.slug),
        name: Some(t.name),
        description: Some(t.description),
        extends_toolkit: t.extends_toolkit,
        preload: t.preload,
        side_effect: t.side_effect,
    }
}

#[tonic::async_trait]
impl Connections for PublicGrpc {
    async fn upsert_connections(
        &self,
        request: Request<pb::UpsertConnectionsRequest>,
    ) -> Result<Response<pb::ConnectionsResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let project_id = begun.authorize_user(&r.project_id, &r.user_id)?;
        let mut violations = Vec::new();
        let raw: Vec<RawConnection> = r
            .connections
            .into_iter()
            .enumerate()
            .map(|(i, c)| RawConnection {
                user_info: c
                    .user_info_json
                    .filter(|t| !t.trim().is_empty())
                    .and_then(|t| {
                        serde_json::from_str(&t)
                            .map_err(|e| {
                                violations.push(FieldViolation::new(
                                    format!("connections[{i}].userInfo"),
                                    format!("is not valid JSON: {e}"),
                                ))
                            })
                            .ok()
                    }),
                integration: Some(c.integration),
                account_id: Some(c.account_id),
                alias: c.alias,
                status: c.status,
                account_type: c.account_type,
                is_default: Some(c.is_default),
            })
            .collect();
        if !violations.is_empty() {
            return Err(fail(Error::invalid_many(violations)));
        }
        let inputs = validate_connections(raw).map_err(fail)?;
        let toolkits = self
            .router()
            .upsert_connections(&project_id, &r.user_id, inputs)
            .await
            .map_err(fail)?;
        Ok(Response::new(pb::ConnectionsResponse {
            toolkits: toolkits.into_iter().map(status_to_proto).collect(),
        }))
    }

    async fn list_connections(
        &self,
        request: Request<pb::ListConnectionsRequest>,
    ) -> Result<Response<pb::ConnectionsResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let project_id = begun.authorize_user(&r.project_id, &r.user_id)?;
        let toolkits = self
            .router()
            .list_connections(&project_id, &r.user_id, &r.integrations)
            .await
            .map_err(fail)?;
        Ok(Response::new(pb::ConnectionsResponse {
            toolkits: toolkits.into_iter().map(status_to_proto).collect(),
        }))
    }

    async fn delete_connection(
        &self,
        request: Request<pb::DeleteConnectionRequest>,
    ) -> Result<Response<pb::DeleteConnectionResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let project_id = begun.authorize_user(&r.project_id, &r.user_id)?;
        let deleted = self
            .router()
            .delete_connection(&project_id, &r.user_id, &r.integration, &r.account_id)
            .await
            .map_err(fail)?;
        Ok(Response::new(pb::DeleteConnectionResponse { deleted }))
    }
}

fn status_to_proto(s: ToolkitConnectionStatus) -> pb::ToolkitConnectionStatus {
    pb::ToolkitConnectionStatus {
        toolkit: s.toolkit,
        description: s.description,
        has_active_connection: s.has_active_connection,
        accounts: s.accounts.into_iter().map(account_to_proto).collect(),
        account_selection: s.account_selection.map(str::to_string),
        status_message: s.status_message,
        account_type: s.account_type,
        current_user_info_json: s.current_user_info.map(|v| v.to_string()),
    }
}

fn account_to_proto(a: ConnectedAccount) -> pb::ConnectedAccount {
    pb::ConnectedAccount {
        id: a.id,
        alias: a.alias,
        user_info_json: a.user_info.map(|v| v.to_string()),
        status: a.status,
        created_at: a.created_at,
        is_default: a.is_default,
        account_type: a.account_type,
    }
}

fn near_miss_to_proto(m: NearMiss) -> pb::NearMiss {
    pb::NearMiss {
        intent_name: m.intent_name,
        integration: m.integration,
        reason: m.reason.to_string(),
        rank: m.rank,
        tokens: m.tokens,
    }
}

fn trace_to_proto(t: crate::tools::api::Trace) -> pb::Trace {
    pb::Trace {
        total_ms: t.total_ms,
        steps: t
            .steps
            .into_iter()
            .map(|s| pb::TraceStep {
                label: s.label,
                duration_ms: s.duration_ms,
            })
            .collect(),
    }
}

fn tool_to_proto(t: ToolResult) -> pb::ToolResult {
    pb::ToolResult {
        intent_name: t.intent_name,
        integration: t.integration,
        category: t.category,
        side_effect: t.side_effect.as_str().to_string(),
        approval_required: t.approval_required,
        schema_source: t.schema_source.to_string(),
        relevancy: t.relevancy,
        tool: Some(pb::ModelTool {
            r#type: t.tool.kind.to_string(),
            function: Some(pb::FunctionDefinition {
                name: t.tool.function.name,
                description: t.tool.function.description,
                parameters_json: t.tool.function.parameters.get().to_string(),
            }),
        }),
        tokens: t.tokens,
        explain: t.explain.map(explain_to_proto),
        catalog_version: t.catalog_version,
        highlights: t.highlights.unwrap_or_default(),
        rerank_score: t.rerank_score,
    }
}

fn usage_to_proto(u: Usage) -> pb::Usage {
    pb::Usage {
        strategy: u.strategy.to_string(),
        candidates: u.candidates,
        returned: u.returned,
        tool_tokens: u.tool_tokens,
        omitted_for_budget: u.omitted_for_budget,
        omitted_for_side_effect: u.omitted_for_side_effect,
        omitted_for_top_k: u.omitted_for_top_k,
        hydrated_integrations: u.hydrated_integrations,
        degraded: u.degraded.map(str::to_string),
        visibility: Some(pb::Visibility {
            mode: u.visibility.mode.to_string(),
            entitled_integrations: u.visibility.entitled_integrations,
            candidates_before_filter: u.visibility.candidates_before_filter,
            candidates_after_filter: u.visibility.candidates_after_filter,
        }),
        mode: u.mode.to_string(),
        omitted_not_connected: u.omitted_not_connected,
        near_misses: u.near_misses.into_iter().map(near_miss_to_proto).collect(),
        partial: u.partial,
        failed_integrations: u.failed_integrations,
        degradations: u.degradations.into_iter().map(str::to_string).collect(),
        ranking_model: u.ranking_model,
        matched: u.matched,
        rerank_outcome: u.rerank_outcome.to_string(),
    }
}

fn to_proto(r: ToolSearchResponse) -> pb::SearchToolsResponse {
    pb::SearchToolsResponse {
        tools: r.tools.into_iter().map(tool_to_proto).collect(),
        search_query: r.search_query,
        errors: r
            .errors
            .into_iter()
            .map(|e| pb::SearchError {
                integration: e.integration,
                code: e.code,
                message: e.message,
            })
            .collect(),
        usage: Some(usage_to_proto(r.usage)),
        trace: r.trace.map(trace_to_proto),
        toolkit_connection_statuses: r
            .toolkit_connection_statuses
            .into_iter()
            .map(status_to_proto)
            .collect(),
    }
}

/// Converts a wire tool (index `i` of its batch) to a definition; JSON errors name the field.
pub fn definition_from_proto(
    i: usize,
    t: pb::ToolDefinition,
) -> Result<ToolDefinition, FieldViolation> {
    let side_effect = match t.side_effect.as_str() {
        "" => None,
        s => Some(
            s.parse()
                .map_err(|issue| FieldViolation::new(format!("tools[{i}].sideEffect"), issue))?,
        ),
    };
    let parameters = match t.parameters_json.trim() {
        "" => None,
        json => Some(serde_json::from_str(json).map_err(|e| {
            FieldViolation::new(
                format!("tools[{i}].parameters"),
                format!("is not valid JSON: {e}"),
            )
        })?),
    };
    Ok(ToolDefinition {
        name: t.name,
        integration: t.integration,
        category: (!t.category.is_empty()).then_some(t.category),
        side_effect,
        description: t.description,
        parameters,
    })
}

/// Converts and validates one streamed batch, then prepares it (embedding included).
async fn prepare(
    router: &Router,
    begun: &Begun,
    message: pb::UpsertToolsRequest,
    in_flight: &HashSet<String>,
) -> Result<PreparedBatch, Error> {
    let project_id = begun.authenticate_service(&message.project_id)?;
    let mut defs = Vec::with_capacity(message.tools.len());
    let mut violations = Vec::new();
    for (i, t) in message.tools.into_iter().enumerate() {
        match definition_from_proto(i, t) {
            Ok(d) => defs.push(d),
            Err(v) => violations.push(v),
        }
    }
    if !violations.is_empty() {
        return Err(Error::invalid_many(violations));
    }
    router.prepare_upsert(&project_id, defs, in_flight).await
}

type AckStream = Pin<Box<dyn Stream<Item = Result<pb::UpsertToolsResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ToolCatalog for PublicGrpc {
    type UpsertToolsStream = AckStream;

    async fn upsert_tools(
        &self,
        request: Request<Streaming<pb::UpsertToolsRequest>>,
    ) -> Result<Response<AckStream>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let mut incoming = request.into_inner();
        let router = self.router().clone();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        // Two stages: a reader validates and embeds batch n+1 while a writer writes batch n; the
        // writer acknowledges each batch as soon as it is durably indexed, in order. Names of
        // batches handed to the writer and not yet written are "in flight": the reader treats them
        // as changed, since the ledger it reads does not reflect those batches yet.
        let (prepared_tx, mut prepared_rx) =
            tokio::sync::mpsc::channel::<Result<PreparedBatch, Status>>(1);
        let in_flight: Arc<parking_lot::Mutex<HashMap<String, usize>>> = Arc::default();
        let reader = {
            let (router, request_id, in_flight, begun) = (
                router.clone(),
                request_id.clone(),
                in_flight.clone(),
                begun.clone(),
            );
            async move {
                while let Some(message) = incoming.next().await {
                    let prepared = match message {
                        Err(status) => Err(status),
                        Ok(message) => {
                            let busy: HashSet<String> = in_flight.lock().keys().cloned().collect();
                            prepare(&router, &begun, message, &busy)
                                .await
                                .map_err(|e| status_from_error(&e, &request_id))
                        }
                    };
                    if let Ok(batch) = &prepared {
                        let mut in_flight = in_flight.lock();
                        for name in batch.names() {
                            *in_flight.entry(name.to_string()).or_default() += 1;
                        }
                    }
                    let failed = prepared.is_err();
                    if prepared_tx.send(prepared).await.is_err() || failed {
                        return;
                    }
                }
            }
        };
        let writer = async move {
            let mut total = 0u64;
            while let Some(prepared) = prepared_rx.recv().await {
                let ack = match prepared {
                    Err(status) => Err(status),
                    Ok(batch) => {
                        let names: Vec<String> = batch.names().map(str::to_string).collect();
                        let outcome = router.write_upsert(batch, &request_id).await;
                        let mut in_flight = in_flight.lock();
                        for name in names {
                            if let Some(count) = in_flight.get_mut(&name) {
                                *count -= 1;
                                if *count == 0 {
                                    in_flight.remove(&name);
                                }
                            }
                        }
                        drop(in_flight);
                        outcome
                            .map_err(|e| status_from_error(&e, &request_id))
                            .map(|o| {
                                total += u64::from(o.upserted + o.unchanged);
                                pb::UpsertToolsResponse {
                                    upserted: o.upserted,
                                    unchanged: o.unchanged,
                                    total,
                                }
                            })
                    }
                };
                let failed = ack.is_err();
                if tx.send(ack).await.is_err() || failed {
                    return;
                }
            }
        };
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            tokio::join!(reader, writer);
        }));
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn delete_tools(
        &self,
        request: Request<pb::DeleteToolsRequest>,
    ) -> Result<Response<pb::DeleteToolsResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let project_id = begun.authorize_service(&r.project_id)?;
        let outcome = self
            .router()
            .delete_tools(&project_id, r.names, &request_id)
            .await
            .map_err(fail)?;
        Ok(Response::new(pb::DeleteToolsResponse {
            deleted: outcome.deleted,
            not_found: outcome.not_found,
            plans_deleted: outcome.plans_deleted,
        }))
    }
}
