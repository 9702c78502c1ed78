//! The agentsearch router: the public gRPC ([`grpc`]) and REST ([`rest`], guarded by
//! [`http::guard`]) APIs, request
//! validation ([`tools::api`]), placement of integrations on shards ([`cluster::placement`]), fan-out to shards
//! in process or over gRPC ([`cluster::shards`]), fusion and budgets ([`tools::search`]), catalog writes
//! ([`tools::catalog`]), and context search over synced content ([`context::search`], [`context::api`]). It is stateless: metadata lives in the [`agentsearch_store::MetadataStore`],
//! indexes on the shards. It never links tantivy or FAISS.

mod admin;
pub mod agent;
pub mod auth;
pub mod cluster;
pub mod context;
pub mod grpc;
pub mod http;
pub mod json;
pub mod openapi;
pub mod request;
pub mod rerank;
pub mod rest;
pub mod server;
pub mod tool_router;
pub mod tools;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsearch_common::Result;
use agentsearch_common::config::{ContextConfig, LimitsConfig, SearchConfig};
use agentsearch_embed::CachedEmbedder;
use agentsearch_hydrate::HydrationService;
use agentsearch_proto::admission::Admission;
use agentsearch_store::{MetadataStore, Placement};
use parking_lot::Mutex;
use tools::{feedback, plans};

use cluster::locks::KeyedLocks;
pub use cluster::shards::{Connect, Discover, GrpcShard, ShardClient, ShardSet};
use cluster::{health, replicas};
pub use http::guard::RestAccess;
pub use server::{serve, serve_on, serve_on_tls, serve_on_with};

/// Settings of a router, from the configuration.
#[derive(Clone, Debug)]
pub struct RouterSettings {
    pub search: SearchConfig,
    pub context: ContextConfig,
    /// Shards per integration.
    pub replication: usize,
    /// Acknowledgements a write needs from the replicas of each integration or sync (at most
    /// `replication`; see [`cluster::quorum`]).
    pub write_quorum: usize,
    /// A search part still unanswered after this long is asked of other replicas too (`None`:
    /// never).
    pub hedge_after: Option<Duration>,
    pub embed_batch_size: usize,
    /// How long a router trusts its cached copy of a project's placements and stale replicas
    /// (`shards.metadata_cache_ms`).
    pub metadata_cache: Duration,
    /// Plan a rebalance whenever no move is in progress (`shards.auto_rebalance`).
    pub auto_rebalance: bool,
    /// Sessions of the tool-router-compatible routes (`[tool_router]`).
    pub tool_router: agentsearch_common::config::ToolRouterConfig,
    /// Recommendations of recorded plans (`[plans]`).
    pub plans: agentsearch_common::config::PlansConfig,
}

/// The router's domain service, shared by the gRPC and REST adapters.
pub struct Router {
    store: Arc<dyn MetadataStore>,
    shards: ShardSet,
    embedder: Arc<CachedEmbedder>,
    settings: RouterSettings,
    /// Per-user schemas of the integrations that hydrate them; `None`: every schema is static.
    hydration: Option<Arc<HydrationService>>,
    placement_cache: Mutex<HashMap<String, (Instant, Arc<Vec<Placement>>)>>,
    /// Each project's stale replicas, as last read from the store.
    stale_cache: Mutex<HashMap<String, (Instant, Arc<replicas::StaleSet>)>>,
    /// Grows with every invalidation of `stale_cache`.
    stale_version: std::sync::atomic::AtomicU64,
    /// Writes to one project's catalog, or to one sync's records, run one at a time.
    write_locks: KeyedLocks,
    lifecycle: health::Lifecycle,
    /// How long a shutdown keeps serving while reporting not ready.
    drain: Duration,
    limits: LimitsConfig,
    /// Permits of requests served at once, REST and gRPC together.
    admission: Admission,
    /// Permits of query embeddings computed or waiting at once.
    embed_queue: Arc<tokio::sync::Semaphore>,
    /// Recent tool searches feedback may refer to.
    search_log: feedback::SearchLog,
    /// Each project's ranking model, as last read from the store.
    models: Mutex<HashMap<String, feedback::CachedModel>>,
    refits: feedback::Refits,
    /// The reranker of `[rerank]`; `None`: nothing reranks.
    rerank: Option<rerank::Rerank>,
    /// What the catalog says of integrations, by (project, integration), with when it was read.
    toolkit_cache: Mutex<ToolkitCache>,
    /// Tool-router sessions read from the store (they never change; their expiry is checked on
    /// use).
    sessions: moka::sync::Cache<String, Arc<agentsearch_store::ToolRouterSession>>,
    /// Each project's recommendable plans, indexed, with when they were read.
    plan_cache: moka::sync::Cache<String, plans::PlanCacheEntry>,
    /// Grows with every invalidation of `plan_cache`.
    plan_version: std::sync::atomic::AtomicU64,
    /// Global BM25 statistics that searches confirmed (see [`tools::stats_cache`]).
    stats_cache: tools::stats_cache::StatsCache,
}

type ToolkitCache =
    HashMap<(String, String), (Instant, Option<agentsearch_store::IntegrationInfo>)>;

impl Router {
    pub fn new(
        store: Arc<dyn MetadataStore>,
        shards: ShardSet,
        embedder: Arc<CachedEmbedder>,
        settings: RouterSettings,
    ) -> Self {
        Self {
            search_log: feedback::SearchLog::new(&settings.search),
            models: Mutex::new(HashMap::new()),
            refits: feedback::Refits::new(),
            store,
            shards,
            embedder,
            settings,
            hydration: None,
            rerank: None,
            toolkit_cache: Mutex::new(HashMap::new()),
            sessions: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_idle(Duration::from_secs(3600))
                .build(),
            plan_cache: plans::plan_cache(),
            plan_version: std::sync::atomic::AtomicU64::new(0),
            stats_cache: Default::default(),
            placement_cache: Mutex::new(HashMap::new()),
            stale_cache: Mutex::new(HashMap::new()),
            stale_version: std::sync::atomic::AtomicU64::new(0),
            write_locks: KeyedLocks::default(),
            lifecycle: health::Lifecycle::default(),
            drain: Duration::ZERO,
            limits: LimitsConfig::default(),
            admission: admission_of(&LimitsConfig::default()),
            embed_queue: Arc::new(tokio::sync::Semaphore::new(
                LimitsConfig::default().effective_max_queued_embeddings(),
            )),
        }
    }

    /// Hydrates the schemas of the integrations `service` knows, per user.
    pub fn with_hydration(mut self, service: Arc<HydrationService>) -> Self {
        self.hydration = Some(service);
        self
    }

    /// Reranks the best fused candidates with `rerank` (see [`rerank`]).
    pub fn with_rerank(mut self, rerank: Option<rerank::Rerank>) -> Self {
        self.rerank = rerank;
        self
    }

    /// On shutdown, keep serving for `drain` while reporting not ready (`server.drain_secs`).
    pub fn with_drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Serves within `limits` (`[limits]`): admission, timeouts, connections.
    pub fn with_limits(mut self, limits: LimitsConfig) -> Self {
        self.admission = admission_of(&limits);
        self.embed_queue = Arc::new(tokio::sync::Semaphore::new(
            limits.effective_max_queued_embeddings(),
        ));
        self.limits = limits;
        self
    }

    pub fn limits(&self) -> &LimitsConfig {
        &self.limits
    }

    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    pub fn drain(&self) -> Duration {
        self.drain
    }

    pub fn store(&self) -> &Arc<dyn MetadataStore> {
        &self.store
    }

    pub fn shards(&self) -> &ShardSet {
        &self.shards
    }

    /// The project's placements, cached for `settings.metadata_cache`. While the store cannot
    /// answer, the last placements read are used (searches go on through a metadata store
    /// outage; writes, which need the store, fail as unavailable).
    pub async fn placements(&self, project_id: &str) -> Result<Arc<Vec<Placement>>> {
        let cached = self.placement_cache.lock().get(project_id).cloned();
        if let Some((at, placements)) = &cached
            && at.elapsed() < self.settings.metadata_cache
        {
            return Ok(placements.clone());
        }
        let placements = match self.store.placements(project_id).await {
            Ok(placements) => Arc::new(placements),
            Err(err) => {
                let Some((_, placements)) = cached else {
                    return Err(err.into());
                };
                tracing::warn!(project_id, error = %err, "reading placements failed; using the last known");
                // Kept for another period, so an outage costs searches one wait, not each one.
                self.placement_cache
                    .lock()
                    .insert(project_id.to_string(), (Instant::now(), placements.clone()));
                return Ok(placements);
            }
        };
        self.placement_cache
            .lock()
            .insert(project_id.to_string(), (Instant::now(), placements.clone()));
        Ok(placements)
    }

    /// Makes the next read of the project's placements ask the store; what was cached stays as
    /// the fallback of a store outage.
    fn invalidate_placements(&self, project_id: &str) {
        let mut cache = self.placement_cache.lock();
        let expired =
            Instant::now().checked_sub(self.settings.metadata_cache + Duration::from_millis(1));
        match (cache.get_mut(project_id), expired) {
            (Some(entry), Some(expired)) => entry.0 = expired,
            _ => {
                cache.remove(project_id);
            }
        }
    }

    /// The project's replicas that missed writes, cached for `settings.metadata_cache`, and
    /// never older than the cached placements: a replica joins the placements only after it was
    /// marked stale, so placements that show it come with marks that do. A store that cannot
    /// answer leaves the last known set (none at first): reads go on.
    pub(crate) async fn stale_replicas(&self, project_id: &str) -> Arc<replicas::StaleSet> {
        let cached = self.stale_cache.lock().get(project_id).cloned();
        let placed_at = self
            .placement_cache
            .lock()
            .get(project_id)
            .map(|(at, _)| *at);
        if let Some((at, stale)) = &cached
            && at.elapsed() < self.settings.metadata_cache
            && placed_at.is_none_or(|placed| placed <= *at)
        {
            return stale.clone();
        }
        let version = self.stale_version.load(std::sync::atomic::Ordering::SeqCst);
        match self.store.stale_replicas(Some(project_id)).await {
            Ok(marks) => {
                let stale = Arc::new(replicas::StaleSet::of(marks));
                // A write or repair that changed the marks while they were read invalidated
                // them: what was read may predate it, so it is used once, not cached.
                let mut cache = self.stale_cache.lock();
                if self.stale_version.load(std::sync::atomic::Ordering::SeqCst) == version {
                    cache.insert(project_id.to_string(), (Instant::now(), stale.clone()));
                }
                stale
            }
            Err(err) => {
                // Kept for another TTL, so a store outage costs searches one wait, not each one.
                tracing::warn!(project_id, error = %err, "reading stale replicas failed");
                let stale = cached.map(|(_, s)| s).unwrap_or_default();
                self.stale_cache
                    .lock()
                    .insert(project_id.to_string(), (Instant::now(), stale.clone()));
                stale
            }
        }
    }

    /// Forgets the cached stale replicas of a project (after a write or a repair changed them).
    pub(crate) fn invalidate_stale(&self, project_id: &str) {
        let mut cache = self.stale_cache.lock();
        self.stale_version
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        cache.remove(project_id);
    }
}

fn admission_of(limits: &LimitsConfig) -> Admission {
    Admission::new(
        limits.effective_max_in_flight(),
        Duration::from_millis(limits.retry_after_ms),
    )
    .with_timeout(Duration::from_millis(limits.request_timeout_ms))
}

/// Runs a write on a task of its own and waits for it. Dropping the returned future (a client
/// that disconnects, a deadline) does not stop the write: it runs to its end, so the store and
/// the shards are never left half-way by a caller going away.
pub(crate) async fn detached<T: Send + 'static>(
    write: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    tokio::spawn(tracing::Instrument::in_current_span(write))
        .await
        .map_err(|e| agentsearch_common::Error::Internal(format!("write task failed: {e}")))?
}
