//! Writes under a quorum. A write goes to every replica of each integration (or sync) it touches,
//! in one call per shard; it succeeds when every key was acknowledged by `quorum` of its replicas
//! (all of them when it has fewer). Each replica that failed is marked stale in the metadata
//! store for the keys of its call *before* the write is acknowledged, so a replica that missed an
//! acknowledged write is never read from until a repair ([`crate::cluster::repair`]) has brought it level.
//! If the mark cannot be recorded, the write fails (retryable): acknowledged means durable on the
//! quorum and known to be missing elsewhere.
//!
//! A shard whose last probe failed is not called at all (it would cost a connection timeout per
//! write): it counts as a failed replica.

use std::collections::HashMap;
use std::future::Future;

use agentsearch_common::{Error, Result};
use agentsearch_store::{MetadataStore, StaleReplica};
use futures::future::join_all;

use crate::cluster::shards::{ShardClient, ShardSet};

pub(crate) const MISSED_WRITES: &str = "agentsearch_replica_writes_missed_total";

/// How the replicas of one write are counted.
pub(crate) struct Quorum<'a> {
    pub(crate) store: &'a dyn MetadataStore,
    pub(crate) shards: &'a ShardSet,
    pub(crate) project_id: &'a str,
    /// [`agentsearch_store::STALE_INTEGRATION`] or [`agentsearch_store::STALE_SYNC`].
    pub(crate) kind: &'static str,
    /// Acknowledgements each key needs (capped at its number of replicas).
    pub(crate) quorum: usize,
    pub(crate) request_id: &'a str,
}

impl Quorum<'_> {
    /// Calls every `(shard, keys)` target through `make` (given the target's position in
    /// `targets` and the shard's client) and waits for all of them (a call in flight is never
    /// abandoned). Returns the answers of the calls that succeeded.
    pub(crate) async fn write<T, Fut>(
        &self,
        targets: &[(String, Vec<String>)],
        make: impl Fn(usize, ShardClient) -> Fut,
    ) -> Result<Vec<T>>
    where
        Fut: Future<Output = Result<T>>,
    {
        let reachable = self.shards.reachable_ids();
        let calls = targets.iter().enumerate().map(|(i, (shard, _))| {
            let call = self
                .shards
                .get(shard)
                .filter(|_| reachable.contains(shard))
                .map(|client| make(i, client));
            async move {
                match call {
                    Some(call) => call.await,
                    None => Err(Error::Unavailable(format!(
                        "shard {shard} is not reachable"
                    ))),
                }
            }
        });
        let results = join_all(calls).await;
        let all_refused = results
            .iter()
            .all(|r| matches!(r, Err(Error::InvalidArgument { .. })));

        let mut replicas: HashMap<&str, usize> = HashMap::new();
        let mut acks: HashMap<&str, usize> = HashMap::new();
        let mut marks = Vec::new();
        let mut first_error: Option<Error> = None;
        let mut answers = Vec::with_capacity(results.len());
        for ((shard, keys), result) in targets.iter().zip(results) {
            for key in keys {
                *replicas.entry(key.as_str()).or_default() += 1;
            }
            match result {
                Ok(answer) => {
                    for key in keys {
                        *acks.entry(key.as_str()).or_default() += 1;
                    }
                    answers.push(answer);
                }
                // A request every replica refused wrote nothing anywhere: none is behind. A
                // replica that refused what others applied is.
                Err(err @ Error::InvalidArgument { .. }) if all_refused => {
                    first_error.get_or_insert(err);
                }
                Err(err) => {
                    tracing::warn!(
                        request_id = self.request_id, shard_id = %shard, keys = ?keys,
                        error = %err, "a replica missed a write"
                    );
                    metrics::counter!(MISSED_WRITES, "kind" => self.kind)
                        .increment(keys.len() as u64);
                    marks.extend(keys.iter().map(|key| StaleReplica {
                        project_id: self.project_id.to_string(),
                        kind: self.kind.to_string(),
                        key: key.clone(),
                        shard_id: shard.clone(),
                        epoch: 0,
                        marked_at: 0,
                    }));
                    first_error.get_or_insert(err);
                }
            }
        }
        if !marks.is_empty() {
            self.store.mark_stale(&marks).await.map_err(|err| {
                tracing::error!(request_id = self.request_id, error = %err, "recording stale replicas failed");
                Error::from(err)
            })?;
        }
        let short = replicas
            .iter()
            .any(|(key, n)| acks.get(key).copied().unwrap_or(0) < self.quorum.clamp(1, *n));
        match (short, first_error) {
            (true, Some(err)) => Err(err),
            (true, None) => Err(Error::Internal("write quorum not met".into())),
            (false, _) => Ok(answers),
        }
    }
}
