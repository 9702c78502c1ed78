//! Configuration: defaults <- TOML file <- `AGENTSEARCH_SECTION__KEY` environment variables, then
//! [`Config::validate`], whose messages name the key path. One `Config` serves every subcommand;
//! each reads the sections it needs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

mod http;

pub use http::{HttpConfig, normalize_host, normalize_origin, split_port};

// Kept at their old paths: the sections of `[auth]` are authentication's own types.
pub use crate::auth::{AuthConfig, ProjectAuthConfig};
pub use crate::secret::Secret;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

/// The environment prefix. A variable is configuration when it names a top-level key
/// (`AGENTSEARCH_DATA_DIR`) or a section path with `__` (`AGENTSEARCH_SEARCH__RRF_K`); others sharing
/// the prefix (Kubernetes service links such as `AGENTSEARCH_PORT`, client settings such as
/// `AGENTSEARCH_TOKEN`) are ignored.
pub const ENV_PREFIX: &str = "AGENTSEARCH_";

/// Top-level keys that may be set without a section path.
const TOP_LEVEL_KEYS: &[&str] = &["data_dir", "http", "grpc"];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where indexes and the embedded metadata store live.
    pub data_dir: PathBuf,
    /// The REST API: listen address, allowed web origins and host names (`[http]`, or
    /// `http = "ADDR"` for the address alone).
    pub http: HttpConfig,
    /// gRPC listen address (router's public API, or a shard's internal API).
    pub grpc: SocketAddr,
    pub shards: ShardsConfig,
    pub server: ServerConfig,
    pub tls: TlsConfig,
    pub limits: LimitsConfig,
    pub postgres: PostgresConfig,
    pub auth: AuthConfig,
    pub embed: EmbedConfig,
    pub search: SearchConfig,
    pub lexical: LexicalConfig,
    pub context: ContextConfig,
    pub log: LogConfig,
    pub telemetry: TelemetryConfig,
    pub hydration: HydrationConfig,
    pub rerank: RerankConfig,
    pub tool_router: ToolRouterConfig,
    pub plans: PlansConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./data"),
            http: HttpConfig::default(),
            grpc: "127.0.0.1:50051".parse().expect("valid default"),
            shards: ShardsConfig::default(),
            server: ServerConfig::default(),
            tls: TlsConfig::default(),
            limits: LimitsConfig::default(),
            postgres: PostgresConfig::default(),
            auth: AuthConfig::default(),
            embed: EmbedConfig::default(),
            search: SearchConfig::default(),
            lexical: LexicalConfig::default(),
            context: ContextConfig::default(),
            log: LogConfig::default(),
            telemetry: TelemetryConfig::default(),
            rerank: RerankConfig::default(),
            tool_router: ToolRouterConfig::default(),
            plans: PlansConfig::default(),
            hydration: HydrationConfig::default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShardsConfig {
    /// In-process shards of `serve`.
    pub local: u32,
    /// gRPC addresses of remote shards (`router`). Read again from the configuration file
    /// every `refresh_secs`: shards added to the list join, shards removed from it leave,
    /// without a restart.
    pub remote: Vec<String>,
    /// `router`: learn the shards' addresses from DNS instead of `remote`: `host:port`, every
    /// address `host` resolves to is a shard (a Kubernetes headless Service of the shard pods),
    /// resolved again every `refresh_secs`.
    pub dns: Option<String>,
    /// Shards that hold each integration.
    pub replication: u32,
    /// How often a router probes every address of `remote` (in seconds): shards that were down
    /// join, a shard answering with a new id is re-keyed, readiness follows reachability.
    pub refresh_secs: u64,
    /// A search's call to one replica still unanswered after this many milliseconds is also
    /// sent to the other replicas of its integrations (or syncs); the first complete answer
    /// wins. 0: never hedge (a failed call still goes to another replica at once).
    pub hedge_after_ms: u64,
    /// Replicas that must acknowledge a write of an integration or sync before it is
    /// acknowledged; replicas that miss it are marked stale, are not read from, and are repaired
    /// from a healthy one. 0: a majority of `replication`.
    pub write_quorum: u32,
    /// How often a router looks for stale replicas to repair, in seconds; the same pass
    /// advances replica moves (drains, rebalances).
    pub repair_secs: u64,
    /// How long a router trusts its cached copy of a project's placements and stale replicas,
    /// in milliseconds. Replica moves wait twice this long between steps, so that every router
    /// has seen a step before the next.
    pub metadata_cache_ms: u64,
    /// Rebalance automatically: whenever no replica move is in progress, move replicas from the
    /// most to the least loaded shards (a shard that joined gets its share). Off: only
    /// `agentsearch admin rebalance` does.
    pub auto_rebalance: bool,
    /// `router`: call shards over TLS, trusting the certificate authorities of this PEM file.
    /// Unset: plain text, unless an address is `https://` (then the system's roots are trusted).
    pub tls_ca_file: Option<PathBuf>,
    /// `router`: the certificate (PEM chain) it presents to shards that require one (mutual
    /// TLS; the shards' `tls.client_ca_file`). With it and no `auth.internal_token`, the router
    /// sends shards no bearer token: the certificate is its credential.
    pub tls_cert_file: Option<PathBuf>,
    /// `router`: the private key (PEM) of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// `router`: the name shard certificates must carry, when it differs from the addresses'
    /// host (addresses by IP, one certificate for every shard).
    pub tls_server_name: Option<String>,
}

/// TLS of this process's listeners (`[tls]`): the router's REST and gRPC APIs (`serve` too),
/// or a shard's gRPC API. Unset: plain text.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// The server certificate, a PEM chain (leaf first).
    pub cert_file: Option<PathBuf>,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
    /// When set, callers must present a certificate issued by one of these authorities (PEM):
    /// on a shard, the routers' certificate (mutual TLS between router and shards).
    pub client_ca_file: Option<PathBuf>,
    /// A shard with `client_ca_file`: the names (DNS names of the certificate) of which a
    /// caller's certificate must carry one. Empty: any certificate the authorities issued, so use
    /// authorities that issue certificates to this deployment's routers only.
    pub client_names: Vec<String>,
}

/// Process lifecycle.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// On SIGTERM: seconds during which the process reports not ready (readiness 503, gRPC health
    /// NOT_SERVING) while still serving, so load balancers stop sending before it stops
    /// listening; then in-flight requests finish and it exits. 0 stops at once.
    pub drain_secs: u64,
    /// `shard`: where its Prometheus metrics are served (`GET /metrics`), e.g. `0.0.0.0:9090`;
    /// unset, a shard serves none. A router serves `/metrics` on its REST listener.
    pub metrics_listen: Option<SocketAddr>,
}

impl ShardsConfig {
    /// Acknowledgements a write needs: `write_quorum`, or a majority of `replication`.
    pub fn effective_write_quorum(&self) -> usize {
        match self.write_quorum {
            0 => self.replication as usize / 2 + 1,
            n => n as usize,
        }
    }
}

impl Default for ShardsConfig {
    fn default() -> Self {
        Self {
            local: 2,
            remote: Vec::new(),
            dns: None,
            replication: 1,
            refresh_secs: 5,
            hedge_after_ms: 25,
            write_quorum: 0,
            repair_secs: 5,
            metadata_cache_ms: 5000,
            auto_rebalance: false,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_server_name: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PostgresConfig {
    /// `postgres://user@host:port/db`; required by `router`.
    pub url: Option<Secret>,
    /// Schema holding agentsearch's tables (created if missing).
    pub schema: Option<String>,
    pub pool_size: Option<u32>,
    /// TLS to PostgreSQL: `disable`, `require` (encrypted, certificate not checked) or
    /// `verify-full` (certificate checked against `ca_file`, or the system's roots, and the host
    /// name).
    pub tls_mode: PgTlsMode,
    /// PEM file of the certificate authorities `verify-full` trusts (default: the system's).
    pub ca_file: Option<PathBuf>,
    /// How long a request waits for a pooled connection before failing as unavailable (ms).
    pub pool_wait_timeout_ms: u64,
    /// The server cancels any statement running longer (`statement_timeout`, ms).
    pub statement_timeout_ms: u64,
}

/// What a process accepts at once: beyond these, requests are refused at once with
/// `RATE_LIMITED` (HTTP 429, gRPC RESOURCE_EXHAUSTED) and `retryAfterMs`, never queued without
/// bound. Health, readiness and metrics are never refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Requests served at once by a router (REST and gRPC together); a shard admits four times
    /// as many of its gRPC calls. 0 (the default) means four per CPU core: searches are
    /// CPU-bound, and more in flight only queue (see BENCHMARKS.md, "Overload").
    pub max_in_flight: u32,
    /// The `retryAfterMs` a refused request is given.
    pub retry_after_ms: u64,
    /// A REST request or a router's gRPC call taking longer is answered `TIMEOUT` (HTTP 504,
    /// gRPC DEADLINE_EXCEEDED); its writes still complete. A caller's shorter `grpc-timeout`
    /// applies too. (A shard's calls are bounded by the router's deadlines.)
    pub request_timeout_ms: u64,
    /// A REST connection must send a request's headers within this time and a gRPC connection
    /// its first bytes, or it is closed; a router's TLS handshakes have this time too (a shard's
    /// 10 s).
    pub header_read_timeout_ms: u64,
    /// Open connections per listener (REST, gRPC); more are closed as they are accepted.
    pub max_connections: u32,
    /// Query embeddings computed or waiting for a core at once (0: two per CPU core). A search
    /// whose query would wait beyond it ranks by BM25 alone (`degraded: lexical_only`) instead of
    /// queueing behind the model.
    pub max_queued_embeddings: u32,
}

impl LimitsConfig {
    /// `max_queued_embeddings`, with 0 read as two per CPU core.
    pub fn effective_max_queued_embeddings(&self) -> usize {
        match self.max_queued_embeddings {
            0 => 2 * std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n as usize,
        }
    }

    /// `max_in_flight`, with 0 read as four per CPU core (at least 4).
    pub fn effective_max_in_flight(&self) -> usize {
        match self.max_in_flight {
            0 => 4 * std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n as usize,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_in_flight: 0,
            retry_after_ms: 200,
            request_timeout_ms: 60_000,
            header_read_timeout_ms: 10_000,
            max_connections: 2048,
            max_queued_embeddings: 0,
        }
    }
}

impl Default for PostgresConfig {
    fn default() -> Self {
        Self {
            url: None,
            schema: None,
            pool_size: None,
            tls_mode: PgTlsMode::Disable,
            ca_file: None,
            pool_wait_timeout_ms: 5_000,
            statement_timeout_ms: 30_000,
        }
    }
}

/// How the router's PostgreSQL connections use TLS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PgTlsMode {
    #[default]
    Disable,
    Require,
    VerifyFull,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedConfig {
    /// Folder with `config.json`, `tokenizer.json`, `model.safetensors` of all-MiniLM-L6-v2.
    pub model_dir: PathBuf,
    /// Memory for cached embeddings of queries and inline custom tools, in MiB, counting texts,
    /// vectors and bookkeeping (0 disables the cache). 32 MiB holds about 16,000 short queries.
    pub query_cache_mib: u64,
    /// Deprecated: the cache used to be bounded by entries. When set, it is read as that many
    /// entries of 2 KiB (a short query's size) and takes precedence over `query_cache_mib`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_cache_size: Option<u64>,
    /// Texts per forward pass at ingest and for inline custom tools.
    pub batch_size: usize,
}

impl EmbedConfig {
    /// The embedding cache's budget in bytes.
    pub fn query_cache_bytes(&self) -> u64 {
        match self.query_cache_size {
            Some(entries) => entries.saturating_mul(2048),
            None => self.query_cache_mib.saturating_mul(1 << 20),
        }
    }
}

impl Default for EmbedConfig {
    fn default() -> Self {
        Self {
            model_dir: PathBuf::from("models/all-MiniLM-L6-v2"),
            query_cache_mib: 32,
            query_cache_size: None,
            batch_size: 32,
        }
    }
}

/// The tool-router-compatible routes (`[tool_router]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolRouterConfig {
    /// How long a session searches after it was created (60..=2592000).
    pub session_ttl_secs: u64,
    /// The project of sessions created without a token naming one (`project` claim) or an
    /// `x-agentsearch-project` header; `serve` with its demo data uses the demo project.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_project: Option<String>,
}

impl Default for ToolRouterConfig {
    fn default() -> Self {
        Self {
            session_ttl_secs: 86_400,
            default_project: None,
        }
    }
}

/// Recorded plans (`[plans]`): what worked for a use case, recommended to multi-query searches
/// whose use case is close to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlansConfig {
    /// Searches recommend recorded plans (plans are recorded, listed and deleted either way).
    pub enabled: bool,
    /// The least cosine similarity between a query's use case and the best ranked plan's for
    /// the plan to be recommended (0..=1).
    pub min_similarity: f64,
}

impl Default for PlansConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            min_similarity: 0.8,
        }
    }
}

/// Who reranks the best fused candidates of tool and context searches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RerankProvider {
    /// Nothing reranks: `rerankOutcome` is `disabled_by_deployment`.
    #[default]
    None,
    /// `POST url` with `{"query", "texts"}`, answered `[{"index", "score"}]` (the `/rerank`
    /// route of text-embeddings-inference and servers like it).
    Http,
    /// A BERT cross-encoder (sequence classification, safetensors) in `model_dir`, run on the
    /// embedder's CPU kernels.
    Local,
}

/// Reranking (`[rerank]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RerankConfig {
    pub provider: RerankProvider,
    /// The rerank endpoint of `provider = "http"`, e.g. `http://tei:8080/rerank`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The cross-encoder's folder (`config.json`, `tokenizer.json`, `model.safetensors`) of
    /// `provider = "local"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_dir: Option<PathBuf>,
    /// Fused candidates reranked per query (tools, or records with their passages), 1..=100.
    pub top_n: usize,
    /// At most this long per rerank call, and never past the request's deadline (1..=60000).
    pub timeout_ms: u64,
}

impl Default for RerankConfig {
    fn default() -> Self {
        Self {
            provider: RerankProvider::None,
            url: None,
            model_dir: None,
            top_n: 20,
            timeout_ms: 300,
        }
    }
}

impl RerankConfig {
    fn validate(&self, errors: &mut Vec<String>) {
        if !(1..=100).contains(&self.top_n) {
            errors.push(format!(
                "rerank.top_n: must be between 1 and 100, got {}",
                self.top_n
            ));
        }
        if !(1..=60_000).contains(&self.timeout_ms) {
            errors.push(format!(
                "rerank.timeout_ms: must be between 1 and 60000, got {}",
                self.timeout_ms
            ));
        }
        match self.provider {
            RerankProvider::Http => match self.url.as_deref() {
                Some(url) if url.starts_with("http://") || url.starts_with("https://") => {}
                Some(url) => errors.push(format!(
                    "rerank.url: must start with http:// or https://, got `{url}`"
                )),
                None => errors.push("rerank.url: required with provider = \"http\"".to_string()),
            },
            RerankProvider::Local => {
                if self.model_dir.is_none() {
                    errors.push("rerank.model_dir: required with provider = \"local\"".to_string());
                }
            }
            RerankProvider::None => {}
        }
        if self.provider != RerankProvider::Http && self.url.is_some() {
            errors.push("rerank.url: only used with provider = \"http\"".to_string());
        }
        if self.provider != RerankProvider::Local && self.model_dir.is_some() {
            errors.push("rerank.model_dir: only used with provider = \"local\"".to_string());
        }
    }
}

/// Fusion of the lexical and dense candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// Standardised scores with weights decided per query from the candidate lists (how much of
    /// the query each list's best candidates contain; optionally the best cosine and the lists'
    /// top margins); see `agentsearch_fusion::adaptive`. The default.
    Adaptive,
    /// Weighted mean of each retriever's scores standardised over its candidates.
    Score,
    /// Weighted reciprocal rank fusion.
    Rrf,
}

/// Lexical (BM25F) scoring, applied by shards; every shard of a deployment must use the same.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LexicalConfig {
    /// Weight of the name field (the tool's name and integration split into words).
    pub name_weight: f32,
    pub description_weight: f32,
    /// Weight of the parameter names and descriptions.
    pub params_weight: f32,
    /// Term-frequency saturation.
    pub k1: f32,
    /// Length normalisation, 0 (none) to 1 (full).
    pub b: f32,
}

impl Default for LexicalConfig {
    fn default() -> Self {
        Self {
            name_weight: 2.0,
            description_weight: 1.0,
            params_weight: 1.0,
            k1: 1.2,
            b: 0.5,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// Deadline of one search, fan-out included.
    pub deadline_ms: u64,
    /// Candidates each retriever contributes to fusion.
    pub candidates: u32,
    /// How the retrievers' candidates are fused: `adaptive` (standardised scores, weights per
    /// query), `score` (standardised scores, fixed weights) or `rrf` (reciprocal rank fusion).
    pub fusion: Fusion,
    /// The `k` of reciprocal rank fusion: `weight / (k + rank)`.
    pub rrf_k: f64,
    pub lexical_weight: f64,
    pub dense_weight: f64,
    /// Adaptive fusion: the best cosine at which the dense weight is `dense_weight`.
    pub cosine_reference: f64,
    /// Adaptive fusion: the dense weight is scaled by `(best cosine / cosine_reference) ^ this`.
    pub cosine_exponent: f64,
    /// Adaptive fusion: the lexical weight is scaled by `exp(this x (lexical top z - dense top
    /// z))`.
    pub margin_exponent: f64,
    /// Adaptive fusion: the lexical weight is scaled by `exp(this x max(0, lexical coverage -
    /// dense coverage - coverage_margin))`, where a list's coverage is the largest fraction of the
    /// query's terms one of its first three candidates contains. Context search uses the adaptive
    /// keys too, with its own base weights.
    pub coverage_gain: f64,
    pub coverage_margin: f64,
    /// `topK` when the request has neither `topK` nor `maxToolTokens`.
    pub default_top_k: u32,
    /// Memory for the tool searches feedback may refer to (their candidate lists, by request
    /// id), per router; 0 turns feedback off.
    pub feedback_log_mib: u64,
    /// How long a search can receive feedback.
    pub feedback_log_secs: u64,
    /// A project's ranking model is refit at most once per this many seconds while feedback
    /// arrives.
    pub feedback_refit_secs: u64,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            deadline_ms: 2_000,
            candidates: 50,
            // Adaptive by coverage, with the setting chosen leave-one-dataset-out (EVALUATION.md).
            fusion: Fusion::Adaptive,
            rrf_k: 60.0,
            lexical_weight: 1.0,
            dense_weight: 1.5,
            cosine_reference: 0.5,
            cosine_exponent: 0.0,
            margin_exponent: 0.0,
            coverage_gain: 2.0,
            coverage_margin: 0.0,
            default_top_k: 8,
            feedback_log_mib: 64,
            feedback_log_secs: 3_600,
            feedback_refit_secs: 5,
        }
    }
}

/// Context search: how records are segmented and how segments are ranked. The lexical keys are
/// applied by shards and must be the same on every shard of a deployment.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    /// Words a segment aims for; paragraphs and sentences are packed up to it.
    pub segment_words: u32,
    /// Words of the previous segment's last sentences repeated at the start of the next (at most).
    pub overlap_words: u32,
    /// Candidates each retriever contributes to fusion (segments).
    pub candidates: u32,
    /// Base weights of fusion (`search.fusion` and its adaptive keys apply, as for tools).
    pub lexical_weight: f64,
    pub dense_weight: f64,
    /// BM25F weight of the record's display name, repeated on each of its segments.
    pub title_weight: f32,
    /// BM25F weight of the segment's text.
    pub text_weight: f32,
    pub k1: f32,
    pub b: f32,
    /// A sync holding more segments than this has its vectors clustered (`sqrt(2n)` lists for
    /// the `n` segments held when clustered; again once doubled) and the dense retriever reads only
    /// the `dense_probes` lists nearest each query; up to this, it compares the query with every
    /// segment.
    pub dense_approximate_above: u32,
    /// Lists the dense retriever reads per query of a clustered sync.
    pub dense_probes: u32,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            segment_words: 150,
            overlap_words: 30,
            candidates: 100,
            lexical_weight: 1.0,
            // As for tools: adaptive fusion was chosen with these base weights (EVALUATION.md).
            dense_weight: 1.5,
            title_weight: 1.0,
            text_weight: 1.0,
            k1: 1.2,
            b: 0.75,
            dense_approximate_above: 50_000,
            dense_probes: 112,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// JSON lines instead of text.
    pub json: bool,
}

/// Traces (`[telemetry]`): spans exported over OTLP/gRPC to a collector. The standard `OTEL_*`
/// variables apply where these keys are unset (`OTEL_EXPORTER_OTLP_ENDPOINT`,
/// `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`);
/// `OTEL_SDK_DISABLED=true` turns tracing off.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The collector's OTLP/gRPC address (`http://otel-collector:4317`). Unset and no standard
    /// variable set: no spans are exported.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of this process's spans (default `OTEL_SERVICE_NAME`, else
    /// `agentsearch-serve`, `agentsearch-router` or `agentsearch-shard`).
    pub service_name: Option<String>,
    /// Fraction of new traces kept, 0 to 1; a caller's sampling decision is always followed.
    /// Unset: `OTEL_TRACES_SAMPLER`, else every trace.
    pub sample_ratio: Option<f64>,
}

/// Per-user tool schemas: an integration whose tools' parameters depend on the user (a CRM's custom
/// fields) names a provider; its answers are cached per project, user, tool and catalog version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HydrationConfig {
    /// Where hydrated schemas are kept: `memory` (in-process), `redis` (shared by routers) or `none`.
    pub cache: HydrationCache,
    /// Redis of `cache = "redis"`: `redis://[user:password@]host:port[/db]`, or `rediss://` for
    /// TLS.
    pub redis_url: Secret,
    /// `rediss://`: the certificate authorities (PEM) the server's certificate must chain to
    /// (default: the system's roots).
    pub redis_ca_file: Option<PathBuf>,
    /// `https://` providers: the certificate authorities (PEM) their certificates must chain to
    /// (default: the system's roots).
    pub tls_ca_file: Option<PathBuf>,
    /// How long a hydrated schema, or a provider's "nothing for this user", is kept.
    pub ttl_secs: u64,
    /// Provider timeout of the integrations that set none.
    pub timeout_ms: u64,
    /// Bound on each cache call: a slow or down Redis costs at most this, then counts as a miss.
    pub cache_timeout_ms: u64,
    /// Integrations whose tool schemas are hydrated, by integration slug.
    pub integrations: BTreeMap<String, HydrationIntegrationConfig>,
}

impl Default for HydrationConfig {
    fn default() -> Self {
        Self {
            cache: HydrationCache::Memory,
            redis_url: Secret::new("redis://127.0.0.1:6379"),
            redis_ca_file: None,
            tls_ca_file: None,
            ttl_secs: 300,
            timeout_ms: 800,
            cache_timeout_ms: 50,
            integrations: BTreeMap::new(),
        }
    }
}

/// Where hydrated schemas are cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HydrationCache {
    Memory,
    Redis,
    None,
}

/// Where an integration's per-user schemas come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HydrationProvider {
    /// `POST url` with the user, the tool and its static schema; answers the hydrated schema.
    Http,
    /// A JSON file `{tool: {user id or "*": parameters schema}}`, read at startup.
    File,
}

/// One integration's hydration provider.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HydrationIntegrationConfig {
    pub provider: HydrationProvider,
    /// `http://host:port/path` of `provider = "http"`.
    #[serde(default)]
    pub url: Option<String>,
    /// JSON file of `provider = "file"`, relative to the configuration's base folder.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Provider timeout; `hydration.timeout_ms` when absent.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl HydrationConfig {
    /// Pushes one message per invalid key of `[hydration]`, each starting with the key path.
    fn validate(&self, errors: &mut Vec<String>) {
        if self.ttl_secs == 0 {
            errors.push("hydration.ttl_secs: must be >= 1".to_string());
        }
        if self.timeout_ms == 0 {
            errors.push("hydration.timeout_ms: must be >= 1".to_string());
        }
        if self.cache_timeout_ms == 0 {
            errors.push("hydration.cache_timeout_ms: must be >= 1".to_string());
        }
        if self.cache == HydrationCache::Redis {
            let url = self.redis_url.expose();
            if !["redis://", "rediss://", "redis+unix://", "unix://"]
                .iter()
                .any(|scheme| url.starts_with(scheme))
            {
                errors.push(
                    "hydration.redis_url: must start with redis://, rediss://, redis+unix:// or \
                     unix://"
                        .to_string(),
                );
            }
        }
        for (slug, integration) in &self.integrations {
            let key = format!("hydration.integrations.{slug}");
            let slug_ok = !slug.is_empty()
                && slug.len() <= 64
                && slug
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
            if !slug_ok {
                errors.push(format!(
                    "{key}: the integration must be a lowercase slug of 1 to 64 characters [a-z0-9_-]"
                ));
            }
            if integration.timeout_ms == Some(0) {
                errors.push(format!("{key}.timeout_ms: must be >= 1"));
            }
            match integration.provider {
                HydrationProvider::Http => {
                    match integration.url.as_deref() {
                        None => {
                            errors.push(format!("{key}.url: required when provider = \"http\""))
                        }
                        Some(url)
                            if !(url.starts_with("http://") && url.len() > "http://".len()
                                || url.starts_with("https://") && url.len() > "https://".len()) =>
                        {
                            errors.push(format!(
                                "{key}.url: must be an http:// or https:// URL, got `{url}`"
                            ))
                        }
                        Some(_) => {}
                    }
                    if integration.path.is_some() {
                        errors.push(format!("{key}.path: only used when provider = \"file\""));
                    }
                }
                HydrationProvider::File => {
                    if integration.path.is_none() {
                        errors.push(format!("{key}.path: required when provider = \"file\""));
                    }
                    if integration.url.is_some() {
                        errors.push(format!("{key}.url: only used when provider = \"http\""));
                    }
                }
            }
        }
    }
}

/// A configuration that could not be loaded or is invalid; each message names a key path.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {}", .0.join("; "))]
pub struct ConfigError(pub Vec<String>);

impl Config {
    /// Loads defaults, then `file` (if any), then the environment, then validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Self::figment(file)
            .extract::<Config>()
            .map_err(|err| {
                ConfigError(
                    err.into_iter()
                        .map(|e| {
                            let path = e.path.join(".");
                            if path.is_empty() {
                                e.to_string()
                            } else {
                                format!("{path}: {}", e.kind)
                            }
                        })
                        .collect(),
                )
            })
            .and_then(|config| config.validate().map(|()| config))
    }

    fn figment(file: Option<&Path>) -> Figment {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            figment = figment.merge(Toml::file_exact(file));
        }
        if let Ok(listen) = figment.extract_inner::<String>("http") {
            // `http = "ADDR"`, as a table, so that `AGENTSEARCH_HTTP__*` variables merge with it.
            figment = figment.merge(Serialized::default("http.listen", listen));
        }
        figment.merge(
            Env::prefixed(ENV_PREFIX)
                .filter(|key| {
                    let key = key.as_str();
                    key.contains("__") || TOP_LEVEL_KEYS.iter().any(|k| key.eq_ignore_ascii_case(k))
                })
                .split("__")
                // `AGENTSEARCH_HTTP=ADDR` sets the listen address and keeps the rest of `[http]`.
                .map(|key| {
                    if key.as_str().eq_ignore_ascii_case("http") {
                        "http.listen".into()
                    } else {
                        key.into()
                    }
                }),
        )
    }

    /// Checks cross-field rules; each message starts with the key path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        let s = &self.search;
        if !(s.rrf_k.is_finite() && s.rrf_k >= 0.0) {
            errors.push(format!(
                "search.rrf_k: must be a finite number >= 0, got {}",
                s.rrf_k
            ));
        }
        for (key, w) in [
            ("search.lexical_weight", s.lexical_weight),
            ("search.dense_weight", s.dense_weight),
        ] {
            if !(w.is_finite() && w >= 0.0) {
                errors.push(format!("{key}: must be a finite number >= 0, got {w}"));
            }
        }
        if s.lexical_weight == 0.0 && s.dense_weight == 0.0 {
            errors.push(
                "search.lexical_weight: at least one retriever weight must be > 0".to_string(),
            );
        }
        if !(s.cosine_reference.is_finite()
            && s.cosine_reference > 0.0
            && s.cosine_reference <= 1.0)
        {
            errors.push(format!(
                "search.cosine_reference: must be in (0, 1], got {}",
                s.cosine_reference
            ));
        }
        for (key, x) in [
            ("search.cosine_exponent", s.cosine_exponent),
            ("search.margin_exponent", s.margin_exponent),
            ("search.coverage_gain", s.coverage_gain),
        ] {
            if !(x.is_finite() && (0.0..=8.0).contains(&x)) {
                errors.push(format!("{key}: must be a number from 0 to 8, got {x}"));
            }
        }
        if !(s.coverage_margin.is_finite() && (0.0..=1.0).contains(&s.coverage_margin)) {
            errors.push(format!(
                "search.coverage_margin: must be a number from 0 to 1, got {}",
                s.coverage_margin
            ));
        }
        if s.feedback_log_mib > 64 * 1024 {
            errors.push(format!(
                "search.feedback_log_mib: must be at most 65536, got {}",
                s.feedback_log_mib
            ));
        }
        if s.feedback_log_mib > 0 && !(1..=7 * 86_400).contains(&s.feedback_log_secs) {
            errors.push(format!(
                "search.feedback_log_secs: must be from 1 to 604800, got {}",
                s.feedback_log_secs
            ));
        }
        if s.feedback_refit_secs > 86_400 {
            errors.push(format!(
                "search.feedback_refit_secs: must be at most 86400, got {}",
                s.feedback_refit_secs
            ));
        }
        let l = &self.lexical;
        for (key, w) in [
            ("lexical.name_weight", l.name_weight),
            ("lexical.description_weight", l.description_weight),
            ("lexical.params_weight", l.params_weight),
            ("lexical.k1", l.k1),
        ] {
            if !(w.is_finite() && w >= 0.0) {
                errors.push(format!("{key}: must be a finite number >= 0, got {w}"));
            }
        }
        if l.name_weight + l.description_weight + l.params_weight <= 0.0 {
            errors.push("lexical.name_weight: at least one field weight must be > 0".to_string());
        }
        if !(0.0..=1.0).contains(&l.b) {
            errors.push(format!("lexical.b: must be between 0 and 1, got {}", l.b));
        }
        if !(1..=1000).contains(&s.candidates) {
            errors.push(format!(
                "search.candidates: must be between 1 and 1000, got {}",
                s.candidates
            ));
        }
        if s.candidates < 50 {
            errors.push(format!(
                "search.candidates: must be at least 50 (the largest topK), got {}",
                s.candidates
            ));
        }
        if !(1..=50).contains(&s.default_top_k) {
            errors.push(format!(
                "search.default_top_k: must be between 1 and 50, got {}",
                s.default_top_k
            ));
        }
        if s.deadline_ms == 0 {
            errors.push("search.deadline_ms: must be > 0".to_string());
        }
        if !(1..=64).contains(&self.shards.local) {
            errors.push(format!(
                "shards.local: must be between 1 and 64, got {}",
                self.shards.local
            ));
        }
        if self.shards.replication == 0 {
            errors.push("shards.replication: must be >= 1".to_string());
        }
        if self.shards.write_quorum > self.shards.replication {
            errors.push(format!(
                "shards.write_quorum: {} exceeds shards.replication ({}): no write could succeed",
                self.shards.write_quorum, self.shards.replication
            ));
        }
        if !(100..=60_000).contains(&self.shards.metadata_cache_ms) {
            errors.push(format!(
                "shards.metadata_cache_ms: must be between 100 and 60000, got {}",
                self.shards.metadata_cache_ms
            ));
        }
        if !(1..=3600).contains(&self.shards.repair_secs) {
            errors.push(format!(
                "shards.repair_secs: must be between 1 and 3600, got {}",
                self.shards.repair_secs
            ));
        }
        if self.shards.hedge_after_ms > 60_000 {
            errors.push(format!(
                "shards.hedge_after_ms: must be at most 60000 (0 turns hedging off), got {}",
                self.shards.hedge_after_ms
            ));
        }
        if !(1..=3600).contains(&self.shards.refresh_secs) {
            errors.push(format!(
                "shards.refresh_secs: must be between 1 and 3600, got {}",
                self.shards.refresh_secs
            ));
        }
        let l = &self.limits;
        for (key, value, min, max) in [
            (
                "limits.max_in_flight",
                u64::from(l.max_in_flight),
                0,
                100_000,
            ),
            ("limits.retry_after_ms", l.retry_after_ms, 1, 600_000),
            (
                "limits.request_timeout_ms",
                l.request_timeout_ms,
                100,
                3_600_000,
            ),
            (
                "limits.header_read_timeout_ms",
                l.header_read_timeout_ms,
                100,
                600_000,
            ),
            (
                "limits.max_connections",
                u64::from(l.max_connections),
                1,
                1_000_000,
            ),
        ] {
            if !(min..=max).contains(&value) {
                errors.push(format!(
                    "{key}: must be between {min} and {max}, got {value}"
                ));
            }
        }
        if self.server.drain_secs > 3600 {
            errors.push(format!(
                "server.drain_secs: must be at most 3600, got {}",
                self.server.drain_secs
            ));
        }
        for (key, value) in [
            (
                "postgres.pool_wait_timeout_ms",
                self.postgres.pool_wait_timeout_ms,
            ),
            (
                "postgres.statement_timeout_ms",
                self.postgres.statement_timeout_ms,
            ),
        ] {
            if !(10..=3_600_000).contains(&value) {
                errors.push(format!(
                    "{key}: must be between 10 and 3600000, got {value}"
                ));
            }
        }
        if self.postgres.ca_file.is_some() && self.postgres.tls_mode != PgTlsMode::VerifyFull {
            errors
                .push("postgres.ca_file: is only used with tls_mode = \"verify-full\"".to_string());
        }
        if self.embed.batch_size == 0 {
            errors.push("embed.batch_size: must be >= 1".to_string());
        }
        self.rerank.validate(&mut errors);
        if !(60..=2_592_000).contains(&self.tool_router.session_ttl_secs) {
            errors.push(format!(
                "tool_router.session_ttl_secs: must be between 60 and 2592000, got {}",
                self.tool_router.session_ttl_secs
            ));
        }
        if !(0.0..=1.0).contains(&self.plans.min_similarity) {
            errors.push(format!(
                "plans.min_similarity: must be between 0 and 1, got {}",
                self.plans.min_similarity
            ));
        }
        if let Some(project) = &self.tool_router.default_project
            && crate::ids::parse_project_id("tool_router.default_project", project).is_err()
        {
            errors.push(format!(
                "tool_router.default_project: must be a project id (a UUID), got `{}`",
                crate::ids::truncate(project, 64)
            ));
        }
        if let Some(token) = &self.auth.token
            && token.expose().len() < 16
        {
            errors.push("auth.token: must be at least 16 characters".to_string());
        }
        errors.extend(crate::auth::config_problems(&self.auth));
        if let Some(schema) = &self.postgres.schema
            && !(schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && schema
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_lowercase()))
        {
            errors.push(format!(
                "postgres.schema: must match [a-z][a-z0-9_]*, got `{schema}`"
            ));
        }
        let c = &self.context;
        if !(16..=1000).contains(&c.segment_words) {
            errors.push(format!(
                "context.segment_words: must be between 16 and 1000, got {}",
                c.segment_words
            ));
        }
        if c.overlap_words >= c.segment_words / 2 {
            errors.push(format!(
                "context.overlap_words: must be less than half of context.segment_words, got {}",
                c.overlap_words
            ));
        }
        if !(50..=1000).contains(&c.candidates) {
            errors.push(format!(
                "context.candidates: must be between 50 and 1000, got {}",
                c.candidates
            ));
        }
        for (key, w) in [
            ("context.lexical_weight", c.lexical_weight),
            ("context.dense_weight", c.dense_weight),
        ] {
            if !(w.is_finite() && w >= 0.0) {
                errors.push(format!("{key}: must be a finite number >= 0, got {w}"));
            }
        }
        if c.lexical_weight == 0.0 && c.dense_weight == 0.0 {
            errors.push(
                "context.lexical_weight: at least one retriever weight must be > 0".to_string(),
            );
        }
        for (key, w) in [
            ("context.title_weight", c.title_weight),
            ("context.text_weight", c.text_weight),
            ("context.k1", c.k1),
        ] {
            if !(w.is_finite() && w >= 0.0) {
                errors.push(format!("{key}: must be a finite number >= 0, got {w}"));
            }
        }
        if c.title_weight + c.text_weight <= 0.0 {
            errors.push("context.text_weight: at least one field weight must be > 0".to_string());
        }
        if !(0.0..=1.0).contains(&c.b) {
            errors.push(format!("context.b: must be between 0 and 1, got {}", c.b));
        }
        if c.dense_approximate_above < 1000 {
            errors.push(format!(
                "context.dense_approximate_above: must be at least 1000, got {}",
                c.dense_approximate_above
            ));
        }
        if !(1..=65_536).contains(&c.dense_probes) {
            errors.push(format!(
                "context.dense_probes: must be between 1 and 65536, got {}",
                c.dense_probes
            ));
        }
        self.hydration.validate(&mut errors);
        self.http.validate(&mut errors);
        let tls = &self.tls;
        match (&tls.cert_file, &tls.key_file) {
            (Some(_), None) => errors.push("tls.key_file: required with tls.cert_file".to_string()),
            (None, Some(_)) => errors.push("tls.cert_file: required with tls.key_file".to_string()),
            _ => {}
        }
        if !tls.client_names.is_empty() && tls.client_ca_file.is_none() {
            errors.push(
                "tls.client_names: needs tls.client_ca_file (client certificates)".to_string(),
            );
        }
        for (i, name) in tls.client_names.iter().enumerate() {
            let ok = !name.is_empty()
                && name.len() <= 253
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'));
            if !ok {
                errors.push(format!(
                    "tls.client_names[{i}]: must be a DNS name, got `{}`",
                    crate::ids::truncate(name, 64)
                ));
            }
        }
        if tls.client_ca_file.is_some() && tls.cert_file.is_none() {
            errors.push(
                "tls.client_ca_file: client certificates need TLS: set tls.cert_file and \
                 tls.key_file"
                    .to_string(),
            );
        }
        match (&self.shards.tls_cert_file, &self.shards.tls_key_file) {
            (Some(_), None) => {
                errors.push("shards.tls_key_file: required with shards.tls_cert_file".to_string())
            }
            (None, Some(_)) => {
                errors.push("shards.tls_cert_file: required with shards.tls_key_file".to_string())
            }
            _ => {}
        }
        if let Some(name) = &self.shards.tls_server_name
            && (name.is_empty()
                || name.len() > 253
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':')))
        {
            errors.push(format!(
                "shards.tls_server_name: must be a DNS name or an IP address, got `{}`",
                crate::ids::truncate(name, 64)
            ));
        }
        if let Some(token) = &self.auth.internal_token
            && token.expose().len() < 16
        {
            errors.push("auth.internal_token: must be at least 16 characters".to_string());
        }
        let t = &self.telemetry;
        if let Some(endpoint) = &t.otlp_endpoint {
            let scheme_ok = endpoint.starts_with("http://") || endpoint.starts_with("https://");
            let host = endpoint.split_once("://").map_or("", |(_, rest)| rest);
            if !scheme_ok || host.is_empty() || host.contains(char::is_whitespace) {
                errors.push(format!(
                    "telemetry.otlp_endpoint: must be an http:// or https:// URL, got `{}`",
                    endpoint.chars().take(200).collect::<String>()
                ));
            }
        }
        if let Some(name) = &t.service_name
            && (name.trim().is_empty() || name.len() > 128)
        {
            errors.push("telemetry.service_name: must be 1 to 128 characters".to_string());
        }
        if let Some(ratio) = t.sample_ratio
            && !(0.0..=1.0).contains(&ratio)
        {
            errors.push(format!(
                "telemetry.sample_ratio: must be between 0 and 1, got {ratio}"
            ));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigError(errors))
        }
    }
}

/// The process a configuration is for: each needs its own sections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `serve`: the embedded default.
    Serve,
    /// `router`: remote shards and PostgreSQL.
    Router,
    /// `shard`: one shard process.
    Shard,
}

impl Config {
    /// What `role` needs beyond [`Config::validate`]; each message starts with the key path.
    /// Only the configuration is read: no file it names is opened, no server contacted.
    pub fn role_problems(&self, role: Role) -> Vec<String> {
        let mut problems = Vec::new();
        let mut binds = Vec::new();
        match role {
            Role::Serve => {
                binds.push(("http.listen", self.http.listen));
                binds.push(("grpc", self.grpc));
            }
            Role::Router => {
                binds.push(("http.listen", self.http.listen));
                binds.push(("grpc", self.grpc));
                match &self.postgres.url {
                    None => problems.push(
                        "postgres.url: required by `router` (or AGENTSEARCH_POSTGRES__URL)"
                            .to_string(),
                    ),
                    Some(url)
                        if !(url.expose().starts_with("postgres://")
                            || url.expose().starts_with("postgresql://")) =>
                    {
                        problems.push(
                            "postgres.url: must start with postgres:// or postgresql://"
                                .to_string(),
                        );
                    }
                    Some(_) => {}
                }
                match &self.shards.dns {
                    Some(name) => {
                        let ok = !name.contains('/')
                            && split_port(name)
                                .is_some_and(|(host, port)| !host.is_empty() && port.is_some());
                        if !ok {
                            problems.push(format!(
                                "shards.dns: must be host:port, got `{}`",
                                crate::ids::truncate(name, 128)
                            ));
                        }
                        if !self.shards.remote.is_empty() {
                            problems.push(
                                "shards.remote: set either shards.remote or shards.dns, not both"
                                    .to_string(),
                            );
                        }
                    }
                    None if self.shards.remote.is_empty() => problems.push(
                        "shards.remote: at least one shard address (host:port) is required by \
                         `router` (or shards.dns)"
                            .to_string(),
                    ),
                    None => {}
                }
                for (i, address) in self.shards.remote.iter().enumerate() {
                    let authority = address
                        .split_once("://")
                        .map_or(address.as_str(), |(_, rest)| rest);
                    let ok = !authority.contains('/')
                        && split_port(authority)
                            .is_some_and(|(host, port)| !host.is_empty() && port.is_some());
                    if !ok {
                        problems.push(format!(
                            "shards.remote[{i}]: must be host:port, got `{}`",
                            crate::ids::truncate(address, 128)
                        ));
                    }
                }
                if self.shards.dns.is_none()
                    && self.shards.replication as usize > self.shards.remote.len().max(1)
                {
                    problems.push(format!(
                        "shards.replication: {} copies need at least as many shards, {} listed",
                        self.shards.replication,
                        self.shards.remote.len()
                    ));
                }
            }
            Role::Shard => binds.push(("grpc", self.grpc)),
        }
        for (key, addr) in binds {
            if addr.ip().is_loopback() {
                continue;
            }
            // A shard may instead take the internal token, or only verified client certificates.
            let shard_credential = role == Role::Shard
                && (self.auth.internal_token.is_some() || self.tls.client_ca_file.is_some());
            if self.auth.token.is_none() && !shard_credential {
                problems.push(format!(
                    "auth.token: required because {key} binds {addr}, beyond loopback"
                ));
            }
            if role != Role::Shard {
                for (id, project) in &self.auth.projects {
                    if project.allow_anonymous {
                        problems.push(format!(
                            "auth.projects.{id}.allow_anonymous: refused because {key} binds \
                             {addr}, beyond loopback"
                        ));
                    }
                }
            }
        }
        problems.dedup();
        problems
    }

    /// The configuration as TOML with every secret replaced (URLs keep their scheme, host and
    /// path; only the credentials are hidden).
    pub fn redacted_toml(&self) -> String {
        let mut copy = self.clone();
        let hide = |secret: &mut Secret| *secret = Secret::new(redact_secret(secret.expose()));
        if let Some(url) = copy.postgres.url.as_mut() {
            hide(url);
        }
        if let Some(token) = copy.auth.token.as_mut() {
            hide(token);
        }
        if let Some(token) = copy.auth.internal_token.as_mut() {
            hide(token);
        }
        for project in copy.auth.projects.values_mut() {
            if let Some(secret) = project.hs256_secret.as_mut() {
                hide(secret);
            }
        }
        hide(&mut copy.hydration.redis_url);
        toml::to_string_pretty(&copy)
            .unwrap_or_else(|e| format!("# the configuration could not be printed: {e}\n"))
    }
}

/// A secret as printed: a URL with its user and password hidden, anything else hidden whole.
fn redact_secret(value: &str) -> String {
    if let Some((scheme, rest)) = value.split_once("://")
        && !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        // Credentials run to the last `@` (a password may hold `/`, `?` or `@`); hiding too much
        // is the safe side.
        let (credentials, rest) = match rest.rsplit_once('@') {
            Some((_, host_and_path)) => ("***@", host_and_path),
            None => ("", rest),
        };
        let rest = rest.split_once('?').map_or(rest, |(path, _)| path);
        return format!("{scheme}://{credentials}{rest}");
    }
    "***".to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn secrets_are_redacted_and_urls_keep_their_host() {
        assert_eq!(
            super::redact_secret(
                "postgres://app:hunter2@db.internal:5432/agentsearch?sslmode=require&password=x"
            ),
            "postgres://***@db.internal:5432/agentsearch"
        );
        assert_eq!(
            super::redact_secret("redis://cache:6379/0"),
            "redis://cache:6379/0"
        );
        assert_eq!(super::redact_secret("a-long-service-token"), "***");
        assert_eq!(
            super::redact_secret("postgres://app:ab/cd?e@db:5432/x"),
            "postgres://***@db:5432/x"
        );
        let mut config = Config::default();
        config.auth.token = Some(Secret::new("service-token-0123456789"));
        config.postgres.url = Some(Secret::new("postgres://u:pw-123@h/db"));
        config.hydration.redis_url = Secret::new("redis://:redis-pw@cache:6379");
        config.auth.projects.insert(
            "0f8fad5b-d9cb-469f-a165-70867728950e".into(),
            ProjectAuthConfig {
                hs256_secret: Some(Secret::new("hs256-secret-hs256-secret-hs256-secret")),
                ..Default::default()
            },
        );
        let text = config.redacted_toml();
        for secret in [
            "service-token-0123456789",
            "pw-123",
            "redis-pw",
            "hs256-secret",
        ] {
            assert!(!text.contains(secret), "{secret} printed:\n{text}");
        }
        assert!(text.contains("postgres://***@h/db"), "{text}");
        // The printed configuration loads back as the same shape.
        let reloaded: Config = toml::from_str(&text).unwrap();
        assert_eq!(reloaded.grpc, config.grpc);
    }

    #[test]
    fn role_problems_name_the_key() {
        let mut config = Config::default();
        config.http.listen = "0.0.0.0:8080".parse().unwrap();
        config.grpc = "0.0.0.0:50051".parse().unwrap();
        config.shards.remote = vec!["shard-0.shards:50052".into(), "no-port".into()];
        let problems = config.role_problems(Role::Router);
        let keys: Vec<&str> = problems
            .iter()
            .map(|p| p.split(':').next().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "postgres.url",
                "shards.remote[1]",
                "auth.token",
                "auth.token"
            ],
            "{problems:?}"
        );
        config.auth.token = Some(Secret::new("service-token-0123456789"));
        config.postgres.url = Some(Secret::new("postgres://u@h/db"));
        config.shards.remote.pop();
        assert!(config.role_problems(Role::Router).is_empty());
        assert!(config.role_problems(Role::Shard).is_empty());
        assert!(Config::default().role_problems(Role::Serve).is_empty());
    }

    use super::*;

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn telemetry_settings_are_checked_by_key() {
        let mut config = Config::default();
        config.telemetry.otlp_endpoint = Some("http://otel-collector:4317".into());
        config.telemetry.sample_ratio = Some(0.25);
        config.validate().unwrap();
        config.telemetry.otlp_endpoint = Some("otel-collector:4317".into());
        config.telemetry.sample_ratio = Some(1.5);
        config.telemetry.service_name = Some(" ".into());
        let errors = config.validate().unwrap_err().0;
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("telemetry.otlp_endpoint: ")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("telemetry.sample_ratio: ")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("telemetry.service_name: ")),
            "{errors:?}"
        );
    }

    #[test]
    fn file_values_override_defaults_and_errors_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentsearch.toml");
        std::fs::write(&path, "[search]\nrrf_k = 20\n").unwrap();
        let config = Config::figment(Some(&path)).extract::<Config>().unwrap();
        assert_eq!(config.search.rrf_k, 20.0);

        std::fs::write(&path, "[search]\nrrf_kk = 20\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("search") && err.contains("rrf_kk"), "{err}");

        std::fs::write(&path, "[search]\nfusion = \"max\"\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("search.fusion"), "{err}");

        std::fs::write(&path, "[lexical]\nb = 1.5\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("lexical.b"), "{err}");

        std::fs::write(&path, "[search]\ncandidates = 0\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("search.candidates"), "{err}");
    }

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("super-secret-token-123");
        assert_eq!(format!("{s:?} {s}"), "Secret(***) ***");
    }
}

#[cfg(test)]
mod shipped {
    use super::*;

    /// Every configuration file shipped in `deploy/` parses and validates.
    #[test]
    fn deploy_configs_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let config =
                    Config::load(Some(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!(
                    config.search,
                    SearchConfig::default(),
                    "{}: the example documents the defaults",
                    path.display()
                );
                assert_eq!(
                    config.lexical,
                    LexicalConfig::default(),
                    "{}: the example documents the defaults",
                    path.display()
                );
                assert_eq!(
                    config.context,
                    ContextConfig::default(),
                    "{}: the example documents the defaults",
                    path.display()
                );
                assert_eq!(
                    config.rerank,
                    RerankConfig::default(),
                    "{}: the example documents the defaults",
                    path.display()
                );
                seen += 1;
            }
        }
        assert!(seen > 0);
    }
}

#[cfg(test)]
mod env {
    use super::*;

    #[test]
    fn environment_overrides_and_unrelated_variables_are_ignored() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("AGENTSEARCH_SEARCH__RRF_K", "25");
            jail.set_env("AGENTSEARCH_DATA_DIR", "/tmp/x");
            jail.set_env("AGENTSEARCH_PORT", "tcp://10.0.0.1:8080");
            jail.set_env("AGENTSEARCH_TOKEN", "client-side");
            let config = Config::load(None).map_err(|e| e.to_string())?;
            assert_eq!(config.search.rrf_k, 25.0);
            assert_eq!(config.data_dir, std::path::PathBuf::from("/tmp/x"));
            jail.set_env("AGENTSEARCH_SERACH__RRF_K", "25");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(err.contains("serach"), "{err}");
            Ok(())
        });
    }
}

#[cfg(test)]
mod auth_projects {
    use super::*;

    const PROJECT: &str = "11111111-1111-4111-8111-111111111111";

    #[test]
    fn project_settings_load_from_file_and_environment() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "agentsearch.toml",
                &format!(
                    "[auth.projects.{PROJECT}]\nhs256_secret = \"0123456789abcdef0123456789abcdef\"\n\
                     issuer = \"https://idp.example.com\"\n"
                ),
            )?;
            jail.set_env(
                format!("AGENTSEARCH_AUTH__PROJECTS__{PROJECT}__ALLOW_ANONYMOUS"),
                "true",
            );
            // The hyphenless spelling, for shells that refuse `-` in variable names.
            jail.set_env(
                "AGENTSEARCH_AUTH__PROJECTS__22222222222242228222222222222222__HS256_SECRET",
                "abcdef0123456789abcdef0123456789",
            );
            let config =
                Config::load(Some(Path::new("agentsearch.toml"))).map_err(|e| e.to_string())?;
            let project = config.auth.project(PROJECT).expect("configured");
            assert_eq!(project.issuer.as_deref(), Some("https://idp.example.com"));
            assert_eq!(project.audience, "agentsearch");
            assert_eq!(project.leeway_secs, 30);
            assert!(project.allow_anonymous);
            let from_env = config
                .auth
                .project("22222222-2222-4222-8222-222222222222")
                .expect("configured");
            assert!(from_env.hs256_secret.is_some());

            // Two spellings of one project are refused rather than merged silently.
            jail.set_env(
                "AGENTSEARCH_AUTH__PROJECTS__11111111111141118111111111111111__LEEWAY_SECS",
                "5",
            );
            let err = Config::load(Some(Path::new("agentsearch.toml")))
                .unwrap_err()
                .to_string();
            assert!(err.contains("the same project as"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn invalid_project_settings_name_the_key_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentsearch.toml");
        std::fs::write(
            &path,
            format!(
                "[auth.projects.{PROJECT}]\nhs256_secret = \"too-short\"\n\
                 public_keys = [\"-----BEGIN PUBLIC KEY-----\\nAAAA\\n-----END PUBLIC KEY-----\\n\"]\n\
                 [auth.projects.demo]\nhs256_secret = \"0123456789abcdef0123456789abcdef\"\n\
                 [auth.projects.22222222-2222-4222-8222-222222222222]\naudience = \"x\"\n"
            ),
        )
        .unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        for expected in [
            format!("auth.projects.{PROJECT}.hs256_secret: must be at least 32 bytes"),
            format!(
                "auth.projects.{PROJECT}.public_keys[0]: not a PEM RSA or EC P-256 public key"
            ),
            "auth.projects.demo: the key must be a project UUID".to_string(),
            "auth.projects.22222222-2222-4222-8222-222222222222: has neither hs256_secret nor public_keys"
                .to_string(),
        ] {
            assert!(err.contains(&expected), "`{expected}` not in {err}");
        }
        assert!(!err.contains("too-short"), "secrets are not echoed: {err}");

        std::fs::write(
            &path,
            format!("[auth.projects.{PROJECT}]\nhs256_secrt = \"x\"\n"),
        )
        .unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("hs256_secrt"), "{err}");
    }
}

#[cfg(test)]
mod http_section {
    use super::*;

    #[test]
    #[allow(clippy::result_large_err)] // figment's Jail closure returns its error type
    fn the_listen_address_alone_and_the_table_both_load() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("short.toml", "http = \"127.0.0.1:9000\"\n")?;
            let config = Config::load(Some(Path::new("short.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(config.http.listen, "127.0.0.1:9000".parse().unwrap());
            assert!(config.http.allowed_hosts.is_empty());

            // Variables merge with the short form instead of replacing it.
            jail.set_env("AGENTSEARCH_HTTP__ALLOWED_HOSTS", "[search.example.com]");
            let config = Config::load(Some(Path::new("short.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(config.http.listen, "127.0.0.1:9000".parse().unwrap());
            assert_eq!(config.http.allowed_hosts, ["search.example.com"]);

            jail.create_file(
                "table.toml",
                "[http]\nlisten = \"127.0.0.1:9001\"\nallowed_origins = [\"https://app.example.com\"]\n",
            )?;
            jail.set_env("AGENTSEARCH_HTTP", "127.0.0.1:9002");
            let config = Config::load(Some(Path::new("table.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(config.http.listen, "127.0.0.1:9002".parse().unwrap());
            assert_eq!(config.http.allowed_origins, ["https://app.example.com"]);
            assert_eq!(config.http.allowed_hosts, ["search.example.com"]);
            Ok(())
        });
    }

    #[test]
    fn invalid_http_keys_name_the_key_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentsearch.toml");
        std::fs::write(
            &path,
            "[http]\nallowed_origins = [\"https://ok.example.com\", \"null\", \"https://app.example.com/\"]\n\
             allowed_hosts = [\"*.example.com\"]\n",
        )
        .unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        for expected in [
            "http.allowed_origins[1]: `null`",
            "http.allowed_origins[2]: must be scheme://host[:port] without a path",
            "http.allowed_hosts[0]: must be a host name",
        ] {
            assert!(err.contains(expected), "`{expected}` not in {err}");
        }
        assert!(!err.contains("allowed_origins[0]"), "{err}");

        std::fs::write(&path, "[http]\nallowed_hostz = []\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(
            err.contains("http") && err.contains("allowed_hostz"),
            "{err}"
        );

        std::fs::write(&path, "http = \"localhost\"\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("http"), "{err}");
    }
}

#[cfg(test)]
mod rerank_section {
    use super::*;

    fn problems(toml_text: &str) -> Vec<String> {
        let config: Config = toml::from_str(toml_text).unwrap();
        match config.validate() {
            Ok(()) => Vec::new(),
            Err(err) => err
                .0
                .into_iter()
                .filter(|p| p.starts_with("rerank."))
                .collect(),
        }
    }

    #[test]
    fn providers_need_their_own_setting_and_no_other() {
        assert_eq!(Config::default().rerank.provider, RerankProvider::None);
        assert!(
            problems("[rerank]\nprovider = \"http\"\nurl = \"http://tei:8080/rerank\"\n")
                .is_empty()
        );
        assert!(
            problems("[rerank]\nprovider = \"local\"\nmodel_dir = \"/models/ce\"\n").is_empty()
        );
        let missing = problems("[rerank]\nprovider = \"http\"\n");
        assert!(
            missing
                .iter()
                .any(|p| p.starts_with("rerank.url: required")),
            "{missing:?}"
        );
        let scheme = problems("[rerank]\nprovider = \"http\"\nurl = \"tei:8080\"\n");
        assert!(
            scheme.iter().any(|p| p.contains("http:// or https://")),
            "{scheme:?}"
        );
        let dir = problems("[rerank]\nprovider = \"local\"\n");
        assert!(
            dir.iter()
                .any(|p| p.starts_with("rerank.model_dir: required")),
            "{dir:?}"
        );
        let stray = problems("[rerank]\nurl = \"http://tei/rerank\"\n");
        assert!(
            stray.iter().any(|p| p.starts_with("rerank.url: only used")),
            "{stray:?}"
        );
        let bounds = problems("[rerank]\ntop_n = 0\ntimeout_ms = 0\n");
        assert!(
            bounds.iter().any(|p| p.starts_with("rerank.top_n")),
            "{bounds:?}"
        );
        assert!(
            bounds.iter().any(|p| p.starts_with("rerank.timeout_ms")),
            "{bounds:?}"
        );
        assert!(toml::from_str::<Config>("[rerank]\nprovider = \"cohere\"\n").is_err());
    }
}

#[cfg(test)]
mod plans_section {
    use super::*;

    fn problems(toml_text: &str) -> Vec<String> {
        let config: Config = toml::from_str(toml_text).unwrap();
        match config.validate() {
            Ok(()) => Vec::new(),
            Err(err) => err
                .0
                .into_iter()
                .filter(|p| p.starts_with("plans."))
                .collect(),
        }
    }

    #[test]
    fn min_similarity_is_a_cosine_between_0_and_1() {
        let defaults = Config::default().plans;
        assert!(defaults.enabled);
        assert_eq!(defaults.min_similarity, 0.8);
        for ok in ["0", "0.0", "0.65", "1", "1.0"] {
            assert!(
                problems(&format!("[plans]\nmin_similarity = {ok}\n")).is_empty(),
                "{ok}"
            );
        }
        for bad in ["-0.1", "1.01", "nan"] {
            let found = problems(&format!(
                "[plans]\nenabled = false\nmin_similarity = {bad}\n"
            ));
            assert!(
                found
                    .iter()
                    .any(|p| p.starts_with("plans.min_similarity: must be between 0 and 1")),
                "{bad}: {found:?}"
            );
        }
        assert!(toml::from_str::<Config>("[plans]\nthreshold = 0.5\n").is_err());
    }
}
