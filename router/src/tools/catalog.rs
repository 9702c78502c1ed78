//! Catalog maintenance: validate, count tokens, skip unchanged tools, embed in batches, place new
//! integrations, write every replica under the write quorum (see [`crate::cluster::quorum`]: replicas that
//! miss the write are marked stale, not read from, and repaired by [`crate::cluster::repair`]), then record
//! the ledger. A batch is acknowledged only once all of it is indexed on a quorum of every
//! integration's replicas.
//!
//! The ledger (metadata store) is the record of what the shards hold. Every write follows one
//! protocol so that a failure at any step leaves the ledger pessimistic, never optimistic, and a
//! later write of the same names repairs everything:
//! 1. mark the names pending: content hash cleared (so any later upsert rewrites them) and every
//!    integration that may still hold a copy recorded as stale;
//! 2. write the shards (every replica; the write quorum must acknowledge);
//! 3. delete the names from their stale integrations;
//! 4. record the final entries (or remove them, for a delete).
//!
//! The protocol runs in [`crate::tools::catalog_write`], on a task a caller cannot cancel: a client that
//! disconnects mid-write leaves a complete write, not a half-done one. A name is pending in the
//! ledger before any shard holds it, so every tool a shard holds is one the ledger knows and a
//! delete reaches.
//!
//! Writes to one project are serialised within a router. Two routers writing the same tool name
//! at the same moment may leave the ledger on one version and the shards on the other; the next
//! write of that name repairs it.

use std::collections::{BTreeSet, HashMap, HashSet};

use agentsearch_common::shard::IndexedTool;
use agentsearch_common::tool::{ToolDefinition, ToolRecord};
use agentsearch_common::{Error, FieldViolation, Result};
use agentsearch_fusion::tokens::count_tokens;
use agentsearch_store::CatalogEntry;
use sha2::{Digest, Sha256};

use crate::tools::catalog_write::CatalogWrite;
pub use crate::tools::catalog_write::{DeleteOutcome, PreparedBatch, UpsertOutcome};
use crate::{Router, detached};

/// Tools per upsert call.
pub const MAX_BATCH: usize = 1000;

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

    /// The I/O half of an upsert, following the ledger protocol of this module, on a task of its
    /// own under the project's lock: a caller going away cannot stop it half-way.
    pub async fn write_upsert(
        &self,
        batch: PreparedBatch,
        request_id: &str,
    ) -> Result<UpsertOutcome> {
        if batch.tools.is_empty() {
            return Ok(UpsertOutcome {
                upserted: 0,
                unchanged: batch.unchanged,
            });
        }
        let project_id = batch.project_id.clone();
        let serial = self.write_locks.lock(&project_id).await;
        let write = self.catalog_write(&project_id, request_id);
        let outcome = detached(async move {
            let _serial = serial;
            write.upsert(batch).await
        })
        .await;
        self.invalidate_placements(&project_id);
        self.invalidate_stale(&project_id);
        outcome
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
        let serial = self.write_locks.lock(project_id).await;
        let write = self.catalog_write(project_id, request_id);
        let outcome = detached(async move {
            let _serial = serial;
            write.delete(unique).await
        })
        .await;
        self.invalidate_placements(project_id);
        self.invalidate_stale(project_id);
        self.invalidate_plans(project_id, false);
        outcome
    }

    fn catalog_write(&self, project_id: &str, request_id: &str) -> CatalogWrite {
        CatalogWrite {
            store: self.store.clone(),
            shards: self.shards.clone(),
            replication: self.settings.replication,
            write_quorum: self.settings.write_quorum,
            project_id: project_id.to_string(),
            request_id: request_id.to_string(),
        }
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
