//! A router's life in a cluster: it starts while a shard is down, readiness and gRPC health
//! follow what it can reach, searches stay answered (partial) when a shard dies, a shard that
//! comes up later joins, and a shutdown drains (not ready, still serving) before it stops.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentsearch_common::auth::Auth;
use agentsearch_embed::CachedEmbedder;
use agentsearch_router::{GrpcShard, Router, ShardClient, ShardSet};
use agentsearch_tests::*;
use tokio::net::TcpListener;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A loopback port nothing listens on (bound, then released).
async fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

async fn readyz(http: SocketAddr) -> (u16, serde_json::Value) {
    rest_json(http, "GET", "/readyz", None, "").await
}

/// Polls `/readyz` until its status is `want` (10 s at most); returns the last body.
async fn wait_ready(http: SocketAddr, want: u16) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    for _ in 0..100 {
        let (status, body) = readyz(http).await;
        if status == want {
            return body;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("/readyz never answered {want}; last: {last}");
}

async fn grpc_health(grpc: SocketAddr) -> ServingStatus {
    let mut client = HealthClient::new(channel(grpc).await);
    let answer = client
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    ServingStatus::try_from(answer.status).unwrap()
}

async fn wait_health(grpc: SocketAddr, want: ServingStatus) {
    for _ in 0..100 {
        if grpc_health(grpc).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("gRPC health never became {want:?}");
}

/// A shard serving on `addr` (a port chosen earlier) over `dir`.
async fn shard_at(addr: SocketAddr, dir: &std::path::Path) -> Served {
    let shard = Arc::new(
        agentsearch_shard::LocalShard::open(dir, Default::default(), Default::default()).unwrap(),
    );
    serve_shard_on(shard, TcpListener::bind(addr).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_starts_with_a_shard_down_and_readiness_follows_its_shards() {
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let (shard_a, _) = start_shard(dir_a.path()).await;
    let b_addr = free_port().await;

    // The router starts although shard B does not answer.
    let clients = [shard_a.addr, b_addr].map(|addr| {
        let client = GrpcShard::connect_lazy(&addr.to_string(), &Auth::default()).unwrap();
        (addr.to_string(), ShardClient::Grpc(client))
    });
    let shards = ShardSet::pending(clients);
    shards.refresh().await.unwrap();
    assert_eq!(shards.ids().len(), 1, "only shard A answered");
    tokio::spawn(
        shards
            .clone()
            .keep_fresh(Duration::from_millis(200), std::future::pending()),
    );
    let (store, schema) = pg_store().await;
    let router = Arc::new(Router::new(
        store,
        shards.clone(),
        Arc::new(CachedEmbedder::new(embedder(), 4 << 20)),
        settings(),
    ));
    let (http, grpc) = start_router(router, Auth::default()).await;

    // Nothing is placed on B, so the router is ready; the body says B is unreachable.
    let (status, body) = readyz(http.addr).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ready"], true);
    let b = &body["shards"][1];
    assert_eq!(b["address"], b_addr.to_string());
    assert_eq!(b["reachable"], false);
    assert!(b["shardId"].is_null());
    let (status, live) = rest_json(http.addr, "GET", "/livez", None, "").await;
    assert_eq!((status, &live["status"]), (200, &serde_json::json!("live")));
    wait_health(grpc, ServingStatus::Serving).await;

    // Writes and searches go to A alone meanwhile.
    let catalog = fixture_catalog();
    let acks = load_catalog(grpc, PROJECT, &catalog, 50).await;
    assert_eq!(
        acks.iter().map(|a| a.upserted).sum::<u32>(),
        catalog.len() as u32
    );
    let shard_a_id = shards.ids()[0].clone();
    let placed = pg_rows(&schema, "SELECT DISTINCT shard_id FROM placements").await;
    assert_eq!(placed, vec![vec![shard_a_id.clone()]]);

    // B comes up later and joins.
    let served_b = shard_at(b_addr, dir_b.path()).await;
    let body = wait_ready(http.addr, 200).await;
    let mut joined = false;
    for _ in 0..100 {
        if shards.ids().len() == 2 {
            joined = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(joined, "shard B never joined: {body}");
    let shard_b_id = shards
        .ids()
        .into_iter()
        .find(|id| *id != shard_a_id)
        .unwrap();

    // Another project with integrations on both shards: placement depends on the shards' random
    // ids, so projects are added until one has an integration on the shard that joined.
    let mut spread = None;
    for n in 0..8 {
        let project = format!("00000000-0000-4000-8000-0000000001{n:02x}");
        load_catalog(grpc, &project, &catalog, 50).await;
        let on_b = pg_rows(
            &schema,
            &format!(
                "SELECT integration FROM placements WHERE project_id = '{project}' AND shard_id = '{shard_b_id}'"
            ),
        )
        .await;
        if !on_b.is_empty() {
            spread = Some(project);
            break;
        }
    }
    let other_project =
        spread.expect("no integration of 8 projects was placed on the shard that joined");

    // B dies: readiness drops (its integrations have no reachable copy), gRPC health follows,
    // and searches still answer, naming what they could not search.
    served_b.stop().await;
    let body = wait_ready(http.addr, 503).await;
    assert_eq!(body["ready"], false);
    assert!(
        body["unreachableReplicaSets"].as_u64().unwrap() >= 1,
        "{body}"
    );
    wait_health(grpc, ServingStatus::NotServing).await;
    let mut request = search_request("send a message to a channel");
    request.project_id = other_project;
    let answer = search(grpc, request)
        .await
        .expect("a search never fails for a dead shard");
    assert!(
        !answer.errors.is_empty(),
        "the dead shard's part is reported"
    );
    // The first project lives on A alone: complete answers.
    let answer = search(grpc, search_request("send a message to a channel"))
        .await
        .unwrap();
    assert!(answer.errors.is_empty(), "{:?}", answer.errors);
    assert!(!answer.tools.is_empty());
    drop(shard_a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_reports_not_ready_keeps_serving_for_the_drain_then_stops() {
    let dir = tempfile::tempdir().unwrap();
    let (shard, _) = start_shard(dir.path()).await;
    let (store, _schema) = pg_store().await;
    let router = grpc_router(store, &[shard.addr], settings()).await;
    let router = Arc::new(
        Arc::try_unwrap(router)
            .ok()
            .expect("only this test holds the router")
            .with_drain(Duration::from_millis(1500)),
    );
    let (http, grpc) = start_router(router, Auth::default()).await;
    load_catalog(grpc, PROJECT, &fixture_catalog(), 50).await;
    wait_ready(http.addr, 200).await;
    wait_health(grpc, ServingStatus::Serving).await;

    let http_addr = http.addr;
    let stopping = tokio::spawn(http.stop());
    // Not ready at once, but still serving searches and health checks.
    let body = wait_ready(http_addr, 503).await;
    assert_eq!(body["draining"], true);
    assert_eq!(body["serving"], false);
    let (status, _) = rest_json(http_addr, "GET", "/readyz?allowPartial=true", None, "").await;
    assert_eq!(status, 503, "draining is not serving, partial or not");
    assert_eq!(grpc_health(grpc).await, ServingStatus::NotServing);
    let answer = search(grpc, search_request("send a message to a channel"))
        .await
        .expect("served while draining");
    assert!(!answer.tools.is_empty());
    // Then the listeners close.
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("the router stops after its drain period")
        .unwrap();
    assert!(tokio::net::TcpStream::connect(http_addr).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_shutdown_turns_health_not_serving_before_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let shard = Arc::new(
        agentsearch_shard::LocalShard::open(dir.path(), Default::default(), Default::default())
            .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(agentsearch_shard::serve_on_draining(
        shard.clone(),
        Auth::default(),
        listener,
        async {
            let _ = stopped.await;
        },
        Duration::from_millis(1500),
        agentsearch_proto::admission::Admission::new(64, Duration::from_millis(100)),
    ));
    wait_health(addr, ServingStatus::Serving).await;
    stop.send(()).unwrap();
    wait_health(addr, ServingStatus::NotServing).await;
    // Still answering its API while draining.
    let client = GrpcShard::connect_lazy(&addr.to_string(), &Auth::default()).unwrap();
    ShardClient::Grpc(client)
        .info("drain", Duration::from_secs(2))
        .await
        .expect("a draining shard still answers");
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the shard stops after its drain period")
        .unwrap()
        .unwrap();
    assert_eq!(shard.flush_now().await.unwrap(), 0, "nothing left to flush");
}
