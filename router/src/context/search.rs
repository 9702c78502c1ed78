//! Context search: syncs and their records (segmented, embedded, written to the replicas of the
//! sync's shards under the write quorum, then recorded in the metadata store), permission-filtered
//! hybrid search over their segments (each sync read from one replica, least loaded first, never a
//! stale one while another is not), and reading around a segment.
//!
//! Permissions: a record's ACL becomes principal tokens (`Acl::tokens`) stored with each of its
//! segments on the shards. A caller's identity becomes, per searched sync, the tokens it holds
//! there: its user, its email domain, the sync's groups it is a member of, and `anyone`. Shards
//! compare the two inside the index, so a segment the caller cannot read never leaves a shard,
//! and every count in the response is computed over readable segments only.
//!
//! Writes follow the protocol of [`crate::context::write`]: the records a batch changes are marked
//! pending in the store (new ones included, so a record a shard holds is always known and
//! deletable), every replica is written (a quorum must acknowledge; those that missed it are marked
//! stale and repaired, see [`crate::cluster::quorum`] and [`crate::cluster::repair`]), then the store records the
//! final entries, all on a task a caller cannot cancel. A batch is acknowledged only after that.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use agentsearch_common::context::{
    ANYONE, Pointer, domain_token, email_domain, group_token, segment_embedding_text, text_hash,
    user_token,
};
use agentsearch_common::principal;
use agentsearch_common::segment::{SegmentParams, segment};
use agentsearch_common::shard::{
    ContextSearchRequest, ContextSearchResponse as ShardAnswer, ContextStatsRequest, FieldDecl,
    IndexedRecord, IndexedSegment, MAX_FETCH_SEGMENTS, ReadSegmentsRequest, RecordInfo,
    RetrievalMode, SegmentData, SegmentFetchRequest, SegmentFetchResponse, SegmentHit, SegmentRef,
    SyncScope, TermStats, segment_hit_order, segment_key,
};
use agentsearch_common::{Error, Result};
use agentsearch_store::{RecordEntry, SyncRow};
use futures::future::join_all;
use sha2::{Digest, Sha256};
use tracing::Instrument;

use crate::cluster::placement::rendezvous;
use crate::cluster::replicas::{AlternativesFn, PartPlan, assign, run_part};
use crate::cluster::shards::ShardClient;
use crate::context::api::{
    AppliedIdentities, ContextResult, ContextSearch, ContextSearchResponse, ContextSegment,
    ContextUsage, CreateSync, Drops, IdentityEntry, RawPutGroups, RawUpsertRecords, ReadContext,
    ReadContextResponse, RecordInput, ResultSegment, SyncStatus, UnusedIdentity, record_id_problem,
    validate_groups, validate_records,
};
pub use crate::context::write::DeleteRecordsOutcome;
use crate::context::write::RecordWrite;
use crate::tools::api::{Explain, RetrieverHit};
use crate::tools::search::{TraceRecorder, coverage_terms, fuse_keyed};
use crate::{Router, detached};
use agentsearch_fusion::{COVERAGE_DEPTH, coverage_pair};
use agentsearch_store::STALE_SYNC;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpsertRecordsOutcome {
    pub upserted: u32,
    pub unchanged: u32,
    /// Segments written for the upserted records.
    pub segments: u64,
    /// The sync's generation after the batch.
    pub generation: u64,
}

impl From<SyncRow> for SyncStatus {
    fn from(s: SyncRow) -> Self {
        SyncStatus {
            id: s.id,
            source: s.source,
            owner: s.owner,
            generation: s.generation,
            records: s.records,
            segments: s.segments,
            created_at_ms: s.created_at_ms,
            last_ingest_at_ms: s.last_ingest_at_ms,
            fields: s.fields,
        }
    }
}

fn no_such_sync() -> Error {
    Error::NotFound("this project has no sync with this id".into())
}

/// The one answer for a pointer that is unknown, stale, or not readable by the identity.
fn no_such_segment() -> Error {
    Error::NotFound("no segment with this pointer".into())
}

/// A sync to search and the caller's principal tokens in it.
struct Scope {
    sync: SyncRow,
    principals: Vec<String>,
}

impl Router {
    /// Creates a sync, placed on shards like an integration. Idempotent: the same id with the same
    /// source and owner returns the existing sync.
    pub async fn create_sync(&self, req: CreateSync) -> Result<SyncStatus> {
        self.store.ensure_project(&req.project_id).await?;
        let shard_ids = rendezvous(
            &format!("{}/sync/{}", req.project_id, req.id),
            &self.shards.placeable_ids(),
            self.settings.replication,
        );
        let row = SyncRow {
            id: req.id.clone(),
            project_id: req.project_id.clone(),
            source: req.source.clone(),
            owner: req.owner.clone(),
            shard_ids,
            generation: 0,
            records: 0,
            segments: 0,
            created_at_ms: 0,
            last_ingest_at_ms: None,
            fields: req.fields.clone(),
        };
        // A field name has one kind in a project, so a query over several syncs means one thing.
        // Creations of one project that declare fields are checked and inserted one at a time
        // (within this router).
        let _declaring = match req.fields.is_empty() {
            true => None,
            false => Some(
                self.write_locks
                    .lock(&format!("project-fields:{}", req.project_id))
                    .await,
            ),
        };
        let others = self.store.list_syncs(&req.project_id).await?;
        for (i, field) in req.fields.iter().enumerate() {
            if let Some((sync, other)) = others
                .iter()
                .filter(|s| s.id != req.id)
                .find_map(|s| Some((s, s.fields.iter().find(|f| f.name == field.name)?)))
                .filter(|(_, other)| other.kind != field.kind)
            {
                return Err(Error::invalid(
                    format!("fields[{i}].kind"),
                    format!(
                        "sync {} of this project declares `{}` as {}; a field has one kind per project",
                        sync.id, field.name, other.kind
                    ),
                ));
            }
        }
        let stored = self.store.create_sync(&row).await?;
        if stored.project_id != req.project_id
            || stored.source != req.source
            || stored.owner != req.owner
            || stored.fields != req.fields
        {
            return Err(Error::invalid(
                "id",
                "a sync with this id already exists with another source, owner or fields",
            ));
        }
        tracing::info!(project_id = %req.project_id, sync_id = %stored.id, source = %stored.source, shards = ?stored.shard_ids, "sync created");
        Ok(stored.into())
    }

    /// The fields a content query of the project may name (its syncs' metadata included).
    pub async fn content_catalog_of(&self, project_id: &str) -> Result<agentsearch_query::Catalog> {
        let syncs = self.store.list_syncs(project_id).await?;
        Ok(content_catalog(&syncs).0)
    }

    /// The JSON Schema of query JSON documents over the project's content: the fields every
    /// record has and the metadata its syncs declare (only those of `sync_ids`, if any).
    pub async fn context_query_schema(
        &self,
        project_id: &str,
        sync_ids: &[String],
    ) -> Result<serde_json::Value> {
        if sync_ids.len() > crate::context::api::MAX_SYNC_IDS {
            return Err(Error::invalid(
                "syncIds",
                format!(
                    "must have at most {} items, got {}",
                    crate::context::api::MAX_SYNC_IDS,
                    sync_ids.len()
                ),
            ));
        }
        let mut wanted = Vec::with_capacity(sync_ids.len());
        for (i, id) in sync_ids.iter().enumerate() {
            wanted.push(
                crate::context::api::parse_sync_id(&format!("syncIds[{i}]"), id)
                    .map_err(|v| Error::invalid_many(vec![v]))?,
            );
        }
        let all = self.store.list_syncs(project_id).await?;
        let syncs = scoped_syncs(all, &[], &wanted)?;
        Ok(agentsearch_query::schema(&content_catalog(&syncs).0))
    }

    pub async fn get_sync(&self, project_id: &str, sync_id: &str) -> Result<SyncStatus> {
        Ok(self.sync_row(project_id, sync_id).await?.into())
    }

    pub async fn list_syncs(&self, project_id: &str) -> Result<Vec<SyncStatus>> {
        Ok(self
            .store
            .list_syncs(project_id)
            .await?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    async fn sync_row(&self, project_id: &str, sync_id: &str) -> Result<SyncRow> {
        self.store
            .get_sync(project_id, sync_id)
            .await?
            .ok_or_else(no_such_sync)
    }

    /// Upserts one batch of records into a sync: validate, skip unchanged records, segment, embed
    /// (unless the caller brought vectors), write every replica, record in the store.
    pub async fn upsert_records(
        &self,
        project_id: &str,
        sync_id: &str,
        raw: RawUpsertRecords,
        request_id: &str,
    ) -> Result<UpsertRecordsOutcome> {
        let sync = self.sync_row(project_id, sync_id).await?;
        let model = self.embedder.inner().clone();
        let params = SegmentParams::from(&self.settings.context);
        let declared = sync.fields.clone();
        let records = tokio::task::spawn_blocking(move || {
            let records = validate_records(raw, (model.model_id(), model.dim()), &declared)?;
            Ok::<_, Error>(
                records
                    .into_iter()
                    .map(|r| {
                        let hash = content_hash(&r, params);
                        (r, hash)
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .await
        .map_err(|e| Error::Internal(format!("validation task: {e}")))??;
        if records.is_empty() {
            return Ok(UpsertRecordsOutcome {
                generation: sync.generation,
                ..Default::default()
            });
        }

        let serial = self.write_locks.lock(&format!("sync:{sync_id}")).await;
        let ids: Vec<String> = records.iter().map(|(r, _)| r.id.clone()).collect();
        let existing: HashMap<String, RecordEntry> = self
            .store
            .record_entries(project_id, sync_id, &ids)
            .await?
            .into_iter()
            .map(|e| (e.record_id.clone(), e))
            .collect();
        let (changed, unchanged): (Vec<_>, Vec<_>) = records
            .into_iter()
            .partition(|(r, hash)| existing.get(&r.id).is_none_or(|e| &e.content_hash != hash));
        if changed.is_empty() {
            return Ok(UpsertRecordsOutcome {
                unchanged: unchanged.len() as u32,
                generation: sync.generation,
                ..Default::default()
            });
        }

        // Segment and embed off the executor.
        let started = Instant::now();
        let embedder = self.embedder.inner().clone();
        let batch_size = self.settings.embed_batch_size;
        let indexed: Vec<(IndexedRecord, String)> = tokio::task::spawn_blocking(move || {
            prepare_records(changed, &existing, params, embedder.as_ref(), batch_size)
        })
        .await
        .map_err(|e| Error::Internal(format!("embedding task: {e}")))??;
        let embed_ms = started.elapsed().as_millis() as u64;

        // From here on the write runs to its end on a task of its own: a caller that goes away
        // (a client disconnecting) cannot stop it between the shards and the store.
        let write = RecordWrite {
            store: self.store.clone(),
            shards: self.shards.clone(),
            replicas: sync.shard_ids.clone(),
            write_quorum: self.settings.write_quorum,
            project_id: project_id.to_string(),
            sync_id: sync_id.to_string(),
            request_id: request_id.to_string(),
            fields: sync.fields.clone(),
        };
        let written = detached(async move {
            let _serial = serial;
            write.upsert(indexed).await
        })
        .await;
        self.invalidate_stale(project_id);
        let (upserted, segments, generation) = written?;
        tracing::debug!(
            request_id,
            sync_id,
            records = upserted,
            segments,
            embed_ms,
            write_ms = started.elapsed().as_millis() as u64 - embed_ms,
            "record batch indexed"
        );
        Ok(UpsertRecordsOutcome {
            upserted,
            unchanged: unchanged.len() as u32,
            segments,
            generation,
        })
    }

    /// Deletes records from every replica of the sync, then from the store.
    pub async fn delete_records(
        &self,
        project_id: &str,
        sync_id: &str,
        ids: Vec<String>,
        request_id: &str,
    ) -> Result<DeleteRecordsOutcome> {
        if ids.len() > crate::context::api::MAX_RECORDS {
            return Err(Error::invalid(
                "ids",
                format!(
                    "at most {} ids per call, got {}",
                    crate::context::api::MAX_RECORDS,
                    ids.len()
                ),
            ));
        }
        for (i, id) in ids.iter().enumerate() {
            if let Some(issue) = record_id_problem(id) {
                return Err(Error::invalid(format!("ids[{i}]"), issue));
            }
        }
        let mut unique = ids;
        unique.sort();
        unique.dedup();
        let sync = self.sync_row(project_id, sync_id).await?;
        let serial = self.write_locks.lock(&format!("sync:{sync_id}")).await;
        let write = RecordWrite {
            store: self.store.clone(),
            shards: self.shards.clone(),
            replicas: sync.shard_ids.clone(),
            write_quorum: self.settings.write_quorum,
            project_id: project_id.to_string(),
            sync_id: sync_id.to_string(),
            request_id: request_id.to_string(),
            fields: sync.fields.clone(),
        };
        let deleted = detached(async move {
            let _serial = serial;
            write.delete(unique).await
        })
        .await;
        self.invalidate_stale(project_id);
        deleted
    }

    /// Replaces the members of the named groups of a sync.
    pub async fn put_groups(
        &self,
        project_id: &str,
        sync_id: &str,
        raw: RawPutGroups,
    ) -> Result<u32> {
        let groups = validate_groups(raw)?;
        self.sync_row(project_id, sync_id).await?;
        self.store
            .put_group_members(project_id, sync_id, &groups)
            .await?;
        Ok(groups.len() as u32)
    }

    /// The syncs a search covers and the caller's principal tokens in each, with the identities
    /// applied and unused.
    async fn scopes(
        &self,
        project_id: &str,
        syncs: Vec<SyncRow>,
        identity: &[IdentityEntry],
    ) -> Result<(Vec<Scope>, AppliedIdentities)> {
        let mut applied: BTreeMap<String, Vec<String>> = BTreeMap::new();
        // Group memberships of every principal in every sync, in one store call.
        let sync_ids: Vec<String> = syncs.iter().map(|s| s.id.clone()).collect();
        let mut members: Vec<String> = identity
            .iter()
            .map(|e| principal::key(&e.principal))
            .collect();
        members.sort();
        members.dedup();
        let memberships = self
            .store
            .group_memberships(project_id, &sync_ids, &members)
            .await?;
        let mut scopes = Vec::with_capacity(syncs.len());
        for sync in syncs {
            let entries: Vec<&IdentityEntry> = identity
                .iter()
                .filter(|e| e.source.as_deref().is_none_or(|s| s == sync.source))
                .collect();
            let mine: HashSet<String> = entries
                .iter()
                .map(|e| principal::key(&e.principal))
                .collect();
            let mut principals = vec![ANYONE.to_string()];
            for e in &entries {
                principals.push(user_token(&e.principal));
                if let Some(domain) = email_domain(&e.principal) {
                    principals.push(domain_token(domain));
                }
            }
            principals.extend(
                memberships
                    .iter()
                    .filter(|(s, _, member)| *s == sync.id && mine.contains(member))
                    .map(|(_, group, _)| group_token(group)),
            );
            principals.sort();
            principals.dedup();
            if !entries.is_empty() {
                let list = applied.entry(sync.source.clone()).or_default();
                for e in &entries {
                    if !list.contains(&e.principal) {
                        list.push(e.principal.clone());
                    }
                }
            }
            scopes.push(Scope { sync, principals });
        }
        let searched: HashSet<&str> = scopes.iter().map(|s| s.sync.source.as_str()).collect();
        let unused = identity
            .iter()
            .filter(|e| match &e.source {
                Some(source) => !searched.contains(source.as_str()),
                None => searched.is_empty(),
            })
            .map(|e| UnusedIdentity {
                source: e.source.clone(),
                principal: e.principal.clone(),
            })
            .collect();
        Ok((scopes, AppliedIdentities { applied, unused }))
    }

    /// The best passages the identity may read, grouped by record.
    /// `user` is the token's user (`None` for service callers): only they may give feedback on
    /// this search.
    pub async fn search_context(
        &self,
        mut req: ContextSearch,
        request_id: &str,
        user: Option<&str>,
    ) -> Result<ContextSearchResponse> {
        let started = Instant::now();
        let deadline = started + Duration::from_millis(self.settings.search.deadline_ms);
        let mut trace = TraceRecorder::new(started, req.diagnostics);
        let settings = self.settings.context;
        let given = self.given_vector(req.query_embedding.as_ref())?;

        // Without a query document the words to embed are known now: their embedding starts
        // before the scope is resolved and runs beside it (a document's words are known only once
        // it is parsed against the scope's fields). An embedding made for a scope found empty or
        // refused is not used (it stays in the cache; it did take its turn in the embedding queue).
        let early_embed = (req.document.is_none()
            && given.is_none()
            && req.mode.dense()
            && !req.query.trim().is_empty())
        .then(|| (Instant::now(), self.start_embed_query(&req.query)));

        // Scope: the project's syncs, narrowed by sources and syncIds.
        let all = self.store.list_syncs(&req.project_id).await?;
        let syncs = scoped_syncs(all, &req.sources, &req.sync_ids)?;
        // A query document names the fields of the searched syncs.
        let typed = match req.document.take() {
            None => None,
            Some(document) => {
                let (catalog, fields) = content_catalog(&syncs);
                let (q, limit, typed) = crate::tools::api::TypedQuery::parse(&catalog, &document)
                    .map_err(|v| Error::invalid_many(vec![v]))?;
                req.query = q.unwrap_or_default();
                if let Some(limit) = limit {
                    req.top_k = limit;
                }
                // The shards parse the nodes against the same fields.
                Some((typed, fields))
            }
        };
        let (scopes, identities) = self.scopes(&req.project_id, syncs, &req.identity).await?;
        trace.step("scope");
        let offset = typed.as_ref().map_or(0, |(t, _)| t.offset);
        // A typed query's page deeper than the deployment's candidate pool gets a pool that
        // holds it; every other search keeps the configured pool.
        let candidates = match typed {
            Some(_) => settings
                .candidates
                .max((offset + req.top_k).saturating_mul(req.segments_per_record)),
            None => settings.candidates,
        };
        let has_words = !req.query.trim().is_empty();
        let structured_only = typed.is_some() && !has_words;

        // The query embedding and the global lexical statistics, together.
        let salt = crate::cluster::replicas::salt_of(request_id);
        let stale = self.stale_replicas(&req.project_id).await;
        let indexes: Vec<usize> = (0..scopes.len()).collect();
        let replicas = |i: &usize| scopes[*i].sync.shard_ids.as_slice();
        let stale_skips =
            |i: &usize, s: &String| stale.skips(STALE_SYNC, &scopes[*i].sync.id, replicas(i), s);
        // Syncs no configured shard holds are not searchable, like those whose shards fail.
        let (first_parts, unplaced) = assign(&self.shards, salt, &indexes, replicas, stale_skips);
        let alternatives = |keys: &[usize], tried: &HashSet<String>| {
            assign(&self.shards, salt, keys, replicas, |i, s| {
                tried.contains(s) || stale_skips(i, s)
            })
        };
        let embed = async {
            if !req.mode.dense() || scopes.is_empty() || !has_words {
                return None;
            }
            if let Some(vector) = &given {
                return Some((Ok((vector.clone(), false)), Duration::ZERO));
            }
            if let Some((t, early)) = early_embed {
                let embedded = early.instrument(tracing::info_span!("embed")).await;
                return Some((embedded, t.elapsed()));
            }
            let t = Instant::now();
            let embedded = self
                .embed_query(&req.query)
                .instrument(tracing::info_span!("embed"))
                .await;
            Some((embedded, t.elapsed()))
        };
        let stats = async {
            if !req.mode.lexical() || first_parts.len() < 2 || !has_words {
                return None;
            }
            let t = Instant::now();
            let stats = self
                .context_stats(
                    &req,
                    &first_parts,
                    &scopes,
                    &alternatives,
                    request_id,
                    deadline,
                )
                .instrument(tracing::info_span!("term_stats"))
                .await;
            Some((stats, t.elapsed()))
        };
        let (embedded, stats) = tokio::join!(embed, stats);
        let mut retrieval_mode = match req.mode {
            // A document without words: its nodes alone rank.
            _ if structured_only => "structured",
            RetrievalMode::Hybrid => "hybrid",
            RetrievalMode::Lexical => "lexical",
            RetrievalMode::Dense => "dense",
        };
        let vector = match embedded {
            None => None,
            Some((Ok((vector, cached)), took)) => {
                let label = match given {
                    Some(_) => "embed_given",
                    None => crate::tools::search::embed_label(cached),
                };
                trace.push(label, took);
                Some(vector)
            }
            Some((Err(err), took)) => {
                trace.push("embed", took);
                crate::tools::search::embedding_failed(err, req.mode, request_id)?;
                retrieval_mode = "semantic_failed_open";
                metrics::counter!(agentsearch_common::metrics::DEGRADED_ANSWERS, "mode" => "lexical_only")
                    .increment(1);
                None
            }
        };
        let stats: Option<TermStats> = stats.map(|(stats, took)| {
            trace.push("term_stats", took);
            stats
        });
        trace.step("prepare");

        // The query's terms for adaptive fusion's coverage: only when both retrievers take part
        // (one list alone ranks the same whatever its weight).
        let lexical_asked = req.mode.lexical() || (typed.is_some() && vector.is_none());
        let query_terms = coverage_terms(&self.settings.search, &req.query)
            .filter(|_| lexical_asked && vector.is_some());
        // Fan out; a slow part is hedged, a failed one re-routed to other replicas (see
        // [`crate::cluster::replicas::run_part`]).
        let request_for = |scopes: Vec<SyncScope>| ContextSearchRequest {
            project_id: req.project_id.clone(),
            syncs: scopes,
            query: req.query.clone(),
            vector: vector.as_ref().map(|v| v.to_vec()),
            limit: candidates,
            // A document without words still ranks by its nodes, through the lexical retriever.
            lexical: lexical_asked,
            stats: stats.clone(),
            structured: typed.as_ref().map(|(t, _)| t.structured.clone()),
            fields: typed
                .as_ref()
                .map(|(_, fields)| fields.clone())
                .unwrap_or_default(),
            // The texts of the passages returned are fetched once the page is known, but for
            // those adaptive fusion measures.
            defer_texts: true,
            texts_head: if query_terms.is_some() {
                COVERAGE_DEPTH as u32
            } else {
                0
            },
        };
        let plan = PartPlan {
            shards: &self.shards,
            alternatives: &alternatives,
            hedge_after: self.settings.hedge_after,
            deadline: tokio::time::Instant::from_std(deadline),
            rpc: "search_segments",
        };
        let typed_on = typed.is_some();
        let call = |_: &str, client: ShardClient, members: Vec<usize>, timeout| {
            let request = request_for(
                members
                    .iter()
                    .map(|&i| SyncScope {
                        sync_id: scopes[i].sync.id.clone(),
                        principals: scopes[i].principals.clone(),
                        source: scopes[i].sync.source.clone(),
                    })
                    .collect(),
            );
            async move {
                let answer = client.search_segments(request, request_id, timeout).await?;
                // A shard that cannot run typed queries would answer as if unrestricted.
                if typed_on && !answer.structured {
                    return Err(Error::Unavailable(
                        "a shard of this deployment cannot run typed queries yet (an upgrade is \
                         in progress); retry shortly"
                            .into(),
                    ));
                }
                Ok(answer)
            }
        };
        let outcomes =
            join_all(first_parts.iter().map(|(shard_id, members)| {
                run_part(&plan, shard_id.clone(), members.clone(), &call)
            }))
            .instrument(tracing::info_span!("fanout", parts = first_parts.len()))
            .await;
        let mut answers: Vec<ShardAnswer> = Vec::new();
        let mut failed_syncs: Vec<usize> = unplaced;
        // The shard that answered for each sync, asked again for the texts.
        let mut answered_by: HashMap<usize, String> = HashMap::new();
        for outcome in outcomes {
            for (shard_id, members, answer, took) in outcome.answers {
                answered_by.extend(members.iter().map(|&i| (i, shard_id.clone())));
                if req.diagnostics {
                    trace.push(&format!("shard:{shard_id}"), took);
                    let t = answer.timings;
                    for (step, ms) in [
                        ("prepare", t.prepare_ms),
                        ("lexical", t.lexical_ms),
                        ("dense", t.dense_ms),
                        ("assemble", t.assemble_ms),
                    ] {
                        trace.push(
                            &format!("shard:{shard_id}:{step}"),
                            Duration::from_secs_f64(ms / 1e3),
                        );
                    }
                }
                answers.push(answer);
            }
            if req.diagnostics {
                for (shard_id, took) in &outcome.failed_calls {
                    trace.push(&format!("shard:{shard_id}"), *took);
                }
            }
            for (shard_id, members, err) in outcome.failed {
                tracing::warn!(request_id, shard_id = %shard_id, error = %err, "segment search failed on a shard");
                failed_syncs.extend(members);
            }
        }
        trace.step("fanout");

        // Whole syncs that could not be searched: their readable segments are not searchable.
        let mut not_searchable_syncs: Vec<usize> = failed_syncs;
        let mut lexical_failed: HashSet<&str> = HashSet::new();
        for answer in &answers {
            for f in &answer.failures {
                if let Some(i) = scopes.iter().position(|s| s.sync.id == f.integration) {
                    match f.retriever.as_str() {
                        "lexical" => {
                            lexical_failed.insert(scopes[i].sync.id.as_str());
                        }
                        "dense" => {}
                        _ => not_searchable_syncs.push(i),
                    }
                }
            }
        }
        not_searchable_syncs.sort_unstable();
        not_searchable_syncs.dedup();
        if !not_searchable_syncs.is_empty() {
            metrics::counter!(agentsearch_common::metrics::PARTIAL_ANSWERS, "search" => "context")
                .increment(1);
        }
        let mut segments_not_searchable = self
            .readable_in(&req.project_id, &scopes, &not_searchable_syncs, request_id)
            .await;
        let mut lexical_on = req.mode.lexical();
        let searched: Vec<&str> = scopes
            .iter()
            .enumerate()
            .filter(|(i, _)| !not_searchable_syncs.contains(i))
            .map(|(_, s)| s.sync.id.as_str())
            .collect();
        if lexical_on
            && vector.is_some()
            && !searched.is_empty()
            && searched.iter().all(|s| lexical_failed.contains(s))
        {
            retrieval_mode = "lexical_failed_open";
            metrics::counter!(agentsearch_common::metrics::DEGRADED_ANSWERS, "mode" => "dense_only")
                .increment(1);
            lexical_on = false;
        }

        // Merge each retriever across shards, then fuse.
        let limit = candidates as usize;
        let mut matched: Option<u64> = None;
        let mut lexical: Vec<SegmentHit> = Vec::new();
        let mut dense: Vec<SegmentHit> = Vec::new();
        let mut lexical_matched: u64 = 0;
        let mut generation: u64 = 0;
        let mut texts: HashMap<String, SegmentData> = HashMap::new();
        let mut records: HashMap<(String, String), RecordInfo> = HashMap::new();
        let lexical_on = lexical_on || (typed.is_some() && vector.is_none());
        for answer in answers {
            generation += answer.visible_generation;
            if let Some(m) = answer.matched {
                *matched.get_or_insert(0) += m;
            }
            if lexical_on {
                lexical.extend(answer.lexical);
                lexical_matched += answer.lexical_matched;
            }
            if vector.is_some() {
                dense.extend(answer.dense);
            }
            for s in answer.segments {
                texts.insert(segment_key(&s.sync_id, &s.record_id, s.ordinal), s);
            }
            for r in answer.records {
                records.insert((r.sync_id.clone(), r.record_id.clone()), r);
            }
        }
        for list in [&mut lexical, &mut dense] {
            list.sort_by(segment_hit_order);
            list.dedup_by(|a, b| a.key() == b.key());
            list.truncate(limit);
        }
        let segments_beyond_pool_cap = lexical_matched.saturating_sub(lexical.len() as u64);
        let keyed = |hits: &[SegmentHit]| -> Vec<(String, f64)> {
            hits.iter().map(|h| (h.key(), f64::from(h.score))).collect()
        };
        let (lexical_keys, dense_keys) = (keyed(&lexical), keyed(&dense));
        // How much of the query each list's best passages contain, with their records' titles
        // (a passage whose text the shard did not send counts as containing nothing).
        let coverage = query_terms.as_ref().map_or([0.0, 0.0], |terms| {
            coverage_pair([&lexical[..], &dense[..]], |hit| {
                let text = &texts.get(&hit.key())?.text;
                let title = records
                    .get(&(hit.sync_id.clone(), hit.record_id.clone()))
                    .and_then(|r| r.display_name.as_deref());
                Some(terms.coverage([text.as_str(), title.unwrap_or("")]))
            })
        });
        // The project's context model, learned from its feedback, or the deployment's weights.
        let model = self
            .ranking_model(crate::tools::feedback::CONTEXT, &req.project_id)
            .await;
        let weights = model
            .as_ref()
            .map_or([settings.lexical_weight, settings.dense_weight], |m| {
                m.weights
            });
        let (fused, floor) = fuse_keyed(
            &self.settings.search,
            weights,
            &as_refs(&lexical_keys),
            &as_refs(&dense_keys),
            coverage,
        );
        trace.step("fuse");

        // Group by record, in fused order.
        let sources: HashMap<&str, &str> = scopes
            .iter()
            .map(|s| (s.sync.id.as_str(), s.sync.source.as_str()))
            .collect();
        let places: HashMap<&str, &SegmentHit> = lexical_keys
            .iter()
            .zip(&lexical)
            .chain(dense_keys.iter().zip(&dense))
            .map(|((key, _), hit)| (key.as_str(), hit))
            .collect();
        let mut unjoinable = 0u64;
        let mut order: Vec<(String, String)> = Vec::new();
        let mut grouped: HashMap<(String, String), Vec<(&str, &SegmentHit, f64)>> = HashMap::new();
        for item in &fused {
            let Some(&hit) = places.get(item.key) else {
                unjoinable += 1;
                continue;
            };
            let record_key = (hit.sync_id.clone(), hit.record_id.clone());
            if !records.contains_key(&record_key) || !sources.contains_key(hit.sync_id.as_str()) {
                unjoinable += 1;
                continue;
            }
            let list = grouped.entry(record_key.clone()).or_insert_with(|| {
                order.push(record_key);
                Vec::new()
            });
            if list.len() < req.segments_per_record as usize {
                list.push((item.key, hit, item.score));
            }
        }
        // Records are ranked by fusing each retriever's best passage of every record, so a
        // record both retrievers found gets both votes even when they prefer different passages
        // of it; its passages keep the order of the passage-level fusion.
        let best_per_record = |hits: &[SegmentHit]| -> Vec<(String, f64)> {
            let mut seen = HashSet::new();
            hits.iter()
                .filter(|h| seen.insert((h.sync_id.as_str(), h.record_id.as_str())))
                .map(|h| {
                    (
                        format!("{}\n{}", h.sync_id, h.record_id),
                        f64::from(h.score),
                    )
                })
                .collect()
        };
        let (lexical_records, dense_records) = (best_per_record(&lexical), best_per_record(&dense));
        self.search_log.record(
            crate::tools::feedback::CONTEXT,
            &req.project_id,
            user,
            request_id,
            || {
                crate::tools::feedback::Lists::of_records(
                    &lexical_records,
                    &dense_records,
                    coverage,
                )
            },
        );
        let (record_fused, record_floor) = fuse_keyed(
            &self.settings.search,
            weights,
            &as_refs(&lexical_records),
            &as_refs(&dense_records),
            coverage,
        );
        let record_score: HashMap<&str, f64> =
            record_fused.iter().map(|f| (f.key, f.score)).collect();
        let score_of = |key: &(String, String)| {
            record_score
                .get(format!("{}\n{}", key.0, key.1).as_str())
                .copied()
                .unwrap_or(record_floor)
        };
        // Each record's score once, then a stable sort (ties keep the passage-level order).
        let mut ranked: Vec<(f64, (String, String))> =
            order.into_iter().map(|key| (score_of(&key), key)).collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        let scale = |score: f64, best: f64, floor: f64| {
            ((score - floor) / (best - floor).max(f64::MIN_POSITIVE)).clamp(0.0, 1.0)
        };
        // With diagnostics: where each retriever ranked every record (its best passage).
        let explain_of = |key: &(String, String)| -> Option<Explain> {
            if !req.diagnostics {
                return None;
            }
            let joined = format!("{}\n{}", key.0, key.1);
            let hit = |list: &[(String, f64)]| {
                list.iter()
                    .position(|(k, _)| *k == joined)
                    .map(|i| RetrieverHit {
                        rank: i as u32 + 1,
                        score: list[i].1,
                    })
            };
            Some(Explain {
                lexical: hit(&lexical_records),
                dense: hit(&dense_records),
            })
        };
        let best_record = record_fused.first().map_or(1.0, |f| f.score);
        let best = fused.first().map_or(1.0, |f| f.score);
        let relevancy = |score: f64| scale(score, best, floor);
        // The page, or the records the reranker sees if they are more.
        let rerank_n = match (&self.rerank, req.rerank) {
            (Some(rerank), None | Some(true)) => rerank.top_n,
            _ => 0,
        };
        let kept = (offset as usize + req.top_k as usize).max(rerank_n);
        trace.step("group");
        // The texts of the page's passages, and of the records before it (the offset, and the
        // reranker's), which the page's place depends on (a shard that predates deferred texts
        // sent them with its answer). A passage whose text is gone (its record deleted, rewritten
        // or its permissions changed since the search) is unjoinable, and a record left without
        // passages gives its place to the next. A sync whose texts could not be read (no replica
        // answered, or the one that did could not read its store) is not searchable: its
        // records leave the ranking and the page, and its readable segments are counted.
        let index_of: HashMap<&str, usize> = scopes
            .iter()
            .enumerate()
            .map(|(i, s)| (s.sync.id.as_str(), i))
            .collect();
        let sync_of = |key: &(String, String)| index_of.get(key.0.as_str()).copied();
        let mut results: Vec<ContextResult> = Vec::new();
        let mut fetch_failed: BTreeSet<usize> = BTreeSet::new();
        // Per sync: passages found unjoinable on the page, and records left without passages.
        let mut page_unjoinable: BTreeMap<usize, u64> = BTreeMap::new();
        let mut emptied: BTreeMap<usize, u64> = BTreeMap::new();
        let mut next = 0;
        while results.len() < kept && next < ranked.len() {
            let batch = &ranked[next..ranked.len().min(next + kept - results.len())];
            next += batch.len();
            let missing: Vec<(usize, &SegmentHit, u64)> = batch
                .iter()
                .filter_map(|(_, key)| Some((sync_of(key)?, key)))
                .filter(|(sync, _)| !fetch_failed.contains(sync))
                .flat_map(|(sync, key)| {
                    let generation = records[key].generation;
                    grouped[key]
                        .iter()
                        .filter(|(passage, _, _)| !texts.contains_key(*passage))
                        .map(move |(_, hit, _)| (sync, *hit, generation))
                })
                .collect();
            if !missing.is_empty() {
                let (fetched, failed) = self
                    .fetch_texts(
                        &req.project_id,
                        &scopes,
                        &answered_by,
                        missing,
                        &alternatives,
                        request_id,
                        deadline,
                    )
                    .await;
                if !failed.is_empty() {
                    fetch_failed.extend(failed);
                    // Records of a failed sync placed by an earlier batch leave the page too.
                    results.retain(|r| {
                        index_of
                            .get(r.sync_id.as_str())
                            .is_some_and(|i| !fetch_failed.contains(i))
                    });
                }
                for segment in fetched {
                    texts.insert(
                        segment_key(&segment.sync_id, &segment.record_id, segment.ordinal),
                        segment,
                    );
                }
            }
            for (record_score, key) in batch {
                let Some(sync) = sync_of(key).filter(|sync| !fetch_failed.contains(sync)) else {
                    continue;
                };
                let info = &records[key];
                let mut segments = Vec::new();
                for (passage, _, score) in &grouped[key] {
                    let Some(s) = texts.get(*passage) else {
                        *page_unjoinable.entry(sync).or_default() += 1;
                        continue;
                    };
                    let pointer = pointer_of(s);
                    segments.push(ResultSegment {
                        chunk_id: pointer.clone(),
                        pointer,
                        text: s.text.clone(),
                        relevancy: relevancy(*score),
                        rerank_score: None,
                        highlights: s.highlights.clone(),
                    });
                }
                if segments.is_empty() {
                    *emptied.entry(sync).or_default() += 1;
                    continue;
                }
                results.push(ContextResult {
                    id: format!("{}.{}", info.sync_id, info.record_id),
                    sync_id: info.sync_id.clone(),
                    source: sources[info.sync_id.as_str()].to_string(),
                    relevancy: scale(*record_score, best_record, record_floor),
                    rerank_score: None,
                    explain: explain_of(key),
                    generation: info.generation,
                    display_name: info.display_name.clone(),
                    segments,
                });
            }
        }
        if next > 0 {
            trace.step("texts");
        }
        // What a failed sync's records came to on the page no longer counts: the sync does.
        let served = |sync: &usize| !fetch_failed.contains(sync);
        unjoinable += page_unjoinable
            .iter()
            .filter(|(sync, _)| served(sync))
            .map(|(_, n)| n)
            .sum::<u64>();
        let records_total = ranked
            .iter()
            .filter(|(_, key)| sync_of(key).is_some_and(|sync| served(&sync)))
            .count() as u64
            - emptied
                .iter()
                .filter(|(sync, _)| served(sync))
                .map(|(_, n)| n)
                .sum::<u64>();
        if !fetch_failed.is_empty() {
            if not_searchable_syncs.is_empty() {
                metrics::counter!(agentsearch_common::metrics::PARTIAL_ANSWERS, "search" => "context")
                    .increment(1);
            }
            let failed: Vec<usize> = fetch_failed.iter().copied().collect();
            segments_not_searchable += self
                .readable_in(&req.project_id, &scopes, &failed, request_id)
                .await;
        }
        let rerank_outcome = self
            .rerank_records(
                &req.query,
                req.rerank != Some(false),
                &mut results,
                deadline,
            )
            .await;
        if rerank_n > 0 {
            trace.step("rerank");
        }
        let results: Vec<ContextResult> = results
            .into_iter()
            .skip(offset as usize)
            .take(req.top_k as usize)
            .collect();

        let returned = results.len() as u32;
        let usage = ContextUsage {
            returned,
            segments_returned: results.iter().map(|r| r.segments.len() as u32).sum(),
            generation,
            retrieval_mode,
            rerank_outcome: rerank_outcome.as_context_str(),
            dropped: Drops {
                segments_beyond_pool_cap,
                segments_unjoinable: unjoinable,
                segments_not_searchable,
                records_beyond_top_k: records_total
                    .saturating_sub(u64::from(offset))
                    .saturating_sub(u64::from(returned)),
            },
            degraded: rerank_outcome.degraded(),
            underfilled: returned < req.top_k,
            permission_filtered: true,
            identities,
            ranking_model: model.map_or(0, |m| m.version),
            matched: typed
                .as_ref()
                .filter(|(t, _)| t.count_exactly)
                .map(|_| matched.unwrap_or(0)),
        };
        Ok(ContextSearchResponse {
            results,
            usage,
            trace: req.diagnostics.then(|| trace.finish()),
        })
    }

    /// Segments the caller may read in the syncs `which` (indexes in `scopes`), as the store
    /// counts them: what a sync that could not be served would have been searched over.
    async fn readable_in(
        &self,
        project_id: &str,
        scopes: &[Scope],
        which: &[usize],
        request_id: &str,
    ) -> u64 {
        let mut readable = 0;
        for &i in which {
            readable += self
                .store
                .readable_segments(project_id, &scopes[i].sync.id, &scopes[i].principals)
                .await
                .unwrap_or_else(|err| {
                    tracing::warn!(request_id, error = %err, "counting unsearchable segments failed");
                    0
                });
        }
        readable
    }

    /// The texts of `wanted` (each with its sync's index in `scopes` and its record's
    /// generation) that still exist in that generation and may be read, from the shard that
    /// answered the search for their sync (`answered_by`), or another replica if it fails; and
    /// the syncs whose texts could not be read (no replica answered, or the answer says the
    /// sync failed).
    #[allow(clippy::too_many_arguments)]
    async fn fetch_texts(
        &self,
        project_id: &str,
        scopes: &[Scope],
        answered_by: &HashMap<usize, String>,
        wanted: Vec<(usize, &SegmentHit, u64)>,
        alternatives: &AlternativesFn<'_, usize>,
        request_id: &str,
        deadline: Instant,
    ) -> (Vec<SegmentData>, Vec<usize>) {
        let mut by_sync: BTreeMap<usize, Vec<SegmentRef>> = BTreeMap::new();
        for (i, hit, generation) in wanted {
            by_sync.entry(i).or_default().push(SegmentRef {
                sync_id: hit.sync_id.clone(),
                record_id: hit.record_id.clone(),
                ordinal: hit.ordinal,
                generation,
            });
        }
        let mut parts: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        let mut failed: Vec<usize> = Vec::new();
        for &i in by_sync.keys() {
            match answered_by.get(&i) {
                Some(shard) => parts.entry(shard.as_str()).or_default().push(i),
                None => failed.push(i),
            }
        }
        let plan = PartPlan {
            shards: &self.shards,
            alternatives,
            hedge_after: self.settings.hedge_after,
            deadline: tokio::time::Instant::from_std(deadline),
            rpc: "fetch_segments",
        };
        let by_sync = &by_sync;
        let call = |_: &str, client: ShardClient, members: Vec<usize>, timeout| async move {
            let syncs: Vec<SyncScope> = members
                .iter()
                .map(|&i| SyncScope {
                    sync_id: scopes[i].sync.id.clone(),
                    principals: scopes[i].principals.clone(),
                    source: String::new(),
                })
                .collect();
            let segments: Vec<SegmentRef> = members
                .iter()
                .flat_map(|i| by_sync[i].iter().cloned())
                .collect();
            let mut answer = SegmentFetchResponse::default();
            for chunk in segments.chunks(MAX_FETCH_SEGMENTS) {
                let part = client
                    .fetch_segments(
                        SegmentFetchRequest {
                            project_id: project_id.to_string(),
                            syncs: syncs.clone(),
                            segments: chunk.to_vec(),
                        },
                        request_id,
                        timeout,
                    )
                    .await?;
                answer.segments.extend(part.segments);
                answer.failures.extend(part.failures);
            }
            Ok(answer)
        };
        let outcomes = join_all(
            parts
                .into_iter()
                .map(|(shard, members)| run_part(&plan, shard.to_string(), members, &call)),
        )
        .instrument(tracing::info_span!("fetch_texts"))
        .await;
        let mut texts = Vec::new();
        for outcome in outcomes {
            for (shard_id, members, answer, _) in outcome.answers {
                for f in &answer.failures {
                    tracing::warn!(request_id, shard_id = %shard_id, sync = %f.integration, error = %f.message, "reading passage texts failed");
                    failed.extend(
                        members
                            .iter()
                            .filter(|&&i| scopes[i].sync.id == f.integration),
                    );
                }
                texts.extend(answer.segments);
            }
            for (shard_id, members, err) in outcome.failed {
                tracing::warn!(request_id, shard_id = %shard_id, error = %err, "reading passage texts failed on a shard");
                failed.extend(members);
            }
        }
        (texts, failed)
    }

    /// Reranks the passages of the first `rerank.top_n` records (one call for all of them): each
    /// record's passages are ordered by their score, and the records by their best passage's
    /// (see [`crate::rerank`]).
    async fn rerank_records(
        &self,
        query: &str,
        requested: bool,
        results: &mut Vec<ContextResult>,
        deadline: Instant,
    ) -> crate::rerank::Outcome {
        let top_n = self
            .rerank
            .as_ref()
            .map_or(0, |r| r.top_n)
            .min(results.len());
        let texts: Vec<String> = results[..top_n]
            .iter()
            .flat_map(|r| {
                r.segments.iter().map(|s| match &r.display_name {
                    Some(title) if !title.is_empty() => format!("{title}\n{}", s.text),
                    _ => s.text.clone(),
                })
            })
            .collect();
        // A query document without free text ranks by its filter alone: nothing to rerank by.
        let requested = requested && !query.trim().is_empty();
        let (outcome, scores) = crate::rerank::score(
            self.rerank.as_ref(),
            requested,
            query,
            &texts,
            deadline,
            "context",
        )
        .await;
        let Some(scores) = scores else {
            return outcome;
        };
        let mut head: Vec<ContextResult> = results.drain(..top_n).collect();
        let mut next = scores.iter();
        let mut best: Vec<f32> = Vec::with_capacity(head.len());
        for record in &mut head {
            let mine: Vec<f32> = next.by_ref().take(record.segments.len()).copied().collect();
            for (segment, score) in record.segments.iter_mut().zip(&mine) {
                segment.rerank_score = Some(f64::from(*score));
            }
            crate::rerank::reorder(&mut record.segments, &mine, |s| &mut s.relevancy);
            let top = mine.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            record.rerank_score = top.is_finite().then_some(f64::from(top));
            best.push(top);
        }
        crate::rerank::reorder(&mut head, &best, |r| &mut r.relevancy);
        results.splice(0..0, head);
        outcome
    }

    /// Sums the BM25 statistics of every part's syncs; a shard that does not answer is left out.
    async fn context_stats(
        &self,
        req: &ContextSearch,
        parts: &[(String, Vec<usize>)],
        scopes: &[Scope],
        alternatives: &AlternativesFn<'_, usize>,
        request_id: &str,
        deadline: Instant,
    ) -> TermStats {
        let plan = PartPlan {
            shards: &self.shards,
            alternatives,
            hedge_after: self.settings.hedge_after,
            deadline: tokio::time::Instant::from_std(deadline),
            rpc: "context_term_stats",
        };
        let call = |_: &str, client: ShardClient, members: Vec<usize>, timeout| {
            let request = ContextStatsRequest {
                project_id: req.project_id.clone(),
                sync_ids: members.iter().map(|&i| scopes[i].sync.id.clone()).collect(),
                query: req.query.clone(),
            };
            async move {
                client
                    .context_term_stats(request, request_id, timeout)
                    .await
            }
        };
        let outcomes =
            join_all(parts.iter().map(|(shard_id, members)| {
                run_part(&plan, shard_id.clone(), members.clone(), &call)
            }))
            .await;
        let mut total = TermStats::default();
        for outcome in outcomes {
            for (_, _, stats, _) in &outcome.answers {
                total.merge(stats);
            }
            for (shard_id, _, err) in &outcome.failed {
                tracing::warn!(request_id, shard_id = %shard_id, error = %err, "segment statistics failed on a shard");
            }
        }
        total
    }

    /// A segment and the segments around it, if the identity may read its record. An unknown,
    /// stale or forbidden pointer gives the same error.
    pub async fn read_segment_context(
        &self,
        req: ReadContext,
        request_id: &str,
    ) -> Result<ReadContextResponse> {
        let pointer = Pointer::decode(&req.pointer).ok_or_else(no_such_segment)?;
        let sync = self
            .store
            .get_sync(&req.project_id, &pointer.sync_id)
            .await?
            .ok_or_else(no_such_segment)?;
        let (mut scopes, _) = self
            .scopes(&req.project_id, vec![sync], &req.identity)
            .await?;
        let Scope { sync, principals } = scopes.pop().expect("one scope");
        let request = ReadSegmentsRequest {
            project_id: req.project_id.clone(),
            sync_id: sync.id.clone(),
            record_id: pointer.record_id.clone(),
            ordinal: pointer.ordinal,
            before: req.before,
            after: req.after,
            principals,
        };
        let timeout = Duration::from_millis(self.settings.search.deadline_ms);
        let mut last_error = Error::Unavailable("no shard holding this sync is available".into());
        let stale = self.stale_replicas(&req.project_id).await;
        for shard_id in &sync.shard_ids {
            if stale.skips(STALE_SYNC, &sync.id, &sync.shard_ids, shard_id) {
                continue;
            }
            let Some(client) = self.shards.get(shard_id) else {
                continue;
            };
            match client
                .read_segments(request.clone(), request_id, timeout)
                .await
            {
                Ok(None) => return Err(no_such_segment()),
                Ok(Some(read)) => {
                    let anchor = read
                        .segments
                        .iter()
                        .find(|s| s.ordinal == pointer.ordinal)
                        .ok_or_else(no_such_segment)?;
                    if text_hash(&anchor.text) != pointer.text_hash {
                        return Err(no_such_segment());
                    }
                    return Ok(ReadContextResponse {
                        id: format!("{}.{}", sync.id, read.record.record_id),
                        sync_id: sync.id.clone(),
                        source: sync.source.clone(),
                        display_name: read.record.display_name.clone(),
                        generation: read.record.generation,
                        total_segments: read.record.segments,
                        segments: read
                            .segments
                            .iter()
                            .map(|s| ContextSegment {
                                pointer: pointer_of(s),
                                text: s.text.clone(),
                                ordinal: s.ordinal,
                                anchor: s.ordinal == pointer.ordinal,
                            })
                            .collect(),
                    });
                }
                Err(err) => {
                    tracing::warn!(request_id, shard_id = %shard_id, error = %err, "reading segments failed on a shard");
                    last_error = err;
                }
            }
        }
        Err(last_error)
    }
}

fn as_refs(v: &[(String, f64)]) -> Vec<(&str, f64)> {
    v.iter().map(|(k, s)| (k.as_str(), *s)).collect()
}

/// The syncs of `all` (a project's) of the given sources and ids (empty: any); an id the project
/// does not have is refused, naming `syncIds[i]`.
fn scoped_syncs(
    all: Vec<SyncRow>,
    sources: &[String],
    sync_ids: &[String],
) -> Result<Vec<SyncRow>> {
    if let Some((i, _)) = sync_ids
        .iter()
        .enumerate()
        .find(|(_, id)| !all.iter().any(|s| &s.id == *id))
    {
        return Err(Error::invalid(
            format!("syncIds[{i}]"),
            "this project has no sync with this id",
        ));
    }
    Ok(all
        .into_iter()
        .filter(|s| sources.is_empty() || sources.contains(&s.source))
        .filter(|s| sync_ids.is_empty() || sync_ids.contains(&s.id))
        .collect())
}

/// The fields a query over `syncs` may name: every record's, then the metadata the syncs declare
/// (a name has one kind per project), with those declarations.
pub fn content_catalog(syncs: &[SyncRow]) -> (agentsearch_query::Catalog, Vec<FieldDecl>) {
    let mut declared: Vec<FieldDecl> = Vec::new();
    for sync in syncs {
        for field in &sync.fields {
            if !declared.iter().any(|f| f.name == field.name) {
                declared.push(field.clone());
            }
        }
    }
    let metadata: Vec<agentsearch_query::FieldDef> = declared
        .iter()
        .filter_map(|f| {
            Some(agentsearch_query::FieldDef {
                name: f.name.clone(),
                kind: agentsearch_query::FieldKind::from_declared(&f.kind)?,
                description: format!("metadata declared by the project's syncs ({})", f.kind),
            })
        })
        .collect();
    (agentsearch_query::Catalog::content(&metadata), declared)
}

fn pointer_of(s: &SegmentData) -> String {
    Pointer {
        sync_id: s.sync_id.clone(),
        record_id: s.record_id.clone(),
        ordinal: s.ordinal,
        text_hash: text_hash(&s.text),
    }
    .encode()
}

/// What decides whether a record must be rewritten: everything indexed from it, and the
/// segmentation settings.
fn content_hash(record: &RecordInput, params: SegmentParams) -> String {
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    // v2: the record's typed fields are indexed (records of v1 are rewritten when sent again).
    field(b"record/v2");
    field(format!("{}/{}", params.segment_words, params.overlap_words).as_bytes());
    field(record.display_name.as_deref().unwrap_or("").as_bytes());
    for value in &record.fields {
        field(value.name.as_bytes());
        field(format!("{:?}", value.value).as_bytes());
    }
    field(record.acl.tokens().join("\n").as_bytes());
    field(record.text.as_bytes());
    if let Some(segments) = &record.segments {
        for s in segments {
            field(s.text.as_bytes());
            let bytes: Vec<u8> = s.vector.iter().flat_map(|x| x.to_le_bytes()).collect();
            field(&bytes);
        }
    }
    let digest = h.finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Segments and embeds the changed records (blocking). Generations continue the stored ones.
fn prepare_records(
    changed: Vec<(RecordInput, String)>,
    existing: &HashMap<String, RecordEntry>,
    params: SegmentParams,
    embedder: &dyn agentsearch_embed::Embedder,
    batch_size: usize,
) -> Result<Vec<(IndexedRecord, String)>> {
    let mut out = Vec::with_capacity(changed.len());
    let mut to_embed: Vec<String> = Vec::new();
    let mut slots: Vec<(usize, usize)> = Vec::new();
    for (record, hash) in changed {
        let generation = existing.get(&record.id).map_or(0, |e| e.generation) + 1;
        let principals = record.acl.tokens();
        let segments: Vec<IndexedSegment> = match record.segments {
            Some(given) => given
                .into_iter()
                .enumerate()
                .map(|(i, s)| IndexedSegment {
                    ordinal: i as u32,
                    text: s.text,
                    vector: normalised(s.vector),
                })
                .collect(),
            None => segment(&record.text, params)
                .into_iter()
                .enumerate()
                .map(|(i, text)| {
                    to_embed.push(segment_embedding_text(
                        record.display_name.as_deref(),
                        &text,
                    ));
                    slots.push((out.len(), i));
                    IndexedSegment {
                        ordinal: i as u32,
                        text,
                        vector: Vec::new(),
                    }
                })
                .collect(),
        };
        out.push((
            IndexedRecord {
                record_id: record.id,
                display_name: record.display_name,
                generation,
                principals,
                segments,
                fields: record.fields,
            },
            hash,
        ));
    }
    if !to_embed.is_empty() {
        let vectors = agentsearch_embed::embed_batched(embedder, &to_embed, batch_size, |_| {})
            .map_err(|e| {
                tracing::error!(error = %e, "embedding segments failed");
                Error::Unavailable("the embedding model is unavailable".into())
            })?;
        for ((record, segment), vector) in slots.into_iter().zip(vectors) {
            out[record].0.segments[segment].vector = vector;
        }
    }
    Ok(out)
}

/// Scales a vector to unit length (inner product = cosine, as for the deployment's own vectors).
fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}
