//! Load driver of agentsearch: generates a synthetic catalog of N tools over many integrations,
//! ingests it through the public catalog API, then fires tool searches over gRPC at a given
//! concurrency for a given time and reports QPS, latency percentiles and errors.
//!
//! Queries come from a pool (`--query-pool N`, repeated: the router's query-embedding cache is warm)
//! or are all distinct (`--query-pool 0`: every query is embedded, cold).

mod catalog;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentsearch_proto::v1 as pb;
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
    /// Bearer token, if the server requires one.
    #[arg(long, env = "AGENTSEARCH_TOKEN")]
    token: Option<String>,
    /// Also write the figures as one JSON object to this file.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let url = format!("http://{}", args.server);
    let channel = Endpoint::from_shared(url.clone())?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .with_context(|| format!("connecting to {url}"))?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let generator = catalog::Generator::new(&mut rng, args.integrations);
    let mut report = serde_json::json!({
        "tools": args.tools, "integrations": args.integrations, "concurrency": args.concurrency,
        "durationSecs": args.duration, "queryPool": args.query_pool, "topK": args.top_k,
    });

    if !args.skip_ingest {
        let tools = generator.tools(&mut rng, args.tools);
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
    let result = run(&args, channel, generator, queries).await?;
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
    if !result.steps.is_empty() {
        let mut steps = serde_json::Map::new();
        let mut line = String::from("server steps, median ms:");
        for (label, mut values) in result.steps {
            values.sort_by(f64::total_cmp);
            let median = values[values.len() / 2];
            line.push_str(&format!(" {label} {median:.3};"));
            steps.insert(label, serde_json::json!(median));
        }
        println!("{line}");
        report["serverStepMedianMs"] = serde_json::Value::Object(steps);
    }
    if let Some(path) = &args.out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(())
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
    secs: f64,
    histogram: Histogram<u64>,
    steps: Vec<(String, Vec<f64>)>,
}

async fn run(
    args: &Args,
    channel: Channel,
    generator: catalog::Generator,
    queries: Arc<Vec<String>>,
) -> anyhow::Result<RunResult> {
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let histogram = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(
        1, 60_000_000, 3,
    )?));
    let steps: Arc<Mutex<std::collections::BTreeMap<String, Vec<f64>>>> = Arc::default();
    let generator = Arc::new(generator);
    let mut tasks = Vec::new();
    for worker in 0..args.concurrency {
        let (args, channel, queries, generator) = (
            args.clone(),
            channel.clone(),
            queries.clone(),
            generator.clone(),
        );
        let (measuring, stop, ok, errors, histogram, steps) = (
            measuring.clone(),
            stop.clone(),
            ok.clone(),
            errors.clone(),
            histogram.clone(),
            steps.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut client = ToolSearchClient::new(channel);
            let mut rng =
                StdRng::seed_from_u64(args.seed ^ (worker as u64 + 1).wrapping_mul(0x9e37_79b9));
            let mut i = worker;
            while !stop.load(Ordering::Relaxed) {
                let query = if queries.is_empty() {
                    generator.query(&mut rng)
                } else {
                    queries[i % queries.len()].clone()
                };
                i += args.concurrency;
                let request = pb::SearchToolsRequest {
                    project_id: args.project.clone(),
                    query,
                    top_k: Some(args.top_k),
                    diagnostics: args.diagnostics,
                    ..Default::default()
                };
                let started = Instant::now();
                let result = client.search_tools(authorize(&args, request)).await;
                let took = started.elapsed();
                if !measuring.load(Ordering::Relaxed) {
                    continue;
                }
                match result {
                    Ok(response) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                        let _ = histogram
                            .lock()
                            .map(|mut h| h.record(took.as_micros() as u64));
                        if let Some(trace) = response.into_inner().trace
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
    Ok(RunResult {
        ok: ok.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        secs,
        histogram,
        steps,
    })
}
