//! The agentsearch shard: holds the tool indexes of its data dir ([`agentsearch_index::ToolIndexes`])
//! and serves the internal shard API, in process ([`LocalShard`], behind
//! [`agentsearch_common::shard::ShardApi`]) or over gRPC ([`grpc::ShardGrpcService`], [`serve`]).
//! It does not embed text, fuse rankings or know about placement: the router does.

pub mod grpc;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use agentsearch_common::auth::Auth;
use agentsearch_common::config::{ContextConfig, LexicalConfig, LimitsConfig};
use agentsearch_common::shard::{
    ContextSearchRequest, ContextSearchResponse, ContextStatsRequest, ExportRecordsRequest,
    ExportToolsRequest, GetToolsRequest, GetToolsResponse, IndexedRecord, IndexedTool,
    InlineSearchRequest, ListRecordsRequest, MAX_EXPORT_RECORDS, MAX_FETCH_SEGMENTS,
    MAX_LIST_RECORDS, ReadSegmentsRequest, ReadSegmentsResponse, RecordDeleteRequest,
    RecordVersion, ScopeStats, SegmentFetchRequest, SegmentFetchResponse, SegmentUpsertRequest,
    ShardApi, ShardDeleteRequest, ShardInfo, ShardSearchRequest, ShardSearchResponse,
    ShardUpsertRequest, ShardWriteResponse, TermStats, TermStatsRequest,
};
use agentsearch_common::{Error, Result};
use agentsearch_index::tool_index::stable_id;
use agentsearch_index::{SegmentIndexes, ToolIndexes};
use agentsearch_proto::admission::Admission;
use agentsearch_proto::tls::ServerTls;

/// Most segments a shard returns per retriever.
const MAX_LIMIT: u32 = 1000;
/// Most segments read around an anchor, on each side.
pub const MAX_READ_AROUND: u32 = 10;

/// A shard in this process.
pub struct LocalShard {
    id: String,
    indexes: Arc<ToolIndexes>,
    segments: Arc<SegmentIndexes>,
    /// The data dir's lock, held while any of this shard's work runs (blocking tasks keep a
    /// clone), so a second shard can never open the same files meanwhile. Declared last: fields
    /// drop in order, and the indexes write their snapshots as they close.
    lock: Arc<std::fs::File>,
    /// Whether a tool search that runs on one thread anyway runs on the calling task
    /// ([`LocalShard::searching_on_calls`]).
    on_calls: bool,
}

/// An index set with the data dir's lock, for a task that may outlive the shard. The index set
/// drops first: whatever it writes as it closes is written before the lock lets another shard
/// open the same files.
struct Held<T> {
    value: Arc<T>,
    _lock: Arc<std::fs::File>,
}

impl<T> std::ops::Deref for Held<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl LocalShard {
    /// Opens (or initialises) the shard in `data_dir`: its id and every index under it, scoring
    /// tool queries with `lexical` and segment queries with `context`.
    pub fn open(data_dir: &Path, lexical: LexicalConfig, context: ContextConfig) -> Result<Self> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| Error::Internal(format!("create {}: {e}", data_dir.display())))?;
        let lock = Arc::new(lock_data_dir(data_dir)?);
        let id = shard_id(data_dir)?;
        let indexes = ToolIndexes::open(data_dir, lexical)?;
        let segments = SegmentIndexes::open(data_dir, context)?;
        let (count, tools) = indexes.counts();
        let (syncs, segment_count) = segments.counts();
        tracing::info!(shard_id = %id, data_dir = %data_dir.display(), indexes = count, tools, syncs, segments = segment_count, "shard opened");
        Ok(Self {
            id,
            indexes: Arc::new(indexes),
            segments: Arc::new(segments),
            lock,
            on_calls: false,
        })
    }

    /// Runs a tool search (and its BM25 statistics) on the task of its call when it is small
    /// enough to run on one thread ([`agentsearch_index::PreparedSearch::runs_alone`]), instead
    /// of handing it to the worker pool and back: for a shard behind its own gRPC server, where
    /// each call has a task of its own, so calls still run side by side on the runtime's
    /// threads. Not for shards in the router's process: the router awaits its shards' searches
    /// in one task, where they would run one after the other.
    pub fn searching_on_calls(mut self) -> Self {
        self.on_calls = true;
        self
    }

    fn held<T>(&self, value: &Arc<T>) -> Held<T> {
        Held {
            value: value.clone(),
            _lock: self.lock.clone(),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Flushes dense-index snapshots every `every` in the background, for as long as the shard
    /// lives (they are also flushed when it closes).
    pub fn start_flusher(self: &Arc<Self>, every: std::time::Duration) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let Some(shard) = weak.upgrade() else { break };
                let segments = shard.held(&shard.segments);
                drop(shard);
                let flush = move || segments.flush();
                match tokio::task::spawn_blocking(flush).await {
                    Ok(Ok(n)) if n > 0 => tracing::debug!(flushed = n, "vector snapshots flushed"),
                    Ok(Err(err)) => {
                        tracing::warn!(error = %err, "flushing vector snapshots failed")
                    }
                    _ => {}
                }
            }
        });
    }

    /// Writes every pending vector snapshot now (a shutdown calls it after the last request).
    pub async fn flush_now(&self) -> Result<usize> {
        let segments = self.held(&self.segments);
        tokio::task::spawn_blocking(move || segments.flush())
            .await
            .map_err(|e| Error::Internal(format!("flush task: {e}")))?
            .map_err(|e| Error::Internal(format!("flushing vector snapshots: {e}")))
    }

    async fn segments<T: Send + 'static>(
        &self,
        f: impl FnOnce(&SegmentIndexes) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let segments = self.held(&self.segments);
        // The blocking thread continues the caller's span (the call's, in a trace).
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || span.in_scope(|| f(&segments)))
            .await
            .map_err(|e| Error::Internal(format!("index task: {e}")))?
    }

    /// Runs `f` on the process's worker pool, where the search of many indexes spreads too: one
    /// hand-off for the call instead of a blocking thread that then waits for the pool. A panic
    /// is an internal error of this call, never of the pool.
    async fn pooled<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ToolIndexes) -> T + Send + 'static,
    ) -> Result<T> {
        let indexes = self.held(&self.indexes);
        let span = tracing::Span::current();
        let (done, answer) = tokio::sync::oneshot::channel();
        rayon::spawn(move || {
            // The caller may have gone away: the answer is then dropped.
            let _ = done.send(caught(|| span.in_scope(|| f(&indexes))));
        });
        answer
            .await
            .unwrap_or_else(|_| Err(Error::Internal("index search task lost".into())))
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ToolIndexes) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let indexes = self.held(&self.indexes);
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || span.in_scope(|| f(&indexes)))
            .await
            .map_err(|e| Error::Internal(format!("index task: {e}")))?
    }
}

/// `f()`, a panic in it being an internal error of the search (never of the thread it runs on).
fn caught<T>(f: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|_| Error::Internal("index search panicked".into()))
}

/// Takes the exclusive lock on `data_dir/lock` (released when the returned file closes, and by
/// the kernel if the process dies): two shards on one data dir would overwrite each other's files.
/// A lock still held after [`LOCK_WAIT`] (a previous shard of this process still closing, or
/// another process) is an error naming the file.
fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File> {
    let path = data_dir.join("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::Internal(format!("open {}: {e}", path.display())))?;
    let give_up = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < give_up => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::Unavailable(format!(
                    "data dir {} is in use by another shard (it holds the lock on {})",
                    data_dir.display(),
                    path.display()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Error::Internal(format!("lock {}: {e}", path.display())));
            }
        }
    }
}

/// How long opening a shard waits for its data dir's lock.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The shard's id: read from `shard_id` in its data dir, created once.
fn shard_id(data_dir: &Path) -> Result<String> {
    let path = data_dir.join("shard_id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_string()),
        _ => {
            let id = format!("shard-{}", uuid::Uuid::new_v4().simple());
            let tmp = data_dir.join("shard_id.tmp");
            std::fs::write(&tmp, &id)
                .and_then(|()| std::fs::rename(&tmp, &path))
                .map_err(|e| Error::Internal(format!("write {}: {e}", path.display())))?;
            Ok(id)
        }
    }
}

/// Resident set size of this process in bytes (Linux; 0 elsewhere).
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[async_trait::async_trait]
impl ShardApi for LocalShard {
    async fn info(&self) -> Result<ShardInfo> {
        let (indexes, tools) = self.indexes.counts();
        let (sync_indexes, segments) = self.segments.counts();
        Ok(ShardInfo {
            shard_id: self.id.clone(),
            indexes,
            tools,
            resident_bytes: resident_bytes(),
            sync_indexes,
            segments,
            generations: self.indexes.generations() + self.segments.generations(),
        })
    }

    async fn term_stats(&self, request: TermStatsRequest) -> Result<ScopeStats> {
        if self.on_calls
            && let Some(stats) = caught(|| self.indexes.view_stats(&request))?
        {
            return Ok(stats);
        }
        self.blocking(move |indexes| Ok(indexes.scope_stats(&request)?))
            .await
    }

    async fn search_tools(&self, request: ShardSearchRequest) -> Result<ShardSearchResponse> {
        if request.limit == 0 || request.limit > 1000 {
            return Err(Error::invalid("limit", "must be between 1 and 1000"));
        }
        if !self.on_calls {
            return self.pooled(move |indexes| indexes.search(&request)).await;
        }
        let prepared = caught(|| self.indexes.prepare(&request))?;
        if prepared.runs_alone() {
            return caught(|| self.indexes.run(&request, prepared));
        }
        self.pooled(move |indexes| indexes.run(&request, prepared))
            .await
    }

    async fn search_inline(&self, request: InlineSearchRequest) -> Result<ShardSearchResponse> {
        if request.limit == 0 || request.limit > 1000 {
            return Err(Error::invalid("limit", "must be between 1 and 1000"));
        }
        // More than `agentsearch_index::MAX_INLINE_TOOLS` tools are refused as `tools`.
        self.blocking(move |indexes| Ok(indexes.search_inline(request)?))
            .await
    }

    async fn upsert_tools(&self, request: ShardUpsertRequest) -> Result<ShardWriteResponse> {
        self.blocking(move |indexes| {
            let affected = indexes.upsert(&request.project_id, request.tools)?;
            Ok(ShardWriteResponse {
                affected,
                generation: 0,
                fields_indexed: false,
            })
        })
        .await
    }

    async fn delete_tools(&self, request: ShardDeleteRequest) -> Result<ShardWriteResponse> {
        self.blocking(move |indexes| {
            let Some(index) = indexes.get(&request.project_id, &request.integration) else {
                return Ok(ShardWriteResponse::default());
            };
            let (affected, generation) = index.delete(&request.names)?;
            Ok(ShardWriteResponse {
                affected,
                generation,
                fields_indexed: false,
            })
        })
        .await
    }

    async fn get_tools(&self, request: GetToolsRequest) -> Result<GetToolsResponse> {
        self.blocking(move |indexes| {
            let Some(index) = indexes.get(&request.project_id, &request.integration) else {
                return Ok(GetToolsResponse::default());
            };
            // Read the generation first: a write landing in between can only make it older than
            // the records, never newer.
            let generation = index.generation();
            let tools = request
                .names
                .iter()
                .filter_map(|name| {
                    index
                        .tool(stable_id(name))
                        .filter(|t| &t.name == name)
                        .map(|t| (*t).clone())
                })
                .collect();
            Ok(GetToolsResponse { tools, generation })
        })
        .await
    }

    async fn context_term_stats(&self, request: ContextStatsRequest) -> Result<TermStats> {
        self.segments(move |segments| Ok(segments.term_stats(&request)?))
            .await
    }

    async fn search_segments(
        &self,
        request: ContextSearchRequest,
    ) -> Result<ContextSearchResponse> {
        if request.limit == 0 || request.limit > MAX_LIMIT {
            return Err(Error::invalid(
                "limit",
                format!("must be between 1 and {MAX_LIMIT}"),
            ));
        }
        self.segments(move |segments| Ok(segments.search(&request)))
            .await
    }

    async fn upsert_segments(&self, request: SegmentUpsertRequest) -> Result<ShardWriteResponse> {
        self.segments(move |segments| {
            let (affected, generation) = segments.upsert(&request)?;
            Ok(ShardWriteResponse {
                affected,
                generation,
                fields_indexed: true,
            })
        })
        .await
    }

    async fn delete_records(&self, request: RecordDeleteRequest) -> Result<ShardWriteResponse> {
        self.segments(move |segments| {
            let (affected, generation) = segments.delete(&request)?;
            Ok(ShardWriteResponse {
                affected,
                generation,
                fields_indexed: false,
            })
        })
        .await
    }

    async fn fetch_segments(&self, request: SegmentFetchRequest) -> Result<SegmentFetchResponse> {
        if request.segments.len() > MAX_FETCH_SEGMENTS {
            return Err(Error::invalid(
                "segments",
                format!(
                    "at most {MAX_FETCH_SEGMENTS} per call, got {}",
                    request.segments.len()
                ),
            ));
        }
        self.segments(move |segments| Ok(segments.fetch(&request)))
            .await
    }

    async fn read_segments(
        &self,
        request: ReadSegmentsRequest,
    ) -> Result<Option<ReadSegmentsResponse>> {
        if request.before > MAX_READ_AROUND || request.after > MAX_READ_AROUND {
            return Err(Error::invalid(
                "before",
                format!("before and after must be at most {MAX_READ_AROUND}"),
            ));
        }
        self.segments(move |segments| Ok(segments.read(&request)?))
            .await
    }

    async fn export_tools(&self, request: ExportToolsRequest) -> Result<Vec<IndexedTool>> {
        self.blocking(move |indexes| {
            Ok(indexes
                .get(&request.project_id, &request.integration)
                .map(|index| index.export())
                .unwrap_or_default())
        })
        .await
    }

    async fn list_records(&self, request: ListRecordsRequest) -> Result<Vec<RecordVersion>> {
        if request.limit == 0 || request.limit > MAX_LIST_RECORDS {
            return Err(Error::invalid(
                "limit",
                format!("must be between 1 and {MAX_LIST_RECORDS}"),
            ));
        }
        self.segments(move |segments| {
            Ok(segments
                .get(&request.project_id, &request.sync_id)
                .map(|index| {
                    index
                        .list(&request.after, request.limit as usize)
                        .into_iter()
                        .map(|(record_id, generation)| RecordVersion {
                            record_id,
                            generation,
                        })
                        .collect()
                })
                .unwrap_or_default())
        })
        .await
    }

    async fn export_records(&self, request: ExportRecordsRequest) -> Result<Vec<IndexedRecord>> {
        if request.record_ids.len() > MAX_EXPORT_RECORDS {
            return Err(Error::invalid(
                "record_ids",
                format!("at most {MAX_EXPORT_RECORDS} per call"),
            ));
        }
        self.segments(
            move |segments| match segments.get(&request.project_id, &request.sync_id) {
                Some(index) => Ok(index.export(&request.record_ids)?),
                None => Ok(Vec::new()),
            },
        )
        .await
    }
}

/// How long a stopping shard waits for in-flight calls after its drain period.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a caller has to finish a TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn futures_util_shared(
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> futures::future::Shared<futures::future::BoxFuture<'static, ()>> {
    use futures::FutureExt;
    shutdown.boxed().shared()
}

/// Serves the shard's admin endpoints on `listener` until `stop` resolves: Prometheus metrics at
/// `GET /metrics` (what its gRPC layer recorded, plus gauges read from the shard as it is scraped:
/// indexes, tools, resident memory), `GET /livez` (200 while the process runs) and `GET /readyz`
/// (200, then 503 from the moment `draining` resolves), for probes that cannot speak the gRPC
/// port's protocol (a TLS listener). No credentials: bind it where only the scraper and the
/// kubelet reach.
pub async fn serve_metrics(
    shard: Arc<dyn ShardApi>,
    listener: tokio::net::TcpListener,
    draining: impl std::future::Future<Output = ()> + Send + 'static,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    use agentsearch_common::metrics::{
        CONTENT_TYPE, SHARD_GENERATIONS, SHARD_INDEXES, SHARD_RESIDENT, SHARD_SEGMENTS,
        SHARD_SYNC_INDEXES, SHARD_TOOLS,
    };
    use axum::http::StatusCode;
    agentsearch_common::metrics::handle();
    let is_draining = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let is_draining = is_draining.clone();
        tokio::spawn(async move {
            draining.await;
            is_draining.store(true, std::sync::atomic::Ordering::SeqCst);
        });
    }
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let shard = shard.clone();
                async move {
                    if let Ok(info) = shard.info().await {
                        metrics::gauge!(SHARD_INDEXES).set(info.indexes as f64);
                        metrics::gauge!(SHARD_TOOLS).set(info.tools as f64);
                        metrics::gauge!(SHARD_RESIDENT).set(info.resident_bytes as f64);
                        metrics::gauge!(SHARD_SYNC_INDEXES).set(info.sync_indexes as f64);
                        metrics::gauge!(SHARD_SEGMENTS).set(info.segments as f64);
                        metrics::gauge!(SHARD_GENERATIONS).set(info.generations as f64);
                    }
                    (
                        [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)],
                        agentsearch_common::metrics::render(),
                    )
                }
            }),
        )
        .route("/livez", axum::routing::get(|| async { "ok\n" }))
        .route(
            "/readyz",
            axum::routing::get(move || {
                let draining = is_draining.load(std::sync::atomic::Ordering::SeqCst);
                async move {
                    if draining {
                        (StatusCode::SERVICE_UNAVAILABLE, "draining\n")
                    } else {
                        (StatusCode::OK, "ready\n")
                    }
                }
            }),
        );
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
        .map_err(|e| Error::Internal(format!("metrics server: {e}")))
}

/// Serves `shard` over gRPC on `addr` (internal API + health) until `shutdown` resolves, then
/// drains for `drain` (see [`serve_on_draining`]). With a token in `auth`, every call must carry
/// it; without one, only a loopback bind is allowed.
pub async fn serve(
    shard: Arc<dyn ShardApi>,
    auth: Auth,
    addr: SocketAddr,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    drain: std::time::Duration,
    admission: Admission,
    tls: Option<ServerTls>,
    limits: &LimitsConfig,
) -> Result<()> {
    // Mutual TLS authenticates every caller; otherwise a bind beyond loopback needs a token.
    if !tls.as_ref().is_some_and(ServerTls::mutual) {
        auth.check_bind(addr, "the shard API")?;
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Unavailable(format!("bind {addr}: {e}")))?;
    serve_on_tls(
        shard, auth, listener, shutdown, drain, admission, tls, limits,
    )
    .await
}

/// A shard's admission: it answers every router's fan-out (two calls per search and shard), so
/// its limit is four times a router's.
pub fn shard_admission(limits: &LimitsConfig) -> Admission {
    Admission::new(
        4 * limits.effective_max_in_flight(),
        std::time::Duration::from_millis(limits.retry_after_ms),
    )
}

/// Like [`serve`], on a listener the caller bound (tests bind port 0).
pub async fn serve_on(
    shard: Arc<dyn ShardApi>,
    auth: Auth,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let admission = shard_admission(&LimitsConfig::default());
    serve_on_draining(
        shard,
        auth,
        listener,
        shutdown,
        std::time::Duration::ZERO,
        admission,
    )
    .await
}

/// [`serve_on`] with a drain period: when `shutdown` resolves, gRPC health turns NOT_SERVING at
/// once (the indexes were opened before the listener, so it is SERVING until then), requests
/// are still served for `drain`, then the listener closes and in-flight requests finish. Calls
/// beyond `admission`'s permits are refused with RESOURCE_EXHAUSTED at once.
pub async fn serve_on_draining(
    shard: Arc<dyn ShardApi>,
    auth: Auth,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    drain: std::time::Duration,
    admission: Admission,
) -> Result<()> {
    let limits = LimitsConfig::default();
    serve_on_tls(
        shard, auth, listener, shutdown, drain, admission, None, &limits,
    )
    .await
}

/// [`serve_on_draining`] over TLS when `tls` is set (the listener then speaks TLS only; with a
/// client CA, only callers with a certificate it issued get past the handshake), with the
/// connection bounds of `limits`.
#[allow(clippy::too_many_arguments)]
pub async fn serve_on_tls(
    shard: Arc<dyn ShardApi>,
    auth: Auth,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    drain: std::time::Duration,
    admission: Admission,
    tls: Option<ServerTls>,
    limits: &LimitsConfig,
) -> Result<()> {
    use tonic::server::NamedService;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Internal(e.to_string()))?;
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    let services = [
        "",
        <agentsearch_proto::shard_v1::shard_server::ShardServer<grpc::ShardGrpcService> as NamedService>::NAME,
    ];
    for service in services {
        health_reporter
            .set_service_status(service, tonic_health::ServingStatus::Serving)
            .await;
    }
    let shutdown = async move {
        shutdown.await;
        for service in services {
            health_reporter
                .set_service_status(service, tonic_health::ServingStatus::NotServing)
                .await;
        }
        if !drain.is_zero() {
            tracing::info!(
                drain_secs = drain.as_secs_f64(),
                "draining: NOT_SERVING, still serving"
            );
            tokio::time::sleep(drain).await;
        }
    };
    tracing::info!(
        %addr,
        tls = tls.is_some(),
        client_certificates = tls.as_ref().is_some_and(ServerTls::mutual),
        "shard gRPC listening"
    );
    agentsearch_common::metrics::handle();
    let shutdown = futures_util_shared(shutdown);
    // No call timeout of its own: a router bounds each call with grpc-timeout (writes may run
    // for minutes). Idle connections are pinged; one whose peer stopped answering is closed.
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(std::time::Duration::from_secs(10)))
        .tcp_keepalive(Some(std::time::Duration::from_secs(60)));
    if let Some(tls) = &tls {
        builder = builder
            .tls_config(tls.grpc(TLS_HANDSHAKE_TIMEOUT))
            .map_err(|e| Error::config("tls.cert_file", format!("gRPC TLS: {e}")))?;
    }
    let server = builder
        .layer(agentsearch_proto::admission::AdmissionLayer::new(admission))
        .layer(agentsearch_proto::grpc_metrics::GrpcMetricsLayer)
        .add_service(health_service)
        .add_service(
            grpc::ShardGrpcService::new(shard, auth)
                .with_client_names(
                    tls.as_ref()
                        .map(ServerTls::client_names)
                        .unwrap_or_default(),
                )
                .into_server(),
        )
        .serve_with_incoming_shutdown(
            agentsearch_proto::incoming::bounded(
                listener,
                limits.max_connections as usize,
                std::time::Duration::from_millis(limits.header_read_timeout_ms),
                "grpc_connection",
            ),
            shutdown.clone(),
        );
    // After the drain, in-flight calls get SHUTDOWN_GRACE to finish; a call still open then (a
    // router that never ends a stream) is cut, so the shard exits and flushes.
    tokio::select! {
        result = server => result.map_err(|e| Error::Internal(format!("shard server: {e}"))),
        () = async {
            shutdown.await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            tracing::warn!("shard calls still open after the drain: closing them");
            Ok(())
        }
    }
}
