//! Catalog maintenance: validate, count tokens, skip unchanged tools, embed in batches, place new
//! integrations, write every replica, then record the ledger. A batch is acknowledged only once all
//! of it is indexed; retrying a batch is always safe.

use std::collections::{BTreeMap, HashMap, HashSet};
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
    /// Changed tools with their ledger entries.
    tools: Vec<(IndexedTool, CatalogEntry)>,
    unchanged: u32,
    embed_ms: u64,
}

impl Router {
    /// Upserts one batch of tool definitions into the project's catalog.
    pub async fn upsert_tools(
        &self,
        project_id: &str,
        tools: Vec<ToolDefinition>,
        request_id: &str,
    ) -> Result<UpsertOutcome> {
        let prepared = self.prepare_upsert(project_id, tools).await?;
        self.write_upsert(prepared, request_id).await
    }

    /// The CPU-bound half of an upsert: validate, count tokens, skip unchanged tools, embed.
    /// Nothing is written; a stream of batches prepares the next batch while the previous one is
    /// written.
    pub async fn prepare_upsert(
        &self,
        project_id: &str,
        tools: Vec<ToolDefinition>,
    ) -> Result<PreparedBatch> {
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
        let mut batch = PreparedBatch {
            project_id: project_id.to_string(),
            tools: Vec::new(),
            unchanged: 0,
            embed_ms: 0,
        };
        if tools.is_empty() {
            return Ok(batch);
        }

        let model_id = self.embedder.inner().model_id().to_string();
        let records: Vec<(ToolRecord, String)> = tools
            .iter()
            .map(|def| {
                let mut record = def.to_record();
                record.tokens = count_tokens(&record.llm_definition_json());
                let hash = content_hash(&record, &model_id);
                (record, hash)
            })
            .collect();
        let names: Vec<String> = records.iter().map(|(r, _)| r.name.clone()).collect();
        let existing: HashMap<String, CatalogEntry> = self
            .store
            .catalog_entries(project_id, &names)
            .await?
            .into_iter()
            .map(|e| (e.name.clone(), e))
            .collect();
        let (changed, unchanged): (Vec<_>, Vec<_>) =
            records.into_iter().partition(|(record, hash)| {
                existing
                    .get(&record.name)
                    .is_none_or(|e| &e.content_hash != hash || e.integration != record.integration)
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
        .map_err(|e| Error::Unavailable(e.to_string()))?;
        batch.embed_ms = started.elapsed().as_millis() as u64;
        for ((record, hash), vector) in changed.into_iter().zip(vectors) {
            let entry = CatalogEntry {
                name: record.name.clone(),
                integration: record.integration.clone(),
                content_hash: hash,
            };
            batch.tools.push((IndexedTool { record, vector }, entry));
        }
        Ok(batch)
    }

    /// The I/O half of an upsert: place new integrations, write every replica (one call per
    /// shard), remove moved tools from their old integration, then record the ledger.
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
        self.store.ensure_project(project_id).await?;
        // Where the tools are now (read at write time: an earlier batch of the same stream may
        // have moved one since this batch was prepared).
        let names: Vec<String> = batch
            .tools
            .iter()
            .map(|(t, _)| t.record.name.clone())
            .collect();
        let previous: HashMap<String, CatalogEntry> = self
            .store
            .catalog_entries(project_id, &names)
            .await?
            .into_iter()
            .map(|e| (e.name.clone(), e))
            .collect();
        let mut by_integration: BTreeMap<String, Vec<IndexedTool>> = BTreeMap::new();
        let mut entries = Vec::with_capacity(batch.tools.len());
        for (tool, entry) in batch.tools {
            by_integration
                .entry(tool.record.integration.clone())
                .or_default()
                .push(tool);
            entries.push(entry);
        }
        // One write per shard with the tools of every integration (replica) it holds.
        let mut by_shard: BTreeMap<String, Vec<IndexedTool>> = BTreeMap::new();
        for (integration, tools) in by_integration {
            for shard_id in self.place(project_id, &integration).await? {
                if self.shards.get(&shard_id).is_none() {
                    return Err(Error::Unavailable(format!(
                        "integration `{integration}` is placed on shard {shard_id}, which is not configured"
                    )));
                }
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
                let client = client.ok_or_else(|| {
                    Error::Unavailable(format!("shard {shard_id} is not configured"))
                })?;
                client
                    .upsert_tools(request, request_id, WRITE_TIMEOUT)
                    .await
            }
        });
        try_join_all(writes).await?;

        // Tools that moved to another integration leave their old index.
        let moved: BTreeMap<String, Vec<String>> =
            entries.iter().fold(BTreeMap::new(), |mut acc, e| {
                if let Some(old) = previous
                    .get(&e.name)
                    .filter(|old| old.integration != e.integration)
                {
                    acc.entry(old.integration.clone())
                        .or_default()
                        .push(e.name.clone());
                }
                acc
            });
        self.delete_from_shards(project_id, moved, request_id)
            .await?;
        self.store.put_catalog_entries(project_id, &entries).await?;
        tracing::debug!(
            request_id,
            tools = entries.len(),
            embed_ms = batch.embed_ms,
            write_ms = started.elapsed().as_millis() as u64,
            "catalog batch indexed"
        );
        Ok(UpsertOutcome {
            upserted: entries.len() as u32,
            unchanged: batch.unchanged,
        })
    }

    /// Deletes tools by name from the project's catalog.
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
        let unique: Vec<String> = names
            .into_iter()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let found = self.store.catalog_entries(project_id, &unique).await?;
        let by_integration: BTreeMap<String, Vec<String>> =
            found.iter().fold(BTreeMap::new(), |mut acc, e| {
                acc.entry(e.integration.clone())
                    .or_default()
                    .push(e.name.clone());
                acc
            });
        self.delete_from_shards(project_id, by_integration, request_id)
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

    async fn delete_from_shards(
        &self,
        project_id: &str,
        by_integration: BTreeMap<String, Vec<String>>,
        request_id: &str,
    ) -> Result<()> {
        if by_integration.is_empty() {
            return Ok(());
        }
        let placements = self.placements(project_id).await?;
        let mut calls = Vec::new();
        for (integration, names) in by_integration {
            let Some(placement) = placements.iter().find(|p| p.integration == integration) else {
                continue;
            };
            for shard_id in &placement.shard_ids {
                let client = self
                    .shards
                    .get(shard_id)
                    .ok_or_else(|| {
                        Error::Unavailable(format!(
                            "shard {shard_id} holding `{integration}` is not configured"
                        ))
                    })?
                    .clone();
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
