//! Writes interrupted at every point leave nothing a delete cannot reach: a client that goes away
//! mid-write, a router that dies after a shard committed, one replica failing, the metadata store
//! failing. After each, deleting the record (or tool) removes it from every replica, also across
//! a restart of the shards, and a search no longer finds it. Shards are real (tantivy + FAISS on
//! disk) behind a gate that can hold, fail or lose the answer of a write, served over gRPC on
//! loopback; metadata is in PostgreSQL, whose failures are real ones raised by a trigger.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use agentsearch_common::Error;
use agentsearch_common::shard::*;
use agentsearch_common::tool::ToolDefinition;
use agentsearch_router::auth::Auth;
use agentsearch_router::context::api::{EmbeddingSpec, RawRecord, RawUpsertRecords, SegmentInput};
use agentsearch_router::{Router, RouterSettings};
use agentsearch_shard::LocalShard;
use agentsearch_store::MetadataStore;
use agentsearch_tests::*;
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

type Res<T> = agentsearch_common::Result<T>;

/// Writes pass through.
const HEALTHY: u8 = 0;
/// Writes fail before touching the index (a replica that is down).
const FAIL: u8 = 1;
/// Writes are applied, then the answer is lost (the router never learns it: as if it died).
const LOSE_ANSWER: u8 = 2;
/// Writes are applied, then held until released (time for a client to go away).
const HOLD: u8 = 3;

/// A real shard whose writes can be failed, held or have their answer lost.
struct GateShard {
    inner: Arc<LocalShard>,
    mode: AtomicU8,
    applied: Notify,
    release: Notify,
}

impl GateShard {
    fn new(inner: Arc<LocalShard>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            mode: AtomicU8::new(HEALTHY),
            applied: Notify::new(),
            release: Notify::new(),
        })
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    async fn write<T>(&self, write: impl std::future::Future<Output = Res<T>>) -> Res<T> {
        let mode = self.mode.load(Ordering::SeqCst);
        if mode == FAIL {
            return Err(Error::Unavailable("injected: the replica is down".into()));
        }
        let answer = write.await;
        match mode {
            LOSE_ANSWER => Err(Error::Unavailable("injected: the answer was lost".into())),
            HOLD => {
                self.applied.notify_one();
                self.release.notified().await;
                answer
            }
            _ => answer,
        }
    }
}

#[async_trait::async_trait]
impl ShardApi for GateShard {
    async fn info(&self) -> Res<ShardInfo> {
        self.inner.info().await
    }
    async fn term_stats(&self, request: TermStatsRequest) -> Res<ScopeStats> {
        self.inner.term_stats(request).await
    }
    async fn search_tools(&self, request: ShardSearchRequest) -> Res<ShardSearchResponse> {
        self.inner.search_tools(request).await
    }
    async fn search_inline(&self, request: InlineSearchRequest) -> Res<ShardSearchResponse> {
        self.inner.search_inline(request).await
    }
    async fn upsert_tools(&self, request: ShardUpsertRequest) -> Res<ShardWriteResponse> {
        self.write(self.inner.upsert_tools(request)).await
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
        self.write(self.inner.upsert_segments(request)).await
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

/// Gated shards over gRPC, their data dirs, and PostgreSQL metadata in a schema of its own.
struct Bench {
    gates: Vec<Arc<GateShard>>,
    served: Vec<Served>,
    addrs: Vec<SocketAddr>,
    dirs: Vec<tempfile::TempDir>,
    store: Arc<dyn MetadataStore>,
    schema: String,
}

impl Bench {
    async fn start(shards: usize) -> Bench {
        let (store, schema) = pg_store().await;
        let mut bench = Bench {
            gates: Vec::new(),
            served: Vec::new(),
            addrs: Vec::new(),
            dirs: Vec::new(),
            store,
            schema,
        };
        for _ in 0..shards {
            bench.dirs.push(tempfile::tempdir().unwrap());
        }
        bench.open_shards().await;
        bench
    }

    /// Opens every shard on its data dir and serves it on a fresh loopback port.
    async fn open_shards(&mut self) {
        for dir in &self.dirs {
            let gate = GateShard::new(Arc::new(
                LocalShard::open(dir.path(), Default::default(), Default::default()).unwrap(),
            ));
            let served = serve_shard(gate.clone()).await;
            self.addrs.push(served.addr);
            self.gates.push(gate);
            self.served.push(served);
        }
    }

    /// Stops every shard and opens it again from its data dir.
    async fn restart_shards(&mut self) {
        for served in std::mem::take(&mut self.served) {
            served.stop().await;
        }
        self.gates.clear();
        self.addrs.clear();
        self.open_shards().await;
    }

    /// A router over the shards: a new one models a restarted router process.
    async fn router(&self, replication: usize) -> Arc<Router> {
        grpc_router(
            self.store.clone(),
            &self.addrs,
            RouterSettings {
                replication,
                // Every replica must acknowledge: a failed one fails the write.
                write_quorum: replication,
                ..settings()
            },
        )
        .await
    }

    /// Makes every write to `table` that sets a content hash fail in PostgreSQL itself.
    async fn break_table(&self, table: &str) {
        pg_exec(
            &self.schema,
            &format!(
                "CREATE OR REPLACE FUNCTION injected_failure() RETURNS trigger AS $$
                 BEGIN RAISE EXCEPTION 'injected: the store fails'; END $$ LANGUAGE plpgsql;
                 CREATE TRIGGER injected_{table} BEFORE INSERT OR UPDATE ON {table} FOR EACH ROW
                 WHEN (NEW.content_hash <> '') EXECUTE FUNCTION injected_failure();"
            ),
        )
        .await;
    }

    async fn repair_table(&self, table: &str) {
        pg_exec(
            &self.schema,
            &format!("DROP TRIGGER injected_{table} ON {table}"),
        )
        .await;
    }

    /// Whether shard `i` holds segment 0 of the record (read as anyone may).
    async fn holds(&self, i: usize, sync_id: &str, record_id: &str) -> bool {
        self.gates[i]
            .inner
            .read_segments(ReadSegmentsRequest {
                project_id: PROJECT.into(),
                sync_id: sync_id.into(),
                record_id: record_id.into(),
                ordinal: 0,
                before: 0,
                after: 0,
                principals: vec!["anyone".into()],
            })
            .await
            .unwrap()
            .is_some()
    }
}

const RECORD: &str = "quarterly-report";
const QUERY: &str = "zephyrine quarterly revenue";

/// One record readable by anyone, with `passages` precomputed passages (no embedding needed).
fn big_record(passages: usize, dim: usize) -> serde_json::Value {
    let segments: Vec<serde_json::Value> = (0..passages)
        .map(|i| {
            let mut vector = vec![0.0f32; dim];
            vector[i % dim] = 1.0;
            serde_json::json!({
                "text": format!("Passage {i} of the zephyrine quarterly revenue report."),
                "vector": vector,
            })
        })
        .collect();
    serde_json::json!({
        "id": RECORD,
        "displayName": "Quarterly report",
        "acl": {"anyone": true},
        "segments": segments,
    })
}

fn raw_records(record: &serde_json::Value, dim: usize) -> RawUpsertRecords {
    let r = record;
    RawUpsertRecords {
        records: vec![RawRecord {
            id: Some(r["id"].as_str().unwrap().into()),
            display_name: Some(r["displayName"].as_str().unwrap().into()),
            acl: Some(agentsearch_common::context::Acl {
                anyone: true,
                ..Default::default()
            }),
            segments: Some(
                r["segments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| SegmentInput {
                        text: s["text"].as_str().unwrap().into(),
                        vector: serde_json::from_value(s["vector"].clone()).unwrap(),
                    })
                    .collect(),
            ),
            ..Default::default()
        }],
        embedding: Some(EmbeddingSpec {
            model: embedder().model_id().into(),
            dimension: dim as u32,
        }),
    }
}

async fn found(router: &Router, sync_id: &str) -> bool {
    let request = agentsearch_router::context::api::RawContextSearch {
        query: Some(QUERY.into()),
        sync_ids: Some(vec![sync_id.into()]),
        ..Default::default()
    }
    .validate(PROJECT.into())
    .unwrap();
    let response = router.search_context(request, "test", None).await.unwrap();
    response.results.iter().any(|r| r.id.ends_with(RECORD))
}

/// Deletes the record through `router` and checks it is gone everywhere, also after the shards
/// restart.
async fn delete_and_check(bench: &mut Bench, router: &Arc<Router>, sync_id: &str) {
    let outcome = router
        .delete_records(PROJECT, sync_id, vec![RECORD.into()], "delete")
        .await
        .unwrap();
    assert_eq!((outcome.deleted, outcome.not_found), (1, 0));
    for i in 0..bench.gates.len() {
        assert!(
            !bench.holds(i, sync_id, RECORD).await,
            "replica {i} kept it"
        );
    }
    assert!(!found(router, sync_id).await);
    bench.restart_shards().await;
    let router = bench.router(bench.gates.len()).await;
    for i in 0..bench.gates.len() {
        assert!(
            !bench.holds(i, sync_id, RECORD).await,
            "replica {i} kept it"
        );
    }
    assert!(!found(&router, sync_id).await);
    assert!(
        bench
            .store
            .record_entries(PROJECT, sync_id, &[RECORD.into()])
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_written_while_its_client_goes_away_is_kept_and_deletable() {
    let mut bench = Bench::start(2).await;
    let router = bench.router(2).await;
    let (http, _grpc) = start_router(router.clone(), Auth::default()).await;
    let sync_id = new_sync(&router).await.id;
    let dim = embedder().dim();
    let body = serde_json::json!({
        "records": [big_record(2000, dim)],
        "embedding": {"model": embedder().model_id(), "dimension": dim},
    })
    .to_string();
    bench.gates[0].set(HOLD);

    // The client sends the batch and goes away while a replica is writing it.
    let mut stream = tokio::net::TcpStream::connect(http.addr).await.unwrap();
    let head = format!(
        "PUT /api/context/projects/{PROJECT}/syncs/{sync_id}/records HTTP/1.1\r\nhost: {}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        http.addr,
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), bench.gates[0].applied.notified())
        .await
        .expect("the write never reached the shard");
    drop(stream);
    tokio::time::sleep(Duration::from_millis(300)).await;
    bench.gates[0].set(HEALTHY);
    bench.gates[0].release.notify_one();

    // The write runs to its end: both replicas and the store have it.
    let mut recorded = false;
    for _ in 0..200 {
        if router.get_sync(PROJECT, &sync_id).await.unwrap().records == 1 {
            recorded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(recorded, "the interrupted write was not completed");
    assert!(bench.holds(0, &sync_id, RECORD).await);
    assert!(bench.holds(1, &sync_id, RECORD).await);
    assert!(found(&router, &sync_id).await);
    delete_and_check(&mut bench, &router, &sync_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_a_dead_router_wrote_is_deletable_by_the_next_one() {
    let mut bench = Bench::start(1).await;
    let router = bench.router(1).await;
    let sync_id = new_sync(&router).await.id;
    let dim = embedder().dim();
    // The shard commits; the router never hears back (as if its process died right then).
    bench.gates[0].set(LOSE_ANSWER);
    let err = router
        .upsert_records(
            PROJECT,
            &sync_id,
            raw_records(&big_record(50, dim), dim),
            "w",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
    drop(router);
    bench.gates[0].set(HEALTHY);
    assert!(bench.holds(0, &sync_id, RECORD).await);

    // A new router process: the record is known, found, and deletable.
    let router = bench.router(1).await;
    assert!(found(&router, &sync_id).await);
    delete_and_check(&mut bench, &router, &sync_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_one_replica_missed_is_deletable_from_the_other() {
    let mut bench = Bench::start(2).await;
    let router = bench.router(2).await;
    let sync_id = new_sync(&router).await.id;
    let dim = embedder().dim();
    bench.gates[1].set(FAIL);
    router
        .upsert_records(
            PROJECT,
            &sync_id,
            raw_records(&big_record(50, dim), dim),
            "w",
        )
        .await
        .unwrap_err();
    bench.gates[1].set(HEALTHY);
    assert!(bench.holds(0, &sync_id, RECORD).await);
    assert!(!bench.holds(1, &sync_id, RECORD).await);
    delete_and_check(&mut bench, &router, &sync_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_written_while_the_store_fails_is_deletable() {
    let mut bench = Bench::start(2).await;
    let router = bench.router(2).await;
    let sync_id = new_sync(&router).await.id;
    let dim = embedder().dim();
    bench.break_table("sync_records").await;
    let err = router
        .upsert_records(
            PROJECT,
            &sync_id,
            raw_records(&big_record(50, dim), dim),
            "w",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Internal(_)), "{err:?}");
    bench.repair_table("sync_records").await;
    assert!(bench.holds(0, &sync_id, RECORD).await);
    assert!(bench.holds(1, &sync_id, RECORD).await);
    delete_and_check(&mut bench, &router, &sync_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_of_an_id_the_store_does_not_know_reaches_every_replica() {
    let mut bench = Bench::start(2).await;
    let router = bench.router(2).await;
    let sync_id = new_sync(&router).await.id;
    let dim = embedder().dim();
    // A replica holds a record the store has no entry for (written behind the router's back).
    let records = raw_records(&big_record(3, dim), dim);
    let segments: Vec<IndexedSegment> = records.records[0]
        .segments
        .as_ref()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, s)| IndexedSegment {
            ordinal: i as u32,
            text: s.text.clone(),
            vector: s.vector.clone(),
        })
        .collect();
    for gate in &bench.gates {
        gate.inner
            .upsert_segments(SegmentUpsertRequest {
                project_id: PROJECT.into(),
                sync_id: sync_id.clone(),
                records: vec![IndexedRecord {
                    record_id: RECORD.into(),
                    display_name: None,
                    generation: 1,
                    principals: vec!["anyone".into()],
                    segments: segments.clone(),
                    fields: Vec::new(),
                }],
                fields: Vec::new(),
            })
            .await
            .unwrap();
    }
    assert!(found(&router, &sync_id).await);
    delete_and_check(&mut bench, &router, &sync_id).await;
}

// ---- The catalog ----

const TOOL: &str = "ZEPHYRINE_ARCHIVE_LEDGER";

fn tool() -> ToolDefinition {
    ToolDefinition {
        name: TOOL.into(),
        integration: "zephyrine".into(),
        category: None,
        side_effect: None,
        description: "Archives a zephyrine ledger entry for the finance team.".into(),
        parameters: None,
    }
}

async fn tool_found(router: &Router) -> bool {
    let request = agentsearch_router::tools::api::RawSearch {
        query: Some("archive the zephyrine ledger".into()),
        ..Default::default()
    }
    .validate(PROJECT.into())
    .unwrap();
    let ctx = agentsearch_router::request::RequestContext {
        request_id: "t".into(),
        user: None,
        kind: agentsearch_common::auth::CallerKind::Anonymous,
        auth: Duration::ZERO,
    };
    let response = router.search_tools(request, &ctx).await.unwrap();
    response.tools.iter().any(|t| t.intent_name == TOOL)
}

async fn delete_tool_and_check(bench: &mut Bench, router: &Arc<Router>) {
    let outcome = router
        .delete_tools(PROJECT, vec![TOOL.into()], "delete")
        .await
        .unwrap();
    assert_eq!((outcome.deleted, outcome.not_found), (1, 0));
    assert!(!tool_found(router).await);
    bench.restart_shards().await;
    let router = bench.router(bench.gates.len()).await;
    assert!(!tool_found(&router).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_written_while_its_client_goes_away_is_kept_and_deletable() {
    let mut bench = Bench::start(2).await;
    let router = bench.router(2).await;
    let (http, _grpc) = start_router(router.clone(), Auth::default()).await;
    bench.gates[0].set(HOLD);
    let body = serde_json::json!({"tools": [serde_json::to_value(tool()).unwrap()]}).to_string();
    let mut stream = tokio::net::TcpStream::connect(http.addr).await.unwrap();
    let head = format!(
        "PUT /api/tools/projects/{PROJECT}/tools HTTP/1.1\r\nhost: {}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        http.addr,
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), bench.gates[0].applied.notified())
        .await
        .expect("the write never reached the shard");
    drop(stream);
    tokio::time::sleep(Duration::from_millis(300)).await;
    bench.gates[0].set(HEALTHY);
    bench.gates[0].release.notify_one();

    // The write runs to its end: the ledger records the tool's final entry.
    let mut recorded = false;
    for _ in 0..200 {
        let entries = bench
            .store
            .catalog_entries(PROJECT, &[TOOL.into()])
            .await
            .unwrap();
        if entries.iter().any(|e| !e.content_hash.is_empty()) {
            recorded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(recorded, "the interrupted write was not completed");
    assert!(tool_found(&router).await);
    delete_tool_and_check(&mut bench, &router).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_written_through_a_dead_router_a_failed_replica_or_store_is_deletable() {
    let mut bench = Bench::start(2).await;

    // The answer is lost after both replicas committed: the next router deletes it.
    let router = bench.router(2).await;
    for gate in &bench.gates {
        gate.set(LOSE_ANSWER);
    }
    router
        .upsert_tools(PROJECT, vec![tool()], "w")
        .await
        .unwrap_err();
    drop(router);
    for gate in &bench.gates {
        gate.set(HEALTHY);
    }
    let router = bench.router(2).await;
    assert!(tool_found(&router).await);
    delete_tool_and_check(&mut bench, &router).await;

    // One replica fails.
    let router = bench.router(2).await;
    bench.gates[1].set(FAIL);
    router
        .upsert_tools(PROJECT, vec![tool()], "w")
        .await
        .unwrap_err();
    bench.gates[1].set(HEALTHY);
    delete_tool_and_check(&mut bench, &router).await;

    // The ledger's final write fails.
    let router = bench.router(2).await;
    bench.break_table("tools").await;
    router
        .upsert_tools(PROJECT, vec![tool()], "w")
        .await
        .unwrap_err();
    bench.repair_table("tools").await;
    assert!(tool_found(&router).await);
    delete_tool_and_check(&mut bench, &router).await;
}
