//! Assembles processes from the configuration: the embedded default, a shard, a router.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentsearch_common::config::{Config, ContextConfig, LexicalConfig, PgTlsMode};
use agentsearch_common::ids::DEMO_PROJECT_ID;
use agentsearch_common::shard::ShardApi;
use agentsearch_embed::{CachedEmbedder, Embedder, MiniLm};
use agentsearch_hydrate::{FileHydrator, HydrationService};
use agentsearch_proto::tls::ServerTls;
use agentsearch_router::auth::Auth;
use agentsearch_router::{GrpcShard, RestAccess, Router, RouterSettings, ShardClient, ShardSet};
use agentsearch_shard::LocalShard;
use agentsearch_store::{MetadataStore, PgOptions, PgStore, PgTls, SqliteStore};
use anyhow::Context;

/// How often shards flush dense-index snapshots.
const FLUSH_EVERY: Duration = Duration::from_secs(5);

/// Loads the embedding model named by the configuration.
pub fn load_embedder(config: &Config) -> anyhow::Result<Arc<dyn Embedder>> {
    let started = std::time::Instant::now();
    let model = MiniLm::load(&config.embed.model_dir).with_context(|| {
        format!(
            "loading the embedding model from {} (run scripts/fetch-model.sh)",
            config.embed.model_dir.display()
        )
    })?;
    tracing::info!(
        model = model.model_id(),
        dim = model.dim(),
        kernels = agentsearch_common::simd::build().name(),
        ms = started.elapsed().as_millis() as u64,
        "embedding model loaded"
    );
    Ok(Arc::new(model))
}

pub fn settings(config: &Config) -> RouterSettings {
    RouterSettings {
        search: config.search.clone(),
        context: config.context,
        replication: config.shards.replication as usize,
        write_quorum: config.shards.effective_write_quorum(),
        hedge_after: (config.shards.hedge_after_ms > 0)
            .then(|| std::time::Duration::from_millis(config.shards.hedge_after_ms)),
        embed_batch_size: config.embed.batch_size,
        metadata_cache: std::time::Duration::from_millis(config.shards.metadata_cache_ms),
        auto_rebalance: config.shards.auto_rebalance,
        tool_router: config.tool_router.clone(),
        plans: config.plans.clone(),
    }
}

/// Opens `count` shards under `data_dir/shards/`.
pub fn open_local_shards(
    data_dir: &Path,
    count: u32,
    lexical: LexicalConfig,
    context: ContextConfig,
) -> anyhow::Result<Vec<ShardClient>> {
    (0..count)
        .map(|i| {
            let dir = data_dir.join("shards").join(format!("shard-{i}"));
            let shard = Arc::new(
                LocalShard::open(&dir, lexical, context)
                    .with_context(|| format!("opening shard in {}", dir.display()))?,
            );
            shard.start_flusher(FLUSH_EVERY);
            Ok(ShardClient::Local(shard as Arc<dyn ShardApi>))
        })
        .collect()
}

/// Builds the embedded router: in-process shards, SQLite metadata, the model, the query cache, and
/// the configured hydration. No demo data and no demo hydration (see [`embedded_node`]).
pub async fn embedded_router(
    config: &Config,
    embedder: Arc<dyn Embedder>,
) -> anyhow::Result<Arc<Router>> {
    build_embedded(config, embedder, false).await
}

/// The embedded router as `serve` runs it: with `load_demo`, the demo catalog, documents and
/// connections are loaded (idempotently) and the demo project's Salesforce tools hydrate from
/// `demo/hydration.json`; without it (`--no-demo`), it is [`embedded_router`].
pub async fn embedded_node(
    config: &Config,
    embedder: Arc<dyn Embedder>,
    load_demo: bool,
) -> anyhow::Result<Arc<Router>> {
    let router = build_embedded(config, embedder, load_demo).await?;
    if load_demo {
        crate::demo::load(&router).await?;
        crate::demo::load_documents(&router).await?;
        crate::demo::load_connections(&router).await?;
    }
    Ok(router)
}

/// The integration whose demo tools carry per-user custom fields.
const DEMO_HYDRATED: &str = "salesforce";

async fn build_embedded(
    config: &Config,
    embedder: Arc<dyn Embedder>,
    demo_hydration: bool,
) -> anyhow::Result<Arc<Router>> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let store: Arc<dyn MetadataStore> =
        Arc::new(SqliteStore::open(&config.data_dir.join("metadata.sqlite"))?);
    let shards = ShardSet::discover(
        open_local_shards(
            &config.data_dir,
            config.shards.local,
            config.lexical,
            config.context,
        )?,
        Duration::ZERO,
    )
    .await?;
    let cached = Arc::new(CachedEmbedder::new(
        embedder,
        config.embed.query_cache_bytes(),
    ));
    let mut hydration = HydrationService::builder_from_config(&config.hydration, Path::new("."))?;
    if demo_hydration && !hydration.hydrates(DEMO_HYDRATED) {
        // The demo's Salesforce tools carry per-user custom fields, from a file that describes the
        // demo's users: it applies to the demo project only, never to a project that merely has
        // tools of the same names.
        let path = config.data_dir.join("demo-hydration.json");
        std::fs::write(&path, crate::demo::HYDRATION)
            .with_context(|| format!("writing {}", path.display()))?;
        let file = FileHydrator::open(&path)?;
        hydration = hydration.integration_for_projects(
            DEMO_HYDRATED,
            [DEMO_PROJECT_ID],
            Arc::new(file),
            Duration::from_millis(config.hydration.timeout_ms.max(1)),
        );
    }
    Ok(Arc::new(
        Router::new(store, shards, cached, settings(config))
            .with_hydration(Arc::new(hydration.build()))
            .with_rerank(load_rerank(config)?)
            .with_drain(Duration::from_secs(config.server.drain_secs))
            .with_limits(config.limits.clone()),
    ))
}

/// The reranker `[rerank]` configures, loaded (a local model read, an HTTP client built).
fn load_rerank(config: &Config) -> anyhow::Result<Option<agentsearch_router::rerank::Rerank>> {
    let rerank = agentsearch_router::rerank::Rerank::from_config(&config.rerank)
        .map_err(anyhow::Error::msg)?;
    if let Some(r) = &rerank {
        tracing::info!(
            provider = r.provider.name(),
            top_n = r.top_n,
            "reranking on"
        );
    }
    Ok(rerank)
}

/// `agentsearch serve`.
pub async fn serve_embedded(
    mut config: Config,
    load_demo: bool,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if load_demo && config.tool_router.default_project.is_none() {
        // Tool-router sessions created without naming a project search the demo.
        config.tool_router.default_project =
            Some(agentsearch_common::ids::DEMO_PROJECT_ID.to_string());
    }
    let auth = Auth::from_config(&agentsearch_common::auth::embedded_config(
        &config.auth,
        &config.data_dir,
    )?)?;
    auth.check_bind(config.http.listen, "the REST API")?;
    auth.check_bind(config.grpc, "the gRPC API")?;
    let embedder = load_embedder(&config)?;
    let router = embedded_node(&config, embedder, load_demo).await?;
    tokio::spawn(router.clone().keep_repairing(
        Duration::from_secs(config.shards.repair_secs),
        std::future::pending(),
    ));
    if !auth.enabled() {
        tracing::warn!("authentication is off: allowed only because every listener is on loopback");
    }
    let access = RestAccess::from_config(&config.http);
    let tls = ServerTls::load(&config.tls)?;
    agentsearch_router::serve(
        router,
        auth,
        access,
        tls,
        config.http.listen,
        config.grpc,
        shutdown,
    )
    .await?;
    Ok(())
}

/// `agentsearch shard`.
pub async fn serve_shard(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // The credential routers present: the internal token when set, else a client certificate
    // (mutual TLS) alone, else the service token.
    let tls = ServerTls::load(&config.tls)?;
    let credential = match (&config.auth.internal_token, &config.tls.client_ca_file) {
        (Some(token), _) => Some(token.clone()),
        (None, Some(_)) => None,
        (None, None) => config.auth.token.clone(),
    };
    let auth = Auth::new(credential);
    if !tls.as_ref().is_some_and(ServerTls::mutual) {
        auth.check_bind(config.grpc, "the shard API")?;
    }
    let shard = Arc::new(
        LocalShard::open(&config.data_dir, config.lexical, config.context)?.searching_on_calls(),
    );
    shard.start_flusher(FLUSH_EVERY);
    let drain = Duration::from_secs(config.server.drain_secs);
    let shutdown = futures::FutureExt::shared(futures::FutureExt::boxed(shutdown));
    // The admin endpoints stay up through the drain (readiness 503) until the gRPC server stops.
    let (stopped, stop) = tokio::sync::oneshot::channel::<()>();
    if let Some(addr) = config.server.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding server.metrics_listen {addr}"))?;
        tracing::info!(%addr, "shard metrics, liveness and readiness listening");
        let (api, draining) = (shard.clone() as Arc<dyn ShardApi>, shutdown.clone());
        tokio::spawn(async move {
            let stop = async move {
                let _ = stop.await;
            };
            if let Err(err) = agentsearch_shard::serve_metrics(api, listener, draining, stop).await
            {
                tracing::error!(error = %err, "shard metrics server stopped");
            }
        });
    }
    let admission = agentsearch_shard::shard_admission(&config.limits);
    agentsearch_shard::serve(
        shard.clone(),
        auth,
        config.grpc,
        shutdown,
        drain,
        admission,
        tls,
        &config.limits,
    )
    .await?;
    drop(stopped);
    let flushed = shard.flush_now().await?;
    tracing::info!(flushed, "shard stopped; vector snapshots flushed");
    Ok(())
}

/// Connects to PostgreSQL as configured.
pub async fn postgres_store(config: &Config) -> anyhow::Result<Arc<dyn MetadataStore>> {
    let url = config.postgres.url.as_ref().context(
        "postgres.url is required by `router` (--postgres, or AGENTSEARCH_POSTGRES__URL)",
    )?;
    let schema = config
        .postgres
        .schema
        .clone()
        .unwrap_or_else(|| "agentsearch".to_string());
    let pool = config.postgres.pool_size.unwrap_or(16) as usize;
    let tls = match config.postgres.tls_mode {
        PgTlsMode::Disable => PgTls::Disable,
        PgTlsMode::Require => PgTls::Require,
        PgTlsMode::VerifyFull => PgTls::VerifyFull {
            ca_file: config.postgres.ca_file.clone(),
        },
    };
    let options = PgOptions {
        pool_size: pool,
        tls,
        pool_wait_timeout: Duration::from_millis(config.postgres.pool_wait_timeout_ms),
        statement_timeout: Duration::from_millis(config.postgres.statement_timeout_ms),
    };
    Ok(Arc::new(
        PgStore::connect_with(url.expose(), &schema, &options)
            .await
            .context("connecting to PostgreSQL")?,
    ))
}

/// `agentsearch router`.
///
/// The shards' addresses are `shards.remote`, read again from `shards_file` (when the list came
/// from a configuration file) every `shards.refresh_secs`, or the addresses `shards.dns`
/// resolves to, resolved again as often.
pub async fn serve_router(
    config: Config,
    shards_file: Option<std::path::PathBuf>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        !config.shards.remote.is_empty() || config.shards.dns.is_some(),
        "shards.remote is empty: pass --shards host:port,... (or set shards.dns)"
    );
    let auth = Auth::from_config(&config.auth)?;
    auth.check_bind(config.http.listen, "the REST API")?;
    auth.check_bind(config.grpc, "the gRPC API")?;
    let store = postgres_store(&config).await?;
    // What the router presents to its shards: the internal token when set, else its client
    // certificate alone (mutual TLS), else the service token.
    let shard_tls = agentsearch_proto::tls::shard_client_tls(&config.shards)?;
    let shard_auth = Auth::new(
        match (&config.auth.internal_token, &config.shards.tls_cert_file) {
            (Some(token), _) => Some(token.clone()),
            (None, Some(_)) => None,
            (None, None) => config.auth.token.clone(),
        },
    );
    let connect = {
        let (shard_auth, shard_tls) = (shard_auth.clone(), shard_tls.clone());
        move |addr: &str| {
            GrpcShard::connect_lazy_tls(addr, &shard_auth, shard_tls.as_ref())
                .map(ShardClient::Grpc)
        }
    };
    let discover = shard_discovery(&config, shards_file);
    let addresses = match (&discover, config.shards.dns.is_some()) {
        // Started whatever DNS says: shards join when their names resolve.
        (Some(discover), true) => discover().await.unwrap_or_else(|err| {
            tracing::warn!(error = %err, "no shard address yet");
            Vec::new()
        }),
        _ => config.shards.remote.clone(),
    };
    let clients = addresses
        .iter()
        .map(|addr| connect(addr).map(|c| (addr.clone(), c)))
        .collect::<Result<Vec<_>, _>>()?;
    // Start whatever the shards' state: a shard that is down is reported by readiness and its
    // parts come back unavailable (partial results) until a probe reaches it.
    let shards = ShardSet::pending(clients);
    shards.refresh().await?;
    let statuses = shards.statuses();
    tracing::info!(
        reachable = statuses.iter().filter(|s| s.reachable).count(),
        configured = statuses.len(),
        shards = ?shards.ids(),
        "shards probed"
    );
    let every = Duration::from_secs(config.shards.refresh_secs);
    match discover {
        Some(discover) => tokio::spawn(shards.clone().keep_discovering(
            every,
            discover,
            Box::new(connect),
            std::future::pending(),
        )),
        None => tokio::spawn(shards.clone().keep_fresh(every, std::future::pending())),
    };
    let embedder = load_embedder(&config)?;
    let cached = Arc::new(CachedEmbedder::new(
        embedder,
        config.embed.query_cache_bytes(),
    ));
    let hydration = HydrationService::from_config(&config.hydration, Path::new("."))?;
    let router = Arc::new(
        Router::new(store, shards, cached, settings(&config))
            .with_hydration(Arc::new(hydration))
            .with_rerank(load_rerank(&config)?)
            .with_drain(Duration::from_secs(config.server.drain_secs))
            .with_limits(config.limits.clone()),
    );
    tokio::spawn(router.clone().keep_repairing(
        Duration::from_secs(config.shards.repair_secs),
        std::future::pending(),
    ));
    let access = RestAccess::from_config(&config.http);
    let tls = ServerTls::load(&config.tls)?;
    agentsearch_router::serve(
        router,
        auth,
        access,
        tls,
        config.http.listen,
        config.grpc,
        shutdown,
    )
    .await?;
    Ok(())
}

/// Where a router learns its shards' addresses while it runs: DNS (`shards.dns`), or the
/// configuration file read again (its `shards.remote`, with the environment's overrides).
/// `None`: the addresses are fixed.
fn shard_discovery(
    config: &Config,
    shards_file: Option<std::path::PathBuf>,
) -> Option<agentsearch_router::Discover> {
    if let Some(name) = config.shards.dns.clone() {
        return Some(Box::new(move || {
            let name = name.clone();
            Box::pin(async move {
                let resolved = tokio::net::lookup_host(name.as_str())
                    .await
                    .map_err(|e| format!("resolving shards.dns `{name}`: {e}"))?;
                let mut addresses: Vec<String> = resolved.map(|a| a.to_string()).collect();
                addresses.sort();
                addresses.dedup();
                if addresses.is_empty() {
                    return Err(format!("shards.dns `{name}` resolves to no address"));
                }
                Ok(addresses)
            })
        }));
    }
    let file = shards_file?;
    Some(Box::new(move || {
        let file = file.clone();
        Box::pin(async move {
            let config = tokio::task::spawn_blocking(move || Config::load(Some(&file)))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("reading the configuration again: {e}"))?;
            Ok(config.shards.remote)
        })
    }))
}
