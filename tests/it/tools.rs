//! Tool search end to end over REST: per-project JWTs, users' connections and `connectedOnly`,
//! per-user schema hydration (file and HTTP providers, in-process and Redis caches), degraded modes
//! under injected faults (embedding model, lexical index, a whole shard), diagnostics, multi-query
//! batches with inline custom tools, the exact-name guarantee, near misses, tool lookup, the usage
//! identities over random requests, and snapshots of every response shape.
//!
//! Expectations are written from the API's documented contract, not from the implementation.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentsearch_common::Error;
use agentsearch_common::auth::{SigningKey, TokenClaims};
use agentsearch_common::config::{
    AuthConfig, Config, HydrationIntegrationConfig, HydrationProvider, ProjectAuthConfig, Secret,
    ShardsConfig,
};
use agentsearch_common::shard::{
    ContextSearchRequest, ContextSearchResponse, ContextStatsRequest, ExportRecordsRequest,
    ExportToolsRequest, GetToolsRequest, GetToolsResponse, IndexedRecord, IndexedTool,
    InlineSearchRequest, ListRecordsRequest, PartFailure, ReadSegmentsRequest,
    ReadSegmentsResponse, RecordDeleteRequest, RecordVersion, ScopeStats, SegmentUpsertRequest,
    ShardApi, ShardDeleteRequest, ShardInfo, ShardSearchRequest, ShardSearchResponse,
    ShardUpsertRequest, ShardWriteResponse, TermStats, TermStatsRequest,
};
use agentsearch_common::tool::ToolDefinition;
use agentsearch_embed::{CachedEmbedder, EmbedError, Embedder};
use agentsearch_hydrate::{FileHydrator, HttpHydrator, HydrationService, MemoryCache, RedisCache};
use agentsearch_router::auth::Auth;
use agentsearch_router::{Router, ShardClient, ShardSet};
use agentsearch_shard::LocalShard;
use agentsearch_store::{MetadataStore, SqliteStore};
use agentsearch_tests::*;
use serde_json::value::RawValue;
use serde_json::{Value, json};

// ---- Credentials ----

const SECRET: &str = "tools-test-hs256-secret-of-the-project-0123456789";
const OTHER_PROJECT: &str = "00000000-0000-4000-8000-0000000000f2";
const OTHER_SECRET: &str = "tools-test-hs256-secret-of-another-project-0123456789";
const RSA_PROJECT: &str = "00000000-0000-4000-8000-0000000000f3";
const EC_PROJECT: &str = "00000000-0000-4000-8000-0000000000f4";
const SERVICE_TOKEN: &str = "tools-test-service-token-0123456789";
// Test-only key pairs of the auth module's own tests; they protect nothing.
const RSA_PUBLIC: &str = include_str!("../../services/common/tests/fixtures/auth/rsa-public.pem");
const RSA_PRIVATE: &str = include_str!("../../services/common/tests/fixtures/auth/rsa-private.pem");
const EC_PUBLIC: &str =
    include_str!("../../services/common/tests/fixtures/auth/ec-p256-public.pem");
const EC_PRIVATE: &str =
    include_str!("../../services/common/tests/fixtures/auth/ec-p256-private.pem");

const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";

/// Demo integrations loaded by most tests: enough overlap (several email and chat apps, two CRMs)
/// that connections and side-effect ceilings change results, small enough to embed quickly.
const DEMO_SUBSET: &[&str] = &[
    "gmail",
    "outlook",
    "sendgrid",
    "slack",
    "microsoft_teams",
    "salesforce",
    "hubspot",
    "google_calendar",
];

/// Verifies the test project (HS256, anonymous requests allowed or not), another HS256 project,
/// an RS256 and an ES256 project, and a service token.
fn auth(allow_anonymous: bool) -> Auth {
    let project = |secret: Option<&str>, keys: &[&str], anonymous: bool| ProjectAuthConfig {
        hs256_secret: secret.map(Secret::new),
        public_keys: keys.iter().map(|k| k.to_string()).collect(),
        allow_anonymous: anonymous,
        ..ProjectAuthConfig::default()
    };
    let mut projects = BTreeMap::new();
    projects.insert(
        PROJECT.to_string(),
        project(Some(SECRET), &[], allow_anonymous),
    );
    projects.insert(
        OTHER_PROJECT.to_string(),
        project(Some(OTHER_SECRET), &[], false),
    );
    projects.insert(RSA_PROJECT.to_string(), project(None, &[RSA_PUBLIC], false));
    projects.insert(EC_PROJECT.to_string(), project(None, &[EC_PUBLIC], false));
    Auth::from_config(&AuthConfig {
        token: Some(Secret::new(SERVICE_TOKEN)),
        internal_token: None,
        projects,
    })
    .unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims(project: &str, sub: &str, exp: u64) -> TokenClaims {
    TokenClaims {
        sub: sub.to_string(),
        project: project.to_string(),
        aud: "agentsearch".to_string(),
        iat: now(),
        exp,
        iss: None,
    }
}

fn hs_token(secret: &str, project: &str, sub: &str) -> String {
    SigningKey::hs256(&Secret::new(secret))
        .unwrap()
        .sign(&claims(project, sub, now() + 3600))
        .unwrap()
}

/// A valid token of the test project naming `sub`.
fn user_token(sub: &str) -> String {
    hs_token(SECRET, PROJECT, sub)
}

// ---- HTTP ----

fn project_path(rest: &str) -> String {
    format!("/api/tools/projects/{PROJECT}{rest}")
}

fn search_path() -> String {
    project_path("/tools/search")
}

fn batch_path() -> String {
    project_path("/tools/search:batch")
}

fn connections_path(user: &str) -> String {
    project_path(&format!("/users/{user}/connections"))
}

struct Reply {
    status: u16,
    json: Value,
    /// The body as sent, for checks on the exact serialization.
    text: String,
}

async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> Reply {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("content-type", "application/json"),
        ("x-request-id", "req_tools"),
    ];
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    let (status, _, text) = http(addr, method, path, &headers, body).await;
    let json = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
    Reply { status, json, text }
}

/// Asserts an error envelope: the status, the code, and (when given) the one field named.
fn assert_error(reply: &Reply, status: u16, code: &str) {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], code, "{}", reply.text);
    assert_eq!(
        reply.json["error"]["requestId"], "req_tools",
        "{}",
        reply.text
    );
}

/// The fields named in an error envelope's details.
fn fields(reply: &Reply) -> Vec<String> {
    reply.json["error"]["details"]
        .as_array()
        .unwrap_or_else(|| panic!("no details: {}", reply.text))
        .iter()
        .map(|d| d["field"].as_str().unwrap().to_string())
        .collect()
}

fn count(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("not a count: {value}"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn tool_names(json: &Value) -> Vec<String> {
    json["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {json}"))
        .iter()
        .map(|t| t["intentName"].as_str().unwrap().to_string())
        .collect()
}

fn find_tool<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["intentName"] == name)
        .unwrap_or_else(|| panic!("{name} not returned: {:?}", tool_names(json)))
}

fn property_names(tool: &Value) -> Vec<String> {
    tool["tool"]["function"]["parameters"]["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

// ---- Exact token counts, from the body as sent ----

fn raw_get<'a>(raw: &'a str, key: &str) -> &'a RawValue {
    let map: BTreeMap<String, &'a RawValue> = serde_json::from_str(raw).unwrap();
    map.get(key)
        .copied()
        .unwrap_or_else(|| panic!("no `{key}` in {raw}"))
}

fn raw_items(raw: &str) -> Vec<&RawValue> {
    serde_json::from_str(raw).unwrap()
}

fn o200k(text: &str) -> u64 {
    tiktoken_rs::o200k_base_singleton().count_ordinary(text) as u64
}

/// A returned tool's `tokens` are the o200k tokens of its `tool`, exactly as serialized.
fn assert_tokens_exact(result: &RawValue) {
    let tool = raw_get(result.get(), "tool").get();
    let tokens: u64 = serde_json::from_str(raw_get(result.get(), "tokens").get()).unwrap();
    assert_eq!(tokens, o200k(tool), "tokens of {tool}");
}

/// Checks every tool of a search response body; returns the sum of their tokens.
fn assert_search_tokens_exact(text: &str) -> u64 {
    let mut sum = 0;
    for result in raw_items(raw_get(text, "tools").get()) {
        assert_tokens_exact(result);
        sum += o200k(raw_get(result.get(), "tool").get());
    }
    sum
}

// ---- Snapshots ----

/// Replaces what varies between runs (scores, durations, timestamps) with placeholders.
fn redact(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    match key.as_str() {
                        "relevancy" | "score" | "durationMs" | "totalMs" if v.is_number() => {
                            *v = json!("[float]")
                        }
                        "createdAt" | "currentTimeUtc" | "created_at" | "current_time_utc"
                        | "expires_at"
                            if v.is_string() =>
                        {
                            *v = json!("[timestamp]")
                        }
                        "currentTimeUtcEpochSeconds" | "current_time_utc_epoch_seconds"
                            if v.is_number() =>
                        {
                            *v = json!("[epoch]")
                        }
                        "session_id" | "id"
                            if v.as_str().is_some_and(|s| s.starts_with("trs_")) =>
                        {
                            *v = json!("[session]")
                        }
                        _ => walk(v),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

// ---- Routers ----

/// The demo catalog's tools of `integrations`.
fn demo_tools(integrations: &[&str]) -> Vec<ToolDefinition> {
    agentsearch::demo::parse_catalog(agentsearch::demo::CATALOG)
        .unwrap()
        .into_iter()
        .filter(|t| integrations.contains(&t.integration.as_str()))
        .collect()
}

async fn load(router: &Router, project: &str, tools: Vec<ToolDefinition>) {
    for batch in tools.chunks(64) {
        router
            .upsert_tools(project, batch.to_vec(), "setup")
            .await
            .unwrap();
    }
}

/// An embedded router (the `serve` assembly: SQLite, in-process shards) configured to hydrate
/// Salesforce schemas from the demo's file for every project, with `tools` in the test project,
/// served over HTTP.
struct Env {
    router: Arc<Router>,
    addr: SocketAddr,
    _http: Served,
    _dir: tempfile::TempDir,
}

async fn embedded(tools: Vec<ToolDefinition>, auth: Auth) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        shards: ShardsConfig {
            local: 1,
            ..Default::default()
        },
        ..Config::default()
    };
    config.hydration.integrations.insert(
        "salesforce".into(),
        HydrationIntegrationConfig {
            provider: HydrationProvider::File,
            url: None,
            path: Some(demo_hydration_file(dir.path())),
            timeout_ms: None,
        },
    );
    let router = agentsearch::node::embedded_router(&config, embedder())
        .await
        .unwrap();
    load(&router, PROJECT, tools).await;
    let (http, _grpc) = start_router(Arc::clone(&router), auth).await;
    Env {
        router,
        addr: http.addr,
        _http: http,
        _dir: dir,
    }
}

/// A router assembled from parts, as `node::embedded_router` does.
async fn assemble(
    store: Arc<dyn MetadataStore>,
    shards: Vec<Arc<dyn ShardApi>>,
    embedder: Arc<dyn Embedder>,
    query_cache: u64,
    hydration: Option<Arc<HydrationService>>,
) -> Arc<Router> {
    let shards = ShardSet::discover(
        shards.into_iter().map(ShardClient::Local).collect(),
        Duration::ZERO,
    )
    .await
    .unwrap();
    let cached = Arc::new(CachedEmbedder::new(embedder, query_cache));
    let router = Router::new(store, shards, cached, settings());
    Arc::new(match hydration {
        Some(service) => router.with_hydration(service),
        None => router,
    })
}

fn sqlite(dir: &Path) -> Arc<dyn MetadataStore> {
    Arc::new(SqliteStore::open(&dir.join("metadata.sqlite")).unwrap())
}

fn open_shard(dir: &Path) -> Arc<LocalShard> {
    Arc::new(LocalShard::open(dir, Default::default(), Default::default()).unwrap())
}

/// A loopback port nothing listens on.
async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// The demo hydration file, written under `dir`.
fn demo_hydration_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("hydration.json");
    std::fs::write(&path, agentsearch::demo::HYDRATION).unwrap();
    path
}

// ---- Injected faults ----

/// The real model, until told to fail.
struct FlakyEmbedder {
    inner: Arc<dyn Embedder>,
    broken: AtomicBool,
}

impl Embedder for FlakyEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[&str]) -> agentsearch_embed::Result<Vec<Vec<f32>>> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(EmbedError::Failed("injected: the model is down".into()));
        }
        self.inner.embed(texts)
    }
}

/// An embedder whose single-text (query) passes wait, once `hold` is set, until released.
struct HeldEmbedder {
    inner: Arc<dyn Embedder>,
    hold: AtomicBool,
    entered: AtomicUsize,
    released: std::sync::Mutex<bool>,
    wake: std::sync::Condvar,
}

impl HeldEmbedder {
    fn release(&self) {
        *self.released.lock().unwrap() = true;
        self.wake.notify_all();
    }
}

impl Embedder for HeldEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[&str]) -> agentsearch_embed::Result<Vec<Vec<f32>>> {
        if texts.len() == 1 && self.hold.load(Ordering::SeqCst) {
            self.entered.fetch_add(1, Ordering::SeqCst);
            let mut released = self.released.lock().unwrap();
            while !*released {
                released = self.wake.wait(released).unwrap();
            }
        }
        self.inner.embed(texts)
    }
}

/// Query embeddings beyond `limits.max_queued_embeddings` are not queued behind the model: the
/// search ranks by BM25 alone and says so; a dense-only search is refused as RATE_LIMITED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_embedding_queue_fails_open_to_lexical() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(HeldEmbedder {
        inner: embedder(),
        hold: AtomicBool::new(false),
        entered: AtomicUsize::new(0),
        released: std::sync::Mutex::new(false),
        wake: std::sync::Condvar::new(),
    });
    let router = assemble(
        sqlite(dir.path()),
        vec![open_shard(&dir.path().join("shard")) as Arc<dyn ShardApi>],
        model.clone(),
        0,
        None,
    )
    .await;
    let router = Arc::new(
        Arc::try_unwrap(router)
            .ok()
            .expect("only this test holds the router")
            .with_limits(agentsearch_common::config::LimitsConfig {
                max_queued_embeddings: 1,
                ..Default::default()
            }),
    );
    load(&router, PROJECT, fixture_catalog()).await;
    let (http, _grpc) = start_router(router, Auth::default()).await;
    model.hold.store(true, Ordering::SeqCst);

    // One query's embedding takes the only place and waits in the model.
    let addr = http.addr;
    let first = tokio::spawn(async move {
        call(
            addr,
            "POST",
            &search_path(),
            None,
            r#"{"query": "send an invoice"}"#,
        )
        .await
    });
    for _ in 0..200 {
        if model.entered.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(model.entered.load(Ordering::SeqCst), 1);

    // The next one is not queued behind it.
    let reply = call(
        addr,
        "POST",
        &search_path(),
        None,
        r#"{"query": "close a solved ticket"}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["usage"]["strategy"], "semantic_failed_open");
    assert_eq!(reply.json["usage"]["degraded"], "lexical_only");
    assert_eq!(
        tool_names(&reply.json).first().map(String::as_str),
        Some("TICKETEER_CLOSE_TICKET")
    );
    let reply = call(
        addr,
        "POST",
        &search_path(),
        None,
        r#"{"query": "close a solved ticket", "mode": "dense"}"#,
    )
    .await;
    assert_eq!(reply.status, 429, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "RATE_LIMITED");
    assert_eq!(
        model.entered.load(Ordering::SeqCst),
        1,
        "nothing else reached the model"
    );

    // Released, the first search completes with both retrievers, and the place is free again.
    model.release();
    let reply = first.await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["usage"]["strategy"], "hybrid", "{}", reply.text);
    let reply = call(
        addr,
        "POST",
        &search_path(),
        None,
        r#"{"query": "archive a ticket"}"#,
    )
    .await;
    assert_eq!(reply.json["usage"]["strategy"], "hybrid", "{}", reply.text);
}

const HEALTHY: u8 = 0;
/// Tool searches answer without lexical hits and report the lexical index of every integration
/// as failed.
const LEXICAL_BROKEN: u8 = 1;
/// Every read fails as unavailable.
const DOWN: u8 = 2;

/// A real shard with a switchable fault.
struct FaultyShard {
    inner: Arc<LocalShard>,
    fault: AtomicU8,
}

impl FaultyShard {
    fn new(inner: Arc<LocalShard>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            fault: AtomicU8::new(HEALTHY),
        })
    }

    fn set(&self, fault: u8) {
        self.fault.store(fault, Ordering::SeqCst);
    }

    fn down(&self) -> agentsearch_common::Result<()> {
        if self.fault.load(Ordering::SeqCst) == DOWN {
            return Err(Error::Unavailable("injected: the shard is down".into()));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl ShardApi for FaultyShard {
    async fn info(&self) -> agentsearch_common::Result<ShardInfo> {
        self.inner.info().await
    }

    async fn term_stats(
        &self,
        request: TermStatsRequest,
    ) -> agentsearch_common::Result<ScopeStats> {
        self.down()?;
        self.inner.term_stats(request).await
    }

    async fn search_tools(
        &self,
        request: ShardSearchRequest,
    ) -> agentsearch_common::Result<ShardSearchResponse> {
        self.down()?;
        let integrations = request.integrations.clone();
        let mut answer = self.inner.search_tools(request).await?;
        if self.fault.load(Ordering::SeqCst) == LEXICAL_BROKEN {
            answer.lexical.clear();
            answer.excluded_lexical.clear();
            answer.failures = integrations
                .into_iter()
                .map(|integration| PartFailure {
                    integration,
                    retriever: "lexical".into(),
                    message: "injected: the lexical index is corrupt".into(),
                })
                .collect();
        }
        Ok(answer)
    }

    async fn search_inline(
        &self,
        request: InlineSearchRequest,
    ) -> agentsearch_common::Result<ShardSearchResponse> {
        self.down()?;
        self.inner.search_inline(request).await
    }

    async fn get_tools(
        &self,
        request: GetToolsRequest,
    ) -> agentsearch_common::Result<GetToolsResponse> {
        self.down()?;
        self.inner.get_tools(request).await
    }

    async fn upsert_tools(
        &self,
        request: ShardUpsertRequest,
    ) -> agentsearch_common::Result<ShardWriteResponse> {
        self.inner.upsert_tools(request).await
    }

    async fn delete_tools(
        &self,
        request: ShardDeleteRequest,
    ) -> agentsearch_common::Result<ShardWriteResponse> {
        self.inner.delete_tools(request).await
    }

    async fn context_term_stats(
        &self,
        request: ContextStatsRequest,
    ) -> agentsearch_common::Result<TermStats> {
        self.inner.context_term_stats(request).await
    }

    async fn search_segments(
        &self,
        request: ContextSearchRequest,
    ) -> agentsearch_common::Result<ContextSearchResponse> {
        self.inner.search_segments(request).await
    }

    async fn upsert_segments(
        &self,
        request: SegmentUpsertRequest,
    ) -> agentsearch_common::Result<ShardWriteResponse> {
        self.inner.upsert_segments(request).await
    }

    async fn delete_records(
        &self,
        request: RecordDeleteRequest,
    ) -> agentsearch_common::Result<ShardWriteResponse> {
        self.inner.delete_records(request).await
    }

    async fn fetch_segments(
        &self,
        request: agentsearch_common::shard::SegmentFetchRequest,
    ) -> agentsearch_common::Result<agentsearch_common::shard::SegmentFetchResponse> {
        self.inner.fetch_segments(request).await
    }
    async fn read_segments(
        &self,
        request: ReadSegmentsRequest,
    ) -> agentsearch_common::Result<Option<ReadSegmentsResponse>> {
        self.inner.read_segments(request).await
    }
    async fn export_tools(
        &self,
        request: ExportToolsRequest,
    ) -> agentsearch_common::Result<Vec<IndexedTool>> {
        self.inner.export_tools(request).await
    }
    async fn list_records(
        &self,
        request: ListRecordsRequest,
    ) -> agentsearch_common::Result<Vec<RecordVersion>> {
        self.inner.list_records(request).await
    }
    async fn export_records(
        &self,
        request: ExportRecordsRequest,
    ) -> agentsearch_common::Result<Vec<IndexedRecord>> {
        self.inner.export_records(request).await
    }
}

// ---- 1. JWT ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_project_keys_name_the_user() {
    let env = embedded(fixture_catalog(), auth(false)).await;
    let addr = env.addr;
    let body = r#"{"query": "send an email", "topK": 5}"#;

    let reply = call(addr, "POST", &search_path(), None, body).await;
    assert_error(&reply, 401, "UNAUTHENTICATED");
    insta::assert_json_snapshot!(
        "unauthenticated",
        json!({"status": reply.status, "body": reply.json})
    );

    // A valid token of another configured project.
    let other = hs_token(OTHER_SECRET, OTHER_PROJECT, ALICE);
    let reply = call(addr, "POST", &search_path(), Some(&other), body).await;
    assert_error(&reply, 403, "PROJECT_MISMATCH");
    insta::assert_json_snapshot!(
        "project_mismatch",
        json!({"status": reply.status, "body": reply.json})
    );
    // Signed with this project's key but naming the other project.
    let named_other = hs_token(SECRET, OTHER_PROJECT, ALICE);
    let reply = call(addr, "POST", &search_path(), Some(&named_other), body).await;
    assert_error(&reply, 403, "PROJECT_MISMATCH");

    let expired = SigningKey::hs256(&Secret::new(SECRET))
        .unwrap()
        .sign(&claims(PROJECT, ALICE, now() - 3600))
        .unwrap();
    let reply = call(addr, "POST", &search_path(), Some(&expired), body).await;
    assert_error(&reply, 401, "UNAUTHENTICATED");
    let message = reply.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("expired"), "{message}");

    let forged = hs_token("an-unknown-secret-0123456789abcdef0123", PROJECT, ALICE);
    let reply = call(addr, "POST", &search_path(), Some(&forged), body).await;
    assert_error(&reply, 401, "UNAUTHENTICATED");
    assert!(!reply.text.contains(SECRET));

    // The service token is accepted but names no user: connectedOnly cannot apply.
    let reply = call(addr, "POST", &search_path(), Some(SERVICE_TOKEN), body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = call(
        addr,
        "POST",
        &search_path(),
        Some(SERVICE_TOKEN),
        r#"{"query": "send an email", "connectedOnly": true}"#,
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["connectedOnly"]);

    // A valid token: its `sub` is the user whose connections apply.
    let alice = user_token(ALICE);
    let reply = call(
        addr,
        "PUT",
        &connections_path(ALICE),
        Some(&alice),
        r#"{"connections": [{"integration": "acme_mail", "accountId": "alice@acme.test"}]}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let connected = r#"{"query": "send an email", "topK": 5, "connectedOnly": true}"#;
    let reply = call(addr, "POST", &search_path(), Some(&alice), connected).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let tools = reply.json["tools"].as_array().unwrap();
    assert!(!tools.is_empty(), "{}", reply.text);
    assert!(
        tools.iter().all(|t| t["integration"] == "acme_mail"),
        "{}",
        reply.text
    );
    let statuses = &reply.json["toolkitConnectionStatuses"];
    assert_eq!(statuses.as_array().unwrap().len(), 1, "{statuses}");
    assert_eq!(statuses[0]["toolkit"], "acme_mail");
    assert_eq!(statuses[0]["hasActiveConnection"], true);
    assert_eq!(statuses[0]["accounts"][0]["id"], "alice@acme.test");

    // The same search as a user without connections finds nothing it may run.
    let bob = user_token(BOB);
    let reply = call(addr, "POST", &search_path(), Some(&bob), connected).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["tools"], json!([]), "{}", reply.text);
    assert!(count(&reply.json["usage"]["omittedNotConnected"]) > 0);
    assert_eq!(reply.json["usage"]["visibility"]["entitledIntegrations"], 0);

    // RS256 and ES256 tokens on their projects; each refused by the other project.
    let rsa = SigningKey::from_pem(RSA_PRIVATE.as_bytes(), Some("RS256"))
        .unwrap()
        .sign(&claims(RSA_PROJECT, ALICE, now() + 3600))
        .unwrap();
    let ec = SigningKey::from_pem(EC_PRIVATE.as_bytes(), None)
        .unwrap()
        .sign(&claims(EC_PROJECT, ALICE, now() + 3600))
        .unwrap();
    let path_of = |project: &str| format!("/api/tools/projects/{project}/tools/search");
    let reply = call(addr, "POST", &path_of(RSA_PROJECT), Some(&rsa), body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = call(addr, "POST", &path_of(EC_PROJECT), Some(&ec), body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = call(addr, "POST", &path_of(EC_PROJECT), Some(&rsa), body).await;
    assert_error(&reply, 403, "PROJECT_MISMATCH");
    let reply = call(addr, "POST", &path_of(RSA_PROJECT), Some(&ec), body).await;
    assert_error(&reply, 403, "PROJECT_MISMATCH");
    // A project's token is no good for the test project either.
    let reply = call(addr, "POST", &search_path(), Some(&rsa), body).await;
    assert_error(&reply, 403, "PROJECT_MISMATCH");

    // End users read; only services change the catalog and synced content.
    let tool = r#"{"tools": [{"name": "ACME_MAIL_PURGE", "integration": "acme_mail", "description": "x"}]}"#;
    let reply = call(addr, "PUT", &project_path("/tools"), Some(&alice), tool).await;
    assert_error(&reply, 403, "PERMISSION_DENIED");
    let reply = call(
        addr,
        "POST",
        &project_path("/tools:delete"),
        Some(&alice),
        r#"{"names": ["ACME_MAIL_SEND"]}"#,
    )
    .await;
    assert_error(&reply, 403, "PERMISSION_DENIED");
    let context_path = |rest: &str| format!("/api/context/projects/{PROJECT}{rest}");
    let reply = call(
        addr,
        "POST",
        &context_path("/syncs"),
        Some(&alice),
        r#"{"source": "googledrive", "owner": "alice@example.com"}"#,
    )
    .await;
    assert_error(&reply, 403, "PERMISSION_DENIED");
    let reply = call(addr, "GET", &context_path("/syncs"), Some(&alice), "").await;
    assert_error(&reply, 403, "PERMISSION_DENIED");
    // A user token searches context as its own user only.
    let reply = call(
        addr,
        "POST",
        &context_path("/search"),
        Some(&alice),
        r#"{"query": "roadmap", "identity": "bob@example.com"}"#,
    )
    .await;
    assert_error(&reply, 403, "PERMISSION_DENIED");
    let reply = call(
        addr,
        "PUT",
        &project_path("/tools"),
        Some(SERVICE_TOKEN),
        tool,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

// ---- 2. Connections ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_scope_connected_only_search() {
    let env = embedded(demo_tools(DEMO_SUBSET), auth(true)).await;
    let addr = env.addr;
    let alice = user_token(ALICE);
    let bob = user_token(BOB);
    let mine = connections_path(ALICE);

    let reply = call(
        addr,
        "PUT",
        &mine,
        Some(&alice),
        r#"{"connections": [
            {"integration": "gmail", "accountId": "work@example.com", "isDefault": true,
             "userInfo": {"email": "work@example.com"}},
            {"integration": "gmail", "accountId": "home@example.com", "alias": "personal"},
            {"integration": "slack", "accountId": "U0123", "status": "expired"}
        ]}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let toolkits: Vec<&Value> = reply.json["toolkits"].as_array().unwrap().iter().collect();
    assert_eq!(
        toolkits.iter().map(|t| &t["toolkit"]).collect::<Vec<_>>(),
        ["gmail", "slack"]
    );

    let reply = call(addr, "GET", &mine, Some(&alice), "").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let gmail = &reply.json["toolkits"][0];
    assert_eq!(gmail["toolkit"], "gmail");
    assert_eq!(gmail["hasActiveConnection"], true);
    assert_eq!(gmail["accountSelection"], "required");
    let accounts = gmail["accounts"].as_array().unwrap();
    assert_eq!(accounts.len(), 2);
    assert_eq!(accounts[0]["id"], "work@example.com");
    assert_eq!(accounts[0]["isDefault"], true);
    assert_eq!(accounts[0]["userInfo"]["email"], "work@example.com");
    assert_eq!(accounts[1]["alias"], "personal");
    assert_eq!(accounts[1]["isDefault"], false);
    let slack = &reply.json["toolkits"][1];
    assert_eq!(slack["toolkit"], "slack");
    assert_eq!(slack["hasActiveConnection"], false);
    assert!(slack.get("accountSelection").is_none(), "{slack}");
    assert_eq!(slack["accounts"][0]["status"], "expired");
    insta::assert_json_snapshot!("connections", redact(reply.json.clone()));
    // Filtered by integration.
    let reply = call(
        addr,
        "GET",
        &format!("{mine}?integrations=slack"),
        Some(&alice),
        "",
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["toolkits"].as_array().unwrap().len(), 1);
    assert_eq!(reply.json["toolkits"][0]["toolkit"], "slack");

    // A user token acts on its own user only.
    let one = r#"{"connections": [{"integration": "gmail", "accountId": "x@example.com"}]}"#;
    let reply = call(addr, "PUT", &mine, Some(&bob), one).await;
    assert_error(&reply, 403, "PERMISSION_DENIED");
    let reply = call(addr, "GET", &mine, Some(&bob), "").await;
    assert_error(&reply, 403, "PERMISSION_DENIED");
    let reply = call(
        addr,
        "DELETE",
        &format!("{mine}/gmail/work@example.com"),
        Some(&bob),
        "",
    )
    .await;
    assert_error(&reply, 403, "PERMISSION_DENIED");

    // Every bad field is named.
    let reply = call(
        addr,
        "PUT",
        &mine,
        Some(&alice),
        r#"{"connections": [{"integration": "Gmail", "accountId": " ", "status": "on", "accountType": "team"}]}"#,
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(
        fields(&reply),
        [
            "connections[0].integration",
            "connections[0].accountId",
            "connections[0].status",
            "connections[0].accountType"
        ]
    );
    let reply = call(
        addr,
        "PUT",
        &mine,
        Some(&alice),
        r#"{"connections": [{"integration": "gmail", "accountId": "a"}, {"integration": "gmail", "accountId": "b", "userInfo": [1]}]}"#,
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["connections[1].userInfo"]);
    let reply = call(addr, "PUT", &mine, Some(&alice), r#"{"connections": []}"#).await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["connections"]);
    let reply = call(
        addr,
        "PUT",
        &mine,
        Some(&alice),
        r#"{"connections": [{"integration": "gmail", "accountId": "a", "colour": "red"}]}"#,
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["connections[0].colour"]);
    // Nothing of the refused writes was stored.
    let reply = call(addr, "GET", &mine, Some(&alice), "").await;
    assert_eq!(
        reply.json["toolkits"][0]["accounts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // connectedOnly: only tools of integrations with an active account (gmail; slack's is expired).
    let query = r#"{"query": "send an email to a customer", "connectedOnly": true}"#;
    let reply = call(addr, "POST", &search_path(), Some(&alice), query).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let json = &reply.json;
    assert!(!tool_names(json).is_empty(), "{}", reply.text);
    assert!(
        json["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["integration"] == "gmail"),
        "{:?}",
        tool_names(json)
    );
    let usage = &json["usage"];
    assert!(count(&usage["omittedNotConnected"]) > 0, "{usage}");
    assert_eq!(usage["visibility"]["entitledIntegrations"], 1, "{usage}");
    let misses = usage["nearMisses"].as_array().unwrap();
    let not_connected: Vec<&Value> = misses
        .iter()
        .filter(|m| m["reason"] == "not_connected")
        .collect();
    assert!(!not_connected.is_empty(), "{usage}");
    for miss in &not_connected {
        assert_ne!(miss["integration"], "gmail", "{miss}");
        assert!(miss.get("tokens").is_none(), "{miss}");
    }
    let statuses = json["toolkitConnectionStatuses"].as_array().unwrap();
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    assert_eq!(statuses[0]["toolkit"], "gmail");
    assert_eq!(statuses[0]["accountSelection"], "required");
    assert_eq!(statuses[0]["accounts"].as_array().unwrap().len(), 2);
    assert_search_tokens_exact(&reply.text);
    let reply = call(
        addr,
        "POST",
        &search_path(),
        Some(&alice),
        r#"{"query": "send an email to a customer", "connectedOnly": true, "topK": 2}"#,
    )
    .await;
    insta::assert_json_snapshot!("search", redact(reply.json.clone()));

    // Without connectedOnly: the statuses cover exactly the integrations returned.
    let reply = call(
        addr,
        "POST",
        &search_path(),
        Some(&alice),
        r#"{"query": "send an email to a customer", "topK": 10}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let returned: BTreeSet<String> = reply.json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["integration"].as_str().unwrap().to_string())
        .collect();
    assert!(returned.len() > 1, "{returned:?}");
    let statuses = reply.json["toolkitConnectionStatuses"].as_array().unwrap();
    let listed: Vec<String> = statuses
        .iter()
        .map(|s| s["toolkit"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, returned.iter().cloned().collect::<Vec<_>>());
    for status in statuses {
        assert_eq!(
            status["hasActiveConnection"],
            status["toolkit"] == "gmail",
            "{status}"
        );
    }
    assert_eq!(reply.json["usage"]["omittedNotConnected"], 0);

    // A named tool of an integration the user has not connected: the first near miss.
    let reply = call(
        addr,
        "POST",
        &search_path(),
        Some(&alice),
        r#"{"query": "OUTLOOK_SEND_MAIL", "connectedOnly": true}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(
        !tool_names(&reply.json)
            .iter()
            .any(|n| n == "OUTLOOK_SEND_MAIL"),
        "{}",
        reply.text
    );
    let first_miss = &reply.json["usage"]["nearMisses"][0];
    assert_eq!(
        first_miss["intentName"], "OUTLOOK_SEND_MAIL",
        "{}",
        reply.text
    );
    assert_eq!(first_miss["reason"], "not_connected");
    assert_eq!(first_miss["rank"], 1);

    // connectedOnly needs a user.
    let reply = call(addr, "POST", &search_path(), None, query).await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["connectedOnly"]);

    // Deleting an account; a second delete finds nothing.
    let home = format!("{mine}/gmail/home@example.com");
    let reply = call(addr, "DELETE", &home, Some(&alice), "").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json, json!({"deleted": true}));
    let reply = call(addr, "DELETE", &home, Some(&alice), "").await;
    assert_error(&reply, 404, "NOT_FOUND");
    let reply = call(addr, "GET", &mine, Some(&alice), "").await;
    let gmail = &reply.json["toolkits"][0];
    assert_eq!(gmail["accounts"].as_array().unwrap().len(), 1, "{gmail}");
    assert!(gmail.get("accountSelection").is_none(), "{gmail}");
    assert_eq!(gmail["hasActiveConnection"], true);
}

// ---- 3. Hydration ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hydrated_schemas_per_user() {
    let env = embedded(demo_tools(DEMO_SUBSET), auth(true)).await;
    let addr = env.addr;
    let alice = user_token(ALICE);
    let query = r#"{"query": "create a salesforce opportunity", "topK": 5}"#;

    let reply = call(addr, "POST", &search_path(), Some(&alice), query).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let hydrated = find_tool(&reply.json, "SALESFORCE_CREATE_OPPORTUNITY").clone();
    assert_eq!(hydrated["schemaSource"], "hydrated");
    let props = property_names(&hydrated);
    for custom in ["Region__c", "Main_Competitor__c", "Contract_Term_Months__c"] {
        assert!(
            props.iter().any(|p| p == custom),
            "{custom} not in {props:?}"
        );
    }
    assert_eq!(
        reply.json["usage"]["hydratedIntegrations"],
        json!(["salesforce"])
    );
    assert_eq!(reply.json["usage"]["degraded"], Value::Null);
    assert_eq!(
        count(&reply.json["usage"]["toolTokens"]),
        assert_search_tokens_exact(&reply.text)
    );
    for tool in reply.json["tools"].as_array().unwrap() {
        let expected = if tool["integration"] == "salesforce"
            && [
                "SALESFORCE_CREATE_OPPORTUNITY",
                "SALESFORCE_CREATE_ACCOUNT",
                "SALESFORCE_CREATE_LEAD",
            ]
            .contains(&tool["intentName"].as_str().unwrap())
        {
            "hydrated"
        } else {
            "static"
        };
        assert_eq!(tool["schemaSource"], expected, "{}", tool["intentName"]);
    }

    // Anonymous: the static schema, counted as such.
    let reply = call(addr, "POST", &search_path(), None, query).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let anonymous = find_tool(&reply.json, "SALESFORCE_CREATE_OPPORTUNITY");
    assert_eq!(anonymous["schemaSource"], "static");
    assert!(
        !property_names(anonymous).iter().any(|p| p.ends_with("__c")),
        "{anonymous}"
    );
    assert_eq!(reply.json["usage"]["hydratedIntegrations"], json!([]));
    assert_search_tokens_exact(&reply.text);
    assert!(count(&hydrated["tokens"]) > count(&anonymous["tokens"]));

    // Another user gets the file's schema for any user: fewer custom fields than alice.
    let reply = call(addr, "POST", &search_path(), Some(&user_token(BOB)), query).await;
    let bobs = find_tool(&reply.json, "SALESFORCE_CREATE_OPPORTUNITY");
    assert_eq!(bobs["schemaSource"], "hydrated");
    let props = property_names(bobs);
    assert!(props.iter().any(|p| p == "Region__c"), "{props:?}");
    assert!(
        !props.iter().any(|p| p == "Main_Competitor__c"),
        "{props:?}"
    );
    assert_search_tokens_exact(&reply.text);

    // The budget applies to the schema as returned: alice's hydrated one is larger.
    let hydrated_tokens = count(&hydrated["tokens"]);
    let budgeted = |max: u64| {
        json!({
            "query": "SALESFORCE_CREATE_OPPORTUNITY",
            "integrations": ["salesforce"],
            "topK": 1,
            "maxToolTokens": max
        })
        .to_string()
    };
    let reply = call(
        addr,
        "POST",
        &search_path(),
        Some(&alice),
        &budgeted(hydrated_tokens - 1),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(
        !tool_names(&reply.json)
            .iter()
            .any(|n| n == "SALESFORCE_CREATE_OPPORTUNITY"),
        "{}",
        reply.text
    );
    let miss = &reply.json["usage"]["nearMisses"][0];
    assert_eq!(
        miss["intentName"], "SALESFORCE_CREATE_OPPORTUNITY",
        "{}",
        reply.text
    );
    assert_eq!(miss["reason"], "budget");
    assert_eq!(count(&miss["tokens"]), hydrated_tokens);
    let reply = call(
        addr,
        "POST",
        &search_path(),
        Some(&alice),
        &budgeted(hydrated_tokens),
    )
    .await;
    assert_eq!(tool_names(&reply.json), ["SALESFORCE_CREATE_OPPORTUNITY"]);
    assert_eq!(count(&reply.json["usage"]["toolTokens"]), hydrated_tokens);
    // Anonymous, the static schema fits the smaller budget.
    let reply = call(
        addr,
        "POST",
        &search_path(),
        None,
        &budgeted(hydrated_tokens - 1),
    )
    .await;
    assert_eq!(tool_names(&reply.json), ["SALESFORCE_CREATE_OPPORTUNITY"]);

    // 5. Diagnostics: every stage is traced, hydration included.
    let reply = call(
        addr,
        "POST",
        &format!("{}?diagnostics=1", search_path()),
        Some(&alice),
        query,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let labels: Vec<String> = reply.json["trace"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap().to_string())
        .collect();
    let shard = env.router.shards().ids()[0].clone();
    for label in [
        "auth",
        "connections",
        "placement",
        "embed",
        &format!("shard:{shard}"),
        "fuse",
        "budget",
        "hydrate",
    ] {
        // A query embedded before is answered by the cache, traced as `embed_cached`.
        assert!(
            labels
                .iter()
                .any(|l| l == label || (label == "embed" && l == "embed_cached")),
            "{label} not in {labels:?}"
        );
    }
    for step in reply.json["trace"]["steps"].as_array().unwrap() {
        assert!(step["durationMs"].as_f64().unwrap() >= 0.0, "{step}");
    }
    assert!(reply.json["trace"]["totalMs"].as_f64().unwrap() > 0.0);
    assert!(find_tool(&reply.json, "SALESFORCE_CREATE_OPPORTUNITY")["explain"].is_object());

    // 7. Lookup by name: hydrated for alice, static for anonymous, 404 for an unknown name.
    let one = project_path("/tools/SALESFORCE_CREATE_OPPORTUNITY");
    let reply = call(addr, "GET", &one, Some(&alice), "").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["tool"]["schemaSource"], "hydrated");
    assert_eq!(
        reply.json["tool"]["intentName"],
        "SALESFORCE_CREATE_OPPORTUNITY"
    );
    assert!(
        property_names(&reply.json["tool"])
            .iter()
            .any(|p| p == "Main_Competitor__c")
    );
    assert_eq!(reply.json["degraded"], Value::Null);
    assert_eq!(reply.json["connection"]["toolkit"], "salesforce");
    assert_eq!(reply.json["connection"]["hasActiveConnection"], false);
    assert!(count(&reply.json["tool"]["catalogVersion"]) >= 1);
    assert_tokens_exact(raw_get(&reply.text, "tool"));
    assert_eq!(
        reply.json["tool"]["tokens"], hydrated["tokens"],
        "the lookup and the search shape a tool alike"
    );
    let reply = call(addr, "GET", &one, None, "").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["tool"]["schemaSource"], "static");
    assert_tokens_exact(raw_get(&reply.text, "tool"));
    let reply = call(
        addr,
        "GET",
        &project_path("/tools/GMAIL_GET_PROFILE"),
        None,
        "",
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    insta::assert_json_snapshot!("get_tool", redact(reply.json.clone()));
    let reply = call(
        addr,
        "GET",
        &project_path("/tools/NO_SUCH_TOOL"),
        Some(&alice),
        "",
    )
    .await;
    assert_error(&reply, 404, "NOT_FOUND");
}

/// One shard and one store with the Salesforce and HubSpot tools, shared by several routers that
/// differ only in their hydration.
struct Parts {
    store: Arc<dyn MetadataStore>,
    shard: Arc<LocalShard>,
    dir: tempfile::TempDir,
}

async fn parts() -> Parts {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path());
    let shard = open_shard(&dir.path().join("shard"));
    let router = assemble(
        store.clone(),
        vec![shard.clone() as Arc<dyn ShardApi>],
        embedder(),
        1 << 20,
        None,
    )
    .await;
    load(&router, PROJECT, demo_tools(&["salesforce", "hubspot"])).await;
    Parts { store, shard, dir }
}

async fn serve_with(parts: &Parts, hydration: HydrationService) -> (Arc<HydrationService>, Served) {
    let service = Arc::new(hydration);
    let router = assemble(
        parts.store.clone(),
        vec![parts.shard.clone() as Arc<dyn ShardApi>],
        embedder(),
        1 << 20,
        Some(service.clone()),
    )
    .await;
    let (http, _grpc) = start_router(router, auth(true)).await;
    (service, http)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hydration_failures_and_caches() {
    let parts = parts().await;
    let alice = user_token(ALICE);
    let query = r#"{"query": "create a salesforce opportunity", "topK": 3}"#;
    let file = demo_hydration_file(parts.dir.path());

    // The provider is down: the static schema stands in and the response says so.
    let url = format!("http://127.0.0.1:{}/hydrate", closed_port().await);
    let provider = HttpHydrator::new(&url, Duration::from_millis(500)).unwrap();
    let service = HydrationService::builder()
        .cache(Arc::new(MemoryCache::default()))
        .integration("salesforce", Arc::new(provider), Duration::from_millis(500))
        .build();
    let (service, http) = serve_with(&parts, service).await;
    let reply = call(http.addr, "POST", &search_path(), Some(&alice), query).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let tool = find_tool(&reply.json, "SALESFORCE_CREATE_OPPORTUNITY");
    assert_eq!(tool["schemaSource"], "static");
    assert!(!property_names(tool).iter().any(|p| p.ends_with("__c")));
    let usage = &reply.json["usage"];
    assert_eq!(usage["degraded"], "static_schema", "{usage}");
    assert_eq!(usage["degradations"], json!(["static_schema"]), "{usage}");
    assert_eq!(usage["hydratedIntegrations"], json!([]));
    assert_eq!(usage["strategy"], "hybrid");
    assert_search_tokens_exact(&reply.text);
    assert!(
        service.stats().provider_failures >= 1,
        "{:?}",
        service.stats()
    );
    let reply = call(
        http.addr,
        "GET",
        &project_path("/tools/SALESFORCE_CREATE_OPPORTUNITY"),
        Some(&alice),
        "",
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["tool"]["schemaSource"], "static");
    assert_eq!(reply.json["degraded"], "static_schema");
    // Anonymous callers are never hydrated, so nothing failed for them.
    let reply = call(http.addr, "POST", &search_path(), None, query).await;
    assert_eq!(
        reply.json["usage"]["degraded"],
        Value::Null,
        "{}",
        reply.text
    );
    http.stop().await;

    // Redis is down: a cache miss costs nothing but the provider call.
    let down = RedisCache::new(
        &format!("redis://127.0.0.1:{}", closed_port().await),
        Duration::from_millis(50),
    )
    .unwrap();
    let service = HydrationService::builder()
        .cache(Arc::new(down))
        .integration(
            "salesforce",
            Arc::new(FileHydrator::open(&file).unwrap()),
            Duration::from_millis(500),
        )
        .build();
    let (service, http) = serve_with(&parts, service).await;
    let reply = call(http.addr, "POST", &search_path(), Some(&alice), query).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let tool = find_tool(&reply.json, "SALESFORCE_CREATE_OPPORTUNITY");
    assert_eq!(tool["schemaSource"], "hydrated");
    assert_eq!(reply.json["usage"]["degraded"], Value::Null);
    assert_search_tokens_exact(&reply.text);
    let stats = service.stats();
    assert!(stats.cache_errors >= 1, "{stats:?}");
    assert!(stats.provider_calls >= 1, "{stats:?}");
    http.stop().await;

    // Redis is up: the second identical search is served from the cache, and so is another router
    // sharing the Redis. A user of this run only, so earlier runs' entries do not count.
    let redis_url = std::env::var("AGENTSEARCH_TEST_REDIS")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_string());
    let redis = |url: &str| RedisCache::new(url, Duration::from_millis(500)).unwrap();
    redis(&redis_url)
        .ping()
        .await
        .expect("Redis must be running for the tests (AGENTSEARCH_TEST_REDIS)");
    let user = format!("hydration-{}@example.com", uuid::Uuid::new_v4().simple());
    let token = user_token(&user);
    let file_service = || {
        HydrationService::builder()
            .cache(Arc::new(redis(&redis_url)))
            .integration(
                "salesforce",
                Arc::new(FileHydrator::open(&file).unwrap()),
                Duration::from_millis(500),
            )
            .build()
    };
    let query = r#"{"query": "create a salesforce opportunity", "integrations": ["salesforce"], "topK": 1}"#;
    let (service, http) = serve_with(&parts, file_service()).await;
    let first = call(http.addr, "POST", &search_path(), Some(&token), query).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(tool_names(&first.json), ["SALESFORCE_CREATE_OPPORTUNITY"]);
    assert_eq!(first.json["tools"][0]["schemaSource"], "hydrated");
    let after_first = service.stats();
    assert_eq!(after_first.cache_hits, 0, "{after_first:?}");
    assert_eq!(after_first.cache_errors, 0, "{after_first:?}");
    assert_eq!(after_first.provider_calls, 1, "{after_first:?}");
    let second = call(http.addr, "POST", &search_path(), Some(&token), query).await;
    assert_eq!(second.json["tools"], first.json["tools"]);
    let after_second = service.stats();
    assert_eq!(after_second.provider_calls, 1, "{after_second:?}");
    assert_eq!(after_second.cache_hits, 1, "{after_second:?}");
    http.stop().await;
    let (service, http) = serve_with(&parts, file_service()).await;
    let third = call(http.addr, "POST", &search_path(), Some(&token), query).await;
    assert_eq!(third.json["tools"], first.json["tools"]);
    let stats = service.stats();
    assert_eq!(stats.provider_calls, 0, "{stats:?}");
    assert_eq!(stats.cache_hits, 1, "{stats:?}");
    http.stop().await;
}

// ---- 4. Degraded modes ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedding_failure_fails_open_to_lexical() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(FlakyEmbedder {
        inner: embedder(),
        broken: AtomicBool::new(false),
    });
    let router = assemble(
        sqlite(dir.path()),
        vec![open_shard(&dir.path().join("shard")) as Arc<dyn ShardApi>],
        model.clone(),
        0,
        None,
    )
    .await;
    load(&router, PROJECT, fixture_catalog()).await;
    let (http, _grpc) = start_router(router, Auth::default()).await;
    model.broken.store(true, Ordering::SeqCst);

    let reply = call(
        http.addr,
        "POST",
        &format!("{}?diagnostics=1", search_path()),
        None,
        r#"{"query": "close a solved ticket"}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let usage = &reply.json["usage"];
    assert_eq!(usage["strategy"], "semantic_failed_open", "{usage}");
    assert_eq!(usage["degraded"], "lexical_only", "{usage}");
    assert_eq!(usage["degradations"], json!(["lexical_only"]), "{usage}");
    assert_eq!(usage["partial"], false, "{usage}");
    let names = tool_names(&reply.json);
    assert_eq!(
        names.first().map(String::as_str),
        Some("TICKETEER_CLOSE_TICKET")
    );
    for tool in reply.json["tools"].as_array().unwrap() {
        assert!(tool["explain"]["dense"].is_null(), "{tool}");
        assert!(tool["explain"]["lexical"].is_object(), "{tool}");
    }
    assert_search_tokens_exact(&reply.text);

    // Dense-only retrieval has nothing to fall back to.
    let reply = call(
        http.addr,
        "POST",
        &search_path(),
        None,
        r#"{"query": "close a solved ticket", "mode": "dense"}"#,
    )
    .await;
    assert_error(&reply, 503, "UNAVAILABLE");

    // Once the model is back, so is hybrid retrieval (no cache hides it: capacity 0).
    model.broken.store(false, Ordering::SeqCst);
    let reply = call(
        http.addr,
        "POST",
        &search_path(),
        None,
        r#"{"query": "close a solved ticket"}"#,
    )
    .await;
    assert_eq!(reply.json["usage"]["strategy"], "hybrid", "{}", reply.text);
    assert_eq!(reply.json["usage"]["degraded"], Value::Null);
}

/// A query embedding the caller computed is used by the dense retriever in place of the model
/// (which is down here), and is checked against the deployment's model and dimension.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_query_embedding_replaces_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(FlakyEmbedder {
        inner: embedder(),
        broken: AtomicBool::new(false),
    });
    let router = assemble(
        sqlite(dir.path()),
        vec![open_shard(&dir.path().join("shard")) as Arc<dyn ShardApi>],
        model.clone(),
        0,
        None,
    )
    .await;
    load(&router, PROJECT, fixture_catalog()).await;
    let (http, grpc) = start_router(router, Auth::default()).await;
    let model_id = model.model_id().to_string();
    let vector = model.embed(&["close a solved ticket"]).unwrap().remove(0);
    model.broken.store(true, Ordering::SeqCst);

    // Not unit length as sent: the service scales it.
    let scaled: Vec<f32> = vector.iter().map(|x| x * 3.0).collect();
    let body = json!({
        "query": "close a solved ticket",
        "mode": "dense",
        "queryEmbedding": {"model": model_id, "vector": scaled},
    });
    let reply = call(
        http.addr,
        "POST",
        &format!("{}?diagnostics=1", search_path()),
        None,
        &body.to_string(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["usage"]["strategy"], "dense", "{}", reply.text);
    assert_eq!(
        tool_names(&reply.json).first().map(String::as_str),
        Some("TICKETEER_CLOSE_TICKET")
    );
    let steps: Vec<&str> = reply.json["trace"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["label"].as_str())
        .collect();
    assert!(steps.contains(&"embed_given"), "{steps:?}");

    // The lexical retriever still reads `query`: another text with the same vector ranks by both.
    let body = json!({
        "query": "archive",
        "queryEmbedding": {"model": model_id, "vector": vector},
    });
    let reply = call(http.addr, "POST", &search_path(), None, &body.to_string()).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["usage"]["strategy"], "hybrid", "{}", reply.text);

    // Wrong model, wrong dimension, bad shapes: REQUEST_INVALID naming the field.
    for (embedding, field) in [
        (
            json!({"model": "other-model", "vector": vector}),
            "queryEmbedding.model",
        ),
        (
            json!({"model": model_id, "vector": [0.5, 0.5]}),
            "queryEmbedding.vector",
        ),
        (
            json!({"model": model_id, "vector": vec![0.0; vector.len()]}),
            "queryEmbedding.vector",
        ),
        (json!({"model": model_id}), "queryEmbedding.vector"),
        (json!({"vector": vector}), "queryEmbedding.model"),
        (
            json!({"model": model_id, "vector": ["x"]}),
            "queryEmbedding.vector",
        ),
        (
            json!({"model": model_id, "vector": vector, "vectors": []}),
            "queryEmbedding.vectors",
        ),
        (json!([1, 2]), "queryEmbedding"),
    ] {
        let body = json!({"query": "close a ticket", "queryEmbedding": embedding});
        let reply = call(http.addr, "POST", &search_path(), None, &body.to_string()).await;
        assert_error(&reply, 400, "REQUEST_INVALID");
        assert_eq!(fields(&reply), [field], "{}", reply.text);
    }

    // The same over gRPC.
    let mut client = agentsearch_proto::v1::tool_search_client::ToolSearchClient::connect(format!(
        "http://{grpc}"
    ))
    .await
    .unwrap();
    let request = |vector: Vec<f32>| agentsearch_proto::v1::SearchToolsRequest {
        project_id: PROJECT.into(),
        query: "close a solved ticket".into(),
        mode: Some("dense".into()),
        query_embedding: Some(agentsearch_proto::v1::QueryEmbedding {
            model: model_id.clone(),
            vector,
        }),
        ..Default::default()
    };
    let reply = client
        .search_tools(request(vector.clone()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.tools[0].intent_name, "TICKETEER_CLOSE_TICKET");
    let status = client
        .search_tools(request(vec![f32::NAN; vector.len()]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        tonic_types::StatusExt::get_details_bad_request(&status)
            .unwrap()
            .field_violations[0]
            .field,
        "queryEmbedding.vector[0]"
    );
}

/// Two faulty shards over real ones, with the fixture catalog split between them.
struct TwoShards {
    faulty: Vec<Arc<FaultyShard>>,
    ids: Vec<String>,
    /// Per shard (same order), the integrations placed on it.
    integrations: Vec<Vec<String>>,
    http: Served,
    _dir: tempfile::TempDir,
}

async fn two_shards() -> TwoShards {
    let catalog = fixture_catalog();
    let integrations: BTreeSet<String> = catalog.iter().map(|t| t.integration.clone()).collect();
    let dir = tempfile::tempdir().unwrap();
    // Shard ids are random: open shards until rendezvous hashing splits the catalog over both.
    let mut attempt = 0;
    let shards = loop {
        attempt += 1;
        assert!(attempt < 50, "no pair of shards split the catalog");
        let shards: Vec<Arc<LocalShard>> = (0..2)
            .map(|i| open_shard(&dir.path().join(format!("try-{attempt}-shard-{i}"))))
            .collect();
        let mut ids = Vec::new();
        for shard in &shards {
            ids.push(shard.info().await.unwrap().shard_id);
        }
        let owners: BTreeSet<String> = integrations
            .iter()
            .map(|i| {
                agentsearch_router::cluster::placement::rendezvous(
                    &format!("{PROJECT}/{i}"),
                    &ids,
                    1,
                )[0]
                .clone()
            })
            .collect();
        if owners.len() == 2 {
            break shards;
        }
    };
    let faulty: Vec<Arc<FaultyShard>> = shards.into_iter().map(FaultyShard::new).collect();
    let router = assemble(
        sqlite(dir.path()),
        faulty
            .iter()
            .map(|s| s.clone() as Arc<dyn ShardApi>)
            .collect(),
        embedder(),
        100,
        None,
    )
    .await;
    load(&router, PROJECT, catalog).await;
    let mut ids = Vec::new();
    for shard in &faulty {
        ids.push(shard.info().await.unwrap().shard_id);
    }
    let placements = router.placements(PROJECT).await.unwrap();
    let per_shard: Vec<Vec<String>> = ids
        .iter()
        .map(|id| {
            placements
                .iter()
                .filter(|p| p.shard_ids.contains(id))
                .map(|p| p.integration.clone())
                .collect()
        })
        .collect();
    assert!(per_shard.iter().all(|i| !i.is_empty()), "{per_shard:?}");
    let (http, _grpc) = start_router(router, Auth::default()).await;
    TwoShards {
        faulty,
        ids,
        integrations: per_shard,
        http,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lexical_index_failure_fails_open_to_dense() {
    let cluster = two_shards().await;
    let addr = cluster.http.addr;

    // The lexical index fails everywhere: dense retrieval answers alone.
    for shard in &cluster.faulty {
        shard.set(LEXICAL_BROKEN);
    }
    let reply = call(
        addr,
        "POST",
        &search_path(),
        None,
        r#"{"query": "close a solved ticket"}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let usage = &reply.json["usage"];
    assert_eq!(usage["strategy"], "lexical_failed_open", "{usage}");
    assert_eq!(usage["degraded"], "dense_only", "{usage}");
    assert_eq!(
        tool_names(&reply.json).first().map(String::as_str),
        Some("TICKETEER_CLOSE_TICKET")
    );
    let failed: BTreeSet<&str> = reply.json["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["code"] == "INDEX_UNAVAILABLE")
        .map(|e| e["integration"].as_str().unwrap())
        .collect();
    let all: BTreeSet<&str> = cluster
        .integrations
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    assert_eq!(failed, all, "{}", reply.text);
    // Every integration was still searched (densely): none of their tools is missing.
    assert_eq!(usage["partial"], false, "{usage}");
    assert_eq!(usage["failedIntegrations"], json!([]), "{usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_down_gives_a_partial_answer() {
    let cluster = two_shards().await;
    let addr = cluster.http.addr;

    // One shard is down: the other's tools are still returned, the response says what is missing.
    cluster.faulty[1].set(DOWN);
    let healthy = &cluster.integrations[0];
    let down = &cluster.integrations[1];
    let target = fixture_catalog()
        .into_iter()
        .find(|t| t.integration == healthy[0])
        .unwrap();
    let body = json!({"query": target.description, "topK": 20}).to_string();
    let reply = call(
        addr,
        "POST",
        &format!("{}?diagnostics=1", search_path()),
        None,
        &body,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let usage = &reply.json["usage"];
    assert_eq!(usage["partial"], true, "{usage}");
    assert_eq!(usage["failedIntegrations"], json!(down), "{usage}");
    assert_eq!(usage["strategy"], "hybrid", "{usage}");
    let tools = reply.json["tools"].as_array().unwrap();
    assert!(!tools.is_empty());
    for tool in tools {
        assert!(
            healthy.iter().any(|i| tool["integration"] == i.as_str()),
            "{} is on the shard that is down",
            tool["intentName"]
        );
    }
    assert!(tool_names(&reply.json).contains(&target.name));
    let errors = reply.json["errors"].as_array().unwrap();
    let unavailable: Vec<&str> = errors
        .iter()
        .filter(|e| e["code"] == "UNAVAILABLE")
        .map(|e| e["integration"].as_str().unwrap())
        .collect();
    assert_eq!(
        unavailable,
        down.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let labels: Vec<&str> = reply.json["trace"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    for id in &cluster.ids {
        let label = format!("shard:{id}");
        assert!(
            labels.contains(&label.as_str()),
            "{label} not in {labels:?}"
        );
    }
}

// ---- 6. Batch ----

fn warehouse_toolkit() -> Value {
    json!({
        "slug": "warehouse",
        "name": "Warehouse",
        "description": "Our in-house warehouse system.",
        "tools": [{
            "slug": "get_order_status",
            "name": "Get order status",
            "description": "Looks up the shipping status of a warehouse order by its order id: packed, shipped or delivered, with the carrier's tracking number.",
            "inputSchema": {"type": "object", "properties": {"order_id": {"type": "string", "description": "The warehouse order id."}}, "required": ["order_id"]},
            "sideEffect": "read"
        }]
    })
}

fn translate_tool() -> Value {
    json!({
        "slug": "translate_text",
        "name": "Translate text",
        "description": "Translates a text into another language.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}, "target_language": {"type": "string"}}, "required": ["text", "target_language"]},
        "sideEffect": "read"
    })
}

fn batch_body(extra: Value) -> String {
    let mut body = json!({
        "queries": [
            {"useCase": "send an email to a customer", "knownFields": "to:bob@example.com, subject:Hello"},
            {"useCase": "post a message in a chat channel", "knownFields": "channel_name:general"},
            {"useCase": "look up the shipping status of a warehouse order", "knownFields": "order_id:A-1001"}
        ],
        "customToolkits": [warehouse_toolkit()],
        "customTools": [translate_tool()]
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body.to_string()
}

/// Checks a batch response's own accounting; returns its total tokens.
fn check_batch(reply: &Reply) -> u64 {
    assert_eq!(reply.status, 200, "{}", reply.text);
    let json = &reply.json;
    assert_eq!(json["success"], true, "{}", reply.text);
    let schemas = json["toolSchemas"].as_object().unwrap();
    let mut primary: BTreeSet<String> = BTreeSet::new();
    for result in json["results"].as_array().unwrap() {
        primary.extend(strings(&result["primaryToolSlugs"]));
        let usage = &result["usage"];
        assert_eq!(
            count(&usage["returned"]),
            result["primaryToolSlugs"].as_array().unwrap().len() as u64
        );
    }
    // Every primary tool's schema, once each, and nothing else.
    assert_eq!(
        schemas.keys().cloned().collect::<BTreeSet<_>>(),
        primary,
        "{}",
        reply.text
    );
    for (name, schema) in schemas {
        assert_eq!(schema["intentName"], name.as_str());
    }
    let raw_schemas: BTreeMap<String, &RawValue> =
        serde_json::from_str(raw_get(&reply.text, "toolSchemas").get()).unwrap();
    let mut sum = 0;
    for raw in raw_schemas.values() {
        assert_tokens_exact(raw);
        sum += o200k(raw_get(raw.get(), "tool").get());
    }
    let usage = &json["usage"];
    assert_eq!(count(&usage["tools"]), schemas.len() as u64);
    assert_eq!(count(&usage["toolTokens"]), sum, "{usage}");
    assert_eq!(usage["customTools"], 2);
    sum
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_with_custom_tools() {
    let env = embedded(demo_tools(DEMO_SUBSET), auth(true)).await;
    let addr = env.addr;

    let reply = call(addr, "POST", &batch_path(), None, &batch_body(json!({}))).await;
    check_batch(&reply);
    let json = &reply.json;
    assert_eq!(json["usage"]["budgetScope"], "union");
    let results = json["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["index"], i + 1);
        assert_eq!(result["error"], Value::Null);
    }
    let warehouse = strings(&results[2]["primaryToolSlugs"]);
    assert_eq!(
        warehouse.first().map(String::as_str),
        Some("LOCAL_WAREHOUSE_GET_ORDER_STATUS"),
        "{warehouse:?}"
    );
    assert!(
        results[2]["toolkits"]
            .as_array()
            .unwrap()
            .contains(&json!("warehouse"))
    );
    let email = strings(&results[0]["primaryToolSlugs"]);
    assert!(email.iter().all(|n| !n.starts_with("LOCAL_")), "{email:?}");
    let custom = &json["toolSchemas"]["LOCAL_WAREHOUSE_GET_ORDER_STATUS"];
    assert_eq!(custom["integration"], "warehouse");
    assert_eq!(custom["category"], "custom");
    assert_eq!(custom["catalogVersion"], 0);
    assert_eq!(custom["schemaSource"], "static");
    assert_eq!(
        custom["tool"]["function"]["parameters"]["required"],
        json!(["order_id"])
    );
    let statuses = json["toolkitConnectionStatuses"].as_array().unwrap();
    let kit = statuses
        .iter()
        .find(|s| s["toolkit"] == "warehouse")
        .unwrap_or_else(|| panic!("no warehouse status: {statuses:?}"));
    assert_eq!(kit["hasActiveConnection"], true);
    assert_eq!(kit["description"], "Our in-house warehouse system.");
    // Catalog tools of every other primary integration come with their connection status.
    let listed: BTreeSet<&str> = statuses
        .iter()
        .map(|s| s["toolkit"].as_str().unwrap())
        .collect();
    for result in results {
        for toolkit in result["toolkits"].as_array().unwrap() {
            assert!(listed.contains(toolkit.as_str().unwrap()), "{toolkit}");
        }
    }
    assert!(
        json["timeInfo"]["currentTimeUtcEpochSeconds"]
            .as_i64()
            .unwrap()
            > 1_700_000_000
    );

    // Budgets: one for all queries, or one per query.
    let budget = 1200;
    let union = call(
        addr,
        "POST",
        &batch_path(),
        None,
        &batch_body(json!({"maxToolTokens": budget})),
    )
    .await;
    let union_tokens = check_batch(&union);
    assert!(union_tokens <= budget, "{union_tokens} > {budget}");
    assert!(union_tokens > 0);
    let per_query = call(
        addr,
        "POST",
        &batch_path(),
        None,
        &batch_body(json!({"maxToolTokens": budget, "budgetScope": "per_query"})),
    )
    .await;
    let per_query_tokens = check_batch(&per_query);
    assert_eq!(per_query.json["usage"]["budgetScope"], "per_query");
    for result in per_query.json["results"].as_array().unwrap() {
        assert!(count(&result["usage"]["toolTokens"]) <= budget, "{result}");
    }
    assert!(
        per_query_tokens > union_tokens,
        "per query {per_query_tokens} vs union {union_tokens}"
    );

    // Custom tools live for the request only.
    let reply = call(
        addr,
        "POST",
        &search_path(),
        None,
        r#"{"query": "look up the shipping status of a warehouse order", "topK": 20}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(
        tool_names(&reply.json)
            .iter()
            .all(|n| !n.starts_with("LOCAL_")),
        "{:?}",
        tool_names(&reply.json)
    );
    let reply = call(
        addr,
        "GET",
        &project_path("/tools/LOCAL_WAREHOUSE_GET_ORDER_STATUS"),
        None,
        "",
    )
    .await;
    assert_error(&reply, 404, "NOT_FOUND");

    // Refusals name the field.
    let eleven: Vec<Value> = (0..11)
        .map(|i| json!({"useCase": format!("task {i}")}))
        .collect();
    let reply = call(
        addr,
        "POST",
        &batch_path(),
        None,
        &json!({"queries": eleven}).to_string(),
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["queries"]);
    let mut bad = translate_tool();
    bad["inputSchema"] = json!({"type": "string"});
    let reply = call(
        addr,
        "POST",
        &batch_path(),
        None,
        &json!({"queries": [{"useCase": "translate a text"}], "customTools": [bad]}).to_string(),
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["customTools[0].inputSchema"]);

    // The response shape, on a small batch.
    let reply = call(
        addr,
        "POST",
        &batch_path(),
        None,
        &json!({
            "queries": [{"useCase": "translate a text into French", "knownFields": "target_language:fr"}],
            "topK": 1,
            "relatedK": 1,
            "customTools": [translate_tool()]
        })
        .to_string(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    insta::assert_json_snapshot!("batch", redact(reply.json.clone()));

    // A custom tool extending a catalog integration needs that integration's connection.
    let alice = user_token(ALICE);
    let reply = call(
        addr,
        "PUT",
        &connections_path(ALICE),
        Some(&alice),
        r#"{"connections": [{"integration": "gmail", "accountId": "alice@example.com"}]}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let extending = json!({
        "slug": "send_from_template",
        "name": "Send from template",
        "description": "Sends a Gmail email built from one of the company's approved email templates.",
        "inputSchema": {"type": "object", "properties": {"template_id": {"type": "string"}, "to": {"type": "string"}}},
        "extendsToolkit": "gmail",
        "sideEffect": "send"
    });
    let body = json!({
        "queries": [{"useCase": "send an email from an approved template"}],
        "connectedOnly": true,
        "customTools": [extending.clone()]
    })
    .to_string();
    let reply = call(addr, "POST", &batch_path(), Some(&alice), &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let primary = strings(&reply.json["results"][0]["primaryToolSlugs"]);
    assert!(
        primary
            .iter()
            .any(|n| n == "LOCAL_GMAIL_SEND_FROM_TEMPLATE"),
        "{primary:?}"
    );
    assert_eq!(
        reply.json["toolSchemas"]["LOCAL_GMAIL_SEND_FROM_TEMPLATE"]["integration"],
        "gmail"
    );
    let gmail = reply.json["toolkitConnectionStatuses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["toolkit"] == "gmail")
        .unwrap_or_else(|| panic!("no gmail status: {}", reply.text))
        .clone();
    assert_eq!(gmail["hasActiveConnection"], true);
    assert_eq!(gmail["accounts"][0]["id"], "alice@example.com");
    let reply = call(addr, "POST", &batch_path(), Some(&user_token(BOB)), &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let primary = strings(&reply.json["results"][0]["primaryToolSlugs"]);
    assert!(
        primary
            .iter()
            .all(|n| n.starts_with("LOCAL_") && !n.starts_with("LOCAL_GMAIL_")),
        "{primary:?}"
    );
    assert!(count(&reply.json["results"][0]["usage"]["omittedNotConnected"]) > 0);
    let reply = call(addr, "POST", &batch_path(), None, &body).await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["connectedOnly"]);
    let mut unknown = extending;
    unknown["extendsToolkit"] = json!("nosuchapp");
    let reply = call(
        addr,
        "POST",
        &batch_path(),
        None,
        &json!({"queries": [{"useCase": "send an email"}], "customTools": [unknown]}).to_string(),
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["customTools[0].extendsToolkit"]);

    // A custom toolkit may not reuse a catalog integration's slug; the refusal names the toolkit
    // at its position in the request.
    let mut taken = warehouse_toolkit();
    taken["slug"] = json!("gmail");
    let reply = call(
        addr,
        "POST",
        &batch_path(),
        None,
        &json!({"queries": [{"useCase": "send an email"}], "customToolkits": [taken.clone()]})
            .to_string(),
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["customToolkits[0].slug"]);
    let mut zeta = warehouse_toolkit();
    zeta["slug"] = json!("zeta");
    let reply = call(
        addr,
        "POST",
        &batch_path(),
        None,
        &json!({"queries": [{"useCase": "send an email"}], "customToolkits": [zeta, taken]})
            .to_string(),
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["customToolkits[1].slug"]);
}

// ---- 7. Exact names, near misses, catalog versions ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_names_and_near_misses() {
    let env = embedded(demo_tools(DEMO_SUBSET), auth(true)).await;
    let addr = env.addr;
    let search = |body: Value| async move {
        let reply = call(addr, "POST", &search_path(), None, &body.to_string()).await;
        assert_eq!(reply.status, 200, "{body}: {}", reply.text);
        for tool in reply.json["tools"].as_array().unwrap() {
            assert!(count(&tool["catalogVersion"]) >= 1, "{tool}");
        }
        let misses = reply.json["usage"]["nearMisses"].as_array().unwrap();
        assert!(misses.len() <= 5, "{body}: {misses:?}");
        reply
    };

    for query in [
        "GMAIL_SEND_EMAIL",
        "gmail_send_email",
        "gmail send email",
        "GmailSendEmail",
        "gmail.send-email",
        "GMAIL_SNED_EMAIL",
    ] {
        let reply = search(json!({"query": query})).await;
        let first = &reply.json["tools"][0];
        assert_eq!(
            first["intentName"],
            "GMAIL_SEND_EMAIL",
            "{query}: {:?}",
            tool_names(&reply.json)
        );
        assert_eq!(first["relevancy"], 1.0, "{query}");
    }
    // A name inside a sentence.
    let reply = search(json!({"query": "use GMAIL_SEND_DRAFT to send what I wrote"})).await;
    assert_eq!(reply.json["tools"][0]["intentName"], "GMAIL_SEND_DRAFT");
    // Named, but outside the integrations asked for: not returned.
    let reply = search(json!({"query": "GMAIL_SEND_EMAIL", "integrations": ["slack"]})).await;
    for tool in reply.json["tools"].as_array().unwrap() {
        assert_eq!(tool["integration"], "slack", "{tool}");
    }

    // Named but above the side-effect ceiling: not returned, the first near miss.
    let reply = search(json!({"query": "GMAIL_SEND_EMAIL", "maxSideEffect": "write"})).await;
    assert!(
        !tool_names(&reply.json)
            .iter()
            .any(|n| n == "GMAIL_SEND_EMAIL")
    );
    let usage = &reply.json["usage"];
    let first_miss = &usage["nearMisses"][0];
    assert_eq!(first_miss["intentName"], "GMAIL_SEND_EMAIL", "{usage}");
    assert_eq!(first_miss["reason"], "side_effect");
    assert_eq!(first_miss["rank"], 1);
    assert_eq!(first_miss["integration"], "gmail");
    assert!(count(&usage["omittedForSideEffect"]) >= 1);

    // Many tools above the ceiling: at most five near misses, best first.
    let reply =
        search(json!({"query": "send an email", "maxSideEffect": "read", "topK": 20})).await;
    let misses = reply.json["usage"]["nearMisses"].as_array().unwrap();
    assert_eq!(misses.len(), 5, "{misses:?}");
    let ranks: Vec<u64> = misses.iter().map(|m| count(&m["rank"])).collect();
    assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{ranks:?}");
    for tool in reply.json["tools"].as_array().unwrap() {
        assert_eq!(tool["sideEffect"], "read", "{tool}");
        assert_eq!(tool["approvalRequired"], false);
    }

    // A tight budget: the tools that did not fit are near misses with their tokens.
    let budget = 700;
    let reply = search(
        json!({"query": "create a salesforce opportunity", "maxToolTokens": budget, "topK": 10}),
    )
    .await;
    let usage = &reply.json["usage"];
    assert!(count(&usage["toolTokens"]) <= budget);
    assert!(count(&usage["omittedForBudget"]) >= 1, "{usage}");
    let budget_misses: Vec<&Value> = usage["nearMisses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["reason"] == "budget")
        .collect();
    assert!(!budget_misses.is_empty(), "{usage}");
    let returned = tool_names(&reply.json);
    for miss in budget_misses {
        let tokens = count(&miss["tokens"]);
        assert!(
            tokens + count(&usage["toolTokens"]) > budget,
            "{miss} would have fit"
        );
        assert!(!returned.contains(&miss["intentName"].as_str().unwrap().to_string()));
    }
    assert_eq!(
        count(&usage["toolTokens"]),
        assert_search_tokens_exact(&reply.text)
    );
}

// ---- 8. Usage identities over random requests ----

const PROP_QUERIES: &[&str] = &[
    "send an email to a customer",
    "create a salesforce opportunity",
    "schedule a meeting next week",
    "post a message in a channel",
    "find a contact in the crm",
    "GMAIL_SEND_EMAIL",
    "delete an old calendar event",
];

#[test]
fn usage_counts_add_up_for_random_requests() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config as ProptestConfig, TestRunner};

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let env = runtime.block_on(embedded(demo_tools(DEMO_SUBSET), auth(true)));
    let addr = env.addr;
    let users = AtomicUsize::new(0);
    let strategy = (
        proptest::sample::select(PROP_QUERIES.to_vec()),
        proptest::option::of(1u32..=20),
        proptest::option::of(50u32..=5000),
        proptest::option::of(proptest::sample::select(vec![
            "read", "write", "delete", "send",
        ])),
        any::<bool>(),
        proptest::sample::subsequence(DEMO_SUBSET.to_vec(), 0..=4),
    );
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &strategy,
            |(query, top_k, max_tokens, ceiling, connected_only, connected)| {
                let user = format!("prop-{}@example.com", users.fetch_add(1, Ordering::SeqCst));
                let token = user_token(&user);
                runtime.block_on(async {
                    if !connected.is_empty() {
                        let connections: Vec<Value> = connected
                            .iter()
                            .map(|i| json!({"integration": i, "accountId": format!("{i}-account")}))
                            .collect();
                        let reply = call(
                            addr,
                            "PUT",
                            &connections_path(&user),
                            Some(&token),
                            &json!({"connections": connections}).to_string(),
                        )
                        .await;
                        assert_eq!(reply.status, 200, "{}", reply.text);
                    }
                    let mut body = json!({"query": query, "connectedOnly": connected_only});
                    if let Some(k) = top_k {
                        body["topK"] = json!(k);
                    }
                    if let Some(max) = max_tokens {
                        body["maxToolTokens"] = json!(max);
                    }
                    if let Some(ceiling) = ceiling {
                        body["maxSideEffect"] = json!(ceiling);
                    }
                    let reply = call(
                        addr,
                        "POST",
                        &search_path(),
                        Some(&token),
                        &body.to_string(),
                    )
                    .await;
                    assert_eq!(reply.status, 200, "{body}: {}", reply.text);
                    let json = &reply.json;
                    let usage = &json["usage"];
                    let tools = json["tools"].as_array().unwrap();
                    let context = format!("{body} -> {usage}");
                    assert_eq!(count(&usage["returned"]), tools.len() as u64, "{context}");
                    assert_eq!(
                        count(&usage["candidates"]),
                        count(&usage["returned"])
                            + count(&usage["omittedForBudget"])
                            + count(&usage["omittedForTopK"]),
                        "{context}"
                    );
                    let visibility = &usage["visibility"];
                    assert_eq!(
                        count(&visibility["candidatesBeforeFilter"]),
                        count(&usage["candidates"])
                            + count(&usage["omittedForSideEffect"])
                            + count(&usage["omittedNotConnected"]),
                        "{context}"
                    );
                    assert_eq!(
                        count(&visibility["candidatesAfterFilter"]),
                        count(&usage["candidates"]),
                        "{context}"
                    );
                    let sum: u64 = tools.iter().map(|t| count(&t["tokens"])).sum();
                    assert_eq!(count(&usage["toolTokens"]), sum, "{context}");
                    assert_eq!(assert_search_tokens_exact(&reply.text), sum, "{context}");
                    if let Some(max) = max_tokens {
                        assert!(count(&usage["toolTokens"]) <= u64::from(max), "{context}");
                    }
                    if let Some(k) = top_k {
                        assert!(tools.len() <= k as usize, "{context}");
                    }
                    assert!(
                        usage["nearMisses"].as_array().unwrap().len() <= 5,
                        "{context}"
                    );
                    if connected_only {
                        for tool in tools {
                            let integration = tool["integration"].as_str().unwrap();
                            assert!(connected.contains(&integration), "{context}");
                        }
                    } else {
                        assert_eq!(usage["omittedNotConnected"], 0, "{context}");
                    }
                    if let Some(ceiling) = ceiling {
                        let order = ["read", "write", "delete", "send"];
                        let limit = order.iter().position(|s| *s == ceiling).unwrap();
                        for tool in tools {
                            let effect = tool["sideEffect"].as_str().unwrap();
                            let position = order.iter().position(|s| *s == effect);
                            assert!(
                                position.is_some_and(|p| p <= limit),
                                "{effect} above {ceiling}: {context}"
                            );
                        }
                    }
                    for tool in tools {
                        assert!(count(&tool["catalogVersion"]) >= 1, "{context}");
                    }
                    // The statuses cover exactly the integrations returned.
                    let returned: BTreeSet<&str> = tools
                        .iter()
                        .map(|t| t["integration"].as_str().unwrap())
                        .collect();
                    let listed: BTreeSet<&str> = json["toolkitConnectionStatuses"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| s["toolkit"].as_str().unwrap())
                        .collect();
                    assert_eq!(listed, returned, "{context}");
                });
                Ok(())
            },
        )
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_router_sessions_answer_in_the_reference_shape() {
    let env = embedded(demo_tools(DEMO_SUBSET), auth(false)).await;
    let addr = env.addr;
    let alice = user_token(ALICE);
    // The catalog describes gmail and says how to use it.
    let reply = call(
        addr,
        "PUT",
        &project_path("/integrations"),
        Some(SERVICE_TOKEN),
        r#"{"integrations": [{"integration": "gmail", "description": "Google's email service.",
            "guidance": "Search the thread before replying to it.",
            "pitfalls": {"GMAIL_SEND_EMAIL": ["`to` takes addresses, not contact names."],
                         "GMAIL_LIST_LABELS": ["System labels are upper case."]}}]}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["upserted"], 1);
    let refused = call(
        addr,
        "PUT",
        &project_path("/integrations"),
        Some(&alice),
        r#"{"integrations": [{"integration": "gmail"}]}"#,
    )
    .await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    let reply = call(
        addr,
        "PUT",
        &connections_path(ALICE),
        Some(&alice),
        r#"{"connections": [{"integration": "gmail", "accountId": "work@example.com",
            "isDefault": true, "userInfo": {"email": "work@example.com"}}]}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);

    // A session of the token's project and user.
    let created = call(
        addr,
        "POST",
        "/api/v3.1/tool_router/session",
        Some(&alice),
        "{}",
    )
    .await;
    assert_eq!(created.status, 200, "{}", created.text);
    let session = created.json["session_id"].as_str().unwrap().to_string();
    assert!(
        session.starts_with("trs_") && session.len() == 36,
        "{session}"
    );
    assert_eq!(created.json["user_id"], ALICE);
    assert_eq!(created.json["project_id"], PROJECT);

    let search = format!("/api/v3.1/tool_router/session/{session}/search");
    let body = r#"{"queries": [{"use_case": "send a gmail email to the team about the launch",
        "known_fields": "recipient:team@example.com"}], "model": "gpt-4o"}"#;
    let reply = call(addr, "POST", &search, Some(&alice), body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let answer = &reply.json;
    assert_eq!(answer["success"], true);
    assert!(answer["error"].is_null());
    assert_eq!(answer["session"]["id"], session.as_str());
    assert_eq!(answer["session"]["generate_id"], false);
    let result = &answer["results"][0];
    assert_eq!(result["index"], 1);
    let primary: Vec<&str> = result["primary_tool_slugs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(!primary.is_empty());
    for slug in &primary {
        assert_eq!(answer["tool_schemas"][slug]["slug"], *slug, "{answer}");
        assert_eq!(
            answer["tool_schemas"][slug]["input_parameters"]["type"],
            "object"
        );
    }
    let gmail = answer["toolkit_connection_statuses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["toolkit"] == "gmail")
        .unwrap_or_else(|| panic!("gmail not among the statuses: {answer}"));
    assert_eq!(gmail["description"], "Google's email service.");
    assert_eq!(gmail["has_active_connection"], true);
    assert_eq!(gmail["account_type"], "PRIVATE");
    assert_eq!(
        gmail["connection_details"]["connected_account_ids"],
        json!(["work@example.com"])
    );
    assert_eq!(gmail["current_user_info"]["email"], "work@example.com");
    assert_eq!(gmail["accounts"][0]["account_type"], "PRIVATE");
    assert!(
        result["toolkits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "gmail"),
        "{answer}"
    );
    assert_eq!(
        result["execution_guidance"],
        "gmail: Search the thread before replying to it."
    );
    // Pitfalls of the primary tools only.
    assert!(primary.contains(&"GMAIL_SEND_EMAIL"), "{answer}");
    assert_eq!(
        result["known_pitfalls"],
        json!(["GMAIL_SEND_EMAIL: `to` takes addresses, not contact names."])
    );
    insta::assert_json_snapshot!("tool_router_search", redact(reply.json.clone()));
    // The camelCase multi-query route describes the toolkit too.
    let reply = call(
        addr,
        "POST",
        &batch_path(),
        Some(&alice),
        r#"{"queries": [{"useCase": "send a gmail email to the team about the launch",
            "knownFields": "recipient:team@example.com"}]}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let described = reply.json["toolkitConnectionStatuses"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["toolkit"] == "gmail" && s["description"] == "Google's email service.");
    assert!(described, "{}", reply.text);

    // Another user of the project cannot use it; unknown and malformed ids are not found.
    let bob = user_token(BOB);
    let reply = call(addr, "POST", &search, Some(&bob), body).await;
    assert_error(&reply, 403, "PERMISSION_DENIED");
    for missing in [
        "trs_00000000000000000000000000000000",
        "trs_nope",
        "session",
    ] {
        let path = format!("/api/v3.1/tool_router/session/{missing}/search");
        let reply = call(addr, "POST", &path, Some(&alice), body).await;
        assert_error(&reply, 404, "NOT_FOUND");
    }
    // Without a valid credential, a live session and an unknown one are answered alike: the
    // caller is refused before any session is read.
    for path in [
        search.clone(),
        "/api/v3.1/tool_router/session/trs_00000000000000000000000000000000/search".to_string(),
    ] {
        for token in [None, Some("not-a-valid-token")] {
            let reply = call(addr, "POST", &path, token, body).await;
            assert_error(&reply, 401, "UNAUTHENTICATED");
        }
        let (status, _, text) = http(
            addr,
            "POST",
            &path,
            &[
                ("content-type", "application/json"),
                ("x-agentsearch-project", PROJECT),
            ],
            body,
        )
        .await;
        assert_eq!(status, 401, "{text}");
    }
    // A service names the user and the project (header); a session needs a project.
    let reply = call(
        addr,
        "POST",
        "/api/v3.1/tool_router/session",
        Some(SERVICE_TOKEN),
        r#"{"user_id": "carol@example.com"}"#,
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["x-agentsearch-project"]);
    let (status, _, text) = http(
        addr,
        "POST",
        "/api/v3.1/tool_router/session",
        &[
            ("content-type", "application/json"),
            ("authorization", &format!("Bearer {SERVICE_TOKEN}")),
            ("x-agentsearch-project", PROJECT),
        ],
        r#"{"user_id": "carol@example.com"}"#,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let carol: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(carol["user_id"], "carol@example.com");
    // Fields of the reference's sessions this service would not apply are refused by name.
    let reply = call(
        addr,
        "POST",
        "/api/v3.1/tool_router/session",
        Some(&alice),
        r#"{"toolkits": ["gmail"]}"#,
    )
    .await;
    assert_error(&reply, 400, "REQUEST_INVALID");
    assert_eq!(fields(&reply), ["toolkits"]);
    // A user token for someone else's session creation is refused.
    let reply = call(
        addr,
        "POST",
        "/api/v3.1/tool_router/session",
        Some(&alice),
        r#"{"user_id": "carol@example.com"}"#,
    )
    .await;
    assert_error(&reply, 403, "PERMISSION_DENIED");
    // What the catalog says of an integration can be taken back.
    let path = project_path("/integrations/gmail");
    let reply = call(addr, "DELETE", &path, Some(SERVICE_TOKEN), "").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["deleted"], true);
    let reply = call(addr, "DELETE", &path, Some(SERVICE_TOKEN), "").await;
    assert_eq!(reply.json["deleted"], false);
    let reply = call(addr, "POST", &search, Some(&alice), body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(
        reply.json["results"][0].get("execution_guidance").is_none(),
        "{}",
        reply.text
    );
}
