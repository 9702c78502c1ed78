//! Crash drills on real processes: three `agentsearch shard` processes and an `agentsearch router`
//! (replication 2, write quorum 1) over gRPC on loopback, metadata in PostgreSQL. A shard is
//! killed with SIGKILL under a steady search load (no request may fail or come back partial) and
//! in the middle of a streamed catalog ingest (every acknowledged batch must be searchable once
//! the shard is back and repaired, also with another shard down), and one whose data dir is
//! deleted while it is down gets its replicas back from the others. PostgreSQL (a server of the
//! drill's own) is stopped under a search and write load: requests fail as `UNAVAILABLE`,
//! retryable, while it is down, and the router recovers by itself once it is back. Run with
//! `--nocapture` to see the figures of each phase (BENCHMARKS.md records them).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentsearch_common::tool::ToolDefinition;
use agentsearch_proto::v1 as pb;
use agentsearch_tests::procs::{PrivatePostgres, Process, free_addr, spawn, wait_listening};
use agentsearch_tests::*;
use tonic::transport::Channel;

struct ShardProc {
    addr: SocketAddr,
    dir: PathBuf,
    process: Option<Process>,
}

/// Shard processes and a router process over them.
struct Procs {
    dir: tempfile::TempDir,
    shards: Vec<ShardProc>,
    grpc: SocketAddr,
    http: SocketAddr,
    schema: String,
    _router: Process,
}

impl Procs {
    async fn start(shards: usize) -> Procs {
        Self::start_on(shards, &postgres_url()).await
    }

    /// [`Procs::start`] with the metadata in the PostgreSQL server at `postgres`.
    async fn start_on(shards: usize, postgres: &str) -> Procs {
        let dir = tempfile::tempdir().unwrap();
        let mut procs = Vec::new();
        for i in 0..shards {
            procs.push(ShardProc {
                addr: free_addr().await,
                dir: dir.path().join(format!("shard{i}")),
                process: None,
            });
        }
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        let (grpc, http) = (free_addr().await, free_addr().await);
        let env = vec![
            ("AGENTSEARCH_AUTH__TOKEN", SERVICE_TOKEN.to_string()),
            ("AGENTSEARCH_POSTGRES__SCHEMA", schema.clone()),
            (
                "AGENTSEARCH_EMBED__MODEL_DIR",
                model_dir().display().to_string(),
            ),
            ("AGENTSEARCH_SHARDS__REPLICATION", "2".into()),
            ("AGENTSEARCH_SHARDS__WRITE_QUORUM", "1".into()),
            ("AGENTSEARCH_SHARDS__REFRESH_SECS", "1".into()),
            ("AGENTSEARCH_SHARDS__REPAIR_SECS", "1".into()),
        ];
        let args = vec![
            "router".to_string(),
            "--grpc".into(),
            grpc.to_string(),
            "--http".into(),
            http.to_string(),
            "--shards".into(),
            procs
                .iter()
                .map(|s| s.addr.to_string())
                .collect::<Vec<_>>()
                .join(","),
            "--postgres".into(),
            postgres.to_string(),
        ];
        let router = spawn(
            &args,
            &env,
            std::fs::File::create(dir.path().join("router.log")).unwrap(),
        );
        let mut cluster = Procs {
            dir,
            shards: procs,
            grpc,
            http,
            schema,
            _router: router,
        };
        for i in 0..shards {
            cluster.start_shard(i).await;
        }
        wait_listening(grpc).await;
        cluster.wait_reachable(shards).await;
        cluster
    }

    /// Starts (or restarts) shard `i` on its address and data dir.
    async fn start_shard(&mut self, i: usize) {
        let shard = &mut self.shards[i];
        let args = vec![
            "shard".to_string(),
            "--grpc".into(),
            shard.addr.to_string(),
            "--data-dir".into(),
            shard.dir.display().to_string(),
        ];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("shard{i}.log")))
            .unwrap();
        shard.process = Some(spawn(
            &args,
            &[("AGENTSEARCH_AUTH__TOKEN", SERVICE_TOKEN.to_string())],
            log,
        ));
        wait_listening(shard.addr).await;
    }

    fn kill9(&mut self, i: usize) {
        if let Some(mut process) = self.shards[i].process.take() {
            process.kill9();
        }
    }

    /// Waits until the router's last probes reached `want` shards (30 s at most).
    async fn wait_reachable(&self, want: usize) {
        let started = Instant::now();
        loop {
            let (_, _, body) = http(self.http, "GET", "/readyz", &[], "").await;
            let readiness: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let reached = readiness["shards"]
                .as_array()
                .map_or(0, |s| s.iter().filter(|s| s["reachable"] == true).count());
            if reached == want {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the router did not reach {want} shards: {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until no replica is marked stale (60 s at most).
    async fn wait_repaired(&self) {
        let started = Instant::now();
        loop {
            let rows = pg_rows(&self.schema, "SELECT count(*)::text FROM stale_replicas").await;
            if rows[0][0] == "0" {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{} stale replicas were not repaired",
                rows[0][0]
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The id shard `i` answered the router with.
    async fn shard_id(&self, i: usize) -> String {
        let (_, _, body) = http(self.http, "GET", "/readyz", &[], "").await;
        let readiness: serde_json::Value = serde_json::from_str(&body).unwrap();
        readiness["shards"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["address"].as_str() == Some(&self.shards[i].addr.to_string()))
            .and_then(|s| s["shardId"].as_str())
            .unwrap()
            .to_string()
    }

    async fn stale_marks(&self) -> usize {
        pg_rows(&self.schema, "SELECT count(*)::text FROM stale_replicas").await[0][0]
            .parse()
            .unwrap()
    }
}

/// One search's outcome.
struct Sample {
    phase: usize,
    took: Duration,
    ok: bool,
    partial: bool,
}

const PHASES: [&str; 3] = ["all shards up", "one shard killed", "shard restarted"];

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn search_load(
    channel: Channel,
    queries: Arc<Vec<String>>,
    phase: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    seed: usize,
) -> Vec<Sample> {
    let mut client = pb::tool_search_client::ToolSearchClient::new(channel);
    let mut samples = Vec::new();
    let mut i = seed;
    while !stop.load(Ordering::SeqCst) {
        let query = &queries[i % queries.len()];
        i += 1;
        let at = phase.load(Ordering::SeqCst);
        let started = Instant::now();
        let answer = client
            .search_tools(bearer(search_request(query), Some(SERVICE_TOKEN)))
            .await;
        let took = started.elapsed();
        let (ok, partial) = match &answer {
            Ok(r) => (true, r.get_ref().usage.as_ref().is_some_and(|u| u.partial)),
            Err(status) => {
                eprintln!("drill: search failed: {status}");
                (false, false)
            }
        };
        samples.push(Sample {
            phase: at.max(phase.load(Ordering::SeqCst)),
            took,
            ok,
            partial,
        });
    }
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_replica_under_search_load_fails_no_request() {
    let mut cluster = Procs::start(3).await;
    let catalog = spread_catalog();
    let channel = channel(cluster.grpc).await;
    load_catalog_over(channel.clone(), PROJECT, &catalog, 50, Some(SERVICE_TOKEN)).await;
    let queries: Arc<Vec<String>> = Arc::new(
        catalog
            .iter()
            .step_by(3)
            .map(|t| t.description.clone())
            .collect(),
    );

    // Two clients search back to back through the phases.
    let phase = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..2)
        .map(|seed| {
            tokio::spawn(search_load(
                channel.clone(),
                queries.clone(),
                phase.clone(),
                stop.clone(),
                seed * 7,
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    phase.store(1, Ordering::SeqCst);
    cluster.kill9(0);
    tokio::time::sleep(Duration::from_secs(4)).await;
    cluster.start_shard(0).await;
    cluster.wait_reachable(3).await;
    phase.store(2, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    let mut samples = Vec::new();
    for client in clients {
        samples.extend(client.await.unwrap());
    }

    for (i, name) in PHASES.iter().enumerate() {
        let of_phase: Vec<&Sample> = samples.iter().filter(|s| s.phase == i).collect();
        let mut took: Vec<Duration> = of_phase.iter().map(|s| s.took).collect();
        took.sort();
        let failed = of_phase.iter().filter(|s| !s.ok).count();
        let partial = of_phase.iter().filter(|s| s.partial).count();
        println!(
            "drill: {name}: {} searches, {failed} failed, {partial} partial, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            of_phase.len(),
            percentile(&took, 0.5).as_secs_f64() * 1e3,
            percentile(&took, 0.99).as_secs_f64() * 1e3,
            took.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        );
        assert!(!of_phase.is_empty(), "no search in phase {name}");
        assert_eq!(failed, 0, "searches failed in phase {name}");
        assert_eq!(partial, 0, "partial answers in phase {name}");
    }
}

/// Tools of batch `b`: `per` tools of integration `drill_{b % 6}`, each with a word of its own.
fn batch(b: usize, per: usize) -> Vec<ToolDefinition> {
    (0..per)
        .map(|i| ToolDefinition {
            name: format!("DRILL_{b}_{i}"),
            integration: format!("drill_{}", b % 6),
            description: format!("Reconciles the wombat{b}x{i} ledger of the drill warehouse."),
            ..fixture_catalog()[0].clone()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_replica_mid_ingest_loses_no_acknowledged_batch() {
    let mut cluster = Procs::start(3).await;
    let channel = channel(cluster.grpc).await;

    // A streamed ingest, one batch at a time; shard 1 is killed while batch 10 is being written.
    let (send, receive) = tokio::sync::mpsc::channel::<pb::UpsertToolsRequest>(1);
    let mut acks = pb::tool_catalog_client::ToolCatalogClient::new(channel.clone())
        .upsert_tools(bearer(
            tokio_stream::wrappers::ReceiverStream::new(receive),
            Some(SERVICE_TOKEN),
        ))
        .await
        .unwrap()
        .into_inner();
    let batches = 24;
    let mut acknowledged = Vec::new();
    for b in 0..batches {
        let tools = batch(b, 4);
        send.send(pb::UpsertToolsRequest {
            project_id: PROJECT.into(),
            tools: tools.iter().map(to_proto_tool).collect(),
        })
        .await
        .unwrap();
        if b == 10 {
            cluster.kill9(1);
        }
        match acks.message().await {
            Ok(Some(_)) => acknowledged.extend(tools),
            Ok(None) => panic!("the ingest stream ended at batch {b}"),
            Err(status) => panic!("batch {b} was refused with a replica down: {status}"),
        }
    }
    drop(send);
    assert!(acks.message().await.unwrap().is_none());
    let marked = cluster.stale_marks().await;
    assert!(marked > 0, "no replica was marked stale");

    // The shard comes back on its data dir and is repaired from its peers.
    cluster.start_shard(1).await;
    cluster.wait_reachable(3).await;
    let started = Instant::now();
    cluster.wait_repaired().await;
    println!(
        "drill: {} acknowledged tools, {marked} stale replicas repaired in {:.1} s after the restart",
        acknowledged.len(),
        started.elapsed().as_secs_f64()
    );

    // Another shard dies: whatever it shared with the repaired one is now served by the repaired
    // one alone, and every acknowledged tool is still found.
    cluster.kill9(2);
    cluster.wait_reachable(2).await;
    let mut client = pb::tool_search_client::ToolSearchClient::new(channel);
    for tool in &acknowledged {
        let word = tool.description.split_whitespace().nth(2).unwrap();
        let mut request = search_request(&format!("{word} ledger"));
        request.top_k = Some(3);
        let response = client
            .search_tools(bearer(request, Some(SERVICE_TOKEN)))
            .await
            .unwrap()
            .into_inner();
        assert!(
            !response.usage.as_ref().unwrap().partial,
            "{:?}",
            response.usage
        );
        assert!(
            names(&response).contains(&tool.name),
            "{} (acknowledged) is not found: {:?}",
            tool.name,
            names(&response)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_whose_data_dir_is_deleted_gets_its_replicas_back() {
    let mut cluster = Procs::start(3).await;
    let catalog = spread_catalog();
    let channel = channel(cluster.grpc).await;
    load_catalog_over(channel.clone(), PROJECT, &catalog, 50, Some(SERVICE_TOKEN)).await;
    let mut client = pb::tool_search_client::ToolSearchClient::new(channel);
    let queries: Vec<String> = catalog
        .iter()
        .step_by(4)
        .map(|t| t.description.clone())
        .collect();
    let mut before = Vec::new();
    for query in &queries {
        let response = client
            .search_tools(bearer(search_request(query), Some(SERVICE_TOKEN)))
            .await
            .unwrap()
            .into_inner();
        before.push(names(&response));
    }
    let lost = cluster.shard_id(0).await;
    let schema = cluster.schema.clone();
    let held = |id: String| {
        let schema = schema.clone();
        async move {
            pg_rows(
                &schema,
                &format!("SELECT count(*)::text FROM placements WHERE shard_id = '{id}'"),
            )
            .await[0][0]
                .parse::<usize>()
                .unwrap()
        }
    };
    let placed = held(lost.clone()).await;
    assert!(placed > 0);

    // Killed, its data dir deleted, started again empty at its address.
    cluster.kill9(0);
    std::fs::remove_dir_all(&cluster.shards[0].dir).unwrap();
    cluster.start_shard(0).await;
    let started = Instant::now();
    loop {
        if held(lost.clone()).await == 0 && cluster.stale_marks().await == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the lost shard's replicas were not moved and repaired"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "drill: {placed} integration replicas of a deleted data dir moved and refilled in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let replicas = pg_rows(
        &cluster.schema,
        "SELECT count(*)::text FROM placements GROUP BY project_id, integration HAVING count(*) <> 2",
    )
    .await;
    assert!(
        replicas.is_empty(),
        "integrations without two replicas: {replicas:?}"
    );

    // The same answers as before the loss, with every shard up and with the one that lost its
    // data dir the only copy of what it now holds.
    for down in [None, Some(1), Some(2)] {
        if let Some(i) = down {
            if i == 2 {
                cluster.start_shard(1).await;
                cluster.wait_reachable(3).await;
            }
            cluster.kill9(i);
            cluster.wait_reachable(2).await;
        }
        for (query, expected) in queries.iter().zip(&before) {
            let response = client
                .search_tools(bearer(search_request(query), Some(SERVICE_TOKEN)))
                .await
                .unwrap()
                .into_inner();
            assert!(
                !response.usage.as_ref().unwrap().partial,
                "{:?}",
                response.usage
            );
            assert_eq!(
                &names(&response),
                expected,
                "{query} with shard {down:?} down"
            );
        }
    }
}

/// What one request of the PostgreSQL drill got: its phase (the later of its start's and its
/// end's), and `None` (answered whole) or the
/// gRPC code and whether the error envelope says retryable.
struct Outcome {
    phase: usize,
    failure: Option<(tonic::Code, bool)>,
}

fn outcome_of<T>(phase: usize, answer: &Result<tonic::Response<T>, tonic::Status>) -> Outcome {
    Outcome {
        phase,
        failure: answer.as_ref().err().map(|status| {
            let error = agentsearch_proto::error_codec::error_from_status(status);
            (status.code(), error.code().retryable())
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load_fails_retryably_and_recovers_by_itself() {
    let pg = PrivatePostgres::start().await;
    let cluster = Procs::start_on(2, &pg.url()).await;
    let catalog = spread_catalog();
    let channel = channel(cluster.grpc).await;
    load_catalog_over(channel.clone(), PROJECT, &catalog, 100, Some(SERVICE_TOKEN)).await;
    let queries: Arc<Vec<String>> = Arc::new(
        catalog
            .iter()
            .step_by(12)
            .map(|t| t.description.clone())
            .collect(),
    );
    // Phases: 0 up, 1 PostgreSQL down, 2 back.
    let phase = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let searcher = {
        let (channel, queries, phase, stop) = (
            channel.clone(),
            queries.clone(),
            phase.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut client = pb::tool_search_client::ToolSearchClient::new(channel);
            let mut out = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let at = phase.load(Ordering::SeqCst);
                let request = search_request(&queries[i % queries.len()]);
                let answer = client
                    .search_tools(bearer(request, Some(SERVICE_TOKEN)))
                    .await;
                out.push(outcome_of(at.max(phase.load(Ordering::SeqCst)), &answer));
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            out
        })
    };
    let writer = {
        let (channel, phase, stop) = (channel.clone(), phase.clone(), stop.clone());
        tokio::spawn(async move {
            let mut client = pb::tool_catalog_client::ToolCatalogClient::new(channel);
            let (mut out, mut acked) = (Vec::new(), Vec::new());
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let at = phase.load(Ordering::SeqCst);
                let tool = ToolDefinition {
                    name: format!("ACME_WRITTEN_WHILE_THE_STORE_RESTARTS_{i}"),
                    description: format!("File the zephyrine expense report number {i}."),
                    ..fixture_catalog()[0].clone()
                };
                let request = pb::UpsertToolsRequest {
                    project_id: PROJECT.into(),
                    tools: vec![to_proto_tool(&tool)],
                };
                let answer = match client
                    .upsert_tools(bearer(tokio_stream::iter([request]), Some(SERVICE_TOKEN)))
                    .await
                {
                    Ok(mut acks) => match acks.get_mut().message().await {
                        Ok(_) => Ok(tonic::Response::new(())),
                        Err(status) => Err(status),
                    },
                    Err(status) => Err(status),
                };
                if answer.is_ok() {
                    acked.push(tool.name.clone());
                }
                out.push(outcome_of(at.max(phase.load(Ordering::SeqCst)), &answer));
                i += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (out, acked)
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    phase.store(1, Ordering::SeqCst);
    pg.stop_server();
    // Longer than the router's metadata cache (5 s): searches then run on the placements last
    // read.
    tokio::time::sleep(Duration::from_secs(8)).await;
    pg.start_server();
    let restarted = Instant::now();
    phase.store(2, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(6)).await;
    stop.store(true, Ordering::SeqCst);
    let searches = searcher.await.unwrap();
    let (writes, acked) = writer.await.unwrap();

    for (what, outcomes) in [("searches", &searches), ("writes", &writes)] {
        for (p, name) in ["up", "PostgreSQL down", "PostgreSQL back"]
            .iter()
            .enumerate()
        {
            let of: Vec<&Outcome> = outcomes.iter().filter(|o| o.phase == p).collect();
            let failed: Vec<(tonic::Code, bool)> = of.iter().filter_map(|o| o.failure).collect();
            eprintln!(
                "drill: {what}, {name}: {} requests, {} failed ({} UNAVAILABLE and retryable)",
                of.len(),
                failed.len(),
                failed
                    .iter()
                    .filter(|f| **f == (tonic::Code::Unavailable, true))
                    .count()
            );
            // Every failure, in every phase, is UNAVAILABLE and retryable.
            for f in &failed {
                assert_eq!(
                    *f,
                    (tonic::Code::Unavailable, true),
                    "{what} in phase {name}"
                );
            }
            if p == 0 {
                assert!(failed.is_empty(), "{what} failed before the outage");
            }
        }
        // Recovered by itself: the last requests of the last phase all succeed.
        let back: Vec<&Outcome> = outcomes.iter().filter(|o| o.phase == 2).collect();
        let tail = &back[back.len().saturating_sub(back.len() / 2)..];
        assert!(
            !tail.is_empty() && tail.iter().all(|o| o.failure.is_none()),
            "{what} did not recover"
        );
    }
    // Writes need the store: they failed while it was down.
    assert!(
        writes.iter().any(|o| o.phase == 1 && o.failure.is_some()),
        "no write failed while PostgreSQL was down"
    );
    let first_ok = writes
        .iter()
        .position(|o| o.phase == 2 && o.failure.is_none())
        .unwrap();
    eprintln!(
        "drill: first write acknowledged {} writes after the restart ({:.1?} of phase 2 elapsed at the end)",
        first_ok - writes.iter().position(|o| o.phase == 2).unwrap(),
        restarted.elapsed()
    );
    // Every acknowledged write is there.
    for name in &acked {
        let (status, _, body) = http(
            cluster.http,
            "GET",
            &format!("/api/tools/projects/{PROJECT}/tools/{name}"),
            &[("authorization", &format!("Bearer {SERVICE_TOKEN}"))],
            "",
        )
        .await;
        assert_eq!(status, 200, "{name}: {body}");
    }
    eprintln!("drill: {} acknowledged writes all found", acked.len());
}
