//! Overload answered fast and explicitly: beyond `limits.max_in_flight` a request is refused at
//! once with RATE_LIMITED (HTTP 429, gRPC RESOURCE_EXHAUSTED) and `retryAfterMs`, health stays
//! answered; a request past `limits.request_timeout_ms` gets TIMEOUT; a connection that does not
//! send its headers in time is closed, and connections beyond `limits.max_connections` too.
//! Searches are held inside a real shard until released, so nothing here depends on timing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentsearch_common::config::LimitsConfig;
use agentsearch_common::shard::*;
use agentsearch_router::auth::Auth;
use agentsearch_shard::LocalShard;
use agentsearch_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

type Res<T> = agentsearch_common::Result<T>;

/// A real shard whose searches wait for a permit of `gate` (none at first) once `hold` is set.
struct HeldShard {
    inner: Arc<LocalShard>,
    hold: std::sync::atomic::AtomicBool,
    gate: Semaphore,
    entered: AtomicUsize,
}

#[async_trait::async_trait]
impl ShardApi for HeldShard {
    async fn info(&self) -> Res<ShardInfo> {
        self.inner.info().await
    }
    async fn term_stats(&self, request: TermStatsRequest) -> Res<ScopeStats> {
        self.inner.term_stats(request).await
    }
    async fn search_tools(&self, request: ShardSearchRequest) -> Res<ShardSearchResponse> {
        if self.hold.load(Ordering::SeqCst) {
            self.entered.fetch_add(1, Ordering::SeqCst);
            let permit = self.gate.acquire().await.unwrap();
            permit.forget();
        }
        self.inner.search_tools(request).await
    }
    async fn search_inline(&self, request: InlineSearchRequest) -> Res<ShardSearchResponse> {
        self.inner.search_inline(request).await
    }
    async fn upsert_tools(&self, request: ShardUpsertRequest) -> Res<ShardWriteResponse> {
        self.inner.upsert_tools(request).await
    }
    async fn delete_tools(&self, request: ShardDeleteRequest) -> Res<ShardWriteResponse> {
        self.inner.delete_tools(request).await
    }
    async fn get_tools(&self, request: GetToolsRequest) -> Res<GetToolsResponse> {
        self.inner.get_tools(request).await
    }
    async fn context_term_stats(&self, request: ContextStatsRequest) -> Res<TermStats> {
        self.inner.context_term_stats(request).await
    }
    async fn search_segments(&self, request: ContextSearchRequest) -> Res<ContextSearchResponse> {
        self.inner.search_segments(request).await
    }
    async fn upsert_segments(&self, request: SegmentUpsertRequest) -> Res<ShardWriteResponse> {
        self.inner.upsert_segments(request).await
    }
    async fn delete_records(&self, request: RecordDeleteRequest) -> Res<ShardWriteResponse> {
        self.inner.delete_records(request).await
    }
    async fn fetch_segments(
        &self,
        request: agentsearch_common::shard::SegmentFetchRequest,
    ) -> Res<agentsearch_common::shard::SegmentFetchResponse> {
        self.inner.fetch_segments(request).await
    }
    async fn read_segments(
        &self,
        request: ReadSegmentsRequest,
    ) -> Res<Option<ReadSegmentsResponse>> {
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

struct Env {
    shard: Arc<HeldShard>,
    http: Served,
    grpc: std::net::SocketAddr,
    _shard_server: Served,
    _dir: tempfile::TempDir,
}

async fn start(limits: LimitsConfig) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let shard = Arc::new(HeldShard {
        inner: Arc::new(
            LocalShard::open(dir.path(), Default::default(), Default::default()).unwrap(),
        ),
        hold: false.into(),
        gate: Semaphore::new(0),
        entered: AtomicUsize::new(0),
    });
    let shard_server = serve_shard(shard.clone()).await;
    let (store, _) = pg_store().await;
    let router = grpc_router(store, &[shard_server.addr], settings()).await;
    let router = Arc::new(
        Arc::try_unwrap(router)
            .ok()
            .expect("only this test holds the router")
            .with_limits(limits),
    );
    let (http, grpc) = start_router(router, Auth::default()).await;
    load_catalog(grpc, PROJECT, &fixture_catalog(), 50).await;
    shard.hold.store(true, Ordering::SeqCst);
    Env {
        shard,
        http,
        grpc,
        _shard_server: shard_server,
        _dir: dir,
    }
}

async fn wait_entered(shard: &HeldShard, n: usize) {
    for _ in 0..200 {
        if shard.entered.load(Ordering::SeqCst) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{n} searches never reached the shard");
}

fn search_path() -> String {
    format!("/api/tools/projects/{PROJECT}/tools/search")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_limit_requests_are_refused_at_once_and_health_still_answers() {
    let env = start(LimitsConfig {
        max_in_flight: 2,
        retry_after_ms: 250,
        ..LimitsConfig::default()
    })
    .await;
    // Two searches take both permits and wait inside the shard.
    let http = env.http.addr;
    let held: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(async move {
                rest_json(
                    http,
                    "POST",
                    &search_path(),
                    None,
                    r#"{"query": "send a message"}"#,
                )
                .await
            })
        })
        .collect();
    wait_entered(&env.shard, 2).await;

    // More are refused while those two are still held: REST 429 and gRPC RESOURCE_EXHAUSTED.
    for _ in 0..4 {
        let (status, body) = rest_json(
            http,
            "POST",
            &search_path(),
            None,
            r#"{"query": "create an invoice"}"#,
        )
        .await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "RATE_LIMITED", "{body}");
        assert_eq!(body["error"]["retryAfterMs"], 250, "{body}");
        assert_eq!(body["error"]["retryable"], true);
    }
    let refused = search(env.grpc, search_request("create an invoice"))
        .await
        .expect_err("no permit left");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert!(matches!(
        agentsearch_proto::error_from_status(&refused),
        agentsearch_common::Error::RateLimited { .. }
    ));
    // Health, readiness and metrics pass.
    for path in ["/livez", "/readyz", "/healthz", "/metrics"] {
        let (status, _, _) = http_req(http, path).await;
        assert_eq!(status, 200, "{path}");
    }
    assert_eq!(
        env.shard.entered.load(Ordering::SeqCst),
        2,
        "refused requests never reached a shard"
    );

    // Released, the held two complete normally, and the permits are back.
    env.shard.gate.add_permits(2);
    for task in held {
        let (status, body) = task.await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
    env.shard.hold.store(false, Ordering::SeqCst);
    let (status, body) = rest_json(
        http,
        "POST",
        &search_path(),
        None,
        r#"{"query": "create an invoice"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let text = http_req(http, "/metrics").await.2;
    assert!(
        text.contains("agentsearch_requests_shed_total{api=\"rest\"} 4"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_its_timeout_is_answered_timeout() {
    let env = start(LimitsConfig {
        request_timeout_ms: 300,
        ..LimitsConfig::default()
    })
    .await;
    let (status, body) = rest_json(
        env.http.addr,
        "POST",
        &search_path(),
        None,
        r#"{"query": "send a message"}"#,
    )
    .await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["code"], "TIMEOUT");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limits.request_timeout_ms")
    );
    // Over gRPC, the call is cut at the same bound instead of waiting for the shard.
    let started = std::time::Instant::now();
    let answer = search(env.grpc, search_request("send a message")).await;
    let status = answer.expect_err("a call held past limits.request_timeout_ms was answered");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert!(
        status.message().contains("limits.request_timeout_ms"),
        "{status:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    env.shard.gate.add_permits(10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_excess_connections_are_closed() {
    let env = start(LimitsConfig {
        header_read_timeout_ms: 300,
        max_connections: 2,
        ..LimitsConfig::default()
    })
    .await;
    // Partial headers, never finished: the server closes the connection.
    let mut slow = tokio::net::TcpStream::connect(env.http.addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), slow.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the connection stayed open");
    assert!(
        buf.is_empty() || String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&buf)
    );

    // A connection that sends nothing at all is closed too, freeing its place.
    let mut silent = tokio::net::TcpStream::connect(env.http.addr).await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), silent.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "a silent connection stayed open");

    // Two idle connections take the connection budget; a third is closed unanswered.
    let _a = tokio::net::TcpStream::connect(env.http.addr).await.unwrap();
    let _b = tokio::net::TcpStream::connect(env.http.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut third = tokio::net::TcpStream::connect(env.http.addr).await.unwrap();
    let _ = third
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        .await;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), third.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the third connection stayed open");
    assert!(
        !String::from_utf8_lossy(&buf).contains("200 OK"),
        "a third connection was served"
    );
    drop((_a, _b));

    // The gRPC listener likewise: a silent connection is closed, and beyond two open connections
    // one more is closed as it is accepted.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut silent = tokio::net::TcpStream::connect(env.grpc).await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), silent.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "a silent gRPC connection stayed open");
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut connection = tokio::net::TcpStream::connect(env.grpc).await.unwrap();
        connection.write_all(preface).await.unwrap();
        open.push(connection);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut third = tokio::net::TcpStream::connect(env.grpc).await.unwrap();
    let _ = third.write_all(preface).await;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), third.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "a third gRPC connection stayed open");
    assert!(buf.is_empty(), "a third gRPC connection was answered");
    // Once they close, a client is served again.
    drop(open);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel(env.grpc).await);
    health
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .unwrap();
}

async fn http_req(addr: std::net::SocketAddr, path: &str) -> (u16, Vec<(String, String)>, String) {
    http(addr, "GET", path, &[], "").await
}
