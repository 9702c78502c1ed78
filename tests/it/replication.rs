//! Replicas that serve: replication 2 over three shards on gRPC (real tantivy + FAISS on disk,
//! metadata in PostgreSQL). Reads spread over the replicas; a replica that hangs is hedged around;
//! a write goes through with a replica down (write quorum 1), the replica that missed it is marked
//! stale and not read from, and a repair pass brings it level and clears the mark.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use agentsearch_common::Error;
use agentsearch_common::config::{Fusion, SearchConfig};
use agentsearch_common::shard::*;
use agentsearch_common::tool::ToolDefinition;
use agentsearch_router::auth::Auth;
use agentsearch_router::context::api::RawContextSearch;
use agentsearch_router::{Router, RouterSettings};
use agentsearch_shard::LocalShard;
use agentsearch_store::{MetadataStore, STALE_INTEGRATION, STALE_SYNC};
use agentsearch_tests::*;

type Res<T> = agentsearch_common::Result<T>;

/// A real shard that can be taken down (every call fails, as a crashed process would) or slowed
/// (searches answer after a delay, as an overloaded one would), and counts the searches it gets.
struct Replica {
    inner: Arc<LocalShard>,
    down: AtomicBool,
    search_delay_ms: AtomicU64,
    searches: AtomicUsize,
    /// Shared by a cluster's replicas: when set, the next replica to answer a segment search
    /// goes down right after (as a process crashing then would), and the flag is cleared.
    crash_after_search: Arc<AtomicBool>,
    /// Shared by a cluster's replicas: fetches of passage texts left before every fetch fails
    /// (as a store that cannot be read would make them).
    fetch_budget: Arc<AtomicI64>,
    /// A record deleted from this replica just before it answers a fetch of passage texts (as a
    /// delete landing between a search and its fetch would).
    delete_before_fetch: std::sync::Mutex<Option<RecordDeleteRequest>>,
    fetches: AtomicUsize,
}

impl Replica {
    fn up(&self) -> Res<()> {
        if self.down.load(Ordering::SeqCst) {
            return Err(Error::Unavailable("injected: the replica is down".into()));
        }
        Ok(())
    }

    async fn read(&self) -> Res<()> {
        self.up()?;
        self.searches.fetch_add(1, Ordering::SeqCst);
        let delay = self.search_delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl ShardApi for Replica {
    async fn info(&self) -> Res<ShardInfo> {
        self.up()?;
        self.inner.info().await
    }
    async fn term_stats(&self, request: TermStatsRequest) -> Res<ScopeStats> {
        self.up()?;
        self.inner.term_stats(request).await
    }
    async fn search_tools(&self, request: ShardSearchRequest) -> Res<ShardSearchResponse> {
        self.read().await?;
        self.inner.search_tools(request).await
    }
    async fn search_inline(&self, request: InlineSearchRequest) -> Res<ShardSearchResponse> {
        self.up()?;
        self.inner.search_inline(request).await
    }
    async fn upsert_tools(&self, request: ShardUpsertRequest) -> Res<ShardWriteResponse> {
        self.up()?;
        self.inner.upsert_tools(request).await
    }
    async fn delete_tools(&self, request: ShardDeleteRequest) -> Res<ShardWriteResponse> {
        self.up()?;
        self.inner.delete_tools(request).await
    }
    async fn get_tools(&self, request: GetToolsRequest) -> Res<GetToolsResponse> {
        self.up()?;
        self.inner.get_tools(request).await
    }
    async fn context_term_stats(&self, request: ContextStatsRequest) -> Res<TermStats> {
        self.up()?;
        self.inner.context_term_stats(request).await
    }
    async fn search_segments(&self, request: ContextSearchRequest) -> Res<ContextSearchResponse> {
        self.read().await?;
        let answer = self.inner.search_segments(request).await;
        if self.crash_after_search.swap(false, Ordering::SeqCst) {
            self.down.store(true, Ordering::SeqCst);
        }
        answer
    }
    async fn upsert_segments(&self, request: SegmentUpsertRequest) -> Res<ShardWriteResponse> {
        self.up()?;
        self.inner.upsert_segments(request).await
    }
    async fn delete_records(&self, request: RecordDeleteRequest) -> Res<ShardWriteResponse> {
        self.up()?;
        self.inner.delete_records(request).await
    }
    async fn fetch_segments(
        &self,
        request: agentsearch_common::shard::SegmentFetchRequest,
    ) -> Res<agentsearch_common::shard::SegmentFetchResponse> {
        self.up()?;
        if self.fetch_budget.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(Error::Unavailable(
                "injected: the store cannot be read".into(),
            ));
        }
        self.fetches.fetch_add(1, Ordering::SeqCst);
        let delete = self.delete_before_fetch.lock().unwrap().take();
        if let Some(delete) = delete {
            self.inner.delete_records(delete).await?;
        }
        self.inner.fetch_segments(request).await
    }
    async fn read_segments(
        &self,
        request: ReadSegmentsRequest,
    ) -> Res<Option<ReadSegmentsResponse>> {
        self.up()?;
        self.inner.read_segments(request).await
    }
    async fn export_tools(&self, request: ExportToolsRequest) -> Res<Vec<IndexedTool>> {
        self.up()?;
        self.inner.export_tools(request).await
    }
    async fn list_records(&self, request: ListRecordsRequest) -> Res<Vec<RecordVersion>> {
        self.up()?;
        self.inner.list_records(request).await
    }
    async fn export_records(&self, request: ExportRecordsRequest) -> Res<Vec<IndexedRecord>> {
        self.up()?;
        self.inner.export_records(request).await
    }
}

/// Three replicas over gRPC and a router with replication 2 and write quorum 1 over them.
struct Replicated {
    replicas: Vec<Arc<Replica>>,
    /// Shard id -> index in `replicas`.
    index: BTreeMap<String, usize>,
    router: Arc<Router>,
    grpc: SocketAddr,
    store: Arc<dyn MetadataStore>,
    served: Vec<Served>,
    _http: Served,
    dirs: Vec<tempfile::TempDir>,
    /// See [`Replica::crash_after_search`].
    crash: Arc<AtomicBool>,
    /// See [`Replica::fetch_budget`].
    fetch_budget: Arc<AtomicI64>,
}

impl Replicated {
    async fn start() -> Replicated {
        let (mut replicas, mut served, mut dirs, mut index) =
            (Vec::new(), Vec::new(), Vec::new(), BTreeMap::new());
        let crash = Arc::new(AtomicBool::new(false));
        let fetch_budget = Arc::new(AtomicI64::new(i64::MAX));
        for i in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let inner = Arc::new(
                LocalShard::open(dir.path(), Default::default(), Default::default()).unwrap(),
            );
            index.insert(inner.info().await.unwrap().shard_id, i);
            let replica = Arc::new(Replica {
                inner,
                down: AtomicBool::new(false),
                search_delay_ms: AtomicU64::new(0),
                searches: AtomicUsize::new(0),
                crash_after_search: crash.clone(),
                fetch_budget: fetch_budget.clone(),
                delete_before_fetch: Default::default(),
                fetches: AtomicUsize::new(0),
            });
            served.push(serve_shard(replica.clone()).await);
            replicas.push(replica);
            dirs.push(dir);
        }
        let (store, _schema) = pg_store().await;
        let store: Arc<dyn MetadataStore> = store;
        let addrs: Vec<SocketAddr> = served.iter().map(|s| s.addr).collect();
        let router = grpc_router(
            store.clone(),
            &addrs,
            RouterSettings {
                replication: 2,
                write_quorum: 1,
                hedge_after: Some(Duration::from_millis(25)),
                // Fixed fusion measures no coverage, so a context search defers every text: the
                // page's texts are all fetched after the search (what these tests follow).
                search: SearchConfig {
                    fusion: Fusion::Score,
                    ..settings().search
                },
                ..settings()
            },
        )
        .await;
        let (http, grpc) = start_router(router.clone(), Auth::default()).await;
        Replicated {
            replicas,
            index,
            router,
            grpc,
            store,
            served,
            _http: http,
            dirs,
            crash,
            fetch_budget,
        }
    }

    /// Replica `i` loses its disk: stopped, and started again at its address on an empty data
    /// dir (so with a new shard id).
    async fn lose_disk(&mut self, i: usize) {
        let old = self.served.remove(i);
        let addr = old.addr;
        old.stop().await;
        let dir = tempfile::tempdir().unwrap();
        let inner =
            Arc::new(LocalShard::open(dir.path(), Default::default(), Default::default()).unwrap());
        self.index.retain(|_, at| *at != i);
        self.index.insert(inner.info().await.unwrap().shard_id, i);
        let replica = Arc::new(Replica {
            inner,
            down: AtomicBool::new(false),
            search_delay_ms: AtomicU64::new(0),
            searches: AtomicUsize::new(0),
            crash_after_search: self.crash.clone(),
            fetch_budget: self.fetch_budget.clone(),
            delete_before_fetch: Default::default(),
            fetches: AtomicUsize::new(0),
        });
        self.replicas[i] = replica.clone();
        self.dirs[i] = dir;
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        self.served.insert(i, serve_shard_on(replica, listener));
    }

    /// The replicas of an integration, as indexes into `replicas`.
    async fn replicas_of(&self, integration: &str) -> Vec<usize> {
        let placements = self.store.placements(PROJECT).await.unwrap();
        let placement = placements
            .iter()
            .find(|p| p.integration == integration)
            .unwrap();
        placement
            .shard_ids
            .iter()
            .map(|id| self.index[id])
            .collect()
    }

    fn set_down(&self, i: usize, down: bool) {
        self.replicas[i].down.store(down, Ordering::SeqCst);
    }

    /// The stale marks of the test project: (kind, key, replica index).
    async fn stale(&self) -> Vec<(String, String, usize)> {
        self.store
            .stale_replicas(Some(PROJECT))
            .await
            .unwrap()
            .into_iter()
            .map(|m| (m.kind, m.key, self.index[&m.shard_id]))
            .collect()
    }

    async fn export(&self, i: usize, integration: &str) -> Vec<IndexedTool> {
        let mut tools = self.replicas[i]
            .inner
            .export_tools(ExportToolsRequest {
                project_id: PROJECT.into(),
                integration: integration.into(),
            })
            .await
            .unwrap();
        tools.sort_by(|a, b| a.record.name.cmp(&b.record.name));
        tools
    }
}

fn new_tool(integration: &str) -> ToolDefinition {
    ToolDefinition {
        name: "ACME_CHAT_PIN_ZEPHYRINE".into(),
        integration: integration.into(),
        description: "Pin the zephyrine announcement to the top of a chat room.".into(),
        ..fixture_catalog()[0].clone()
    }
}

async fn tool_found(grpc: SocketAddr, name: &str) -> bool {
    let response = search(grpc, search_request("pin the zephyrine announcement"))
        .await
        .unwrap();
    let usage = response.usage.clone().unwrap();
    assert!(!usage.partial, "{usage:?}");
    names(&response).iter().any(|n| n == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_spread_over_replicas_and_a_hung_replica_is_hedged() {
    let cluster = Replicated::start().await;
    let catalog = fixture_catalog();
    load_catalog(cluster.grpc, PROJECT, &catalog, 100).await;
    let query = &catalog[0].description;
    let baseline = names(&search(cluster.grpc, search_request(query)).await.unwrap());
    assert!(baseline.contains(&catalog[0].name));

    // Sequential searches spread over every replica (least loaded, ties rotated per request).
    for _ in 0..30 {
        search(cluster.grpc, search_request(query)).await.unwrap();
    }
    for (i, replica) in cluster.replicas.iter().enumerate() {
        assert!(
            replica.searches.load(Ordering::SeqCst) > 0,
            "replica {i} was never read"
        );
    }

    // One replica hangs far past the search deadline: every search is still whole, because its
    // parts are hedged to the other replica after 25 ms.
    cluster.replicas[0]
        .search_delay_ms
        .store(30_000, Ordering::SeqCst);
    for _ in 0..5 {
        let response = search(cluster.grpc, search_request(query)).await.unwrap();
        let usage = response.usage.clone().unwrap();
        assert!(!usage.partial, "{usage:?}");
        assert!(usage.failed_integrations.is_empty(), "{usage:?}");
        assert_eq!(names(&response), baseline);
    }
    // A replica that is down (its calls fail at once) is routed around the same way.
    cluster.replicas[0]
        .search_delay_ms
        .store(0, Ordering::SeqCst);
    cluster.set_down(1, true);
    for _ in 0..5 {
        let response = search(cluster.grpc, search_request(query)).await.unwrap();
        assert!(!response.usage.clone().unwrap().partial);
        assert_eq!(names(&response), baseline);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_write_with_a_replica_down_is_kept_and_the_replica_repaired() {
    let cluster = Replicated::start().await;
    load_catalog(cluster.grpc, PROJECT, &fixture_catalog(), 100).await;
    let integration = "acme_chat";
    let placed = cluster.replicas_of(integration).await;
    assert_eq!(placed.len(), 2);
    let (behind, healthy) = (placed[0], placed[1]);

    // One replica is down: the write is acknowledged by the other (quorum 1) and the one that
    // missed it is marked stale.
    cluster.set_down(behind, true);
    let tool = new_tool(integration);
    let outcome = cluster
        .router
        .upsert_tools(PROJECT, vec![tool.clone()], "w1")
        .await
        .unwrap();
    assert_eq!(outcome.upserted, 1);
    assert_eq!(
        cluster.stale().await,
        [(
            STALE_INTEGRATION.to_string(),
            integration.to_string(),
            behind
        )]
    );

    // Back up, but behind: it is never read for that integration, so every search finds the tool.
    cluster.set_down(behind, false);
    for _ in 0..12 {
        assert!(tool_found(cluster.grpc, &tool.name).await);
    }
    assert_ne!(
        cluster.export(behind, integration).await,
        cluster.export(healthy, integration).await
    );

    // A repair pass copies what it missed and clears the mark.
    let report = cluster.router.repair_stale().await.unwrap();
    assert_eq!((report.repaired, report.failed), (1, 0), "{report:?}");
    assert!(cluster.stale().await.is_empty());
    assert_eq!(
        cluster.export(behind, integration).await,
        cluster.export(healthy, integration).await
    );
    // The repaired replica alone now serves the tool.
    cluster.set_down(healthy, true);
    cluster.router.shards().refresh().await.unwrap();
    assert!(tool_found(cluster.grpc, &tool.name).await);

    // With every replica of the integration down, a write is refused, never acknowledged.
    cluster.set_down(behind, true);
    let err = cluster
        .router
        .upsert_tools(
            PROJECT,
            vec![ToolDefinition {
                description: "Pin a second zephyrine note.".into(),
                ..tool
            }],
            "w2",
        )
        .await
        .unwrap_err();
    assert!(err.code().retryable(), "{err}");
}

/// `n` records readable by anyone, with precomputed vectors.

async fn listed(replica: &Replica, sync_id: &str) -> Vec<RecordVersion> {
    replica
        .inner
        .list_records(ListRecordsRequest {
            project_id: PROJECT.into(),
            sync_id: sync_id.into(),
            after: String::new(),
            limit: MAX_LIST_RECORDS,
        })
        .await
        .unwrap()
}

/// Searches the sync and checks every passage found is of the `second` write and `doc-0` (deleted)
/// is not among them; returns how many records were found.
async fn second_hits(router: &Router, sync_id: &str) -> usize {
    let request = RawContextSearch {
        query: Some("second zephyrine budget".into()),
        sync_ids: Some(vec![sync_id.into()]),
        ..Default::default()
    }
    .validate(PROJECT.into())
    .unwrap();
    let response = router.search_context(request, "test", None).await.unwrap();
    assert!(response.usage.degraded.is_none(), "{:?}", response.usage);
    for result in &response.results {
        assert!(!result.id.ends_with(".doc-0"), "a deleted record was found");
        for segment in &result.segments {
            assert!(segment.text.contains("second"), "{}", segment.text);
        }
    }
    response.results.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_write_with_a_replica_down_is_kept_and_the_replica_repaired() {
    let cluster = Replicated::start().await;
    let router = &cluster.router;
    let dim = embedder().dim();
    let sync = new_sync(router).await;
    let placed: Vec<usize> = cluster
        .store
        .get_sync(PROJECT, &sync.id)
        .await
        .unwrap()
        .unwrap()
        .shard_ids
        .iter()
        .map(|id| cluster.index[id])
        .collect();
    assert_eq!(placed.len(), 2);
    let (behind, healthy) = (placed[0], placed[1]);
    router
        .upsert_records(PROJECT, &sync.id, anyone_records(20, dim, "first"), "w0")
        .await
        .unwrap();

    // Rewrites of the same records and new ones, while a replica is down.
    cluster.set_down(behind, true);
    router
        .upsert_records(PROJECT, &sync.id, anyone_records(30, dim, "second"), "w1")
        .await
        .unwrap();
    router
        .delete_records(PROJECT, &sync.id, vec!["doc-0".into()], "d1")
        .await
        .unwrap();
    assert_eq!(
        cluster.stale().await,
        [(STALE_SYNC.to_string(), sync.id.clone(), behind)]
    );
    cluster.set_down(behind, false);
    for _ in 0..8 {
        assert!(second_hits(router, &sync.id).await > 0);
    }

    let report = router.repair_stale().await.unwrap();
    assert_eq!((report.repaired, report.failed), (1, 0), "{report:?}");
    assert!(cluster.stale().await.is_empty());
    let level = listed(&cluster.replicas[healthy], &sync.id).await;
    assert_eq!(level.len(), 29);
    assert_eq!(listed(&cluster.replicas[behind], &sync.id).await, level);

    // The repaired replica alone serves the sync: passages, fields and ACLs came along.
    cluster.set_down(healthy, true);
    cluster.router.shards().refresh().await.unwrap();
    assert!(second_hits(router, &sync.id).await > 0);
    // A pass with nothing stale does nothing.
    let report = router.repair_stale().await.unwrap();
    assert_eq!(report, Default::default());
}

/// The texts of a page's passages are fetched after the search: from another replica when the
/// one that answered the search is gone by then, and a passage whose record was deleted in
/// between is counted unjoinable, its place on the page taken by the next record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passage_texts_are_fetched_after_the_search_from_a_live_replica() {
    let cluster = Replicated::start().await;
    let router = &cluster.router;
    let dim = embedder().dim();
    let sync = new_sync(router).await;
    router
        .upsert_records(PROJECT, &sync.id, anyone_records(12, dim, "first"), "w0")
        .await
        .unwrap();
    let search = || async {
        let request = RawContextSearch {
            query: Some("first zephyrine budget".into()),
            sync_ids: Some(vec![sync.id.clone()]),
            top_k: Some(agentsearch_router::json::Int::Exact(5)),
            ..Default::default()
        }
        .validate(PROJECT.into())
        .unwrap();
        router.search_context(request, "test", None).await.unwrap()
    };
    let texts_of = |response: &agentsearch_router::context::api::ContextSearchResponse| {
        response
            .results
            .iter()
            .map(|r| {
                assert_eq!(r.segments.len(), 1, "{r:?}");
                let segment = &r.segments[0];
                let number = r.id.rsplit_once(".doc-").unwrap().1;
                assert_eq!(
                    segment.text,
                    format!("Document {number} of the first zephyrine budget.")
                );
                r.id.clone()
            })
            .collect::<Vec<String>>()
    };
    let before = search().await;
    let page = texts_of(&before);
    assert_eq!(page.len(), 5);
    assert_eq!(before.usage.dropped.segments_unjoinable, 0);
    assert_eq!(before.usage.dropped.records_beyond_top_k, 7);

    // The replica that answers the search goes down before the texts are fetched.
    cluster.crash.store(true, Ordering::SeqCst);
    let rerouted = search().await;
    assert_eq!(texts_of(&rerouted), page);
    assert_eq!(rerouted.usage.dropped.segments_unjoinable, 0);
    let down: Vec<usize> = (0..3)
        .filter(|&i| cluster.replicas[i].down.load(Ordering::SeqCst))
        .collect();
    assert_eq!(down.len(), 1, "one replica answered the search");
    cluster.set_down(down[0], false);

    // The first record of the page is deleted between the search and the fetch.
    let first = page[0].rsplit_once('.').unwrap().1.to_string();
    for replica in &cluster.replicas {
        *replica.delete_before_fetch.lock().unwrap() = Some(RecordDeleteRequest {
            project_id: PROJECT.into(),
            sync_id: sync.id.clone(),
            record_ids: vec![first.clone()],
        });
    }
    let fetches: usize = cluster
        .replicas
        .iter()
        .map(|r| r.fetches.load(Ordering::SeqCst))
        .sum();
    let after = search().await;
    let fetched: usize = cluster
        .replicas
        .iter()
        .map(|r| r.fetches.load(Ordering::SeqCst))
        .sum();
    // One fetch for the page and one for the record taking its place (more if one was hedged).
    assert!(fetched - fetches >= 2, "{fetches} -> {fetched}");
    let ids = texts_of(&after);
    assert_eq!(
        ids.len(),
        5,
        "the next record takes the deleted one's place: {ids:?}"
    );
    assert_eq!(ids[..4], page[1..]);
    assert!(!ids.contains(&page[0]));
    assert_eq!(after.usage.dropped.segments_unjoinable, 1);
    assert_eq!(after.usage.dropped.records_beyond_top_k, 6);

    // The page's first record is deleted before the first fetch, which succeeds, and the fetch
    // for the record taking its place fails on every replica; then every fetch fails. Either way
    // the sync is not searchable, as if its search had failed: no record of it stays on the page,
    // its readable segments are counted from the store (which still holds all 12 records), and
    // nothing of it counts as unjoinable or beyond the page.
    for budget in [1, 0] {
        for replica in &cluster.replicas {
            *replica.delete_before_fetch.lock().unwrap() = Some(RecordDeleteRequest {
                project_id: PROJECT.into(),
                sync_id: sync.id.clone(),
                record_ids: vec![ids[0].rsplit_once('.').unwrap().1.to_string()],
            });
        }
        cluster.fetch_budget.store(budget, Ordering::SeqCst);
        let failed = search().await;
        assert!(failed.results.is_empty(), "{budget}: {:?}", failed.results);
        assert_eq!(failed.usage.dropped.segments_not_searchable, 12);
        assert_eq!(failed.usage.dropped.segments_unjoinable, 0);
        assert_eq!(failed.usage.dropped.records_beyond_top_k, 0);
        assert!(failed.usage.underfilled);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_with_a_replica_down_reaches_every_live_replica_of_each_integration() {
    let cluster = Replicated::start().await;
    let catalog = fixture_catalog();
    load_catalog(cluster.grpc, PROJECT, &catalog, 100).await;
    // The router knows replica 0 is down: its calls are not even tried.
    cluster.set_down(0, true);
    cluster.router.shards().refresh().await.unwrap();

    // One tool of every integration, deleted in one call.
    let mut victims: BTreeMap<String, String> = BTreeMap::new();
    for tool in &catalog {
        victims
            .entry(tool.integration.clone())
            .or_insert(tool.name.clone());
    }
    let outcome = cluster
        .router
        .delete_tools(PROJECT, victims.values().cloned().collect(), "d")
        .await
        .unwrap();
    assert_eq!(outcome.deleted as usize, victims.len());

    let mut expected_marks = Vec::new();
    for (integration, name) in &victims {
        for i in cluster.replicas_of(integration).await {
            if i == 0 {
                expected_marks.push((STALE_INTEGRATION.to_string(), integration.clone(), 0));
                continue;
            }
            let held = cluster.export(i, integration).await;
            assert!(
                held.iter().all(|t| &t.record.name != name),
                "replica {i} of {integration} still holds {name}"
            );
            assert_eq!(
                held.len(),
                catalog
                    .iter()
                    .filter(|t| &t.integration == integration)
                    .count()
                    - 1
            );
        }
    }
    assert_eq!(cluster.stale().await, expected_marks);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_back_without_its_data_gets_its_replicas_back_from_the_others() {
    let mut cluster = Replicated::start().await;
    let catalog = fixture_catalog();
    load_catalog(cluster.grpc, PROJECT, &catalog, 100).await;
    let router = cluster.router.clone();
    let dim = embedder().dim();
    let sync = new_sync(&router).await;
    router
        .upsert_records(PROJECT, &sync.id, anyone_records(20, dim, "second"), "w")
        .await
        .unwrap();
    router
        .delete_records(PROJECT, &sync.id, vec!["doc-0".into()], "d")
        .await
        .unwrap();
    let query = &catalog[0].description;
    let before = names(&search(cluster.grpc, search_request(query)).await.unwrap());
    let lost = cluster
        .index
        .iter()
        .find(|(_, i)| **i == 0)
        .map(|(id, _)| id.clone())
        .unwrap();
    let held = cluster.store.replicas_on(&lost).await.unwrap();
    assert!(!held.is_empty());

    // Replica 0 comes back at its address with an empty disk: a new id.
    cluster.lose_disk(0).await;
    router.shards().refresh().await.unwrap();
    assert_eq!(router.shards().replaced().len(), 1);

    // One pass moves its replicas to live shards and fills them from the survivors.
    let report = router.repair_stale().await.unwrap();
    assert_eq!(report.repaired, held.len(), "{report:?}");
    assert!(report.settled(), "{report:?}");
    assert!(cluster.stale().await.is_empty());
    assert!(cluster.store.replicas_on(&lost).await.unwrap().is_empty());
    assert!(router.shards().replaced().is_empty());
    for set in &held {
        let now: Vec<String> = if set.kind == STALE_INTEGRATION {
            cluster
                .store
                .placements(PROJECT)
                .await
                .unwrap()
                .into_iter()
                .find(|p| p.integration == set.key)
                .unwrap()
                .shard_ids
        } else {
            cluster
                .store
                .get_sync(PROJECT, &set.key)
                .await
                .unwrap()
                .unwrap()
                .shard_ids
        };
        assert_eq!(now.len(), 2, "{set:?} -> {now:?}");
        let copies: Vec<usize> = now.iter().map(|id| cluster.index[id]).collect();
        if set.kind == STALE_INTEGRATION {
            assert_eq!(
                cluster.export(copies[0], &set.key).await,
                cluster.export(copies[1], &set.key).await
            );
            assert!(!cluster.export(copies[0], &set.key).await.is_empty());
        } else {
            let first = listed(&cluster.replicas[copies[0]], &set.key).await;
            assert_eq!(first.len(), 19);
            assert_eq!(listed(&cluster.replicas[copies[1]], &set.key).await, first);
        }
    }
    // The same answers as before the loss.
    assert_eq!(
        names(&search(cluster.grpc, search_request(query)).await.unwrap()),
        before
    );
    assert!(second_hits(&router, &sync.id).await > 0);
}
