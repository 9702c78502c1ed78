//! Confirmed BM25 statistics of recent tool queries, so that a repeated query over several shards
//! skips the statistics round and makes one round trip instead of two.
//!
//! An entry is the global statistics of one query over one scope (project, query text, the set of
//! integrations searched) and their stamp: the sum of the fingerprints of the index states they
//! were counted from ([`agentsearch_common::shard::ScopeStats`]; a fingerprint covers every
//! statistic of the index, so replicas with the same statistics agree whatever their history). It
//! is stored only after a search on those statistics reported the same stamp, and it is used only
//! as long as every search keeps reporting it: a shard whose statistics changed since reports
//! another stamp, and the router then forgets the entry and, deadline permitting, gathers the
//! statistics again and searches again on them (see `rank` in [`crate::tools::search`]).

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use agentsearch_common::shard::TermStats;

/// Entries kept (a few kilobytes each at most: the statistics of one query's terms).
const CAPACITY: u64 = 4096;

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) struct StatsKey {
    project: String,
    query: String,
    /// Order-independent hash of the integrations searched (a collision costs one search
    /// again: the stamps would not agree).
    scope: u64,
}

/// Statistics a search confirmed, and their stamp.
#[derive(Debug)]
pub(crate) struct Confirmed {
    pub(crate) stats: TermStats,
    pub(crate) stamp: u64,
}

/// See the module documentation.
pub(crate) struct StatsCache {
    entries: moka::sync::Cache<StatsKey, Arc<Confirmed>>,
    hasher: std::hash::RandomState,
}

impl Default for StatsCache {
    fn default() -> Self {
        Self {
            entries: moka::sync::Cache::builder().max_capacity(CAPACITY).build(),
            hasher: std::hash::RandomState::new(),
        }
    }
}

impl StatsCache {
    /// The key of `query` over `integrations` (in any order, without repeats) of `project`.
    pub(crate) fn key<'a>(
        &self,
        project: &str,
        query: &str,
        integrations: impl IntoIterator<Item = &'a str>,
    ) -> StatsKey {
        let scope = integrations.into_iter().fold(0u64, |sum, integration| {
            let mut hasher = self.hasher.build_hasher();
            integration.hash(&mut hasher);
            sum.wrapping_add(hasher.finish())
        });
        StatsKey {
            project: project.to_string(),
            query: query.to_string(),
            scope,
        }
    }

    pub(crate) fn get(&self, key: &StatsKey) -> Option<Arc<Confirmed>> {
        self.entries.get(key)
    }

    /// Keeps statistics that a search on them confirmed (it reported their stamp).
    pub(crate) fn confirm(&self, key: StatsKey, stats: TermStats, stamp: u64) {
        self.entries
            .insert(key, Arc::new(Confirmed { stats, stamp }));
    }

    /// Drops an entry a search did not confirm.
    pub(crate) fn forget(&self, key: &StatsKey) {
        self.entries.invalidate(key);
    }
}

/// The stamp of a fan-out's answers: the sum of theirs, `None` when one lacks a stamp or a part
/// failed (then no statistics are confirmed by it).
pub(crate) fn answers_stamp<'a>(
    answers: impl IntoIterator<Item = &'a agentsearch_common::shard::ShardSearchResponse>,
    failed_parts: bool,
) -> Option<u64> {
    if failed_parts {
        return None;
    }
    answers.into_iter().try_fold(0u64, |sum, answer| {
        answer.stamp.map(|stamp| sum.wrapping_add(stamp))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentsearch_common::shard::ShardSearchResponse;

    #[test]
    fn the_scope_key_ignores_order_and_tells_scopes_apart() {
        let cache = StatsCache::default();
        let ab = cache.key("p", "send mail", ["gmail", "slack"]);
        assert_eq!(ab, cache.key("p", "send mail", ["slack", "gmail"]));
        assert_ne!(ab, cache.key("p", "send mail", ["gmail"]));
        assert_ne!(ab, cache.key("q", "send mail", ["gmail", "slack"]));
        assert_ne!(ab, cache.key("p", "send email", ["gmail", "slack"]));
    }

    #[test]
    fn confirmed_statistics_are_kept_until_forgotten() {
        let cache = StatsCache::default();
        let key = cache.key("p", "q", ["a"]);
        assert!(cache.get(&key).is_none());
        let stats = TermStats {
            total_docs: 3,
            ..TermStats::default()
        };
        cache.confirm(key.clone(), stats.clone(), 7);
        let entry = cache.get(&key).unwrap();
        assert_eq!((&entry.stats, entry.stamp), (&stats, 7));
        cache.forget(&key);
        assert!(cache.get(&key).is_none());
    }

    #[test]
    fn a_missing_stamp_or_a_failed_part_confirms_nothing() {
        let stamped = |stamp| ShardSearchResponse {
            stamp,
            ..ShardSearchResponse::default()
        };
        let both = [stamped(Some(u64::MAX)), stamped(Some(2))];
        assert_eq!(answers_stamp(&both, false), Some(1));
        assert_eq!(answers_stamp(&both, true), None);
        assert_eq!(
            answers_stamp(&[stamped(Some(1)), stamped(None)], false),
            None
        );
        assert_eq!(answers_stamp(&[], false), Some(0));
    }
}
