//! `agentsearch eval`: ingests a BEIR-format dataset into a fresh project and runs every query
//! through the production search path (gRPC), once per retrieval mode, reporting nDCG@10,
//! Recall@1/5/10, MRR@10, queries/s and latency percentiles.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentsearch_common::config::Config;
use agentsearch_common::tool::identifier_pieces;
use agentsearch_eval::beir::{Dataset, Doc};
use agentsearch_eval::metrics::{self, Summary};
use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::context_search_client::ContextSearchClient;
use agentsearch_proto::v1::context_sync_client::ContextSyncClient;
use agentsearch_proto::v1::tool_catalog_client::ToolCatalogClient;
use agentsearch_proto::v1::tool_search_client::ToolSearchClient;
use agentsearch_router::auth::Auth;
use anyhow::Context;
use clap::Args;
use serde_json::json;
use tonic::transport::{Channel, Endpoint};

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// Folder in the BEIR layout (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).
    #[arg(long)]
    pub dataset: PathBuf,
    #[arg(long, default_value = "test")]
    pub split: String,
    /// tools (the corpus is a tool catalog) or passages (documents ingested as records of one
    /// sync and searched with context search; a ranking is the top 10 records).
    #[arg(long, default_value = "tools")]
    pub kind: String,
    /// Retrieval modes to score, comma separated: lexical, dense, hybrid (the production ranking).
    #[arg(long, value_delimiter = ',', default_value = "lexical,dense,hybrid")]
    pub modes: Vec<String>,
    /// Router gRPC address; ignored with --embedded.
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub server: String,
    /// Run an in-process server on a temporary data dir instead of connecting to one.
    #[arg(long)]
    pub embedded: bool,
    /// Score at most this many queries: an evenly spaced sample of the split (positions
    /// `floor(i * total / N)` in file order), since files are often grouped by topic or label.
    #[arg(long)]
    pub max_queries: Option<usize>,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write every query's top 50 per mode, with each retriever's rank and score (the
    /// diagnostics `explain`; for passages, each record's relevancy in a single-retriever mode),
    /// as JSON lines to this file, for offline analysis of fusion. Latency figures then include
    /// the larger responses.
    #[arg(long)]
    pub dump: Option<PathBuf>,
    /// Bearer token, if the server requires one.
    #[arg(long, env = "AGENTSEARCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Weaken one retriever reproducibly: `lexical=LEVEL` replaces each word of the text BM25
    /// searches with a random corpus word with probability LEVEL; `dense=LEVEL` does the same to
    /// the text the embedding model reads; `dense-rotate=LEVEL` rotates the query vector LEVEL x
    /// 90 degrees towards a random direction. The other retriever sees the query unchanged (the
    /// query vector is computed here and sent as `queryEmbedding`).
    #[arg(long)]
    pub degrade: Option<agentsearch_eval::degrade::Degrade>,
    /// Load into and search this project (a UUID) instead of a fresh one. With `--server`, a
    /// second run finds the corpus already ingested (unchanged documents are skipped without
    /// embedding), so ranking settings can be compared by restarting only the server.
    #[arg(long)]
    pub project: Option<String>,
    /// Learning from feedback: score the hybrid ranking on one half of the queries (fixed by
    /// query id), send the other half's searches with the judged tools (`RecordToolFeedback`) or
    /// the judged records among the results (`RecordContextFeedback`) as feedback, wait for the
    /// project's ranking model to be refit, and score the first half again
    /// (`hybrid+feedback`). Use a fresh project: the model stays with it.
    #[arg(long)]
    pub feedback_half: bool,
}

const MODES: [&str; 3] = ["lexical", "dense", "hybrid"];

pub async fn run(args: EvalArgs, config: Config) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.kind == "tools" || args.kind == "passages",
        "--kind {}: expected tools or passages",
        args.kind
    );
    for mode in &args.modes {
        anyhow::ensure!(
            MODES.contains(&mode.as_str()),
            "--modes: unknown mode `{mode}` (lexical, dense, hybrid)"
        );
    }
    let dataset = Dataset::load(&args.dataset, &args.split).context("loading the dataset")?;
    let queries = sample(&dataset.queries, args.max_queries);
    anyhow::ensure!(
        !queries.is_empty(),
        "the split `{}` has no judged queries",
        args.split
    );
    let passages = args.kind == "passages";

    let (tools, doc_of) = if passages {
        (Vec::new(), HashMap::new())
    } else {
        catalog(&dataset.corpus)
    };
    eprintln!(
        "{}: {} documents, {} queries ({} split){}",
        dataset.name,
        dataset.corpus.len(),
        queries.len(),
        args.split,
        if queries.len() < dataset.queries.len() {
            format!(" of {}", dataset.queries.len())
        } else {
            String::new()
        }
    );

    // A degraded run computes the query vectors here, unless every mode is lexical.
    let vectors_here = args.degrade.is_some() && args.modes.iter().any(|m| m != "lexical");
    let embedder = if args.embedded || vectors_here {
        Some(crate::node::load_embedder(&config)?)
    } else {
        None
    };
    let inputs = match args.degrade {
        Some(degrade) => {
            let embedder = embedder.clone().filter(|_| vectors_here);
            degraded_inputs(degrade, &dataset, &queries, embedder).await?
        }
        None => queries.iter().map(|q| QueryInput::plain(q)).collect(),
    };
    // With --feedback-half, scoring runs on the held-out half and the other half is fed.
    let (queries, inputs, fed): (Vec<_>, Vec<_>, Vec<_>) = if args.feedback_half {
        let (held, fed): (Vec<_>, Vec<_>) = queries
            .into_iter()
            .zip(inputs)
            .partition(|(q, _)| !agentsearch_eval::degrade::in_first_half(&q.id));
        let (queries, inputs) = held.into_iter().unzip();
        (queries, inputs, fed)
    } else {
        (queries, inputs, Vec::new())
    };

    let _server_dir;
    let _server;
    let addr = if let (true, Some(embedder)) = (args.embedded, embedder) {
        let dir = tempfile::tempdir().context("temporary data dir")?;
        let mut config = config;
        config.data_dir = dir.path().to_path_buf();
        let router = crate::node::embedded_router(&config, embedder).await?;
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = grpc.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(agentsearch_router::serve_on(
            router,
            Auth::default(),
            http,
            grpc,
            async {
                let _ = stopped.await;
            },
        ));
        _server = Some((stop, handle));
        _server_dir = Some(dir);
        addr.to_string()
    } else {
        _server = None;
        _server_dir = None;
        args.server.clone()
    };
    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("connecting to {addr}"))?;

    let project = match &args.project {
        Some(p) => uuid::Uuid::try_parse(p)
            .with_context(|| format!("--project: `{p}` is not a UUID"))?
            .hyphenated()
            .to_string(),
        None => uuid::Uuid::new_v4().hyphenated().to_string(),
    };
    let started = Instant::now();
    if passages {
        ingest_passages(&args, channel.clone(), &project, &dataset.corpus).await?;
    } else {
        ingest(&args, channel.clone(), &project, tools).await?;
    }
    eprintln!(
        "ingested in {:.1} s into project {project}",
        started.elapsed().as_secs_f64()
    );

    let mut dump = match &args.dump {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    let mut results: Vec<(String, Summary, ModeStats)> = Vec::new();
    for mode in &args.modes {
        let (summary, stats) = if passages {
            run_mode_passages(
                &args,
                channel.clone(),
                &project,
                mode,
                &queries,
                &inputs,
                &dataset,
                dump.as_mut(),
            )
            .await?
        } else {
            run_mode(
                &args,
                channel.clone(),
                &project,
                mode,
                &queries,
                &inputs,
                &dataset,
                &doc_of,
                dump.as_mut(),
            )
            .await?
        };
        results.push((mode.clone(), summary, stats));
    }
    if args.feedback_half {
        let version = if passages {
            feed_passages(&args, channel.clone(), &project, &fed, &dataset).await?
        } else {
            let mut client = ToolSearchClient::new(channel.clone());
            feed(&args, &mut client, &project, &fed, &dataset, &doc_of).await?
        };
        eprintln!("ranking model version {version} in force; scoring the held-out half again");
        let (summary, stats) = if passages {
            run_mode_passages(
                &args,
                channel.clone(),
                &project,
                "hybrid",
                &queries,
                &inputs,
                &dataset,
                None,
            )
            .await?
        } else {
            run_mode(
                &args,
                channel.clone(),
                &project,
                "hybrid",
                &queries,
                &inputs,
                &dataset,
                &doc_of,
                None,
            )
            .await?
        };
        results.push(("hybrid+feedback".to_string(), summary, stats));
    }
    if let Some(mut out) = dump {
        use std::io::Write;
        out.flush()?;
    }
    if let Some(degrade) = args.degrade {
        eprintln!("degraded: {degrade}");
    }
    print!("{}", table(&dataset, queries.len(), &results));
    if let Some(path) = &args.out {
        let modes: serde_json::Map<String, serde_json::Value> = results
            .iter()
            .map(|(mode, s, t)| {
                (
                    mode.clone(),
                    json!({
                        "ndcg@10": s.mean.ndcg_at_10, "recall@1": s.mean.recall_at_1, "recall@5": s.mean.recall_at_5,
                        "recall@10": s.mean.recall_at_10, "mrr@10": s.mean.mrr_at_10,
                        "qps": t.qps, "p50_ms": t.p50_ms, "p99_ms": t.p99_ms,
                    }),
                )
            })
            .collect();
        let degrade = args.degrade.map(|d| d.to_string());
        let report = json!({"dataset": dataset.name, "split": args.split, "queries": queries.len(), "degrade": degrade, "feedbackHalf": args.feedback_half, "modes": modes});
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some((stop, handle)) = _server {
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(5), handle).await;
    }
    Ok(())
}

/// Sends the searches of `fed` with the tools judged relevant as their feedback, then waits for
/// the project's ranking model to settle (no new version for a while); returns its version.
async fn feed(
    args: &EvalArgs,
    client: &mut ToolSearchClient<Channel>,
    project: &str,
    fed: &[(&agentsearch_eval::beir::Query, QueryInput)],
    dataset: &Dataset,
    doc_of: &HashMap<String, String>,
) -> anyhow::Result<u64> {
    let mut tool_of: HashMap<&str, &str> = HashMap::new();
    for (tool, doc) in doc_of {
        tool_of.insert(doc.as_str(), tool.as_str());
    }
    let started = Instant::now();
    let mut sent = 0usize;
    for (i, (q, input)) in fed.iter().enumerate() {
        let mut called: Vec<String> = dataset
            .qrels
            .get(&q.id)
            .into_iter()
            .flatten()
            .filter(|(_, grade)| **grade > 0)
            .filter_map(|(doc, _)| tool_of.get(doc.as_str()).map(|t| t.to_string()))
            .collect();
        called.sort();
        called.truncate(50);
        if called.is_empty() {
            continue;
        }
        let request_id = format!("eval-feedback-{i}");
        let mut request = tonic::Request::new(pb::SearchToolsRequest {
            project_id: project.to_string(),
            query: input.text.clone(),
            query_embedding: input.embedding("hybrid"),
            top_k: Some(10),
            mode: Some("hybrid".to_string()),
            ..Default::default()
        });
        authorize(args, request.metadata_mut())?;
        request
            .metadata_mut()
            .insert("x-request-id", request_id.parse().context("request id")?);
        client
            .search_tools(request)
            .await
            .map_err(crate::client::call_error)?;
        let mut request = tonic::Request::new(pb::ToolFeedbackRequest {
            project_id: project.to_string(),
            request_id,
            called_tools: called,
        });
        authorize(args, request.metadata_mut())?;
        client
            .record_tool_feedback(request)
            .await
            .map_err(crate::client::call_error)?;
        sent += 1;
    }
    eprintln!(
        "feedback on {sent} searches sent in {:.1} s; waiting for the refit",
        started.elapsed().as_secs_f64()
    );
    settle(|| {
        let mut client = client.clone();
        let mut request = tonic::Request::new(pb::SearchToolsRequest {
            project_id: project.to_string(),
            query: PROBE.to_string(),
            top_k: Some(1),
            ..Default::default()
        });
        authorize(args, request.metadata_mut())?;
        Ok(async move {
            let response = client.search_tools(request).await;
            let usage = response
                .map_err(crate::client::call_error)?
                .into_inner()
                .usage;
            Ok(usage.unwrap_or_default().ranking_model)
        })
    })
    .await
}

/// The query of the searches that ask which model version ranks.
const PROBE: &str = "feedback evaluation probe";

/// Waits until the project's model has had time to be refit after the last feedback and no new
/// version has appeared for a while; `probe` asks a search which version ranked. Returns the
/// version in force (0: the refit learned nothing that generalises, the default weights stand).
async fn settle<F, Fut>(mut probe: F) -> anyhow::Result<u64>
where
    F: FnMut() -> anyhow::Result<Fut>,
    Fut: std::future::Future<Output = anyhow::Result<u64>>,
{
    let quiet = Duration::from_secs(20);
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut last = (0u64, Instant::now());
    loop {
        let version = probe()?.await?;
        if version != last.0 {
            last = (version, Instant::now());
        } else if last.1.elapsed() >= quiet {
            return Ok(last.0);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the ranking model kept changing for 10 minutes after the feedback"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// [`feed`] for passages: each fed query is searched (50 records) and the judged records among
/// the results are sent as opened; then waits like [`settle`] on the context model.
async fn feed_passages(
    args: &EvalArgs,
    channel: Channel,
    project: &str,
    fed: &[(&agentsearch_eval::beir::Query, QueryInput)],
    dataset: &Dataset,
) -> anyhow::Result<u64> {
    let mut client = ContextSearchClient::new(channel).max_decoding_message_size(64 << 20);
    let started = Instant::now();
    let mut sent = 0usize;
    for (i, (q, input)) in fed.iter().enumerate() {
        let Some(judged) = dataset.qrels.get(&q.id) else {
            continue;
        };
        let request_id = format!("eval-feedback-{i}");
        let mut request = tonic::Request::new(pb::ContextSearchRequest {
            project_id: project.to_string(),
            query: input.text.clone(),
            query_embedding: input.embedding("hybrid"),
            top_k: Some(50),
            segments_per_record: Some(1),
            mode: Some("hybrid".to_string()),
            ..Default::default()
        });
        authorize(args, request.metadata_mut())?;
        request
            .metadata_mut()
            .insert("x-request-id", request_id.parse().context("request id")?);
        let response = client
            .search(request)
            .await
            .map_err(crate::client::call_error)?
            .into_inner();
        let opened: Vec<String> = response
            .results
            .iter()
            .filter(|r| judged.get(document_of(r)).is_some_and(|grade| *grade > 0))
            .map(|r| r.id.clone())
            .take(50)
            .collect();
        if opened.is_empty() {
            continue;
        }
        let mut request = tonic::Request::new(pb::ContextFeedbackRequest {
            project_id: project.to_string(),
            request_id,
            opened_records: opened,
        });
        authorize(args, request.metadata_mut())?;
        client
            .record_context_feedback(request)
            .await
            .map_err(crate::client::call_error)?;
        sent += 1;
    }
    eprintln!(
        "feedback on {sent} searches sent in {:.1} s; waiting for the refit",
        started.elapsed().as_secs_f64()
    );
    settle(|| {
        let mut client = client.clone();
        let mut request = tonic::Request::new(pb::ContextSearchRequest {
            project_id: project.to_string(),
            query: PROBE.to_string(),
            top_k: Some(1),
            ..Default::default()
        });
        authorize(args, request.metadata_mut())?;
        Ok(async move {
            let response = client.search(request).await;
            let usage = response
                .map_err(crate::client::call_error)?
                .into_inner()
                .usage;
            Ok(usage.unwrap_or_default().ranking_model)
        })
    })
    .await
}

/// The dataset document a context result stands for: its record id, without the sync.
fn document_of(r: &pb::ContextResult) -> &str {
    r.id.strip_prefix(&format!("{}.", r.sync_id))
        .unwrap_or(&r.id)
}

/// What one query sends: its text (cut to the API's 1024 characters; the query id when empty)
/// and, when a retriever is degraded, the query embedding computed here.
#[derive(Clone)]
struct QueryInput {
    text: String,
    embedding: Option<pb::QueryEmbedding>,
}

impl QueryInput {
    fn plain(q: &agentsearch_eval::beir::Query) -> Self {
        Self {
            text: request_text(q),
            embedding: None,
        }
    }

    /// The embedding to send in `mode` (the lexical mode needs none).
    fn embedding(&self, mode: &str) -> Option<pb::QueryEmbedding> {
        (mode != "lexical")
            .then(|| self.embedding.clone())
            .flatten()
    }
}

fn request_text(q: &agentsearch_eval::beir::Query) -> String {
    let text: String = q.text.chars().take(1024).collect();
    if text.trim().is_empty() {
        q.id.clone()
    } else {
        text
    }
}

/// Every query's inputs with `degrade` applied: the lexical retriever's text, and the dense
/// retriever's vector (its text embedded here, then rotated when so degraded).
async fn degraded_inputs(
    degrade: agentsearch_eval::degrade::Degrade,
    dataset: &Dataset,
    queries: &[&agentsearch_eval::beir::Query],
    embedder: Option<std::sync::Arc<dyn agentsearch_embed::Embedder>>,
) -> anyhow::Result<Vec<QueryInput>> {
    use agentsearch_eval::degrade::{Retriever, Vocabulary};
    let vocabulary = Vocabulary::from_texts(
        dataset
            .corpus
            .iter()
            .flat_map(|d| [d.title.as_str(), d.text.as_str()]),
    );
    let texts: Vec<String> = queries
        .iter()
        .map(|q| degrade.text(Retriever::Dense, &q.id, &request_text(q), &vocabulary))
        .collect();
    let model = embedder
        .as_ref()
        .map(|e| e.model_id().to_string())
        .unwrap_or_default();
    let started = Instant::now();
    let vectors = match embedder {
        Some(embedder) => {
            tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<Option<Vec<f32>>>> {
                let mut out = Vec::with_capacity(texts.len());
                for chunk in texts.chunks(64) {
                    let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
                    let vectors = embedder.embed(&refs).context("embedding the queries")?;
                    out.extend(vectors.into_iter().map(Some));
                }
                Ok(out)
            })
            .await??
        }
        None => vec![None; queries.len()],
    };
    eprintln!(
        "{} queries embedded in {:.1} s; degrading {degrade} (vocabulary of {} words)",
        vectors.iter().flatten().count(),
        started.elapsed().as_secs_f64(),
        vocabulary.len()
    );
    Ok(queries
        .iter()
        .zip(vectors)
        .map(|(q, vector)| {
            let original = request_text(q);
            // Replacement words may be longer: cut to the API's limit again.
            let text: String = degrade
                .text(Retriever::Lexical, &q.id, &original, &vocabulary)
                .chars()
                .take(1024)
                .collect();
            // A query whose every word was replaced still has words; an empty one keeps its id.
            QueryInput {
                text: if text.trim().is_empty() {
                    q.id.clone()
                } else {
                    text
                },
                embedding: vector.map(|vector| pb::QueryEmbedding {
                    model: model.clone(),
                    vector: degrade.vector(&q.id, &vector),
                }),
            }
        })
        .collect())
}

/// At most `max` items, evenly spaced: positions `floor(i * len / max)` for `i` in `0..max`.
pub fn sample<T>(items: &[T], max: Option<usize>) -> Vec<&T> {
    match max {
        Some(n) if n < items.len() => (0..n).map(|i| &items[i * items.len() / n]).collect(),
        _ => items.iter().collect(),
    }
}

/// Tools from BEIR documents: name = title (made unique with the document id when titles repeat),
/// integration = the document's group (slug), else the name as a slug, category = its category (slug), description = text,
/// parameters = `metadata.parameters`. Returns the tools and tool name -> document id.
pub fn catalog(corpus: &[Doc]) -> (Vec<pb::ToolDefinition>, HashMap<String, String>) {
    let mut title_count: HashMap<String, usize> = HashMap::new();
    for doc in corpus {
        *title_count
            .entry(clean_name(&doc.title, &doc.id))
            .or_default() += 1;
    }
    let mut used = HashSet::new();
    let mut tools = Vec::with_capacity(corpus.len());
    let mut doc_of = HashMap::with_capacity(corpus.len());
    for doc in corpus {
        let base = clean_name(&doc.title, &doc.id);
        let mut name = if title_count[&base] > 1 {
            format!("{base} [{}]", doc.id)
        } else {
            base
        };
        while !used.insert(name.clone()) {
            name.push('_');
        }
        let meta = |key: &str| doc.metadata.get(key).and_then(|v| v.as_str()).map(slug);
        let parameters = doc
            .metadata
            .get("parameters")
            .filter(|p| p.is_object())
            .map(|p| p.to_string())
            .unwrap_or_default();
        doc_of.insert(name.clone(), doc.id.clone());
        // A tool without a toolkit is an app of its own (a MetaTool plugin, a BFCL function): its
        // integration is its name as a slug, so no word is added to its text.
        let integration =
            meta("group").unwrap_or_else(|| slug(&identifier_pieces(&name).join("_")));
        tools.push(pb::ToolDefinition {
            name,
            integration,
            category: meta("category").unwrap_or_default(),
            side_effect: String::new(),
            description: doc
                .text
                .chars()
                .take(agentsearch_common::tool::MAX_DESCRIPTION_CHARS)
                .collect(),
            parameters_json: parameters,
        });
    }
    (tools, doc_of)
}

fn clean_name(title: &str, id: &str) -> String {
    let t: String = title
        .chars()
        .filter(|c| !c.is_control())
        .collect::<String>()
        .trim()
        .to_string();
    let t = if t.is_empty() { id.to_string() } else { t };
    t.chars().take(200).collect::<String>().trim().to_string()
}

/// A lowercase slug: runs of other characters become `_`.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.to_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    let out: String = out.trim_end_matches('_').chars().take(64).collect();
    if out.is_empty() { "eval".into() } else { out }
}

async fn ingest(
    args: &EvalArgs,
    channel: Channel,
    project: &str,
    tools: Vec<pb::ToolDefinition>,
) -> anyhow::Result<()> {
    let mut client = ToolCatalogClient::new(channel).max_encoding_message_size(64 << 20);
    let batches: Vec<pb::UpsertToolsRequest> = tools
        .chunks(256)
        .map(|c| pb::UpsertToolsRequest {
            project_id: project.to_string(),
            tools: c.to_vec(),
        })
        .collect();
    let total = tools.len() as u64;
    let mut request = tonic::Request::new(tokio_stream::iter(batches));
    authorize(args, request.metadata_mut())?;
    let mut acks = client
        .upsert_tools(request)
        .await
        .map_err(crate::client::call_error)?
        .into_inner();
    let bar = indicatif::ProgressBar::new(total);
    while let Some(ack) = acks.message().await.map_err(crate::client::call_error)? {
        bar.set_position(ack.total);
    }
    bar.finish_and_clear();
    Ok(())
}

fn authorize(args: &EvalArgs, metadata: &mut tonic::metadata::MetadataMap) -> anyhow::Result<()> {
    if let Some(token) = &args.token {
        metadata.insert(
            "authorization",
            format!("Bearer {token}").parse().context("token")?,
        );
    }
    Ok(())
}

pub struct ModeStats {
    pub qps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

async fn run_mode(
    args: &EvalArgs,
    channel: Channel,
    project: &str,
    mode: &str,
    queries: &[&agentsearch_eval::beir::Query],
    inputs: &[QueryInput],
    dataset: &Dataset,
    doc_of: &HashMap<String, String>,
    mut dump: Option<&mut std::io::BufWriter<std::fs::File>>,
) -> anyhow::Result<(Summary, ModeStats)> {
    use std::io::Write;
    let mut client = ToolSearchClient::new(channel).max_decoding_message_size(64 << 20);
    let mut rankings: Vec<Vec<String>> = Vec::with_capacity(queries.len());
    let mut latencies: Vec<f64> = Vec::with_capacity(queries.len());
    let bar = indicatif::ProgressBar::new(queries.len() as u64);
    bar.set_message(mode.to_string());
    let started = Instant::now();
    for (q, input) in queries.iter().zip(inputs) {
        let mut request = tonic::Request::new(pb::SearchToolsRequest {
            project_id: project.to_string(),
            query: input.text.clone(),
            query_embedding: input.embedding(mode),
            top_k: Some(if dump.is_some() { 50 } else { 10 }),
            mode: Some(mode.to_string()),
            diagnostics: dump.is_some(),
            ..Default::default()
        });
        authorize(args, request.metadata_mut())?;
        let t = Instant::now();
        let response = client
            .search_tools(request)
            .await
            .map_err(crate::client::call_error)?
            .into_inner();
        latencies.push(t.elapsed().as_secs_f64() * 1e3);
        if let Some(out) = dump.as_mut() {
            let hit = |h: &Option<pb::RetrieverHit>| h.as_ref().map(|h| json!([h.rank, h.score]));
            let hits: Vec<_> = response
                .tools
                .iter()
                .map(|t| {
                    let e = t.explain.clone().unwrap_or_default();
                    json!({"doc": doc_of.get(&t.intent_name), "lexical": hit(&e.lexical), "dense": hit(&e.dense)})
                })
                .collect();
            writeln!(
                out,
                "{}",
                json!({"query": q.id, "mode": mode, "hits": hits})
            )?;
        }
        rankings.push(
            response
                .tools
                .iter()
                .take(10)
                .filter_map(|t| doc_of.get(&t.intent_name).cloned())
                .collect(),
        );
        bar.inc(1);
    }
    let secs = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    Ok(score(queries, &rankings, latencies, secs, dataset))
}

/// Metrics of the rankings and latency figures of a mode's run.
fn score(
    queries: &[&agentsearch_eval::beir::Query],
    rankings: &[Vec<String>],
    mut latencies: Vec<f64>,
    secs: f64,
    dataset: &Dataset,
) -> (Summary, ModeStats) {
    let empty = HashMap::new();
    let summary = metrics::evaluate(
        queries
            .iter()
            .zip(rankings)
            .map(|(q, r)| (&r[..], dataset.qrels.get(&q.id).unwrap_or(&empty))),
    );
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    (
        summary,
        ModeStats {
            qps: queries.len() as f64 / secs,
            p50_ms: pct(0.50),
            p99_ms: pct(0.99),
        },
    )
}

/// The source of the eval sync: any; passages are shared with anyone.
const EVAL_SOURCE: &str = "googledrive";
const EVAL_SYNC_ID: &str = "e7a10000-0000-4000-8000-000000000001";

/// Loads the corpus as records of one sync (title = display name, shared with anyone) through
/// the context ingest path.
async fn ingest_passages(
    args: &EvalArgs,
    channel: Channel,
    project: &str,
    corpus: &[Doc],
) -> anyhow::Result<()> {
    let mut client = ContextSyncClient::new(channel).max_encoding_message_size(64 << 20);
    // One sync per project, with a fixed id: a run into an existing project finds it again.
    let mut request = tonic::Request::new(pb::CreateSyncRequest {
        project_id: project.to_string(),
        source: EVAL_SOURCE.to_string(),
        owner: "eval@example.com".to_string(),
        sync_id: Some(EVAL_SYNC_ID.to_string()),
        fields: Vec::new(),
    });
    authorize(args, request.metadata_mut())?;
    let sync = client
        .create_sync(request)
        .await
        .map_err(crate::client::call_error)?
        .into_inner();
    let records: Vec<pb::RecordInput> = corpus
        .iter()
        .map(|doc| pb::RecordInput {
            id: doc.id.clone(),
            display_name: (!doc.title.trim().is_empty()).then(|| doc.title.clone()),
            text: Some(doc.text.clone()),
            mime: "text/plain".into(),
            modified_at: None,
            acl: Some(pb::Acl {
                anyone: true,
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    let batches: Vec<pb::UpsertRecordsRequest> = records
        .chunks(64)
        .map(|c| pb::UpsertRecordsRequest {
            project_id: project.to_string(),
            sync_id: sync.id.clone(),
            records: c.to_vec(),
            embedding: None,
        })
        .collect();
    let mut request = tonic::Request::new(tokio_stream::iter(batches));
    authorize(args, request.metadata_mut())?;
    let mut acks = client
        .upsert_records(request)
        .await
        .map_err(crate::client::call_error)?
        .into_inner();
    let bar = indicatif::ProgressBar::new(records.len() as u64);
    let (mut done, mut segments) = (0u64, 0u64);
    while let Some(ack) = acks.message().await.map_err(crate::client::call_error)? {
        done += u64::from(ack.upserted + ack.unchanged);
        segments += ack.segments;
        bar.set_position(done);
    }
    bar.finish_and_clear();
    eprintln!("{done} records, {segments} segments");
    Ok(())
}

/// Runs every query through context search in `mode`; a ranking is the record ids of the top 10
/// records (one passage each).
async fn run_mode_passages(
    args: &EvalArgs,
    channel: Channel,
    project: &str,
    mode: &str,
    queries: &[&agentsearch_eval::beir::Query],
    inputs: &[QueryInput],
    dataset: &Dataset,
    mut dump: Option<&mut std::io::BufWriter<std::fs::File>>,
) -> anyhow::Result<(Summary, ModeStats)> {
    use std::io::Write;
    let mut client = ContextSearchClient::new(channel).max_decoding_message_size(64 << 20);
    let mut rankings: Vec<Vec<String>> = Vec::with_capacity(queries.len());
    let mut latencies: Vec<f64> = Vec::with_capacity(queries.len());
    let bar = indicatif::ProgressBar::new(queries.len() as u64);
    let started = Instant::now();
    for (q, input) in queries.iter().zip(inputs) {
        let mut request = tonic::Request::new(pb::ContextSearchRequest {
            project_id: project.to_string(),
            query: input.text.clone(),
            query_embedding: input.embedding(mode),
            top_k: Some(if dump.is_some() { 50 } else { 10 }),
            segments_per_record: Some(1),
            mode: Some(mode.to_string()),
            diagnostics: dump.is_some(),
            ..Default::default()
        });
        authorize(args, request.metadata_mut())?;
        let t = Instant::now();
        let response = client
            .search(request)
            .await
            .map_err(crate::client::call_error)?
            .into_inner();
        latencies.push(t.elapsed().as_secs_f64() * 1e3);
        let ranking: Vec<String> = response
            .results
            .iter()
            .map(|r| document_of(r).to_string())
            .collect();
        if let Some(out) = dump.as_mut() {
            // Each record's rank and raw score (BM25, cosine) from its best passage.
            let hit = |h: &Option<pb::RetrieverHit>| h.as_ref().map(|h| json!([h.rank, h.score]));
            let hits: Vec<_> = ranking
                .iter()
                .zip(&response.results)
                .map(|(doc, r)| {
                    let e = r.explain.unwrap_or_default();
                    json!({"doc": doc, "lexical": hit(&e.lexical), "dense": hit(&e.dense)})
                })
                .collect();
            writeln!(
                out,
                "{}",
                json!({"query": q.id, "mode": mode, "hits": hits})
            )?;
        }
        rankings.push(ranking.into_iter().take(10).collect());
        bar.inc(1);
    }
    let secs = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    Ok(score(queries, &rankings, latencies, secs, dataset))
}

fn table(dataset: &Dataset, queries: usize, results: &[(String, Summary, ModeStats)]) -> String {
    let mut out = format!(
        "\n{} ({} split, {} queries)\n",
        dataset.name, dataset.split, queries
    );
    out.push_str(&format!(
        "{:<8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
        "mode", "nDCG@10", "R@1", "R@5", "R@10", "MRR@10", "q/s", "p50 ms", "p99 ms"
    ));
    for (mode, s, t) in results {
        let m = &s.mean;
        out.push_str(&format!(
            "{:<8} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.1} {:>8.2} {:>8.2}\n",
            mode,
            m.ndcg_at_10,
            m.recall_at_1,
            m.recall_at_5,
            m.recall_at_10,
            m.mrr_at_10,
            t.qps,
            t.p50_ms,
            t.p99_ms
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_evenly() {
        let items: Vec<u32> = (0..10).collect();
        assert_eq!(sample(&items, Some(4)), [&0, &2, &5, &7]);
        assert_eq!(sample(&items, Some(10)).len(), 10);
        assert_eq!(sample(&items, None).len(), 10);
        assert_eq!(sample(&items, Some(0)).len(), 0);
    }

    #[test]
    fn slugs_and_unique_names() {
        assert_eq!(slug("Worldwide Recipes"), "worldwide_recipes");
        assert_eq!(slug("  --  "), "eval");
        let doc = |id: &str, title: &str| Doc {
            id: id.into(),
            title: title.into(),
            text: "t".into(),
            metadata: serde_json::json!({}),
        };
        let (tools, doc_of) = catalog(&[
            doc("1", "Suggestions"),
            doc("2", "Suggestions"),
            doc("3", "Other"),
        ]);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Suggestions [1]", "Suggestions [2]", "Other"]);
        assert_eq!(doc_of["Other"], "3");
    }
}
