//! Membership changes over real gRPC shards and PostgreSQL: a shard joins a running cluster and a
//! rebalance gives it its share under a search and write load, a shard is drained empty, a shard
//! whose data is lost with replication 1 is replaced and its keys reported and written again,
//! and the operator routes under `/admin`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agentsearch_common::tool::ToolDefinition;
use agentsearch_router::auth::Auth;
use agentsearch_router::context::api::CreateSync;
use agentsearch_router::{GrpcShard, Router, RouterSettings, ShardClient};
use agentsearch_shard::LocalShard;
use agentsearch_store::MetadataStore;
use agentsearch_tests::*;

/// Metadata cached this long: moves wait twice as long (plus a second) between steps.
const CACHE: Duration = Duration::from_millis(200);

fn membership_settings(replication: usize, write_quorum: usize) -> RouterSettings {
    RouterSettings {
        replication,
        write_quorum,
        metadata_cache: CACHE,
        ..settings()
    }
}

fn connect(addr: &str) -> agentsearch_common::Result<ShardClient> {
    GrpcShard::connect_lazy(addr, &Auth::default()).map(ShardClient::Grpc)
}

/// Repair passes until every move is done and every replica healthy.
async fn settle(router: &Router) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let report = router.repair_stale().await.unwrap();
        if report.settled() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "moves did not settle: {report:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn shard_id(shard: &LocalShard) -> String {
    use agentsearch_common::shard::ShardApi;
    shard.info().await.unwrap().shard_id
}

fn queries(catalog: &[ToolDefinition]) -> Vec<String> {
    catalog
        .iter()
        .step_by(7)
        .take(8)
        .map(|t| t.description.clone())
        .collect()
}

async fn answers(grpc: SocketAddr, queries: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for q in queries {
        let response = search(grpc, search_request(q)).await.unwrap();
        let usage = response.usage.clone().unwrap();
        assert!(!usage.partial, "{usage:?}");
        out.push(names(&response));
    }
    out
}

fn written_tool(i: usize) -> ToolDefinition {
    let base = fixture_catalog()[i % 5].clone();
    ToolDefinition {
        name: format!("ACME_WRITTEN_DURING_THE_MOVE_{i}"),
        description: format!("Archive the quarterly zephyrine ledger number {i}."),
        ..base
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_joining_shard_takes_its_share_under_load_and_a_drained_shard_empties() {
    // Two shards, every key on both (replication 2, majority quorum: both must acknowledge).
    let mut dirs = Vec::new();
    let mut served = Vec::new();
    let mut local = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let (s, shard) = start_shard(dir.path()).await;
        dirs.push(dir);
        served.push(s);
        local.push(shard);
    }
    let (store, _schema) = pg_store().await;
    let store: Arc<dyn MetadataStore> = store;
    let addrs: Vec<SocketAddr> = served.iter().map(|s| s.addr).collect();
    let router = grpc_router(store.clone(), &addrs, membership_settings(2, 2)).await;
    let (_http, grpc) = start_router(router.clone(), Auth::default()).await;
    let catalog = spread_catalog();
    load_catalog(grpc, PROJECT, &catalog, 100).await;
    let queries = queries(&catalog);

    // A steady load: searches from two clients, and a writer adding one tool at a time.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed, partial) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let latencies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut load = Vec::new();
    for client in 0..2 {
        let (stop, ok, failed, partial, queries, latencies) = (
            stop.clone(),
            ok.clone(),
            failed.clone(),
            partial.clone(),
            queries.clone(),
            latencies.clone(),
        );
        load.push(tokio::spawn(async move {
            let mut i = client;
            while !stop.load(Ordering::SeqCst) {
                let started = std::time::Instant::now();
                let answer = search(grpc, search_request(&queries[i % queries.len()])).await;
                latencies.lock().unwrap().push(started.elapsed());
                match answer {
                    Ok(response) if response.usage.clone().unwrap().partial => {
                        partial.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(_) => {
                        ok.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(status) => {
                        eprintln!("search failed: {status:?}");
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
                i += 1;
            }
        }));
    }
    let writes_failed = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (stop, router, writes_failed) = (stop.clone(), router.clone(), writes_failed.clone());
        tokio::spawn(async move {
            let mut written = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let tool = written_tool(i);
                match router
                    .upsert_tools(PROJECT, vec![tool.clone()], &format!("w{i}"))
                    .await
                {
                    Ok(outcome) if outcome.upserted == 1 => written.push(tool),
                    other => {
                        eprintln!("write failed: {other:?}");
                        writes_failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            written
        })
    };

    // A third shard joins the running router, and a rebalance gives it its share.
    let moving = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let (s, shard) = start_shard(dir.path()).await;
    dirs.push(dir);
    let mut addresses: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    addresses.push(s.addr.to_string());
    served.push(s);
    local.push(shard);
    router.shards().set_addresses(&addresses, &connect);
    router.shards().refresh().await.unwrap();
    let ids = [
        shard_id(&local[0]).await,
        shard_id(&local[1]).await,
        shard_id(&local[2]).await,
    ];
    assert_eq!(router.shards().reachable_ids().len(), 3);
    let planned = router.rebalance(false).await.unwrap();
    // 24 integrations on both shards: 48 replicas, 16 per shard once even.
    assert_eq!(planned.len(), 16, "{planned:?}");
    assert!(planned.iter().all(|m| m.to == ids[2]));
    settle(&router).await;
    let loads: Vec<usize> = {
        let mut out = Vec::new();
        for id in &ids {
            out.push(store.replicas_on(id).await.unwrap().len());
        }
        out
    };
    let total: usize = loads.iter().sum();
    assert!(
        loads.iter().all(|n| n.abs_diff(total / 3) <= 1),
        "{loads:?}"
    );

    // Shard 0 is drained: every replica it holds moves to the others.
    let view = router.drain_shard(&ids[0], false).await.unwrap();
    assert!(view.replicas_left > 0);
    settle(&router).await;
    assert!(store.replicas_on(&ids[0]).await.unwrap().is_empty());
    let moving = moving.elapsed();

    stop.store(true, Ordering::SeqCst);
    for task in load {
        task.await.unwrap();
    }
    let written = writer.await.unwrap();
    let (ok, failed, partial) = (
        ok.load(Ordering::SeqCst),
        failed.load(Ordering::SeqCst),
        partial.load(Ordering::SeqCst),
    );
    let mut latencies = latencies.lock().unwrap().clone();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    eprintln!(
        "join, rebalance and drain in {moving:.1?}: searches {ok} whole, {partial} partial, \
         {failed} failed, p50 {:.2?}, p99 {:.2?}, max {:.2?}; {} writes acknowledged",
        at(0.5),
        at(0.99),
        at(1.0),
        written.len()
    );
    assert_eq!((failed, partial), (0, 0));
    assert_eq!(writes_failed.load(Ordering::SeqCst), 0);
    assert!(ok > 0 && !written.is_empty());

    // Every key has its two replicas, healthy, none on the drained shard; its copies are gone.
    let placements = router.placements_view().await.unwrap();
    assert!(placements.moves.is_empty());
    for key in &placements.keys {
        assert_eq!(key.healthy, 2, "{key:?}");
        assert!(key.replicas.iter().all(|r| r.shard_id != ids[0]));
    }
    let drained = placements
        .shards
        .iter()
        .find(|s| s.shard_id == ids[0])
        .unwrap();
    assert_eq!((drained.state.as_str(), drained.replicas), ("drained", 0));
    use agentsearch_common::shard::ShardApi;
    assert_eq!(local[0].info().await.unwrap().tools, 0);

    // Answers equal a single shard's holding the same catalog and writes, with the drained shard
    // gone.
    let reference = Cluster::start(1).await;
    load_catalog(reference.grpc, PROJECT, &catalog, 100).await;
    load_catalog(reference.grpc, PROJECT, &written, 100).await;
    let mut all_queries = queries.clone();
    all_queries.push("archive the quarterly zephyrine ledger".into());
    let expected = answers(reference.grpc, &all_queries).await;
    assert_eq!(answers(grpc, &all_queries).await, expected);
    served.remove(0).stop().await;
    router.shards().refresh().await.unwrap();
    assert_eq!(answers(grpc, &all_queries).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_shard_with_one_replica_is_replaced_reported_and_written_again() {
    let mut cluster = Cluster::start_with(2, membership_settings(1, 1)).await;
    let router = cluster.router.clone();
    let store = router.store().clone();
    let catalog = spread_catalog();
    load_catalog(cluster.grpc, PROJECT, &catalog, 100).await;
    let dim = embedder().dim();
    let mut syncs = Vec::new();
    for i in 0..6 {
        let sync = router
            .create_sync(CreateSync {
                project_id: PROJECT.into(),
                id: uuid::Uuid::new_v4().to_string(),
                source: "googledrive".into(),
                owner: format!("owner{i}@example.com"),
                fields: Vec::new(),
            })
            .await
            .unwrap();
        router
            .upsert_records(PROJECT, &sync.id, anyone_records(5, dim, "first"), "w")
            .await
            .unwrap();
        syncs.push(sync.id);
    }
    let lost_id = shard_id(&cluster.local[0]).await;
    let survivor = shard_id(&cluster.local[1]).await;
    let on_lost = store.replicas_on(&lost_id).await.unwrap();
    assert!(!on_lost.is_empty());
    let lost_integrations: Vec<String> = on_lost
        .iter()
        .filter(|s| s.kind == "integration")
        .map(|s| s.key.clone())
        .collect();
    let lost_syncs: Vec<String> = on_lost
        .iter()
        .filter(|s| s.kind == "sync")
        .map(|s| s.key.clone())
        .collect();

    // Shard 0 is gone for good; the operator declares its data lost.
    let grpc = cluster.grpc;
    cluster.shards.remove(0).stop().await;
    router.shards().refresh().await.unwrap();
    router.drain_shard(&lost_id, true).await.unwrap();
    settle(&router).await;

    // Its keys are placed on the survivor, empty, and reported lost.
    assert!(store.replicas_on(&lost_id).await.unwrap().is_empty());
    let view = router.placements_view().await.unwrap();
    let mut reported: Vec<(String, String)> = view
        .lost
        .iter()
        .map(|l| (l.kind.clone(), l.key.clone()))
        .collect();
    reported.sort();
    let mut expected: Vec<(String, String)> = on_lost
        .iter()
        .map(|s| (s.kind.clone(), s.key.clone()))
        .collect();
    expected.sort();
    assert_eq!(reported, expected);
    assert!(view.lost.iter().all(|l| l.shard_id == lost_id));
    let shard = view.shards.iter().find(|s| s.shard_id == lost_id).unwrap();
    assert!(shard.lost && shard.state == "drained", "{shard:?}");
    for key in &view.keys {
        assert_eq!(key.replicas.len(), 1);
        assert_eq!(key.replicas[0].shard_id, survivor);
    }
    // Searches are whole again (the lost keys answer, empty), not partial.
    let queries = queries(&catalog);
    for q in &queries {
        let response = search(grpc, search_request(q)).await.unwrap();
        assert!(!response.usage.clone().unwrap().partial);
    }

    // Writing the same content again stores it (the ledger forgot it), and only that.
    let outcome = router
        .upsert_tools(PROJECT, catalog.clone(), "again")
        .await
        .unwrap();
    let lost_tools = catalog
        .iter()
        .filter(|t| lost_integrations.contains(&t.integration))
        .count();
    assert_eq!(
        (outcome.upserted as usize, outcome.unchanged as usize),
        (lost_tools, catalog.len() - lost_tools)
    );
    for sync_id in &syncs {
        let outcome = router
            .upsert_records(PROJECT, sync_id, anyone_records(5, dim, "first"), "again")
            .await
            .unwrap();
        let lost = lost_syncs.contains(sync_id);
        assert_eq!(
            (outcome.upserted, outcome.unchanged),
            if lost { (5, 0) } else { (0, 5) },
            "{sync_id}"
        );
    }
    let reference = Cluster::start(1).await;
    load_catalog(reference.grpc, PROJECT, &catalog, 100).await;
    assert_eq!(
        answers(grpc, &queries).await,
        answers(reference.grpc, &queries).await
    );
    assert_eq!(router.clear_lost().await.unwrap(), on_lost.len() as u64);
    assert!(router.placements_view().await.unwrap().lost.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_need_the_service_token_and_name_bad_fields() {
    let cluster = Cluster::start_custom(
        2,
        membership_settings(1, 1),
        StoreKind::Postgres,
        keyed_auth(false),
    )
    .await;
    load_catalog_over(
        channel(cluster.grpc).await,
        PROJECT,
        &fixture_catalog(),
        100,
        Some(SERVICE_TOKEN),
    )
    .await;
    let http = cluster.http.addr;
    let (status, body) = rest_json(http, "GET", "/admin/placements", None, "").await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = rest_json(
        http,
        "GET",
        "/admin/placements",
        Some(&project_token("u")),
        "",
    )
    .await;
    assert_eq!(status, 401, "a user's token is not an operator's: {body}");
    let (status, body) = rest_json(http, "GET", "/admin/placements", Some(SERVICE_TOKEN), "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["shards"].as_array().unwrap().len(), 2);
    assert!(body["shards"][0]["state"] == "serving");
    let integrations: std::collections::BTreeSet<String> = fixture_catalog()
        .into_iter()
        .map(|t| t.integration)
        .collect();
    assert_eq!(body["keys"].as_array().unwrap().len(), integrations.len());
    assert_eq!(body["moves"], serde_json::json!([]));

    let post =
        |body: &'static str| rest_json(http, "POST", "/admin/drains", Some(SERVICE_TOKEN), body);
    let (status, body) = post("{}").await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["details"][0]["field"], "shardId", "{body}");
    let (status, body) = post(r#"{"shardId": "s", "lost": "yes"}"#).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["details"][0]["field"], "lost", "{body}");
    let (status, body) = post(r#"{"shardId": "s", "force": true}"#).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["details"][0]["field"], "force", "{body}");
    let (status, body) = post(r#"{"shardId": "no-such-shard"}"#).await;
    assert_eq!(status, 404, "{body}");

    let (status, body) = rest_json(
        http,
        "POST",
        "/admin/rebalance",
        Some(SERVICE_TOKEN),
        r#"{"dryRun": true}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["dryRun"], true);
    let (status, body) = rest_json(
        http,
        "DELETE",
        "/admin/drains/no-such-shard",
        Some(SERVICE_TOKEN),
        "",
    )
    .await;
    assert_eq!(status, 404, "{body}");
    // A drain of a real shard, then undone.
    let id = body_shard(&cluster.router).await;
    let (status, body) = rest_json(
        http,
        "POST",
        "/admin/drains",
        Some(SERVICE_TOKEN),
        &format!(r#"{{"shardId": "{id}"}}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["shardId"], id.as_str());
    let (status, _) = rest_json(
        http,
        "DELETE",
        &format!("/admin/drains/{id}"),
        Some(SERVICE_TOKEN),
        "",
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = rest_json(http, "DELETE", "/admin/lost", Some(SERVICE_TOKEN), "").await;
    assert_eq!((status, body["cleared"].as_u64()), (200, Some(0)));
}

async fn body_shard(router: &Router) -> String {
    router.shards().ids()[0].clone()
}

/// The `address`, `reachable` pairs a router's readiness lists, sorted.
async fn ready_shards(http_addr: SocketAddr) -> Vec<(String, bool)> {
    let (_, _, body) = http(http_addr, "GET", "/readyz", &[], "").await;
    let readiness: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let mut out: Vec<(String, bool)> = readiness["shards"]
        .as_array()
        .map(|shards| {
            shards
                .iter()
                .map(|s| {
                    (
                        s["address"].as_str().unwrap_or_default().to_string(),
                        s["reachable"] == true,
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Waits until the router's readiness lists exactly `want` (30 s at most).
async fn wait_shards(http_addr: SocketAddr, want: &[(String, bool)]) {
    let mut want = want.to_vec();
    want.sort();
    let started = std::time::Instant::now();
    loop {
        let seen = ready_shards(http_addr).await;
        if seen == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the router lists {seen:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the router's readiness lists `address` as `reachable` or not (30 s at most),
/// whatever else it lists (a name may resolve to more addresses than the test listens on).
async fn wait_listed(http_addr: SocketAddr, address: &str, reachable: bool) {
    let started = std::time::Instant::now();
    loop {
        let seen = ready_shards(http_addr).await;
        if seen.iter().any(|(a, r)| a == address && *r == reachable) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the router lists {seen:?}, not {address} reachable={reachable}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A router process started with `--config file` (its log in `dir`), once its REST port answers:
/// the process and that port's address.
async fn router_process(
    file: &std::path::Path,
    dir: &std::path::Path,
) -> (procs::Process, SocketAddr) {
    let (grpc, http_addr) = (procs::free_addr().await, procs::free_addr().await);
    let env = [
        ("AGENTSEARCH_AUTH__TOKEN", SERVICE_TOKEN.to_string()),
        (
            "AGENTSEARCH_POSTGRES__SCHEMA",
            format!("t_{}", uuid::Uuid::new_v4().simple()),
        ),
        ("AGENTSEARCH_POSTGRES__URL", postgres_url()),
        (
            "AGENTSEARCH_EMBED__MODEL_DIR",
            model_dir().display().to_string(),
        ),
        ("AGENTSEARCH_SHARDS__REFRESH_SECS", "1".into()),
    ];
    let args = vec![
        "--config".to_string(),
        file.display().to_string(),
        "router".into(),
        "--grpc".into(),
        grpc.to_string(),
        "--http".into(),
        http_addr.to_string(),
    ];
    let log = std::fs::File::create(dir.join("router.log")).unwrap();
    let process = procs::spawn(&args, &env, log);
    procs::wait_listening(http_addr).await;
    (process, http_addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_reads_its_shard_list_again_from_its_configuration_file() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _a) = start_shard(&dir.path().join("a")).await;
    let (second, _b) = start_shard(&dir.path().join("b")).await;
    let (a, b) = (first.addr.to_string(), second.addr.to_string());
    let file = dir.path().join("agentsearch.toml");
    let write = |shards: &[&str]| {
        let list: Vec<String> = shards.iter().map(|s| format!("{s:?}")).collect();
        std::fs::write(&file, format!("[shards]\nremote = [{}]\n", list.join(", "))).unwrap();
    };
    write(&[&a]);
    let (_router, http_addr) = router_process(&file, dir.path()).await;
    wait_shards(http_addr, &[(a.clone(), true)]).await;

    // A shard added to the file joins; one taken out leaves; a file that no longer parses
    // changes nothing.
    write(&[&a, &b]);
    wait_shards(http_addr, &[(a.clone(), true), (b.clone(), true)]).await;
    write(&[&b]);
    wait_shards(http_addr, &[(b.clone(), true)]).await;
    std::fs::write(&file, "[shards\nremote = ").unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(ready_shards(http_addr).await, vec![(b.clone(), true)]);

    // The operator's commands against this router.
    let server = format!("http://{http_addr}");
    let shown = admin(&server, &["placements"]).await;
    assert!(shown.status.success(), "{shown:?}");
    let text = String::from_utf8_lossy(&shown.stdout).to_string();
    assert!(text.starts_with("SHARD "), "{text}");
    assert!(text.contains(&b) && !text.contains(&a), "{text}");
    assert!(
        text.contains("0 integrations and syncs, 0 with a replica that is not healthy"),
        "{text}"
    );
    let json = admin(&server, &["placements", "--json"]).await;
    let view: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(view["shards"].as_array().unwrap().len(), 1, "{view}");
    let planned = admin(&server, &["rebalance", "--dry-run"]).await;
    assert_eq!(
        String::from_utf8_lossy(&planned.stdout),
        "0 moves planned (dry run)\n"
    );
    let refused = admin(&server, &["drain", "no-such-shard"]).await;
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("404") && message.contains("no-such-shard"),
        "{message}"
    );
}

/// Runs `agentsearch admin ARGS` against the router at `server` with the service token.
async fn admin(server: &str, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(procs::binary());
    command
        .arg("admin")
        .args(["--http", server])
        .args(args)
        .env("AGENTSEARCH_TOKEN", SERVICE_TOKEN)
        .env_remove("AGENTSEARCH_HTTP");
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_on_shards_dns_starts_before_its_shard_and_takes_it_in_once_it_answers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agentsearch.toml");
    // The name resolves before anything listens at the address it gives.
    let addr = procs::free_addr().await;
    std::fs::write(
        &file,
        format!("[shards]\ndns = \"localhost:{}\"\n", addr.port()),
    )
    .unwrap();
    let (_router, http_addr) = router_process(&file, dir.path()).await;
    wait_listed(http_addr, &addr.to_string(), false).await;

    let shard = Arc::new(
        LocalShard::open(
            &dir.path().join("s"),
            Default::default(),
            Default::default(),
        )
        .unwrap(),
    );
    let _served = serve_shard_on(shard, tokio::net::TcpListener::bind(addr).await.unwrap());
    wait_listed(http_addr, &addr.to_string(), true).await;
}
