//! Repair of stale replicas. A replica that missed an acknowledged write is marked stale in the
//! metadata store ([`crate::cluster::quorum`]) and is not read from. A repair pass brings each such replica
//! level with a healthy one (reachable, not stale for the same key) and clears the mark:
//!
//! 1. copy: what the stale replica lacks or holds at another version is copied from the healthy
//!    one (tools with their vectors; records with their segments, vectors, fields and ACL
//!    tokens); what it holds and the healthy one does not is deleted;
//! 2. verify: both replicas are read again and must agree exactly;
//! 3. fence: no write of the key may have overlapped the copy (a write in flight could have
//!    reached the stale replica before the copy overwrote it with the source's older state). The
//!    ledger's write fence ([`agentsearch_store::MetadataStore::write_fence`]) is read before the
//!    copy and again after the verify: a pending entry or a changed fence leaves the mark for the
//!    next pass, as does a source that was marked stale meanwhile;
//! 4. clear, conditional on the mark's epoch: if the replica missed another write while the pass
//!    ran, the epoch grew and the mark stays.
//!
//! A pending ledger entry older than [`PENDING_GRACE`] belongs to a write that was abandoned
//! (its client went away for good; a retry rewrites it): it does not hold a repair back.
//!
//! A mark whose key no longer lives on the shard (the sync was deleted, the integration placed
//! elsewhere) is cleared. Passes are idempotent: several routers may run them at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use agentsearch_common::shard::{
    ExportRecordsRequest, ExportToolsRequest, IndexedRecord, IndexedTool, ListRecordsRequest,
    MAX_EXPORT_RECORDS, MAX_LIST_RECORDS, RecordDeleteRequest, RecordVersion, SegmentUpsertRequest,
    ShardDeleteRequest, ShardUpsertRequest,
};
use agentsearch_common::{Error, Result};
use agentsearch_store::{STALE_INTEGRATION, STALE_SYNC, StaleReplica};

use crate::Router;
use crate::cluster::membership::{Membership, now_ms};
use crate::cluster::placement::rendezvous;
use crate::cluster::shards::ShardClient;

pub(crate) const REPAIRS: &str = "agentsearch_replica_repairs_total";

/// Time one repair call has (an export of a large integration, a copy of a page of records).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Tools per copy call.
const TOOLS_PER_COPY: usize = 512;
/// Segments per record copy call (as in a write).
const SEGMENTS_PER_COPY: usize = 4096;
/// A mark of a key that does not live on its shard is cleared only once it is this old.
const OBSOLETE_AFTER: Duration = Duration::from_secs(60);
/// A pending ledger entry younger than this may be a write in flight.
pub const PENDING_GRACE: Duration = Duration::from_secs(600);

/// What one pass did, mark by mark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Replicas brought level and cleared.
    pub repaired: usize,
    /// Marks of keys that no longer live on the shard, cleared.
    pub obsolete: usize,
    /// Replicas copied to that still differ, or that missed a write while the pass ran.
    pub behind: usize,
    /// Marks left for later: the shard is unreachable, or no healthy replica is.
    pub waiting: usize,
    /// Marks whose repair failed (an error talking to a shard or the store).
    pub failed: usize,
    /// Replica moves in progress (drains, rebalances: [`crate::cluster::membership`]) after the pass.
    pub moving: usize,
}

impl RepairReport {
    /// Whether every mark the pass saw is gone.
    pub fn settled(&self) -> bool {
        self.behind + self.waiting + self.failed + self.moving == 0
    }
}

enum Outcome {
    Repaired,
    Obsolete,
    Behind,
    Waiting,
}

impl Router {
    /// One repair pass over every stale replica of every project (see the module docs), after
    /// moving the replicas of shards that came back without their data and advancing the moves
    /// of drains and rebalances ([`crate::cluster::membership`]).
    pub async fn repair_stale(&self) -> Result<RepairReport> {
        self.move_lost_replicas().await;
        let membership = match self.membership_pass().await {
            Ok(membership) => membership,
            Err(err) => {
                tracing::warn!(error = %err, "advancing replica moves failed");
                Membership {
                    moves: self.store.replica_moves().await?,
                    draining: self
                        .store
                        .drains()
                        .await?
                        .into_iter()
                        .map(|d| d.shard_id)
                        .collect(),
                }
            }
        };
        let marks = self.store.stale_replicas(None).await?;
        let mut report = RepairReport {
            moving: membership.moves.len(),
            ..RepairReport::default()
        };
        if marks.is_empty() {
            return Ok(report);
        }
        let now = now_ms();
        let stale: BTreeSet<(&str, &str, &str, &str)> = marks
            .iter()
            .map(|m| {
                (
                    m.project_id.as_str(),
                    m.kind.as_str(),
                    m.key.as_str(),
                    m.shard_id.as_str(),
                )
            })
            .collect();
        let reachable = self.shards.reachable_ids();
        let (moves, draining) = (membership.moves, membership.draining);
        for mark in &marks {
            let healthy = |shard: &str| {
                shard != mark.shard_id
                    && reachable.contains(shard)
                    && !stale.contains(&(
                        mark.project_id.as_str(),
                        mark.kind.as_str(),
                        mark.key.as_str(),
                        shard,
                    ))
            };
            let outcome = if draining.contains(&mark.shard_id) {
                // A drained shard's replica that has left its key is never read again, reachable
                // or not (no move ever marks a drained shard before it joins a key).
                match self.lives_on(mark).await {
                    Ok(false) => self
                        .store
                        .clear_stale(mark)
                        .await
                        .map(|_| Outcome::Obsolete)
                        .map_err(Into::into),
                    Ok(true) if !reachable.contains(&mark.shard_id) => Ok(Outcome::Waiting),
                    Ok(true) => self.repair_mark(mark, &healthy).await,
                    Err(err) => Err(err),
                }
            } else if !reachable.contains(&mark.shard_id)
                || self.joining_recently(&moves, mark, now)
            {
                Ok(Outcome::Waiting)
            } else {
                self.repair_mark(mark, &healthy).await
            };
            let label = match outcome {
                Ok(Outcome::Repaired) => {
                    report.repaired += 1;
                    tracing::info!(
                        project_id = %mark.project_id, kind = %mark.kind, key = %mark.key,
                        shard_id = %mark.shard_id, "stale replica repaired"
                    );
                    "repaired"
                }
                Ok(Outcome::Obsolete) => {
                    report.obsolete += 1;
                    "obsolete"
                }
                Ok(Outcome::Behind) => {
                    report.behind += 1;
                    "behind"
                }
                Ok(Outcome::Waiting) => {
                    report.waiting += 1;
                    "waiting"
                }
                Err(err) => {
                    report.failed += 1;
                    tracing::warn!(
                        project_id = %mark.project_id, kind = %mark.kind, key = %mark.key,
                        shard_id = %mark.shard_id, error = %err, "repairing a stale replica failed"
                    );
                    "failed"
                }
            };
            metrics::counter!(REPAIRS, "outcome" => label).increment(1);
            if matches!(label, "repaired" | "obsolete") {
                self.invalidate_stale(&mark.project_id);
            }
        }
        Ok(report)
    }

    /// Moves every replica held by a shard that answered at its address with a new id (its data
    /// dir was lost) to another shard: the new replica is marked stale first, so it is not read
    /// until the repair has copied everything into it from a surviving replica. A key with no
    /// other replica (replication 1) lost its data: it is placed on the new shard empty, its
    /// ledger entries are forgotten (so `catalog load` or record upserts of the same content
    /// store it again) and it is reported lost (`admin placements`).
    async fn move_lost_replicas(&self) {
        let replaced = self.shards.replaced();
        if replaced.is_empty() {
            return;
        }
        for lost in replaced.keys() {
            match self.move_replicas_of(lost).await {
                Ok(true) => self.shards.forget_replaced(lost),
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(shard_id = %lost, error = %err, "moving a lost shard's replicas failed");
                }
            }
        }
    }

    /// Moves the replicas of `lost`; returns whether none is left to move.
    async fn move_replicas_of(&self, lost: &str) -> Result<bool> {
        let live = self.shards.reachable_ids();
        let marks = self.store.stale_replicas(None).await?;
        let mut settled = true;
        for set in self.store.replicas_on(lost).await? {
            let stale = |id: &String| {
                marks.iter().any(|m| {
                    m.project_id == set.project_id
                        && m.kind == set.kind
                        && m.key == set.key
                        && m.shard_id == *id
                })
            };
            let survivors: Vec<&String> = set
                .shard_ids
                .iter()
                .filter(|id| *id != lost && live.contains(*id) && !stale(id))
                .collect();
            {
                if survivors.is_empty() {
                    // With a replica that is stale or unreachable, a later pass may move it.
                    if set.shard_ids.len() > 1 {
                        settled = false;
                        continue;
                    }
                    // Its only replica is gone: placed anew on the shard now at the lost one's
                    // address, empty, its ledger entries forgotten so writing it again works.
                    match self.shards.replaced().get(lost) {
                        Some(new_id) => self.replace_lost(&set, lost, new_id).await?,
                        None => settled = false,
                    }
                    continue;
                }
                let draining = self.shards.draining();
                let candidates: Vec<String> = live
                    .iter()
                    .filter(|id| !set.shard_ids.contains(id) && !draining.contains(*id))
                    .cloned()
                    .collect();
                let Some(to) = rendezvous(
                    &format!("{}/{}/{}", set.project_id, set.kind, set.key),
                    &candidates,
                    1,
                )
                .into_iter()
                .next() else {
                    tracing::warn!(
                        project_id = %set.project_id, kind = %set.kind, key = %set.key,
                        "no shard left to hold a lost replica"
                    );
                    settled = false;
                    continue;
                };
                self.store
                    .mark_stale(&[StaleReplica {
                        project_id: set.project_id.clone(),
                        kind: set.kind.clone(),
                        key: set.key.clone(),
                        shard_id: to.clone(),
                        epoch: 0,
                        marked_at: 0,
                    }])
                    .await?;
                self.invalidate_stale(&set.project_id);
                if !self
                    .store
                    .move_replica(&set.project_id, &set.kind, &set.key, lost, &to)
                    .await?
                {
                    // Another router moved it, or `to` holds it already: look again next pass.
                    settled = false;
                    continue;
                }
                tracing::info!(
                    project_id = %set.project_id, kind = %set.kind, key = %set.key,
                    from = %lost, to = %to, "lost replica moved; the repair fills it"
                );
                self.invalidate_placements(&set.project_id);
            }
        }
        Ok(settled)
    }

    /// Repairs passes every `every` until `stop` resolves; a failed pass is logged and retried.
    pub async fn keep_repairing(
        self: std::sync::Arc<Self>,
        every: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tick.tick() => {
                    if let Err(err) = self.repair_stale().await {
                        tracing::warn!(error = %err, "reading stale replicas failed");
                    }
                }
            }
        }
    }

    async fn repair_mark(
        &self,
        mark: &StaleReplica,
        healthy: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Outcome> {
        match mark.kind.as_str() {
            STALE_INTEGRATION => self.repair_integration(mark, healthy).await,
            STALE_SYNC => self.repair_sync(mark, healthy).await,
            other => Err(Error::Internal(format!(
                "unknown stale replica kind {other}"
            ))),
        }
    }

    /// Whether the mark's key still has a replica on the mark's shard.
    async fn lives_on(&self, mark: &StaleReplica) -> Result<bool> {
        Ok(match mark.kind.as_str() {
            STALE_INTEGRATION => self
                .store
                .placements(&mark.project_id)
                .await?
                .iter()
                .any(|p| p.integration == mark.key && p.shard_ids.contains(&mark.shard_id)),
            STALE_SYNC => self
                .store
                .get_sync(&mark.project_id, &mark.key)
                .await?
                .is_some_and(|s| s.shard_ids.contains(&mark.shard_id)),
            _ => false,
        })
    }

    async fn repair_integration(
        &self,
        mark: &StaleReplica,
        healthy: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Outcome> {
        let placements = self.store.placements(&mark.project_id).await?;
        let Some(placement) = placements.iter().find(|p| p.integration == mark.key) else {
            return self.clear_obsolete(mark).await;
        };
        if !placement.shard_ids.contains(&mark.shard_id) {
            return self.clear_obsolete(mark).await;
        }
        let Some((source_id, source, target)) = self.pair(&placement.shard_ids, mark, healthy)
        else {
            return Ok(Outcome::Waiting);
        };
        let Some(fence) = self.fence(mark).await? else {
            return Ok(Outcome::Behind);
        };
        let request_id = repair_request_id(mark);
        let export = || ExportToolsRequest {
            project_id: mark.project_id.clone(),
            integration: mark.key.clone(),
        };

        // 1. Copy what differs, delete what the healthy replica does not hold.
        let (want, have) = tokio::try_join!(
            source.export_tools(export(), &request_id, CALL_TIMEOUT),
            target.export_tools(export(), &request_id, CALL_TIMEOUT),
        )?;
        let have: HashMap<&str, &IndexedTool> =
            have.iter().map(|t| (t.record.name.as_str(), t)).collect();
        let copy: Vec<IndexedTool> = want
            .iter()
            .filter(|t| have.get(t.record.name.as_str()) != Some(t))
            .cloned()
            .collect();
        let wanted: BTreeSet<&str> = want.iter().map(|t| t.record.name.as_str()).collect();
        let extra: Vec<String> = have
            .keys()
            .filter(|name| !wanted.contains(*name))
            .map(|name| name.to_string())
            .collect();
        for tools in copy.chunks(TOOLS_PER_COPY) {
            let request = ShardUpsertRequest {
                project_id: mark.project_id.clone(),
                tools: tools.to_vec(),
            };
            target
                .upsert_tools(request, &request_id, CALL_TIMEOUT)
                .await?;
        }
        if !extra.is_empty() {
            let request = ShardDeleteRequest {
                project_id: mark.project_id.clone(),
                integration: mark.key.clone(),
                names: extra,
            };
            target
                .delete_tools(request, &request_id, CALL_TIMEOUT)
                .await?;
        }

        // 2. Verify: both replicas hold the same tools now.
        let (want, have) = tokio::try_join!(
            source.export_tools(export(), &request_id, CALL_TIMEOUT),
            target.export_tools(export(), &request_id, CALL_TIMEOUT),
        )?;
        if by_name(want) != by_name(have) {
            return Ok(Outcome::Behind);
        }
        self.clear(mark, &source_id, &fence).await
    }

    async fn repair_sync(
        &self,
        mark: &StaleReplica,
        healthy: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Outcome> {
        let Some(sync) = self.store.get_sync(&mark.project_id, &mark.key).await? else {
            return self.clear_obsolete(mark).await;
        };
        if !sync.shard_ids.contains(&mark.shard_id) {
            return self.clear_obsolete(mark).await;
        }
        let Some((source_id, source, target)) = self.pair(&sync.shard_ids, mark, healthy) else {
            return Ok(Outcome::Waiting);
        };
        let Some(fence) = self.fence(mark).await? else {
            return Ok(Outcome::Behind);
        };
        let request_id = repair_request_id(mark);
        let pages = RecordPages {
            project_id: &mark.project_id,
            sync_id: &mark.key,
            source: &source,
            target: &target,
            request_id: &request_id,
        };

        // 1. Copy, page by page in id order.
        let mut after = String::new();
        loop {
            let page = pages.compare(&after).await?;
            for ids in page.copy.chunks(MAX_EXPORT_RECORDS) {
                let records = source
                    .export_records(
                        ExportRecordsRequest {
                            project_id: mark.project_id.clone(),
                            sync_id: mark.key.clone(),
                            record_ids: ids.to_vec(),
                        },
                        &request_id,
                        CALL_TIMEOUT,
                    )
                    .await?;
                // A record deleted from the source since it was listed is left to the next pass.
                for records in by_segments(records) {
                    let request = SegmentUpsertRequest {
                        project_id: mark.project_id.clone(),
                        sync_id: mark.key.clone(),
                        records,
                        fields: sync.fields.clone(),
                    };
                    target
                        .upsert_segments(request, &request_id, CALL_TIMEOUT)
                        .await?;
                }
            }
            if !page.extra.is_empty() {
                let request = RecordDeleteRequest {
                    project_id: mark.project_id.clone(),
                    sync_id: mark.key.clone(),
                    record_ids: page.extra,
                };
                target
                    .delete_records(request, &request_id, CALL_TIMEOUT)
                    .await?;
            }
            match page.next {
                Some(next) => after = next,
                None => break,
            }
        }

        // 2. Verify: both replicas list the same records at the same generations.
        let mut after = String::new();
        loop {
            let page = pages.compare(&after).await?;
            if !page.copy.is_empty() || !page.extra.is_empty() {
                return Ok(Outcome::Behind);
            }
            match page.next {
                Some(next) => after = next,
                None => break,
            }
        }
        self.clear(mark, &source_id, &fence).await
    }

    /// A healthy replica of `replicas` to copy from (its id and client), and the stale one.
    fn pair(
        &self,
        replicas: &[String],
        mark: &StaleReplica,
        healthy: &(dyn Fn(&str) -> bool + Sync),
    ) -> Option<(String, ShardClient, ShardClient)> {
        let source = replicas.iter().find(|s| healthy(s.as_str()))?;
        Some((
            source.clone(),
            self.shards.get(source)?,
            self.shards.get(&mark.shard_id)?,
        ))
    }

    /// The ledger's write fence of the mark's key, `None` while a write of it may be in flight.
    async fn fence(&self, mark: &StaleReplica) -> Result<Option<String>> {
        let since = now_ms() - PENDING_GRACE.as_millis() as i64;
        Ok(self
            .store
            .write_fence(&mark.project_id, &mark.kind, &mark.key, since)
            .await?)
    }

    /// Clears the mark if no write overlapped the copy (the fence is unchanged), the source is
    /// still healthy, and the replica missed nothing since the mark was read (its epoch).
    async fn clear(&self, mark: &StaleReplica, source: &str, fence: &str) -> Result<Outcome> {
        if self.fence(mark).await?.as_deref() != Some(fence) {
            return Ok(Outcome::Behind);
        }
        let source_stale = self
            .store
            .stale_replicas(Some(&mark.project_id))
            .await?
            .iter()
            .any(|m| m.kind == mark.kind && m.key == mark.key && m.shard_id == source);
        if source_stale {
            return Ok(Outcome::Behind);
        }
        Ok(if self.store.clear_stale(mark).await? {
            Outcome::Repaired
        } else {
            Outcome::Behind
        })
    }

    /// Clears a mark whose key no longer lives on its shard; a young one is left alone (a
    /// replica being moved is marked before its placement is rewritten).
    async fn clear_obsolete(&self, mark: &StaleReplica) -> Result<Outcome> {
        if now_ms() - mark.marked_at < OBSOLETE_AFTER.as_millis() as i64 {
            return Ok(Outcome::Waiting);
        }
        self.store.clear_stale(mark).await?;
        Ok(Outcome::Obsolete)
    }
}

/// Records in calls of at most [`SEGMENTS_PER_COPY`] segments (a record larger than that alone).
fn by_segments(records: Vec<IndexedRecord>) -> Vec<Vec<IndexedRecord>> {
    let mut calls: Vec<Vec<IndexedRecord>> = Vec::new();
    let mut segments = 0;
    for record in records {
        let n = record.segments.len();
        match calls.last_mut() {
            Some(call) if segments + n <= SEGMENTS_PER_COPY => {
                call.push(record);
                segments += n;
            }
            _ => {
                calls.push(vec![record]);
                segments = n;
            }
        }
    }
    calls
}

fn repair_request_id(mark: &StaleReplica) -> String {
    format!("repair-{}-{}-{}", mark.kind, mark.key, mark.shard_id)
}

fn by_name(tools: Vec<IndexedTool>) -> BTreeMap<String, IndexedTool> {
    tools
        .into_iter()
        .map(|t| (t.record.name.clone(), t))
        .collect()
}

/// The record lists of two replicas of one sync, compared a page at a time.
struct RecordPages<'a> {
    project_id: &'a str,
    sync_id: &'a str,
    source: &'a ShardClient,
    target: &'a ShardClient,
    request_id: &'a str,
}

/// How the two lists differ over one range of ids.
#[derive(Debug, Default, PartialEq, Eq)]
struct PageDiff {
    /// Ids the target lacks or holds at another generation.
    copy: Vec<String>,
    /// Ids only the target holds.
    extra: Vec<String>,
    /// Where the next range starts (after this id), or `None` if this range was the last.
    next: Option<String>,
}

impl RecordPages<'_> {
    async fn compare(&self, after: &str) -> Result<PageDiff> {
        let request = || ListRecordsRequest {
            project_id: self.project_id.to_string(),
            sync_id: self.sync_id.to_string(),
            after: after.to_string(),
            limit: MAX_LIST_RECORDS,
        };
        let (want, have) = tokio::try_join!(
            self.source
                .list_records(request(), self.request_id, CALL_TIMEOUT),
            self.target
                .list_records(request(), self.request_id, CALL_TIMEOUT),
        )?;
        Ok(diff_page(&want, &have, MAX_LIST_RECORDS as usize))
    }
}

/// Compares two pages listed after the same id, each sorted by id and at most `limit` long. A full
/// page may end before the other: only ids up to the smaller end of the full pages are compared,
/// and the next range starts there.
fn diff_page(want: &[RecordVersion], have: &[RecordVersion], limit: usize) -> PageDiff {
    let end = |page: &[RecordVersion]| {
        (page.len() >= limit)
            .then(|| page.last().map(|r| r.record_id.clone()))
            .flatten()
    };
    let next = match (end(want), end(have)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let within = |r: &&RecordVersion| next.as_ref().is_none_or(|n| r.record_id <= *n);
    let have_gen: HashMap<&str, u64> = have
        .iter()
        .filter(within)
        .map(|r| (r.record_id.as_str(), r.generation))
        .collect();
    let want_ids: BTreeSet<&str> = want
        .iter()
        .filter(within)
        .map(|r| r.record_id.as_str())
        .collect();
    let copy = want
        .iter()
        .filter(within)
        .filter(|r| have_gen.get(r.record_id.as_str()) != Some(&r.generation))
        .map(|r| r.record_id.clone())
        .collect();
    let extra = have
        .iter()
        .filter(within)
        .filter(|r| !want_ids.contains(r.record_id.as_str()))
        .map(|r| r.record_id.clone())
        .collect();
    PageDiff { copy, extra, next }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn versions(items: &[(&str, u64)]) -> Vec<RecordVersion> {
        items
            .iter()
            .map(|(id, generation)| RecordVersion {
                record_id: id.to_string(),
                generation: *generation,
            })
            .collect()
    }

    #[test]
    fn pages_that_are_not_full_are_compared_whole() {
        let diff = diff_page(
            &versions(&[("a", 1), ("b", 2), ("d", 1)]),
            &versions(&[("a", 1), ("b", 1), ("c", 1)]),
            10,
        );
        assert_eq!(
            diff,
            PageDiff {
                copy: vec!["b".into(), "d".into()],
                extra: vec!["c".into()],
                next: None,
            }
        );
    }

    #[test]
    fn a_full_page_bounds_the_range_compared() {
        // The source's page is full at "b": "c" on the target may have a twin after the page.
        let diff = diff_page(
            &versions(&[("a", 1), ("b", 1)]),
            &versions(&[("b", 1), ("c", 1)]),
            2,
        );
        assert_eq!(diff.copy, ["a"]);
        assert!(diff.extra.is_empty());
        assert_eq!(diff.next.as_deref(), Some("b"));
    }

    #[test]
    fn record_copies_are_cut_by_segments_and_keep_every_record_in_order() {
        let segment = agentsearch_common::shard::IndexedSegment {
            ordinal: 0,
            text: String::new(),
            vector: Vec::new(),
        };
        let record = |id: &str, segments: usize| IndexedRecord {
            record_id: id.into(),
            display_name: None,
            generation: 1,
            principals: Vec::new(),
            segments: vec![segment.clone(); segments],
            fields: Vec::new(),
        };
        let calls = by_segments(vec![
            record("a", 4000),
            record("b", 96),
            record("c", 1),
            record("d", 9000),
            record("e", 2),
        ]);
        let shape: Vec<Vec<&str>> = calls
            .iter()
            .map(|c| c.iter().map(|r| r.record_id.as_str()).collect())
            .collect();
        assert_eq!(shape, [vec!["a", "b"], vec!["c"], vec!["d"], vec!["e"]]);
    }

    proptest! {
        /// Paging through two id sets with any page size finds exactly their differences.
        #[test]
        fn paging_finds_exactly_the_differences(
            want in proptest::collection::btree_map("[a-e]{1,3}", 0u64..3, 0..40),
            have in proptest::collection::btree_map("[a-e]{1,3}", 0u64..3, 0..40),
            limit in 1usize..8,
        ) {
            let page = |all: &BTreeMap<String, u64>, after: &str| -> Vec<RecordVersion> {
                all.iter()
                    .filter(|(id, _)| id.as_str() > after)
                    .take(limit)
                    .map(|(id, g)| RecordVersion { record_id: id.clone(), generation: *g })
                    .collect()
            };
            let (mut copy, mut extra) = (BTreeSet::new(), BTreeSet::new());
            let mut after = String::new();
            loop {
                let diff = diff_page(&page(&want, &after), &page(&have, &after), limit);
                copy.extend(diff.copy);
                extra.extend(diff.extra);
                match diff.next {
                    Some(next) => {
                        prop_assert!(next > after);
                        after = next;
                    }
                    None => break,
                }
            }
            let expected_copy: BTreeSet<String> = want
                .iter()
                .filter(|(id, g)| have.get(*id) != Some(g))
                .map(|(id, _)| id.clone())
                .collect();
            let expected_extra: BTreeSet<String> =
                have.keys().filter(|id| !want.contains_key(*id)).cloned().collect();
            prop_assert_eq!(copy, expected_copy);
            prop_assert_eq!(extra, expected_extra);
        }
    }
}
