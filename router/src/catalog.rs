//! Catalog maintenance: validate, count tokens, skip unchanged tools, embed in batches, place new
//! integrations, write every replica, then record the ledger. A batch is acknowledged only once all
//! of it is indexed.
//!
//! The ledger (metadata store) is the record of what the shards hold. Every write follows one
//! protocol so that a failure at any step leaves the ledger pessimistic, never optimistic, and a
//! later write of the same names repairs everything:
//! 1. mark the names pending: content hash cleared (so any later upsert rewrites them) and every
//!    integration that may still hold a copy recorded as stale;
//! 2. write the shards;
//! 3. delete the names from their stale integrations;
//! 4. record the final entries (or remove them, for a delete).
//!
//! Writes to one project are serialised within a router. Two routers writing the same tool name
//! at the same moment may leave the ledger on one version and the shards on the other; the next
//! write of that name repairs it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use agentsearch_common::shard::{IndexedTool, ShardDeleteRequest, ShardUpsertRequest};
use agentsearch_common::tool::{ToolDefinition, ToolRecord};
use agentsearch_common::{Error, FieldViolation, Result};
use agentsearch_fusion::tokens::count_tokens;
use agentsearch_store::CatalogEntry;
use futures::future::try_join_all;
use sha2::{Digest, Sha256};

use crate::Router;
use crate::placement::rendezvous;
use crate::shards::ShardClient;

/// Tools per upsert call.
pub const MAX_BATCH: usize = 1000;
/// Time a shard has to index one batch.
const WRITE_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpsertOutcome {
    /// New or changed tools written.
    pub upserted: u32,
    /// Tools identical to the catalog's.
    pub unchanged: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeleteOutcome {
    pub deleted: u32,
    pub not_found: u32,
}

/// A validated, embedded batch, ready to be written ([`Router::prepare_upsert`]).
pub struct PreparedBatch {
    project_id: String,
    /// Changed tools and their content hashes.
    tools: Vec<(IndexedTool, String)>,
    unchanged: u32,
    embed_ms: u64,
}

impl PreparedBatch {
    /// Names of the tools this batch writes.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|(t, _)| t.record.name.as_str())
    }
}

impl Router {
    /// Upserts one batch of tool definitions into the project's catalog.
    pub async fn upsert_tools(
        &self,
        project_id: &str,
        tools: Vec<ToolDefinition>,
        request_id: &str,
    ) -> Result<UpsertOutcome> {
        let prepared = self
            .prepare_upsert(project_id, tools, &HashSet::new())
            .await?;
        self.write_upsert(prepared, request_id).await
    }

    /// The CPU-bound half of an upsert: validate, count tokens, skip unchanged tools, embed.
    /// Nothing is written. `in_flight` names tools of earlier batches not written yet: they are
    /// treated as changed, since the ledger does not show those batches yet.
    pub async fn prepare_upsert(
        &self,
        project_id: &str,
        tools: Vec<ToolDefinition>,
        in_flight: &HashSet<String>,
    ) -> Result<PreparedBatch> {
        let model_id = self.embedder.inner().model_id().to_string();
        let records = tokio::task::spawn_blocking(move || validated_records(&tools, &model_id))
            .await
            .map_err(|e| Error::Internal(format!("validation task: {e}")))??;
        let mut batch = PreparedBatch {
            project_id: project_id.to_string(),
            tools: Vec::new(),
            unchanged: 0,
            embed_ms: 0,
        };
        if records.is_empty() {
            return Ok(batch);
        }
        let names: Vec<String> = records.iter().map(|(r, _)| r.name.clone()).collect();
        let existing = self.ledger(project_id, &names).await?;
        let (changed, unchanged): (Vec<_>, Vec<_>) =
            records.into_iter().partition(|(record, hash)| {
                in_flight.contains(&record.name)
                    || existing.get(&record.name).is_none_or(|e| {
                        &e.content_hash != hash
                            || e.integration != record.integration
                            || !e.stale.is_empty()
                    })
            });
        batch.unchanged = unchanged.len() as u32;
        if changed.is_empty() {
            return Ok(batch);
        }

        let started = std::time::Instant::now();
        let texts: Vec<String> = changed.iter().map(|(r, _)| r.embedding_text()).collect();
        let embedder = self.embedder.inner().clone();
        let batch_size = self.settings.embed_batch_size;
        let vectors = tokio::task::spawn_blocking(move || {
            agentsearch_embed::embed_batched(embedder.as_ref(), &texts, batch_size, |_| {})
        })
        .await
        .map_err(|e| Error::Internal(format!("embedding task: {e}")))?
        .map_err(|e| {
            tracing::error!(error = %e, "embedding tools failed");
            Error::Unavailable("the embedding model is unavailable".into())
        })?;
        batch.embed_ms = started.elapsed().as_millis() as u64;
        batch.tools = changed
            .into_iter()
            .zip(vectors)
            .map(|((record, hash), vector)| (IndexedTool { record, vector }, hash))
            .collect();
        Ok(batch)
    }

    /// The I/O half of an upsert, following the ledger protocol of this module.
    pub async fn write_upsert(
        &self,
        batch: PreparedBatch,
        request_id: &str,
    ) -> Result<UpsertOutcome> {
        let started = std::time::Instant::now();
        let project_id = batch.project_id.as_str();
        if batch.tools.is_empty() {
            return Ok(UpsertOutcome {
                upserted: 0,
                unchanged: batch.unchanged,
            });
        }
        let _serial = self.project_write_lock(project_id).lock_owned().await;
        self.store.ensure_project(project_id).await?;

        // 1. Pending: hash cleared, every integration that may hold an old copy marked stale.
        let names: Vec<String> = batch.names().map(str::to_string).collect();
        let previous = self.ledger(project_id, &names).await?;
        let mut pending = Vec::with_capacity(batch.tools.len());
        let mut finals = Vec::with_capacity(batch.tools.len());
        for (tool, hash) in &batch.tools {
            let record = &tool.record;
            let mut stale: BTreeSet<String> = BTreeSet::new();
            if let Some(old) = previous.get(&record.name) {
                stale.extend(old.stale.iter().cloned());
                stale.insert(old.integration.clone());
            }
            stale.remove(&record.integration);
            pending.push(CatalogEntry {
                name: record.name.clone(),
                integration: record.integration.clone(),
                content_hash: String::new(),
                stale: stale.into_iter().collect(),
            });
            finals.push(CatalogEntry {
                name: record.name.clone(),
                integration: record.integration.clone(),
                content_hash: hash.clone(),
                stale: Vec::new(),
            });
        }
        self.store.put_catalog_entries(project_id, &pending).await?;

        // 2. One write per shard with the tools of every integration (replica) it holds.
        let mut by_integration: BTreeMap<String, Vec<IndexedTool>> = BTreeMap::new();
        for (tool, _) in batch.tools {
            by_integration
                .entry(tool.record.integration.clone())
                .or_default()
                .push(tool);
        }
        let mut by_shard: BTreeMap<String, Vec<IndexedTool>> = BTreeMap::new();
        for (integration, tools) in by_integration {
            for shard_id in self.place(project_id, &integration).await? {
                self.placed_shard(&integration, &shard_id)?;
                by_shard
                    .entry(shard_id)
                    .or_default()
                    .extend(tools.iter().cloned());
            }
        }
        let writes = by_shard.into_iter().map(|(shard_id, tools)| {
            let client = self.shards.get(&shard_id).cloned();
            let request = ShardUpsertRequest {
                project_id: project_id.to_string(),
                tools,
            };
            async move {
                let client =
                    client.ok_or_else(|| Error::Unavailable("a shard is not available".into()))?;
                client
                    .upsert_tools(request, request_id, WRITE_TIMEOUT)
                    .await
            }
        });
        try_join_all(writes).await?;

        // 3. Old copies leave the integrations they moved out of.
        self.delete_from_shards(project_id, stale_by_integration(&pending), request_id)
            .await?;

        // 4. Final entries.
        self.store.put_catalog_entries(project_id, &finals).await?;
        tracing::debug!(
            request_id,
            tools = finals.len(),
            embed_ms = batch.embed_ms,
            write_ms = started.elapsed().as_millis() as u64,
            "catalog batch indexed"
        );
        Ok(UpsertOutcome {
            upserted: finals.len() as u32,
            unchanged: batch.unchanged,
        })
    }

    /// Deletes tools by name from the project's catalog, following the ledger protocol.
    pub async fn delete_tools(
        &self,
        project_id: &str,
        names: Vec<String>,
        request_id: &str,
    ) -> Result<DeleteOutcome> {
        if names.len() > MAX_BATCH {
            return Err(Error::invalid(
                "names",
                format!("at most {MAX_BATCH} names per call, got {}", names.len()),
            ));
        }
        if let Some(i) = names.iter().position(|n| n.is_empty()) {
            return Err(Error::invalid(format!("names[{i}]"), "must not be empty"));
        }
        let unique: Vec<String> = names
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let _serial = self.project_write_lock(project_id).lock_owned().await;
        let found = self.store.catalog_entries(project_id, &unique).await?;
        let pending: Vec<CatalogEntry> = found
            .iter()
            .map(|e| {
                let mut stale: BTreeSet<String> = e.stale.iter().cloned().collect();
                stale.insert(e.integration.clone());
                CatalogEntry {
                    content_hash: String::new(),
                    stale: stale.into_iter().collect(),
                    ..e.clone()
                }
            })
            .collect();
        self.store.put_catalog_entries(project_id, &pending).await?;
        self.delete_from_shards(project_id, stale_by_integration(&pending), request_id)
            .await?;
        let found_names: Vec<String> = found.iter().map(|e| e.name.clone()).collect();
        let deleted = self
            .store
            .delete_catalog_entries(project_id, &found_names)
            .await?;
        Ok(DeleteOutcome {
            deleted: deleted as u32,
            not_found: (unique.len() - found.len()) as u32,
        })
    }

    /// Deletes names from every replica of their integrations. Placements are read from the store,
    /// not the cache (another router may have placed an integration moments ago); an integration
    /// never placed holds nothing.
    async fn delete_from_shards(
        &self,
        project_id: &str,
        by_integration: BTreeMap<String, Vec<String>>,
        request_id: &str,
    ) -> Result<()> {
        if by_integration.is_empty() {
            return Ok(());
        }
        self.invalidate_placements(project_id);
        let placements = self.placements(project_id).await?;
        let mut calls = Vec::new();
        for (integration, names) in by_integration {
            let Some(placement) = placements.iter().find(|p| p.integration == integration) else {
                continue;
            };
            for shard_id in &placement.shard_ids {
                let client = self.placed_shard(&integration, shard_id)?;
                let request = ShardDeleteRequest {
                    project_id: project_id.to_string(),
                    integration: integration.clone(),
                    names: names.clone(),
                };
                calls.push(async move {
                    client
                        .delete_tools(request, request_id, WRITE_TIMEOUT)
                        .await
                });
            }
        }
        try_join_all(calls).await?;
        Ok(())
    }

    /// The shards of an integration: recorded placement, or a new one by rendezvous hashing.
    async fn place(&self, project_id: &str, integration: &str) -> Result<Vec<String>> {
        if let Some(p) = self
            .placements(project_id)
            .await?
            .iter()
            .find(|p| p.integration == integration)
        {
            return Ok(p.shard_ids.clone());
        }
        let chosen = rendezvous(
            &format!("{project_id}/{integration}"),
            &self.shards.ids(),
            self.settings.replication,
        );
        let placed = self.store.place(project_id, integration, &chosen).await?;
        self.invalidate_placements(project_id);
        tracing::info!(project_id, integration, shards = ?placed, "integration placed");
        Ok(placed)
    }

    /// The client of a shard an integration is placed on; an error if that shard is not configured
    /// (the shard set changed since the placement was recorded).
    fn placed_shard(&self, integration: &str, shard_id: &str) -> Result<ShardClient> {
        self.shards.get(shard_id).cloned().ok_or_else(|| {
            tracing::error!(
                integration,
                shard_id,
                "integration placed on a shard that is not configured"
            );
            Error::Unavailable(format!(
                "a shard holding integration `{integration}` is not available"
            ))
        })
    }

    /// The ledger entries of the named tools that exist, by name.
    async fn ledger(
        &self,
        project_id: &str,
        names: &[String],
    ) -> Result<HashMap<String, CatalogEntry>> {
        let entries = self.store.catalog_entries(project_id, names).await?;
        Ok(entries.into_iter().map(|e| (e.name.clone(), e)).collect())
    }

    pub(crate) fn project_write_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.write_locks
            .lock()
            .entry(key.to_string())
            .or_default()
            .clone()
    }
}

/// Validates a batch and turns it into records with token counts and content hashes.
fn validated_records(
    tools: &[ToolDefinition],
    model_id: &str,
) -> Result<Vec<(ToolRecord, String)>> {
    if tools.len() > MAX_BATCH {
        return Err(Error::invalid(
            "tools",
            format!("at most {MAX_BATCH} tools per batch, got {}", tools.len()),
        ));
    }
    let mut violations: Vec<FieldViolation> = Vec::new();
    let mut first_seen: HashMap<&str, usize> = HashMap::new();
    for (i, tool) in tools.iter().enumerate() {
        if let Err(v) = tool.validate(&format!("tools[{i}]")) {
            violations.extend(v);
        }
        if let Some(j) = first_seen.insert(tool.name.as_str(), i) {
            violations.push(FieldViolation::new(
                format!("tools[{i}].name"),
                format!("duplicates tools[{j}].name"),
            ));
        }
    }
    if !violations.is_empty() {
        return Err(Error::invalid_many(violations));
    }
    Ok(tools
        .iter()
        .map(|def| {
            let mut record = def.to_record();
            record.tokens = count_tokens(&record.llm_definition_json());
            let hash = content_hash(&record, model_id);
            (record, hash)
        })
        .collect())
}

/// Names to delete per stale integration.
fn stale_by_integration(entries: &[CatalogEntry]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in entries {
        for integration in &entry.stale {
            out.entry(integration.clone())
                .or_default()
                .push(entry.name.clone());
        }
    }
    out
}

/// Identifies a tool's indexed content: its record and the model that embedded it.
fn content_hash(record: &ToolRecord, model_id: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(model_id.as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::to_vec(record).unwrap_or_default());
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
