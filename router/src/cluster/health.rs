//! Health that tells the truth: liveness (the process runs), readiness (the router can answer:
//! not draining, the metadata store answers, and every set of shards that holds something has a
//! reachable member), and the draining state a shutdown sets before the listeners close.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::Router;
use crate::cluster::shards::ShardStatus;

/// Time allowed to the metadata store's answer in a readiness check.
const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// Replica sets without a reachable member listed in a readiness answer (the count is exact).
const MAX_LISTED_SETS: usize = 10;

/// Whether the process is shutting down; shared by the servers and their health reports.
#[derive(Clone, Default)]
pub struct Lifecycle {
    draining: Arc<AtomicBool>,
}

impl Lifecycle {
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// The router's readiness and why.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    /// Everything is reachable: not draining, the store answers, and every set of shards holding
    /// data has a reachable member.
    pub ready: bool,
    /// The router can answer, possibly partially: not draining, the store answers, and at least
    /// one shard is reachable. What a load balancer should route on when partial answers beat
    /// none (`/readyz?allowPartial=true`).
    pub serving: bool,
    pub draining: bool,
    /// `ok`, or why the metadata store failed the check.
    pub store: String,
    pub shards: Vec<ShardStatus>,
    /// Sets of shards that hold an integration or a sync and of which no member is reachable.
    pub unreachable_replica_sets: usize,
    /// Up to ten of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreachable_examples: Vec<Vec<String>>,
    /// Why the router is not ready, one reason a line; empty when ready.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

impl Router {
    /// The lifecycle of this router's process.
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// Checks readiness now: the store is asked (bounded by a timeout), the shards' reachability
    /// is what their last probe found.
    pub async fn readiness(&self) -> Readiness {
        let mut reasons = Vec::new();
        let draining = self.lifecycle.draining();
        if draining {
            reasons.push("shutting down".to_string());
        }
        let shards = self.shards.statuses();
        let reachable = self.shards.reachable_ids();
        let no_shard = reachable.is_empty();
        if no_shard {
            reasons.push("no shard is reachable".to_string());
        }
        let (store, unreachable) =
            match tokio::time::timeout(STORE_CHECK_TIMEOUT, self.store.replica_sets()).await {
                Ok(Ok(sets)) => {
                    let unreachable: Vec<Vec<String>> = sets
                        .into_iter()
                        .filter(|set| !set.iter().any(|id| reachable.contains(id)))
                        .collect();
                    ("ok".to_string(), unreachable)
                }
                Ok(Err(err)) => (format!("error: {err}"), Vec::new()),
                Err(_) => (
                    format!("no answer within {} ms", STORE_CHECK_TIMEOUT.as_millis()),
                    Vec::new(),
                ),
            };
        if store != "ok" {
            reasons.push(format!("metadata store: {store}"));
        }
        if !unreachable.is_empty() {
            reasons.push(format!(
                "{} set(s) of shards holding data have no reachable member",
                unreachable.len()
            ));
        }
        Readiness {
            ready: reasons.is_empty(),
            serving: !draining && !no_shard && store == "ok",
            draining,
            store,
            shards,
            unreachable_replica_sets: unreachable.len(),
            unreachable_examples: unreachable.into_iter().take(MAX_LISTED_SETS).collect(),
            reasons,
        }
    }
}
