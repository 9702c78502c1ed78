//! The public gRPC adapters of context search: `agentsearch.v1.ContextSearch` and
//! `agentsearch.v1.ContextSync`. Messages become the same raw requests REST parses, so validation
//! and error fields are shared.

use std::pin::Pin;

use agentsearch_common::context::Acl;
use agentsearch_common::{Error, Result};
use agentsearch_proto::status_from_error;
use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::context_search_server::ContextSearch;
use agentsearch_proto::v1::context_sync_server::ContextSync;
use futures::Stream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use crate::context::api::{
    ContextSearchResponse, EmbeddingSpec, RawContextSearch, RawCreateSync, RawFieldDecl, RawGroup,
    RawIdentity, RawIdentityEntry, RawPutGroups, RawReadContext, RawRecord, RawUpsertRecords,
    SegmentInput, SyncStatus, bind_identity, parse_sync_id,
};
use crate::grpc::PublicGrpc;
use crate::tools::api::Int;

/// `identity` (one account) or `identities` (per source), as the REST field.
fn identity(one: Option<String>, many: Vec<pb::IdentityEntry>) -> Result<Option<RawIdentity>> {
    match (one, many.is_empty()) {
        (Some(_), false) => Err(Error::invalid(
            "identities",
            "send either identity or identities, not both",
        )),
        (Some(one), true) => Ok(Some(RawIdentity::One(one))),
        (None, false) => Ok(Some(RawIdentity::Many(
            many.into_iter()
                .map(|e| RawIdentityEntry {
                    principal: e.principal,
                    source: e.source,
                })
                .collect(),
        ))),
        (None, true) => Ok(None),
    }
}

fn sync_id(value: &str) -> Result<String> {
    parse_sync_id("syncId", value).map_err(|v| Error::invalid_many(vec![v]))
}

fn sync_to_proto(s: SyncStatus) -> pb::Sync {
    pb::Sync {
        id: s.id,
        source: s.source,
        owner: s.owner,
        generation: s.generation,
        records: s.records,
        segments: s.segments,
        created_at_ms: s.created_at_ms,
        last_ingest_at_ms: s.last_ingest_at_ms,
        fields: s
            .fields
            .into_iter()
            .map(|f| pb::SyncField {
                name: f.name,
                kind: f.kind,
            })
            .collect(),
    }
}

fn search_to_proto(r: ContextSearchResponse) -> pb::ContextSearchResponse {
    let u = r.usage;
    pb::ContextSearchResponse {
        results: r
            .results
            .into_iter()
            .map(|r| pb::ContextResult {
                id: r.id,
                sync_id: r.sync_id,
                source: r.source,
                relevancy: r.relevancy,
                rerank_score: r.rerank_score,
                generation: r.generation,
                display_name: r.display_name,
                segments: r
                    .segments
                    .into_iter()
                    .map(|s| pb::Segment {
                        pointer: s.pointer,
                        chunk_id: s.chunk_id,
                        text: s.text,
                        relevancy: s.relevancy,
                        rerank_score: s.rerank_score,
                        highlights: s.highlights,
                    })
                    .collect(),
                explain: r.explain.map(crate::tools::proto::explain_to_proto),
            })
            .collect(),
        usage: Some(pb::ContextUsage {
            returned: u.returned,
            segments_returned: u.segments_returned,
            generation: u.generation,
            retrieval_mode: u.retrieval_mode.to_string(),
            rerank_outcome: u.rerank_outcome.to_string(),
            dropped: Some(pb::Drops {
                segments_beyond_pool_cap: u.dropped.segments_beyond_pool_cap,
                segments_unjoinable: u.dropped.segments_unjoinable,
                segments_not_searchable: u.dropped.segments_not_searchable,
                records_beyond_top_k: u.dropped.records_beyond_top_k,
            }),
            degraded: u.degraded.map(str::to_string),
            underfilled: u.underfilled,
            permission_filtered: u.permission_filtered,
            identities_applied: u
                .identities
                .applied
                .into_iter()
                .map(|(source, principals)| (source, pb::PrincipalList { principals }))
                .collect(),
            identities_unused: u
                .identities
                .unused
                .into_iter()
                .map(|e| pb::IdentityEntry {
                    principal: e.principal,
                    source: e.source,
                })
                .collect(),
            ranking_model: u.ranking_model,
            matched: u.matched,
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

/// A record as received; `metadata_json` must hold a JSON object (else the error names
/// `records[i].metadataJson`).
fn record_from_proto(i: usize, r: pb::RecordInput) -> Result<RawRecord, Error> {
    let metadata = match r.metadata_json.as_deref() {
        None => None,
        Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(map)) => Some(map),
            _ => {
                return Err(Error::invalid(
                    format!("records[{i}].metadataJson"),
                    "must be a JSON object of the sync's declared fields",
                ));
            }
        },
    };
    Ok(RawRecord {
        id: Some(r.id),
        display_name: r.display_name,
        text: r.text,
        mime: (!r.mime.is_empty()).then_some(r.mime),
        modified_at: r.modified_at,
        created_at: r.created_at,
        author: r.author,
        url: r.url,
        path: r.path,
        metadata,
        acl: r.acl.map(|a| Acl {
            users: a.users,
            groups: a.groups,
            domains: a.domains,
            anyone: a.anyone,
        }),
        segments: (!r.segments.is_empty()).then(|| {
            r.segments
                .into_iter()
                .map(|s| SegmentInput {
                    text: s.text,
                    vector: s.vector,
                })
                .collect()
        }),
    })
}

type RecordAcks = Pin<Box<dyn Stream<Item = Result<pb::UpsertRecordsResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ContextSearch for PublicGrpc {
    async fn search(
        &self,
        request: Request<pb::ContextSearchRequest>,
    ) -> Result<Response<pb::ContextSearchResponse>, Status> {
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
        let query = match r.query_json.as_deref() {
            None => serde_json::Value::String(r.query),
            Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
                Ok(document) if document.is_object() => document,
                _ => {
                    return Err(fail(Error::invalid(
                        "queryJson",
                        "must be a JSON object (a query JSON document)",
                    )));
                }
            },
        };
        let raw = RawContextSearch {
            query: Some(query),
            sources: (!r.sources.is_empty()).then_some(r.sources),
            sync_ids: (!r.sync_ids.is_empty()).then_some(r.sync_ids),
            top_k: r.top_k.map(Int::from),
            segments_per_record: r.segments_per_record.map(Int::from),
            rerank: r.rerank,
            identity: identity(r.identity, r.identities).map_err(fail)?,
            email: None,
            mode: r.mode,
            diagnostics: r.diagnostics,
            query_embedding: r
                .query_embedding
                .map(crate::tools::proto::raw_query_embedding),
        };
        let mut validated = raw.validate(project_id).map_err(fail)?;
        bind_identity(&mut validated.identity, ctx.user.as_deref()).map_err(fail)?;
        let response = self
            .router()
            .search_context(validated, &request_id, ctx.user.as_deref())
            .await
            .map_err(fail)?;
        Ok(Response::new(search_to_proto(response)))
    }

    async fn record_context_feedback(
        &self,
        request: Request<pb::ContextFeedbackRequest>,
    ) -> Result<Response<pb::ContextFeedbackResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let r = request.into_inner();
        let (project_id, ctx) = begun.authorize(&r.project_id)?;
        let outcome = self
            .router()
            .feedback(
                crate::tools::feedback::CONTEXT,
                &project_id,
                ctx.user.as_deref(),
                &r.request_id,
                r.opened_records,
            )
            .await
            .map_err(|e| status_from_error(&e, &request_id))?;
        Ok(Response::new(pb::ContextFeedbackResponse {
            examples: outcome.examples,
            ranking_model: outcome.ranking_model,
        }))
    }

    async fn get_context_query_schema(
        &self,
        request: Request<pb::GetContextQuerySchemaRequest>,
    ) -> Result<Response<pb::QuerySchemaResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let r = request.into_inner();
        let (project_id, _ctx) = begun.authorize(&r.project_id)?;
        let schema = self
            .router()
            .context_query_schema(&project_id, &r.sync_ids)
            .await
            .map_err(|e| status_from_error(&e, &request_id))?;
        Ok(Response::new(pb::QuerySchemaResponse {
            schema_json: schema.to_string(),
        }))
    }

    async fn read_segment_context(
        &self,
        request: Request<pb::ReadSegmentContextRequest>,
    ) -> Result<Response<pb::ReadSegmentContextResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let (project_id, ctx) = begun.authorize(&r.project_id)?;
        let raw = RawReadContext {
            pointer: Some(r.pointer),
            before: r.before.map(Int::from),
            after: r.after.map(Int::from),
            identity: identity(r.identity, r.identities).map_err(fail)?,
            email: None,
        };
        let mut validated = raw.validate(project_id).map_err(fail)?;
        bind_identity(&mut validated.identity, ctx.user.as_deref()).map_err(fail)?;
        let read = self
            .router()
            .read_segment_context(validated, &request_id)
            .await
            .map_err(fail)?;
        Ok(Response::new(pb::ReadSegmentContextResponse {
            id: read.id,
            sync_id: read.sync_id,
            source: read.source,
            display_name: read.display_name,
            generation: read.generation,
            total_segments: read.total_segments,
            segments: read
                .segments
                .into_iter()
                .map(|s| pb::ContextSegment {
                    pointer: s.pointer,
                    text: s.text,
                    ordinal: s.ordinal,
                    anchor: s.anchor,
                })
                .collect(),
        }))
    }
}

#[tonic::async_trait]
impl ContextSync for PublicGrpc {
    type UpsertRecordsStream = RecordAcks;

    async fn create_sync(
        &self,
        request: Request<pb::CreateSyncRequest>,
    ) -> Result<Response<pb::Sync>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let project_id = begun.authorize_service(&r.project_id)?;
        let raw = RawCreateSync {
            id: r.sync_id,
            source: Some(r.source),
            owner: Some(r.owner),
            fields: (!r.fields.is_empty()).then(|| {
                r.fields
                    .into_iter()
                    .map(|f| RawFieldDecl {
                        name: Some(f.name),
                        kind: Some(f.kind),
                    })
                    .collect()
            }),
        };
        let created = self
            .router()
            .create_sync(raw.validate(project_id).map_err(fail)?)
            .await
            .map_err(fail)?;
        Ok(Response::new(sync_to_proto(created)))
    }

    async fn get_sync(
        &self,
        request: Request<pb::GetSyncRequest>,
    ) -> Result<Response<pb::Sync>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let project_id = begun.authorize_service(&r.project_id)?;
        let sync_id = sync_id(&r.sync_id).map_err(fail)?;
        let sync = self
            .router()
            .get_sync(&project_id, &sync_id)
            .await
            .map_err(fail)?;
        Ok(Response::new(sync_to_proto(sync)))
    }

    async fn list_syncs(
        &self,
        request: Request<pb::ListSyncsRequest>,
    ) -> Result<Response<pb::ListSyncsResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let project_id = begun.authorize_service(&request.into_inner().project_id)?;
        let syncs = self.router().list_syncs(&project_id).await.map_err(fail)?;
        Ok(Response::new(pb::ListSyncsResponse {
            syncs: syncs.into_iter().map(sync_to_proto).collect(),
        }))
    }

    async fn upsert_records(
        &self,
        request: Request<Streaming<pb::UpsertRecordsRequest>>,
    ) -> Result<Response<RecordAcks>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let mut incoming = request.into_inner();
        let router = self.router().clone();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        // Batches are written in order; each is acknowledged once durably indexed and recorded.
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            while let Some(message) = incoming.next().await {
                let ack = match message {
                    Err(status) => Err(status),
                    Ok(m) => {
                        let outcome = async {
                            let project_id = begun.authenticate_service(&m.project_id)?;
                            let sync_id = sync_id(&m.sync_id)?;
                            let raw = RawUpsertRecords {
                                records: m
                                    .records
                                    .into_iter()
                                    .enumerate()
                                    .map(|(i, r)| record_from_proto(i, r))
                                    .collect::<Result<_, Error>>()?,
                                embedding: m.embedding.map(|e| EmbeddingSpec {
                                    model: e.model,
                                    dimension: e.dimension,
                                }),
                            };
                            router
                                .upsert_records(&project_id, &sync_id, raw, &request_id)
                                .await
                        }
                        .await;
                        outcome
                            .map(|o| pb::UpsertRecordsResponse {
                                upserted: o.upserted,
                                unchanged: o.unchanged,
                                segments: o.segments,
                                generation: o.generation,
                            })
                            .map_err(|e| status_from_error(&e, &request_id))
                    }
                };
                let failed = ack.is_err();
                if tx.send(ack).await.is_err() || failed {
                    return;
                }
            }
        }));
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn delete_records(
        &self,
        request: Request<pb::DeleteRecordsRequest>,
    ) -> Result<Response<pb::DeleteRecordsResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let project_id = begun.authorize_service(&r.project_id)?;
        let sync_id = sync_id(&r.sync_id).map_err(fail)?;
        let outcome = self
            .router()
            .delete_records(&project_id, &sync_id, r.ids, &request_id)
            .await
            .map_err(fail)?;
        Ok(Response::new(pb::DeleteRecordsResponse {
            deleted: outcome.deleted,
            not_found: outcome.not_found,
            generation: outcome.generation,
        }))
    }

    async fn put_groups(
        &self,
        request: Request<pb::PutGroupsRequest>,
    ) -> Result<Response<pb::PutGroupsResponse>, Status> {
        let begun = self.begin(&request);
        let request_id = begun.request_id.clone();
        let fail = |e: Error| status_from_error(&e, &request_id);
        let r = request.into_inner();
        let project_id = begun.authorize_service(&r.project_id)?;
        let sync_id = sync_id(&r.sync_id).map_err(fail)?;
        let raw = RawPutGroups {
            groups: r
                .groups
                .into_iter()
                .map(|g| RawGroup {
                    id: g.id,
                    members: g.members,
                })
                .collect(),
        };
        let groups = self
            .router()
            .put_groups(&project_id, &sync_id, raw)
            .await
            .map_err(fail)?;
        Ok(Response::new(pb::PutGroupsResponse { groups }))
    }
}
