//! Load driver of agentsearch. `--scenario tools` (default) generates a synthetic catalog of N
//! tools over many integrations, ingests it through the public catalog API, then fires tool
//! searches over gRPC at a given concurrency for a given time and reports QPS, latency percentiles
//! and errors. `--scenario context` does the same for context search: N segments over several
//! syncs with precomputed vectors, ACLs with realistic spreads, searches as random users.
//!
//! Queries come from a pool (`--query-pool N`, repeated: the router's query-embedding cache is warm)
//! or are all distinct (`--query-pool 0`: every query is embedded, cold).

mod catalog;
mod content;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::context_search_client::ContextSearchClient;
use agentsearch_proto::v1::context_sync_client::ContextSyncClient;
use agentsearch_proto::v1::tool_catalog_client::ToolCatalogClient;
use agentsearch_proto::v1::tool_search_client::ToolSearchClient;
use anyhow::Context;
use clap::Parser;
use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::sync::Mutex;
use tonic::transport::{Channel, Endpoint};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "agentsearch-load",
    about = "Load driver: synthetic catalog, concurrent gRPC tool search"
)]
struct Args {
    /// Router gRPC address.
    #[arg(long, default_value = "127.0.0.1:50051")]
    server: String,
    /// Project to load and search (a UUID).
    #[arg(long, default_value = "00000000-0000-4000-8000-000000000100")]
    project: String,
    /// Tools in the synthetic catalog.
    #[arg(long, default_value_t = 10_000)]
    tools: usize,
    /// Integrations the tools are spread over.
    #[arg(long, default_value_t = 200)]
    integrations: usize,
    /// Tools per upsert batch.
    #[arg(long, default_value_t = 500)]
    batch_size: usize,
    /// Do not ingest (the catalog is already loaded).
    #[arg(long)]
    skip_ingest: bool,
    /// Concurrent clients.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 20)]
    duration: u64,
    /// Unmeasured seconds before measuring.
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Distinct queries cycled through (0: every query is new, so every query is embedded).
    #[arg(long, default_value_t = 200)]
    query_pool: usize,
    /// topK of every search.
    #[arg(long, default_value_t = 8)]
    top_k: u32,
    /// Ask for traces and report the median of each step.
    #[arg(long)]
    diagnostics: bool,
    /// Seed of the catalog and query generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Seed of the queries generated while measuring with `--query-pool 0`; by default a new one
    /// each run, so a run never replays queries an earlier run had the server embed (and cache).
    /// Printed, so a run can be repeated.
    #[arg(long)]
    query_seed: Option<u64>,
    /// A worker whose search is refused (RESOURCE_EXHAUSTED) waits the `retryAfterMs` the server
    /// gave before its next search, as a well-behaved client does; without it, it retries at once.
    #[arg(long)]
    honor_retry_after: bool,
    /// Bearer token, if the server requires one.
    #[arg(long, env = "AGENTSEARCH_TOKEN")]
    token: Option<String>,
    /// Also write the figures as one JSON object to this file.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Write the synthetic catalog (`tools.jsonl`) and the query pool (`queries.jsonl`) of the tools
    /// scenario to this directory and exit without connecting: what a peer indexes and asks, the
    /// same documents and queries as a run with the same `--seed`, `--tools`, `--integrations`
    /// and `--query-pool`.
    #[arg(long)]
    export: Option<std::path::PathBuf>,
    /// tools (tool search over a synthetic catalog) or context (context search over synthetic
    /// synced content).
    #[arg(long, default_value = "tools")]
    scenario: String,
    /// Context scenario: segments in all.
    #[arg(long, default_value_t = 1_000_000)]
    segments: usize,
    /// Context scenario: syncs the segments are spread over.
    #[arg(long, default_value_t = 10)]
    syncs: usize,
    /// Context scenario: segments per record.
    #[arg(long, default_value_t = 5)]
    record_segments: usize,
    /// Context scenario: users (identities searched as).
    #[arg(long, default_value_t = 5000)]
    users: usize,
    /// Context scenario: groups per sync.
    #[arg(long, default_value_t = 200)]
    groups: usize,
    /// Context scenario: records per upsert batch.
    #[arg(long, default_value_t = 200)]
    record_batch: usize,
    /// Context scenario: the model id precomputed vectors claim (the server's).
    #[arg(long, default_value = "all-MiniLM-L6-v2")]
    model: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(dir) = &args.export {
        return export(&args, dir);
    }
    let url = format!("http://{}", args.server);
    let channel = Endpoint::from_shared(url.clone())?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .with_context(|| format!("connecting to {url}"))?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    if args.scenario == "context" {
        return context_scenario(&args, channel, &mut rng).await;
    }
    anyhow::ensure!(
        args.scenario == "tools",
        "--scenario: expected tools or context"
    );
    let generator = catalog::Generator::new(&mut rng, args.integrations);
    let mut report = serde_json::json!({
        "tools": args.tools, "integrations": args.integrations, "concurrency": args.concurrency,
        "durationSecs": args.duration, "queryPool": args.query_pool, "topK": args.top_k,
    });

    // Generated whether ingested or not, so the query pool below is the same either way.
    let tools = generator.tools(&mut rng, args.tools);
    if !args.skip_ingest {
        let (written, unchanged, secs) = ingest(&args, channel.clone(), tools).await?;
        let rate = written as f64 / secs;
        println!(
            "ingest: {written} tools written, {unchanged} unchanged in {secs:.1} s ({rate:.0} tools/s written)"
        );
        report["ingest"] = serde_json::json!({"written": written, "unchanged": unchanged, "secs": secs, "toolsPerSec": rate});
    }

    let queries: Arc<Vec<String>> = Arc::new(if args.query_pool > 0 {
        (0..args.query_pool)
            .map(|_| generator.query(&mut rng))
            .collect()
    } else {
        Vec::new()
    });
    let call: Call = {
        let args = args.clone();
        Arc::new(move |channel, query, _| {
            let request = authorize(
                &args,
                pb::SearchToolsRequest {
                    project_id: args.project.clone(),
                    query,
                    top_k: Some(args.top_k),
                    diagnostics: args.diagnostics,
                    ..Default::default()
                },
            );
            Box::pin(async move {
                let mut client = ToolSearchClient::new(channel);
                client
                    .search_tools(request)
                    .await
                    .map(|r| r.into_inner().trace)
            })
        })
    };
    let generator = Arc::new(generator);
    let make: QueryGenerator = Arc::new(move |rng| generator.query(rng));
    let result = run(&args, channel, make, queries, call).await?;
    report_search(&args, &result, &mut report)
}

/// The tools scenario's catalog and query pool as JSON lines (see `--export`).
fn export(args: &Args, dir: &std::path::Path) -> anyhow::Result<()> {
    use std::io::Write;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let generator = catalog::Generator::new(&mut rng, args.integrations);
    let tools = generator.tools(&mut rng, args.tools);
    let queries: Vec<String> = (0..args.query_pool)
        .map(|_| generator.query(&mut rng))
        .collect();
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: &str, lines: Vec<serde_json::Value>| -> anyhow::Result<()> {
        let path = dir.join(name);
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?,
        );
        for line in lines {
            serde_json::to_writer(&mut out, &line)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(())
    };
    let tool_lines = tools
        .iter()
        .map(|t| {
            let parameters: serde_json::Value = serde_json::from_str(&t.parameters_json)?;
            Ok(serde_json::json!({
                "name": t.name, "integration": t.integration, "category": t.category,
                "sideEffect": t.side_effect, "description": t.description, "parameters": parameters,
            }))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    write("tools.jsonl", tool_lines)?;
    write(
        "queries.jsonl",
        queries
            .iter()
            .map(|q| serde_json::json!({ "query": q }))
            .collect(),
    )?;
    println!(
        "exported {} tools over {} integrations and {} queries to {}",
        tools.len(),
        args.integrations,
        queries.len(),
        dir.display()
    );
    Ok(())
}

fn report_search(
    args: &Args,
    result: &RunResult,
    report: &mut serde_json::Value,
) -> anyhow::Result<()> {
    println!(
        "search: {} ok, {} errors in {:.1} s -> {:.1} QPS; latency ms p50 {:.2} p95 {:.2} p99 {:.2} max {:.2}",
        result.ok,
        result.errors,
        result.secs,
        result.ok as f64 / result.secs,
        ms(result.histogram.value_at_quantile(0.50)),
        ms(result.histogram.value_at_quantile(0.95)),
        ms(result.histogram.value_at_quantile(0.99)),
        ms(result.histogram.max()),
    );
    report["search"] = serde_json::json!({
        "ok": result.ok, "errors": result.errors, "secs": result.secs, "qps": result.ok as f64 / result.secs,
        "p50Ms": ms(result.histogram.value_at_quantile(0.50)), "p95Ms": ms(result.histogram.value_at_quantile(0.95)),
        "p99Ms": ms(result.histogram.value_at_quantile(0.99)), "maxMs": ms(result.histogram.max()),
    });
    if result.shed > 0 {
        let h = &result.shed_histogram;
        println!(
            "shed: {} refused (RESOURCE_EXHAUSTED), {:.1}/s; refusal latency ms p50 {:.2} p99 {:.2} max {:.2}",
            result.shed,
            result.shed as f64 / result.secs,
            ms(h.value_at_quantile(0.50)),
            ms(h.value_at_quantile(0.99)),
            ms(h.max()),
        );
        report["shed"] = serde_json::json!({
            "refused": result.shed, "perSec": result.shed as f64 / result.secs,
            "p50Ms": ms(h.value_at_quantile(0.50)), "p99Ms": ms(h.value_at_quantile(0.99)), "maxMs": ms(h.max()),
        });
    }
    // The router traces a query embedding as `embed` when the model ran and `embed_cached` when
    // the query-embedding cache answered.
    let count = |label: &str| {
        result
            .steps
            .iter()
            .find(|(l, _)| l == label)
            .map_or(0, |(_, v)| v.len())
    };
    let (embedded, cached) = (count("embed"), count("embed_cached"));
    if embedded + cached > 0 {
        println!("query embeddings: {embedded} computed, {cached} from the cache");
        report["queryEmbeddings"] = serde_json::json!({"computed": embedded, "cached": cached});
    }
    if !result.steps.is_empty() {
        let mut steps = serde_json::Map::new();
        let mut line = String::from("server steps, median ms:");
        for (label, values) in &result.steps {
            let mut values = values.clone();
            values.sort_by(f64::total_cmp);
            let median = values[values.len() / 2];
            line.push_str(&format!(" {label} {median:.3};"));
            steps.insert(label.clone(), serde_json::json!(median));
        }
        println!("{line}");
        report["serverStepMedianMs"] = serde_json::Value::Object(steps);
    }
    if let Some(path) = &args.out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(())
}

/// The id of the scenario's sync number `n`.
fn sync_id(n: usize) -> String {
    format!("00000000-0000-4000-8000-{:012x}", 0xc0_0000 + n)
}

async fn context_scenario(args: &Args, channel: Channel, rng: &mut StdRng) -> anyhow::Result<()> {
    use rand::Rng;
    let content = Arc::new(content::Content::new(rng, args.users, args.groups));
    let mut report = serde_json::json!({
        "scenario": "context", "segments": args.segments, "syncs": args.syncs,
        "segmentsPerRecord": args.record_segments, "users": args.users, "groupsPerSync": args.groups,
        "concurrency": args.concurrency, "durationSecs": args.duration, "queryPool": args.query_pool,
        "topK": args.top_k,
    });
    if !args.skip_ingest {
        let started = Instant::now();
        let mut written = 0u64;
        let per_sync = args.segments.div_ceil(args.syncs.max(1));
        let mut sync_client =
            ContextSyncClient::new(channel.clone()).max_encoding_message_size(64 << 20);
        for s in 0..args.syncs {
            let id = sync_id(s);
            sync_client
                .create_sync(authorize(
                    args,
                    pb::CreateSyncRequest {
                        project_id: args.project.clone(),
                        source: if s % 2 == 0 {
                            "googledrive"
                        } else {
                            "sharepoint"
                        }
                        .into(),
                        owner: "admin@corp.example".into(),
                        sync_id: Some(id.clone()),
                        fields: Vec::new(),
                    },
                ))
                .await?;
            sync_client
                .put_groups(authorize(
                    args,
                    pb::PutGroupsRequest {
                        project_id: args.project.clone(),
                        sync_id: id.clone(),
                        groups: content.groups(rng),
                    },
                ))
                .await?;
            // Generate batches on a blocking thread while earlier ones are sent.
            let records = per_sync.div_ceil(args.record_segments.max(1));
            let (tx, rx) = tokio::sync::mpsc::channel::<pb::UpsertRecordsRequest>(4);
            let (content, project, sync, batch, spr, seed) = (
                content.clone(),
                args.project.clone(),
                id.clone(),
                args.record_batch.max(1),
                args.record_segments.max(1),
                rng.random::<u64>(),
            );
            let model = args.model.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut n = 0;
                while n < records {
                    let chunk: Vec<pb::RecordInput> = (n..(n + batch).min(records))
                        .map(|i| content.record(&mut rng, i, spr))
                        .collect();
                    n += chunk.len();
                    let message = pb::UpsertRecordsRequest {
                        project_id: project.clone(),
                        sync_id: sync.clone(),
                        records: chunk,
                        embedding: Some(pb::EmbeddingSpec {
                            model: model.clone(),
                            dimension: content::DIM as u32,
                        }),
                    };
                    if tx.blocking_send(message).is_err() {
                        return;
                    }
                }
            });
            let mut acks = sync_client
                .upsert_records(authorize(
                    args,
                    tokio_stream::wrappers::ReceiverStream::new(rx),
                ))
                .await?
                .into_inner();
            while let Some(ack) = acks.message().await? {
                written += ack.segments;
                eprint!(
                    "\ringest: sync {}/{}, {written} segments, {:.0} segments/s",
                    s + 1,
                    args.syncs,
                    written as f64 / started.elapsed().as_secs_f64()
                );
            }
        }
        eprintln!();
        let secs = started.elapsed().as_secs_f64();
        println!(
            "ingest: {written} segments in {secs:.1} s ({:.0} segments/s, precomputed vectors)",
            written as f64 / secs
        );
        report["ingest"] = serde_json::json!({"segments": written, "secs": secs, "segmentsPerSec": written as f64 / secs});
    }
    let queries: Arc<Vec<String>> = Arc::new(if args.query_pool > 0 {
        (0..args.query_pool).map(|_| content.query(rng)).collect()
    } else {
        Vec::new()
    });
    let call: Call = {
        let (args, content) = (args.clone(), content.clone());
        Arc::new(move |channel, query, i| {
            // Users in a fixed pseudo-random order, so every run searches as the same people.
            let user = content.users[(i * 7919) % content.users.len()].clone();
            let request = authorize(
                &args,
                pb::ContextSearchRequest {
                    project_id: args.project.clone(),
                    query,
                    top_k: Some(args.top_k),
                    identity: Some(user),
                    diagnostics: args.diagnostics,
                    ..Default::default()
                },
            );
            Box::pin(async move {
                let mut client = ContextSearchClient::new(channel);
                client.search(request).await.map(|r| r.into_inner().trace)
            })
        })
    };
    let make: QueryGenerator = {
        let content = content.clone();
        Arc::new(move |rng| content.query(rng))
    };
    let result = run(args, channel, make, queries, call).await?;
    report_search(args, &result, &mut report)
}

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

fn authorize<T>(args: &Args, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = &args.token
        && let Ok(v) = format!("Bearer {token}").parse()
    {
        request.metadata_mut().insert("authorization", v);
    }
    request
}

async fn ingest(
    args: &Args,
    channel: Channel,
    tools: Vec<pb::ToolDefinition>,
) -> anyhow::Result<(u64, u64, f64)> {
    let mut client = ToolCatalogClient::new(channel).max_encoding_message_size(32 << 20);
    let batches: Vec<pb::UpsertToolsRequest> = tools
        .chunks(args.batch_size)
        .map(|c| pb::UpsertToolsRequest {
            project_id: args.project.clone(),
            tools: c.to_vec(),
        })
        .collect();
    let started = Instant::now();
    let mut acks = client
        .upsert_tools(authorize(args, tokio_stream::iter(batches)))
        .await?
        .into_inner();
    let (mut written, mut unchanged) = (0u64, 0u64);
    while let Some(ack) = acks.message().await? {
        written += u64::from(ack.upserted);
        unchanged += u64::from(ack.unchanged);
        eprint!("\ringest: {} / {}", ack.total, tools.len());
    }
    eprintln!();
    Ok((written, unchanged, started.elapsed().as_secs_f64()))
}

struct RunResult {
    ok: u64,
    errors: u64,
    /// Searches refused with RESOURCE_EXHAUSTED (load shedding), and how fast the refusals came.
    shed: u64,
    shed_histogram: Histogram<u64>,
    secs: f64,
    histogram: Histogram<u64>,
    steps: Vec<(String, Vec<f64>)>,
}

/// One search: (channel, query, query number) -> the server's trace, if any.
type Call = Arc<
    dyn Fn(
            Channel,
            String,
            usize,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = Result<Option<pb::Trace>, tonic::Status>> + Send>,
        > + Send
        + Sync,
>;
/// Makes a fresh query (when the pool is empty).
type QueryGenerator = Arc<dyn Fn(&mut StdRng) -> String + Send + Sync>;

async fn run(
    args: &Args,
    channel: Channel,
    generator: QueryGenerator,
    queries: Arc<Vec<String>>,
    call: Call,
) -> anyhow::Result<RunResult> {
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let histogram = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(
        1, 60_000_000, 3,
    )?));
    let shed = Arc::new(AtomicU64::new(0));
    let shed_histogram = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(
        1, 60_000_000, 3,
    )?));
    let steps: Arc<Mutex<std::collections::BTreeMap<String, Vec<f64>>>> = Arc::default();
    let mut tasks = Vec::new();
    let query_seed = args.query_seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    if queries.is_empty() {
        println!("queries: generated while measuring, --query-seed {query_seed}");
    }
    for worker in 0..args.concurrency {
        let (args, channel, queries, generator, call) = (
            args.clone(),
            channel.clone(),
            queries.clone(),
            generator.clone(),
            call.clone(),
        );
        let (measuring, stop, ok, errors, histogram, steps) = (
            measuring.clone(),
            stop.clone(),
            ok.clone(),
            errors.clone(),
            histogram.clone(),
            steps.clone(),
        );
        let (shed, shed_histogram) = (shed.clone(), shed_histogram.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(
                args.seed ^ query_seed ^ (worker as u64 + 1).wrapping_mul(0x9e37_79b9),
            );
            let mut i = worker;
            while !stop.load(Ordering::Relaxed) {
                let query = if queries.is_empty() {
                    generator(&mut rng)
                } else {
                    queries[i % queries.len()].clone()
                };
                let started = Instant::now();
                let result = call(channel.clone(), query, i).await;
                i += args.concurrency;
                let took = started.elapsed();
                if !measuring.load(Ordering::Relaxed) {
                    continue;
                }
                match result {
                    Ok(trace) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                        let _ = histogram
                            .lock()
                            .map(|mut h| h.record(took.as_micros() as u64));
                        if let Some(trace) = trace
                            && let Ok(mut steps) = steps.lock()
                        {
                            for s in trace.steps {
                                let label = match s.label.strip_prefix("shard:") {
                                    Some(rest) => match rest.rsplit_once(':') {
                                        Some((_, part)) => format!("shard_{part}"),
                                        None => "shard".to_string(),
                                    },
                                    None => s.label,
                                };
                                steps.entry(label).or_default().push(s.duration_ms);
                            }
                        }
                    }
                    Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                        shed.fetch_add(1, Ordering::Relaxed);
                        let _ = shed_histogram
                            .lock()
                            .map(|mut h| h.record(took.as_micros() as u64));
                        if args.honor_retry_after
                            && let agentsearch_common::Error::RateLimited { retry_after } =
                                agentsearch_proto::error_from_status(&status)
                        {
                            tokio::time::sleep(retry_after).await;
                        }
                    }
                    Err(status) => {
                        if errors.fetch_add(1, Ordering::Relaxed) < 5 {
                            eprintln!("search failed: {status}");
                        }
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.duration)).await;
    measuring.store(false, Ordering::Relaxed);
    let secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await?;
    }
    let histogram = histogram
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    let steps = steps
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone()
        .into_iter()
        .collect();
    let shed_histogram = shed_histogram
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    Ok(RunResult {
        ok: ok.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        shed: shed.load(Ordering::Relaxed),
        shed_histogram,
        secs,
        histogram,
        steps,
    })
}
