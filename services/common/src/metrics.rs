//! Prometheus metrics: one recorder per process (the `metrics` facade with the Prometheus
//! exporter), installed by the first server that starts, rendered at `/metrics`. Names follow
//! Prometheus conventions (`_total` counters, `_seconds` histograms); labels are bounded sets
//! (routes, RPC names, codes, shard addresses, kinds), never a query, a user, a project or a tool.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Histogram buckets of every latency, in seconds: 0.25 ms to 10 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

pub const HTTP_REQUESTS: &str = "agentsearch_http_requests_total";
pub const HTTP_DURATION: &str = "agentsearch_http_request_duration_seconds";
pub const GRPC_REQUESTS: &str = "agentsearch_grpc_requests_total";
pub const GRPC_DURATION: &str = "agentsearch_grpc_request_duration_seconds";
pub const IN_FLIGHT: &str = "agentsearch_requests_in_flight";
pub const SHED: &str = "agentsearch_requests_shed_total";
pub const SHARD_CALL_DURATION: &str = "agentsearch_shard_call_duration_seconds";
pub const SHARD_CALL_FAILURES: &str = "agentsearch_shard_call_failures_total";
pub const PARTIAL_ANSWERS: &str = "agentsearch_partial_answers_total";
pub const DEGRADED_ANSWERS: &str = "agentsearch_degraded_answers_total";
pub const EMBED_DURATION: &str = "agentsearch_embedding_duration_seconds";
pub const EMBED_TEXTS: &str = "agentsearch_embedded_texts_total";
pub const EMBED_IN_FLIGHT: &str = "agentsearch_embeddings_in_flight";
pub const EMBED_CACHE: &str = "agentsearch_embedding_cache_lookups_total";
pub const TERM_STATS_CACHE: &str = "agentsearch_term_stats_cache_lookups_total";
pub const EMBED_QUEUE_FULL: &str = "agentsearch_embedding_queue_full_total";
pub const HYDRATION_CACHE: &str = "agentsearch_hydration_cache_lookups_total";
pub const HYDRATION_PROVIDER_DURATION: &str = "agentsearch_hydration_provider_duration_seconds";
pub const INGESTED: &str = "agentsearch_ingested_total";
pub const SHARD_INDEXES: &str = "agentsearch_shard_indexes";
pub const SHARD_TOOLS: &str = "agentsearch_shard_tools";
pub const SHARD_RESIDENT: &str = "agentsearch_shard_resident_memory_bytes";
pub const SHARD_SYNC_INDEXES: &str = "agentsearch_shard_sync_indexes";
pub const SHARD_SEGMENTS: &str = "agentsearch_shard_segments";
pub const SHARD_GENERATIONS: &str = "agentsearch_shard_index_generations";
pub const SHARDS_REACHABLE: &str = "agentsearch_shards_reachable";
pub const SHARDS_CONFIGURED: &str = "agentsearch_shards_configured";
pub const READY: &str = "agentsearch_ready";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's metrics, installed on first use (servers call it as they start, so nothing
/// they record is lost). Histograms are kept in the buckets of [`LATENCY_BUCKETS`]; a thread
/// runs the exporter's upkeep every 5 s.
pub fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets(LATENCY_BUCKETS)
            .expect("the bucket list is not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed: /metrics stays empty");
        }
        describe();
        let upkeep = handle.clone();
        let _ = std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_secs(5));
                    upkeep.run_upkeep();
                }
            });
        handle
    })
}

/// The exposition text of every metric (Prometheus text format 0.0.4).
pub fn render() -> String {
    handle().render()
}

/// The `Content-Type` of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn describe() {
    describe_counter!(
        HTTP_REQUESTS,
        "REST requests by route, method, status and error code."
    );
    describe_histogram!(
        HTTP_DURATION,
        Unit::Seconds,
        "REST request latency by route and method."
    );
    describe_counter!(
        GRPC_REQUESTS,
        "gRPC calls served, by service, method and status code."
    );
    describe_histogram!(
        GRPC_DURATION,
        Unit::Seconds,
        "gRPC call latency by service and method (to response headers for streams)."
    );
    describe_gauge!(IN_FLIGHT, "Requests being served, by API (rest, grpc).");
    describe_counter!(
        SHED,
        "Requests refused with RATE_LIMITED because the server was at its concurrency limit, by API."
    );
    describe_histogram!(
        SHARD_CALL_DURATION,
        Unit::Seconds,
        "Router -> shard call latency by RPC and shard address."
    );
    describe_counter!(
        SHARD_CALL_FAILURES,
        "Router -> shard calls that failed or timed out, by RPC and shard address."
    );
    describe_counter!(
        PARTIAL_ANSWERS,
        "Searches answered without some of their integrations or syncs, by search kind."
    );
    describe_counter!(
        DEGRADED_ANSWERS,
        "Searches answered by one retriever because the other failed, by mode."
    );
    describe_histogram!(
        EMBED_DURATION,
        Unit::Seconds,
        "Forward passes of the embedding model, by kind (query, batch)."
    );
    describe_counter!(
        EMBED_TEXTS,
        "Texts embedded by the model, by kind (query, batch)."
    );
    describe_gauge!(
        EMBED_IN_FLIGHT,
        "Forward passes of the embedding model running now."
    );
    describe_counter!(
        EMBED_CACHE,
        "Embedding cache lookups of queries and inline tools, by result (hit, miss)."
    );
    describe_counter!(
        TERM_STATS_CACHE,
        "Lookups of confirmed BM25 statistics by tool searches over several shards, by result \
         (hit, miss, stale: a shard's statistics had changed or a part failed; the entry is dropped \
         and, when no part failed and the deadline leaves room, the search runs again)."
    );
    describe_counter!(
        HYDRATION_CACHE,
        "Hydrated schema cache lookups, by result (hit, miss, error)."
    );
    describe_histogram!(
        HYDRATION_PROVIDER_DURATION,
        Unit::Seconds,
        "Hydration provider calls by outcome (ok, error)."
    );
    describe_counter!(
        INGESTED,
        "Items written by ingest, by kind (tools, records, segments)."
    );
    describe_gauge!(
        SHARD_INDEXES,
        "Indexes a shard holds (one per integration of a project, and per sync)."
    );
    describe_gauge!(SHARD_TOOLS, "Tools a shard holds.");
    describe_gauge!(
        SHARD_RESIDENT,
        Unit::Bytes,
        "Resident memory of the shard process."
    );
    describe_gauge!(
        SHARD_SYNC_INDEXES,
        "Content indexes (one per project and sync) held by the shard."
    );
    describe_gauge!(SHARD_SEGMENTS, "Content segments held by the shard.");
    describe_gauge!(
        SHARD_GENERATIONS,
        "Sum of the generations of the shard's indexes: grows with every write it applies."
    );
    describe_gauge!(
        SHARDS_REACHABLE,
        "Configured shards whose last probe by this router answered."
    );
    describe_gauge!(
        SHARDS_CONFIGURED,
        "Shard addresses this router is configured with."
    );
    describe_gauge!(
        READY,
        "1 when the router is ready (every shard holding data reachable), else 0."
    );
}
