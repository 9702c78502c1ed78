//! `agentsearch context ...`: client commands of context search over the router's public gRPC API.

use std::path::PathBuf;

use agentsearch_common::context::SOURCES;
use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::context_search_client::ContextSearchClient;
use agentsearch_proto::v1::context_sync_client::ContextSyncClient;
use anyhow::Context;
use clap::{Args, Subcommand};

use crate::client::{Connection, call_error};

#[derive(Subcommand, Debug)]
pub enum ContextCommand {
    /// Search synced content as an identity and print the best passages.
    Search(ContextSearchArgs),
    /// Print a passage and the passages around it.
    Read(ReadArgs),
    /// List the project's syncs with their record and segment counts.
    Syncs(SyncsArgs),
    /// Create a sync (if needed) and upsert records from a JSONL file, one record per line.
    Load(ContextLoadArgs),
}

/// `--identity a@b.com` applies to every source; `--identity googledrive=U123` to one.
#[derive(Args, Debug, Clone, Default)]
pub struct IdentityArgs {
    /// The account whose access applies: `user@example.com`, or `source=principal` for one
    /// source (repeatable).
    #[arg(long)]
    pub identity: Vec<String>,
}

impl IdentityArgs {
    fn split(&self) -> (Option<String>, Vec<pb::IdentityEntry>) {
        fn per_source(s: &str) -> Option<(&str, &str)> {
            s.split_once('=')
                .filter(|(source, _)| SOURCES.contains(source))
        }
        match self.identity.as_slice() {
            [] => (None, Vec::new()),
            [one] if per_source(one).is_none() => (Some(one.clone()), Vec::new()),
            many => (
                None,
                many.iter()
                    .map(|s| match per_source(s) {
                        Some((source, principal)) => pb::IdentityEntry {
                            principal: principal.to_string(),
                            source: Some(source.to_string()),
                        },
                        None => pb::IdentityEntry {
                            principal: s.clone(),
                            source: None,
                        },
                    })
                    .collect(),
            ),
        }
    }
}

#[derive(Args, Debug)]
pub struct ContextSearchArgs {
    pub query: String,
    #[command(flatten)]
    pub identity: IdentityArgs,
    /// Only these sources (comma separated).
    #[arg(long, value_delimiter = ',')]
    pub sources: Vec<String>,
    /// Only these syncs (comma separated).
    #[arg(long, value_delimiter = ',')]
    pub sync_ids: Vec<String>,
    #[arg(long)]
    pub top_k: Option<u32>,
    #[arg(long)]
    pub segments_per_record: Option<u32>,
    /// hybrid (default), lexical or dense.
    #[arg(long)]
    pub mode: Option<String>,
    #[arg(long)]
    pub diagnostics: bool,
    /// Print the response as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

#[derive(Args, Debug)]
pub struct ReadArgs {
    /// A pointer from a search result.
    pub pointer: String,
    #[arg(long)]
    pub before: Option<u32>,
    #[arg(long)]
    pub after: Option<u32>,
    #[command(flatten)]
    pub identity: IdentityArgs,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

#[derive(Args, Debug)]
pub struct SyncsArgs {
    #[command(flatten)]
    pub connection: Connection,
}

#[derive(Args, Debug)]
pub struct ContextLoadArgs {
    /// JSONL file: `{"id", "displayName", "text", "mime", "modifiedAt", "acl": {...}}` per line.
    pub file: PathBuf,
    /// The sync's source.
    #[arg(long)]
    pub source: String,
    /// The account that connected the source.
    #[arg(long)]
    pub owner: String,
    /// The sync's id (UUID); absent = a new sync.
    #[arg(long)]
    pub sync_id: Option<String>,
    /// Records per batch.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    #[command(flatten)]
    pub connection: Connection,
}

pub async fn run(command: ContextCommand) -> anyhow::Result<()> {
    match command {
        ContextCommand::Search(args) => search(args).await,
        ContextCommand::Read(args) => read(args).await,
        ContextCommand::Syncs(args) => syncs(args).await,
        ContextCommand::Load(args) => load(args).await,
    }
}

async fn search(args: ContextSearchArgs) -> anyhow::Result<()> {
    let mut client = ContextSearchClient::new(args.connection.channel().await?)
        .max_decoding_message_size(32 << 20);
    let (identity, identities) = args.identity.split();
    // A query that is a JSON object is a query JSON document.
    let document = args
        .query
        .trim_start()
        .starts_with('{')
        .then(|| args.query.clone());
    let request = pb::ContextSearchRequest {
        project_id: args.connection.project.clone(),
        query: if document.is_some() {
            String::new()
        } else {
            args.query.clone()
        },
        sources: args.sources.clone(),
        sync_ids: args.sync_ids.clone(),
        top_k: args.top_k,
        segments_per_record: args.segments_per_record,
        rerank: None,
        identity,
        identities,
        mode: args.mode.clone(),
        diagnostics: args.diagnostics,
        query_embedding: None,
        query_json: document,
    };
    let response = client
        .search(args.connection.request(request)?)
        .await
        .map_err(call_error)?
        .into_inner();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&search_json(&response))?);
    } else {
        print!("{}", search_table(&response));
    }
    Ok(())
}

/// The response as the REST API renders it.
pub fn search_json(r: &pb::ContextSearchResponse) -> serde_json::Value {
    let usage = r.usage.clone().unwrap_or_default();
    let dropped = usage.dropped.unwrap_or_default();
    serde_json::json!({
        "results": r.results.iter().map(|x| serde_json::json!({
            "id": x.id,
            "syncId": x.sync_id,
            "source": x.source,
            "relevancy": x.relevancy,
            "rerankScore": x.rerank_score,
            "generation": x.generation,
            "displayName": x.display_name,
            "segments": x.segments.iter().map(|s| serde_json::json!({
                "pointer": s.pointer,
                "chunkId": s.chunk_id,
                "text": s.text,
                "relevancy": s.relevancy,
                "rerankScore": s.rerank_score,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "usage": {
            "returned": usage.returned,
            "segmentsReturned": usage.segments_returned,
            "generation": usage.generation,
            "retrievalMode": usage.retrieval_mode,
            "rerankOutcome": usage.rerank_outcome,
            "dropped": {
                "segmentsBeyondPoolCap": dropped.segments_beyond_pool_cap,
                "segmentsUnjoinable": dropped.segments_unjoinable,
                "segmentsNotSearchable": dropped.segments_not_searchable,
                "recordsBeyondTopK": dropped.records_beyond_top_k,
            },
            "degraded": usage.degraded,
            "underfilled": usage.underfilled,
            "permissionFiltered": usage.permission_filtered,
            "identities": {
                "applied": usage.identities_applied.iter()
                    .map(|(k, v)| (k.clone(), v.principals.clone()))
                    .collect::<std::collections::BTreeMap<_, _>>(),
                "unused": usage.identities_unused.iter()
                    .map(|e| serde_json::json!({"source": e.source, "principal": e.principal}))
                    .collect::<Vec<_>>(),
            },
        },
    })
}

fn snippet(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

pub fn search_table(r: &pb::ContextSearchResponse) -> String {
    let mut out = String::new();
    for (i, x) in r.results.iter().enumerate() {
        out.push_str(&format!(
            "{:>2}. {:.3}  {}  [{} · generation {}]\n",
            i + 1,
            x.relevancy,
            x.display_name.as_deref().unwrap_or("(untitled)"),
            x.source,
            x.generation
        ));
        for s in &x.segments {
            out.push_str(&format!("      {}\n", snippet(&s.text, 160)));
            out.push_str(&format!("      pointer: {}\n", s.pointer));
        }
    }
    if let Some(u) = &r.usage {
        let d = u.dropped.unwrap_or_default();
        out.push_str(&format!(
            "{} records, {} passages · {} · rerank {} · {} records below topK, {} passages beyond the pool{}{}\n",
            u.returned,
            u.segments_returned,
            u.retrieval_mode,
            u.rerank_outcome,
            d.records_beyond_top_k,
            d.segments_beyond_pool_cap,
            if u.underfilled { " · underfilled" } else { "" },
            if d.segments_not_searchable > 0 {
                format!(" · {} passages not searchable", d.segments_not_searchable)
            } else {
                String::new()
            }
        ));
        let sorted: std::collections::BTreeMap<&String, &pb::PrincipalList> =
            u.identities_applied.iter().collect();
        let applied: Vec<String> = sorted
            .iter()
            .map(|(source, p)| format!("{source}: {}", p.principals.join(", ")))
            .collect();
        out.push_str(&format!(
            "identity applied: {}\n",
            if applied.is_empty() {
                "none (only documents shared with anyone are visible)".to_string()
            } else {
                applied.join("; ")
            }
        ));
    }
    out
}

async fn read(args: ReadArgs) -> anyhow::Result<()> {
    let mut client = ContextSearchClient::new(args.connection.channel().await?)
        .max_decoding_message_size(32 << 20);
    let (identity, identities) = args.identity.split();
    let request = pb::ReadSegmentContextRequest {
        project_id: args.connection.project.clone(),
        pointer: args.pointer.clone(),
        before: args.before,
        after: args.after,
        identity,
        identities,
    };
    let r = client
        .read_segment_context(args.connection.request(request)?)
        .await
        .map_err(call_error)?
        .into_inner();
    if args.json {
        let json = serde_json::json!({
            "id": r.id,
            "syncId": r.sync_id,
            "source": r.source,
            "displayName": r.display_name,
            "generation": r.generation,
            "totalSegments": r.total_segments,
            "segments": r.segments.iter().map(|s| serde_json::json!({
                "pointer": s.pointer, "text": s.text, "ordinal": s.ordinal, "anchor": s.anchor,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!(
            "{} [{} · {} segments]",
            r.display_name.as_deref().unwrap_or("(untitled)"),
            r.source,
            r.total_segments
        );
        for s in &r.segments {
            println!(
                "\n{} {}\n{}",
                if s.anchor { ">>" } else { "--" },
                s.ordinal,
                s.text
            );
        }
    }
    Ok(())
}

async fn syncs(args: SyncsArgs) -> anyhow::Result<()> {
    let mut client = ContextSyncClient::new(args.connection.channel().await?);
    let response = client
        .list_syncs(args.connection.request(pb::ListSyncsRequest {
            project_id: args.connection.project.clone(),
        })?)
        .await
        .map_err(call_error)?
        .into_inner();
    for s in response.syncs {
        println!(
            "{}  {:<12} owner {:<24} {:>7} records {:>8} segments  generation {}",
            s.id, s.source, s.owner, s.records, s.segments, s.generation
        );
    }
    Ok(())
}

async fn load(args: ContextLoadArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("line {}", i + 1))?;
        records.push(record_from_json(&v).with_context(|| format!("line {}", i + 1))?);
    }
    let channel = args.connection.channel().await?;
    let mut client = ContextSyncClient::new(channel).max_encoding_message_size(32 << 20);
    let sync = client
        .create_sync(args.connection.request(pb::CreateSyncRequest {
            project_id: args.connection.project.clone(),
            source: args.source.clone(),
            owner: args.owner.clone(),
            sync_id: args.sync_id.clone(),
            fields: Vec::new(),
        })?)
        .await
        .map_err(call_error)?
        .into_inner();
    let messages: Vec<pb::UpsertRecordsRequest> = records
        .chunks(args.batch.max(1))
        .map(|chunk| pb::UpsertRecordsRequest {
            project_id: args.connection.project.clone(),
            sync_id: sync.id.clone(),
            records: chunk.to_vec(),
            embedding: None,
        })
        .collect();
    let mut acks = client
        .upsert_records(args.connection.request(tokio_stream::iter(messages))?)
        .await
        .map_err(call_error)?
        .into_inner();
    let (mut upserted, mut unchanged, mut segments) = (0u64, 0u64, 0u64);
    while let Some(ack) = acks.message().await.map_err(call_error)? {
        upserted += u64::from(ack.upserted);
        unchanged += u64::from(ack.unchanged);
        segments += ack.segments;
    }
    println!(
        "sync {}: {} records acknowledged: {upserted} written ({segments} segments), {unchanged} unchanged",
        sync.id,
        records.len()
    );
    Ok(())
}

/// A JSONL record (REST field names) as a message.
fn record_from_json(v: &serde_json::Value) -> anyhow::Result<pb::RecordInput> {
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let list = |acl: &serde_json::Value, k: &str| -> Vec<String> {
        acl.get(k)
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let id = s("id").context("id is required")?;
    let acl = v.get("acl").context("acl is required")?;
    Ok(pb::RecordInput {
        id,
        display_name: s("displayName"),
        text: s("text"),
        mime: s("mime").unwrap_or_default(),
        modified_at: s("modifiedAt"),
        acl: Some(pb::Acl {
            users: list(acl, "users"),
            groups: list(acl, "groups"),
            domains: list(acl, "domains"),
            anyone: acl.get("anyone").and_then(|x| x.as_bool()).unwrap_or(false),
        }),
        segments: Vec::new(),
        created_at: None,
        author: None,
        url: None,
        path: None,
        metadata_json: None,
    })
}
