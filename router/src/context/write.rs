//! The write protocol of a sync's records, run on a task of its own under the sync's lock (see
//! [`crate::detached`]) so that nothing a caller does can stop it half-way.
//!
//! The store is the record of what the shards may hold:
//! 1. every record the batch writes is marked pending in the store before any shard is written: an
//!    existing entry loses its content hash (so a retry rewrites it) and a new record gets a
//!    pending entry, so a record a shard holds is always one the store knows and can delete,
//!    whatever the moment the write is interrupted (client gone, router killed, a replica or the
//!    store failing);
//! 2. every replica is written, in calls of bounded size, under the write quorum (see
//!    [`crate::cluster::quorum`]: a replica that misses the write is marked stale);
//! 3. the store records the final entries, the ACL tokens and a new sync generation.
//!
//! A delete sends every named id to every replica, known to the store or not, then removes the
//! entries the store had.

use std::sync::Arc;
use std::time::Duration;

use agentsearch_common::shard::{IndexedRecord, RecordDeleteRequest, SegmentUpsertRequest};
use agentsearch_common::{Error, Result};
use agentsearch_store::{MetadataStore, RecordEntry, STALE_SYNC};

use crate::cluster::quorum::Quorum;
use crate::cluster::shards::ShardSet;

/// Time a shard has to index one batch.
const WRITE_TIMEOUT: Duration = Duration::from_secs(300);
/// Segments per shard write call (keeps messages well under the gRPC limit).
const SEGMENTS_PER_WRITE: usize = 4096;

/// What a write of one sync's records needs, owned, so it can run on its own task.
pub(crate) struct RecordWrite {
    pub(crate) store: Arc<dyn MetadataStore>,
    pub(crate) shards: ShardSet,
    /// Every replica of the sync, by shard id.
    pub(crate) replicas: Vec<String>,
    /// Acknowledgements the write needs (see [`crate::cluster::quorum`]).
    pub(crate) write_quorum: usize,
    pub(crate) project_id: String,
    pub(crate) sync_id: String,
    pub(crate) request_id: String,
    /// The metadata fields the sync declares.
    pub(crate) fields: Vec<agentsearch_common::shard::FieldDecl>,
}

impl RecordWrite {
    /// Writes records (with their content hashes) to every replica and records them. Returns
    /// (records written, segments written, the sync's generation after).
    pub(crate) async fn upsert(
        &self,
        records: Vec<(IndexedRecord, String)>,
    ) -> Result<(u32, u64, u64)> {
        let (project_id, sync_id) = (self.project_id.as_str(), self.sync_id.as_str());
        // 1. Pending, new records included.
        let ids: Vec<String> = records.iter().map(|(r, _)| r.record_id.clone()).collect();
        self.store
            .mark_records_pending(project_id, sync_id, &ids)
            .await?;

        // 2. Every replica, in calls of bounded size.
        let segments: u64 = records.iter().map(|(r, _)| r.segments.len() as u64).sum();
        let chunks = chunked(records.iter().map(|(r, _)| r.clone()));
        self.quorum()
            .write(&self.targets().await?, |_, client| {
                let chunks = chunks.clone();
                async move {
                    for records in chunks {
                        let request = SegmentUpsertRequest {
                            project_id: project_id.to_string(),
                            sync_id: sync_id.to_string(),
                            records,
                            fields: self.fields.clone(),
                        };
                        let answer = client
                            .upsert_segments(request, &self.request_id, WRITE_TIMEOUT)
                            .await?;
                        // A shard that predates record fields would drop them: not a write.
                        if !answer.fields_indexed {
                            return Err(Error::Unavailable(
                                "a shard of this deployment cannot index record fields yet (an \
                                 upgrade is in progress); retry shortly"
                                    .into(),
                            ));
                        }
                    }
                    Ok::<_, Error>(())
                }
            })
            .await?;

        // 3. Final entries.
        let entries: Vec<RecordEntry> = records
            .iter()
            .map(|(r, hash)| RecordEntry {
                record_id: r.record_id.clone(),
                generation: r.generation,
                content_hash: hash.clone(),
                segments: r.segments.len() as u64,
                principals: r.principals.clone(),
            })
            .collect();
        let generation = self
            .store
            .put_records(project_id, sync_id, &entries)
            .await?;
        metrics::counter!(agentsearch_common::metrics::INGESTED, "kind" => "records")
            .increment(entries.len() as u64);
        metrics::counter!(agentsearch_common::metrics::INGESTED, "kind" => "segments")
            .increment(segments);
        Ok((entries.len() as u32, segments, generation))
    }

    /// Deletes records (`ids` distinct) from every replica, then from the store. An id counts as
    /// deleted when the store knew it or a replica held it.
    pub(crate) async fn delete(&self, ids: Vec<String>) -> Result<DeleteRecordsOutcome> {
        let (project_id, sync_id) = (self.project_id.as_str(), self.sync_id.as_str());
        let found: Vec<String> = self
            .store
            .record_entries(project_id, sync_id, &ids)
            .await?
            .into_iter()
            .map(|e| e.record_id)
            .collect();
        self.store
            .mark_records_pending(project_id, sync_id, &found)
            .await?;
        // Every id goes to every replica: one the store does not know may still be on a shard.
        let held = self
            .quorum()
            .write(&self.targets().await?, |_, client| {
                let request = RecordDeleteRequest {
                    project_id: project_id.to_string(),
                    sync_id: sync_id.to_string(),
                    record_ids: ids.clone(),
                };
                async move {
                    client
                        .delete_records(request, &self.request_id, WRITE_TIMEOUT)
                        .await
                }
            })
            .await?
            .iter()
            .map(|w| w.affected)
            .max()
            .unwrap_or(0);
        let (_, generation) = self
            .store
            .delete_records(project_id, sync_id, &found)
            .await?;
        let deleted = (found.len() as u64).max(held).min(ids.len() as u64);
        Ok(DeleteRecordsOutcome {
            deleted: deleted as u32,
            not_found: (ids.len() as u64 - deleted) as u32,
            generation,
        })
    }
}

impl RecordWrite {
    /// One call per replica, each covering the sync.
    /// One call per replica of the sync, as the store lists them now: read after the records
    /// were marked pending, so a replica moved meanwhile (see [`crate::cluster::repair`]) is written too.
    async fn targets(&self) -> Result<Vec<(String, Vec<String>)>> {
        let replicas = match self.store.get_sync(&self.project_id, &self.sync_id).await? {
            Some(sync) => sync.shard_ids,
            None => self.replicas.clone(),
        };
        Ok(replicas
            .into_iter()
            .map(|shard| (shard, vec![self.sync_id.clone()]))
            .collect())
    }

    fn quorum(&self) -> Quorum<'_> {
        Quorum {
            store: self.store.as_ref(),
            shards: &self.shards,
            project_id: &self.project_id,
            kind: STALE_SYNC,
            quorum: self.write_quorum,
            request_id: &self.request_id,
        }
    }
}

/// Records in calls of at most [`SEGMENTS_PER_WRITE`] segments (a bigger record goes alone).
fn chunked(records: impl Iterator<Item = IndexedRecord>) -> Vec<Vec<IndexedRecord>> {
    let mut chunks: Vec<Vec<IndexedRecord>> = vec![Vec::new()];
    let mut in_chunk = 0;
    for record in records {
        if in_chunk > 0 && in_chunk + record.segments.len() > SEGMENTS_PER_WRITE {
            chunks.push(Vec::new());
            in_chunk = 0;
        }
        in_chunk += record.segments.len();
        chunks.last_mut().expect("one chunk").push(record);
    }
    chunks
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeleteRecordsOutcome {
    pub deleted: u32,
    pub not_found: u32,
    pub generation: u64,
}
