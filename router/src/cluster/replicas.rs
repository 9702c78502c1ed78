//! Reads across replicas: which replica of each integration (or sync) a search asks, and how a
//! part of a search survives a slow or failed shard.
//!
//! - [`Planner`] picks, for each key, the replica with the least work: requests this router has
//!   in flight on each shard, plus what the search being planned already gave it, so one search
//!   spreads over its replicas and concurrent searches avoid a busy shard. Unreachable shards are
//!   used only when no reachable replica is left.
//! - [`run_part`] calls one shard with its keys. When the call fails, the keys go to their other
//!   replicas at once (until none is left or the deadline passes); when it is still running after
//!   the hedge delay, the same keys are asked of their other replicas too and the first complete
//!   answer wins. A hedge is sent only when every key of the part has another replica, so a
//!   part's answer is always one shard's answer for each key, never two (no duplicate hits).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::time::Duration;

use agentsearch_common::{Error, Result};
use futures::future::join_all;
use tokio::time::Instant;

use crate::cluster::shards::{ShardClient, ShardSet};

pub(crate) const HEDGES: &str = "agentsearch_shard_hedges_total";
pub(crate) const RETRIES: &str = "agentsearch_shard_retries_total";

/// Chooses a replica per key for one search.
pub(crate) struct Planner {
    /// The shards this router knows, in id order, as the plan started: id, whether the last
    /// probe reached it, and the load already on it (requests in flight, each weighing a fair
    /// share of the search) plus the keys this search has given it so far.
    known: Vec<Known>,
    /// Rotates ties, so idle replicas take turns across searches.
    salt: usize,
}

struct Known {
    id: String,
    reachable: bool,
    load: usize,
}

impl Planner {
    /// A planner for a search of `keys` keys; `salt` (e.g. a hash of the request id) decides
    /// among equally loaded replicas. The shards' reachability and requests in flight are read
    /// once, here.
    pub(crate) fn new(shards: &ShardSet, keys: usize, salt: usize) -> Self {
        let known = shards.load_by_id();
        let reachable = known.iter().filter(|(_, reachable, _)| *reachable).count();
        let share = keys.div_ceil(reachable.max(1)).max(1);
        Self {
            known: known
                .into_iter()
                .map(|(id, reachable, in_flight)| Known {
                    id,
                    reachable,
                    load: in_flight * share,
                })
                .collect(),
            salt,
        }
    }

    /// The replica of `replicas` (placement order) to ask, skipping those `skip` names and
    /// shards this router does not know; `None` when none is left.
    #[cfg(test)]
    pub(crate) fn pick(
        &mut self,
        replicas: &[String],
        skip: impl Fn(&String) -> bool,
    ) -> Option<String> {
        self.pick_known(replicas, skip)
            .map(|k| self.known[k].id.clone())
    }

    /// The replica of `replicas` (placement order) to ask, as its position among the shards
    /// known, skipping those `skip` names and shards this router does not know; `None` when none
    /// is left.
    fn pick_known(&mut self, replicas: &[String], skip: impl Fn(&String) -> bool) -> Option<usize> {
        let n = replicas.len().max(1);
        let mut best: Option<((bool, usize, usize), usize)> = None;
        for (i, id) in replicas.iter().enumerate() {
            let Ok(k) = self.known.binary_search_by(|s| s.id.as_str().cmp(id)) else {
                continue;
            };
            if skip(id) {
                continue;
            }
            let shard = &self.known[k];
            let key = (!shard.reachable, shard.load, (i + self.salt) % n);
            if best.is_none_or(|(b, _)| key < b) {
                best = Some((key, k));
            }
        }
        let (_, k) = best?;
        self.known[k].load += 1;
        Some(k)
    }
}

/// Groups `keys` by the replica each is read from (`Planner::pick_known` over `replicas(key)`,
/// without the shards `skip(key, shard)` names); keys with no replica left come apart, in order.
/// Groups come in shard id order.
pub(crate) fn assign<'r, K: Clone>(
    shards: &ShardSet,
    salt: usize,
    keys: &[K],
    replicas: impl Fn(&K) -> &'r [String],
    skip: impl Fn(&K, &String) -> bool,
) -> Alternatives<K> {
    let mut planner = Planner::new(shards, keys.len(), salt);
    let mut groups: Vec<Vec<K>> = vec![Vec::new(); planner.known.len()];
    let mut orphans = Vec::new();
    for key in keys {
        match planner.pick_known(replicas(key), |s| skip(key, s)) {
            Some(k) => groups[k].push(key.clone()),
            None => orphans.push(key.clone()),
        }
    }
    let groups = groups
        .into_iter()
        .zip(planner.known)
        .filter(|(keys, _)| !keys.is_empty())
        .map(|(keys, shard)| (shard.id, keys))
        .collect();
    (groups, orphans)
}

/// The replicas that missed writes, by kind and key (see [`crate::cluster::quorum`]).
#[derive(Default)]
pub(crate) struct StaleSet {
    by_kind: HashMap<String, HashMap<String, Vec<String>>>,
}

impl StaleSet {
    pub(crate) fn of(marks: Vec<agentsearch_store::StaleReplica>) -> Self {
        let mut by_kind: HashMap<String, HashMap<String, Vec<String>>> = HashMap::new();
        for mark in marks {
            by_kind
                .entry(mark.kind)
                .or_default()
                .entry(mark.key)
                .or_default()
                .push(mark.shard_id);
        }
        Self { by_kind }
    }

    /// Whether a read of `key` should not go to `shard`: it is a stale replica and another one
    /// of `replicas` is not (when every replica is stale, any copy beats no answer).
    pub(crate) fn skips(&self, kind: &str, key: &str, replicas: &[String], shard: &str) -> bool {
        let Some(stale) = self.by_kind.get(kind).and_then(|keys| keys.get(key)) else {
            return false;
        };
        stale.iter().any(|s| s == shard) && replicas.iter().any(|r| !stale.contains(r))
    }
}

/// A stable spread of a request id over small integers.
pub(crate) fn salt_of(request_id: &str) -> usize {
    request_id
        .bytes()
        .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize))
}

/// Where each key of a part could go next: `(shard, keys)` groups, and the keys with no replica
/// left.
pub(crate) type Alternatives<K> = (Vec<(String, Vec<K>)>, Vec<K>);

/// Gives the alternatives of some keys, given the shards already tried.
pub(crate) type AlternativesFn<'a, K> =
    dyn Fn(&[K], &HashSet<String>) -> Alternatives<K> + Sync + 'a;

/// What one part of a search came to: the answers that count (each key answered once) and the
/// keys no replica answered, with the last error seen for them.
pub(crate) struct PartOutcome<K, A> {
    /// `(shard id, keys, answer, time the call took)`.
    pub answers: Vec<(String, Vec<K>, A, Duration)>,
    /// `(shard id, keys, error)` of keys left without an answer.
    pub failed: Vec<(String, Vec<K>, Error)>,
    /// `(shard id, time until it failed)` of every call that failed, re-routed or not.
    pub failed_calls: Vec<(String, Duration)>,
    /// The part was hedged (a second request went out after the hedge delay).
    pub hedged: bool,
}

/// How a part's calls are made and re-routed.
pub(crate) struct PartPlan<'a, K> {
    pub shards: &'a ShardSet,
    /// The alternatives of some keys given the shards already tried.
    pub alternatives: &'a AlternativesFn<'a, K>,
    /// `None`: never hedge.
    pub hedge_after: Option<Duration>,
    pub deadline: Instant,
    /// The RPC's name, for metrics.
    pub rpc: &'static str,
}

type Call<K, A> = (String, Vec<K>, Result<A>, Duration);

/// Calls `shard` with `keys` through `call`, re-routing failures and hedging slow answers as
/// [`PartPlan`] says. `call` gets the shard's id and client, the keys and the time left.
pub(crate) async fn run_part<K, A, F, Fut>(
    plan: &PartPlan<'_, K>,
    shard: String,
    keys: Vec<K>,
    call: &F,
) -> PartOutcome<K, A>
where
    K: Clone + Send,
    F: Fn(&str, ShardClient, Vec<K>, Duration) -> Fut + Sync,
    Fut: Future<Output = Result<A>> + Send,
{
    let mut tried: HashSet<String> = HashSet::from([shard.clone()]);
    let mut outcome = PartOutcome {
        answers: Vec::new(),
        failed: Vec::new(),
        failed_calls: Vec::new(),
        hedged: false,
    };
    let primary = one_call(plan, shard.clone(), keys.clone(), call);
    tokio::pin!(primary);

    let first = match plan.hedge_after {
        None => primary.as_mut().await,
        Some(after) => {
            let hedge_at = (Instant::now() + after).min(plan.deadline);
            tokio::select! {
                done = primary.as_mut() => done,
                () = tokio::time::sleep_until(hedge_at) => {
                    // The hedge goes out only if every key has another replica.
                    let (groups, orphans) = (plan.alternatives)(&keys, &tried);
                    if !orphans.is_empty() || groups.is_empty() {
                        primary.as_mut().await
                    } else {
                        outcome.hedged = true;
                        tried.extend(groups.iter().map(|(id, _)| id.clone()));
                        let second = join_all(
                            groups.into_iter().map(|(id, keys)| one_call(plan, id, keys, call)),
                        );
                        tokio::pin!(second);
                        let counted = |winner: &'static str| {
                            metrics::counter!(HEDGES, "rpc" => plan.rpc, "winner" => winner)
                                .increment(1);
                        };
                        tokio::select! {
                            done = primary.as_mut() => {
                                if done.2.is_ok() {
                                    counted("first");
                                    done
                                } else {
                                    // The first failed: the hedge is what is left.
                                    outcome.failed_calls.push((done.0, done.3));
                                    let calls = second.await;
                                    counted(if calls.iter().all(|c| c.2.is_ok()) { "hedge" } else { "none" });
                                    return settle(plan, calls, tried, call, outcome).await;
                                }
                            }
                            calls = second.as_mut() => {
                                if calls.iter().all(|c| c.2.is_ok()) {
                                    counted("hedge");
                                    return settle(plan, calls, tried, call, outcome).await;
                                }
                                // Part of the hedge failed: the first call may still answer all.
                                let done = primary.as_mut().await;
                                if done.2.is_ok() {
                                    counted("first");
                                    done
                                } else {
                                    counted("none");
                                    outcome.failed_calls.push((done.0, done.3));
                                    return settle(plan, calls, tried, call, outcome).await;
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    settle(plan, vec![first], tried, call, outcome).await
}

/// Keeps the answers of `calls` and sends the keys of failed ones to their remaining replicas,
/// round after round, until every key is answered, has no replica left, or the deadline passes.
async fn settle<K, A, F, Fut>(
    plan: &PartPlan<'_, K>,
    mut calls: Vec<Call<K, A>>,
    mut tried: HashSet<String>,
    call: &F,
    mut outcome: PartOutcome<K, A>,
) -> PartOutcome<K, A>
where
    K: Clone + Send,
    F: Fn(&str, ShardClient, Vec<K>, Duration) -> Fut + Sync,
    Fut: Future<Output = Result<A>> + Send,
{
    loop {
        let mut failed: Vec<(String, Vec<K>, Error)> = Vec::new();
        for (id, keys, result, took) in calls {
            match result {
                Ok(answer) => outcome.answers.push((id, keys, answer, took)),
                Err(err) => {
                    outcome.failed_calls.push((id.clone(), took));
                    failed.push((id, keys, err));
                }
            }
        }
        if failed.is_empty() {
            return outcome;
        }
        // A refusal of the request itself is the same on every replica.
        let retryable = |e: &Error| !matches!(e, Error::InvalidArgument { .. });
        if Instant::now() >= plan.deadline || failed.iter().any(|f| !retryable(&f.2)) {
            outcome.failed.extend(failed);
            return outcome;
        }
        let mut next: BTreeMap<String, Vec<K>> = BTreeMap::new();
        for (id, keys, err) in failed {
            let (groups, orphans) = (plan.alternatives)(&keys, &tried);
            if !orphans.is_empty() {
                outcome.failed.push((id, orphans, err));
            }
            for (shard, keys) in groups {
                next.entry(shard).or_default().extend(keys);
            }
        }
        if next.is_empty() {
            return outcome;
        }
        metrics::counter!(RETRIES, "rpc" => plan.rpc).increment(next.len() as u64);
        tried.extend(next.keys().cloned());
        calls = join_all(
            next.into_iter()
                .map(|(id, keys)| one_call(plan, id, keys, call)),
        )
        .await;
    }
}

async fn one_call<K, A, F, Fut>(
    plan: &PartPlan<'_, K>,
    shard: String,
    keys: Vec<K>,
    call: &F,
) -> Call<K, A>
where
    K: Clone,
    F: Fn(&str, ShardClient, Vec<K>, Duration) -> Fut,
    Fut: Future<Output = Result<A>>,
{
    let started = Instant::now();
    let result = match plan.shards.get(&shard) {
        Some(client) => {
            let _in_flight = plan.shards.begin(&shard);
            let timeout = plan.deadline.saturating_duration_since(Instant::now());
            call(&shard, client, keys.clone(), timeout).await
        }
        None => Err(Error::Unavailable("shard not configured".into())),
    };
    (shard, keys, result, started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::shards::InFlight;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn set(ids: &[&str]) -> ShardSet {
        ShardSet::fixed(ids.iter().map(|id| {
            let client =
                crate::cluster::shards::GrpcShard::connect_lazy("127.0.0.1:9", &Default::default())
                    .unwrap();
            (id.to_string(), ShardClient::Grpc(client))
        }))
    }

    /// Keys are `k<n>` placed on `replicas[n]`.
    fn alternatives_of(
        placements: &HashMap<String, Vec<String>>,
    ) -> impl Fn(&[String], &HashSet<String>) -> Alternatives<String> + Sync + '_ {
        move |keys, tried| {
            let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
            let mut orphans = Vec::new();
            for k in keys {
                match placements[k].iter().find(|s| !tried.contains(*s)) {
                    Some(s) => groups.entry(s.clone()).or_default().push(k.clone()),
                    None => orphans.push(k.clone()),
                }
            }
            (groups.into_iter().collect(), orphans)
        }
    }

    fn placements(rows: &[(&str, &[&str])]) -> HashMap<String, Vec<String>> {
        rows.iter()
            .map(|(k, s)| (k.to_string(), s.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    /// A call that answers `shard:keys` after a delay per shard, or fails on shards in `down`.
    fn behaviour(
        delays: &'static [(&'static str, u64)],
        down: &'static [&'static str],
    ) -> impl Fn(
        &str,
        ShardClient,
        Vec<String>,
        Duration,
    ) -> futures::future::BoxFuture<'static, Result<String>>
    + Sync {
        move |id, _client, keys, _timeout| {
            let id = id.to_string();
            Box::pin(async move {
                let delay = delays.iter().find(|(s, _)| *s == id).map_or(0, |(_, d)| *d);
                tokio::time::sleep(Duration::from_millis(delay)).await;
                if down.contains(&id.as_str()) {
                    return Err(Error::Unavailable(format!("{id} is down")));
                }
                Ok(format!("{id}:{}", keys.join(",")))
            })
        }
    }

    fn answered<A: Clone>(outcome: &PartOutcome<String, A>) -> Vec<A> {
        outcome.answers.iter().map(|a| a.2.clone()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_replica_is_hedged_and_the_first_complete_answer_wins() {
        let shards = set(&["a", "b", "c"]);
        let p = placements(&[("k1", &["a", "b"]), ("k2", &["a", "c"])]);
        let alternatives = alternatives_of(&p);
        let plan = PartPlan {
            shards: &shards,
            alternatives: &alternatives,
            hedge_after: Some(Duration::from_millis(20)),
            deadline: Instant::now() + Duration::from_secs(5),
            rpc: "test",
        };
        let call = behaviour(&[("a", 1000), ("b", 5), ("c", 10)], &[]);
        let outcome = run_part(&plan, "a".into(), vec!["k1".into(), "k2".into()], &call).await;
        assert!(outcome.hedged);
        let mut got = answered(&outcome);
        got.sort();
        assert_eq!(got, ["b:k1", "c:k2"]);
        assert!(outcome.failed.is_empty());

        // A fast first replica answers alone, and no hedge goes out.
        let call = behaviour(&[("a", 5)], &[]);
        let outcome = run_part(&plan, "a".into(), vec!["k1".into(), "k2".into()], &call).await;
        assert!(!outcome.hedged);
        assert_eq!(answered(&outcome), ["a:k1,k2"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_replica_sends_its_keys_to_the_others_and_orphans_are_reported() {
        let shards = set(&["a", "b", "c"]);
        let p = placements(&[
            ("k1", &["a", "b"]),
            ("k2", &["a"]),
            ("k3", &["a", "b", "c"]),
        ]);
        let alternatives = alternatives_of(&p);
        let plan = PartPlan {
            shards: &shards,
            alternatives: &alternatives,
            hedge_after: None,
            deadline: Instant::now() + Duration::from_secs(5),
            rpc: "test",
        };
        // a and b are down: k1 has no replica left, k2 never had one, k3 reaches c.
        let call = behaviour(&[], &["a", "b"]);
        let keys = vec!["k1".into(), "k2".into(), "k3".into()];
        let outcome = run_part(&plan, "a".into(), keys, &call).await;
        assert_eq!(answered(&outcome), ["c:k3"]);
        let mut orphans: Vec<String> = outcome
            .failed
            .iter()
            .flat_map(|(_, keys, _)| keys.clone())
            .collect();
        orphans.sort();
        assert_eq!(orphans, ["k1", "k2"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_part_with_a_single_copy_is_not_hedged_and_a_failed_hedge_falls_back() {
        let shards = set(&["a", "b"]);
        let p = placements(&[("k1", &["a", "b"]), ("k2", &["a"])]);
        let alternatives = alternatives_of(&p);
        let plan = PartPlan {
            shards: &shards,
            alternatives: &alternatives,
            hedge_after: Some(Duration::from_millis(20)),
            deadline: Instant::now() + Duration::from_secs(5),
            rpc: "test",
        };
        let call = behaviour(&[("a", 100)], &[]);
        let outcome = run_part(&plan, "a".into(), vec!["k1".into(), "k2".into()], &call).await;
        assert!(!outcome.hedged);
        assert_eq!(answered(&outcome), ["a:k1,k2"]);

        // The hedge fails fast; the slow first replica still answers.
        let call = behaviour(&[("a", 100)], &["b"]);
        let outcome = run_part(&plan, "a".into(), vec!["k1".into()], &call).await;
        assert!(outcome.hedged);
        assert_eq!(answered(&outcome), ["a:k1"]);
        assert!(outcome.failed.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_request_is_not_retried_elsewhere() {
        let shards = set(&["a", "b"]);
        let p = placements(&[("k1", &["a", "b"])]);
        let alternatives = alternatives_of(&p);
        let plan = PartPlan {
            shards: &shards,
            alternatives: &alternatives,
            hedge_after: None,
            deadline: Instant::now() + Duration::from_secs(5),
            rpc: "test",
        };
        let calls = AtomicUsize::new(0);
        let call = |_id: &str, _c: ShardClient, _k: Vec<String>, _t: Duration| {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Err::<String, _>(Error::invalid("query", "bad")) }
        };
        let outcome = run_part(&plan, "a".into(), vec!["k1".into()], &call).await;
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert_eq!(outcome.failed.len(), 1);
    }

    #[tokio::test]
    async fn the_planner_spreads_keys_over_replicas_and_avoids_busy_shards() {
        let shards = set(&["a", "b", "c"]);
        let ids = ["a", "b", "c"];
        // Every key on two of three shards.
        let replicas: Vec<Vec<String>> = (0..300)
            .map(|i| vec![ids[i % 3].to_string(), ids[(i + 1) % 3].to_string()])
            .collect();
        let mut planner = Planner::new(&shards, replicas.len(), 7);
        let mut count: HashMap<String, usize> = HashMap::new();
        for r in &replicas {
            *count
                .entry(planner.pick(r, |_| false).unwrap())
                .or_default() += 1;
        }
        for id in ids {
            assert_eq!(count[id], 100, "{count:?}");
        }
        // With requests in flight on `a`, a new search gives `a` less.
        let _busy: Vec<InFlight> = (0..2).map(|_| shards.begin("a")).collect();
        let mut planner = Planner::new(&shards, replicas.len(), 7);
        let mut count: HashMap<String, usize> = HashMap::new();
        for r in &replicas {
            *count
                .entry(planner.pick(r, |_| false).unwrap())
                .or_default() += 1;
        }
        assert!(count.get("a").copied().unwrap_or(0) < 100, "{count:?}");
        // Excluded shards are never picked.
        let mut planner = Planner::new(&shards, 1, 0);
        let excluded = |s: &String| s == "a";
        assert_eq!(
            planner.pick(&["a".into(), "b".into()], excluded).as_deref(),
            Some("b")
        );
        assert_eq!(planner.pick(&["a".into()], excluded), None);
    }

    #[test]
    fn stale_replicas_are_skipped_unless_every_replica_is_stale() {
        let mark = |key: &str, shard: &str| agentsearch_store::StaleReplica {
            project_id: "p".into(),
            kind: "sync".into(),
            key: key.into(),
            shard_id: shard.into(),
            epoch: 1,
            marked_at: 0,
        };
        let stale = StaleSet::of(vec![mark("s1", "a"), mark("s2", "a"), mark("s2", "b")]);
        let ab = ["a".to_string(), "b".to_string()];
        assert!(stale.skips("sync", "s1", &ab, "a"));
        assert!(!stale.skips("sync", "s1", &ab, "b"));
        // Both copies of s2 missed writes: either is read rather than none.
        assert!(!stale.skips("sync", "s2", &ab, "a"));
        assert!(!stale.skips("integration", "s1", &ab, "a"));
    }
}
