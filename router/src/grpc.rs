//! The public gRPC adapters: `agentsearch.v1.ToolSearch` and `agentsearch.v1.ToolCatalog`.
//! Each method: authenticate, convert, validate, call the [`Router`], map the error.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;

use agentsearch_common::ids::parse_project_id;
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
use crate::api::{RawSearch, ToolSearchResponse};
use crate::auth::Auth;
use crate::catalog::PreparedBatch;

#[derive(Clone)]
pub struct PublicGrpc {
    router: Arc<Router>,
    auth: Auth,
}

impl PublicGrpc {
    pub fn new(router: Arc<Router>, auth: Auth) -> Self {
        Self { router, auth }
    }

    pub(crate) fn router(&self) -> &Arc<Router> {
        &self.router
    }

    /// Request id (the caller's `x-request-id` or a new one), after authentication.
    #[allow(clippy::result_large_err)]
    pub(crate) fn begin<T>(&self, request: &Request<T>) -> Result<String, Status> {
        agentsearch_proto::context::begin(request.metadata(), &self.auth)
    }
}

#[tonic::async_trait]
impl ToolSearch for PublicGrpc {
    async fn search_tools(
        &self,
        request: Request<pb::SearchToolsRequest>,
    ) -> Result<Response<pb::SearchToolsResponse>, Status> {
        let request_id = self.begin(&request)?;
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let project_id = parse_project_id("projectId", &r.project_id).map_err(fail)?;
        let raw = RawSearch {
            query: Some(r.query),
            top_k: r.top_k.map(i64::from),
            max_tool_tokens: r.max_tool_tokens.map(i64::from),
            integrations: (!r.integrations.is_empty()).then_some(r.integrations),
            categories: (!r.categories.is_empty()).then_some(r.categories),
            max_side_effect: r.max_side_effect,
            connected_only: Some(r.connected_only),
            rerank: r.rerank,
            mode: r.mode,
            diagnostics: r.diagnostics,
        };
        let validated = raw.validate(project_id).map_err(fail)?;
        let response = self
            .router
            .search_tools(validated, &request_id)
            .await
            .map_err(fail)?;
        let mut reply = Response::new(to_proto(response));
        if let Ok(v) = request_id.parse() {
            reply.metadata_mut().insert("x-request-id", v);
        }
        Ok(reply)
    }
}

fn to_proto(r: ToolSearchResponse) -> pb::SearchToolsResponse {
    pb::SearchToolsResponse {
        tools: r
            .tools
            .into_iter()
            .map(|t| pb::ToolResult {
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
                explain: t.explain.map(|e| {
                    let hit = |h: crate::api::RetrieverHit| pb::RetrieverHit {
                        rank: h.rank,
                        score: h.score,
                    };
                    pb::Explain {
                        lexical: e.lexical.map(hit),
                        dense: e.dense.map(hit),
                    }
                }),
            })
            .collect(),
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
        usage: Some(pb::Usage {
            strategy: r.usage.strategy.to_string(),
            candidates: r.usage.candidates,
            returned: r.usage.returned,
            tool_tokens: r.usage.tool_tokens,
            omitted_for_budget: r.usage.omitted_for_budget,
            omitted_for_side_effect: r.usage.omitted_for_side_effect,
            omitted_for_top_k: r.usage.omitted_for_top_k,
            hydrated_integrations: r.usage.hydrated_integrations,
            degraded: r.usage.degraded.map(str::to_string),
            visibility: Some(pb::Visibility {
                mode: r.usage.visibility.mode.to_string(),
                entitled_integrations: r.usage.visibility.entitled_integrations,
                candidates_before_filter: r.usage.visibility.candidates_before_filter,
                candidates_after_filter: r.usage.visibility.candidates_after_filter,
            }),
        }),
        trace: r.trace.map(|t| pb::Trace {
            total_ms: t.total_ms,
            steps: t
                .steps
                .into_iter()
                .map(|s| pb::TraceStep {
                    label: s.label,
                    duration_ms: s.duration_ms,
                })
                .collect(),
        }),
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
    message: pb::UpsertToolsRequest,
    in_flight: &HashSet<String>,
) -> Result<PreparedBatch, Error> {
    let project_id = parse_project_id("projectId", &message.project_id)?;
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
        let request_id = self.begin(&request)?;
        let mut incoming = request.into_inner();
        let router = self.router.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        // Two stages: a reader validates and embeds batch n+1 while a writer writes batch n; the
        // writer acknowledges each batch as soon as it is durably indexed, in order. Names of
        // batches handed to the writer and not yet written are "in flight": the reader treats them
        // as changed, since the ledger it reads does not reflect those batches yet.
        let (prepared_tx, mut prepared_rx) =
            tokio::sync::mpsc::channel::<Result<PreparedBatch, Status>>(1);
        let in_flight: Arc<parking_lot::Mutex<HashMap<String, usize>>> = Arc::default();
        let reader = {
            let (router, request_id, in_flight) =
                (router.clone(), request_id.clone(), in_flight.clone());
            async move {
                while let Some(message) = incoming.next().await {
                    let prepared = match message {
                        Err(status) => Err(status),
                        Ok(message) => {
                            let busy: HashSet<String> = in_flight.lock().keys().cloned().collect();
                            prepare(&router, message, &busy)
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
        tokio::spawn(async move {
            tokio::join!(reader, writer);
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn delete_tools(
        &self,
        request: Request<pb::DeleteToolsRequest>,
    ) -> Result<Response<pb::DeleteToolsResponse>, Status> {
        let request_id = self.begin(&request)?;
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let project_id = parse_project_id("projectId", &r.project_id).map_err(fail)?;
        let outcome = self
            .router
            .delete_tools(&project_id, r.names, &request_id)
            .await
            .map_err(fail)?;
        Ok(Response::new(pb::DeleteToolsResponse {
            deleted: outcome.deleted,
            not_found: outcome.not_found,
        }))
    }
}
