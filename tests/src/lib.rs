//! The in-process cluster sandbox of the integration tests: shards served over real gRPC on
//! loopback ports, routers over them with PostgreSQL or SQLite metadata, the shared embedding model,
//! the fixture catalog, small clients, and project keys with tokens to call them as a user or a
//! service.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentsearch_common::auth::{SigningKey, TokenClaims};
use agentsearch_common::config::{AuthConfig, Config, ProjectAuthConfig, Secret};
use agentsearch_common::shard::ShardApi;
use agentsearch_common::tool::ToolDefinition;
use agentsearch_embed::{CachedEmbedder, Embedder, MiniLm};
use agentsearch_proto::v1 as pb;
use agentsearch_router::auth::Auth;
use agentsearch_router::{GrpcShard, Router, RouterSettings, ShardClient, ShardSet};
use agentsearch_shard::LocalShard;
use agentsearch_store::{MetadataStore, PgStore, SqliteStore};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

pub mod procs;

pub const PROJECT: &str = "00000000-0000-4000-8000-0000000000f1";

/// The HS256 secret of [`PROJECT`] in routers built with [`keyed_auth`].
pub const PROJECT_SECRET: &str = "sandbox-hs256-secret-of-the-test-project-0123456789";

/// The deployment's service token in routers built with [`keyed_auth`].
pub const SERVICE_TOKEN: &str = "sandbox-service-token-0123456789";

/// The model folder: `AGENTSEARCH_EMBED__MODEL_DIR`, else `models/all-MiniLM-L6-v2` of the workspace.
pub fn model_dir() -> PathBuf {
    std::env::var_os("AGENTSEARCH_EMBED__MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/all-MiniLM-L6-v2"))
}

/// The embedding model, loaded once per test binary.
pub fn embedder() -> Arc<dyn Embedder> {
    static MODEL: OnceLock<Arc<dyn Embedder>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            Arc::new(
                MiniLm::load(&model_dir())
                    .expect("model weights missing: run scripts/fetch-model.sh"),
            )
        })
        .clone()
}

/// The test database: `AGENTSEARCH_TEST_POSTGRES`, default the local trust-auth server.
pub fn postgres_url() -> String {
    std::env::var("AGENTSEARCH_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A PostgreSQL store in a fresh schema of its own.
pub async fn pg_store() -> (Arc<PgStore>, String) {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let store = PgStore::connect(&postgres_url(), &schema, 8)
        .await
        .expect("PostgreSQL must be running for the tests");
    (Arc::new(store), schema)
}

/// Runs a SQL query on the test database and returns rows of text columns.
pub async fn pg_rows(schema: &str, sql: &str) -> Vec<Vec<String>> {
    let mut config: tokio_postgres::Config = postgres_url().parse().unwrap();
    config.options(format!("-c search_path={schema}"));
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .query(sql, &[])
        .await
        .unwrap()
        .into_iter()
        .map(|row| (0..row.len()).map(|i| row.get::<_, String>(i)).collect())
        .collect()
}

/// Runs SQL statements (no result) in a schema of the test database.
pub async fn pg_exec(schema: &str, sql: &str) {
    let mut config: tokio_postgres::Config = postgres_url().parse().unwrap();
    config.options(format!("-c search_path={schema}"));
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
}

/// A task serving something until told to stop.
pub struct Served {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Served {
    /// Stops serving and waits for the server to finish.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            let _ = handle.await;
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A shard over `dir`, serving the internal API over gRPC on a loopback port.
pub async fn start_shard(dir: &Path) -> (Served, Arc<LocalShard>) {
    // As the `shard` command opens it.
    let shard = Arc::new(
        LocalShard::open(dir, Default::default(), Default::default())
            .unwrap()
            .searching_on_calls(),
    );
    (serve_shard(shard.clone()).await, shard)
}

/// Serves a shard's internal API (a real shard or a wrapper around one) over gRPC on a loopback
/// port.
pub async fn serve_shard(api: Arc<dyn ShardApi>) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_shard_on(api, listener)
}

/// Serves a shard's internal API on a listener the caller bound.
pub fn serve_shard_on(api: Arc<dyn ShardApi>, listener: TcpListener) -> Served {
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        agentsearch_shard::serve_on(api, Auth::default(), listener, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Served {
        addr,
        stop: Some(stop),
        handle: Some(handle),
    }
}

pub fn settings() -> RouterSettings {
    let config = Config::default();
    RouterSettings {
        search: config.search,
        context: config.context,
        replication: 1,
        write_quorum: 1,
        hedge_after: Some(Duration::from_millis(config.shards.hedge_after_ms)),
        embed_batch_size: config.embed.batch_size,
        metadata_cache: Duration::from_millis(config.shards.metadata_cache_ms),
        auto_rebalance: false,
        tool_router: config.tool_router,
        plans: config.plans,
    }
}

/// A router over remote shards at `addrs`.
pub async fn grpc_router(
    store: Arc<dyn MetadataStore>,
    addrs: &[SocketAddr],
    settings: RouterSettings,
) -> Arc<Router> {
    grpc_router_with(store, addrs, settings, None).await
}

/// [`grpc_router`] reranking with `rerank`.
pub async fn grpc_router_with(
    store: Arc<dyn MetadataStore>,
    addrs: &[SocketAddr],
    settings: RouterSettings,
    rerank: Option<agentsearch_router::rerank::Rerank>,
) -> Arc<Router> {
    let clients = addrs
        .iter()
        .map(|a| {
            ShardClient::Grpc(GrpcShard::connect_lazy(&a.to_string(), &Auth::default()).unwrap())
        })
        .collect();
    let shards = ShardSet::discover(clients, Duration::from_secs(10))
        .await
        .unwrap();
    Arc::new(
        Router::new(
            store,
            shards,
            Arc::new(CachedEmbedder::new(embedder(), 4 << 20)),
            settings,
        )
        .with_rerank(rerank),
    )
}

/// Serves a router's public APIs on loopback ports; returns (HTTP, gRPC) servers.
pub async fn start_router(router: Arc<Router>, auth: Auth) -> (Served, SocketAddr) {
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        agentsearch_router::serve_on(router, auth, http, grpc, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    (
        Served {
            addr: http_addr,
            stop: Some(stop),
            handle: Some(handle),
        },
        grpc_addr,
    )
}

/// A new Google Drive sync of [`PROJECT`], owned by `owner@example.com`, with no declared fields.
pub async fn new_sync(router: &Router) -> agentsearch_router::context::api::SyncStatus {
    router
        .create_sync(agentsearch_router::context::api::CreateSync {
            project_id: PROJECT.into(),
            id: uuid::Uuid::new_v4().to_string(),
            source: "googledrive".into(),
            owner: "owner@example.com".into(),
            fields: Vec::new(),
        })
        .await
        .unwrap()
}

/// The fixture catalog of the tests (`tests/fixtures/catalog.jsonl`).
pub fn fixture_catalog() -> Vec<ToolDefinition> {
    let text = include_str!("../fixtures/catalog.jsonl");
    agentsearch::demo::parse_catalog(text).unwrap()
}

/// The fixture catalog and three renamed copies of it (24 integrations): placement hashes each
/// integration over the shards' random ids, so a test that needs tools on every one of two
/// shards uses this (all 24 on one shard: about one run in eight million).
pub fn spread_catalog() -> Vec<ToolDefinition> {
    let mut catalog = fixture_catalog();
    for copy in 1..4 {
        catalog.extend(fixture_catalog().into_iter().map(|mut tool| {
            tool.name = format!("{}_{copy}", tool.name);
            tool.integration = format!("{}{copy}", tool.integration);
            tool
        }));
    }
    catalog
}

pub async fn channel(addr: SocketAddr) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Streams `tools` to the router's catalog API in batches of `batch`; returns the acknowledgements.
pub async fn load_catalog(
    grpc: SocketAddr,
    project: &str,
    tools: &[ToolDefinition],
    batch: usize,
) -> Vec<pb::UpsertToolsResponse> {
    load_catalog_over(channel(grpc).await, project, tools, batch, None).await
}

/// [`load_catalog`] over a channel the caller made (TLS, say), with `token` as the bearer.
pub async fn load_catalog_over(
    channel: Channel,
    project: &str,
    tools: &[ToolDefinition],
    batch: usize,
    token: Option<&str>,
) -> Vec<pb::UpsertToolsResponse> {
    let mut client = pb::tool_catalog_client::ToolCatalogClient::new(channel);
    let requests: Vec<pb::UpsertToolsRequest> = tools
        .chunks(batch)
        .map(|chunk| pb::UpsertToolsRequest {
            project_id: project.to_string(),
            tools: chunk.iter().map(to_proto_tool).collect(),
        })
        .collect();
    let mut acks = client
        .upsert_tools(bearer(tokio_stream::iter(requests), token))
        .await
        .unwrap()
        .into_inner();
    let mut out = Vec::new();
    while let Some(ack) = acks.message().await.unwrap() {
        out.push(ack);
    }
    out
}

pub fn to_proto_tool(t: &ToolDefinition) -> pb::ToolDefinition {
    pb::ToolDefinition {
        name: t.name.clone(),
        integration: t.integration.clone(),
        category: t.category.clone().unwrap_or_default(),
        side_effect: t
            .side_effect
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        description: t.description.clone(),
        parameters_json: t
            .parameters
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_default(),
    }
}

/// A search request for the test project with everything else unset.
pub fn search_request(query: &str) -> pb::SearchToolsRequest {
    pb::SearchToolsRequest {
        project_id: PROJECT.into(),
        query: query.into(),
        ..Default::default()
    }
}

pub async fn search(
    grpc: SocketAddr,
    request: pb::SearchToolsRequest,
) -> Result<pb::SearchToolsResponse, tonic::Status> {
    let mut client = pb::tool_search_client::ToolSearchClient::new(channel(grpc).await);
    client.search_tools(request).await.map(|r| r.into_inner())
}

pub fn names(response: &pb::SearchToolsResponse) -> Vec<String> {
    response
        .tools
        .iter()
        .map(|t| t.intent_name.clone())
        .collect()
}

/// A minimal HTTP/1.1 request over a fresh connection: (status, headers, body).
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
        })
        .collect::<Vec<_>>();
    let is_chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if is_chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, headers, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

/// The metadata store of a [`Cluster`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// PostgreSQL, in a fresh schema.
    Postgres,
    /// The embedded SQLite store, in a temporary directory.
    Sqlite,
}

/// N shards over gRPC + a router with PostgreSQL metadata, serving its public APIs on loopback.
pub struct Cluster {
    pub shards: Vec<Served>,
    pub local: Vec<Arc<LocalShard>>,
    pub router: Arc<Router>,
    pub http: Served,
    pub grpc: SocketAddr,
    pub schema: String,
    _dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    pub async fn start(shard_count: usize) -> Cluster {
        Self::start_with(shard_count, settings()).await
    }

    pub async fn start_with(shard_count: usize, settings: RouterSettings) -> Cluster {
        Self::start_custom(shard_count, settings, StoreKind::Postgres, Auth::default()).await
    }

    /// A cluster on the metadata store `store`, its public APIs authenticated by `auth` (the shards
    /// stay open on loopback). With SQLite, `schema` is empty and [`Cluster::placements`] unusable.
    pub async fn start_custom(
        shard_count: usize,
        settings: RouterSettings,
        store: StoreKind,
        auth: Auth,
    ) -> Cluster {
        Self::start_reranked(shard_count, settings, store, auth, None).await
    }

    /// [`Cluster::start_custom`] with a router reranking with `rerank`.
    pub async fn start_reranked(
        shard_count: usize,
        settings: RouterSettings,
        store: StoreKind,
        auth: Auth,
        rerank: Option<agentsearch_router::rerank::Rerank>,
    ) -> Cluster {
        let mut dirs = Vec::new();
        let mut shards = Vec::new();
        let mut local = Vec::new();
        for _ in 0..shard_count {
            let dir = tempfile::tempdir().unwrap();
            let (served, shard) = start_shard(dir.path()).await;
            dirs.push(dir);
            shards.push(served);
            local.push(shard);
        }
        let addrs: Vec<SocketAddr> = shards.iter().map(|s| s.addr).collect();
        let (store, schema): (Arc<dyn MetadataStore>, String) = match store {
            StoreKind::Postgres => {
                let (store, schema) = pg_store().await;
                (store, schema)
            }
            StoreKind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let store = SqliteStore::open(&dir.path().join("metadata.sqlite")).unwrap();
                dirs.push(dir);
                (Arc::new(store), String::new())
            }
        };
        let router = grpc_router_with(store, &addrs, settings, rerank).await;
        let (http, grpc) = start_router(router.clone(), auth).await;
        Cluster {
            shards,
            local,
            router,
            http,
            grpc,
            schema,
            _dirs: dirs,
        }
    }

    /// integration -> shard id, from the placements recorded in PostgreSQL.
    pub async fn placements(&self) -> Vec<(String, String)> {
        pg_rows(&self.schema, &format!("SELECT integration, shard_id FROM placements WHERE project_id = '{PROJECT}' ORDER BY integration"))
            .await
            .into_iter()
            .map(|r| (r[0].clone(), r[1].clone()))
            .collect()
    }
}

// ---- Credentials ----

/// Authentication of a deployment whose [`PROJECT`] has an HS256 key ([`PROJECT_SECRET`]) and
/// whose service token is [`SERVICE_TOKEN`]; `allow_anonymous` lets callers without a token in.
/// Other projects are open to the service token only.
pub fn keyed_auth(allow_anonymous: bool) -> Auth {
    let mut projects = std::collections::BTreeMap::new();
    projects.insert(
        PROJECT.to_string(),
        ProjectAuthConfig {
            hs256_secret: Some(Secret::new(PROJECT_SECRET)),
            allow_anonymous,
            ..ProjectAuthConfig::default()
        },
    );
    Auth::from_config(&AuthConfig {
        token: Some(Secret::new(SERVICE_TOKEN)),
        internal_token: None,
        projects,
    })
    .unwrap()
}

/// A user token of [`PROJECT`] naming `sub`, valid for an hour.
pub fn project_token(sub: &str) -> String {
    signed_token(PROJECT_SECRET, PROJECT, sub)
}

/// A user token of `project` naming `sub`, signed with the HS256 `secret`, valid for an hour.
pub fn signed_token(secret: &str, project: &str, sub: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    SigningKey::hs256(&Secret::new(secret))
        .unwrap()
        .sign(&TokenClaims {
            sub: sub.to_string(),
            project: project.to_string(),
            aud: "agentsearch".to_string(),
            iat: now,
            exp: now + 3600,
            iss: None,
        })
        .unwrap()
}

/// A gRPC request carrying `token` as its bearer (none: no `authorization` metadata).
pub fn bearer<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    request
}

/// A JSON request over REST (`content-type: application/json`, `token` as the bearer when given):
/// (status, the body parsed as JSON, or as a JSON string when it is not JSON).
pub async fn rest_json(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, serde_json::Value) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    let (status, _, text) = http(addr, method, path, &headers, body).await;
    let json = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    (status, json)
}

/// `n` records `doc-0..` readable by anyone, one segment each ("Document {i} of the {tag}
/// zephyrine budget.") with a unit vector of `dim` dimensions.
pub fn anyone_records(
    n: usize,
    dim: usize,
    tag: &str,
) -> agentsearch_router::context::api::RawUpsertRecords {
    agentsearch_router::context::api::RawUpsertRecords {
        records: (0..n)
            .map(|i| {
                let mut vector = vec![0.0f32; dim];
                vector[i % dim] = 1.0;
                agentsearch_router::context::api::RawRecord {
                    id: Some(format!("doc-{i}")),
                    display_name: Some(format!("Document {i}")),
                    acl: Some(agentsearch_common::context::Acl {
                        anyone: true,
                        ..Default::default()
                    }),
                    segments: Some(vec![agentsearch_router::context::api::SegmentInput {
                        text: format!("Document {i} of the {tag} zephyrine budget."),
                        vector,
                    }]),
                    ..Default::default()
                }
            })
            .collect(),
        embedding: Some(agentsearch_router::context::api::EmbeddingSpec {
            model: embedder().model_id().into(),
            dimension: dim as u32,
        }),
    }
}
