//! The ledger protocol of catalog writes (see [`crate::tools::catalog`]), run on a task of its own under
//! the project's lock (see [`crate::detached`]) so that nothing a caller does can stop it
//! half-way. It reads placements from the store, not a router's cache: another router may have
//! placed an integration moments ago.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use agentsearch_common::Result;
use agentsearch_common::shard::{IndexedTool, ShardDeleteRequest, ShardUpsertRequest};
use agentsearch_store::{CatalogEntry, MetadataStore, STALE_INTEGRATION};

use crate::cluster::placement::rendezvous;
use crate::cluster::quorum::Quorum;
use crate::cluster::shards::ShardSet;

/// Time a shard has to index one batch.
const WRITE_TIMEOUT: Duration = Duration::from_secs(120);

/// What a write of one project's catalog needs, owned, so it can run on its own task.
pub(crate) struct CatalogWrite {
    pub(crate) store: Arc<dyn MetadataStore>,
    pub(crate) shards: ShardSet,
    pub(crate) replication: usize,
    /// Acknowledgements each integration's write needs (see [`crate::cluster::quorum`]).
    pub(crate) write_quorum: usize,
    pub(crate) project_id: String,
    pub(crate) request_id: String,
}

impl CatalogWrite {
    /// Writes a prepared batch: pending entries, every replica, old copies, final entries.
    pub(crate) async fn upsert(&self, batch: PreparedBatch) -> Result<UpsertOutcome> {
        let started = std::time::Instant::now();
        let project_id = self.project_id.as_str();
        self.store.ensure_project(project_id).await?;

        // 1. Pending: hash cleared, every integration that may hold an old copy marked stale. A new
        //    name gets an entry too, so a tool a shard holds is always one the ledger knows.
        let names: Vec<String> = batch.names().map(str::to_string).collect();
        let previous: BTreeMap<String, CatalogEntry> = self
            .store
            .catalog_entries(project_id, &names)
            .await?
            .into_iter()
            .map(|e| (e.name.clone(), e))
            .collect();
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
        let placements = self.store.placements(project_id).await?;
        let mut by_shard: BTreeMap<String, (Vec<String>, Vec<IndexedTool>)> = BTreeMap::new();
        for (integration, tools) in by_integration {
            let placed = match placements.iter().find(|p| p.integration == integration) {
                Some(p) => p.shard_ids.clone(),
                None => self.place(&integration).await?,
            };
            for shard_id in placed {
                let (integrations, batch) = by_shard.entry(shard_id).or_default();
                integrations.push(integration.clone());
                batch.extend(tools.iter().cloned());
            }
        }
        let targets: Vec<(String, Vec<String>)> = by_shard
            .iter()
            .map(|(shard, (integrations, _))| (shard.clone(), integrations.clone()))
            .collect();
        self.quorum()
            .write(&targets, |i, client| {
                let request = ShardUpsertRequest {
                    project_id: project_id.to_string(),
                    tools: by_shard[&targets[i].0].1.clone(),
                };
                async move {
                    client
                        .upsert_tools(request, &self.request_id, WRITE_TIMEOUT)
                        .await
                }
            })
            .await?;

        // 3. Old copies leave the integrations they moved out of.
        self.delete_from_shards(stale_by_integration(&pending))
            .await?;

        // 4. Final entries.
        self.store.put_catalog_entries(project_id, &finals).await?;
        tracing::debug!(
            request_id = %self.request_id,
            tools = finals.len(),
            embed_ms = batch.embed_ms,
            write_ms = started.elapsed().as_millis() as u64,
            "catalog batch indexed"
        );
        metrics::counter!(agentsearch_common::metrics::INGESTED, "kind" => "tools")
            .increment(finals.len() as u64);
        Ok(UpsertOutcome {
            upserted: finals.len() as u32,
            unchanged: batch.unchanged,
        })
    }

    /// Deletes tools (`names` distinct): pending entries, every replica of every integration that
    /// may hold a copy, then the entries, then the recorded plans naming any of the names (all of
    /// them, found or not, so a retry after a failure here still deletes those plans).
    pub(crate) async fn delete(&self, names: Vec<String>) -> Result<DeleteOutcome> {
        let project_id = self.project_id.as_str();
        let found = self.store.catalog_entries(project_id, &names).await?;
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
        self.delete_from_shards(stale_by_integration(&pending))
            .await?;
        let found_names: Vec<String> = found.iter().map(|e| e.name.clone()).collect();
        let deleted = self
            .store
            .delete_catalog_entries(project_id, &found_names)
            .await?;
        let plans = self.store.delete_plans_naming(project_id, &names).await?;
        if !plans.is_empty() {
            tracing::info!(
                request_id = %self.request_id,
                project_id,
                plans = ?plans,
                "plans deleted with their tools"
            );
        }
        Ok(DeleteOutcome {
            deleted: deleted as u32,
            not_found: (names.len() - found.len()) as u32,
            plans_deleted: plans.len() as u32,
        })
    }

    /// Deletes names from every replica of their integrations; an integration never placed holds
    /// nothing.
    async fn delete_from_shards(
        &self,
        by_integration: BTreeMap<String, Vec<String>>,
    ) -> Result<()> {
        if by_integration.is_empty() {
            return Ok(());
        }
        let placements = self.store.placements(&self.project_id).await?;
        let mut targets: Vec<(String, Vec<String>)> = Vec::new();
        let mut requests: Vec<ShardDeleteRequest> = Vec::new();
        for (integration, names) in by_integration {
            let Some(placement) = placements.iter().find(|p| p.integration == integration) else {
                continue;
            };
            for shard_id in &placement.shard_ids {
                targets.push((shard_id.clone(), vec![integration.clone()]));
                requests.push(ShardDeleteRequest {
                    project_id: self.project_id.clone(),
                    integration: integration.clone(),
                    names: names.clone(),
                });
            }
        }
        // Targets and requests pair up by position.
        self.quorum()
            .write(&targets, |i, client| {
                let request = requests[i].clone();
                async move {
                    client
                        .delete_tools(request, &self.request_id, WRITE_TIMEOUT)
                        .await
                }
            })
            .await?;
        Ok(())
    }

    fn quorum(&self) -> Quorum<'_> {
        Quorum {
            store: self.store.as_ref(),
            shards: &self.shards,
            project_id: &self.project_id,
            kind: STALE_INTEGRATION,
            quorum: self.write_quorum,
            request_id: &self.request_id,
        }
    }

    /// Places an integration that has no placement, by rendezvous hashing over the shards (the
    /// first placement recorded wins, so concurrent routers agree).
    async fn place(&self, integration: &str) -> Result<Vec<String>> {
        let project_id = self.project_id.as_str();
        let chosen = rendezvous(
            &format!("{project_id}/{integration}"),
            &self.shards.placeable_ids(),
            self.replication,
        );
        let placed = self.store.place(project_id, integration, &chosen).await?;
        tracing::info!(project_id, integration, shards = ?placed, "integration placed");
        Ok(placed)
    }
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
    /// Recorded plans deleted because they named a deleted tool.
    pub plans_deleted: u32,
}

/// A validated, embedded batch, ready to be written ([`crate::Router::prepare_upsert`]).
pub struct PreparedBatch {
    pub(crate) project_id: String,
    /// Changed tools and their content hashes.
    pub(crate) tools: Vec<(IndexedTool, String)>,
    pub(crate) unchanged: u32,
    pub(crate) embed_ms: u64,
}

impl PreparedBatch {
    /// Names of the tools this batch writes.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|(t, _)| t.record.name.as_str())
    }
}
