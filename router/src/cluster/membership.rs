//! Membership changes: shards that are drained, a rebalance toward even load, and the replica
//! moves that carry both out while reads and writes go on; and the placements view operators
//! read (`agentsearch admin placements`).
//!
//! A move takes one replica of an integration or sync from shard `from` to shard `to`, in steps
//! that every router's repair pass advances (passes are idempotent; the state is in the
//! metadata store, so a router that stops mid-move leaves it to the others):
//!
//! 1. join: `to` is marked stale and, once every router's cached marks show it
//!    ([`Router::settle`]), added to the key's replicas. From then on writes go to it (a failed
//!    one marks it again) and reads skip it;
//! 2. fill: the repair ([`crate::cluster::repair`]) copies the key into `to` from a healthy replica (tools
//!    with their vectors, records with their segments, vectors and ACL tokens: nothing is
//!    embedded again) and clears the mark. It is held back until every router's cached
//!    placements include `to` ([`Router::settle`]), so no write can have missed `to` unnoticed;
//! 3. leave: once `to` is healthy, `from` is removed from the replicas;
//! 4. delete: once no router can still read `from` for the key (again [`Router::settle`]), its
//!    copy is deleted from `from` (if reachable) and the move is done.
//!
//! A key keeps its healthy replicas throughout: it has `R + 1` replicas between 1 and 3.
//!
//! A drained shard (`admin drain`) gets no new placements, and each of its keys is moved to the
//! least loaded reachable shard that does not hold it. A drain declared `lost` also marks the
//! shard's replicas stale (its data is not trusted), and a key whose only replica was there is
//! placed on another shard empty, its ledger entries forgotten (so the same content written
//! again is stored, not skipped as unchanged) and reported lost. A rebalance moves replicas from
//! the most to the least loaded reachable shards until they differ by one at most (load: the
//! number of replicas a shard holds).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Integrations and syncs whose only replica was lost.
pub(crate) const LOST: &str = "agentsearch_replicas_lost_total";

use agentsearch_common::shard::{ExportToolsRequest, MAX_LIST_RECORDS};
use agentsearch_common::shard::{ListRecordsRequest, RecordDeleteRequest, ShardDeleteRequest};
use agentsearch_common::{Error, Result};
use agentsearch_store::{
    LostReplica, ReplicaMove, ReplicaSet, STALE_INTEGRATION, STALE_SYNC, ShardDrain, StaleReplica,
};
use serde::Serialize;

use crate::Router;
use crate::cluster::placement::rendezvous;

/// Steps of replica moves, by reason and step.
pub(crate) const MOVE_STEPS: &str = "agentsearch_replica_move_steps_total";
/// The reason of a move made by a drain.
pub const DRAIN: &str = "drain";
/// The reason of a move made by a rebalance.
pub const REBALANCE: &str = "rebalance";
/// Time one call deleting a moved replica's copy has.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Names per delete call.
const NAMES_PER_DELETE: usize = 512;

/// What a pass found of the cluster: replicas, stale marks, reachability, moves.
struct Cluster {
    sets: Vec<ReplicaSet>,
    /// Stale marks and when they were made.
    stale: BTreeMap<(String, String, String, String), i64>,
    reachable: BTreeSet<String>,
    draining: BTreeSet<String>,
    /// Keys with a move in progress.
    moving: BTreeSet<(String, String, String)>,
    /// Replicas per shard, counting the targets of moves not yet joined.
    load: BTreeMap<String, usize>,
}

impl Cluster {
    fn healthy(&self, set: &ReplicaSet, shard: &str) -> bool {
        self.reachable.contains(shard)
            && !self.stale.contains_key(&(
                set.project_id.clone(),
                set.kind.clone(),
                set.key.clone(),
                shard.to_string(),
            ))
    }

    /// Reachable shards that are not drained, the least loaded first (ties by a hash of the key,
    /// so keys spread).
    fn targets(&self, set: &ReplicaSet) -> Vec<String> {
        let eligible: Vec<String> = self
            .reachable
            .iter()
            .filter(|id| !self.draining.contains(*id) && !set.shard_ids.contains(id))
            .cloned()
            .collect();
        let by_hash = rendezvous(&key_of(set), &eligible, eligible.len());
        let mut ranked: Vec<(usize, usize, String)> = by_hash
            .into_iter()
            .enumerate()
            .map(|(rank, id)| (self.load.get(&id).copied().unwrap_or(0), rank, id))
            .collect();
        ranked.sort();
        ranked.into_iter().map(|(_, _, id)| id).collect()
    }
}

fn key_of(set: &ReplicaSet) -> String {
    format!("{}/{}/{}", set.project_id, set.kind, set.key)
}

fn move_key(m: &ReplicaMove) -> (String, String, String) {
    (m.project_id.clone(), m.kind.clone(), m.key.clone())
}

fn set_key(s: &ReplicaSet) -> (String, String, String) {
    (s.project_id.clone(), s.kind.clone(), s.key.clone())
}

/// Milliseconds since the Unix epoch, as the metadata store records times.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Moves that bring the load of `eligible` shards within one of each other, as far as the
/// replicas allow: `(index in sets, from, to)`, each set moved once at most, never onto a shard
/// that holds it. Sets in `busy` (already moving) stay. Load counts every replica of `sets` on
/// an eligible shard.
pub fn plan_rebalance(
    sets: &[ReplicaSet],
    eligible: &BTreeSet<String>,
    busy: &BTreeSet<usize>,
) -> Vec<(usize, String, String)> {
    let mut load: BTreeMap<&str, usize> = eligible.iter().map(|id| (id.as_str(), 0)).collect();
    let mut holders: Vec<BTreeSet<&str>> = Vec::with_capacity(sets.len());
    for set in sets {
        let held: BTreeSet<&str> = set.shard_ids.iter().map(String::as_str).collect();
        for id in &held {
            if let Some(n) = load.get_mut(id) {
                *n += 1;
            }
        }
        holders.push(held);
    }
    let mut moved: BTreeSet<usize> = busy.clone();
    let mut plan = Vec::new();
    loop {
        let mut order: Vec<(&str, usize)> = load.iter().map(|(id, n)| (*id, *n)).collect();
        order.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
        let mut step = None;
        'pairs: for (from, from_load) in order.iter().rev() {
            for (to, to_load) in &order {
                if *from_load <= to_load + 1 {
                    break;
                }
                for (i, held) in holders.iter().enumerate() {
                    if !moved.contains(&i) && held.contains(from) && !held.contains(to) {
                        step = Some((i, *from, *to));
                        break 'pairs;
                    }
                }
            }
        }
        let Some((i, from, to)) = step else {
            return plan;
        };
        moved.insert(i);
        holders[i].remove(from);
        holders[i].insert(to);
        *load.get_mut(from).expect("eligible") -= 1;
        *load.get_mut(to).expect("eligible") += 1;
        plan.push((i, from.to_string(), to.to_string()));
    }
}

/// What `admin placements` shows.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementsView {
    pub shards: Vec<ShardView>,
    pub keys: Vec<KeyView>,
    pub moves: Vec<MoveView>,
    pub lost: Vec<LostView>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardView {
    pub shard_id: String,
    /// Configured addresses answering with this id (empty for an id no address answers with).
    pub address: Option<String>,
    pub reachable: bool,
    /// `serving`, `draining` (replicas left to move), `drained`, or `gone` (an id that no
    /// configured address answers with any more).
    pub state: String,
    /// The drain declared the shard's data lost.
    pub lost: bool,
    pub replicas: usize,
    pub stale: usize,
    pub moving_in: usize,
    pub moving_out: usize,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    pub project_id: String,
    pub kind: String,
    pub key: String,
    pub replicas: Vec<ReplicaView>,
    /// Healthy replicas (reachable, not stale).
    pub healthy: usize,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaView {
    pub shard_id: String,
    /// `healthy`, `stale` (missed writes, being repaired), `joining` (a move's new replica, not
    /// filled yet), `unreachable`.
    pub state: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveView {
    pub project_id: String,
    pub kind: String,
    pub key: String,
    pub from: String,
    pub to: String,
    pub reason: String,
    /// `planned`, `filling`, `leaving` (the old replica is out, its copy deleted soon).
    pub step: String,
    pub created_at_ms: i64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LostView {
    pub project_id: String,
    pub kind: String,
    pub key: String,
    pub shard_id: String,
    pub lost_at_ms: i64,
}

/// What `admin drain` answers.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainView {
    pub shard_id: String,
    pub lost: bool,
    /// Replicas still on the shard.
    pub replicas_left: usize,
}

/// What a membership pass leaves for the repair pass that follows it.
pub(crate) struct Membership {
    /// Replica moves not finished.
    pub moves: Vec<ReplicaMove>,
    /// Shards being drained.
    pub draining: BTreeSet<String>,
}

impl Router {
    /// How long after a placement change every router has seen it: twice the metadata cache,
    /// and a second of margin.
    pub fn settle(&self) -> Duration {
        self.settings.metadata_cache * 2 + Duration::from_secs(1)
    }

    /// Drains and moves, as the store has them now.
    async fn drains_and_moves(&self) -> Result<(Vec<ShardDrain>, Vec<ReplicaMove>)> {
        Ok((
            self.store.drains().await?,
            self.store.replica_moves().await?,
        ))
    }

    /// The whole cluster's replicas, marks and load, beside the given drains and moves.
    async fn cluster(&self, drains: &[ShardDrain], moves: &[ReplicaMove]) -> Result<Cluster> {
        let draining: BTreeSet<String> = drains.iter().map(|d| d.shard_id.clone()).collect();
        let sets = self.store.all_replicas().await?;
        let marks = self.store.stale_replicas(None).await?;
        let mut load: BTreeMap<String, usize> = BTreeMap::new();
        for set in &sets {
            for id in &set.shard_ids {
                *load.entry(id.clone()).or_default() += 1;
            }
        }
        for m in moves.iter().filter(|m| m.added_at.is_none()) {
            *load.entry(m.to_shard.clone()).or_default() += 1;
        }
        let cluster = Cluster {
            sets,
            stale: marks
                .into_iter()
                .map(|m| ((m.project_id, m.kind, m.key, m.shard_id), m.marked_at))
                .collect(),
            reachable: self.shards.reachable_ids(),
            draining,
            moving: moves.iter().map(move_key).collect(),
            load,
        };
        Ok(cluster)
    }

    /// One pass over drains and moves (part of [`Router::repair_stale`]): plans the moves of
    /// drained shards, a rebalance when `shards.auto_rebalance` is on and nothing moves, and
    /// advances every move one step where it can. The whole cluster is read only when something
    /// drains or moves, or rebalancing is automatic. Returns what still moves and what drains.
    pub(crate) async fn membership_pass(&self) -> Result<Membership> {
        let (drains, mut moves) = self.drains_and_moves().await?;
        let draining: BTreeSet<String> = drains.iter().map(|d| d.shard_id.clone()).collect();
        // Drains requested through another router reach this one's placements here.
        self.shards.set_draining(draining.clone());
        if drains.is_empty() && moves.is_empty() && !self.settings.auto_rebalance {
            return Ok(Membership { moves, draining });
        }
        let mut cluster = self.cluster(&drains, &moves).await?;
        for drain in &drains {
            if let Err(err) = self.plan_drain(drain, &mut cluster).await {
                tracing::warn!(shard_id = %drain.shard_id, error = %err, "planning a drain failed");
            }
        }
        if self.settings.auto_rebalance && moves.is_empty() && drains.is_empty() {
            let planned = self.plan_rebalance_moves(&cluster);
            for m in &planned {
                self.store.put_move(m).await?;
            }
        }
        if !drains.is_empty() || self.settings.auto_rebalance {
            moves = self.store.replica_moves().await?;
        }
        if moves.is_empty() {
            return Ok(Membership { moves, draining });
        }
        for m in moves {
            if let Err(err) = self.advance(m.clone(), &cluster).await {
                tracing::warn!(
                    project_id = %m.project_id, kind = %m.kind, key = %m.key, from = %m.from_shard,
                    to = %m.to_shard, error = %err, "a replica move step failed"
                );
            }
        }
        Ok(Membership {
            moves: self.store.replica_moves().await?,
            draining,
        })
    }

    /// Records the moves of the keys of a drained shard that have none yet.
    async fn plan_drain(&self, drain: &ShardDrain, cluster: &mut Cluster) -> Result<()> {
        let on: Vec<ReplicaSet> = cluster
            .sets
            .iter()
            .filter(|s| s.shard_ids.contains(&drain.shard_id))
            .cloned()
            .collect();
        if drain.lost {
            // Its data is not trusted: nothing reads it or copies from it.
            let marks: Vec<StaleReplica> = on
                .iter()
                .filter(|s| {
                    !cluster.stale.contains_key(&(
                        s.project_id.clone(),
                        s.kind.clone(),
                        s.key.clone(),
                        drain.shard_id.clone(),
                    ))
                })
                .map(|s| StaleReplica {
                    project_id: s.project_id.clone(),
                    kind: s.kind.clone(),
                    key: s.key.clone(),
                    shard_id: drain.shard_id.clone(),
                    epoch: 0,
                    marked_at: 0,
                })
                .collect();
            if !marks.is_empty() {
                self.store.mark_stale(&marks).await?;
                for m in marks {
                    self.invalidate_stale(&m.project_id);
                    cluster
                        .stale
                        .insert((m.project_id, m.kind, m.key, m.shard_id), now_ms());
                }
            }
        }
        for set in on {
            if cluster.moving.contains(&set_key(&set)) {
                continue;
            }
            let Some(to) = cluster.targets(&set).into_iter().next() else {
                tracing::warn!(
                    shard_id = %drain.shard_id, project_id = %set.project_id, kind = %set.kind,
                    key = %set.key, "no reachable shard left to take a drained replica"
                );
                continue;
            };
            let has_source = set.shard_ids.iter().any(|id| cluster.healthy(&set, id));
            if !has_source {
                if drain.lost && set.shard_ids.len() == 1 {
                    self.replace_lost(&set, &drain.shard_id, &to).await?;
                    *cluster.load.entry(to).or_default() += 1;
                } else {
                    tracing::warn!(
                        shard_id = %drain.shard_id, project_id = %set.project_id,
                        kind = %set.kind, key = %set.key,
                        "a drained key has no healthy replica to copy from: waiting"
                    );
                }
                continue;
            }
            let m = ReplicaMove {
                project_id: set.project_id.clone(),
                kind: set.kind.clone(),
                key: set.key.clone(),
                from_shard: drain.shard_id.clone(),
                to_shard: to.clone(),
                reason: DRAIN.into(),
                created_at: now_ms(),
                added_at: None,
                removed_at: None,
            };
            if self.store.put_move(&m).await? {
                cluster.moving.insert(set_key(&set));
                *cluster.load.entry(to).or_default() += 1;
            }
        }
        Ok(())
    }

    /// Places a key whose only replica was lost on `to`, empty; forgets its ledger entries and
    /// reports it lost.
    pub(crate) async fn replace_lost(&self, set: &ReplicaSet, lost: &str, to: &str) -> Result<()> {
        if !self
            .store
            .move_replica(&set.project_id, &set.kind, &set.key, lost, to)
            .await?
        {
            return Ok(());
        }
        self.store
            .forget_content(&set.project_id, &set.kind, &set.key)
            .await?;
        self.store
            .record_lost(&[LostReplica {
                project_id: set.project_id.clone(),
                kind: set.kind.clone(),
                key: set.key.clone(),
                shard_id: lost.to_string(),
                lost_at: now_ms(),
            }])
            .await?;
        self.invalidate_placements(&set.project_id);
        self.invalidate_stale(&set.project_id);
        metrics::counter!(LOST, "kind" => set.kind.clone()).increment(1);
        tracing::error!(
            project_id = %set.project_id, kind = %set.kind, key = %set.key, shard_id = %lost,
            to = %to, "the only replica of this key was lost: placed anew, empty; its content \
                       must be written again"
        );
        Ok(())
    }

    fn plan_rebalance_moves(&self, cluster: &Cluster) -> Vec<ReplicaMove> {
        let eligible: BTreeSet<String> = cluster
            .reachable
            .iter()
            .filter(|id| !cluster.draining.contains(*id))
            .cloned()
            .collect();
        // Only keys healthy everywhere move: a stale or unreachable replica is the repair's.
        let busy: BTreeSet<usize> = cluster
            .sets
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                cluster.moving.contains(&set_key(s))
                    || s.shard_ids.iter().any(|id| !cluster.healthy(s, id))
            })
            .map(|(i, _)| i)
            .collect();
        let created_at = now_ms();
        plan_rebalance(&cluster.sets, &eligible, &busy)
            .into_iter()
            .map(|(i, from, to)| {
                let set = &cluster.sets[i];
                ReplicaMove {
                    project_id: set.project_id.clone(),
                    kind: set.kind.clone(),
                    key: set.key.clone(),
                    from_shard: from,
                    to_shard: to,
                    reason: REBALANCE.into(),
                    created_at,
                    added_at: None,
                    removed_at: None,
                }
            })
            .collect()
    }

    /// Plans a rebalance and, unless `dry_run`, records its moves (the repair passes carry them
    /// out). Returns the moves.
    pub async fn rebalance(&self, dry_run: bool) -> Result<Vec<MoveView>> {
        let (drains, moves) = self.drains_and_moves().await?;
        let cluster = self.cluster(&drains, &moves).await?;
        let planned = self.plan_rebalance_moves(&cluster);
        let mut out = Vec::with_capacity(planned.len());
        for m in planned {
            if dry_run || self.store.put_move(&m).await? {
                out.push(move_view(&m));
            }
        }
        Ok(out)
    }

    /// Advances one move by a step, when it can.
    async fn advance(&self, mut m: ReplicaMove, cluster: &Cluster) -> Result<()> {
        let now = now_ms();
        let settle = self.settle().as_millis() as i64;
        let set = cluster
            .sets
            .iter()
            .find(|s| s.project_id == m.project_id && s.kind == m.kind && s.key == m.key);
        let Some(set) = set else {
            // The key is gone (a sync deleted, an integration emptied).
            self.store
                .delete_move(&m.project_id, &m.kind, &m.key)
                .await?;
            return Ok(());
        };
        match (m.added_at, m.removed_at) {
            (None, _) => {
                if !set.shard_ids.contains(&m.from_shard) {
                    // Moved meanwhile by other means (a lost shard's replicas).
                    return Ok(self
                        .store
                        .delete_move(&m.project_id, &m.kind, &m.key)
                        .await?);
                }
                if !cluster.reachable.contains(&m.to_shard)
                    || cluster.draining.contains(&m.to_shard)
                {
                    // Planned again next pass, onto a shard that can take it.
                    return Ok(self
                        .store
                        .delete_move(&m.project_id, &m.kind, &m.key)
                        .await?);
                }
                let mark = (
                    m.project_id.clone(),
                    m.kind.clone(),
                    m.key.clone(),
                    m.to_shard.clone(),
                );
                if !set.shard_ids.contains(&m.to_shard) {
                    // Marked first, added once every router's cached marks show the mark: no
                    // router reads the new replica before it is filled.
                    match cluster.stale.get(&mark) {
                        None => {
                            self.store
                                .mark_stale(&[StaleReplica {
                                    project_id: m.project_id.clone(),
                                    kind: m.kind.clone(),
                                    key: m.key.clone(),
                                    shard_id: m.to_shard.clone(),
                                    epoch: 0,
                                    marked_at: 0,
                                }])
                                .await?;
                            self.invalidate_stale(&m.project_id);
                            return Ok(());
                        }
                        Some(marked_at) if now < marked_at + settle => return Ok(()),
                        Some(_) => {}
                    }
                    self.store
                        .add_replica(&m.project_id, &m.kind, &m.key, &m.to_shard)
                        .await?;
                    self.invalidate_placements(&m.project_id);
                }
                m.added_at = Some(now);
                self.store.update_move(&m).await?;
                step(&m, "joined");
                tracing::info!(
                    project_id = %m.project_id, kind = %m.kind, key = %m.key, from = %m.from_shard,
                    to = %m.to_shard, reason = %m.reason, "replica joining; the repair fills it"
                );
            }
            (Some(added), None) => {
                if !set.shard_ids.contains(&m.from_shard) {
                    m.removed_at = Some(now);
                    self.store.update_move(&m).await?;
                    return Ok(());
                }
                if !set.shard_ids.contains(&m.to_shard) {
                    // Undone by other means: start again.
                    return Ok(self
                        .store
                        .delete_move(&m.project_id, &m.kind, &m.key)
                        .await?);
                }
                if now < added + settle || !cluster.healthy(set, &m.to_shard) {
                    return Ok(());
                }
                if self
                    .store
                    .remove_replica(&m.project_id, &m.kind, &m.key, &m.from_shard)
                    .await?
                {
                    self.invalidate_placements(&m.project_id);
                    self.invalidate_stale(&m.project_id);
                }
                m.removed_at = Some(now);
                self.store.update_move(&m).await?;
                step(&m, "left");
                tracing::info!(
                    project_id = %m.project_id, kind = %m.kind, key = %m.key, from = %m.from_shard,
                    to = %m.to_shard, "replica moved; the old copy is deleted once unread"
                );
            }
            (Some(_), Some(removed)) => {
                if now < removed + settle {
                    return Ok(());
                }
                if !set.shard_ids.contains(&m.from_shard)
                    && cluster.reachable.contains(&m.from_shard)
                {
                    self.delete_copy(&m).await?;
                }
                self.store
                    .delete_move(&m.project_id, &m.kind, &m.key)
                    .await?;
                step(&m, "done");
            }
        }
        Ok(())
    }

    /// Deletes the copy of a moved key from the shard it left.
    async fn delete_copy(&self, m: &ReplicaMove) -> Result<()> {
        let Some(client) = self.shards.get(&m.from_shard) else {
            return Ok(());
        };
        let request_id = format!("move-{}", uuid::Uuid::new_v4().simple());
        match m.kind.as_str() {
            STALE_INTEGRATION => {
                let tools = client
                    .export_tools(
                        ExportToolsRequest {
                            project_id: m.project_id.clone(),
                            integration: m.key.clone(),
                        },
                        &request_id,
                        CALL_TIMEOUT,
                    )
                    .await?;
                let names: Vec<String> = tools.into_iter().map(|t| t.record.name).collect();
                for names in names.chunks(NAMES_PER_DELETE) {
                    client
                        .delete_tools(
                            ShardDeleteRequest {
                                project_id: m.project_id.clone(),
                                integration: m.key.clone(),
                                names: names.to_vec(),
                            },
                            &request_id,
                            CALL_TIMEOUT,
                        )
                        .await?;
                }
            }
            STALE_SYNC => loop {
                let page = client
                    .list_records(
                        ListRecordsRequest {
                            project_id: m.project_id.clone(),
                            sync_id: m.key.clone(),
                            after: String::new(),
                            limit: MAX_LIST_RECORDS,
                        },
                        &request_id,
                        CALL_TIMEOUT,
                    )
                    .await?;
                if page.is_empty() {
                    break;
                }
                client
                    .delete_records(
                        RecordDeleteRequest {
                            project_id: m.project_id.clone(),
                            sync_id: m.key.clone(),
                            record_ids: page.into_iter().map(|r| r.record_id).collect(),
                        },
                        &request_id,
                        CALL_TIMEOUT,
                    )
                    .await?;
            },
            other => {
                return Err(Error::Internal(format!("unknown replica kind {other}")));
            }
        }
        Ok(())
    }

    /// Starts (or updates) the drain of a shard: see the module docs.
    pub async fn drain_shard(&self, shard_id: &str, lost: bool) -> Result<DrainView> {
        let known = self.shards.ids().iter().any(|id| id == shard_id)
            || !self.store.replicas_on(shard_id).await?.is_empty();
        if !known {
            return Err(Error::NotFound(format!(
                "shard `{shard_id}` is neither configured nor holds replicas"
            )));
        }
        let (drains, moves) = self.drains_and_moves().await?;
        let cluster = self.cluster(&drains, &moves).await?;
        let others = cluster
            .reachable
            .iter()
            .filter(|id| *id != shard_id && !cluster.draining.contains(*id))
            .count();
        if others == 0 {
            return Err(Error::invalid(
                "shardId",
                "no other reachable shard that is not drained could take its replicas",
            ));
        }
        let requested_at = drains
            .iter()
            .find(|d| d.shard_id == shard_id)
            .map_or_else(now_ms, |d| d.requested_at);
        self.store
            .put_drain(&ShardDrain {
                shard_id: shard_id.to_string(),
                lost,
                requested_at,
            })
            .await?;
        let mut draining = cluster.draining;
        draining.insert(shard_id.to_string());
        self.shards.set_draining(draining);
        tracing::info!(shard_id, lost, "shard drain requested");
        Ok(DrainView {
            shard_id: shard_id.to_string(),
            lost,
            replicas_left: self.store.replicas_on(shard_id).await?.len(),
        })
    }

    /// Ends the drain of a shard: it takes new placements again. Moves already planned go on.
    pub async fn undrain_shard(&self, shard_id: &str) -> Result<bool> {
        let had = self.store.delete_drain(shard_id).await?;
        let drains = self.store.drains().await?;
        self.shards
            .set_draining(drains.into_iter().map(|d| d.shard_id).collect());
        Ok(had)
    }

    /// Where every integration and sync is, with replica health, shards, moves and lost keys.
    pub async fn placements_view(&self) -> Result<PlacementsView> {
        let (drains, moves) = self.drains_and_moves().await?;
        let cluster = self.cluster(&drains, &moves).await?;
        let lost = self.store.lost_replicas().await?;
        let joining: BTreeSet<(String, String, String, String)> = moves
            .iter()
            .filter(|m| m.added_at.is_some() && m.removed_at.is_none())
            .map(|m| {
                (
                    m.project_id.clone(),
                    m.kind.clone(),
                    m.key.clone(),
                    m.to_shard.clone(),
                )
            })
            .collect();
        let mut keys = Vec::with_capacity(cluster.sets.len());
        for set in &cluster.sets {
            let replicas: Vec<ReplicaView> = set
                .shard_ids
                .iter()
                .map(|id| {
                    let k = (
                        set.project_id.clone(),
                        set.kind.clone(),
                        set.key.clone(),
                        id.clone(),
                    );
                    let state = if !cluster.reachable.contains(id) {
                        "unreachable"
                    } else if cluster.stale.contains_key(&k) && joining.contains(&k) {
                        "joining"
                    } else if cluster.stale.contains_key(&k) {
                        "stale"
                    } else {
                        "healthy"
                    };
                    ReplicaView {
                        shard_id: id.clone(),
                        state: state.into(),
                    }
                })
                .collect();
            keys.push(KeyView {
                project_id: set.project_id.clone(),
                kind: set.kind.clone(),
                key: set.key.clone(),
                healthy: replicas.iter().filter(|r| r.state == "healthy").count(),
                replicas,
            });
        }
        let statuses = self.shards.statuses();
        let mut ids: BTreeSet<String> = self.shards.ids().into_iter().collect();
        ids.extend(cluster.load.keys().cloned());
        ids.extend(drains.iter().map(|d| d.shard_id.clone()));
        let configured: BTreeSet<String> = self.shards.ids().into_iter().collect();
        let shards = ids
            .into_iter()
            .map(|id| {
                let status = statuses.iter().find(|s| s.shard_id.as_deref() == Some(&id));
                let replicas = cluster
                    .sets
                    .iter()
                    .filter(|s| s.shard_ids.contains(&id))
                    .count();
                let drain = drains.iter().find(|d| d.shard_id == id);
                let state = match (drain, configured.contains(&id)) {
                    (Some(_), _) if replicas > 0 => "draining",
                    (Some(_), _) => "drained",
                    (None, false) => "gone",
                    (None, true) => "serving",
                };
                ShardView {
                    address: status.map(|s| s.address.clone()),
                    reachable: cluster.reachable.contains(&id),
                    state: state.into(),
                    lost: drain.is_some_and(|d| d.lost),
                    replicas,
                    stale: cluster.stale.keys().filter(|k| k.3 == id).count(),
                    moving_in: moves
                        .iter()
                        .filter(|m| m.to_shard == id && m.removed_at.is_none())
                        .count(),
                    moving_out: moves
                        .iter()
                        .filter(|m| m.from_shard == id && m.removed_at.is_none())
                        .count(),
                    shard_id: id,
                }
            })
            .collect();
        Ok(PlacementsView {
            shards,
            keys,
            moves: moves.iter().map(move_view).collect(),
            lost: lost
                .into_iter()
                .map(|l| LostView {
                    project_id: l.project_id,
                    kind: l.kind,
                    key: l.key,
                    shard_id: l.shard_id,
                    lost_at_ms: l.lost_at,
                })
                .collect(),
        })
    }

    /// Forgets the lost-key reports (once their content was written again); returns how many.
    pub async fn clear_lost(&self) -> Result<u64> {
        Ok(self.store.clear_lost().await?)
    }

    /// Whether the mark is a move's new replica that routers may not all know yet: its repair
    /// waits, so that no write can have missed it unnoticed.
    pub(crate) fn joining_recently(
        &self,
        moves: &[ReplicaMove],
        mark: &StaleReplica,
        now: i64,
    ) -> bool {
        let settle = self.settle().as_millis() as i64;
        moves.iter().any(|m| {
            m.project_id == mark.project_id
                && m.kind == mark.kind
                && m.key == mark.key
                && m.to_shard == mark.shard_id
                && m.removed_at.is_none()
                && m.added_at.is_none_or(|added| now < added + settle)
        })
    }
}

fn step(m: &ReplicaMove, step: &'static str) {
    metrics::counter!(MOVE_STEPS, "reason" => m.reason.clone(), "step" => step).increment(1);
}

fn move_view(m: &ReplicaMove) -> MoveView {
    MoveView {
        project_id: m.project_id.clone(),
        kind: m.kind.clone(),
        key: m.key.clone(),
        from: m.from_shard.clone(),
        to: m.to_shard.clone(),
        reason: m.reason.clone(),
        step: match (m.added_at, m.removed_at) {
            (None, _) => "planned",
            (Some(_), None) => "filling",
            (Some(_), Some(_)) => "leaving",
        }
        .into(),
        created_at_ms: m.created_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(i: usize, shards: &[usize]) -> ReplicaSet {
        ReplicaSet {
            project_id: "p".into(),
            kind: STALE_INTEGRATION.into(),
            key: format!("k{i}"),
            shard_ids: shards.iter().map(|s| format!("s{s}")).collect(),
        }
    }

    fn loads(sets: &[ReplicaSet], eligible: &BTreeSet<String>) -> BTreeMap<String, usize> {
        let mut out: BTreeMap<String, usize> = eligible.iter().map(|e| (e.clone(), 0)).collect();
        for s in sets {
            for id in &s.shard_ids {
                if let Some(n) = out.get_mut(id) {
                    *n += 1;
                }
            }
        }
        out
    }

    fn apply(sets: &mut [ReplicaSet], plan: &[(usize, String, String)]) {
        for (i, from, to) in plan {
            let slot = sets[*i]
                .shard_ids
                .iter_mut()
                .find(|id| *id == from)
                .expect("from holds the key");
            *slot = to.clone();
        }
    }

    #[test]
    fn a_new_empty_shard_takes_its_share() {
        let sets: Vec<ReplicaSet> = (0..9).map(|i| set(i, &[i % 2])).collect();
        let eligible: BTreeSet<String> = ["s0", "s1", "s2"].map(String::from).into();
        let plan = plan_rebalance(&sets, &eligible, &BTreeSet::new());
        assert_eq!(plan.len(), 3, "{plan:?}");
        assert!(plan.iter().all(|(_, _, to)| to == "s2"));
    }

    #[test]
    fn busy_keys_and_ineligible_shards_stay() {
        let sets: Vec<ReplicaSet> = (0..4).map(|i| set(i, &[0])).collect();
        let eligible: BTreeSet<String> = ["s0", "s1"].map(String::from).into();
        let busy: BTreeSet<usize> = [0, 1, 2].into();
        let plan = plan_rebalance(&sets, &eligible, &busy);
        assert_eq!(plan, vec![(3, "s0".to_string(), "s1".to_string())]);
        // A shard outside `eligible` neither gives nor takes.
        let only_s1: BTreeSet<String> = ["s1"].map(String::from).into();
        assert!(plan_rebalance(&sets, &only_s1, &BTreeSet::new()).is_empty());
    }

    proptest! {
        #[test]
        fn plans_are_valid_and_even_out_the_load(
            placed in proptest::collection::vec(proptest::collection::btree_set(0usize..6, 1..4), 0..60),
            shards in 1usize..7,
        ) {
            let mut sets: Vec<ReplicaSet> = placed
                .iter()
                .enumerate()
                .map(|(i, held)| set(i, &held.iter().copied().collect::<Vec<_>>()))
                .collect();
            let eligible: BTreeSet<String> = (0..shards).map(|s| format!("s{s}")).collect();
            let before = loads(&sets, &eligible);
            let plan = plan_rebalance(&sets, &eligible, &BTreeSet::new());
            // Each key moves once at most, from a holder to an eligible non-holder.
            let mut seen = BTreeSet::new();
            for (i, from, to) in &plan {
                prop_assert!(seen.insert(*i));
                prop_assert!(sets[*i].shard_ids.contains(from));
                prop_assert!(!sets[*i].shard_ids.contains(to));
                prop_assert!(eligible.contains(from) && eligible.contains(to));
            }
            apply(&mut sets, &plan);
            for s in &sets {
                let unique: BTreeSet<&String> = s.shard_ids.iter().collect();
                prop_assert_eq!(unique.len(), s.shard_ids.len());
            }
            let after = loads(&sets, &eligible);
            let spread = |l: &BTreeMap<String, usize>| {
                l.values().max().copied().unwrap_or(0) - l.values().min().copied().unwrap_or(0)
            };
            prop_assert!(spread(&after) <= spread(&before));
            prop_assert_eq!(after.values().sum::<usize>(), before.values().sum::<usize>());
            // With one replica per key every shard can take any key: within one of each other.
            if sets.iter().all(|s| s.shard_ids.len() == 1 && eligible.contains(&s.shard_ids[0])) {
                prop_assert!(spread(&after) <= 1, "{:?}", after);
            }
        }
    }
}
